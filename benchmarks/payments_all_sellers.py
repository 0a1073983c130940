"""Every seller's Myerson payment at one size, timed end to end.

Run:  python benchmarks/payments_all_sellers.py [--m 100000] [--d 10] [--workers 2]
      [--chunk-size N] [--allocate-repeats 15] [--json out.json]

The synthetic data, prior and configuration of ``benchmarks/payments_speed.py``
(default rule: the certified optimum over public candidate models). Times one
``allocate`` (the base) and then :func:`mechanisms.myerson_payments` for **all**
sellers on a ``ProcessPoolExecutor`` with ``--workers`` processes (wall clock, not
extrapolated), and prints what the payments rest on: every seller's
``rule_certified``, the verified sample and its largest mismatch against the full
path, the worst monotonicity violation. With ``--allocate-repeats N`` it also times
``allocate`` best of ``N`` (after three untimed calls) in the same process and prints
the target's ratio: CPU seconds per seller over that ``allocate``.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
from payments_speed import CFG, PRIOR, synthetic, time_allocate

from mechanisms import allocate, myerson_payments


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--m", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk-size", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--allocate-repeats", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    X, y = synthetic(args.m, args.d, rng=rng)
    costs = PRIOR.sample(args.m, rng=rng)
    t0 = time.perf_counter()
    alloc = allocate(X, y, costs, PRIOR, CFG)
    t_alloc = time.perf_counter() - t0
    last = [time.perf_counter()]

    def progress(done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= 30.0 or done == total:
            last[0] = now
            print(f"  {done}/{total} sellers, {now - t1:.0f} s", flush=True)

    t1 = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        pay = myerson_payments(
            X, y, costs, PRIOR, CFG, executor=pool, base=alloc,
            chunk_size=args.chunk_size, progress=progress,
        )  # fmt: skip
    wall = time.perf_counter() - t1
    won = np.array([s.epsilon > 0 for s in pay.sellers])
    sec = np.array([s.seconds for s in pay.sellers])
    out: dict[str, Any] = {
        "m": args.m,
        "d": args.d,
        "workers": args.workers,
        "chunk_size": args.chunk_size,
        "allocate_s": t_alloc,
        "payments_wall_s": wall,
        "payments_over_allocate": wall / t_alloc,
        "sellers": len(pay.sellers),
        "winners": int(won.sum()),
        "cpu_s_sellers": float(sec.sum()),
        "cpu_s_per_winner": float(sec[won].mean()) if won.any() else 0.0,
        "cpu_s_per_loser": float(sec[~won].mean()) if (~won).any() else 0.0,
        "solves_per_winner": float(
            np.mean([s.n_solves for s in pay.sellers if s.epsilon > 0])
        ),
        "rule_certified": pay.rule_certified,
        "all_converged": pay.converged,
        "winners_verified": pay.n_verified,
        "max_shortcut_mismatch": pay.max_shortcut_mismatch,
        "escalated": pay.escalated,
        "fell_back": int(sum(s.fell_back for s in pay.sellers)),
        "max_monotonicity_violation": pay.max_monotonicity_violation,
        "max_kkt_residual": max(
            s.certificate.max_kkt_residual
            for s in pay.sellers
            if s.certificate is not None
        ),
        "total_payment": pay.total,
        "timings": pay.timings,
    }
    if args.allocate_repeats > 0:
        best, _ = time_allocate(X, y, costs, repeats=args.allocate_repeats)
        out["allocate_best_s"] = best
        out["per_seller_over_allocate"] = float(sec.sum()) / args.m / best
    print(json.dumps(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
