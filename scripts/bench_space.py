#!/usr/bin/env python3
"""Benchmark: build time of our space generator against Kernel Tuner's `Searchspace`.

For every spaces/*.yaml (except the synthetic one) it
  1. builds the space with `autotune.space.generator.generate` (hard constraints only, and hard + soft), best of N;
  2. translates the space to Kernel Tuner (tune_params dict + restriction strings: derived quantities
     inlined, device limits and precision sizes substituted as numbers, ceil/floor/log2 rewritten into
     plain Python), checks the translation against our evaluator on random raw combinations with plain
     Python `eval`, then builds `kernel_tuner.searchspace.Searchspace` with its default solver
     (python-constraint2, PC_OptimizedBacktrackingSolver), best of N, and compares the counts;
  3. builds spaces/synthetic_1e9.yaml (10^9 raw combinations) and spaces/synthetic_1e12.yaml (10^12 raw, about
     10^6 survivors), hard constraints only and hard + soft, each in a fresh subprocess, and reports the time and
     the peak RSS (getrusage ru_maxrss) of that process; for 10^9 also the tracemalloc peak, in another subprocess;
  4. checks the performance targets the generator was built to (faster than Kernel Tuner on every space, soft constraints on and off;
     gemm_tiny_simt with soft constraints in <= 0.1 s; 10^9 in < 1 s and < 1 GB; 10^12 in < 10 s and < 2 GB);
  5. prints a table and writes results/bench/space_build.json with the machine's description and provenance
     (commit, date, command, --note).

Run:  .venv-bench/bin/python scripts/bench_space.py        (kernel-tuner==1.5.0 lives in .venv-bench)
"""

from __future__ import annotations

import argparse
import ast
import copy
import functools
import json
import math
import os
import platform
import random
import resource
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable


from autotune.devices import DeviceLimits, get_device
from autotune.errors import SpaceError
from autotune.space.generator import generate
from autotune.space.spec import Constraint, Space, load_space

ROOT = Path(__file__).resolve().parent.parent

SYNTHETIC = ROOT / "spaces" / "synthetic_1e9.yaml"
SYNTHETIC_1E12 = ROOT / "spaces" / "synthetic_1e12.yaml"
# the generator's targets: seconds and MiB of peak RSS per synthetic space (every build), seconds for gemm_tiny_simt soft
TARGETS = {"synthetic_1e9": (1.0, 1024), "synthetic_1e12": (10.0, 2048)}
TINY_SOFT_S = 0.1
SAFE_BUILTINS = {"min": min, "max": max, "abs": abs, "__import__": __import__}


# ----------------------------------------------------------------------------------------------------
# Translation to Kernel Tuner (pure)


@dataclass(frozen=True)
class KTSpace:
    """A space as Kernel Tuner takes it: tune_params and restrictions as Python-expression strings."""

    tune_params: dict[str, list[Any]]
    hard: tuple[str, ...]  # one string per hard constraint that is not constant-true, file order
    soft: tuple[str, ...]
    names_hard: tuple[str, ...]  # constraint name of each string above
    names_soft: tuple[str, ...]
    dropped: tuple[str, ...]  # constraints that fold to the constant True (Kernel Tuner cannot take them)
    max_threads: int


def _has_free_names(node: ast.AST) -> bool:
    calls = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    return any(isinstance(n, ast.Name) and id(n) not in calls for n in ast.walk(node))


def _number(value: Any) -> ast.expr:
    """A numeric constant whose text Kernel Tuner's regex parser reads correctly (no '1e-07')."""
    if isinstance(value, bool) or not isinstance(value, float) or "e" not in repr(value):
        return ast.Constant(value)
    if value.is_integer():
        return ast.Constant(int(value))  # >= 1e16: the same number, written as an integer
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    mantissa = int("".join(map(str, digits))) * (-1 if sign else 1)
    return ast.BinOp(ast.Constant(mantissa), ast.Div(), ast.Constant(10**-exponent))  # correctly rounded


