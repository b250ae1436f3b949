"""pytest imports test files by basename (tests/ and tests/gpu/ are not packages): two test files of one name make
the whole run fail at collection, as CI's did once. Every test file's name is unique."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


def test_test_file_names_are_unique() -> None:
    names = Counter(p.name for p in Path(__file__).parent.rglob("test_*.py"))
    assert not [n for n, c in names.items() if c > 1]
