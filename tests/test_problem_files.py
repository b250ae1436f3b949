"""A kind's problems in a CSV (or YAML list) are read by one reader (autotune/sweep/workloads/problem_rows.py) for
`autotune workload` and `autotune validate --points`: UTF-8 with or without a BOM, CRLF, sizes 1..2^31-1 checked
at read, a row limit checked before reading, every mistake one UserError naming the file and line.

Only public names that exist before the shared reader (load_workload, read_points, the CLI) are used, so each
regression test here can be run against the code before the fix."""

from __future__ import annotations

import csv
import io
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autotune
from autotune.dispatch.validate_points import DerivedRule, read_points
from autotune.errors import UserError
from autotune.problems.base import INT32_MAX
from autotune.problems.gemm import GEMM
from autotune.sweep.workloads.workload import SizeRule
from autotune.sweep.workloads.workload_files import load_workload

ROOT = Path(__file__).resolve().parents[1]
TRANSPOSE = ROOT / "examples" / "transpose"
RULE = DerivedRule(SizeRule(budget_bytes=10**6))
NOT_UTF8 = b"rows,cols\n100,200\n\xff\xfe,3\n"
BOM = b"\xef\xbb\xbf"


def _write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


def _transpose():
    from autotune.space.spec import load_space

    return load_space(TRANSPOSE / "space.yaml").kind


# ------------------------------------------------------------------------------------------------ regressions
@pytest.mark.parametrize(
    "name, data, line",
    [
        ("bad.csv", NOT_UTF8, 3),
        ("bad.yaml", b"- {rows: 100, cols: 200}\n- {rows: \xff, cols: 3}\n", 2),
    ],
)
def test_non_utf8_is_one_error_at_its_line(tmp_path: Path, name: str, data: bytes, line: int) -> None:
    f = _write(tmp_path, name, data)
    with pytest.raises(UserError) as err:
        read_points(f, _transpose(), DerivedRule(SizeRule()))
    assert err.value.file == str(f) and err.value.line == line and "UTF-8" in str(err.value), str(err.value)
    if name.endswith(".csv"):
        with pytest.raises(UserError) as err:
            load_workload(f, space=TRANSPOSE / "space.yaml")
        assert err.value.line == line and "UTF-8" in str(err.value)


def test_non_utf8_yaml_workload_is_one_error(tmp_path: Path) -> None:
    f = _write(tmp_path, "w.yaml", b"kind: gemm\n# caf\xe9\nproblems: [{precision: fp16, m: 8, n: 8, k: 8}]\n")
    with pytest.raises(UserError) as err:
        load_workload(f)
    assert err.value.line == 2 and "UTF-8" in err.value.message


def test_a_bom_and_crlf_are_read(tmp_path: Path) -> None:
    kind = _transpose()
    f = _write(tmp_path, "bom.csv", BOM + b"rows,cols\r\n100,200\r\n# note\r\n\r\n7,9\r\n")
    assert [p.dims for p in read_points(f, kind, DerivedRule(SizeRule()))] == [
        {"rows": 100, "cols": 200},
        {"rows": 7, "cols": 9},
    ]
    wl = load_workload(f, space=TRANSPOSE / "space.yaml")
    assert [(p.dims, w) for p, w in wl.problems] == [({"rows": 100, "cols": 200}, 1.0), ({"rows": 7, "cols": 9}, 1.0)]
    y = _write(tmp_path, "bom.yaml", BOM + b"- {rows: 100, cols: 200}\r\n")
    assert [p.dims for p in read_points(y, kind, DerivedRule(SizeRule()))] == [{"rows": 100, "cols": 200}]
    w = _write(tmp_path, "w.yaml", BOM + b"kind: gemm\r\nproblems: [{precision: fp16, m: 8, n: 8, k: 8}]\r\n")
    assert len(load_workload(w).problems) == 1