class _ToPython(ast.NodeTransformer):
    """Inline derived quantities, substitute constants, rewrite ceil/floor/log2, fold constant parts."""

    def __init__(self, derived: dict[str, ast.expr], constants: dict[str, Any]) -> None:
        self.derived, self.constants = derived, constants

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.constants:
            return ast.Constant(self.constants[node.id])
        if node.id in self.derived:
            return self.visit(copy.deepcopy(self.derived[node.id]))
        return node

    def visit_Call(self, node: ast.Call) -> ast.expr:
        node.args = [self.visit(a) for a in node.args]
        name = node.func.id  # type: ignore[attr-defined]
        x = node.args[0]
        if name == "ceil":  # -(-x // 1): integer ceil for ints, the same value for floats
            new: ast.expr = ast.UnaryOp(
                ast.USub(), ast.BinOp(ast.UnaryOp(ast.USub(), x), ast.FloorDiv(), ast.Constant(1))
            )
        elif name == "floor":
            new = ast.BinOp(x, ast.FloorDiv(), ast.Constant(1))
        elif name == "log2":  # the constraint's globals have no `math`; builtins do have __import__
            math_mod = ast.Call(ast.Name("__import__", ast.Load()), [ast.Constant("math")], [])
            new = ast.Call(ast.Attribute(math_mod, "log2", ast.Load()), [x], [])
        else:  # min, max, abs are Python builtins
            new = node
        return self.fold(new)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        node = super().generic_visit(node)
        if isinstance(node, ast.IfExp) and isinstance(node.test, ast.Constant):  # e.g. `elem_bytes == 8` folded
            return node.body if node.test.value else node.orelse
        return (
            self.fold(node) if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp)) else node
        )

    @staticmethod
    def fold(node: ast.AST) -> ast.AST:
        if _has_free_names(node):
            return node
        tree = ast.fix_missing_locations(ast.Expression(body=node))
        value = eval(compile(tree, "<fold>", "eval"), {"__builtins__": SAFE_BUILTINS})  # our own constants only
        return _number(value) if isinstance(value, (int, float)) else node


def to_python(space: Space, constraint: Constraint, constants: dict[str, Any]) -> str:
    """One constraint as a self-contained Python expression over the tuning parameters only."""
    derived = {name: loc.expr.tree.body for name, loc in space.derived}
    tree = _ToPython(derived, constants).visit(copy.deepcopy(constraint.expr.tree.body))
    tree = ast.fix_missing_locations(tree)
    return ast.unparse(tree)


def translate(space: Space, device: DeviceLimits, precision: str) -> KTSpace:
    constants = space.context(precision, device)
    out: dict[str, list[tuple[str, str]]] = {"hard": [], "soft": []}
    dropped = []
    for kind, constraints in (("hard", space.hard), ("soft", space.soft)):
        for c in constraints:
            text = to_python(space, c, constants)
            if text == "True":
                dropped.append(c.name)
            else:
                out[kind].append((c.name, text))
    return KTSpace(
        tune_params={p.name: list(p.values) for p in space.parameters},
        hard=tuple(t for _, t in out["hard"]),
        soft=tuple(t for _, t in out["soft"]),
        names_hard=tuple(n for n, _ in out["hard"]),
        names_soft=tuple(n for n, _ in out["soft"]),
        dropped=tuple(dropped),
        max_threads=device.max_threads_per_block,
    )


class _LazyEnv(dict):
    """Parameters and constants; derived quantities evaluated when first read (as the generator does)."""

    def __init__(self, space: Space, base: dict[str, Any]) -> None:
        super().__init__(base)
        self.space, self.derived = space, dict(space.derived)

    def __missing__(self, name: str) -> Any:
        if name not in self.derived:
            raise KeyError(name)
        self[name] = self.space.eval(self.derived[name], self)
        return self[name]


def _ours_verdict(
    space: Space, constraints: tuple[Constraint, ...], params: dict, precision: str, device: DeviceLimits
) -> str:
    try:
        env = _LazyEnv(space, {**space.context(precision, device), **params})
        return "pass" if all(bool(space.eval(c, env)) for c in constraints) else "fail"
    except Exception:
        return "error"


def _python_verdict(codes: list[Any], params: dict) -> str:
    try:
        return "pass" if all(eval(code, {"__builtins__": SAFE_BUILTINS}, params) for code in codes) else "fail"
    except Exception:
        return "error"


