"""tune_kernel's simulation mode checks the cache against the call as Kernel Tuner 1.5 does, before anything is
written (issue 53): a cache of another kernel, problem size or tunable parameters is refused in Kernel Tuner's
words (a ValueError, as Kernel Tuner's); configurations the call's tune_params values or restrictions exclude are
never returned nor chosen as best_config; a cache lacking a parameter the call tunes is one line, not a KeyError.
A reused space_dir holds nothing of an earlier call (its answers, its results); a metric that fails keeps the
results where they are. Before: another kernel's cache was replayed, a wrong problem_size returned [] silently,
excluded configurations were returned and picked as best, a KeyError, an earlier call's answers and results."""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autotune.errors import UserError
from autotune.interop.kerneltuner import KTCache, KTRecord, write_cache
from autotune.kernel_tuner import tune_kernel

VECTOR_ADD = """
__global__ void vector_add(float *c, float *a, float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i<n) c[i] = a[i] + b[i];
}
"""
N = 10_000
A = np.ones(N, np.float32)
ARGS = [np.zeros_like(A), A, A, np.int32(N)]
SIZES = [128, 256, 512]


def _cache(path: Path, times: dict[int, float] | None = None, failed: tuple[int, ...] = (512,), **header: Any) -> Path:
    """A vector_add cache: 128 at 0.5 ms, 256 at 0.3 ms (the fastest), 512 (`failed`) failed to compile."""
    times = times or {128: 0.5, 256: 0.3}
    records = tuple(
        KTRecord({"block_size_x": b}, "ok", t, (t, t, t), {"compile_time": 10.0}) for b, t in times.items()
    ) + tuple(KTRecord({"block_size_x": b}, "compile_error", None, (), {"compile_time": 1.0}) for b in failed)
    fields: dict[str, Any] = dict(
        device_name="NVIDIA H100 80GB HBM3",
        kernel_name="vector_add",
        problem_size=N,
        tune_params_keys=("block_size_x",),
        tune_params={"block_size_x": SIZES},
        objective="time",
    )
    fields.update(header)
    write_cache(KTCache(**fields, records=records), path)
    return path


def _replay(cache: Path, **kw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    call: dict[str, Any] = dict(
        kernel_name="vector_add",
        kernel_source=VECTOR_ADD,
        problem_size=N,
        arguments=ARGS,
        tune_params={"block_size_x": SIZES},
        cache=str(cache),
        simulation_mode=True,
        quiet=True,
    )
    call.update(kw)
    return tune_kernel(**call)


@pytest.mark.parametrize(
    "kw, message",
    [
        (
            {"kernel_name": "vector_add2", "kernel_source": VECTOR_ADD.replace("vector_add", "vector_add2")},
            r"Cannot load cache which contains results for different kernel \(cache: vector_add, actual: vector_add2\)",
        ),
        (
            {"problem_size": 20_000},
            r"Cannot load cache which contains results for different problem_size, cache: 10000, requested: 20000",
        ),
        ({"problem_size": (N, 2)}, "different problem_size"),
        (
            {"tune_params": {"block_size_x": SIZES, "tile": [1, 2]}},
            "Cannot load cache which contains results obtained with different tunable parameters",
        ),
    ],
)
def test_a_cache_that_is_not_the_calls_is_refused_in_kernel_tuners_words(
    kw: dict[str, Any], message: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=message) as err:
        _replay(_cache(tmp_path / "c.json"), space_dir=tmp_path / "space", **kw)
    assert isinstance(err.value, UserError) and "c.json" in str(err.value) and err.value.hint
    assert not (tmp_path / "space").exists()  # refused before the folder is written


def test_a_cache_lacking_a_parameter_the_call_tunes_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="different tunable parameters") as err:
        _replay(_cache(tmp_path / "c.json"), tune_params={"tile": [1], "block_size_x": SIZES})
    assert "the cache lacks tile" in str(err.value.hint)


def test_parameters_in_another_order_are_refused_as_kernel_tuner_refuses_them(tmp_path: Path) -> None:
    cache = tmp_path / "c.json"
    records = (KTRecord({"block_size_x": 128, "tile": 1}, "ok", 0.5, (0.5,)),)
    tune_params = {"block_size_x": SIZES, "tile": [1]}
    write_cache(KTCache("H100", "vector_add", N, ("block_size_x", "tile"), tune_params, "time", records), cache)
    with pytest.raises(ValueError, match="All tunable parameters are present, but the order is wrong"):
        _replay(cache, tune_params={"tile": [1], "block_size_x": SIZES})


