"""The `hybrid` strategy (surrogate + local search on the valid set, issue 33): the conformance suite, that it
beats random search on a space with structure, that it learns where instances fail, and its proposal cost on a
space of 10^6 valid instances."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from autotune.space.instance import Instance
from autotune.sweep.strategies import make_strategy
from autotune.sweep.strategies.hybrid import HybridModel, HybridOptions, HybridSearch, codes_of
from autotune.sweep.strategies.validset import ValidSet
from autotune.testing.strategies import POINT, StrategyConformance
from autotune.vocab import Measurement, Status


class TestHybrid(StrategyConformance):
    factory = HybridSearch


class TestHybridOneAtATimeByName(StrategyConformance):
    @staticmethod
    def factory(instances: Sequence[Instance], budget: int | None, seed: int):  # type: ignore[no-untyped-def]
        return make_strategy("hybrid", instances, budget, seed, batch=1, startup=3)


def bowl_space() -> tuple[list[Instance], dict[str, float | None]]:
    """1,600 instances of 4 parameters; time a sum of per-parameter bowls plus an interaction of A and B; the
    instances with C == 7 and D >= 6 fail (a region, not scattered)."""
    insts, times = [], {}
    for a in range(10):
        for b in range(10):
            for c in range(8):
                for d in range(2, 10, 4):
                    for e in (1, 2):
                        inst = Instance.of("bowl", {"A": a, "B": 1 << b, "C": c, "D": d, "E": e})
                        insts.append(inst)
                        fail = c == 7 and d >= 6
                        times[inst.id] = (
                            None
                            if fail
                            else 1.0
                            + 0.03 * (a - 6) ** 2
                            + 0.02 * (b - 3) ** 2
                            + 0.05 * (c - 5) ** 2
                            + 0.01 * d
                            + 0.04 * e
                            + 0.02 * abs(a - b)
                        )
    return insts, times


def result(inst: Instance, times: dict[str, float | None]) -> list[Measurement]:
    t = times[inst.id]
    if t is None:
        return [Measurement(inst.id, POINT, Status.COMPILE_ERROR, error="made up")]
    return [Measurement(inst.id, POINT, Status.OK, median_ms=t, reps=3, times_ms=[t] * 3)]


def run(name: str, insts: list[Instance], times: dict[str, float | None], budget: int, seed: int) -> list[Instance]:
    s = make_strategy(name, insts, budget, seed)
    asked: list[Instance] = []
    while batch := s.ask(64):
        for inst in batch:
            s.tell(inst, result(inst, times))
        asked += batch
    return asked


def test_hybrid_beats_random_search_on_a_structured_space() -> None:
    insts, times = bowl_space()
    best = min(t for t in times.values() if t is not None)
    gap = {name: [] for name in ("hybrid", "random")}
    for seed in range(5):
        for name in gap:
            got = [times[i.id] for i in run(name, insts, times, 80, seed)]
            gap[name].append(min(t for t in got if t is not None) / best - 1)
    assert np.median(gap["hybrid"]) < 0.02, gap
    assert np.median(gap["hybrid"]) < np.median(gap["random"]), gap


def test_hybrid_learns_where_instances_fail() -> None:
    insts, times = bowl_space()
    share = sum(t is None for t in times.values()) / len(times)
    failed = [sum(times[i.id] is None for i in run("hybrid", insts, times, 160, seed)) for seed in range(5)]
    # random search fails on share * 160 = 10 on average; the optimism of the global move retries a little-seen
    # pair of values now and then (seeds 0-9: 1-5 failures, mean 2.2; without optimism 0-3, mean 1.9)
    assert np.mean(failed) < share * 160 / 2, (failed, share)


def test_hybrid_proposes_only_free_valid_rows_and_counts_failures_as_slow() -> None:
    codes = np.array([[i % 4, (i // 4) % 5, i // 20] for i in range(60)], dtype=np.int16)
    m = HybridModel(codes, seed=3, options=HybridOptions(startup=2))
    free = np.ones(len(codes), bool)
    for _ in range(60):
        r = m.propose(free)
        assert free[r]
        free[r] = False
        m.observe(r, None if codes[r, 2] == 2 else math.log(1 + codes[r, 0]))
    m.fit()
    pred = m.predict(np.arange(60))
    assert pred[codes[:, 2] == 2].mean() > pred[codes[:, 2] != 2].mean()  # the failed region predicts slow


PROPOSAL_COST = """
import time

import numpy as np

from autotune.sweep.strategies.hybrid import HybridModel

