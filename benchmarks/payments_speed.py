"""Speed of the Myerson payments: all sellers on Wisconsin (m ≈ 400) and
synthetic m ∈ {2000, 10000}; time per seller and the ratio to one ``allocate`` call.

Run:  python benchmarks/payments_speed.py [--sizes 2000 10000] [--sample 24]
      [--all-synthetic] [--verify sample|all] [--workers N] [--chunk-size N]
      [--json out.json]

Wisconsin: every seller's payment through the default process pool. Synthetic: all
sellers with ``--all-synthetic``, else a random sample of ``--sample`` sellers (the
per-seller cost is measured; the all-seller time is extrapolated and labelled so).
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from market.datasets import load_wisconsin
from mechanisms import MechanismConfig, UniformPrior, allocate, myerson_payments
from mechanisms.payments import default_workers

CFG = MechanismConfig(gamma=1.0, lam=1e-2, mu=10.0, sigma=100.0, k=4.0)
PRIOR = UniformPrior(1e-4, 5e-4)


def wisconsin(m: int, *, rng: np.random.Generator) -> tuple[Any, Any]:
    """``m`` Wisconsin records scaled with the published public bounds (intercept
    column included), in a random order."""
    X, y = load_wisconsin(intercept=True)
    idx = rng.permutation(X.shape[0])[: min(m, X.shape[0])]
    return X[idx], y[idx]


def synthetic(m: int, d: int, *, rng: np.random.Generator) -> tuple[Any, Any]:
    """Gaussian features scaled by the fixed public constant ``sqrt(d)·3`` and clipped
    to the unit ball; labels from a separator through the origin with 10% flips."""
    X = rng.normal(size=(m, d)) / (3.0 * np.sqrt(d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    w = rng.normal(size=d)
    y = np.where(X @ w >= 0, 1.0, -1.0)
    flip = rng.random(m) < 0.1
    return X, np.where(flip, -y, y)


def time_allocate(
    X: Any, y: Any, costs: Any, repeats: int = 15, warmup: int = 3
) -> tuple[float, Any]:
    """Best of ``repeats`` after ``warmup`` untimed calls (the least disturbed run on a
    shared machine; it makes the ratio to it the conservative one)."""
    alloc = None
    for _ in range(warmup):
        alloc = allocate(X, y, costs, PRIOR, CFG)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        alloc = allocate(X, y, costs, PRIOR, CFG)
        times.append(time.perf_counter() - t0)
    return float(np.min(times)), alloc


def run(
    name: str,
    X: Any,
    y: Any,
    costs: Any,
    *,
    sellers: Any,
    pool: Any,
    workers: int,
    verify: str,
    chunk_size: int | None = None,
) -> dict[str, Any]:
    m = X.shape[0]
    t_alloc, alloc = time_allocate(X, y, costs)
    t0 = time.perf_counter()
    pay = myerson_payments(
        X,
        y,
        costs,
        PRIOR,
        CFG,
        sellers=sellers,
        executor=pool,
        base=alloc,
        verify=verify,
        chunk_size=chunk_size,
    )
    wall = time.perf_counter() - t0
    sec = np.array([s.seconds for s in pay.sellers])
    won = np.array([s.epsilon > 0 for s in pay.sellers])
    n = len(pay.sellers)
    full = n == m
    est_all = wall if full else float(sec.mean()) * m / workers
    return {
        "data": name,
        "m": m,
        "d": int(X.shape[1]),
        "sellers_computed": n,
        "winners_computed": int(won.sum()),
        "workers": workers,
        "allocate_s": t_alloc,
        "payments_wall_s": wall,
        "all_sellers_s": est_all,
        "all_sellers_extrapolated": not full,
        "ratio_to_allocate": est_all / t_alloc,
        "cpu_s_per_seller": float(sec.mean()),
        "cpu_s_per_winner": float(sec[won].mean()) if won.any() else 0.0,
        "per_seller_in_allocates": float(sec.mean()) / t_alloc,
        "solves_per_winner": float(
            np.mean([s.n_solves for s in pay.sellers if s.epsilon > 0])
        )
        if won.any()
        else 0.0,
        "fell_back": int(sum(s.fell_back for s in pay.sellers)),
        "verify": verify,
        "chunk_size": chunk_size,
        "winners_verified": pay.n_verified,
        "escalated": pay.escalated,
        "max_shortcut_mismatch": pay.max_shortcut_mismatch,
        "max_monotonicity_violation": pay.max_monotonicity_violation,
        "converged": pay.converged,
        "total_payment": pay.total,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="*", default=[2000, 10000])
    ap.add_argument("--sample", type=int, default=24)
    ap.add_argument("--all-synthetic", action="store_true")
    ap.add_argument("--skip-wisconsin", action="store_true")
    ap.add_argument("--verify", choices=["sample", "all"], default="sample")
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--chunk-size",
        type=int,
        default=None,
        help="sellers per executor task (default: about four chunks per worker); "
        "the re-solves of one chunk share the base's cached summaries (synthetic "
        "sizes; Wisconsin uses the default)",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = []
    with ProcessPoolExecutor(args.workers) as pool:
        if not args.skip_wisconsin:
            X, y = wisconsin(400, rng=rng)
            costs = PRIOR.sample(X.shape[0], rng=rng)
            rows.append(
                run(
                    "wisconsin",
                    X,
                    y,
                    costs,
                    sellers=None,
                    pool=pool,
                    workers=args.workers,
                    verify=args.verify,
                )
            )
            print(json.dumps(rows[-1]), flush=True)
        for m in args.sizes:
            X, y = synthetic(m, 10, rng=rng)
            costs = PRIOR.sample(m, rng=rng)
            sel = None
            if not args.all_synthetic:
                sel = np.sort(rng.choice(m, size=min(args.sample, m), replace=False))
            rows.append(
                run(
                    f"synthetic-{m}",
                    X,
                    y,
                    costs,
                    sellers=sel,
                    pool=pool,
                    workers=args.workers,
                    verify=args.verify,
                    chunk_size=args.chunk_size,
                )
            )
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
