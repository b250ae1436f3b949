"""Issue 55 item 1 ("Tables III") on a CPU: does a per-kernel performance model choose better than the
nearest-tuned-point rules of scripts/tables7_study.py? A replay of committed H100 measurements only (nothing is
measured here).

For every table kernel (the kernels of the fold's base table, `cost:0.05:1:4` as in tables7_study.py) a small model
of its cost (ms per byte moved, the tables' COST_SCALE unit) is fitted on that fold's training measurements (the
tuning database with every other seed's validation baked in: tables7_study.fold_database), and an unseen problem
is answered with the valid kernel of least predicted cost, or the library where the library's price is below the
kernel's price times 1 + margin. Features are those a generated lookup computes in integers/floats in well under a
microsecond, from the problem (m, n, k, batch) and the kernel's tile parameters (BM, BN, BK, PPB in its name):
padded flops per byte, tile steps per byte, padded bytes per byte, alignment flags (m, n, k odd / not a multiple
of 8). Models (a few coefficients per kernel):
- `log`: ridge least squares of log2 cost on [1, log2 padded flops/byte, log2 steps/byte, log2 padded
  bytes/byte, 6 alignment flags] (features constant over a kernel's points get no weight);
- `lin`: non-negative least squares of cost (relative error) on the same quantities, linear (a roofline sum:
  cost = c0 + c1 padded flops/byte + c2 steps/byte + ...);
- `pkg`: the package's own selection-model features (autotune.dispatch.model.feature_matrix, 21 per kernel),
  refitted here on cost, for comparison with `struct model:0.1`;
- `+res K`: the model plus the mean residual of that kernel at its K nearest training points (log distance on
  m, n, k): a global model with a local correction.
The library (cuBLAS) is priced by: `knn` (tables7's rule (d): mean log cost at its K=4 nearest measurements of the
problem's M%2, K%2 class, the tuning points and the library-only samples), `knn:odd:4` (the same in the classes
"M or K odd"), `model` / `tile` (the `log` features with tiles 1 / with a 64 x 64 x 32 tile, fitted per M%2, K%2
class on the same measurements; the tile is the best of 11 tiles and 4 class schemes by the median error of the
library's price at seed 3401 only), `+res` (with the residual correction, K=4) or `exact` (its own measured time at
the problem: an in-sample bound, the limit of a dense library sample, not a rule).
Hybrids: `top T`: only the T kernels of least K=4 nearest-point price (tables7's rule) compete, ranked by model;
`knn-lib`: the kernel chosen by the model, the library decision made by the nearest-point prices.

Held-out seeds (every table kernel and the library measured at each problem): fp16 3401 (200 problems), 3811
(100) and 3911 (results/tables7_h100/fp16/validation, 100; never used by tables7_study.py to choose a rule).
Protocol: the fold of seed S trains on the tuning database and every other seed's validation **except 3911**
(3911 stays fresh everywhere; its own fold trains on the tuning database, 3401 and 3811, as the table validated at
3911 did). Hyper-parameters (model, ridge, margin, T, K) are chosen on seed 3401 only (`--select 3401`);
3811 and 3911 are held out for that choice. The rows of the existing rules are tables7_study's rules (chosen
looking at 3401 and 3811, so only their 3911 figures are held out for the choice of rule).
Honesty note: the list of configurations (`configs()`) was widened once after a first run that printed every
seed (the `tile` library, `knn:odd:4`, margin 0.15, the `top` hybrid with the `tile+res` library); the choice
among them is mechanical, on seed 3401 alone (fewest answers below 0.97x the library, then most within 10%, then
least worst), so 3811 and 3911 are held out for the hyper-parameters but not entirely for the menu.
Not modelled: waves (ceil(blocks / (SMs x blocks per SM))): every problem of this workload is batched to about 500 MB,
so thousands of blocks per launch and a negligible tail. Model size: `log`/`lin` 10 coefficients per kernel, `pkg`
17; `+res K` also needs each kernel's residual at its tuned points (one number per measured (point, kernel), as
many as the cost-mode table's costs already stored in dispatch.json).
Softmax is not studied here (its kernels need their own features).


    PYTHONPATH=. python3 scripts/tables8_model_study.py [--work /tmp/tables8_work] [--out results/tables8_cpu]

Takes a few minutes on 2 cores (the bakes are cached in --work, shared with tables7_study.py's layout).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tables7_study as t7  # noqa: E402  (the folds, held-out loading, Points, scoring and rules)

ROOT = t7.ROOT
R = t7.R
DOMAIN = "fp16"
FRESH = {"3911": R / "tables7_h100/fp16/validation"}  # scored, never baked into another fold
LIBRARY_TILE = (64, 64, 32, 1)

# ---------------------------------------------------------------- data


@dataclass
class Fold:
    held: str
    pts: t7.Points  # the base table's kernels, their validity and tuned points (costs)
    h: t7.HeldOut
    tiles: list[tuple[int, int, int, int]]  # BM, BN, BK, PPB per table kernel
    train: list[tuple[np.ndarray, np.ndarray]]  # per table kernel: dims (rows, m n k b), log2 cost
    lib_dims: np.ndarray  # (rows, m n k) library measurements: training points and library-only samples
    lib_cost: np.ndarray  # log2 cost
    pool: tuple[np.ndarray, np.ndarray]  # the library-only samples alone (tables7_study.library_pool)


def kernel_tiles(name: str) -> tuple[int, int, int, int]:
    params = {k: int(v) for k, v in re.findall(r"(?:^|_)([A-Z]+)(\d+)", name)}
    return params.get("BM", 1), params.get("BN", 1), params.get("BK", 1), params.get("PPB", 1)


def load_fold(held: str, folder: Path, work: Path) -> Fold:
    from autotune.dispatch.table import COST_SCALE
    from autotune.dispatch.validate import measured
    from autotune.store.engine import database_url

    base = t7.fold_table(DOMAIN, held, t7.DOMAINS[DOMAIN]["base"], work)
    pts = t7.Points(base, DOMAIN)
    h = t7.held_out(folder, held, base, DOMAIN)
    times, baseline = measured(database_url(str(t7.fold_database(DOMAIN, held, work))), t7._kind(base, DOMAIN)[1])
    tiles = [kernel_tiles(k["name"]) for k in pts.data["kernels"]]
    train = []
    for iid in pts.ids:
        rows = [(key[2:], v[0]) for key, d in times.items() if (v := d.get(iid)) is not None]
        dims = np.array([r[0] for r in rows], dtype=np.int64).reshape(-1, 4)
        ms = np.array([r[1] for r in rows])
        train.append((dims, np.log2(ms * COST_SCALE / nbytes(dims))))
    ld = np.array([key[2:] for key in baseline], dtype=np.int64).reshape(-1, 4)
    lc = np.log2(np.array([v[0] for v in baseline.values()]) * COST_SCALE / nbytes(ld))
    pool_dims, pool_cost = t7.library_pool(DOMAIN, {held}, base)
    return Fold(held, pts, h, tiles, train, np.vstack([ld[:, :3], pool_dims]).astype(np.int64),
                np.concatenate([lc, pool_cost]), (pool_dims, pool_cost))  # fmt: skip


def nbytes(dims: np.ndarray) -> np.ndarray:
    m, n, k, b = (dims[:, i].astype(float) for i in range(4))
    return 2.0 * b * (m * k + k * n + m * n)


# ---------------------------------------------------------------- features and models


def quantities(dims: np.ndarray, tile: tuple[int, int, int, int]) -> dict[str, np.ndarray]:
    """Per problem (m, n, k[, batch]) what a kernel of tile (BM, BN, BK, PPB) does, per byte of A, B and C."""
    bm, bn, bk, ppb = tile
    m, n, k = (dims[:, i].astype(float) for i in range(3))
    tm, tn, tk = np.ceil(m / bm), np.ceil(n / bn), np.ceil(k / bk)
    by = 2.0 * (m * k + k * n + m * n)  # per problem of the batch
    return {
        "flops": 2.0 * tm * bm * tn * bn * tk * bk / by,
        "steps": tm * tn * tk / ppb / by,
        "padbytes": 2.0 * (tm * bm * tk * bk + tk * bk * tn * bn + tm * bm * tn * bn) / by,
        "flags": np.stack([m % 2, n % 2, k % 2, (m % 8) > 0, (n % 8) > 0, (k % 8) > 0], axis=1).astype(float),
    }


def features(kind: str, dims: np.ndarray, tile) -> np.ndarray:
    q = quantities(dims, tile)
    one = np.ones((len(dims), 1))
    if kind == "log":
        return np.hstack([one, np.log2(np.stack([q["flops"], q["steps"], q["padbytes"]], axis=1)), q["flags"]])
    if kind == "lin":  # cost per byte ~ c0 + c1 flops + c2 steps + c3 padbytes + flags (all >= 0)
        return np.hstack([one, np.stack([q["flops"], q["steps"], q["padbytes"]], axis=1), q["flags"]])
    if kind == "pkg":
        from autotune.dispatch.model import feature_matrix

        full = dims if dims.shape[1] == 4 else np.hstack([dims, np.ones((len(dims), 1), dtype=np.int64)])
        x = feature_matrix(full, (0, 1, 2), tile[:3])
        return np.delete(x, [1, 2, 3, 4], axis=1)  # the raw sizes (batch too) out: cost per byte is per problem
    raise ValueError(kind)


@dataclass
class Model:
    kind: str
    coef: np.ndarray
    use: np.ndarray
    tile: tuple
    dims: np.ndarray  # training problems (for residual correction)
    resid: np.ndarray

    def predict(self, dims: np.ndarray, k_res: int = 0) -> np.ndarray:
        x = features(self.kind, dims, self.tile)
        y = x @ self.coef
        y = np.log2(np.maximum(y, 1e-9)) if self.kind == "lin" else y
        if k_res and len(self.resid):
            a, b = np.log2(dims[:, :3].astype(float)), np.log2(self.dims[:, :3].astype(float))
            d = np.abs(a[:, None, :] - b[None, :, :]).sum(axis=2)
            near = np.argsort(d, axis=1, kind="stable")[:, :k_res]
            y = y + self.resid[near].mean(axis=1)
        return y


def fit(kind: str, dims: np.ndarray, logc: np.ndarray, tile, ridge: float) -> Model | None:
    if len(logc) < 3:
        return None
    x = features(kind, dims, tile)
    use = np.ones(x.shape[1], dtype=bool)
    use[1:] = np.ptp(x[:, 1:], axis=0) > 1e-12
    coef = np.zeros(x.shape[1])
    xs = x[:, use]
    if kind == "lin":
        from scipy.optimize import nnls

        c = 2.0**logc
        coef[use] = nnls(xs / c[:, None], np.ones_like(c))[0]  # relative error
        pred = np.log2(np.maximum(x @ coef, 1e-9))
    else:
        scale = np.ones(xs.shape[1])
        scale[0] = 0.0  # the intercept is not penalised
        coef[use] = np.linalg.solve(xs.T @ xs + ridge * len(logc) * np.diag(scale), xs.T @ logc)
        pred = x @ coef
    return Model(kind, coef, use, tile, dims, logc - pred)


# ---------------------------------------------------------------- rules


@dataclass(frozen=True)
class Config:
    model: str = "log"  # log | lin | pkg
    ridge: float = 1e-3
    k_res: int = 0  # residual correction from the K nearest training points (0: none)
    library: str = "knn"  # knn | model | exact
    margin: float = 0.05
    top: int = 0  # only the T kernels of least nearest-point price compete (0: all valid)
    decide: str = "model"  # model: the library against the model's kernel price | knn: nearest-point prices

    def name(self) -> str:
        s = f"{self.model} r{self.ridge:g}" + (f" +res{self.k_res}" if self.k_res else "")
        s += f" lib {self.library} m{self.margin:g}"
        s += f" top{self.top}" if self.top else ""
        return s + (" knn-decide" if self.decide == "knn" else "")


class Chooser:
    def __init__(self, fold: Fold):
        self.f = fold
        self.models: dict[tuple, list] = {}
        self.valid = [fold.pts.valid(tuple(int(x) for x in key[2:])) for key in fold.h.keys]
        self.qdims = np.array([key[2:] for key in fold.h.keys], dtype=np.int64)
        self._knn_cache: dict = {}
        self._lib_cache: dict = {}

    def kernel_prices(self, cfg: Config) -> np.ndarray:
        """(problems, kernels) predicted log2 cost (inf: no model or not valid)."""
        key = (cfg.model, cfg.ridge, cfg.k_res)
        if cfg.model == "knn":  # tables7's nearest-point kernel prices (K 4 within reach 1)
            return self.knn(0.05)[0]
        if key not in self.models:
            out = np.full((len(self.qdims), len(self.f.pts.ids)), np.inf)
            for a, ((dims, logc), tile) in enumerate(zip(self.f.train, self.f.tiles, strict=True)):
                mdl = fit(cfg.model, dims, logc, tile, cfg.ridge)
                if mdl is not None:
                    out[:, a] = mdl.predict(self.qdims, cfg.k_res)
            self.models[key] = out
        price = self.models[key].copy()
        price[~np.array(self.valid)[:, :-1]] = np.inf
        return price

    def knn(self, margin: float) -> tuple[np.ndarray, np.ndarray]:
        """tables7's nearest-point prices: kernels (K 4, no class; inf where not competing), library (dense p2 K4)."""
        if margin not in self._knn_cache:
            pts, rule = self.f.pts, t7.Rule(k=4, margin=margin, cls="p2", lib_pool=True)
            pool = self.f.pool
            kp = np.full((len(self.qdims), len(pts.ids)), np.inf)
            lp = np.zeros(len(self.qdims))
            for i, q_all in enumerate(self.qdims):
                q = np.log2(q_all[:3].astype(float))
                d = np.abs(pts.logs - q).sum(axis=1)
                within = d <= d.min() + rule.reach + 1e-12
                measured = np.isfinite(pts.cost[within]).any(axis=0) & self.valid[i]
                zeros = np.zeros(len(pts.dims), dtype=np.int64)
                for a in np.flatnonzero(measured[: pts.lib]):
                    kp[i, a] = t7._mean_nearest(pts.logs, pts.cost[:, a], zeros, q, 0, 4, False)
                lp[i] = self._lib_knn(q_all[:3], pool)
            self._knn_cache[margin] = (kp, lp)
        return self._knn_cache[margin]

    def _lib_knn(self, q3, pool) -> float:
        pts = self.f.pts
        cls = t7.class_of(DOMAIN, "p2", pts.dims)
        logs = np.vstack([pts.logs, np.log2(pool[0])])
        costs = np.concatenate([pts.cost[:, pts.lib], pool[1]])
        c = np.concatenate([cls, t7.class_of(DOMAIN, "p2", pool[0])])
        qcls = int(t7.class_of(DOMAIN, "p2", q3[None, :])[0])
        return t7._mean_nearest(logs, costs, c, np.log2(q3.astype(float)), qcls, 4, True)

    def library_prices(self, cfg: Config) -> np.ndarray:
        from autotune.dispatch.table import COST_SCALE

        if cfg.library == "exact":
            return np.log2(self.f.h.library * COST_SCALE / self.f.h.bytes)
        if cfg.library == "knn":
            return self.knn(0.05)[1]
        if cfg.library.startswith("knn:"):  # knn:CLASS:K on the training points and the library-only samples
            _, scheme, k = cfg.library.split(":")
            if cfg.library not in self._lib_cache:
                pts, pool = self.f.pts, self.f.pool
                logs = np.vstack([pts.logs, np.log2(pool[0])])
                costs = np.concatenate([pts.cost[:, pts.lib], pool[1]])
                c = np.concatenate([t7.class_of(DOMAIN, scheme, pts.dims), t7.class_of(DOMAIN, scheme, pool[0])])
                qc = t7.class_of(DOMAIN, scheme, self.qdims[:, :3].astype(float))
                self._lib_cache[cfg.library] = np.array([
                    t7._mean_nearest(logs, costs, c, np.log2(q[:3].astype(float)), int(qc[i]), int(k), True)
                    for i, q in enumerate(self.qdims)])  # fmt: skip
            return self._lib_cache[cfg.library]
        # model | model+res: `log` features with tiles 1, per M%2, K%2 class; tile | tile+res: with a 64 x 64 x 32
        # tile (the best of 11 tiles and 4 class schemes at seed 3401 by the median error of the library's price)
        key = (cfg.library, cfg.ridge)
        if key not in self._lib_cache:
            d, c = self.f.lib_dims, self.f.lib_cost
            one = LIBRARY_TILE if cfg.library.startswith("tile") else (1, 1, 1, 1)
            out = np.zeros(len(self.qdims))
            cls_t = t7.class_of(DOMAIN, "p2", d.astype(float))
            cls_q = t7.class_of(DOMAIN, "p2", self.qdims[:, :3].astype(float))
            for cl in np.unique(cls_q):
                mdl = fit("log", d[cls_t == cl], c[cls_t == cl], one, cfg.ridge)
                out[cls_q == cl] = mdl.predict(self.qdims[cls_q == cl][:, :3], 4 if cfg.library.endswith("+res") else 0)
            self._lib_cache[key] = out
        return self._lib_cache[key]

    def answers(self, cfg: Config) -> tuple[list[int], list[int]]:
        """The rule's answers and its kernel choice before the library decision."""
        price = self.kernel_prices(cfg)
        lib = self.library_prices(cfg)
        kp, lp = self.knn(cfg.margin) if (cfg.top or cfg.decide == "knn") else (None, None)
        if cfg.top:
            ranks = np.argsort(np.argsort(kp, axis=1, kind="stable"), axis=1)
            price = np.where((ranks < cfg.top) & np.isfinite(kp), price, np.inf)
        out, kernels = [], []
        nk = len(self.f.pts.ids)
        for i in range(len(self.qdims)):
            if not np.isfinite(price[i]).any():
                out.append(nk)
                kernels.append(nk)
                continue
            a = int(np.argmin(price[i]))
            kernels.append(a)
            if cfg.decide == "knn":
                mine = kp[i, a] if np.isfinite(kp[i, a]) else price[i, a]
                use_lib = lp[i] <= mine + math.log2(1 + cfg.margin) if cfg.library == "knn" else (
                    lib[i] <= mine + math.log2(1 + cfg.margin))  # fmt: skip
            else:
                use_lib = lib[i] <= price[i, a] + math.log2(1 + cfg.margin)
            out.append(nk if use_lib else a)
        return out, kernels