@pytest.mark.parametrize(
    "name, data, line, size",
    [
        ("big.csv", "rows,cols\n100,200\n3000000000,4\n", 3, "rows"),
        ("big.yaml", "- {rows: 100, cols: 200}\n- {rows: 5, cols: 2147483648}\n", 2, "cols"),
    ],
)
def test_sizes_above_int32_refused_when_read(tmp_path: Path, name: str, data: str, line: int, size: str) -> None:
    f = _write(tmp_path, name, data)
    with pytest.raises(UserError) as err:
        read_points(f, _transpose(), DerivedRule(SizeRule()))
    assert err.value.line == line and size in err.value.message and "2^31 - 1" in err.value.message, str(err.value)
    g = _write(
        tmp_path,
        "g" + name,
        "precision,shape,m,n,k,batch\nfp32,NN,8,8,8,4294967296\n"
        if name.endswith(".csv")
        else "- {precision: fp32, shape: NN, m: 8, n: 8, k: 8, batch: 4294967296}\n",
    )
    with pytest.raises(UserError, match="above 2\\^31 - 1") as err:
        read_points(g, GEMM, RULE)
    assert err.value.line == (2 if name.endswith(".csv") else 1)


def test_points_rows_are_limited_by_the_workload_knob(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = _write(tmp_path, "p.csv", "precision,shape,m,n,k\n" + "".join(f"fp32,NN,{i},8,8\n" for i in range(1, 6)))
    assert len(read_points(f, GEMM, RULE)) == 5
    monkeypatch.setenv("AUTOTUNE_MAX_PROBLEMS", "4")
    with pytest.raises(UserError) as err:
        read_points(f, GEMM, RULE)
    assert "above the limit of 4" in err.value.message and "AUTOTUNE_MAX_PROBLEMS" in str(err.value)
    assert "--max-problems" in str(err.value) and err.value.file == str(f)
    y = _write(
        tmp_path, "p.yaml", "".join(f"- {{precision: fp32, shape: NN, m: {i}, n: 8, k: 8}}\n" for i in range(1, 6))
    )
    with pytest.raises(UserError, match="above the limit of 4") as err:
        read_points(y, GEMM, RULE)
    assert err.value.line == 5


def test_points_accept_the_workload_header(tmp_path: Path) -> None:
    """A workload CSV (shape optional, a weight column) is a points file; its rows read as the same problems."""
    text = "# logged\nprecision,m,n,k,weight\nfp32,8,16,32,2\nfp32,8,16,32,1\nfp64,4,4,4,\n"
    f = _write(tmp_path, "w.csv", text)
    got = read_points(f, GEMM, DerivedRule(SizeRule()))
    assert got == [p for p, _ in load_workload(f).problems] and len(got) == 2


@pytest.mark.slow
def test_a_large_csv_reads_in_seconds(tmp_path: Path) -> None:
    """200,000 rows (logs repeat problems) read in a few seconds: before the shared reader each row built its
    point (about 40 s for 10^6 rows)."""
    rows = "".join(f"fp32,NN,{64 << (i % 5)},{32 * (1 + i % 40)},{(64, 4096)[i % 2]},1\n" for i in range(200_000))
    f = _write(tmp_path, "w.csv", "precision,shape,m,n,k,weight\n" + rows)
    start = time.process_time()
    wl = load_workload(f)
    assert time.process_time() - start < 3.0 and len(wl.problems) == 40  # 5 x 40 x 2 combinations, in step
    assert math.isclose(wl.total_weight, 200_000)


# ------------------------------------------------------------------------------------------------ property
HEAD = ["precision", "shape", "m", "n", "k", "batch", "weight"]
GOOD = {
    "precision": st.sampled_from(["fp32", "fp64", " fp16 "]),
    "shape": st.sampled_from(["NN", "TN", ""]),
    "weight": st.sampled_from(["1", "2.5", "", "1e3"]),
    "batch": st.sampled_from(["", "3", "17"]),
}
BAD = {
    "precision": st.sampled_from(["fp8", "", "FP32"]),
    "shape": st.sampled_from(["XX", "nn"]),
    "weight": st.sampled_from(["0", "-1", "nan", "inf", "heavy"]),
}
GOOD_SIZE = st.integers(1, 64).map(str) | st.sampled_from([" 8 ", "08", "2147483647"])
BAD_SIZE = st.sampled_from(["", "0", "-3", "2.5", "3000000000", "99999999999999999999999", "x", "\u0663", "+5"])


@st.composite
def csv_files(draw: st.DrawFn) -> bytes:
    """A hostile CSV: a header of mostly known columns (sometimes missing, extra or twice), rows of mostly good
    cells (sometimes one bad cell, a quoted one, one too many or too few), blank and comment lines, CRLF, a BOM,
    random bytes."""
    if draw(st.integers(0, 5)):
        head = draw(
            st.permutations([h for h in HEAD if h not in draw(st.sets(st.sampled_from(["shape", "batch", "weight"])))])
        )
    else:
        head = draw(st.lists(st.sampled_from(HEAD + ["kk", ""]), max_size=8))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    out = [",".join(head)]
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.integers(0, 39))
        if kind == 0:
            out.append(draw(st.sampled_from(["", "# a comment, with a comma", ",,", "  ", '# "quoted'])))
            continue
        cells = [draw(GOOD.get(h, GOOD_SIZE)) for h in head]
        if kind == 1 and cells:
            i = draw(st.integers(0, len(cells) - 1))
            cells[i] = draw(BAD.get(head[i], BAD_SIZE))
        cells = cells + ["1"] if kind == 2 else cells[:-1] if kind == 3 else cells
        if kind == 4:
            cells = [f'"{c}"' if draw(st.booleans()) else c for c in cells]
        if kind == 5 and cells:
            cells[0] = draw(st.sampled_from(['"8\n9"', '"8,9"', '"fp32"']))
        out.append(",".join(cells))
    data = (BOM if draw(st.booleans()) else b"") + (eol.join(out) + eol * draw(st.booleans())).encode()
    if draw(st.integers(0, 7)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=3)) + data[at:]
    return data


