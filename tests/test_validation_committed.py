"""The committed H100 validations of the examples replay: `autotune validate` on the recorded validation database (the
replay backend) reproduces the committed validation.csv byte for byte, and the figures the README and PROVENANCE
quote come out of it."""

from pathlib import Path

import pandas as pd
import pytest
from tests.support.committed import plain_bytes
from tests.support.harness import invoke_cli

ROOT = Path(__file__).resolve().parents[1]
# The validations of the two workload lookups (results/fp16_tables_h100, results/small_tables_h100/validation; scripts/
# h100_tables.sh validate-*) replayed here until their databases were retired with the lookups (docs/results.md says
# where they can still be read); the selection-model tables' validations replay in test_validate_committed_models.py.


def _unzip(src: Path, dst: Path) -> Path:
    dst.write_bytes(plain_bytes(src))
    return dst


# the examples' validations (examples/NAME/results/validation/, made on a GPU by `autotune validate
# examples/NAME/results/dispatch.json --db examples/NAME/results/NAME_h100.sqlite.xz --random 200 --seed 1
# --pool-bk 3 --space examples/NAME/space.yaml --out examples/NAME/results/validation`)
@pytest.mark.parametrize("name", ["softmax", "stencil", "transpose"])
def test_example_validation_replays_byte_for_byte(name, tmp_path):
    d = ROOT / "examples" / name / "results"
    if not (d / "validation" / "validation.sqlite.xz").is_file():
        pytest.skip(f"no committed validation for examples/{name}")
    recorded = _unzip(d / "validation" / "validation.sqlite.xz", tmp_path / "recorded.sqlite")
    out = tmp_path / "out"
    r = invoke_cli(  # in this process: the replay is what is tested, not a process's start
        "validate",
        str(d / "dispatch.json"),
        "--db",
        str(d / f"{name}_h100.sqlite.xz"),
        "--random",
        "200",
        "--seed",
        "1",
        "--pool-bk",
        "3",
        "--space",
        str(ROOT / "examples" / name / "space.yaml"),
        "--out",
        str(out),
        "--replay",
        f"sqlite:///{recorded}",
        "--validation-db",
        f"sqlite:///{tmp_path / 'v.sqlite'}",
        "--quiet",
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert (out / "validation.csv").read_bytes() == (d / "validation" / "validation.csv").read_bytes()
    frame = pd.read_csv(out / "validation.csv")
    assert len(frame) == 200 and frame["table_ms"].notna().all() and frame["baseline_ms"].notna().all()
