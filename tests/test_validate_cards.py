"""`autotune validate` on a validation database that holds several cards of one GPU model (issue 32): the committed
fp32/fp64 H100 validation was measured on two H100s (the second card went on where the first stopped, `resume: model`).
The replay backend answers from both cards as one GPU, `validate` reads both cards' measurements (the first card's
where both measured a pair) on either card, and a database of two different models is refused unless the model is
named. Real SQLite files throughout (the committed recording, results/small_tables_h100/model/validation, and a copy
with the second card renamed; this ran on results/fp16_model_h100's, whose databases were retired: docs/results.md)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from autotune.dispatch import validate as v
from autotune.problems.gemm import GEMM
from autotune.store.engine import StoreError
from autotune.store.store import Store
from autotune.sweep.backends.replay import ReplayBackend, replayed_devices
from tests.support.committed import gunzip_to
from tests.support.harness import invoke_cli

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "results" / "small_tables_h100"
FIRST, SECOND = "GPU-e0e363fd-7f7e-859b-bb30-f4481c4de359", "GPU-ca331fe3-957e-8f12-43a6-cbad3084ad8d"


@pytest.fixture(scope="module")
def two_cards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("cards")
    return gunzip_to(SMALL / "model" / "validation" / "validation.sqlite.xz", work / "validation.sqlite")


def test_the_recording_holds_two_cards_of_one_model(two_cards: Path) -> None:
    with sqlite3.connect(two_cards) as db:
        cards = db.execute("SELECT uuid, name, sm_count, cc FROM devices ORDER BY id").fetchall()
        both = db.execute(
            "SELECT COUNT(*) FROM baselines a JOIN baselines b ON a.point_id = b.point_id "
            "AND a.device_id = 1 AND b.device_id = 2"
        ).fetchone()[0]
    assert [c[0] for c in cards] == [FIRST, SECOND] and len({c[1:] for c in cards}) == 1
    assert both > 0  # both cards timed cuBLAS at some points: the first card's counts


def test_measured_reads_every_card_of_the_model_first_card_first(two_cards: Path) -> None:
    url = f"sqlite:///{two_cards}"
    on_first, base_first = v.measured(url, GEMM, FIRST)
    on_second, base_second = v.measured(url, GEMM, SECOND)
    assert (on_first, base_first) == (on_second, base_second)
    with Store.open(url, create=False, readonly=True) as store:
        one = store.measurements(device=FIRST)
        second_base = store.baselines(device=SECOND)
        first_base = store.baselines(device=FIRST)
    pairs = sum(len(t) for t in on_first.values())
    assert pairs > len(one[one["status"] == "ok"])  # the second card's pairs are in
    # where both cards timed the baseline, the first card's time is the one read
    key = ["precision", "shape", *GEMM.size_names]
    shared = first_base.merge(second_base, on=key, suffixes=("_1", "_2"))
    assert len(shared) > 0 and (shared["median_ms_1"] != shared["median_ms_2"]).any()
    for r in shared.to_dict("records"):
        k = (r["precision"], r["shape"], *(int(r[n]) for n in GEMM.size_names))
        assert base_first[k][0] == r["median_ms_1"]


def test_replay_answers_from_both_cards_as_one_gpu(two_cards: Path) -> None:
    url = f"sqlite:///{two_cards}"
    with Store.open(url, create=False, readonly=True) as store:
        assert replayed_devices(store, None) == [1, 2]
        assert replayed_devices(store, SECOND) == [2]
    backend = ReplayBackend(url)
    try:
        assert backend.device_info().uuid == FIRST
    finally:
        backend.close()


def test_two_models_are_refused_unless_one_is_named(two_cards: Path, tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.sqlite"
    shutil.copy(two_cards, mixed)
    with sqlite3.connect(mixed) as db:
        db.execute("UPDATE devices SET name = 'NVIDIA H200', sm_count = 132 WHERE id = 2")
    url = f"sqlite:///{mixed}"
    with pytest.raises(StoreError, match="2 GPU models") as err:
        ReplayBackend(url)
    assert "--replay-device" in (err.value.hint or "")
    with Store.open(url, create=False, readonly=True) as store:
        assert replayed_devices(store, "NVIDIA H200") == [2]
        assert replayed_devices(store, "NVIDIA H100 80GB HBM3") == [1]
        # a validation measured on the H100 never mixes in the H200's times
        assert v.model_cards(store, FIRST) == [FIRST]
    two, _ = v.measured(url, GEMM, FIRST)
    with Store.open(url, create=False, readonly=True) as store:
        ok = store.measurements(device=FIRST)
    assert sum(len(t) for t in two.values()) == int((ok["status"] == "ok").sum())


def test_validate_cli_refuses_two_models_and_names_the_option(two_cards: Path, tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.sqlite"
    shutil.copy(two_cards, mixed)
    with sqlite3.connect(mixed) as db:
        db.execute("UPDATE devices SET name = 'NVIDIA H200' WHERE id = 2")
    (tmp_path / "p.csv").write_text("precision,shape,m,n,k\nfp64,NN,16,16,16\n")
    args = ["validate", str(SMALL / "model" / "dispatch.json"), "--points", "p.csv"]
    args += ["--db", str(SMALL / "small_tables_h100.sqlite.xz"), "--out", "o", "-q", "--replay", f"sqlite:///{mixed}"]
    r = invoke_cli(*args, cwd=tmp_path)  # in this process: the command's refusal is tested, not a process's start
    assert r.returncode != 0 and "GPU models" in r.stdout + r.stderr and "--replay-device" in r.stdout + r.stderr
    r = invoke_cli(*args, "--replay-device", "NVIDIA H200", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads((tmp_path / "o" / "validation_summary.json").read_text())["provenance"]["device"] == SECOND


def test_a_table_is_built_from_two_cards_of_one_model(two_cards: Path, tmp_path: Path) -> None:
    """`autotune emit` (the analyzer's load) on the two-card database: one GPU, each pair once (the first card's)."""
    from autotune import load_results

    url = f"sqlite:///{two_cards}"
    loaded = load_results(url, None, None, recorded_spaces=False)
    key = ["instance_id", "precision", "shape", *GEMM.size_names]
    assert not loaded.frame.duplicated(subset=key).any()
    with Store.open(url, create=False, readonly=True) as store:
        both = store.measurements()
    assert len(loaded.frame) == len(both.drop_duplicates(subset=key))
    assert loaded.provenance.device_info["uuid"] == FIRST
    one = load_results(url, SECOND, None, recorded_spaces=False)  # a card named by its uuid: that card only
    assert one.provenance.device_info["uuid"] == SECOND and len(one.frame) < len(loaded.frame)
    r = invoke_cli("emit", str(two_cards), "-f", "json", "--structure", "regions")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["provenance"]["device_info"]["uuid"] == FIRST