def check_translation(
    space: Space, kt: KTSpace, device: DeviceLimits, precision: str, samples: int, seed: int = 0
) -> dict[str, int]:
    """Our evaluator vs plain Python `eval` of the translation on random raw combinations."""
    rng = random.Random(seed)
    codes = {
        k: [compile(t, f"<{k}>", "eval") for t in texts] for k, texts in (("hard", kt.hard), ("all", kt.hard + kt.soft))
    }
    constraints = {"hard": space.hard, "all": space.hard + space.soft}
    stats = {"samples": samples, "disagree_hard": 0, "disagree_all": 0, "pass_hard": 0}
    for _ in range(samples):
        params = {p.name: rng.choice(p.values) for p in space.parameters}
        for kind in ("hard", "all"):
            ours = _ours_verdict(space, constraints[kind], params, precision, device)
            if ours != _python_verdict(codes[kind], params):
                stats[f"disagree_{kind}"] += 1
            if kind == "hard" and ours == "pass":
                stats["pass_hard"] += 1
    return stats


# ----------------------------------------------------------------------------------------------------
# Timed builds (side effects: CPU time, optional Kernel Tuner import)


def best_of(
    repeat: int,
    build: Callable[[], int],
    give_up_after: float = 20.0,
    min_measure: float = 0.02,
    cpu: list[float] | None = None,
) -> tuple[float, int, list[float]]:
    """Best seconds per build (perf_counter) over `repeat` measurements. A build faster than min_measure is
    timed in batches of k builds (k set from a first, untimed build; time per build = batch / k), as timeit
    does; a build slower than give_up_after is measured once. `cpu` receives the process CPU time per build of
    each measurement (time.process_time: what this process used, whatever else runs on the machine)."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    count = build()
    first = time.perf_counter() - t0
    if first > give_up_after:
        if cpu is not None:
            cpu.append(time.process_time() - c0)
        return first, count, [first]
    k = 1 if first >= min_measure else min(1000, math.ceil(min_measure / max(first, 1e-7)))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        c0 = time.process_time()
        for _ in range(k):
            count = build()
        times.append((time.perf_counter() - t0) / k)
        if cpu is not None:
            cpu.append((time.process_time() - c0) / k)
    return min(times), count, times


def kt_unparsable(restrictions: list[str], tune_params: dict[str, list[Any]]) -> list[str]:
    """Restrictions that python-constraint2's string parser rejects (each checked alone)."""
    from constraint.parser import compile_to_constraints

    bad = []
    for r in restrictions:
        try:
            compile_to_constraints([r], tune_params)
        except Exception:
            bad.append(r)
    return bad


def as_function(names: list[str], text: str) -> Callable[..., bool]:
    """A restriction as a plain Python function of all parameters, in tune_params order (Kernel Tuner's
    callable-restriction form), for the strings its parser rejects."""
    code = compile(text, "<restriction>", "eval")

    def restriction(*values: Any) -> bool:
        return bool(eval(code, {"__builtins__": SAFE_BUILTINS}, dict(zip(names, values, strict=True))))

    return restriction


def kt_build(kt: KTSpace, soft: bool, as_functions: tuple[str, ...] = ()) -> Any:
    from kernel_tuner.searchspace import Searchspace

    restrictions: list[Any] = list(kt.hard + kt.soft) if soft else list(kt.hard)
    names = list(kt.tune_params)
    restrictions = [as_function(names, r) if r in as_functions else r for r in restrictions]
    # block_size_names=[]: our parameter names are not Kernel Tuner's block_size_x/y/z, and no implicit
    # max_threads restriction exists in our spaces (ours are written out as hard constraints)
    return Searchspace(kt.tune_params, restrictions, kt.max_threads, block_size_names=[])


class _Timeout(Exception):
    pass


def _build_once(kt: KTSpace, soft: bool, state: dict[str, Any]) -> int:
    """Kernel Tuner's search space (the restrictions in state["fallback"] as Python functions); its list is kept in
    state["lists"] for the comparison with ours."""
    ss = kt_build(kt, soft, state["fallback"])
    state["lists"][:] = [ss.list]
    return ss.size


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def kt_difference(space: Space, generated: Any, kt_list: list[tuple]) -> dict[str, Any]:
    """Up to 3 configurations found by one side only (for a count mismatch)."""
    ours = {tuple(row) for row in generated.frame.itertuples(index=False, name=None)}
    ours = {tuple(v.item() if hasattr(v, "item") else v for v in row) for row in ours}
    theirs = set(kt_list)
    names = list(space.param_names)
    return {
        "only_ours": [dict(zip(names, r, strict=True)) for r in sorted(ours - theirs)[:3]],
        "n_only_ours": len(ours - theirs),
        "only_kt": [dict(zip(names, r, strict=True)) for r in sorted(theirs - ours)[:3]],
        "n_only_kt": len(theirs - ours),
    }


