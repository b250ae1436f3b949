"""One self-contained HTML page of Plotly charts with filters, readable offline.

A `Page` holds sections of figures (Plotly figures as built by `plotly.graph_objects`) and a table of *groups*:
each group is a dict of filter fields (kind, precision, shape, point, space, device) that one trace, or one data
point of a trace, belongs to. A trace says which with its `meta`:

- `meta = {"g": 3}`: the whole trace belongs to group 3 (shown or hidden as a whole);
- `meta = {"g": [3, 3, 7, ...]}`: data point i belongs to group g[i]; a filter keeps the points whose group
  matches (x, y, text, customdata, marker colours and sizes, and a parallel-coordinates plot's dimensions are cut).

A group matches the filters when each filter that is set names the group's value for that field; a group without
the field matches every value (an importance chart per space is not cut by a test-point filter). The page embeds
plotly.js itself (`plotly.offline.get_plotlyjs()`), so it opens without a network; `window.autotuneExplore`
exposes what the browser tests read (charts drawn, points shown, the filters).
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

FILTER_FIELDS = ("device", "kind", "precision", "shape", "space", "point")
DIGITS = 5  # significant digits of the floats written into the page (keeps a large report small)
# the charts' colours: Plotly's ten, then light tints of the first eight
PALETTE = (
    "#1f77b4 #ff7f0e #2ca02c #d62728 #9467bd #8c564b #e377c2 #7f7f7f #bcbd22 #17becf "
    "#aec7e8 #ffbb78 #98df8a #ff9896 #c5b0d5 #c49c94 #f7b6d2 #dbdb8d"
).split()


def require_plotly() -> Any:
    """The plotly package, or a UserError that says how to install it."""
    try:
        import plotly
    except ImportError:
        from autotune.errors import UserError

        raise UserError(
            "`autotune explore` needs the plotly package, which is not installed",
            hint="pip install 'autotune[explore]' (or: pip install plotly), then run the command again",
        ) from None
    return plotly


@dataclass
class Figure:
    key: str
    title: str
    note: str
    spec: dict  # {"data": [...], "layout": {...}}
    height: int = 420


@dataclass
class Section:
    title: str
    intro: str = ""
    figures: list[Figure] = field(default_factory=list)
    html: str = ""  # a table or text shown under the intro


class Page:
    """A report page: title, notes, sections of figures, and the groups its filters act on."""

    def __init__(self, title: str, subtitle: str = "") -> None:
        self.title, self.subtitle = title, subtitle
        self.notes: list[str] = []
        self.sections: list[Section] = []
        self.groups: list[dict[str, str]] = []
        self._group_ids: dict[tuple, int] = {}

    def group(self, **fields: Any) -> int:
        """The id of the group with these filter fields (made on first use); None values are left out."""
        clean = {k: str(v) for k, v in fields.items() if v is not None and k in FILTER_FIELDS}
        key = tuple(sorted(clean.items()))
        gid = self._group_ids.get(key)
        if gid is None:
            gid = self._group_ids[key] = len(self.groups)
            self.groups.append(clean)
        return gid

    def section(self, title: str, intro: str = "") -> Section:
        s = Section(title, intro)
        self.sections.append(s)
        return s

    @property
    def figures(self) -> list[Figure]:
        return [f for s in self.sections for f in s.figures]

    def add(self, section: Section, key: str, title: str, fig: Any, note: str = "", height: int = 420) -> None:
        """Add a plotly Figure (graph_objects) to a section; its layout gets the page's defaults."""
        spec = fig.to_plotly_json()
        layout = spec.setdefault("layout", {})
        layout.setdefault("height", height)
        layout.setdefault("margin", {"l": 60, "r": 20, "t": 30, "b": 50})
        layout.pop("template", None)
        layout.setdefault("hovermode", "closest")
        section.figures.append(Figure(key, title, note, spec, height))

    def render(self) -> str:
        """The whole page as one HTML string."""
        plotly = require_plotly()
        from plotly.offline import get_plotlyjs

        options = {f: sorted({g[f] for g in self.groups if f in g}, key=_natural) for f in FILTER_FIELDS}
        fields = [f for f in FILTER_FIELDS if len(options[f]) > 1]  # a field with one value filters nothing
        payload = {
            "groups": self.groups,
            "fields": fields,
            "figures": [
                {"key": f.key, "data": f.spec.get("data", []), "layout": f.spec.get("layout", {})} for f in self.figures
            ],
        }
        body = [f"<h1>{html.escape(self.title)}</h1>"]
        if self.subtitle:
            body.append(f"<p class='sub'>{html.escape(self.subtitle)}</p>")
        body += [f"<p class='note'>{html.escape(n)}</p>" for n in self.notes]
        if fields:
            body.append("<div id='filters'><b>Filters</b> ")
            for f in fields:
                opts = "".join(
                    f"<option value='{html.escape(v, quote=True)}'>{html.escape(v)}</option>" for v in options[f]
                )
                body.append(
                    f"<label>{f} <select data-field='{f}' id='filter-{f}'><option value=''>all "
                    f"({len(options[f])})</option>{opts}</select></label> "
                )
            body.append("<button id='filter-reset'>reset</button> <span id='filter-status'></span></div>")
        body.append(
            "<nav>"
            + " · ".join(f"<a href='#s{i}'>{html.escape(s.title)}</a>" for i, s in enumerate(self.sections))
            + "</nav>"
        )
        for i, s in enumerate(self.sections):
            body.append(f"<section id='s{i}'><h2>{html.escape(s.title)}</h2>")
            if s.intro:
                body.append(f"<p>{html.escape(s.intro)}</p>")
            if s.html:
                body.append(s.html)
            for fig in s.figures:
                body.append(f"<div class='fig'><h3>{html.escape(fig.title)}</h3>")
                if fig.note:
                    body.append(f"<p class='note'>{html.escape(fig.note)}</p>")
                key = html.escape(fig.key, quote=True)  # a space or point name from a database is data
                body.append(f"<div class='chart' id='fig-{key}' style='height:{fig.height}px'></div></div>")
            body.append("</section>")
        data = script_json(_dumps(payload))
        return (
            f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='generator' content='autotune explore (plotly {plotly.__version__})'>"
            f"<title>{html.escape(self.title)}</title><style>{CSS}</style>"
            f"<script>{get_plotlyjs()}</script></head><body>{''.join(body)}"
            f"<script id='explore-data' type='application/json'>{data}</script>"
            f"<script>{JS}</script></body></html>\n"
        )