def reference(data: bytes, limit: int, rule: SizeRule) -> list | None:
    """The spec, row by row: the distinct GEMM problems with their summed weights, or None for an error."""
    if data.count(b"\n") + (not data.endswith(b"\n")) - 1 > limit:
        return None
    try:
        text = data.decode("utf-8-sig")
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except (UnicodeDecodeError, csv.Error):
        return None
    rows = [[c.strip() for c in r] for r in rows if r and r[0].lstrip()[:1] != "#" and "".join(r).strip()]
    if not rows:
        return None
    head, body = rows[0], rows[1:]
    if set(head) - set(HEAD) or len(set(head)) < len(head) or not {"precision", "m", "n", "k"} <= set(head):
        return None
    out: dict = {}
    for r in body:
        if len(r) != len(head):
            return None
        c = dict(zip(head, r, strict=True))
        if c["precision"] not in GEMM.precisions or c.get("shape", "NN") not in GEMM.shapes + ("",):
            return None
        sizes = {}
        for n in ("m", "n", "k", "batch"):
            v = c.get(n, "")
            if v == "" and n != "batch" or v and not (re.fullmatch(r"[0-9]+", v) and 1 <= int(v) <= INT32_MAX):
                return None
            if v:
                sizes[n] = int(v)
        try:
            w = float(c.get("weight") or "1")
        except ValueError:
            return None
        if not (math.isfinite(w) and w > 0):
            return None
        shape = c.get("shape") or "NN"
        point = GEMM.point(c["precision"], shape, rule.fill(GEMM, c["precision"], shape, sizes))
        if GEMM.check_limits(point):
            return None
        out[point] = out.get(point, 0.0) + w
    return list(out.items()) or None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=csv_files(), limit=st.one_of(st.just(200_000), st.integers(1, 4)))
