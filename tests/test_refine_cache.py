"""A refinement cache is data: `Refiner` serves a cached answer only when it is one the table may give at that
problem (a kernel of the problem's precision and shape, valid at its sizes, the library, or the table's own answer)
and never at a tuned point; a file that is not a cache of this table is ignored. Each with one warning. The table is
the committed fp64/fp32 selection-model table of results/small_tables_h100/model."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from autotune.dispatch.refine import Refiner
from autotune.dispatch.runtime import LIBRARY

ROOT = Path(__file__).resolve().parents[1]
TABLE = json.loads((ROOT / "results" / "small_tables_h100" / "model" / "dispatch.json").read_text())
SIZES = {"m": 17, "n": 9, "k": 30, "batch": 1000}  # not a tuned point
FP64 = next(i for i, k in enumerate(TABLE["kernels"]) if k["precision"] == "fp64" and not k["valid"])
SMALL_FP32 = next(i for i, k in enumerate(TABLE["kernels"]) if k["precision"] == "fp32" and k["valid"])


class Timer:
    """A timer whose kernel `fast` is fastest; counts its calls."""

    def __init__(self, fast: int | None = None) -> None:
        self.fast, self.calls = fast, 0

    def __call__(self, answer: int, precision: str, shape: str, sizes: dict) -> float | None:
        self.calls += 1
        return 1.0 if answer == self.fast else 2.0 + answer % 7


def cached(tmp_path: Path) -> tuple[Path, str, int]:
    """A cache file written by refining SIZES (fp32, NN): its path, the problem's key and the chosen answer."""
    cache = tmp_path / "choices.json"
    refine = Refiner(TABLE, Timer(), top=3, cache_file=cache)
    chosen = refine.index("fp32", "NN", SIZES)
    key = refine.key("fp32", "NN", refine.lookup.check("fp32", "NN", SIZES))
    return cache, key, chosen


def tamper(cache: Path, key: str, answer: object) -> None:
    doc = json.loads(cache.read_text())
    doc["choices"][key]["answer"] = answer
    cache.write_text(json.dumps(doc))


def served(cache: Path, *problem: object) -> tuple[int, Timer, list[str]]:
    timer = Timer()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        refine = Refiner(TABLE, timer, top=3, cache_file=cache)
        answer = refine.index(*problem) if problem else refine.index("fp32", "NN", SIZES)
    return answer, timer, [str(w.message) for w in caught]


def test_an_untampered_cache_is_served_without_timing(tmp_path: Path) -> None:
    cache, _, chosen = cached(tmp_path)
    answer, timer, lines = served(cache)
    assert answer == chosen and timer.calls == 0 and lines == []


@pytest.mark.parametrize(
    "answer",
    [FP64, 10_000, -7, "3", True, 3.5, None, [1]],
    ids=["fp64-kernel", "past-the-kernels", "negative", "text", "bool", "fraction", "null", "list"],
)
def test_a_tampered_answer_is_not_served(tmp_path: Path, answer: object) -> None:
    cache, key, chosen = cached(tmp_path)
    tamper(cache, key, str(chosen) if answer == "3" else answer)  # text: the right answer, written as text
    got, timer, lines = served(cache)
    assert got == chosen and timer.calls > 0  # refined again, to the same choice
    assert len(lines) == 1 and "not one this table gives there" in lines[0], lines
    kernel = TABLE["kernels"][got] if got >= 0 else {"precision": "fp32"}
    assert kernel["precision"] == "fp32"


def test_a_kernel_not_valid_at_the_sizes_is_not_served(tmp_path: Path) -> None:
    cache, key, chosen = cached(tmp_path)
    assert TABLE["kernels"][SMALL_FP32]["valid"][0]["max_m"] < SIZES["m"]  # valid only at smaller problems
    tamper(cache, key, SMALL_FP32)
    got, _, lines = served(cache)
    assert got == chosen and len(lines) == 1


def test_a_cached_answer_at_a_tuned_point_is_not_served(tmp_path: Path) -> None:
    cache, _, _ = cached(tmp_path)
    point = next(p for p in TABLE["points"] if p["precision"] == "fp32")
    refine = Refiner(TABLE, Timer(), top=3)
    dims = refine.lookup.check("fp32", point["shape"], point["sizes"])
    table_answer = refine.lookup.index("fp32", point["shape"], dims)
    other = next(i for i, k in enumerate(TABLE["kernels"]) if k["precision"] == "fp32" and i != table_answer)
    doc = json.loads(cache.read_text())
    doc["choices"][refine.key("fp32", point["shape"], dims)] = {"answer": other}
    cache.write_text(json.dumps(doc))
    got, timer, lines = served(cache, "fp32", point["shape"], point["sizes"])
    assert got == table_answer and timer.calls == 0 and len(lines) == 1


def test_many_tampered_answers_give_one_warning(tmp_path: Path) -> None:
    cache, key, _ = cached(tmp_path)
    refine = Refiner(TABLE, Timer(), top=3, cache_file=cache)
    problems = [{**SIZES, "m": m} for m in (19, 23, 29, 31)]
    for sizes in problems:
        refine.index("fp32", "NN", sizes)
    doc = json.loads(cache.read_text())
    for k in doc["choices"]:
        doc["choices"][k]["answer"] = FP64
    cache.write_text(json.dumps(doc))
    timer = Timer()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = Refiner(TABLE, timer, top=3, cache_file=cache)
        answers = [again.index("fp32", "NN", sizes) for sizes in problems]
    assert len(caught) == 1 and all(TABLE["kernels"][a]["precision"] == "fp32" for a in answers if a != LIBRARY)


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"format": "autotune-refine-cache", "version": 1, "table": "TABLE", "choices": [1, 2]}),
        json.dumps({"format": "autotune-refine-cache", "version": 1, "table": "TABLE", "choices": "x"}),
        "[" * 100_000 + "]" * 100_000,
        '{"format": "autotune-refine-cache", "choices": {',
        "\x00\xff binary",
    ],
    ids=["choices-list", "choices-text", "deep", "truncated", "binary"],
)
def test_a_file_that_is_not_a_cache_of_this_table_is_ignored(tmp_path: Path, text: str) -> None:
    cache = tmp_path / "choices.json"
    cache.write_text(text.replace("TABLE", Refiner(TABLE, Timer()).digest))
    got, timer, lines = served(cache)
    assert timer.calls > 0 and len(lines) == 1, lines
    assert TABLE["kernels"][got]["precision"] == "fp32" if got >= 0 else got == LIBRARY
