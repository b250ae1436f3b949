"""Kernel Tuner cache and T4 interop, on cache files written by Kernel Tuner's own code (tests/data/kerneltuner)."""

from __future__ import annotations

import json
import shutil
import time
import warnings
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotune.interop.kerneltuner import (
    CacheFormatError,
    KTCache,
    KTCacheWarning,
    KTRecord,
    config_key,
    read_cache,
    t4_results,
    write_cache,
    write_t4,
)

DATA = Path(__file__).parent / "data" / "kerneltuner"
CLOSED = DATA / "matmul_cache.json"
OPEN = DATA / "matmul_cache_open.json"
CUT = DATA / "matmul_cache_cut.json"
KT13 = DATA / "matmul_cache_kt13.json"
FRESH = DATA / "matmul_cache_fresh.json"
KT_ERRORS = {
    "InvalidConfig": "invalid",
    "CompilationFailedConfig": "compile_error",
    "RuntimeFailedConfig": "launch_error",
}


def kt_repair(text: str) -> str:
    """Kernel Tuner's correct_open_cache, as documented: strip; unless it ends in '}\\n}' or '}}}', drop one
    trailing ',' and append '}\\n}'."""
    text = text.strip()
    if text and text[-3:] not in ("}\n}", "}}}"):
        if text[-1] == ",":
            text = text[:-1]
        text += "}\n}"
    return text


def kt_load(path: Path) -> dict:
    """The dictionary Kernel Tuner's read_cache sees (failure strings left as strings)."""
    return json.loads(kt_repair(path.read_text()))


def kt_status(entry: dict) -> str:
    for v in entry.values():
        if isinstance(v, str) and v in KT_ERRORS:
            return KT_ERRORS[v]
    return "ok"


def read_quietly(path: Path) -> KTCache:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return read_cache(path)


# ------------------------------------------------------------------------------------------------ reading


def test_reads_closed_cache_header_and_every_entry() -> None:
    cache = read_quietly(CLOSED)
    raw = kt_load(CLOSED)
    assert cache.terminated and cache.dropped_entries == 0
    assert cache.device_name == "NVIDIA A100-PCIE-40GB"
    assert cache.kernel_name == "matmul_tiled"
    assert cache.problem_size == (4096, 4096)
    assert cache.tune_params_keys == ("block_size_x", "block_size_y", "tile_size_x", "layout")
    assert cache.tune_params == raw["tune_params"]
    assert cache.objective == "time"
    assert cache.header_extra == {}
    assert len(cache.records) == len(raw["cache"]) == 48
    assert Counter(r.status for r in cache.records) == {"ok": 38, "invalid": 4, "compile_error": 2, "launch_error": 4}
    for record, (key, entry) in zip(cache.records, raw["cache"].items(), strict=True):
        assert config_key(record.params, cache.tune_params_keys) == key
        assert list(record.params) == list(cache.tune_params_keys)
        assert record.status == kt_status(entry)
        if record.status == "ok":
            assert record.time_ms == entry["time"]
            assert record.times_ms == tuple(entry["times"])
            assert record.extra == {
                k: entry[k] for k in ("compile_time", "verification_time", "benchmark_time", "GFLOP/s", "timestamp")
            }
        else:
            assert record.time_ms is None and record.times_ms == ()
            assert "__error__" not in record.extra and "time" not in record.extra
            assert record.extra["timestamp"] == entry["timestamp"]
            assert record.extra["compile_time"] == entry["compile_time"]


def test_failure_kinds_are_the_ones_kernel_tuner_recorded() -> None:
    cache = read_quietly(CLOSED)
    for r in cache.records:
        p = r.params
        threads = p["block_size_x"] * p["block_size_y"]
        if threads > 512:
            assert r.status == "invalid"
        elif (p["block_size_x"], p["block_size_y"], p["layout"]) == (32, 4, "col"):
            assert r.status == "compile_error"
        elif threads == 512 and p["tile_size_x"] == 2:
            assert r.status == "launch_error"
        else:
            assert r.status == "ok" and r.time_ms > 0