rng = np.random.default_rng(0)
cards = (8, 8, 6, 5, 4, 4, 3, 3, 2, 2)  # 1,105,920 combinations, 10^6 of them valid
grid = np.indices(cards).reshape(len(cards), -1).T
codes = grid[np.sort(rng.permutation(len(grid))[:1_000_000])].astype(np.int16)
n = len(codes)
m = HybridModel(codes, seed=0)
free = np.ones(n, bool)
y = rng.random(n)
spent = []
for _ in range(120):
    t = time.process_time()  # CPU time: the figure of an idle core on a shared host
    r = m.propose(free)
    spent.append(time.process_time() - t)
    free[r] = False
    m.observe(r, float(y[r]))
print(float(np.median(spent[100:])))  # the median: a page fault or a neighbour's burst is one proposal's, not the model's
"""


def test_proposal_cost_on_a_million_valid_instances() -> None:
    """The issue's bound: a proposal under 50 ms of CPU on 10^6 valid instances (here the model on the space's
    codes after 100 results; `bench_search.py --proposal-cost` measures the whole strategy, Optuna included). One
    core's CPU time: in a process whose BLAS runs one thread, since idle BLAS threads spin and their CPU time, which
    grows with the host's cores, is no work of the model's (here 34 ms with two threads against 23 ms with one, on
    the same proposals; a loaded CI host reached 50.0 ms with them, and 50.7 ms as a mean with one thread: the
    median of the 20 proposals after the 100th is the figure)."""
    import os
    import subprocess
    import sys

    one = {k: "1" for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    done = subprocess.run(
        [sys.executable, "-c", PROPOSAL_COST], env={**os.environ, **one}, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    per = float(done.stdout.split()[-1])
    assert per < 0.05, f"{per * 1e3:.1f} ms per proposal"


def test_codes_follow_the_value_order() -> None:
    insts = [Instance.of("s", {"X": x, "M": m}) for x in (64, 8, 512) for m in ("b", "a")]
    codes = codes_of(ValidSet(insts))
    assert codes[:, 0].tolist() == [1, 1, 0, 0, 2, 2]  # 8 < 64 < 512
    assert sorted(set(codes[:, 1].tolist())) == [0, 1]


def test_hybrid_study_in_sqlite_resumes_without_repeating(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import optuna

    from autotune.testing.strategies import made_up_instances, made_up_results

    url = f"sqlite:///{tmp_path / 'studies.sqlite'}"
    insts = made_up_instances(40)
    first = HybridSearch(insts, 12, 0, study=(url, "h"), batch=3, startup=2)
    asked = [i for _ in range(2) for i in first.ask(3) if not first.tell(i, made_up_results(i))]
    again = HybridSearch(insts, 12, 0, study=(url, "h"), batch=3, startup=2)
    assert len(again._hybrid.model.rows) == 0  # learned at the first proposal, from the loaded study
    rest = [i for _ in range(5) for i in again.ask(3) if not again.tell(i, made_up_results(i))]
    assert len(again._hybrid.model.rows) == 12 and not set(rest) & set(asked) and len(rest) == 6
    assert len(optuna.load_study(storage=url, study_name="h").trials) == 12


class TestHybridBasins(StrategyConformance):
    @staticmethod
    def factory(instances: Sequence[Instance], budget: int | None, seed: int):  # type: ignore[no-untyped-def]
        return HybridSearch(instances, budget, seed, basins=3, startup=2)


def test_a_stalled_search_breeds_crossovers_of_its_best_instances() -> None:
    """`stall`/`cross`: once the best has not improved for `stall` results, local moves become crossovers of the
    fastest instances (each parameter from one parent, one mutated), where a local move around the best would
    change one parameter only; off (stall 0) the proposals are the default's, draw for draw."""
    codes = np.indices((4, 4, 4, 4)).reshape(4, -1).T.astype(np.int16)
    a, b = 0, len(codes) - 1  # parents (0, 0, 0, 0) and (3, 3, 3, 3)

    def proposals(**opts: float) -> list[np.ndarray]:
        m = HybridModel(codes, seed=5, options=HybridOptions(startup=0, explore=0.0, glob=0.0, **opts))  # type: ignore[arg-type]
        m.observe(a, 0.0)
        m.observe(b, 1.0)  # not better: one result without a better best
        free = np.ones(len(codes), bool)
        free[[a, b]] = False
        out = []
        for _ in range(12):  # as many as the best has neighbours: a local search stays around it
            r = m.propose(free)
            assert free[r]
            free[r] = False
            out.append(codes[r])
        return out

    local = proposals()
    assert all(int((c != 0).sum()) == 1 for c in local)  # the best's neighbours
    assert [c.tolist() for c in proposals(stall=0, cross=1.0)] == [c.tolist() for c in local]
    bred = proposals(stall=1, cross=1.0)
    # a parent's value in all but the mutated parameter, and one more where that child was taken (the nearest free)
    assert all(int(((c != 0) & (c != 3)).sum()) <= 2 for c in bred)
    assert sum(int((c == 3).sum()) >= 2 for c in bred) >= 4  # mixes of both parents, which no local move makes


