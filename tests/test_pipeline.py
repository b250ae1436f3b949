"""The GPU backend's pipeline (`GpuBackend.pipeline`): the next measure request goes to the GPU worker before the
answer to the one it runs is read, so the worker never waits for the parent's database writes. The real
`GpuBackend` runs against the fake worker that speaks the real pipe protocol (tests/support/fake_gpu_worker.py);
compiles are stubbed (tests/test_faults.py). Faults with a request queued behind the failing one: tests/test_faults.py
(the queued request is sent again to the new worker and measured once)."""

from __future__ import annotations

import functools
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

from autotune.store.store import Store
from autotune.sweep.backends import local
from autotune.sweep.config import parse_config
from autotune.sweep.runner import run_sweep
from autotune.vocab import Measurement
from tests.support.fake_gpu_worker import fake_gpu_main
from tests.test_faults import PAIRS, Quiet, StubCompiles, gpu_config, measured_rows, rows, stub_compile, use_compiles


class Logged(StubCompiles):
    """Logs ("send", instance, point) for every measure request written to the pipe and ("take", ...) for every
    measurement the runner takes from `run`."""

    def __init__(self, events: list[tuple[str, str, str]], options: local.LocalOptions) -> None:
        super().__init__(options)
        self.events = events

    def _send(self, message: tuple) -> int | None:
        if message[0] == "measure":
            self.events.append(("send", message[1].instance_id, message[1].variant.point.key))
        return super()._send(message)

    def run_tasks(self, tasks: Sequence[Any]) -> Iterator[Measurement]:
        inner = super().run_tasks(tasks)
        try:
            for m in inner:
                self.events.append(("take", m.instance_id, m.point.key))
                yield m
        finally:
            inner.close()


def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, faults: dict[int, str], pipeline: bool, cfg: Any = None):
    blob = tmp_path / "kernel.cubin"
    blob.write_bytes(b"\0" * 16)
    trace = tmp_path / "trace.txt"
    monkeypatch.setattr(local, "gpu_main", functools.partial(fake_gpu_main, faults=faults, trace=str(trace)))
    use_compiles(monkeypatch, functools.partial(stub_compile, blob))
    events: list[tuple[str, str, str]] = []
    cfg = cfg or gpu_config(tmp_path)
    backend = Logged(
        events, local.LocalOptions(compile_workers=2, timeout_s=5.0, cache_dir=tmp_path / "cache", pipeline=pipeline)
    )
    try:
        with Store.open(cfg.database) as store:
            summary = run_sweep(cfg, store, backend, Quiet())
    finally:
        backend.close()
    lines = trace.read_text().splitlines() if trace.exists() else []  # none where the budget ran out first
    measures = [line.split() for line in lines if line.split()[1] == "measure"]
    return summary, events, measures


@pytest.mark.parametrize("pipeline", [True, False])
def test_the_next_request_is_sent_before_the_answer_is_taken_and_every_answer_is_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pipeline: bool
) -> None:
    summary, events, measures = sweep(tmp_path, monkeypatch, {}, pipeline)
    assert summary.status == "done" and summary.counts == Counter({"ok": PAIRS})
    sends = [e[1:] for e in events if e[0] == "send"]
    takes = [e[1:] for e in events if e[0] == "take"]
    # the worker ran what was sent, in that order; the runner took each pair once, as the fake answers it (its
    # instance and point are the request's: an answer taken for another request would show here)
    assert sends == [(m[2], m[3]) for m in measures] and Counter(takes) == Counter(sends) and len(sends) == PAIRS
    assert set(measured_rows(tmp_path)) == set(sends)
    # pipelined: request k+1 is written before answer k is taken; otherwise each answer before the next request
    behind, sent, taken = [], 0, 0  # for each take: how many requests were written and not yet taken
    for kind, *_ in events:
        sent, taken = sent + (kind == "send"), taken + (kind == "take")
        if kind == "take":
            behind.append(sent - taken + 1)
    if pipeline:  # (the last answer has nothing behind it; nor may one whose next pair had not compiled yet)
        assert max(behind) == 2 and behind.count(2) >= PAIRS - 4, behind
    else:
        assert behind == [1] * PAIRS


def test_a_budget_abandons_the_queued_request_without_a_note_and_a_resume_measures_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 4th measurement takes longer than the budget (the fake's `slow:SECONDS`): the runner stops taking results
    while the 5th request is queued at the worker. That pair is not recorded, keeps no in-flight note (it would be
    recorded as crashed on resume), and the resume measures it and the rest, each pair once. The budget counts from
    the sweep's start, the worker's start included: where a loaded machine spends a 1-s budget before the first
    request, the run is tried again in a fresh folder with a larger budget (CI ran out once at 1 s)."""
    for budget in (1, 4, 16):
        work = tmp_path / f"budget{budget}"
        work.mkdir()
        cfg_text = gpu_config(work).text + f"budget: {budget}\n"
        cfg = parse_config(cfg_text, file=work / "budget.yaml")
        summary, events, measures = sweep(work, monkeypatch, {4: f"slow:{budget + 0.5}"}, True, cfg)
        assert summary.status == "budget"
        sends = [e[1:] for e in events if e[0] == "send"]
        if sends:
            break
    db = work / "faults.sqlite"
    assert rows(db, "select count(*) from inflight") == [(0,)]
    takes = [e[1:] for e in events if e[0] == "take"]
    assert len(sends) == len(takes) + 1 and sends[: len(takes)] == takes  # the last one sent was abandoned
    recorded = measured_rows(work)
    assert sends[-1] not in recorded and len(recorded) == len(takes)
    resumed = parse_config(textwrap.dedent(cfg_text).replace(f"budget: {budget}\n", ""), file=work / "resume.yaml")
    summary2, events2, _ = sweep(work, monkeypatch, {}, True, resumed)
    assert summary2.status == "done" and summary2.counts == Counter({"ok": PAIRS - len(takes)})
    again = measured_rows(work)
    assert len(again) == PAIRS and all(st == "ok" for st, _ in again.values())
    assert sends[-1] in {e[1:] for e in events2 if e[0] == "take"}