def test_the_problem_size_may_be_written_as_kernel_tuner_allows(tmp_path: Path) -> None:
    results, _ = _replay(_cache(tmp_path / "c.json", problem_size=(N,)))
    assert len(results) == 3  # [10000] in the cache, 10000 in the call: the same, as numpy compares them
    results, _ = _replay(_cache(tmp_path / "d.json", problem_size=(N,)), problem_size=[N])
    assert len(results) == 3


@pytest.mark.parametrize(
    "kw",
    [{"tune_params": {"block_size_x": [128, 512]}}, {"restrictions": ["block_size_x != 256"]}],
    ids=["tune_params values", "restrictions"],
)
def test_configurations_the_call_excludes_are_never_returned_nor_best(kw: dict[str, Any], tmp_path: Path) -> None:
    results, env = _replay(_cache(tmp_path / "c.json"), space_dir=tmp_path / "space", **kw)
    assert sorted(r["block_size_x"] for r in results) == [128, 512]
    assert env["best_config"]["block_size_x"] == 128 and env["best_config"]["time"] == 0.5
    with sqlite3.connect(tmp_path / "space" / "results.sqlite") as con:  # not even stored
        stored = [row[0] for row in con.execute("SELECT params FROM instances")]
    assert not any('"block_size_x": 256' in p or '"block_size_x":256' in p for p in stored), stored


def test_a_reused_space_dir_holds_nothing_of_the_earlier_call(tmp_path: Path) -> None:
    space = tmp_path / "space"
    _, env = _replay(_cache(tmp_path / "a.json"), space_dir=space, answer=[A + A, None, None, None])
    assert (space / "expected.npz").is_file() and env["autotune"]["space_dir"] == str(space.resolve())
    results, _ = _replay(_cache(tmp_path / "b.json", {128: 0.9, 256: 0.8}), space_dir=space)
    assert {r["block_size_x"]: r.get("time") for r in results} == {128: 0.9, 256: 0.8, 512: None}  # b's, not a's
    assert not (space / "expected.npz").exists()  # this call has no answer: nothing checks against a's
    spec = importlib.util.spec_from_file_location("kt_check_reused", space / "kt_check.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    assert module.check({"c": np.zeros(N, np.float32)}, None, {}, {}) is True


def test_a_space_dir_of_other_files_is_refused_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "results.sqlite").write_text("precious")
    with pytest.raises(UserError, match="holds files that are not an earlier tune_kernel call's"):
        _replay(_cache(tmp_path / "c.json"), space_dir=tmp_path / "mine")
    assert (tmp_path / "mine" / "results.sqlite").read_text() == "precious"


def test_a_failing_metric_keeps_the_results_where_they_are(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="a metric failed on the results: ZeroDivisionError") as err:
        _replay(_cache(tmp_path / "c.json"), metrics={"bad": lambda r: 1 / 0})
    database = str(err.value.hint).rsplit("kept in ", 1)[1].removeprefix("sqlite:///")
    with sqlite3.connect(database) as con:
        assert con.execute("SELECT count(*) FROM measurements").fetchone()[0] == 3


def test_metrics_are_computed_on_the_replay(tmp_path: Path) -> None:
    results, env = _replay(
        _cache(tmp_path / "c.json"), metrics={"GB/s": "3 * 4 * 10000 / 1e6 / time", "x2": lambda r: 2 * r["time"]}
    )
    ok = {r["block_size_x"]: r for r in results if "time" in r}
    assert ok[256]["GB/s"] == pytest.approx(0.12 / 0.3) and ok[128]["x2"] == 1.0


def test_a_tampered_log_in_the_database_gives_no_number_that_is_not_one(tmp_path: Path) -> None:
    """A database is data: Kernel Tuner's fields a replay returns from a measurement's log are taken only where they
    are numbers of ms (a string compile_time there was a TypeError at the end of tune_kernel)."""
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    cache = _cache(tmp_path / "c.json")
    _replay(cache, database=db)
    with sqlite3.connect(tmp_path / "db.sqlite") as con:
        con.execute("""UPDATE measurements SET log = '{"compile_time": "abc", "time": 1e999, "timestamp": 5}'""")
    results, env = _replay(cache, database=db)  # the same cache again: recorded already, read back from the log
    assert all(isinstance(r["compile_time"], float) for r in results) and isinstance(env["total_compile_time"], float)
    ok = {r["block_size_x"]: r["time"] for r in results if "time" in r}
    assert ok == {128: 0.5, 256: 0.3}  # the medians of times: the log's infinite time is not taken