def table_html(rows: Iterable[dict], columns: list[str]) -> str:
    """A small HTML table (text cells escaped)."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(r.get(c)))}</td>" for c in columns) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _natural(v: str) -> tuple:
    import re

    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", v))


def _round(x: float) -> float | None:
    if x != x or x in (math.inf, -math.inf):
        return None
    if x == int(x) and abs(x) < 1e15:
        return int(x)
    return float(f"{x:.{DIGITS}g}")


def _plain(obj: Any) -> Any:
    """JSON-ready: numpy arrays and scalars as lists and numbers, floats rounded to DIGITS significant digits."""
    if isinstance(obj, dict):
        if "bdata" in obj and "dtype" in obj:  # plotly >= 6 stores numpy arrays as base64 typed arrays
            return _plain(_typed(obj))
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "f" and obj.ndim == 1:
            return [_round(v) for v in obj.tolist()]
        return _plain(obj.tolist())
    if isinstance(obj, (np.integer, np.bool_)):
        return obj.item()
    if isinstance(obj, (float, np.floating)):
        return _round(float(obj))
    return obj


def _typed(spec: dict) -> np.ndarray:
    """A plotly typed-array spec ({dtype, bdata, shape}) as the numpy array it was made from; the page's filters
    cut plain arrays."""
    import base64

    arr = np.frombuffer(base64.b64decode(spec["bdata"]), dtype=np.dtype(spec["dtype"]))
    shape = spec.get("shape")
    if shape:
        arr = arr.reshape([int(x) for x in str(shape).split(",")] if isinstance(shape, str) else shape)
    return arr.astype(float) if arr.dtype.kind == "f" else arr


# JSON inside a <script> element: "<!--<script>" in any string would put the parser in the script's double-escaped
# state, where our own </script> no longer ends the element and the page's code is swallowed (a blank page)
SCRIPT_ESCAPES: dict[str, str | int | None] = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def script_json(text: str) -> str:
    """JSON text safe inside a <script> element whatever its strings hold: <, >, & and the line separators U+2028
    and U+2029 as \\u escapes (they occur only inside JSON strings, where the escape means the same character)."""
    return text.translate(str.maketrans(SCRIPT_ESCAPES))


def _dumps(obj: Any) -> str:
    return json.dumps(_plain(obj), separators=(",", ":"), allow_nan=False, default=str)


CSS = """
body{font-family:system-ui,sans-serif;margin:0 2em 3em;color:#222;max-width:1400px}
h1{margin:.6em 0 .1em} h2{border-bottom:1px solid #ccc;margin-top:1.6em} h3{margin:.8em 0 .2em;font-size:1.05em}
.sub{color:#555;margin:0} .note{color:#666;font-size:.9em;margin:.2em 0}
#filters{position:sticky;top:0;background:#f5f7fa;border:1px solid #dde;padding:.5em;z-index:10}
#filters label{margin-right:1em} #filter-status{color:#555;font-size:.9em}
nav{margin:.6em 0;font-size:.9em} .fig{margin-bottom:1em}
.chart{width:100%} table{border-collapse:collapse;font-size:.85em} td,th{border:1px solid #ddd;padding:2px 6px}
"""

JS = r"""
(function(){
const P = JSON.parse(document.getElementById('explore-data').textContent);
// what the browser tests read: charts drawn, their draw times, points shown, filters, errors
const state = {figures: P.figures.length, drawn: 0, drawnKeys: {}, figureMs: {}, shown: {}, points: 0, filters: {},
               errors: [], ready: false, openMs: null};
window.autotuneExplore = state;
window.addEventListener('error', e => state.errors.push(String(e.message)));
const ARR = ['x','y','z','text','hovertext','customdata','ids','base','width'];
const byKey = {}; for (const fig of P.figures) byKey[fig.key] = fig;
function pick(a, idx){ return Array.isArray(a) ? idx.map(i => a[i]) : a; }
function matches(g, f){
  const grp = P.groups[g];
  for (const k in f){ if (f[k] !== '' && (k in grp) && grp[k] !== f[k]) return false; }
  return true;
}
function cut(orig, f){  // the trace as the filters show it, and how many of its data points are left
  const g = orig.meta && orig.meta.g, vis = orig.visible === undefined ? true : orig.visible;
  const t = Object.assign({}, orig);
  if (g === undefined || g === null) return [t, 0];
  if (!Array.isArray(g)) { const ok = matches(g, f); t.visible = ok ? vis : false; return [t, ok ? 1 : 0]; }
  const idx = []; for (let i = 0; i < g.length; i++) if (matches(g[i], f)) idx.push(i);
  t.visible = idx.length ? vis : false;
  for (const a of ARR) if (Array.isArray(orig[a])) t[a] = pick(orig[a], idx);
  if (orig.marker){ t.marker = Object.assign({}, orig.marker);
    for (const a of ['color','size','symbol','opacity']) if (Array.isArray(orig.marker[a])) t.marker[a] = pick(orig.marker[a], idx); }
  if (orig.line && Array.isArray(orig.line.color)) { t.line = Object.assign({}, orig.line); t.line.color = pick(orig.line.color, idx); }
  if (orig.dimensions) t.dimensions = orig.dimensions.map(d => Object.assign({}, d, {values: pick(d.values, idx)}));
  return [t, idx.length];
}
function view(fig){
  const out = fig.data.map(o => cut(o, state.filters));
  state.shown[fig.key] = out.filter(c => c[0].visible !== false).length;
  return [out.map(c => c[0]), out.reduce((s, c) => s + c[1], 0)];
}
function count(){
  if (Object.values(state.filters).some(v => v)) { state.points = P.figures.reduce((s, fig) => s + view(fig)[1], 0); return; }
  let total = 0;  // nothing filtered: count without cutting a copy of every trace
  for (const fig of P.figures){
    state.shown[fig.key] = fig.data.filter(t => t.visible !== false).length;
    for (const t of fig.data){ const g = t.meta && t.meta.g; total += Array.isArray(g) ? g.length : (g === undefined || g === null ? 0 : 1); }
  }
  state.points = total;
}
const pending = {};
function draw(key){  // charts are drawn when they come near the viewport (a long report opens at once)
  if (pending[key]) return pending[key];
  const fig = byKey[key], el = document.getElementById('fig-' + key), t1 = performance.now();
  pending[key] = Plotly.newPlot(el, view(fig)[0], fig.layout, {responsive: true, displaylogo: false})
    .then(() => { state.drawn += 1; state.drawnKeys[key] = true; state.figureMs[key] = Math.round(performance.now() - t1); })
    .catch(e => { state.errors.push(key + ': ' + e); });
  return pending[key];
}
state.drawAll = () => Promise.all(P.figures.map(f => draw(f.key)));
function apply(){
  state.ready = false; count();
  const jobs = P.figures.filter(f => state.drawnKeys[f.key]).map(f =>
    Plotly.react(document.getElementById('fig-' + f.key), view(f)[0], document.getElementById('fig-' + f.key).layout));
  return Promise.all(jobs).then(() => {
    const st = document.getElementById('filter-status');
    if (st) st.textContent = Object.values(state.filters).some(v => v) ? ('filtered: ' + state.points.toLocaleString() + ' data points shown') : '';
    state.ready = true;
  }).catch(e => { state.errors.push(String(e)); state.ready = true; });
}
for (const sel of document.querySelectorAll('#filters select')){
  state.filters[sel.dataset.field] = '';
  sel.addEventListener('change', () => { state.filters[sel.dataset.field] = sel.value; apply(); });
}
const reset = document.getElementById('filter-reset');
if (reset) reset.addEventListener('click', () => {
  for (const sel of document.querySelectorAll('#filters select')) { sel.value = ''; state.filters[sel.dataset.field] = ''; }
  apply(); });
count();
const first = P.figures.filter(f => { const r = document.getElementById('fig-' + f.key).getBoundingClientRect();
  return r.top < window.innerHeight && r.bottom > 0; });
Promise.all(first.map(f => draw(f.key))).then(() => { state.openMs = Math.round(performance.now()); state.ready = true; });
if ('IntersectionObserver' in window){
  const io = new IntersectionObserver(es => { for (const e of es) if (e.isIntersecting) { draw(e.target.id.slice(4)); io.unobserve(e.target); } },
                                      {rootMargin: '300px'});
  for (const f of P.figures) io.observe(document.getElementById('fig-' + f.key));
} else { state.drawAll(); }
})();
"""
