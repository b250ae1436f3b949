"""Hostile Kernel Tuner caches (issue 53): a 400-digit time, 100,000-deep nesting, a string `compile_time`, NaN and
Infinity, integers too large for a float, a missing key, values of the wrong type. Through the real command line
(`autotune import kerneltuner`, a subprocess) and through `tune_kernel(simulation_mode=True)`, each is one line
that names the file (and the entry) or, for a time that is not one, the entry stored as a failure with its reason:
never a traceback, a RecursionError, or an entry taken as ok. Before: OverflowError, RecursionError and ValueError
tracebacks, a TypeError at the end of tune_kernel for a string compile_time, a dict kept as a device name.

Also: `import kerneltuner` stores the true median (and p20, p80, min, max) of an entry's `times` as its median, and
Kernel Tuner's `time` (their mean) as it was, in the measurement's log (an export writes it back; a replay returns
it as Kernel Tuner's `time`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autotune.errors import UserError
from autotune.kernel_tuner import tune_kernel
from tests.support.harness import invoke_cli, run_cli

HEAD = (
    '{\n"device_name": "NVIDIA H100",\n"kernel_name": "vector_add",\n"problem_size": [100],\n'
    '"tune_params_keys": ["block_size_x"],\n"tune_params": {"block_size_x": [32, 64]},\n"objective": "time",\n'
    '"cache": {\n'
)
GOOD = '"64": {"block_size_x": 64, "time": 1.0, "times": [1.0, 1.0], "compile_time": 10.0}'


def entry(body: str) -> str:
    return HEAD + '"32": {"block_size_x": 32, ' + body + "},\n" + GOOD + "}\n}"


DEEP = "[" * 100_000 + "]" * 100_000
# name -> (cache text, how it ends: "refused" (one error line naming the file, and this text), or "failure" (the
# entry "32" stored as a failure whose reason holds this text))
CASES: dict[str, tuple[str, str, str]] = {
    "a 400-digit time": (entry('"time": ' + "9" * 400), "failure", "time is 99999"),
    "a 5,000-digit time": (entry('"time": ' + "9" * 5000), "refused", "cache entry '32'"),
    "100,000-deep nesting in an entry": (entry('"time": 1.0, "x": ' + DEEP), "refused", "cache entry '32'"),
    "100,000-deep nesting in the header": (
        HEAD.replace('"objective": "time"', '"objective": ' + DEEP) + GOOD + "}\n}",
        "refused",
        "the header value of 'objective'",
    ),
    "20-deep nesting": (entry('"time": 1.0, "x": ' + "[" * 20 + "]" * 20), "refused", "nested more than 16"),
    "a string compile_time": (entry('"time": 1.0, "compile_time": "abc"'), "refused", "entry '32': compile_time"),
    "a negative compile_time": (entry('"time": 1.0, "compile_time": -1e300'), "refused", "compile_time is -1e+300"),
    "an infinite benchmark_time": (entry('"time": 1.0, "benchmark_time": Infinity'), "refused", "benchmark_time"),
    "a NaN time": (entry('"time": NaN, "times": [1.0]'), "failure", "time is NaN"),
    "an infinite time": (entry('"time": Infinity'), "failure", "time is Infinity"),
    "a time of 1e308": (entry('"time": 1e308'), "failure", "time is 1e+308"),
    "a string time": (entry('"time": "1.0"'), "failure", 'time is "1.0"'),
    "no time": (entry('"times": [1.0]'), "failure", "no time"),
    "NaN among times": (entry('"time": 1.0, "times": [1.0, NaN]'), "failure", "times holds NaN"),
    "a 300-digit integer among times": (
        entry('"time": 1.0, "times": [' + "1" * 300 + "]"),
        "failure",
        "times holds 1.11",
    ),
    "a 400-digit integer among times": (entry('"time": 1.0, "times": [' + "1" * 400 + "]"), "failure", "times is"),
    "times not a list": (entry('"time": 1.0, "times": "abc"'), "failure", 'times is "abc"'),
    "a parameter of 400 digits": (
        HEAD + '"32": {"block_size_x": ' + "1" * 400 + ', "time": 1.0}\n}\n}',
        "refused",
        "block_size_x is 1111",
    ),
    "a parameter that is an object": (
        HEAD + '"32": {"block_size_x": {"a": 1}, "time": 1.0}\n}\n}',
        "refused",
        'block_size_x is {"a": 1}',
    ),
    "a device name that is an object": (
        HEAD.replace('"NVIDIA H100"', '{"a": 1}') + GOOD + "}\n}",
        "refused",
        '"device_name" is not a string',
    ),
    "tune_params values not a list": (
        HEAD.replace('{"block_size_x": [32, 64]}', '{"block_size_x": 5}') + GOOD + "}\n}",
        "refused",
        "is not a list of values",
    ),
    "a missing parameter": (HEAD + '"32": {"time": 1.0},\n' + GOOD + "}\n}", "ok", ""),  # read back from its key
    "a missing parameter and a bad key": (HEAD + '"a,b": {"time": 1.0}\n}\n}', "refused", "cache entry 'a,b' lacks"),
    "a missing header key": (
        HEAD.replace('"kernel_name": "vector_add",\n', "") + GOOD + "}\n}",
        "refused",
        "kernel_name",
    ),
    "an error marker that is a number": (entry('"__error__": 5'), "ok", ""),  # a failure, as Kernel Tuner's reader
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_command_line_says_one_line_naming_the_file(name: str, tmp_path: Path) -> None:
    text, ends, says = CASES[name]
    cache = tmp_path / "hostile.json"
    cache.write_text(text)
    r = invoke_cli("import", "kerneltuner", str(cache), "--db", str(tmp_path / "db.sqlite"), cwd=tmp_path)
    out = r.stdout + r.stderr
    assert "Traceback" not in out and "RecursionError" not in out, out[-3000:]
    if ends == "refused":
        assert r.returncode == 2, out[-3000:]
        errors = [line for line in out.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "hostile.json" in errors[0] and says in errors[0], out
        assert "what to do:" in out
        assert not (tmp_path / "db.sqlite").exists()  # nothing half-imported
    else:
        assert r.returncode == 0, out[-3000:]
        if ends == "failure":
            lines = [line for line in out.splitlines() if line.strip().startswith("32:")]
            assert len(lines) == 1 and says in lines[0], out
            assert "imported 2 configurations (1 failed)" in " ".join(out.split()), out


VECTOR_ADD = "__global__ void vector_add(float *c, float *a, float *b, int n) {}\n"


def _simulate(cache: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    a = np.ones(100, np.float32)
    return tune_kernel(
        "vector_add",
        VECTOR_ADD,
        100,
        [np.zeros_like(a), a, a, np.int32(100)],
        {"block_size_x": [32, 64]},
        cache=str(cache),
        simulation_mode=True,
        quiet=True,
    )


@pytest.mark.parametrize("name", [n for n in CASES if n != "a missing header key"])
def test_simulation_mode_says_one_line_or_replays_the_entry_as_a_failure(name: str, tmp_path: Path) -> None:
    text, ends, says = CASES[name]
    cache = tmp_path / "hostile.json"
    cache.write_text(text)
    if ends == "refused":
        with pytest.raises(UserError) as err:
            _simulate(cache)
        assert "hostile.json" in str(err.value) and says in str(err.value), str(err.value)
        return
    results, env = _simulate(cache)
    by_size = {r["block_size_x"]: r for r in results}
    assert by_size[64]["time"] == 1.0 and env["best_config"]["block_size_x"] in (32, 64)
    if ends == "failure":
        assert "__error__" in by_size[32] and "time" not in by_size[32]
        assert env["best_config"]["block_size_x"] == 64
    assert all(isinstance(r["compile_time"], (int, float)) for r in results)
    assert isinstance(env["total_compile_time"], float)


def test_a_cache_nested_100000_deep_in_a_fresh_interpreter_is_one_line(tmp_path: Path) -> None:
    """The deep cache through `tune_kernel` in a fresh process (the interpreter's own stack, no pytest frames)."""
    cache = tmp_path / "deep.json"
    cache.write_text(CASES["100,000-deep nesting in an entry"][0])
    script = tmp_path / "replay.py"
    script.write_text(
        "import sys, numpy as np\nfrom autotune.kernel_tuner import tune_kernel\nfrom autotune.errors import UserError\n"
        "a = np.ones(100, np.float32)\ntry:\n"
        f"    tune_kernel('vector_add', {VECTOR_ADD!r}, 100, [a, a, a, np.int32(100)], {{'block_size_x': [32, 64]}},"
        " cache=sys.argv[1], simulation_mode=True, quiet=True)\n"
        "except UserError as exc:\n    print('USERERROR', str(exc).splitlines()[0])\n"
    )
    import subprocess
    import sys

    from tests.support.harness import ROOT

    r = subprocess.run(
        [sys.executable, str(script), str(cache)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "AUTOTUNE_PREWARM": "0"},
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "USERERROR" in r.stdout and "deep.json" in r.stdout and "nested more than" in r.stdout, r.stdout


def test_the_median_is_the_median_of_times_and_kernel_tuners_mean_is_kept(tmp_path: Path) -> None:
    """Kernel Tuner's `time` is the mean of `times`: stored as the median before (2.8 here, where the median of the
    repetitions is 1.0). Now the median and spread are those of `times`; the mean goes back out unchanged."""
    from autotune.interop.kerneltuner import read_cache

    cache = tmp_path / "c.json"
    cache.write_text(
        HEAD
        + '"32": {"block_size_x": 32, "time": 2.8, "times": [1.0, 1.0, 1.0, 1.0, 10.0], "compile_time": 5.0},\n'
        + '"64": {"block_size_x": 64, "time": 2.0}}\n}'
    )
    db = tmp_path / "kt.sqlite"
    r = run_cli("import", "kerneltuner", str(cache), "--db", str(db), cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    import sqlite3

    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT i.params, m.median_ms, m.p80_ms, m.min_ms, m.max_ms, m.log FROM measurements m "
            "JOIN instances i ON i.id = m.instance_id"
        ).fetchall()
    by_size = {json.loads(r[0])["block_size_x"]: r[1:] for r in rows}
    assert by_size[32][:4] == (1.0, pytest.approx(2.8), 1.0, 10.0) and json.loads(by_size[32][4])["time"] == 2.8
    assert by_size[64][0] == 2.0  # no times: Kernel Tuner's time is the only figure
    out = tmp_path / "out.json"
    r = run_cli("export", "kerneltuner", str(db), "--space", "vector_add", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert {x.params["block_size_x"]: x.time_ms for x in read_cache(out).records} == {32: 2.8, 64: 2.0}
    results, _ = _simulate(cache)  # a replay returns Kernel Tuner's own time, as Kernel Tuner's simulation mode
    assert {x["block_size_x"]: x["time"] for x in results} == {32: 2.8, 64: 2.0}