@dataclass
class SpaceResult:
    space: str
    precision: str
    raw: int
    ours_hard: int = -1
    ours_hard_s: float = float("nan")
    ours_soft: int = -1
    ours_soft_s: float = float("nan")
    load_s: float = float("nan")
    kt_hard: int | None = None
    kt_hard_s: float | None = None
    kt_soft: int | None = None
    kt_soft_s: float | None = None
    times: dict[str, list[float]] = field(default_factory=dict)
    translation: dict[str, Any] = field(default_factory=dict)
    kt_fallback: dict[str, list[str]] = field(default_factory=dict)  # restrictions passed as functions
    notes: list[str] = field(default_factory=list)


def bench_space(
    path: Path, device: DeviceLimits, repeat: int, kt_timeout: int, samples: int, use_kt: bool
) -> SpaceResult:
    t0 = time.perf_counter()
    space = load_space(path)
    load_s = time.perf_counter() - t0
    precision = space.kernel.problems.precisions[0] if space.kernel else "fp64"
    raw = 1
    for p in space.parameters:
        raw *= len(p.values)
    r = SpaceResult(space.name, precision, raw, load_s=load_s)
    last: dict[bool, Any] = {}

    def ours(soft: bool) -> Callable[[], int]:
        def build() -> int:
            last[soft] = generate(space, device, precision, soft=soft)
            return last[soft].count

        return build

    for key in ("ours_hard", "ours_soft", "kt_hard", "kt_soft"):
        r.times[key + "_cpu"] = []
    r.ours_hard_s, r.ours_hard, r.times["ours_hard"] = best_of(repeat, ours(False), cpu=r.times["ours_hard_cpu"])
    r.ours_soft_s, r.ours_soft, r.times["ours_soft"] = best_of(repeat, ours(True), cpu=r.times["ours_soft_cpu"])
    kt = translate(space, device, precision)
    r.translation = {
        "hard": dict(zip(kt.names_hard, kt.hard, strict=True)),
        "soft": dict(zip(kt.names_soft, kt.soft, strict=True)),
        "dropped_constant_true": list(kt.dropped),
        "python_eval_check": check_translation(space, kt, device, precision, samples),
    }
    if not use_kt:
        return r
    for soft in (False, True):
        key = "kt_soft" if soft else "kt_hard"
        # what build() reads and leaves: the restrictions passed as functions (set on a fallback), the last list
        state: dict[str, Any] = {"fallback": (), "lists": []}
        build = functools.partial(_build_once, kt, soft, state)
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(kt_timeout)
        try:
            try:
                seconds, count, r.times[key] = best_of(repeat, build, cpu=r.times[key + "_cpu"])
            except Exception as exc:  # a restriction string Kernel Tuner cannot parse: a finding
                restrictions = list(kt.hard + kt.soft) if soft else list(kt.hard)
                fallback = tuple(kt_unparsable(restrictions, kt.tune_params))
                state["fallback"] = fallback
                if not fallback:
                    raise
                r.notes.append(
                    f"{key}: Kernel Tuner rejected the string form ({type(exc).__name__}: {exc}) of "
                    f"{list(fallback)}; timed again with those passed as Python functions of all parameters"
                )
                r.kt_fallback[key] = list(fallback)
                r.times[key + "_cpu"] = []
                seconds, count, r.times[key] = best_of(repeat, build, cpu=r.times[key + "_cpu"])
            setattr(r, key, count)
            setattr(r, key + "_s", seconds)
            ours_count = r.ours_soft if soft else r.ours_hard
            if count != ours_count:
                diff = kt_difference(space, last[soft], state["lists"][0])
                r.notes.append(f"{key}: COUNT MISMATCH ours={ours_count} kt={count}: {json.dumps(diff)}")
        except _Timeout:
            r.notes.append(f"{key}: Kernel Tuner did not finish within {kt_timeout} s")
        except Exception as exc:  # a restriction Kernel Tuner cannot parse is a finding, not a crash
            r.notes.append(f"{key}: Kernel Tuner failed: {type(exc).__name__}: {exc}")
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
    return r


