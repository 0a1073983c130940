"""Cost of the certified allocation, monotonicity audits and IC regret.

1. ``allocate`` on Wisconsin (m = 399, the configuration of ``allocation_speed.py``)
   before the certified rule (the code at ``--before``, extracted with ``git archive``) and after,
   with ``certify="report"`` (default: no certificate exists at λ = 1e-3, status
   ``local``) and ``certify="raise_lambda"`` (certified). Each variant runs in its own
   subprocess, interleaved over rounds, best of 5 calls per round; ratios are taken
   within a round (the machine is shared).
2. Brute-force IC regret on 5 small certified instances: 40 misreports per seller, each
   a full re-solve and a full Myerson payment; IR for every seller.

Run: ``python benchmarks/certified_allocation.py`` from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import extract_revision, machine_note, markdown_table, write_section

ROOT = Path(__file__).resolve().parent.parent

TIMER = r"""
import json, sys, time
import numpy as np
from mechanisms import MechanismConfig, UniformPrior, allocate
from market.datasets import load_wisconsin, train_val_test_split
X, y = load_wisconsin()
sp = train_val_test_split(X, y, random_state=0)
prior = UniformPrior(1e-4, 5e-4)
c = prior.sample(sp.X_train.shape[0], rng=np.random.default_rng(0))
kw = dict(gamma=1.0, lam=1e-3, mu=100.0, sigma=1e3, k=4, eps_avg_max=10.0)
if sys.argv[1] != "before":
    kw["certify"] = sys.argv[1]
cfg = MechanismConfig(**kw)
allocate(sp.X_train, sp.y_train, c, prior, cfg)
ts = []
for _ in range(5):
    t = time.perf_counter()
    a = allocate(sp.X_train, sp.y_train, c, prior, cfg)
    ts.append(time.perf_counter() - t)
cert = getattr(a, "certificate", None)
print(json.dumps({"t": min(ts), "status": str(a.status), "G": a.objective,
                  "lam": a.config.lam, "eps_avg": a.eps_avg,
                  "n_bb": None if cert is None else cert.n_bound_solves}))
"""


def time_variants(before_rev: str, rounds: int) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory() as tmp:
        extract_revision(before_rev, tmp, ["mechanisms", "learners"])
        out = []
        for r in range(rounds):
            for name, path in (
                ("before", tmp),
                ("report", str(ROOT)),
                ("raise_lambda", str(ROOT)),
            ):
                env = dict(os.environ, PYTHONPATH=path)
                res = subprocess.run(
                    [sys.executable, "-c", TIMER, name],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                    cwd=path,
                )
                row = json.loads(res.stdout.strip().splitlines()[-1])
                row.update(round=r, variant=name)
                out.append(row)
                print(row, flush=True)
        return out


def ic_regret(seed: int, n_mis: int = 40) -> dict[str, float]:
    sys.path.insert(0, str(ROOT))
    from concurrent.futures import ThreadPoolExecutor

    from mechanisms import myerson_payments
    from tests.mechanisms.test_certified_allocation import PRIOR, random_instance

    X, y, c, cfg = random_instance(seed, m_range=(4, 7))
    ex = ThreadPoolExecutor(1)
    truth = myerson_payments(X, y, c, PRIOR, cfg, executor=ex, rtol=1e-9)
    util = truth.payments - c * truth.epsilon
    worst_abs, worst_rel = 0.0, 0.0
    for i in range(c.size):
        for s in np.linspace(0.1, 1.0, n_mis):
            cc = c.copy()
            cc[i] = s
            mis = myerson_payments(
                X, y, cc, PRIOR, cfg, sellers=[i], executor=ex, rtol=1e-9
            )
            gain = mis.payments[i] - c[i] * mis.epsilon[i] - util[i]
            worst_abs = max(worst_abs, gain)
            if truth.payments[i] > 0:
                worst_rel = max(worst_rel, gain / truth.payments[i])
    return {
        "seed": seed,
        "m": int(c.size),
        "winners": int((truth.epsilon > 0).sum()),
        "total": truth.total,
        "min_ir_utility": float(util.min()),
        "max_regret": worst_abs,
        "max_regret_over_payment": worst_rel,
        "certified": bool(truth.rule_certified),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--before", default="e017545", help="revision before the certified rule"
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--skip-regret", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = time_variants(args.before, args.rounds)
    by_round: dict[int, dict[str, dict[str, object]]] = {}
    for r in rows:
        by_round.setdefault(int(r["round"]), {})[str(r["variant"])] = r  # type: ignore[call-overload]
    ratio_rep = [v["report"]["t"] / v["before"]["t"] for v in by_round.values()]  # type: ignore[operator]
    ratio_cert = [v["raise_lambda"]["t"] / v["before"]["t"] for v in by_round.values()]  # type: ignore[operator]
    table = markdown_table(
        ["round", "variant", "allocate s (best of 5)", "status", "λ used", "G",
         "ε_avg", "B&B solves"],
        [[r["round"], r["variant"], r["t"], r["status"], r["lam"], r["G"],
          r["eps_avg"], r["n_bb"]] for r in rows],
    )  # fmt: skip
    regret_txt = ""
    if not args.skip_regret:
        regs = [ic_regret(s) for s in range(5)]
        for r in regs:
            print(r, flush=True)
        regret_txt = (
            "\n\nIC regret by brute force (5 certified instances from "
            "`tests/mechanisms/test_certified_allocation.py::random_instance`, "
            "40 misreports per seller on U[0.1, 1], each a full re-solve and a full "
            "payment, payments to rtol 1e-9):\n\n"
            + markdown_table(
                [
                    "seed",
                    "m",
                    "winners",
                    "Σ t_i",
                    "min IR utility",
                    "max regret",
                    "max regret / t_i",
                    "rule certified",
                ],
                [
                    [
                        r["seed"],
                        r["m"],
                        r["winners"],
                        r["total"],
                        r["min_ir_utility"],
                        r["max_regret"],
                        r["max_regret_over_payment"],
                        r["certified"],
                    ]
                    for r in regs
                ],
            )
        )
    body = (
        f"Command: `python benchmarks/certified_allocation.py` "
        f"({time.perf_counter() - t0:.0f} s; {machine_note()}).\n\n"
        "Wisconsin m = 399, d = 31, γ = 1, λ = 1e-3, μ = 100, σ = 1e3, k = 4, L = 10, "
        f"costs U[1e-4, 5e-4]. `before` = revision `{args.before}`. Time ratios "
        f"after/before within a round: certify=report {np.round(ratio_rep, 2).tolist()}, "
        f"certify=raise_lambda {np.round(ratio_cert, 2).tolist()}.\n\n"
        + table
        + regret_txt
    )
    print(body)
    if not args.no_write:
        write_section("Certified allocation", body)


if __name__ == "__main__":
    main()