def test_hostile_csv_files_parse_as_the_reference_or_fail_cleanly(tmp_path: Path, data: bytes, limit: int) -> None:
    f = tmp_path / "h.csv"
    f.write_bytes(data)
    rule = SizeRule(budget_bytes=500 * 10**6)  # the workload's default rule
    want = reference(data, limit, rule)
    for what, read in (
        ("workload", lambda: list(load_workload(f, limit=limit).problems)),
        ("points", lambda: [(p, 1.0) for p in read_points(f, GEMM, DerivedRule(rule), limit)]),
    ):
        try:
            got = read()
        except UserError as exc:
            assert want is None, f"{what}: {exc} but the reference reads {want}"
            assert exc.file is not None and Path(exc.file).name == "h.csv" and exc.line is not None, str(exc)
            continue
        assert want is not None, f"{what}: read {got} where the reference finds a mistake"
        assert [p for p, _ in got] == [p for p, _ in want], what
        if what == "workload":  # duplicates add their weights
            assert all(math.isclose(a, b) for (_, a), (_, b) in zip(got, want, strict=True)), (got, want)


YAML_VALUES = st.one_of(
    st.integers(-3, 40),
    st.sampled_from(
        ["fp32", "NN", "''", "2.5", "3000000000", "[1, 2]", "{a: 1}", "null", "true", "!!binary aGk=", "~"]
    ),
)


@st.composite
def yaml_files(draw: st.DrawFn) -> bytes:
    entries = []
    for _ in range(draw(st.integers(0, 5))):
        keys = draw(st.lists(st.sampled_from(HEAD + ["kk"]), max_size=7))
        entries.append("- {" + ", ".join(f"{k}: {draw(YAML_VALUES)}" for k in keys) + "}")
    text = "\n".join(entries) if draw(st.integers(0, 6)) else draw(st.sampled_from(["", "{a: 1}", "- [", "7"]))
    data = (BOM if draw(st.booleans()) else b"") + text.encode()
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=3)) + data[at:]
    return data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=yaml_files(), limit=st.one_of(st.just(200_000), st.integers(1, 3)))
def test_hostile_yaml_points_read_or_fail_cleanly(tmp_path: Path, data: bytes, limit: int) -> None:
    f = tmp_path / "h.yaml"
    f.write_bytes(data)
    try:
        got = read_points(f, GEMM, RULE, limit)
    except UserError as exc:
        assert exc.file is not None and Path(exc.file).name == "h.yaml", str(exc)
        return
    assert 0 < len(got) <= limit and all(1 <= v <= INT32_MAX for p in got for _, v in p.sizes)


# ------------------------------------------------------------------------------------------------ command line
HOSTILE = {
    "utf8.csv": NOT_UTF8,
    "big.csv": b"rows,cols\n100,200\n3000000000,4\n",
    "rows.csv": b"rows,cols\n" + b"".join(b"%d,8\n" % i for i in range(1, 6)),
    "quote.csv": b'rows,cols\n"100,200\n',
    "utf8.yaml": b"- {rows: 1, cols: \xff}\n",
    "big.yaml": b"- {rows: 1, cols: 4294967296}\n",
    "cells.csv": b"rows,cols\n1,2,3\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_cli_hostile_files_are_one_error_line(tmp_path: Path, name: str) -> None:
    f = _write(tmp_path, name, HOSTILE[name])
    package = Path(autotune.__file__).resolve().parents[1]  # the autotune this test imports
    env = {**os.environ, "PYTHONPATH": str(package), "AUTOTUNE_MAX_PROBLEMS": "4"}
    runs = [
        [
            "validate",
            str(TRANSPOSE / "results" / "dispatch.json"),
            "--space",
            str(TRANSPOSE / "space.yaml"),
            "--points",
            str(f),
            "--out",
            str(tmp_path / "out"),
            "--quiet",
        ]
    ]
    if name.endswith(".csv"):
        runs.append(["workload", "show", str(f), "--kind-space", str(TRANSPOSE / "space.yaml")])
    for args in runs:
        r = subprocess.run(
            [sys.executable, "-m", "autotune", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            cwd=tmp_path,
        )
        text = r.stdout + r.stderr
        errors = [line for line in text.splitlines() if line.startswith("error:")]
        assert r.returncode == 2 and len(errors) == 1 and "Traceback" not in text, text
        assert str(f) in errors[0] or f.name in errors[0], text
        assert not (tmp_path / "out").exists()
