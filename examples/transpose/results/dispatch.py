"""Dispatch table of the problem kind transpose (autotune, autotune-dispatch-kind v1). lookup(precision, shape='', **sizes) -> {'kernel': index into KERNELS or LIBRARY, 'point': the tuned point}."""
import json
import math

TABLE = json.loads(r"""{
 "format": "autotune-dispatch-kind",
 "version": 1,
 "kind": "transpose",
 "size_names": [
  "rows",
  "cols"
 ],
 "tol": 0.05,
 "bk": 10,
 "library": "baseline",
 "library_index": -2,
 "kernels": [
  {
   "instance_id": "1a99c955b8765bf3",
   "space": "transpose_tiled",
   "name": "transpose_tiled_block_size_x16_block_size_y32_TILE_DIM64_PAD1",
   "params": {
    "block_size_x": 16,
    "block_size_y": 32,
    "TILE_DIM": 64,
    "PAD": 1
   },
   "source": "transpose.cu",
   "function": "transpose_kernel",
   "defines": {
    "block_size_x": "16",
    "block_size_y": "32",
    "TILE_DIM": "64",
    "PAD": "1"
   }
  }
 ],
 "points": [
  {
   "precision": "fp32",
   "shape": "",
   "sizes": {
    "rows": 4000,
    "cols": 3001
   },
   "best_ms": 0.03932800143957138,
   "baseline_ms": 0.10318400338292122,
   "kernel": 0,
   "answer_ms": 0.03932800143957138,
   "loss": 0.0
  },
  {
   "precision": "fp32",
   "shape": "",
   "sizes": {
    "rows": 4096,
    "cols": 4096
   },
   "best_ms": 0.05067200027406216,
   "baseline_ms": 0.13916800171136856,
   "kernel": 0,
   "answer_ms": 0.05067200027406216,
   "loss": 0.0
  },
  {
   "precision": "fp32",
   "shape": "",
   "sizes": {
    "rows": 8192,
    "cols": 8192
   },
   "best_ms": 0.18903999775648117,
   "baseline_ms": 0.5417279899120331,
   "kernel": 0,
   "answer_ms": 0.18903999775648117,
   "loss": 0.0
  }
 ]
}""")
KERNELS = TABLE['kernels']
LIBRARY = -2


def _lookup(table, precision: str, shape='', **sizes) :
    """The answer for a problem: {"kernel": index, or table["library_index"] for the library, "point": the tuned
    point it comes from}. Raises ValueError for input the table cannot answer."""
    names = table["size_names"]
    if set(sizes) != set(names):
        raise ValueError(f"{table['kind']} takes the sizes {', '.join(names)}; got {', '.join(sizes) or 'none'}")
    for n, v in sizes.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"size {n} must be an integer >= 1, got {v!r}")
    candidates = [p for p in table["points"] if p["precision"] == precision and p["shape"] == shape]
    if not candidates:
        known = sorted({(p["precision"], p["shape"]) for p in table["points"]})
        raise ValueError(f"no tuned point of precision {precision!r} and variant {shape!r}; the table has "
                         + ", ".join(f"{a}/{b or '-'}" for a, b in known))
    best = min(candidates, key=lambda p: sum(abs(math.log2(sizes[n] / p["sizes"][n])) for n in names))
    if best["kernel"] is None:
        raise ValueError("no kernel serves the nearest tuned point and the table has no library answer")
    return {"kernel": best["kernel"], "point": best["sizes"]}


def lookup(precision, shape='', **sizes):
    return _lookup(TABLE, precision, shape, **sizes)