def test_kernel_tuner_13_failures_under_time_read_the_same() -> None:
    new = {
        config_key(r.params, ("block_size_x", "block_size_y", "tile_size_x", "layout")): r.status
        for r in read_quietly(CLOSED).records
    }
    old = read_quietly(KT13)
    assert {config_key(r.params, old.tune_params_keys): r.status for r in old.records} == new
    for r in old.records:
        if r.status != "ok":
            assert r.time_ms is None and "time" not in r.extra and "__error__" not in r.extra


def test_unterminated_cache_reads_like_the_closed_one() -> None:
    assert OPEN.read_text().endswith("},")
    cache = read_quietly(OPEN)
    assert not cache.terminated and cache.dropped_entries == 0
    assert cache == read_quietly(CLOSED)
    # and like Kernel Tuner's own repair of it
    assert [config_key(r.params, cache.tune_params_keys) for r in cache.records] == list(kt_load(OPEN)["cache"])


def test_fresh_header_only_cache() -> None:
    assert FRESH.read_text().endswith('"cache": {')
    cache = read_quietly(FRESH)
    assert cache.records == () and not cache.terminated
    assert cache.tune_params_keys == ("block_size_x", "block_size_y", "tile_size_x", "layout")


def test_cut_short_last_entry_is_dropped_with_a_warning() -> None:
    with pytest.warns(KTCacheWarning, match=r"matmul_cache_cut\.json: the last cache entry was cut short"):
        cache = read_cache(CUT)
    assert cache.dropped_entries == 1 and not cache.terminated
    assert cache.records == read_quietly(CLOSED).records[:47]
    with pytest.raises(json.JSONDecodeError):  # Kernel Tuner's own reader cannot read this one
        kt_load(CUT)


def test_every_cut_point_of_the_last_entry(tmp_path: Path) -> None:
    text = OPEN.read_text()
    start = text.rstrip(",").rfind("\n")
    full = read_quietly(CLOSED).records
    path = tmp_path / "c.json"
    for cut in range(start, len(text) + 1):
        path.write_text(text[:cut])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cache = read_cache(path)
        complete = cut >= len(text) - 1  # up to the entry's closing brace
        assert cache.records == (full if complete else full[:47]), cut
        assert cache.dropped_entries == (0 if complete or cut <= start + 1 else 1), cut
        assert len(caught) == cache.dropped_entries


