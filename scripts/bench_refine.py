"""Issue 32 item 3: runtime refinement at a committed validation's held-out problems, scored as validation.csv is
(against the best of all candidates the validation measured there, by the validation's medians).

- Default (a replay, any machine): refinement's timer answers with the validation's own medians, so this is what
  refinement chooses when each of its timings agrees with the validation (`figures.refined_frame`).
- `--gpu` (on a GPU): refinement times its candidates for real, as a deployed table would (the GPU backend: compile,
  verify, `--reps` timed repetitions, the median; `refine_timer.backend_timer`), chooses by those timings, and the
  choice is scored by the validation's medians. It also prints what a first call at a new problem cost (seconds
  of timing per problem; the first problem of a table also compiles its kernels) and how often the timed choice
  equals the replayed one.

    python3 scripts/bench_refine.py                       # the fp32/fp64 model table and tables2 fp16, replayed
    python3 scripts/bench_refine.py --gpu --top 2 --out DIR [--space FILE] TABLE VALIDATION_DIR TUNING_DB [...]

TABLE: a dispatch.json; VALIDATION_DIR: `autotune validate`'s output folder (validation.csv and validation.sqlite
or its packed .xz); TUNING_DB: the database the table was made from (its kernels' spaces and parameters).
--out writes per table and K `refined_<name>_top<K>.csv` (every problem: refined choice, its time and loss, the
replayed choice, the seconds its first call spent timing) and `refine.json` (the figures).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from autotune.dispatch.figures import answer_name, refined_frame, scored_refined, validated_figures
from autotune.dispatch.validate_table import read_table, table_kind

DEFAULT = [
    "results/small_tables_h100/model/dispatch.json",
    "results/small_tables_h100/model/validation",
    "results/small_tables_h100/small_tables_h100.sqlite.xz",
    # the fp16 table of tables2 at its seed-3401 validation (fp16_model_h100's databases were retired: docs/results.md)
    "results/tables2_h100/fp16/active/round0/dispatch.json",
    "results/tables4_h100/fp16/validation",
    "results/tables2_h100/fp16/fp16_model_h100.sqlite.xz",
]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "triples",
        nargs="*",
        metavar="TABLE VALIDATION_DIR TUNING_DB",
        help="default: the fp32/fp64 model table and the fp16 table of tables2",
    )
    ap.add_argument("--gpu", action="store_true", help="time the candidates on this machine's GPU (else a replay)")
    ap.add_argument(
        "--timer-replay",
        metavar="DB",
        help="as --gpu, but the candidates' times come from the recorded database DB (the replay backend): a check of "
        "the --gpu path on any machine",
    )
    ap.add_argument("--top", type=int, action="append", help="kernels timed besides the library (repeatable)")
    ap.add_argument("--reps", type=int, default=10, help="timed repetitions per candidate with --gpu (default 10)")
    ap.add_argument("--space", action="append", default=[], help="a space file defining a kind that is not built in")
    ap.add_argument("--tol", type=float, default=0.1, help="the loss counted as within (default 0.1)")
    ap.add_argument("--out", help="folder for the per-problem CSVs and refine.json")
    args = ap.parse_args(argv)
    triples = args.triples or DEFAULT
    if len(triples) % 3:
        ap.error(f"give TABLE VALIDATION_DIR TUNING_DB triples; got {len(triples)} paths")
    timed = args.gpu or args.timer_replay is not None
    tops = args.top or ([2] if timed else [1, 2, 3, 5])
    spaces = tuple(Path(s) for s in args.space)
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    warnings.simplefilter("ignore")
    backend = None
    if args.timer_replay is not None:
        from autotune.store.engine import database_url
        from autotune.sweep.backends.replay import ReplayBackend

        backend = ReplayBackend(database_url(args.timer_replay))
    elif args.gpu:
        from autotune.sweep.backends.local import gpu_backend

        backend = gpu_backend()
    summary: dict[str, dict] = {}
    try:
        for table_path, folder, tuning in zip(triples[::3], triples[1::3], triples[2::3], strict=True):
            table = read_table(Path(table_path))
            kind = table_kind(table, list(spaces))
            static = validated_figures(table_path, folder, tol=args.tol, spaces=spaces)
            print(static.line(f"{table_path} [static]"))
            replayed: dict[int, pd.DataFrame] = {}
            for top in tops:
                replayed[top], calls = refined_frame(table_path, folder, top, spaces=spaces)
                figs, per = scored_refined(replayed[top], calls, static, args.tol)
                label = f"{table_path} [refined, top {top} + library, replayed from the validation's medians]"
                print(f"{figs.line(label)} | timer calls {per:.2f} per problem")
                summary[f"{table_path}#replay{top}"] = {**figs.as_dict(), "top": top, "timer_calls_per_problem": per}
            if backend is None:
                continue
            from autotune.dispatch.refine_timer import backend_timer

            gpu = backend_timer(backend, dict(table.data), kind, tuning, reps=args.reps, space_files=spaces)
            for top in tops:
                t0 = time.perf_counter()
                frame, calls = refined_frame(table_path, folder, top, spaces=spaces, chooser=gpu)
                wall = time.perf_counter() - t0
                frame["replayed_choice"] = replayed[top]["table_choice"].to_numpy()
                tag = "gpu" if args.timer_replay is None else "timer-replay"
                how = "on this GPU" if args.timer_replay is None else f"by the replay of {args.timer_replay}"
                summary[f"{table_path}#{tag}{top}"] = report(table_path, frame, calls, static, top, args.tol, wall, how)
                summary[f"{table_path}#{tag}{top}"]["reps"] = args.reps
                if out is not None:
                    frame.to_csv(out / csv_name(table_path, top), index=False, float_format="%.6g")
    finally:
        if backend is not None:
            backend.close()
    if out is not None:
        merge_json(out / "refine.json", summary)
    return 0


def csv_name(table_path: str, top: int) -> str:
    return f"refined_{'_'.join(Path(table_path).parent.parts[-3:]) or 'table'}_top{top}.csv"


def report(  # type: ignore[no-untyped-def]
    table_path: str,
    frame: pd.DataFrame,
    calls: int,
    static,
    top: int,
    tol: float,
    wall: float | None,
    how: str = "on this GPU",
) -> dict:
    """Print the figures of a GPU-timed refinement (frame: refined_frame's with first_call_s and replayed_choice)
    and return its refine.json entry."""
    figs, per = scored_refined(frame, calls, static, tol)
    cost = frame["first_call_s"].to_numpy(dtype=float)
    timed = cost[cost > 0]
    agree = int((frame["table_choice"] == frame["replayed_choice"]).sum())
    label = f"{table_path} [refined, top {top} + library, timed {how}, scored by the validation]"
    print(f"{figs.line(label)} | timer calls {per:.2f} per problem")
    print(
        f"  first call at a new problem: median {np.median(timed):.3f} s, p90 {np.percentile(timed, 90):.3f} s, "
        f"max {timed.max():.3f} s (the first: {cost[0]:.3f} s, with compiles); "
        f"{'' if wall is None else f'{wall:.1f} s for '}{len(frame)} problems; "
        f"timed choice = replayed choice at {agree} of {len(frame)}"
    )
    return {
        **figs.as_dict(),
        "top": top,
        "timer_calls_per_problem": per,
        "first_call_s_median": float(np.median(timed)),
        "first_call_s_p90": float(np.percentile(timed, 90)),
        "first_call_s_max": float(timed.max()),
        "first_call_s_first": float(cost[0]),
        "wall_s": wall,
        "agree_with_replay": agree,
        "problems": len(frame),
    }


def committed_choices(csv: Path, table: dict, names: tuple[str, ...]):  # type: ignore[no-untyped-def]
    """A refinement timer that makes the choices a GPU run wrote into `csv` (refined_*.csv) again: 1 for the
    answer chosen there, 2 for every other candidate (the candidates are deterministic), so that refined_frame
    scores exactly those choices by the validation's medians."""
    ids = [str(k["instance_id"]) for k in table["kernels"]]
    frame = pd.read_csv(csv, keep_default_na=False, na_values=[""], dtype={"table_choice": str})
    chosen = {}
    for r in frame.to_dict("records"):
        shape = r["shape"] if isinstance(r["shape"], str) else ""
        chosen[(str(r["precision"]), shape, *(int(r[n]) for n in names))] = str(r["table_choice"])

    def timer(answer: int, precision: str, shape: str, sizes: dict) -> float:
        return 1.0 if chosen[(precision, shape, *(int(sizes[n]) for n in names))] == answer_name(answer, ids) else 2.0

    return timer, frame


def rescore(csv: Path, table_path: str, folder: str, top: int, spaces: tuple[Path, ...] = (), tol: float = 0.1):  # type: ignore[no-untyped-def]
    """A committed GPU run's choices (csv) scored again by the validation: (refine.json entry without the run's
    wall time, the frame)."""
    table = read_table(Path(table_path))
    kind = table_kind(table, list(spaces))
    timer, committed = committed_choices(csv, dict(table.data), tuple(kind.size_names))
    frame, calls = refined_frame(table_path, folder, top, spaces=spaces, chooser=timer)
    frame["replayed_choice"] = committed["replayed_choice"].to_numpy()
    frame["first_call_s"] = committed["first_call_s"].to_numpy()
    static = validated_figures(table_path, folder, tol=tol, spaces=spaces)
    return report(table_path, frame, calls, static, top, tol, None), frame


def merge_json(path: Path, summary: dict) -> None:
    """refine.json gets these entries; those of other tables already there stay."""
    old = json.loads(path.read_text()) if path.is_file() else {}
    path.write_text(json.dumps({**old, **summary}, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
