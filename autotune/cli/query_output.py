"""`autotune query`'s output bounded in bytes as well as rows: one value can be a gigabyte (`hex(randomblob(5e8))`),
and the plain-text table pads every row to its column's widest value. Values longer than their share of
`--max-bytes` are cut (marked with `…`), then the rows that fit are written; the caller says on stderr what was
left out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

CUT = "…"


@dataclass(frozen=True)
class Fitted:
    frame: pd.DataFrame
    rows_left: int  # rows of the frame given that were not kept
    values_cut: int  # values cut to fit
    cut_at: int  # the length they were cut to (characters)


def fit(frame: pd.DataFrame, max_bytes: int, padded: bool) -> Fitted:
    """The rows and values of `frame` that render within about `max_bytes`: as a padded table (`padded`: every row
    as wide as the widest value of each column so far) or as CSV."""
    import numpy as np

    columns = len(frame.columns)
    if not len(frame) or not columns:
        return Fitted(frame, 0, 0, 0)
    # a row of values each at most its share fits (a padded table: and a header line as wide)
    cap = max(16, max_bytes // (columns * (2 if padded else 1)) - 2)
    text = frame.astype(str)
    # (a missing value has no length: as wide as its "None"/"NaN")
    # by position: SQL may name two columns alike (`SELECT p.n, COUNT(*) n`), and text[name] is then a frame
    lengths = np.column_stack([text.iloc[:, i].str.len().fillna(4).to_numpy(dtype=np.int64) for i in range(columns)])
    long = lengths > cap
    cut = int(long.sum())
    if cut:
        frame = frame.astype(object).copy()
        for i in range(columns):
            rows = np.flatnonzero(long[:, i])
            if len(rows):
                frame.iloc[rows, i] = [text.iloc[r, i][: cap - 1] + CUT for r in rows]
        lengths = np.minimum(lengths, cap)
    header = np.array([len(str(c)) for c in frame.columns])
    if padded:  # every line as wide as the widest values so far, two spaces between columns
        widths = np.maximum(np.maximum.accumulate(lengths, axis=0), header)
        total = (np.arange(len(frame)) + 2) * (widths.sum(axis=1) + 2 * columns)
    else:  # CSV: the values, a comma or newline after each
        total = header.sum() + columns + np.cumsum(lengths.sum(axis=1) + columns)
    keep = max(1, int(np.searchsorted(total, max_bytes, side="right")))
    return Fitted(frame.iloc[:keep], len(frame) - keep, cut, cap)


def clipped(text: str, max_bytes: int) -> tuple[str, bool]:
    """`text` cut to at most `max_bytes` bytes of UTF-8 (the last line ends with a newline), and whether it was cut:
    the bound holds whatever the estimate of `fit` missed (a float's printed digits, wide characters)."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text, False
    return data[: max(0, max_bytes - 1)].decode(errors="ignore") + "\n", True
