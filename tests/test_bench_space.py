"""scripts/bench_space.py: the translation to Kernel Tuner restrictions, and the synthetic 10^9 space."""

import ast
import itertools
import math

import pytest
import yaml

from autotune.devices import get_device
from autotune.space.generator import generate
from autotune.space.orders import binding_order, param_deps
from autotune.space.spec import load_space
from tests.support.harness import load_script


bench = load_script("bench_space")
H100 = get_device("H100")

# every construct of the expression language, through derived quantities and device limits
BROAD = {
    "name": "broad",
    "parameters": {"BX": [1, 2, 4, 8, 16, 32], "BY": [1, 2, 3, 4, 8], "BK": [1, 2, 3, 4, 8, 16], "MODE": ["a", "b"]},
    "derived": {
        "threads": "BX * BY",
        "tiles": "ceil(100 / BX)",
        "lg": "log2(BX)",
        "half": "floor(BK / 2)",
        "limit": "max_threads_per_block // 16",
        "mem": "tiles * BY * elem_bytes",
    },
    "hard": [
        {"name": "threads", "expr": "threads <= limit", "reason": "t"},
        {"name": "mem", "expr": "mem <= 6e-7 * mem_bandwidth / sm_count", "reason": "t"},
        {"name": "chain", "expr": "2 <= threads * BK <= 256", "reason": "t"},
        {"name": "mode", "expr": "MODE == 'a' or half >= 1", "reason": "t"},
    ],
    "soft": [
        {"name": "cond", "expr": "(BX if BY > 2 else 2 * BX) >= 4", "reason": "t"},
        {"name": "inlist", "expr": "lg + half in [1, 2, 3, 5]", "reason": "t"},
        {"name": "minmax", "expr": "abs(min(BX, 8) - max(BY, 2)) != 1", "reason": "t"},
        {"name": "neg", "expr": "not (BX % BY == 0 and BK > 8)", "reason": "t"},
    ],
}

# only constructs that python-constraint2's string parser takes as they are
KT_FRIENDLY = {
    "name": "friendly",
    "parameters": {"BX": [1, 2, 4, 8, 16, 32], "BY": [1, 2, 3, 4, 8], "BK": [1, 2, 3, 4, 8, 16]},
    "derived": {"threads": "BX * BY", "smem": "(BX + BY) * BK * elem_bytes"},
    "hard": [
        {"name": "threads", "expr": "threads <= max_threads_per_block // 16", "reason": "t"},
        {"name": "smem", "expr": "smem <= 1024", "reason": "t"},
        {"name": "divides", "expr": "BK % BY == 0 or BY == 3", "reason": "t"},
        {"name": "chain", "expr": "4 <= threads * BK <= 256", "reason": "t"},
    ],
    "soft": [
        {"name": "ceil", "expr": "ceil(64 / threads) <= 4", "reason": "t"},
        {"name": "rejected_by_kt_parser", "expr": "min(16, 64 // BX) >= BY", "reason": "t"},
    ],
}


def _space(tmp_path, data):
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_space(path)


def _brute_force(space, texts):
    codes = [compile(t, "<t>", "eval") for t in texts]
    names = space.param_names
    return sum(
        all(eval(c, {"__builtins__": bench.SAFE_BUILTINS}, dict(zip(names, combo, strict=True))) for c in codes)
        for combo in itertools.product(*(p.values for p in space.parameters))
    )


def test_translation_is_plain_python_over_parameters_only(tmp_path):
    space = _space(tmp_path, BROAD)
    kt = bench.translate(space, H100, "fp64")
    for text in kt.hard + kt.soft:
        names = {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}
        assert names <= set(space.param_names) | {"min", "max", "abs", "__import__"}, text
        assert "e-" not in text and "e+" not in text  # Kernel Tuner's regex parser misreads exponents
    assert "threads" not in " ".join(kt.hard) and "1024 // 16" not in kt.hard[0]  # inlined and folded
    assert kt.hard[0] == "BX * BY <= 64"


def test_translation_gives_our_counts_exhaustively(tmp_path):
    space = _space(tmp_path, BROAD)
    kt = bench.translate(space, H100, "fp64")
    assert _brute_force(space, kt.hard) == generate(space, H100, "fp64", soft=False).count
    assert _brute_force(space, kt.hard + kt.soft) == generate(space, H100, "fp64", soft=True).count
    check = bench.check_translation(space, kt, H100, "fp64", samples=300)
    assert check["disagree_hard"] == 0 and check["disagree_all"] == 0


def test_translation_depends_on_precision(tmp_path):
    space = _space(tmp_path, KT_FRIENDLY)
    assert bench.translate(space, H100, "fp64").hard[1] != bench.translate(space, H100, "fp32").hard[1]


def test_kernel_tuner_counts_equal_ours(tmp_path):
    pytest.importorskip("kernel_tuner")
    space = _space(tmp_path, KT_FRIENDLY)
    kt = bench.translate(space, H100, "fp32")
    ours_hard = generate(space, H100, "fp32", soft=False).count
    assert 0 < ours_hard < math.prod(len(p.values) for p in space.parameters)
    assert bench.kt_build(kt, soft=False).size == ours_hard
    # the min(...) restriction is rejected by the string parser and goes through the function fallback
    rejected = bench.kt_unparsable(list(kt.hard + kt.soft), kt.tune_params)
    assert rejected == [kt.soft[-1]]
    assert bench.kt_build(kt, soft=True, as_functions=tuple(rejected)).size == generate(space, H100, "fp32").count


def test_best_of_batches_fast_builds():
    calls = []
    seconds, count, times = bench.best_of(3, lambda: calls.append(1) or 7, min_measure=0.001)
    assert count == 7 and len(times) == 3 and seconds == min(times) and len(calls) > 4


def test_synthetic_space_definition():
    space = load_space(bench.SYNTHETIC)
    assert math.prod(len(p.values) for p in space.parameters) == 10**9
    # constraints bind progressively: they become checkable at several different binding steps
    order = binding_order(space, space.hard)
    steps = {max(order.index(p) for p in param_deps(space, c.expr.names)) for c in space.hard}
    assert len(steps) >= 5 and min(steps) <= 2
    # a few percent survive the hard constraints (Monte Carlo over raw combinations, fixed seed)
    kt = bench.translate(space, H100, "fp64")
    check = bench.check_translation(space, kt, H100, "fp64", samples=3000, seed=1)
    assert check["disagree_hard"] == 0 and check["disagree_all"] == 0
    assert 0.01 <= check["pass_hard"] / check["samples"] <= 0.06
