"""Without Dask's `distributed`, --gpus/--scheduler stop with one clear error naming the extra to install."""

from __future__ import annotations

import sys

import pytest

from autotune.errors import UserError
from autotune.sweep.backends.dask_backend import require_distributed


def test_missing_distributed_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.raises(UserError) as err:
        require_distributed()
    assert "distributed" in err.value.message and "autotune[dask]" in (err.value.hint or "")
