"""Strict-mode payments for every seller, timed against one ``allocate``.

Mode ``strict`` is the market schema's default. Per size ``m`` and configuration: one
synthetic market (``d = 20`` records in the unit ball, labels ±1, costs ``U[0, 1]``
under the prior ``UniformPrior(0, 1)``), every seller's ``ε^max`` the market's
lifetime cap (``--lifetime-cap``, 10 by default; ``0`` for none), ``allocate`` timed
best of three (wall, after one untimed call), then :func:`mechanisms.myerson_payments`
for **all** sellers on the default process pool (wall, not extrapolated). Reports the
target's ratio — payments wall per seller over ``allocate`` wall — and what the
payments rest on: converged, every seller's rule certified, the verified sample's
largest shortcut mismatch, the worst monotonicity violation, sellers that fell back
to the full search.

Configurations: ``--configs market`` (the schema's defaults: γ = 1, λ = 0.01,
μ = 0.1, σ = 1, k = 4, L = 5), ``--configs random`` (``--n-configs`` draws of
``benchmarks/random_configs.py::draw_configs`` in strict mode, fixed seed), or both.

Run: ``python benchmarks/strict_payments.py --sizes 10000 100000 --configs market``
and ``python benchmarks/strict_payments.py --sizes 10000 --configs random``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_note, markdown_table
from random_configs import cfg_label, draw_configs

from mechanisms import MechanismConfig, UniformPrior, allocate, myerson_payments
from mechanisms.payments import default_workers

PRIOR = UniformPrior(0.0, 1.0)
MARKET = MechanismConfig(
    gamma=1.0, lam=0.01, mu=0.1, sigma=1.0, k=4.0, eps_avg_max=5.0, mode="strict"
)


def market(m: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 20))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = np.where(rng.random(m) < 0.5, -1.0, 1.0)
    return X, y, rng.uniform(0.0, 1.0, m)


def row(
    m: int, cfg: MechanismConfig, cap: float, pool: ProcessPoolExecutor, seed: int
) -> dict[str, Any]:
    X, y, costs = market(m, seed)
    eps_max = np.full(m, cap if cap > 0 else np.inf)
    allocate(X, y, costs, PRIOR, cfg, eps_max)
    walls = []
    base = None
    for _ in range(3):
        t0 = time.perf_counter()
        base = allocate(X, y, costs, PRIOR, cfg, eps_max)
        walls.append(time.perf_counter() - t0)
    al = min(walls)
    t0 = time.perf_counter()
    pay = myerson_payments(X, y, costs, PRIOR, cfg, eps_max, executor=pool, base=base)
    wall = time.perf_counter() - t0
    certs = [s.certificate for s in pay.sellers if s.certificate is not None]
    assert base is not None
    return {
        "m": m, "config": cfg_label(cfg), "lifetime_cap": cap or None,
        "allocate_wall_s": al, "payments_wall_s": wall,
        "per_seller_ratio_wall": wall / m / al,
        "winners": int(np.count_nonzero(base.epsilon > 0)),
        "converged": bool(pay.converged),
        "rule_certified": all(c.rule_certified for c in certs),
        "max_mismatch": max((s.fast_mismatch for s in pay.sellers), default=0.0),
        "max_monotonicity_violation": max(
            (s.monotonicity_violation for s in pay.sellers), default=0.0
        ),
        "fell_back": sum(bool(s.fell_back) for s in pay.sellers),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000])
    ap.add_argument("--configs", nargs="*", default=["market"])
    ap.add_argument("--n-configs", type=int, default=20)
    ap.add_argument("--lifetime-cap", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    cfgs: list[MechanismConfig] = []
    if "market" in args.configs:
        cfgs.append(MARKET)
    if "random" in args.configs:
        cfgs += draw_configs(args.n_configs, mode="strict")
    rows = []
    t_start = time.perf_counter()
    with threadpool_limits(1), ProcessPoolExecutor(default_workers()) as pool:
        for m in args.sizes:
            for cfg in cfgs:
                try:
                    out = row(m, cfg, args.lifetime_cap, pool, args.seed)
                except ValueError as exc:  # a refused setting (e.g. infinite payments)
                    out = {"m": m, "config": cfg_label(cfg), "refused": str(exc)[:80]}
                print(json.dumps(out), flush=True)
                rows.append(out)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    done = [r for r in rows if "refused" not in r]
    print(
        f"\n{machine_note()}; {default_workers()} pool workers; "
        f"{time.perf_counter() - t_start:.0f} s\n"
    )
    if done:
        keys = list(done[0])
        print(markdown_table(keys, [[r.get(k) for k in keys] for r in done]))
    for m in args.sizes:
        vals = [r["per_seller_ratio_wall"] for r in done if r["m"] == m]
        if vals:
            print(
                f"m = {m}: per-seller ratio median {np.median(vals):.4g}, "
                f"worst {max(vals):.4g} over {len(vals)} configurations"
            )


if __name__ == "__main__":
    main()
