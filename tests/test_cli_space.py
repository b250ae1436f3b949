"""The explorer's command line: output, errors (file, line, expression, what to do), exit codes."""

import json
import subprocess
import sys
import textwrap

import pytest

GOOD = textwrap.dedent("""\
    name: good
    description: a small test space
    parameters:
      DIM_X: [8, 16, 32]
      DIM_Y: {start: 4, stop: 16, step: 4}
      BLK_K: {pow2: [8, 32]}
    derived:
      threads: DIM_X * DIM_Y
      smem: threads * BLK_K * elem_bytes
    hard:
      - {name: max_threads, expr: "threads <= max_threads_per_block", reason: device limit}
      - {name: smem, expr: "smem <= 16384", reason: keep small}
    soft:
      - {name: warp_multiple, expr: "threads % 64 == 0", reason: full warps}
    """)


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "autotune", *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture
def good(tmp_path):
    p = tmp_path / "good.yaml"
    p.write_text(GOOD)
    return p


def test_show_prints_funnel(good):
    r = run("space", "show", str(good), "--device", "H100")
    assert r.returncode == 0, r.stderr
    for word in ("raw combinations", "max_threads", "smem", "warp_multiple", "pruned most", "value counts"):
        assert word in r.stdout


def test_list_where_sample_and_soft_switches(good):
    all_rows = run("space", "list", str(good), "--limit", "0", "--no-soft", "--device", "H100")
    assert all_rows.returncode == 0, all_rows.stderr
    some = run("space", "list", str(good), "--where", "DIM_X == 16", "--limit", "0", "--device", "H100")
    assert "DIM_X" in some.stdout and " 8 " not in some.stdout.split("\n")[1]
    s1 = run("space", "list", str(good), "--sample", "3", "--seed", "7", "--device", "H100")
    s2 = run("space", "list", str(good), "--sample", "3", "--seed", "7", "--device", "H100")
    assert s1.stdout == s2.stdout and "3 shown" in s1.stdout and "a sample of 3" in s1.stdout
    off = run("space", "show", str(good), "--soft-off", "warp_multiple", "--device", "H100")
    assert "switched off: warp_multiple" in off.stdout


def test_export_json_and_csv(good, tmp_path):
    r = run("space", "export", str(good), "--format", "json", "--device", "H100")
    data = json.loads(r.stdout)
    assert data["space"] == "good" and data["instances"]
    first = data["instances"][0]
    assert {"id", "DIM_X", "DIM_Y", "BLK_K", "threads", "smem"} <= set(first)
    out = tmp_path / "x.csv"
    r = run("space", "export", str(good), "-f", "csv", "-o", str(out), "--device", "H100")
    assert r.returncode == 0 and out.read_text().startswith("id,DIM_X,DIM_Y,BLK_K,threads,smem")
    assert len(out.read_text().splitlines()) == len(data["instances"]) + 1


BROKEN = [
    ("bad yaml", "name: x\nparameters:\n  A: [1, 2\n", "started at line 3", ":4"),
    (
        "unknown name",
        GOOD.replace("threads <= max_threads_per_block", "thread <= max_threads_per_block"),
        "unknown name 'thread'",
        ":11",
    ),
    (
        "hostile",
        GOOD.replace("threads <= max_threads_per_block", "__import__('os').system('touch /tmp/pwned')"),
        "not allowed",
        ":11",
    ),
    ("attribute", GOOD.replace("threads <= max_threads_per_block", "threads.real <= 4"), "attribute access", ":11"),
    ("division by zero", GOOD.replace("smem <= 16384", "16384 / (DIM_X - 8) > 1"), "division by zero", ":12"),
    ("type error", GOOD.replace("DIM_X: [8, 16, 32]", "DIM_X: [a, b]"), "type error", ""),
    ("no reason", GOOD.replace(", reason: keep small", ""), "has no `reason`", ":12"),
    ("cycle", GOOD.replace("threads: DIM_X * DIM_Y", "threads: smem * 2"), "cycle", ""),
    ("problem size in constraint", GOOD.replace("smem <= 16384", "smem <= M"), "only in kernel", ":12"),
    ("bad range", GOOD.replace("{start: 4, stop: 16, step: 4}", "{start: 4, stop: 16, step: 0}"), "range", ":5"),
    ("unknown section", GOOD + "extra: 1\n", "unknown section 'extra'", ":15"),
    ("duplicate key", GOOD.replace("  BLK_K:", "  DIM_X: [1]\n  BLK_K:"), "duplicate key", ":6"),
]


@pytest.mark.parametrize("label, text, message, line", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_files_give_clear_errors(tmp_path, label, text, message, line):
    p = tmp_path / "broken.yaml"
    p.write_text(text)
    r = run("space", "show", str(p), "--device", "H100")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert message in r.stderr, r.stderr
    assert f"{p}{line}" in r.stderr
    assert not (tmp_path / "pwned").exists()


def test_missing_file_and_unknown_device(good):
    r = run("space", "show", "no_such_space")
    assert r.returncode == 2 and "no space named 'no_such_space'" in r.stderr
    r = run("space", "show", str(good), "--device", "Z80")
    assert r.returncode == 2 and "unknown device profile 'Z80'" in r.stderr and "H100" in r.stderr


def test_bad_where_expression(good):
    r = run("space", "list", str(good), "--where", "DIM_X.bit_length() > 2")
    assert r.returncode == 2 and "attribute access" in r.stderr and "Traceback" not in r.stderr


def test_help_explains():
    r = run("space", "show", "--help")
    assert r.returncode == 0 and "--soft-off" in r.stdout and "--device" in r.stdout


def test_explorer_imports_no_heavy_package():
    """The explorer must start fast and work without a GPU: no CuPy, Optuna, SQLAlchemy or SciPy at start."""
    code = (
        "import sys, autotune.cli.main, autotune.cli.space; "
        "print([m for m in ('cupy', 'optuna', 'sqlalchemy', 'scipy', 'matplotlib') if m in sys.modules])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
