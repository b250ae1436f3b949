"""The generator returns exactly the brute-force filter of the full product, with an exact funnel."""

import itertools
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotune.space import generator
from autotune.devices import get_device
from autotune.space.generator import generate
from autotune.space.instance import instance_id
from autotune.space.spec import load_space

# constraint templates over two parameter names: (expression text, python oracle)
TEMPLATES = [
    ("{a} % {b} == 0", lambda a, b, c: a % b == 0),
    ("{a} * {b} <= {c}", lambda a, b, c: a * b <= c),
    ("{a} + {b} > {c}", lambda a, b, c: a + b > c),
    ("{a} >= {b} or {a} == {c}", lambda a, b, c: a >= b or a == c),
    ("max({a}, {b}) - min({a}, {b}) < {c}", lambda a, b, c: max(a, b) - min(a, b) < c),
    ("({a} * {b}) // 4 != {c} % 5", lambda a, b, c: (a * b) // 4 != c % 5),
    ("{a} in [1, 2, 4, 8]", lambda a, b, c: a in (1, 2, 4, 8)),
]


@st.composite
def spaces(draw):
    n = draw(st.integers(2, 4))
    names = [f"P{i}" for i in range(n)]
    domains = {p: sorted(draw(st.sets(st.integers(1, 12), min_size=1, max_size=5))) for p in names}

    def constraint():
        t = draw(st.sampled_from(range(len(TEMPLATES))))
        a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        return t, a, b, draw(st.integers(1, 40))

    hard = [constraint() for _ in range(draw(st.integers(0, 4)))]
    soft = [constraint() for _ in range(draw(st.integers(0, 2)))]
    return domains, hard, soft


def _yaml(domains, hard, soft):
    def items(cs, kind):
        return [
            {"name": f"{kind}{i}", "expr": TEMPLATES[t][0].format(a=a, b=b, c=c), "reason": "test"}
            for i, (t, a, b, c) in enumerate(cs)
        ]

    return {
        "name": "rand",
        "parameters": domains,
        "derived": {"twice": "2 * P0"},
        "hard": items(hard, "h") + [{"name": "uses_derived", "expr": "twice >= 2", "reason": "test"}],
        "soft": items(soft, "s"),
    }


def _oracle(cs):
    return [lambda row, t=t, a=a, b=b, c=c: TEMPLATES[t][1](row[a], row[b], c) for t, a, b, c in cs]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spaces(), st.sampled_from([3, 64, 1 << 21]))
def test_generator_equals_brute_force(case, chunk):
    domains, hard, soft = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rand.yaml"
        path.write_text(yaml.safe_dump(_yaml(domains, hard, soft), sort_keys=False))
        space = load_space(path)
        old = generator.CHUNK
        generator.CHUNK = chunk
        try:
            g = generate(space, get_device("H100"), "fp64")
        finally:
            generator.CHUNK = old
    names = list(domains)
    rows = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*domains.values())]
    hard_fns = dict(zip([f"h{i}" for i in range(len(hard))], _oracle(hard), strict=True))
    hard_fns["uses_derived"] = lambda row: 2 * row["P0"] >= 2
    soft_fns = dict(zip([f"s{i}" for i in range(len(soft))], _oracle(soft), strict=True))
    # funnel: each step's count equals filtering the full product by every step up to it
    assert g.funnel[0].remaining == len(rows)
    alive = rows
    for step in g.funnel[1:]:
        fn = hard_fns[step.name] if step.kind == "hard" else soft_fns[step.name]
        alive = [r for r in alive if fn(r)]
        assert step.remaining == len(alive), step
    assert [s.name for s in g.funnel if s.kind == "hard"] != [] and len(g.funnel) == 1 + len(hard_fns) + len(soft_fns)
    got = sorted(tuple(int(x) for x in row) for row in g.frame[names].itertuples(index=False))
    want = sorted(tuple(r[n] for n in names) for r in alive)
    assert got == want
    assert len(set(g.ids())) == g.count


