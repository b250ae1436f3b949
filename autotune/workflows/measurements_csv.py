"""A measurements CSV as `analyze`, `report`, `emit` and `compare` read it instead of a database: the rows of
`Store.measurements()` (instance_id, precision, shape, the kind's sizes, status, median_ms, p20_ms, p80_ms, ...).
Anything else (another CSV, a binary file, sizes that are not whole numbers) is one UserError naming the file, and
the line where one is at fault, before any analysis runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotune.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

REQUIRED = ("instance_id", "precision", "shape", "status", "median_ms")  # p20_ms, p80_ms: the median where absent
HINT = (
    "give a results database, or a CSV of its measurements (`Store.open(URL).measurements().to_csv(FILE)`: "
    "instance_id, precision, shape, the sizes, status, median_ms, ...; docs/queries.md)"
)


def read_measurements_csv(source: str, nrows: int | None = None) -> pd.DataFrame:
    """The CSV's rows (the first `nrows`), checked to be measurements of one kind's sizes (where any is verified:
    a CSV of failures only is the caller's "nothing verified to analyze")."""
    import pandas as pd

    from autotune.analysis.winners import Layout
    from autotune.yamlfile import check_text_file

    check_text_file(source, hint=HINT)
    try:
        frame = pd.read_csv(source, nrows=nrows)
    except UnicodeDecodeError as exc:
        raise UserError(f"not a measurements CSV: byte {exc.start} is not UTF-8", file=source, hint=HINT) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise UserError(f"not a measurements CSV: {' '.join(str(exc).split())}", file=source, hint=HINT) from None
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise UserError(
            f"not a measurements CSV: no column {', '.join(missing)} (it has {', '.join(map(str, frame.columns[:12]))})",
            file=source,
            line=1,
            hint=HINT,
        )
    for spread in ("p20_ms", "p80_ms"):
        if spread not in frame.columns:
            frame[spread] = frame["median_ms"]  # (at the end: not between `shape` and `status`, the sizes)
    if not (frame["status"].astype(str) == "ok").any():
        return frame  # nothing verified: the caller says so, with the failure counts
    try:
        layout = Layout.infer(frame)
    except ValueError as exc:
        raise UserError(f"not a measurements CSV: {exc}", file=source, line=1, hint=HINT) from None
    if not layout.sizes:
        raise UserError(
            "not a measurements CSV: no size columns between `shape` and `status`", file=source, line=1, hint=HINT
        )
    for name in layout.sizes:
        values = pd.to_numeric(frame[name], errors="coerce")
        bad = ~(values.notna() & (values >= 1) & (values % 1 == 0))
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise UserError(
                f"size {name} = {frame[name].iloc[row]!r} is not a whole number of at least 1",
                file=source,
                line=row + 2,
                hint=HINT,
            )
    return frame