def kernel_pick(h: t7.HeldOut, pts: t7.Points, kernels: list[int]) -> float:
    """Share of problems where the chosen kernel is within 10% of the best measured table kernel."""
    good = 0
    for key, a in zip(h.keys, kernels, strict=True):
        got = {i: t for i, t in h.times.get(key, {}).items() if i in pts.ids}
        if a < len(pts.ids) and pts.ids[a] in got and min(got.values()) / got[pts.ids[a]] >= 1 / 1.1 - 1e-12:
            good += 1
    return good / len(h.keys)


def fit_error(chooser: Chooser, cfg: Config) -> float:
    """Median |log2 predicted - measured| cost of the table's kernels at the held-out problems (in %)."""
    from autotune.dispatch.table import COST_SCALE

    price = chooser.kernel_prices(cfg)
    h, pts = chooser.f.h, chooser.f.pts
    errs = []
    for i, key in enumerate(h.keys):
        for iid, t in h.times.get(key, {}).items():
            if iid in pts.ids and np.isfinite(price[i, pts.ids.index(iid)]):
                errs.append(abs(price[i, pts.ids.index(iid)] - math.log2(t * COST_SCALE / h.bytes[i])))
    return 100 * (2 ** float(np.median(errs)) - 1) if errs else math.nan