def test_pretty_printed_and_compact_files(tmp_path: Path) -> None:
    raw = kt_load(CLOSED)
    expected = read_quietly(CLOSED)
    for i, text in enumerate([json.dumps(raw, indent=4), json.dumps(raw), json.dumps(raw, indent=4)[:-2] + "\n"]):
        path = tmp_path / f"c{i}.json"
        path.write_text(text + "\n\n")
        assert read_quietly(path) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty"),
        ("[1, 2]", "does not start with a JSON object"),
        ('{"results": [], "schema_version": "1.0.0"}', "this is a T4 results file"),
        ('{"device_name": "x", "kernel_name": "k", "cache": {}}', "missing header key"),
        ('{"a": 1}', "not a Kernel Tuner cache file"),
        (
            (
                '{"device_name": "x", "kernel_name": "k", "tune_params_keys": ["a"], "cache": {"1": {"a": 1}, "2": {"a": 2, '
                '"time" 3}, "3": {"a": 3}}}'
            ),
            "invalid JSON in the cache entry",
        ),
        (
            '{"device_name": "x", "kernel_name": "k", "tune_params_keys": ["a"], "cache": {"1": 5}}',
            "is not a JSON object",
        ),
        (
            '{"device_name": "x", "kernel_name": "k", "tune_params_keys": ["a"], "cache": {}} extra',
            "text after the end",
        ),
        ('{"device_name": "x", "kernel_name": "k", "tune_params_keys": ["a"], "cache": {"1": {"b": 1}}}', "lacks 'a'"),
        ('{"device_name": "x", "kernel_name": "k", "tune_params_keys": [', "invalid or cut-short JSON in the header"),
    ],
)
def test_non_caches_raise_with_file_name(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "notacache.json"
    path.write_text(text)
    with pytest.raises(CacheFormatError, match=message) as info:
        read_cache(path)
    assert str(path) in str(info.value)


def test_missing_file_and_binary_file(tmp_path: Path) -> None:
    with pytest.raises(CacheFormatError, match="cannot read"):
        read_cache(tmp_path / "nope.json")
    (tmp_path / "b.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CacheFormatError, match="not UTF-8"):
        read_cache(tmp_path / "b.json")


def test_entry_without_parameter_values_takes_them_from_its_key(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(
        '{"device_name": "d", "kernel_name": "k", "tune_params_keys": ["x", "s"], '
        '"tune_params": {"x": [1, 2], "s": ["a", "b"]}, "cache": {"2,b": {"time": 1.5}}}'
    )
    (record,) = read_quietly(path).records
    assert record.params == {"x": 2, "s": "b"} and record.time_ms == 1.5


def test_old_cache_without_objective_or_problem_size(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(
        '{"device_name": "d", "kernel_name": "k", "tune_params_keys": ["x"], '
        '"tune_params": {"x": [1]}, "schema_version": "1.0.0", "cache": {"1": {"x": 1, "time": 2}}}'
    )
    cache = read_quietly(path)
    assert cache.objective == "time" and cache.problem_size is None
    assert cache.header_extra == {"schema_version": "1.0.0"}
    assert cache.records[0].time_ms == 2.0


# ------------------------------------------------------------------------------------------------ writing


@pytest.mark.parametrize("source", [CLOSED, OPEN, KT13])
def test_round_trip_reproduces_every_key_and_time(tmp_path: Path, source: Path) -> None:
    cache = read_quietly(source)
    out = tmp_path / "out.json"
    write_cache(cache, out)
    again = read_quietly(out)
    assert again == cache and again.terminated
    raw_in, raw_out = kt_load(source)["cache"], json.loads(out.read_text())["cache"]  # closed: plain JSON
    assert list(raw_out) == list(raw_in)
    for key, entry in raw_in.items():
        assert raw_out[key].get("times") == entry.get("times")
        assert kt_status(raw_out[key]) == kt_status(entry)
        if kt_status(entry) == "ok":
            assert raw_out[key]["time"] == entry["time"]
        else:  # both Kernel Tuner generations' markers
            assert (
                raw_out[key]["time"]
                == raw_out[key]["__error__"]
                == next(v for v in entry.values() if isinstance(v, str) and v in KT_ERRORS)
            )


def test_written_file_is_byte_identical_to_kernel_tuners(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    write_cache(read_quietly(CLOSED), out, error_style="__error__")
    assert out.read_bytes() == CLOSED.read_bytes()
    write_cache(read_quietly(OPEN), out, error_style="__error__", terminated=False)
    assert out.read_bytes() == OPEN.read_bytes()
    write_cache(read_quietly(KT13), out, error_style="objective")
    assert out.read_bytes() == KT13.read_bytes()
    write_cache(read_quietly(FRESH), out)
    assert out.read_bytes() == FRESH.read_bytes()


def test_written_file_can_be_reopened_for_appending_the_kernel_tuner_way(tmp_path: Path) -> None:
    """Kernel Tuner reopens a closed cache by cutting its last 3 characters and adding ','; then appends."""
    out = tmp_path / "out.json"
    cache = read_quietly(CLOSED)
    write_cache(cache, out)
    text = out.read_text().strip()
    assert text[-3:] == "}\n}"
    text = (
        text[:-3]
        + ","
        + ('\n"1,1,1,row": {"block_size_x": 1, "block_size_y": 1, "tile_size_x": 1, "layout": "row", "time": 9.5},')
    )
    out.write_text(text)
    appended = read_quietly(out)
    assert appended.records[:-1] == cache.records and appended.records[-1].time_ms == 9.5
    assert json.loads(kt_repair(text))["cache"]["1,1,1,row"]["time"] == 9.5


def test_statuses_without_a_kernel_tuner_marker_survive(tmp_path: Path) -> None:
    records = (
        KTRecord({"n": 1}, "ok", 1.25, (1.0, 1.5), {"compile_time": 3.0}),
        KTRecord({"n": 2}, "wrong", None, (2.0,), {"note": "max abs error 0.5"}),
        KTRecord({"n": 3}, "error"),
        KTRecord({"n": 4}, "invalid"),
    )
    cache = KTCache("dev", "k", 7, ("n",), {"n": [1, 2, 3, 4]}, "time", records)
    out = tmp_path / "c.json"
    write_cache(cache, out)
    raw = json.loads(out.read_text())["cache"]
    assert raw["2"]["__error__"] == raw["2"]["time"] == "RuntimeFailedConfig"  # failed for Kernel Tuner too
    assert raw["2"]["__autotune_status__"] == "wrong"
    assert raw["4"] == {"n": 4, "time": "InvalidConfig", "__error__": "InvalidConfig"}
    assert read_quietly(out) == cache


def test_write_rejects_mismatched_params_and_duplicate_keys(tmp_path: Path) -> None:
    bad = KTCache("d", "k", None, ("a",), {"a": [1]}, "time", (KTRecord({"b": 1}, "ok", 1.0),))
    with pytest.raises(ValueError, match="tune_params_keys"):
        write_cache(bad, tmp_path / "c.json")
    dup = KTCache("d", "k", None, ("a",), {"a": [1]}, "time", (KTRecord({"a": 1}, "ok", 1.0),) * 2)
    with pytest.raises(ValueError, match="two records"):
        write_cache(dup, tmp_path / "c.json")
    with pytest.raises(ValueError, match="status"):
        KTRecord({"a": 1}, "slow")


def test_config_key_is_kernel_tuners() -> None:
    import numpy as np

    assert config_key({"a": 1, "b": 0.5, "c": "row", "d": True}, ["a", "b", "c", "d"]) == "1,0.5,row,True"
    assert config_key({"b": 2, "a": 1}, ["a", "b"]) == "1,2"
    assert config_key({"b": 2, "a": 1}) == "2,1"
    assert config_key({"a": np.int64(256), "b": np.float64(1e-05)}, ["a", "b"]) == "256,1e-05"


_param = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text("abcxyz_,0129", min_size=1, max_size=6),
)
_times = st.lists(st.floats(0, 1e6, allow_nan=False), max_size=4).map(tuple)


@st.composite
def _caches(draw: st.DrawFn) -> KTCache:
    keys = tuple(
        draw(
            st.lists(
                st.sampled_from(["block_size_x", "block_size_y", "tile", "vec"]), min_size=1, max_size=4, unique=True
            )
        )
    )
    records, seen = [], set()
    for _ in range(draw(st.integers(0, 6))):
        params = {k: draw(_param) for k in keys}
        if config_key(params, keys) in seen:
            continue
        seen.add(config_key(params, keys))
        status = draw(st.sampled_from(["ok", "ok", "compile_error", "launch_error", "invalid", "wrong"]))
        ok = status == "ok"
        records.append(
            KTRecord(
                params,
                status,
                draw(st.floats(0, 1e3)) if ok else None,
                draw(_times) if ok else (),
                {"timestamp": "2026-01-01 00:00:00+00:00"},
            )
        )
    tune_params = {k: sorted({str(r.params[k]) for r in records}) for k in keys}
    return KTCache(
        "GPU",
        "kern",
        draw(st.one_of(st.integers(1, 99), st.tuples(st.integers(1, 9)))),
        keys,
        tune_params,
        "time",
        tuple(records),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cache=_caches(), terminated=st.booleans())
def test_round_trip_property(tmp_path: Path, cache: KTCache, terminated: bool) -> None:
    out = tmp_path / "c.json"
    write_cache(cache, out, terminated=terminated)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KTCacheWarning)  # keys of floats like 1e+16 are fine, keys may clash
        again = read_cache(out)
    assert again == cache
    assert [config_key(r.params, again.tune_params_keys) for r in again.records] == list(
        json.loads(kt_repair(out.read_text()))["cache"]
    )


# ------------------------------------------------------------------------------------------------ T4


def test_t4_output_matches_kernel_tuners_layout(tmp_path: Path) -> None:
    cache = read_quietly(CLOSED)
    out = tmp_path / "t4.json"
    write_t4(cache, out, metadata={"source": "matmul_cache.json"})
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == "1.0.0"
    assert doc["metadata"] == {"timeunit": "milliseconds", "source": "matmul_cache.json"}
    assert len(doc["results"]) == 48
    expect = {"ok": "correct", "compile_error": "compile", "launch_error": "runtime", "invalid": "constraints"}
    for r, res in zip(cache.records, doc["results"], strict=True):
        assert res["configuration"] == r.params
        assert res["invalidity"] == expect[r.status]
        assert res["correctness"] == 1
        assert res["objectives"] == ["time"]
        assert res["timestamp"] == r.extra["timestamp"]
        assert res["times"]["compilation"] == r.extra["compile_time"]
        assert res["times"]["benchmark"] == r.extra["benchmark_time"]
        assert res["times"]["validation"] == r.extra["verification_time"]
        assert res["times"]["runtimes"] == list(r.times_ms)
        names = {m["name"]: m for m in res["measurements"]}
        if r.status == "ok":
            assert names["time"] == {"name": "time", "value": r.time_ms, "unit": "ms"}
            assert names["GFLOP/s"]["value"] == r.extra["GFLOP/s"] and names["GFLOP/s"]["unit"] == ""
        else:
            assert names == {}


def test_t4_correctness_for_wrong_results() -> None:
    cache = KTCache(
        "d",
        "k",
        1,
        ("a",),
        {"a": [1, 2]},
        "time",
        (KTRecord({"a": 1}, "wrong", extra={"flag": True, "x": None, "y": float("nan")}),),
    )
    (res,) = t4_results(cache)["results"]
    assert res["invalidity"] == "correctness" and res["correctness"] == 0
    assert res["measurements"] == [] and res["times"] == {"runtimes": []}


def test_t4_output_validates_against_the_t4_schema(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((DATA / "t4-results-schema-1.0.0.json").read_text())
    for source in (CLOSED, KT13):
        out = tmp_path / "t4.json"
        write_t4(read_quietly(source), out)
        jsonschema.validate(json.loads(out.read_text()), schema)
    broken = json.loads(out.read_text())
    broken["results"][0]["invalidity"] = "crashed"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


# ------------------------------------------------------------------------------------------------ size


def test_reading_50000_entries_is_fast(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    shutil.copyfile(OPEN, path)  # a real header and layout, then 50,000 store_cache-style lines
    tail = []
    for i in range(50_000):
        x, y, t = 32 * (1 + i % 32), 1 + (i // 32) % 40, 1 + i // 1280
        if i % 97 == 0:
            body = (
                '"__error__": "CompilationFailedConfig", "compile_time": 12.5, "verification_time": 0, '
                '"benchmark_time": 0, "timestamp": "2026-03-02 14:05:17.120034+00:00"'
            )
        else:
            ts = [0.001 * (i % 1000) + 0.01 * k for k in range(7)]
            body = (
                f'"time": {sum(ts) / 7!r}, "times": {ts!r}, "compile_time": 441.2, "verification_time": 0, '
                f'"benchmark_time": 1.1, "GFLOP/s": {1000 + i / 7!r}, '
                '"timestamp": "2026-03-02 14:05:17.120034+00:00"'
            )
        tail.append(
            f'\n"{x},{y},{t},big": {{"block_size_x": {x}, "block_size_y": {y}, "tile_size_x": {t}, '
            f'"layout": "big", {body}}},'
        )
    with path.open("a") as f:
        f.write("".join(tail))
    t0 = time.perf_counter()
    cache = read_quietly(path)
    elapsed = time.perf_counter() - t0
    assert len(cache.records) == 50_048 and not cache.terminated
    assert sum(r.status == "compile_error" for r in cache.records) == 2 + len(range(0, 50_000, 97))
    assert elapsed < 10, f"read_cache took {elapsed:.2f} s for 50,048 entries"


def test_module_imports_only_the_standard_library() -> None:
    """The cache family (kerneltuner and the two modules it gathers, kt_format and kt_read) imports the standard
    library and each other only: it runs where autotune's dependencies are not installed."""
    import ast
    import importlib
    import sys

    family = {"autotune.interop.kerneltuner", "autotune.interop.kt_format", "autotune.interop.kt_read"}
    for name in sorted(family):
        module = importlib.import_module(name)
        tree = ast.parse(Path(str(module.__file__)).read_text())
        imported = {
            alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
        }
        imported |= {
            node.module.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module not in family
        }
        assert imported <= set(sys.stdlib_module_names) | {"__future__"}, (name, imported)
