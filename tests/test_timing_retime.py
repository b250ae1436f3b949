"""Unsteady repetitions are timed again (autotune/sweep/timing.py, item 5): the protocol of `Timer.measure` with its
GPU chunks replaced by scripted rounds (the GPU path itself runs in tests/gpu/test_worker.py)."""

from __future__ import annotations

import pytest

from autotune.sweep.timing import RETIME_TRIES, UNSTABLE_SPREAD, Timer, TimingPlan, spread, steadiest, unsteady

# a validation's PyTorch softmax at 51,528 x 1,010 (results/tables5_h100/softmax, seed 3703), then a steady round
NOISY = [0.282, 0.236, 0.187, 0.177, 0.174, 0.217, 0.229, 0.260, 0.199, 0.176]
STEADY = [0.150, 0.151, 0.150, 0.149, 0.150, 0.151, 0.150, 0.150, 0.152, 0.150]


class Scripted(Timer):
    """Timer.measure with run_chunk answering from a script of rounds (one round per call of `reps`)."""

    def __init__(self, rounds: list[list[float]]) -> None:  # no CuPy: nothing is launched
        self.rounds = list(rounds)
        self.calls: list[tuple[int, int]] = []

    def run_chunk(self, launch, first, n, est_ms):  # noqa: ANN001 - the parent's signature
        self.calls.append((first, n))
        head, self.rounds[0] = self.rounds[0][:n], self.rounds[0][n:]
        if not self.rounds[0]:
            self.rounds.pop(0)
        return head


def test_spread_and_the_unsteady_rule():
    assert spread(NOISY) > 1.3 and spread(STEADY) < 1.02
    assert spread([]) == spread([1.0]) == 1.0
    plan = TimingPlan(reps=10)
    assert unsteady(NOISY, plan) and not unsteady(STEADY, plan)
    assert not unsteady(NOISY[:3], plan)  # an incomplete round (stopped early) is not judged
    assert steadiest([NOISY, STEADY, NOISY]) == STEADY
    assert UNSTABLE_SPREAD == pytest.approx(1.10)


def test_an_unsteady_round_is_timed_again_and_the_steadiest_kept():
    t = Scripted([NOISY, STEADY])
    times, stopped = t.measure(lambda r: None, est_ms=0.2, plan=TimingPlan(reps=10))
    assert times == STEADY and not stopped
    assert [n for _, n in t.calls] == [10, 10]
    assert t.calls[1][0] == t.calls[0][0] + 10  # the second round goes on rotating the data copies


def test_retiming_ends_after_retime_tries():
    rounds = [NOISY, [x * 1.01 for x in NOISY], [0.30, 0.15] * 5, NOISY]
    t = Scripted(rounds)
    times, _ = t.measure(lambda r: None, est_ms=0.2, plan=TimingPlan(reps=10))
    assert len(t.calls) == 1 + RETIME_TRIES
    assert times == min(rounds[: 1 + RETIME_TRIES], key=spread)


def test_a_steady_round_is_not_timed_again_nor_an_early_stop():
    t = Scripted([STEADY])
    assert t.measure(lambda r: None, est_ms=0.2, plan=TimingPlan(reps=10)) == (STEADY, False)
    assert len(t.calls) == 1
    # stopped early (5 first repetitions far beyond the bound): never timed again, however they spread
    slow = [9.0, 5.0, 7.0, 6.0, 8.0]
    t = Scripted([slow])
    plan = TimingPlan(reps=10, best_ms=1.0, tol=0.1)
    assert t.measure(lambda r: None, est_ms=1.0, plan=plan) == (slow, True)