def _write(tmp_path, text):
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return load_space(p)


BASE = """
name: t
parameters:
  X: [1, 2, 4, 8]
  Y: {start: 2, stop: 8, step: 2}
  Z: {pow2: [1, 16]}
derived:
  xy: X * Y
hard:
  - {name: fit, expr: "xy * Z <= 64", reason: r}
soft:
  - {name: big, expr: "xy >= 8", reason: r}
  - {name: even, expr: "Z % 2 == 0", reason: r}
"""


def test_soft_switches(tmp_path):
    space = _write(tmp_path, BASE)
    dev = get_device("H100")
    full = generate(space, dev, "fp64")
    none = generate(space, dev, "fp64", soft=False)
    one = generate(space, dev, "fp64", soft_off=["even"])
    assert full.count < one.count < none.count
    assert [f.name for f in one.funnel if f.kind == "soft"] == ["big"]
    assert none.count == generate(space, dev, "fp64", soft_off=["big", "even"]).count
    with pytest.raises(Exception, match="no soft constraint named 'nope'"):
        generate(space, dev, "fp64", soft_off=["nope"])


def test_ranges_and_pow2(tmp_path):
    space = _write(tmp_path, BASE)
    assert [p.values for p in space.parameters] == [(1, 2, 4, 8), (2, 4, 6, 8), (1, 2, 4, 8, 16)]


def test_instance_ids_are_stable_and_order_independent(tmp_path):
    a = generate(_write(tmp_path, BASE), get_device("H100"), "fp64")
    reordered = BASE.replace("  X: [1, 2, 4, 8]\n", "").replace(
        "  Z: {pow2: [1, 16]}\n", "  Z: {pow2: [1, 16]}\n  X: [8, 4, 2, 1]\n"
    )
    b = generate(_write(tmp_path, reordered), get_device("H100"), "fp64")
    assert sorted(a.ids()) == sorted(b.ids())
    # identical across runs and machines: a fixed value computed from the definition
    assert instance_id("t", {"X": 1, "Y": 2, "Z": 4}) == instance_id("t", {"Z": 4, "Y": 2, "X": 1})
    assert instance_id("t", {"X": 1, "Y": 2, "Z": 4}) != instance_id("u", {"X": 1, "Y": 2, "Z": 4})


def test_device_limits_and_precision_change_the_space(tmp_path):
    text = """
name: d
parameters:
  BLK: {pow2: [16, 256]}
derived:
  smem: BLK * BLK * elem_bytes
hard:
  - {name: smem, expr: "smem <= max_smem_per_block", reason: r}
"""
    space = _write(tmp_path, text)
    h100 = generate(space, get_device("H100"), "fp64").count
    k40 = generate(space, get_device("K40c"), "fp64").count
    k40_half = generate(space, get_device("K40c"), "fp16").count
    assert (h100, k40, k40_half) == (4, 3, 4)  # 128^2*8 B fits 227 KB; 64^2*8 fits 48 KB; 128^2*2 fits 48 KB


def test_generator_never_builds_the_full_product(tmp_path, monkeypatch):
    """10 parameters of 10 values (10^10 raw) with early constraints build quickly and small."""
    params = "\n".join(f"  P{i}: {{start: 1, stop: 10}}" for i in range(10))
    hard = "\n".join(f'  - {{name: c{i}, expr: "P{i} + P{i + 1} <= 3", reason: r}}' for i in range(9))
    space = _write(tmp_path, f"name: big\nparameters:\n{params}\nhard:\n{hard}\n")
    calls = []
    real = np.repeat
    monkeypatch.setattr(generator.np, "repeat", lambda a, r: calls.append(len(a) * r) or real(a, r))
    g = generate(space, get_device("H100"), "fp64")
    assert g.funnel[0].remaining == 10**10
    brute = sum(
        1 for combo in itertools.product(range(1, 4), repeat=10) if all(combo[i] + combo[i + 1] <= 3 for i in range(9))
    )
    assert g.count == brute
    assert max(calls) <= generator.CHUNK * 10