def test_clip_caps_the_slow_instances_the_surrogate_learns() -> None:
    """`clip` (off by default): log times above that quantile of the verified ones are learned as the quantile, so
    a region of one fast instance among many very slow ones is no longer predicted slower than a uniformly
    mediocre region (a convolution's fastest instances sit in a region whose median is 3-100x slower)."""
    codes = np.indices((2, 10)).reshape(2, -1).T.astype(np.int32)  # region A: first code 0; region B: 1
    times = [1.0 if (a, b) == (0, 0) else 1000.0 if a == 0 else 3.0 for a, b in codes]

    def region_gap(**opts: float) -> float:
        m = HybridModel(codes, seed=0, options=HybridOptions(**opts))  # type: ignore[arg-type]
        for row, t in enumerate(times):
            m.observe(row, math.log(t))
        m.fit()
        assert m.w is not None
        return float(m.w[m.main_off[0]] - m.w[m.main_off[0] + 1])  # region A's main effect less region B's

    assert region_gap() > 1.0  # the mean: region A is far slower
    assert region_gap(clip=0.5) < 0.0  # capped at the median: region A's fast instance makes it the better one


def test_a_stalled_search_restarts_a_descent_from_elsewhere() -> None:
    """`restart`/`patience`: once the best has not improved for `restart` results, a local search starts again
    from a random free row and descends (each proposal a neighbour of the restart's best so far) until `patience`
    of its results in a row found nothing better; then the default moves go on around the overall best. Off
    (restart 0), the proposals are the default's, draw for draw."""
    codes = np.indices((4, 4, 4, 4)).reshape(4, -1).T.astype(np.int32)
    a, b = 0, 1  # (0, 0, 0, 0): the best, alone; (0, 0, 0, 1): slow

    def log_time(row: int) -> float:  # a bowl around (3, 3, 3, 3), all of it slower than the best
        return 1.0 + 0.5 * float(np.abs(codes[row] - 3).sum()) + 1e-4 * row  # (no ties)

    def run(**opts: int) -> tuple[list[int], HybridModel]:
        m = HybridModel(codes, seed=3, options=HybridOptions(startup=0, explore=0.0, glob=0.0, **opts))  # type: ignore[arg-type]
        m.observe(a, 0.0)
        m.observe(b, 9.0)
        free = np.ones(len(codes), bool)
        free[[a, b]] = False
        out = []
        for _ in range(30):
            r = m.propose(free)
            assert free[r]
            free[r] = False
            m.observe(r, log_time(r))
            out.append(r)
        return out, m

    def near(r: int, rows: list[int]) -> bool:
        return any(int((codes[r] != codes[q]).sum()) <= 1 for q in rows)

    default, _ = run()
    assert run(restart=0, patience=3)[0] == default
    assert all(near(r, [a]) for r in default[:11])  # the best's neighbours first
    got, m = run(restart=1, patience=6)
    assert not near(got[0], [a])  # the restart's start, away from the best
    ended = m._optima[0]
    k = got.index(ended)
    phase = got[: k + 7]  # the restart: its start, its descent to its best, `patience` (6) results without better
    for i in range(1, len(phase)):
        best_so_far = min(phase[:i], key=log_time)
        assert near(phase[i], [best_so_far])  # each a neighbour of the restart's best so far
    assert ended == min(phase, key=log_time) and log_time(ended) < log_time(got[0]) - 1.0  # it descended
    assert m._phase is not None or len(m._optima) > 1 or near(got[len(phase)], [a])  # then: around the best


def test_a_restart_in_a_batch_starts_once_and_descends_on_results() -> None:
    """Asked for a batch (several proposals before any result is told), a restart proposes its start once, and
    the rest of the batch are the default moves; only its own rows count as the restart's results."""
    codes = np.indices((4, 4, 4, 4)).reshape(4, -1).T.astype(np.int32)
    m = HybridModel(codes, seed=3, options=HybridOptions(startup=0, explore=0.0, glob=0.0, restart=1, patience=6))
    m.observe(0, 0.0)
    m.observe(1, 9.0)
    free = np.ones(len(codes), bool)
    free[[0, 1]] = False
    batch = []
    for _ in range(4):
        r = m.propose(free)
        free[r] = False
        batch.append(r)
    start, rest = batch[0], batch[1:]
    assert int((codes[start] != 0).sum()) >= 2 and m._asked == {start}  # the start: away from the best, once
    assert all(int((codes[r] != 0).sum()) == 1 for r in rest)  # the others: the best's neighbours (default)
    for r in rest:
        m.observe(r, 5.0)
    assert m._phase == []  # the default moves' results are not the restart's
    m.observe(start, 4.0)
    assert m._phase == [(4.0, start)]
    nxt = m.propose(free)
    assert int((codes[nxt] != codes[start]).sum()) == 1  # then it descends from its start
