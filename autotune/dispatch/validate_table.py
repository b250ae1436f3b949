"""What `autotune validate` reads of a dispatch table, for any problem kind: its kind and size names, its tuned
points, its kernels and its answer at a problem (`ValidatedTable`, made by `read_table`).

It reads the `DispatchTable` API of format version 3 (`table.kind`, `table.size_names`, points with
`sizes: {name: value}`, `table.lookup(precision, shape, sizes)` -> answer index: >= 0 a kernel, -1 the generic
kernel, -2 the library, -4 none); `load_table` upgrades tables of versions 1 and 2 on load. Tables of the retired
per-kind format are refused by load_table with a hint to write them again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from autotune.errors import UserError
from autotune.problems.base import ProblemKind
from autotune.problems.registry import BUILT_IN
from autotune.vocab import TestPoint

LIBRARY, GENERIC = "library", "generic"  # the answers that are no kernel of the table
GENERIC_INDEX, LIBRARY_INDEX = -1, -2


@dataclass(frozen=True, eq=False)
class ValidatedTable:
    """A dispatch table as validation sees it. `points`: the tuned points as {precision, shape, sizes};
    `kernels`: the table's kernel records (instance_id, space, ...); `index(point)`: the answer index."""

    data: Mapping[str, Any]
    kind_name: str
    size_names: tuple[str, ...]
    points: tuple[Mapping[str, Any], ...]
    kernels: tuple[Mapping[str, Any], ...]
    provenance: Mapping[str, Any]
    index: Callable[[TestPoint], int]

    def answer(self, point: TestPoint) -> str:
        """The table's answer at a problem: an instance id, LIBRARY or GENERIC."""
        i = int(self.index(point))
        return LIBRARY if i == LIBRARY_INDEX else GENERIC if i < 0 else str(self.kernels[i]["instance_id"])

    def tuned(self, kind: ProblemKind) -> list[TestPoint]:
        """The tuned points as test points of `kind`."""
        return [kind.point(p["precision"], p["shape"], p["sizes"]) for p in self.points]


def read_table(path: Path) -> ValidatedTable:
    """The dispatch table at `path` (any version, any kind). Raises UserError."""
    from autotune.dispatch.table import load_table

    if not path.is_file():
        raise UserError(
            f"no dispatch table {path}",
            hint="give a dispatch.json written by `autotune report` or `autotune emit --format json`",
        )
    table = load_table(path)  # checked; version 1 and 2 upgraded, the retired per-kind format refused
    data = table.data
    points = tuple(
        {"precision": p["precision"], "shape": p["shape"], "sizes": dict(p["sizes"])} for p in data["points"]
    )
    return ValidatedTable(
        data,
        str(table.kind),
        tuple(table.size_names),
        points,
        tuple(data["kernels"]),
        table.provenance,
        lambda p: table.lookup(p.precision, p.shape, dict(p.sizes)),
    )


def table_kind(table: ValidatedTable, space_files: Sequence[Path]) -> ProblemKind:
    """The problem kind of the table: a built-in kind by name, else the kind of a space file (`space_files`:
    those of its kernels and the given ones) that solves it. Raises UserError."""
    if table.kind_name in BUILT_IN:
        return BUILT_IN[table.kind_name]
    from autotune.space.spec import load_space

    for path in space_files:
        kind = load_space(path).kind
        if kind.name == table.kind_name:
            if tuple(kind.size_names) != table.size_names:
                raise UserError(
                    f"the space {path} defines {kind.name} with the sizes {', '.join(kind.size_names)}; "
                    f"the table has {', '.join(table.size_names)}",
                    hint="give the space file the table was made from (--space FILE)",
                )
            return kind
    raise UserError(
        f"the table's kind {table.kind_name!r} is not built in and no space file defines it",
        hint="pass --space FILE (the space file whose `problem:` defines it), or the database the table was made "
        "from (validate's --db, active's TUNING_DB)",
    )