# ---------------------------------------------------------------- the study


def configs() -> list[Config]:
    out = []
    kernels = [("knn", 0.0, 0), ("log", 1e-2, 0), ("log", 1e-2, 4), ("log", 1e-4, 4), ("lin", 0.0, 4), ("pkg", 1e-2, 4)]
    for model, ridge, k_res in kernels:
        for library in ("knn", "knn:odd:4", "tile", "tile+res"):
            for margin in (0.0, 0.05, 0.1, 0.15):
                out.append(Config(model, ridge, k_res, library, margin))
        for margin in (0.0, 0.05):
            out.append(Config(model, ridge, k_res, "exact", margin))  # a bound: the library's own time
    for library in ("knn", "tile+res"):  # hybrids: the model ranks the nearest points' top kernels
        for margin in (0.05, 0.1):
            out.append(Config("log", 1e-2, 4, library, margin, 3))
    for margin in (0.05, 0.1):  # the model's kernel, the library decided by nearest-point prices
        out.append(Config("log", 1e-2, 4, "knn", margin, 0, "knn"))
    return out


BASELINE_RULES = ["sim base (K 4, margin 0.05)", "cls p2 lib K4", "dense p2 lib K4", "cls odd lib K4 + safe 0.8",
                  "exactlib K4 margin 0.05"]  # fmt: skip
