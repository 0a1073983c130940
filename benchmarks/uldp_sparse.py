"""User-level LDP sparse linear regression: spec V5–V7 and the speed target.

Spec ``uldp-sparse-linear-regression.md`` §15, independent design (``x ~ N(0, I_d)``,
``ξ ~ N(0, 1)``, ``θ*_j = 0.2`` on 8 indices; zero estimator ℓ2 = 0.566):

- **V5** (n = 400, m = 100, d = 256, ε = 4, support {0..7}): best over a grid of 2-SLR
  (``N_b × B``, heavy-hitter pruning ``α ∈ {0, 0.1}``) and of M-SLR; against local Lasso
  (LassoCV on one user's 100 records) and the zero estimator.
- **V6** trends (same design): ε ∈ {1, 4, 16}; m ∈ {50, 200}; d ∈ {64, 1024}; n = 800.
- **V7** random support: default sizes; and n = 20,000 (top-k pruning and α = 0.1).
- **Speed**: the whole 2-SLR fit at n = 20,000 users, m = 100, d = 256 (single BLAS
  thread), against a plain least-squares solve on the same records in the same process.

Run: ``python benchmarks/uldp_sparse.py`` (``--runs 30 --trend-runs 20 --big-runs 8``;
``--quick``: 4 runs each, no RESULTS.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_note, markdown_table, write_section

from learners.uldp_sparse import (
    ZERO_ESTIMATOR_L2,
    ULDPSparseLinearRegression,
    grid,
    independent_design,
    local_lasso_l2,
    multi_round_grid,
    run_setting,
)

TWO_ROUND_GRID = {
    **grid(n_bins=[2, 4, 8, 16], bounds=[0.5, 1.0], hh_alpha=0.0),
    **grid(n_bins=[2, 4, 8, 16], bounds=[0.5, 1.0], hh_alpha=0.1),
}
MULTI_ROUND_GRID = multi_round_grid(
    n_bins=[4, 8], gradient_bounds=[1.0, 3.0], hh_alpha=0.1
)
TREND_GRID = grid(n_bins=[2, 4, 8], bounds=[0.5, 1.0], hh_alpha=0.1)


def _best(res: Any, names: list[str]) -> tuple[float, str, float, str]:
    l2_name = min(names, key=lambda k: res.l2[k])
    f1_name = max(names, key=lambda k: res.f1[k])
    return res.l2[l2_name], l2_name, res.f1[f1_name], f1_name


def v5(runs: int) -> tuple[str, dict[str, float]]:
    configs = {**TWO_ROUND_GRID, **MULTI_ROUND_GRID}
    res = run_setting(n=400, m=100, d=256, epsilon=4.0, configs=configs, runs=runs)
    rng = np.random.default_rng(12345)
    lasso = float(np.mean([local_lasso_l2(256, 100, rng=rng) for _ in range(runs)]))
    rows, out = [], {}
    for label, names in (
        ("2-SLR, α = 0 (top-k)", [k for k in TWO_ROUND_GRID if "hh_alpha=0.0" in k]),
        (
            "2-SLR, α = 0.1 (reference)",
            [k for k in TWO_ROUND_GRID if "hh_alpha=0.1" in k],
        ),
        ("M-SLR, α = 0.1", list(MULTI_ROUND_GRID)),
    ):
        l2, l2_cfg, f1, _f1_cfg = _best(res, names)
        rows.append([label, l2, f1, l2_cfg])
        out[label] = l2
    rows.append(["local Lasso (one user, no privacy)", lasso, None, "LassoCV(cv=5)"])
    rows.append(["zero estimator", ZERO_ESTIMATOR_L2, None, "θ̂ = 0"])
    table = markdown_table(
        ["method", "best mean ℓ2", "best mean F1", "ℓ2 config"], rows
    )
    full = markdown_table(
        ["config", "mean ℓ2", "mean F1"],
        [[k, res.l2[k], res.f1[k]] for k in configs],
    )
    return table + "\nEvery configuration:\n\n" + full, out


def v6(runs: int) -> str:
    settings = [
        ("ε = 1", {"n": 400, "m": 100, "d": 256, "epsilon": 1.0}),
        ("ε = 4 (default)", {"n": 400, "m": 100, "d": 256, "epsilon": 4.0}),
        ("ε = 16", {"n": 400, "m": 100, "d": 256, "epsilon": 16.0}),
        ("m = 50", {"n": 400, "m": 50, "d": 256, "epsilon": 4.0}),
        ("m = 200", {"n": 400, "m": 200, "d": 256, "epsilon": 4.0}),
        ("d = 64", {"n": 400, "m": 100, "d": 64, "epsilon": 4.0}),
        ("d = 1024", {"n": 400, "m": 100, "d": 1024, "epsilon": 4.0}),
        ("n = 800", {"n": 800, "m": 100, "d": 256, "epsilon": 4.0}),
    ]
    rows = []
    for label, kw in settings:
        res = run_setting(configs=TREND_GRID, runs=runs, **kw)  # type: ignore[arg-type]
        rows.append([label, res.best_l2, res.best_f1])
    return markdown_table(["setting", "best mean ℓ2", "best mean F1"], rows)


def v7(runs: int, big_runs: int) -> tuple[str, list[float]]:
    small = run_setting(
        n=400, m=100, d=256, epsilon=4.0, configs=TREND_GRID, runs=runs,
        random_support=True,
    )  # fmt: skip
    rows = [["n = 400 (default), best over grid", small.best_l2, small.best_f1]]
    times: list[float] = []
    for alpha in (0.0, 0.1):
        l2s, f1s = [], []
        for r in range(big_runs):
            rng = np.random.default_rng(1000 + r)
            des = independent_design(20_000, 100, 256, rng=rng, random_support=True)
            est = ULDPSparseLinearRegression(hh_alpha=alpha, random_state=r)
            t0 = time.perf_counter()
            with threadpool_limits(1):
                est.fit(des.X, des.y, sample_epsilon=4.0, groups=des.groups)
            times.append(time.perf_counter() - t0)
            l2s.append(float(np.linalg.norm(est.coef_ - des.theta)))
            f1s.append(
                len(set(est.support_.tolist()) & set(des.support.tolist()))
                * 2.0
                / (est.support_.size + 8)
            )
            del des
        rows.append(
            [
                f"n = 20,000, α = {alpha} (defaults otherwise)",
                float(np.mean(l2s)),
                float(np.mean(f1s)),
            ]
        )
    return markdown_table(
        ["setting (random support)", "mean ℓ2", "mean F1"], rows
    ), times


def speed(times: list[float]) -> str:
    rng = np.random.default_rng(7)
    des = independent_design(20_000, 100, 256, rng=rng)
    with threadpool_limits(1):
        t0 = time.perf_counter()
        np.linalg.lstsq(des.X, des.y, rcond=None)
        ols = time.perf_counter() - t0
    rows = [
        ["2-SLR fit (median of the V7 n = 20,000 fits)", float(np.median(times))],
        ["2-SLR fit (fastest)", float(np.min(times))],
        ["baseline: one global least-squares solve (np.linalg.lstsq)", ols],
    ]
    return markdown_table(
        ["single thread, n = 20,000, m = 100, d = 256", "seconds"], rows
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--trend-runs", type=int, default=20)
    ap.add_argument("--big-runs", type=int, default=8)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.runs = args.trend_runs = args.big_runs = 4
    cmd = (
        f"python benchmarks/uldp_sparse.py --runs {args.runs} "
        f"--trend-runs {args.trend_runs} --big-runs {args.big_runs}"
    )
    t0 = time.perf_counter()
    v5_table, _ = v5(args.runs)
    print(v5_table, flush=True)
    v6_table = v6(args.trend_runs)
    print(v6_table, flush=True)
    v7_table, times = v7(args.runs, args.big_runs)
    print(v7_table, flush=True)
    speed_table = speed(times)
    print(speed_table, flush=True)
    if args.quick:
        return
    body = (
        f"Command: `{cmd}` ({time.perf_counter() - t0:.0f} s; {machine_note()}).\n\n"
        f"**V5** (n = 400, m = 100, d = 256, ε = 4, support {{0..7}}, {args.runs} runs; "
        "best mean over the grid per metric, the paper's oracle tuning):\n\n"
        f"{v5_table}\n**V6** (best over N_b ∈ {{2, 4, 8}} × B ∈ {{0.5, 1}}, α = 0.1, "
        f"{args.trend_runs} runs):\n\n{v6_table}\n**V7** (uniformly random support; "
        f"n = 20,000 with {args.big_runs} runs):\n\n{v7_table}\n**Speed**:\n\n{speed_table}"
    )
    write_section("uldp_sparse_linear", body)


if __name__ == "__main__":
    main()
