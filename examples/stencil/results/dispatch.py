"""Dispatch table of the problem kind convolution5x5 (autotune, autotune-dispatch-kind v1). lookup(precision, shape='', **sizes) -> {'kernel': index into KERNELS or LIBRARY, 'point': the tuned point}."""
import json
import math

TABLE = json.loads(r"""{
 "format": "autotune-dispatch-kind",
 "version": 1,
 "kind": "convolution5x5",
 "size_names": [
  "ny",
  "nx"
 ],
 "tol": 0.05,
 "bk": 10,
 "library": "baseline",
 "library_index": -2,
 "kernels": [
  {
   "instance_id": "1aecef887e378284",
   "space": "convolution_5x5",
   "name": "convolution_5x5_block_size_x64_block_size_y1_tile_size_x1_tile_size_y4_use_shmem0_use_padding0_read_only1",
   "params": {
    "block_size_x": 64,
    "block_size_y": 1,
    "tile_size_x": 1,
    "tile_size_y": 4,
    "use_shmem": 0,
    "use_padding": 0,
    "read_only": 1
   },
   "source": "convolution.cu",
   "function": "convolution_kernel",
   "defines": {
    "block_size_x": "64",
    "block_size_y": "1",
    "tile_size_x": "1",
    "tile_size_y": "4",
    "use_shmem": "0",
    "use_padding": "0",
    "read_only": "1"
   }
  }
 ],
 "points": [
  {
   "precision": "fp32",
   "shape": "",
   "sizes": {
    "ny": 4000,
    "nx": 3001
   },
   "best_ms": 0.060095999389886856,
   "baseline_ms": 0.2625119984149933,
   "kernel": 0,
   "answer_ms": 0.06070400029420853,
   "loss": 0.010015829292549516
  },
  {
   "precision": "fp32",
   "shape": "",
   "sizes": {
    "ny": 4096,
    "nx": 4096
   },
   "best_ms": 0.08076800033450127,
   "baseline_ms": 0.36316800117492676,
   "kernel": 0,
   "answer_ms": 0.0822720006108284,
   "loss": 0.01828082780485074
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