BASELINE_STRUCTS = ["cost:0.05:1:4:m,k%2", "cost:0.1:1:4:m,k%2", "model:0.1"]
WORK = Path("/tmp/tables8_work")


def main(argv: list[str] | None = None) -> int:
    global WORK
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=WORK, help="cache of the folds' databases and tables")
    parser.add_argument("--out", type=Path, default=None, help="write study.txt and rows.json here")
    parser.add_argument("--select", default="3401", help="the seed hyper-parameters are chosen on")
    parser.add_argument("--quick", action="store_true", help="a few configurations only (smoke test)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    WORK = args.work
    WORK.mkdir(parents=True, exist_ok=True)
    sets = {**t7.DOMAINS[DOMAIN]["sets"], **FRESH}
    rows, lines = [], []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    cfgs = configs()[:6] if args.quick else configs()
    for held, folder in sets.items():
        fold = load_fold(held, folder, WORK)
        pts, h = fold.pts, fold.h
        chooser = Chooser(fold)
        say(f"== fold {held}: {len(h.keys)} held-out problems, {len(pts.dims)} tuned points, {len(pts.ids)} kernels, "
            f"training rows per kernel {[len(c) for _, c in fold.train]}, library rows {len(fold.lib_cost)}")  # fmt: skip

        def add(name: str, answers, kernels=None, extra: str = "", h=h, pts=pts, held=held) -> None:
            w, worst, below, missing = t7.score(h, pts, answers)
            kp = kernel_pick(h, pts, kernels) if kernels is not None else math.nan
            lib_share = float(np.mean([a == pts.lib for a in answers]))
            rows.append(dict(held=held, rule=name, within=w, worst=worst, below=below, not_measured=missing,
                             kernel_pick=kp, library_share=lib_share))  # fmt: skip
            say(f"  {held} {name:<44} {100 * w:5.1f}% {100 * worst:5.1f}% {below:3d}  kernel pick {100 * kp:5.1f}% "
                f"library {100 * lib_share:4.1f}%{extra}")  # fmt: skip

        add("oracle (table kernels + library)", t7.oracle_answers(h, pts))
        for s in BASELINE_STRUCTS:
            p = t7.Points(t7.fold_table(DOMAIN, held, s, WORK), DOMAIN)
            assert p.ids == pts.ids
            add(f"struct {s}", [p.package(tuple(int(x) for x in key[2:])) for key in h.keys])
        rules = t7.rules_for(DOMAIN)
        for r in BASELINE_RULES:
            add(f"t7 {r}", t7.rule_answers(h, pts, rules[r], fold.pool))
        from autotune.dispatch.table import COST_SCALE

        exact = np.log2(h.library * COST_SCALE / h.bytes)
        for lib in ("knn", "knn:odd:4", "model", "tile", "tile+res"):
            err = np.abs(chooser.library_prices(Config(library=lib, ridge=1e-2)) - exact)
            say(f"  {held} library price {lib:<10} median error {100 * (2 ** np.median(err) - 1):4.1f}%, "
                f"within 10% at {100 * np.mean(err <= math.log2(1.1)):4.1f}% of the problems")  # fmt: skip
        for cfg in cfgs:
            answers, kernels = chooser.answers(cfg)
            add(cfg.name(), answers, kernels, f"  fit err {fit_error(chooser, cfg):4.1f}%")
    report(rows, args.select, say)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "rows.json").write_text(json.dumps(rows, indent=1))
        head = "# " + " ".join(["scripts/tables8_model_study.py", *(argv if argv is not None else sys.argv[1:])])
        (args.out / "study.txt").write_text(head + "\n" + "\n".join(lines) + "\n")
    return 0


