"""`autotune model ...`: the TSM2 analytical model's picks, and the picks against a sweep's measurements."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from autotune.cli.consoles import stdout, table as tabled
from autotune.devices import PROFILES, profile
from autotune.errors import UserError
from autotune.vocab import MAX_SIZE

app = typer.Typer(
    help="The TSM2/ISM2 analytical model (seed 001): its picks, and its picks against a sweep.", no_args_is_help=True
)

ProfileOpt = Annotated[
    str, typer.Option("--profile", help=f"Device profile for the per-SM limits ({', '.join(PROFILES)}).")
]


MAX_N = 65_536  # the model tries every t2 from 1 to n (n = 10**6 took 13 s; 10**24 never ended)


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"cannot read {what} from {text!r}", hint=f"write {what} as integers, e.g. 2,4,8,16") from None
    if not values or min(values) < 1:
        raise UserError(f"{what} must be positive integers, got {text!r}", hint="e.g. 2,4,8,16")
    if max(values) > MAX_N:
        raise UserError(
            f"{what} {max(values):,} is above {MAX_N:,}: TSM2 is for tall-and-skinny problems (the model tries every "
            "t2 up to n)",
            hint="e.g. 2,4,8,16",
        )
    return values


@app.command("tsm2-where")
def tsm2_where(
    m: Annotated[int, typer.Option(help="Rows of A (and C).", min=1, max=MAX_SIZE)] = 20480,
    n: Annotated[str, typer.Option(help="Columns of B, comma-separated.")] = "2,4,8,16",
    k: Annotated[Optional[int], typer.Option(help="Columns of A (default: m).", min=1, max=MAX_SIZE)] = None,
    precisions: Annotated[str, typer.Option(help="fp64 and/or fp32, comma-separated.")] = "fp64,fp32",
    device_profile: ProfileOpt = "H100",
    bandwidth: Annotated[
        Optional[float],
        typer.Option(help="Measured copy bandwidth in bytes/s (default: the profile's datasheet figure)."),
    ] = None,
    clock_mhz: Annotated[float, typer.Option(help="SM clock in MHz.")] = 1980.0,
    paper: Annotated[bool, typer.Option(help="Also keep the paper's configuration (t1 128, t2 n, t3 4).")] = False,
) -> None:
    """Print the model's pick for each problem, then a `where:` filter for a sweep config that measures them.

    Example: autotune model tsm2-where --m 20480 --n 2,4,8,16 --bandwidth 2.99e12
    """
    out = stdout()
    from autotune.problems.gemm import tsm2_check
    from autotune.problems.gemm.tsm2_model import choose_tsm2

    limits = profile(device_profile)
    picks = []
    for prec in [p.strip() for p in precisions.split(",") if p.strip()]:
        if prec not in ("fp64", "fp32"):
            raise UserError(f"the TSM2 model covers fp64 and fp32, not {prec!r}", hint="--precisions fp64,fp32")
        dev = tsm2_check.model_device(limits, prec, bandwidth or limits.mem_bandwidth, clock_mhz * 1e6)
        for nn in _ints(n, "--n"):
            choice = choose_tsm2(dev, m, nn, k or m, prec)
            params = tsm2_check.pick_params(choice)
            picks.append(params)
            if paper:
                picks.append(tsm2_check.paper_params(nn))
            out.print(
                f"{prec} {m}x{nn}x{k or m}: {choice.bound}-bound (t2* {choice.t2_threshold:.1f}), pick "
                f"{tsm2_check.label(params)}, predicted {choice.predicted_time_s * 1e3:.3f} ms"
            )
    typer.echo(tsm2_check.where_expr(picks))


@app.command("tsm2")
def tsm2(
    source: Annotated[str, typer.Argument(help="Results database (SQLite path or URL) with a tsm2 sweep.")],
    device: Annotated[
        Optional[str],
        typer.Option(
            "--device", "-d", help="GPU name or UUID in the database (default: the one with the most measurements)."
        ),
    ] = None,
    device_profile: ProfileOpt = "H100",
    csv: Annotated[Optional[Path], typer.Option("--csv", help="Also write the table to this CSV file.")] = None,
) -> None:
    """The model's pick against the sweep's best at each TSM2 test point, with the paper's configuration and cuBLAS.

    The model runs on the swept GPU's measured copy bandwidth, SM clock and SM count (from the database) and
    the profile's per-SM limits. A time marked with a dagger comes from an early-stopped measurement.

    Example: autotune model tsm2 results/tsm2_h100/tsm2_h100.sqlite.xz
    """
    out = stdout()
    from autotune.problems.gemm import tsm2_check
    from autotune.cli.compare import load_gpu
    from autotune.outfiles import check_writable

    check_writable([csv] if csv is not None else [])  # (before the database is read)

    gpu = load_gpu(source, device)
    info = gpu.info
    limits = profile(device_profile)
    clock = (info.sm_clock_mhz or 1980) * 1e6
    devices = {
        p: tsm2_check.model_device(limits, p, info.copy_bandwidth, clock, info.sm_count) for p in ("fp64", "fp32")
    }
    result = tsm2_check.compare(gpu.frame, gpu.library.rename(columns={"median_ms": "cublas_ms"}), devices)
    table = tabled(
        f"TSM2 on {gpu.device} ({info.copy_bandwidth / 1e12:.3f} TB/s measured): the model's pick "
        "against the sweep's best; instances as T1/T2/T3/KS and what differs from the paper's kernel",
        (
            "point",
            "model pick",
            "ms",
            "paper ms",
            "sweep best",
            "ms ",
            "roofline",
            "pick/best",
            "paper/best",
            "cuBLAS ms",
            "vs cuBLAS",
        ),
        left=("point", "model pick", "sweep best"),
    )

    def ms(value: float, skipped: bool = False) -> str:
        return "-" if math.isnan(value) else f"{value:.3f}{tsm2_check.FLAG if skipped else ''}"

    def ratio(value: float) -> str:
        return "-" if math.isnan(value) else f"{value:.2f}x"

    for r in result.itertuples():
        table.add_row(
            f"{r.precision} {r.m}x{r.n}x{r.k}",
            tsm2_check.short(tsm2_check.parse_label(r.pick)),
            ms(r.pick_ms, r.pick_skipped),
            ms(r.paper_ms, r.paper_skipped),
            tsm2_check.short(tsm2_check.parse_label(r.best)),
            ms(r.best_ms),
            "-" if math.isnan(r.best_frac) else f"{r.best_frac:.2f}",
            ratio(r.pick_vs_best),
            ratio(r.paper_vs_best),
            ms(r.cublas_ms),
            ratio(r.best_vs_cublas),
        )
    bounds = sorted(set(zip(result["precision"], result["bound"], result["t2_threshold"].round(1), strict=True)))
    out.print("model: " + "; ".join(f"{p} {b}-bound for every n here (t2* = {t})" for p, b, t in bounds))
    out.print(table)
    if result["pick_ms"].isna().any():
        out.print("the sweep did not measure every pick: add the filter of `autotune model tsm2-where` to its config")
    if result["pick_skipped"].any() or result["paper_skipped"].any():
        out.print(
            f"{tsm2_check.FLAG} early-stopped measurement: the median of its first repetitions, known to be "
            "more than TOL slower than the best the sweep saw"
        )
    if csv is not None:
        result.to_csv(csv, index=False)
        out.print(f"wrote {csv}")
