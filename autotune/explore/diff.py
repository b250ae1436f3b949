"""`autotune space diff A B`: what changed between two versions of a space.

Compares the parameters (values added and removed), the derived quantities, the hard and soft constraints (added,
removed, expression or reason changed) and the kernel binding, then, unless told not to, the counts: raw
combinations, after the hard constraints, after all constraints, and each funnel step of either version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from autotune.space.spec import Space


@dataclass
class SpaceDiff:
    a: str
    b: str
    lines: list[tuple[str, str, str]] = field(default_factory=list)  # (section, what, detail)
    counts: list[tuple[str, int | None, int | None]] = field(default_factory=list)  # (step, count in A, count in B)

    @property
    def same(self) -> bool:
        return not self.lines and all(x == y for _, x, y in self.counts)


def _values(values: Sequence[Any]) -> str:
    vs = list(values)
    return ", ".join(map(str, vs)) if len(vs) <= 12 else f"{', '.join(map(str, vs[:10]))}, ... ({len(vs)} values)"


def diff_spaces(a: Space, b: Space) -> SpaceDiff:
    out = SpaceDiff(a.name, b.name)
    add = out.lines.append
    if a.name != b.name:
        add(("space", "name", f"{a.name} -> {b.name}"))
    if a.description != b.description:
        add(("space", "description", "changed"))
    pa = {p.name: p for p in a.parameters}
    pb = {p.name: p for p in b.parameters}
    for n in [n for n in pa if n not in pb]:
        add(("parameter", f"- {n}", f"removed ({len(pa[n].values)} values: {_values(pa[n].values)})"))
    for n in [n for n in pb if n not in pa]:
        add(("parameter", f"+ {n}", f"added ({len(pb[n].values)} values: {_values(pb[n].values)})"))
    for n in [n for n in pa if n in pb]:
        va, vb = pa[n].values, pb[n].values
        if va != vb:
            sa, sb = set(va), set(vb)  # once: a comprehension's condition is evaluated per value
            gone = [v for v in va if v not in sb]
            new = [v for v in vb if v not in sa]
            detail = f"{len(va)} -> {len(vb)} values"
            if gone:
                detail += f"; removed {_values(tuple(gone))}"
            if new:
                detail += f"; added {_values(tuple(new))}"
            if not gone and not new:
                detail += "; same values, new order"
            add(("parameter", f"~ {n}", detail))
    da = {n: loc.expr.text for n, loc in a.derived}
    db = {n: loc.expr.text for n, loc in b.derived}
    _mapping(add, "derived", da, db)
    for kind in ("hard", "soft"):
        ca = {c.name: c for c in getattr(a, kind)}
        cb = {c.name: c for c in getattr(b, kind)}
        for n in [n for n in ca if n not in cb]:
            add((kind, f"- {n}", f"removed: {ca[n].expr.text}"))
        for n in [n for n in cb if n not in ca]:
            add((kind, f"+ {n}", f"added: {cb[n].expr.text}"))
        for n in [n for n in ca if n in cb]:
            if ca[n].expr.text != cb[n].expr.text:
                add((kind, f"~ {n}", f"{ca[n].expr.text}  ->  {cb[n].expr.text}"))
            elif ca[n].reason != cb[n].reason:
                add((kind, f"~ {n}", f"reason: {ca[n].reason!r} -> {cb[n].reason!r}"))
    ka, kb = a.kernel, b.kernel
    if (ka is None) != (kb is None):
        add(("kernel", "binding", "added" if ka is None else "removed"))
    elif ka is not None and kb is not None:
        for f in ka.__dataclass_fields__:
            if f == "path":  # where the file resolved: differs between two copies of one space
                continue
            x, y = _text(getattr(ka, f)), _text(getattr(kb, f))
            if x != y:
                add(("kernel", f, f"{x} -> {y}"))
    return out


def _text(v: object) -> str:
    """A kernel field as written (expressions as their text, without line numbers)."""
    if hasattr(v, "expr") and hasattr(v, "line"):
        return str(v.expr.text)  # type: ignore[attr-defined]
    if isinstance(v, tuple):
        return "(" + ", ".join(_text(x) for x in v) + ")"
    if hasattr(v, "__dataclass_fields__"):
        return "{" + ", ".join(f"{k}: {_text(getattr(v, k))}" for k in v.__dataclass_fields__) + "}"
    return str(v)


def _mapping(add, section: str, a: dict, b: dict) -> None:  # type: ignore[no-untyped-def]
    for n in [n for n in a if n not in b]:
        add((section, f"- {n}", f"removed: {a[n]}"))
    for n in [n for n in b if n not in a]:
        add((section, f"+ {n}", f"added: {b[n]}"))
    for n in [n for n in a if n in b and a[n] != b[n]]:
        add((section, f"~ {n}", f"{a[n]}  ->  {b[n]}"))


def add_counts(d: SpaceDiff, fa: list, fb: list) -> None:
    """The funnels of both versions (lists of FunnelStep) side by side, by step name."""
    ca = {f.name: f.remaining for f in fa}
    cb = {f.name: f.remaining for f in fb}
    hard_a = [f for f in fa if f.kind != "soft"][-1].remaining
    hard_b = [f for f in fb if f.kind != "soft"][-1].remaining
    d.counts.append(("raw combinations", fa[0].remaining, fb[0].remaining))
    d.counts.append(("after the hard constraints", hard_a, hard_b))
    d.counts.append(("after all constraints", fa[-1].remaining, fb[-1].remaining))
    for name in dict.fromkeys([f.name for f in fa[1:]] + [f.name for f in fb[1:]]):
        d.counts.append((f"  after {name}", ca.get(name), cb.get(name)))