def report(rows: list[dict], select: str, say) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows)
    frame["fig"] = frame.apply(lambda r: f"{100 * r.within:5.1f}% / {100 * r.worst:4.1f}% / {r.below:2d}", axis=1)
    wide = frame.pivot_table(index="rule", columns="held", values="fig", aggfunc="first")
    sel = frame[frame.held == select].set_index("rule")
    # choice on the selection seed only: fewest below 0.97x, then most within 10%, then least worst
    order = sel.sort_values(["below", "within", "worst"], ascending=[True, False, True]).index
    wide = wide.loc[[r for r in order if r in wide.index]]
    say(f"\n== every rule, ordered by seed {select} alone (below 0.97x library, then within 10%, then worst); "
        f"within 10% / worst / below 0.97x per seed; seeds other than {select} are held out for this order")  # fmt: skip
    with pd.option_context("display.width", 250, "display.max_rows", 500, "display.max_colwidth", 60):
        say(wide.to_string())
    model_rules = [r for r in order if not r.startswith(("t7 ", "struct ", "oracle")) and "exact" not in r]
    if model_rules:
        pick = model_rules[0]
        say(f"\n== model rule chosen on seed {select}: {pick}")
        say(wide.loc[[pick]].to_string())


if __name__ == "__main__":
    sys.exit(main())