# ----------------------------------------------------------------------------------------------------
# Synthetic 10^9 space, in a child process so that its peak memory is its own


def synthetic_child(path: Path, device_name: str, soft: bool, repeat: int, trace: bool) -> dict[str, Any]:
    space = load_space(path)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if trace:
        import tracemalloc

        tracemalloc.start()
    device = get_device(device_name)
    times, cpu, count = [], [], -1
    for _ in range(repeat):  # every build timed, the first (cold) one included
        t0, c0 = time.perf_counter(), time.process_time()
        count = generate(space, device, soft=soft).count
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    out: dict[str, Any] = {
        "seconds": min(times),
        "worst_seconds": max(times),
        "times": times,
        "count": count,
        "soft": soft,
        "cpu_seconds": min(cpu),
        "worst_cpu_seconds": max(cpu),
        "cpu_times": cpu,
        "rss_before_build_mib": base_rss / 1024,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if trace:
        out["tracemalloc_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
    return out


def run_synthetic_child(path: Path, device_name: str, soft: bool, repeat: int, trace: bool) -> dict[str, Any]:
    cmd = (
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child-synthetic",
            str(path),
            "--device",
            device_name,
            "--repeat",
            str(repeat),
        ]
        + (["--child-soft"] if soft else [])
        + (["--child-trace"] if trace else [])
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["rusage_children_maxrss_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return out


# ----------------------------------------------------------------------------------------------------
# Machine description, table, main


def machine_info() -> dict[str, Any]:
    from importlib import metadata

    def version(pkg: str) -> str | None:
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return None

    cpu = (
        next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else platform.processor()
    )

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    mem = (
        next(
            (
                int(ln.split()[1]) // 1024
                for ln in Path("/proc/meminfo").read_text().splitlines()
                if ln.startswith("MemTotal")
            ),
            None,
        )
        if Path("/proc/meminfo").exists()
        else None
    )
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu,
        "mem_total_mib": mem,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": version("numpy"),
        "pandas": version("pandas"),
        "kernel_tuner": version("kernel_tuner"),
        "python_constraint2": version("python-constraint2"),
        "git_commit": git("rev-parse", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return "-" if x != x else f"{x:.6f}" if x < 1 else f"{x:.3f}"
    return str(x)


def targets(results: list[SpaceResult], synthetic: dict[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    """The generator's performance targets (see the module docstring, item 4), each with what was measured and whether it was met."""
    out: list[dict[str, Any]] = []
    for r in results:
        for key in ("hard", "soft"):
            ours, kt = getattr(r, f"ours_{key}_s"), getattr(r, f"kt_{key}_s")
            ours_cpu, kt_cpu = (min(r.times.get(f"{who}_{key}_cpu") or [math.nan]) for who in ("ours", "kt"))
            timed_out = any("did not finish" in n for n in r.notes if n.startswith(f"kt_{key}"))
            measured = f"ours {ours:.6f} s ({ours_cpu:.6f} s CPU), Kernel Tuner " + (
                f"{kt:.6f} s ({kt_cpu:.6f} s CPU): {kt / ours:.1f}x"
                if kt is not None
                else "did not finish"
                if timed_out
                else "not run"
            )
            met = (kt is not None and ours < kt) or (kt is None and timed_out)
            met_cpu = (kt is not None and ours_cpu < kt_cpu) or (kt is None and timed_out)
            out.append(
                {
                    "target": f"{r.space} ({'soft constraints on' if key == 'soft' else 'hard only'}): faster "
                    "than Kernel Tuner",
                    "measured": measured,
                    "met": met,
                    "met_cpu": met_cpu,
                }
            )
        if r.space == "gemm_tiny_simt":
            cpu = min(r.times.get("ours_soft_cpu") or [math.nan])
            out.append(
                {
                    "target": f"gemm_tiny_simt with soft constraints in <= {TINY_SOFT_S} s",
                    "measured": f"{r.ours_soft_s:.4f} s ({cpu:.4f} s CPU)",
                    "met": r.ours_soft_s <= TINY_SOFT_S,
                    "met_cpu": cpu <= TINY_SOFT_S,
                }
            )
    for name, syn in synthetic.items():
        if not syn:
            continue
        seconds, mib = TARGETS[name]
        for key in ("hard", "soft"):
            h = syn.get(key, {})
            if "seconds" not in h:
                out.append({"target": f"{name} ({key})", "measured": h.get("error", "missing"), "met": False})
                continue
            out.append(
                {
                    "target": f"{name} ({'hard only' if key == 'hard' else 'soft constraints on'}): every build "
                    f"< {seconds:g} s and peak RSS < {mib} MiB",
                    "measured": f"{h['count']:,} of {syn['raw']:.0e} survive; best {h['seconds']:.3f} s, worst "
                    f"{h['worst_seconds']:.3f} s of {len(h['times'])} (CPU {h['cpu_seconds']:.3f} to "
                    f"{h['worst_cpu_seconds']:.3f} s); peak RSS {h['peak_rss_mib']:.0f} MiB",
                    "met": h["worst_seconds"] < seconds and h["peak_rss_mib"] < mib,
                    "met_cpu": h["worst_cpu_seconds"] < seconds and h["peak_rss_mib"] < mib,
                }
            )
    return out


def table(results: list[SpaceResult], synthetic: dict[str, dict[str, Any] | None] | None) -> str:
    """kt/ours: Kernel Tuner's time over ours (> 1: ours faster). '*': Kernel Tuner needed the function fallback."""
    head = [
        "space",
        "raw",
        "ours_hard",
        "kt_hard",
        "ours_s",
        "kt_s",
        "kt/ours",
        "ours_soft",
        "kt_soft",
        "ours_soft_s",
        "kt_soft_s",
        "kt/ours_soft",
    ]
    rows: list[list[Any]] = [head]
    for r in results:

        def ratio(kt: float | None, ours: float) -> str | None:
            return None if kt is None else f"{kt / ours:.2f}x"

        star = {k: "*" if k in r.kt_fallback else "" for k in ("kt_hard", "kt_soft")}
        rows.append(
            [
                r.space,
                r.raw,
                r.ours_hard,
                _fmt(r.kt_hard) + star["kt_hard"],
                r.ours_hard_s,
                r.kt_hard_s,
                ratio(r.kt_hard_s, r.ours_hard_s),
                r.ours_soft,
                _fmt(r.kt_soft) + star["kt_soft"],
                r.ours_soft_s,
                r.kt_soft_s,
                ratio(r.kt_soft_s, r.ours_soft_s),
            ]
        )
    for name, syn in (synthetic or {}).items():
        if not syn:
            continue
        h, s = syn.get("hard", {}), syn.get("soft", {})
        rows.append(
            [
                name,
                syn.get("raw"),
                h.get("count"),
                "skipped",
                h.get("seconds"),
                None,
                None,
                s.get("count"),
                "skipped",
                s.get("seconds"),
                None,
                None,
            ]
        )
    text = [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in text) for i in range(len(head))]
    lines = [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        for row in text
    ]
    return "\n".join(
        lines
        + [
            "(times: seconds per build, best of --repeat; kt/ours > 1 means ours is faster; "
            "* = Kernel Tuner rejected a restriction string, timed with it as a Python function)"
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spaces", nargs="*", type=Path, help="space files (default: spaces/*.yaml)")
    ap.add_argument("--device", default="H100", help="device profile for the limits (default H100)")
    ap.add_argument("--repeat", type=int, default=3, help="builds per measurement; the best is reported")
    ap.add_argument("--kt-timeout", type=int, default=300, help="seconds before a Kernel Tuner build is abandoned")
    ap.add_argument("--samples", type=int, default=2000, help="random raw combinations for the translation check")
    ap.add_argument("--no-kt", action="store_true", help="skip Kernel Tuner")
    ap.add_argument("--no-synthetic", action="store_true", help="skip the synthetic spaces (10^9 and 10^12 raw)")
    ap.add_argument(
        "--note", default="", help="a line for the JSON's provenance, e.g. 'machine shared with 4 other jobs'"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench" / "space_build.json")
    ap.add_argument("--child-synthetic", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--child-soft", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child-trace", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_synthetic:
        print(
            json.dumps(
                synthetic_child(args.child_synthetic, args.device, args.child_soft, args.repeat, args.child_trace)
            )
        )
        return 0

    device = get_device(args.device)
    use_kt = not args.no_kt
    if use_kt:
        try:
            import kernel_tuner  # noqa: F401
        except ImportError:
            print(
                "kernel_tuner not importable: run with .venv-bench/bin/python (see README) or pass --no-kt",
                file=sys.stderr,
            )
            return 2
    synthetic: dict[str, Any] | None = None
    synthetic_1e12: dict[str, Any] | None = None
    if not args.no_synthetic:  # first, so that no other child has raised RUSAGE_CHILDREN yet

        def synthetic_runs(path: Path, trace: bool) -> dict[str, Any]:
            space = load_space(path)
            raw = 1
            for p in space.parameters:
                raw *= len(p.values)
            out: dict[str, Any] = {"raw": raw, "path": str(path.relative_to(ROOT))}
            for key, soft in (("hard", False), ("soft", True)):
                out[key] = run_synthetic_child(path, args.device, soft, args.repeat, trace=False)
                print(f"{space.name} {key}: {json.dumps(out[key])}", flush=True)
            if trace:
                out["hard_tracemalloc"] = run_synthetic_child(path, args.device, False, 1, trace=True)
                print(f"{space.name} hard, tracemalloc run: {json.dumps(out['hard_tracemalloc'])}", flush=True)
            return out

        synthetic = synthetic_runs(SYNTHETIC, trace=True)
        synthetic_1e12 = synthetic_runs(SYNTHETIC_1E12, trace=False)
    paths = args.spaces or sorted(p for p in (ROOT / "spaces").glob("*.yaml") if not p.name.startswith("synthetic_"))
    results = []
    for path in paths:
        try:
            r = bench_space(path, device, args.repeat, args.kt_timeout, args.samples, use_kt)
        except SpaceError as exc:  # a space file being edited by someone else: say so, go on
            print(f"{path.name}: SKIPPED, does not load: {exc}", flush=True)
            continue
        results.append(r)
        print(
            f"{r.space}: ours {r.ours_hard} in {r.ours_hard_s:.4f} s, kt {r.kt_hard} in {_fmt(r.kt_hard_s)} s; "
            f"translation check {r.translation['python_eval_check']}",
            flush=True,
        )
        for note in r.notes:
            print(f"  NOTE {note}", flush=True)
    report = {
        "machine": machine_info(),
        "device_profile": device.name,
        "repeat": args.repeat,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join(
            [Path(sys.executable).name, "scripts/bench_space.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "note": args.note,
        "timing": "time.perf_counter around generate() / Searchspace(); best of --repeat measurements after one untimed build; builds under 20 ms timed in batches (seconds per build = batch time / batch size); load_space and translation not included; synthetic spaces: every build timed in a fresh process, the first (cold) one included; *_cpu / cpu_*: time.process_time per build (the CPU time the measuring process itself used: on a shared machine wall-clock time also counts waiting for a core); targets: met on wall-clock time, met_cpu on CPU time",
        "kt_solver": "Searchspace default: framework=PythonConstraint, PC_OptimizedBacktrackingSolver(forwardcheck=False)",
        "spaces": [asdict(r) for r in results],
        "synthetic": synthetic,
        "synthetic_1e12": synthetic_1e12,
    }
    report["targets"] = targets(results, {"synthetic_1e9": synthetic, "synthetic_1e12": synthetic_1e12})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"\nwrote {args.out}")
    m = report["machine"]
    print(
        f"machine: {m['cpu_count']} CPUs ({m['cpu_model']}), python {m['python']}, kernel_tuner {m['kernel_tuner']}, "
        f"python-constraint2 {m['python_constraint2']}, commit {m['git_commit'][:10]}{' (dirty)' if m['git_dirty'] else ''}"
    )
    for t in report["targets"]:
        print(
            f"target {t['target']}: {t['measured']} -> {'PASS' if t['met'] else 'FAIL'} "
            f"(CPU time: {'PASS' if t['met_cpu'] else 'FAIL'})"
        )
    print(table(results, {"synthetic_1e9": synthetic, "synthetic_1e12": synthetic_1e12}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