KT_SCRIPT = """
import json, sys, warnings
import numpy as np
from kernel_tuner import tune_kernel
warnings.simplefilter("ignore")
src = sys.argv[2]
a = np.ones(10000, np.float32)
out = []
for kw in json.loads(sys.argv[3]):
    call = dict(kernel_name="vector_add", kernel_source=src, problem_size=10000, arguments=[a, a, a, np.int32(10000)],
                tune_params={"block_size_x": [128, 256, 512]}, cache=sys.argv[1], simulation_mode=True, quiet=True)
    call.update(kw)
    try:
        res, env = tune_kernel(**call)
        out.append(["ok", sorted(r["block_size_x"] for r in res), env["best_config"]["block_size_x"]])
    except Exception as e:
        out.append([type(e).__name__, str(e.args[0])])
print(json.dumps(out))
"""


def test_refusals_and_replays_match_kernel_tuner_15(tmp_path: Path) -> None:
    """The same calls in simulation mode under Kernel Tuner 1.5 itself (where AUTOTUNE_KT_PYTHON or .venv-kt has it:
    its simulation mode needs no GPU): the same refusals (type and words) and the same configurations and best."""
    import json
    import subprocess

    from tests.support.harness import KT_PYTHON

    if not KT_PYTHON.is_file():
        pytest.skip("needs Kernel Tuner 1.5 (AUTOTUNE_KT_PYTHON or .venv-kt)")
    cases: list[dict[str, Any]] = [
        {},
        {"problem_size": 20_000},
        {"tune_params": {"block_size_x": [128, 512]}},
        {"restrictions": ["block_size_x != 256"]},
        {"parallel": True},
        {"metrics": ["GFLOP/s"]},
        {"block_size_names": "bx"},
        {"objectives": ["time"]},
    ]
    cache = _cache(tmp_path / "c.json")
    script = tmp_path / "kt.py"
    script.write_text(KT_SCRIPT)
    out = subprocess.run(
        [str(KT_PYTHON), str(script), str(cache), VECTOR_ADD, json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    for kw, kt in zip(cases, theirs, strict=True):
        try:
            results, env = _replay(cache, **kw)
        except UserError as exc:
            assert kt[0] == type(exc).__mro__[2].__name__ == "ValueError", (kw, kt, exc)
            assert exc.message.removeprefix("tune_kernel: ")[:45] == kt[1][:45], (kw, kt, exc.message)
            continue
        assert kt[0] == "ok", (kw, kt)
        assert sorted(r["block_size_x"] for r in results) == kt[1] and env["best_config"]["block_size_x"] == kt[2]


@pytest.mark.parametrize(
    "options, runs", [(None, 2), ({"fraction": 0.25}, 5), ({"fraction": 0.25, "max_fevals": 7}, 7)]
)
def test_random_sample_runs_a_fraction_of_the_space_as_kernel_tuner(
    tmp_path: Path, options: dict[str, Any] | None, runs: int
) -> None:
    """random_sample sets out to measure ceil(fraction x the configurations) (fraction 0.1 when absent), or
    max_fevals where given, as Kernel Tuner 1.5's random_sample, and returns those (Kernel Tuner's simulation mode
    returns the configurations its strategy evaluated); before, every configuration, `fraction` ignored, and then
    every cached configuration returned whatever the strategy measured."""
    sizes = list(range(32, 672, 32))  # 20 configurations, each measured
    cache = _cache(tmp_path / "c.json", {b: 1 + b / 1000 for b in sizes}, (), tune_params={"block_size_x": sizes})
    results, env = _replay(
        cache, tune_params={"block_size_x": sizes}, strategy="random_sample", strategy_options=options
    )
    assert env["autotune"]["planned"] == runs  # the configurations the sweep set out to measure
    assert len(results) == runs and len({r["block_size_x"] for r in results}) == runs
    again, _ = _replay(cache, tune_params={"block_size_x": sizes}, strategy="random_sample", strategy_options=options)
    assert [r["block_size_x"] for r in again] == [r["block_size_x"] for r in results]  # seeded: the same sample
