#!/usr/bin/env python3
"""An independent timer for the softmax example's library baseline (PyTorch's fused softmax), on a GPU: at the
smallest problems of one or more validation.csv files, 64 softmax calls over 8 rotating input/output copies are
captured in a CUDA graph, and one replay is timed with CUDA events (per call: the replay / 64). No host work falls
between the kernels, so this is the kernels' time; the validations' baseline_ms is printed beside it. A
baseline_ms well above the graph's time means the runner timed PyTorch's host call, not its kernel.

    python3 scripts/check_softmax_baseline.py [--smallest 16] VALIDATION_CSV [VALIDATION_CSV ...]
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd


def graph_ms(rows: int, cols: int, copies: int = 8, calls: int = 64, replays: int = 5) -> float:
    import torch

    xs = [torch.randn(rows, cols, device="cuda") for _ in range(copies)]
    ys = [torch.empty_like(x) for x in xs]
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for i in range(3):  # warm up outside the capture
            torch.ops.aten._softmax.out(xs[i % copies], 1, False, out=ys[i % copies])
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for i in range(calls):
            torch.ops.aten._softmax.out(xs[i % copies], 1, False, out=ys[i % copies])
    graph.replay()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / calls)
    return best


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", nargs="+", help="validation.csv files of the softmax example (columns rows, cols)")
    ap.add_argument("--smallest", type=int, default=16, help="problems per file, the smallest by rows x cols")
    args = ap.parse_args(argv)
    print("| validation | rows x cols | baseline_ms (validation) | PyTorch by CUDA graph, ms | ratio |")
    print("|---|---|---|---|---|")
    for path in args.csv:
        frame = pd.read_csv(path)
        frame = frame.assign(n=frame["rows"] * frame["cols"]).sort_values("n").head(args.smallest)
        for r in frame.to_dict("records"):
            g = graph_ms(int(r["rows"]), int(r["cols"]))
            print(
                f"| {path} | {r['rows']} x {r['cols']} | {r['baseline_ms']:.4f} | {g:.4f} | {r['baseline_ms'] / g:.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
