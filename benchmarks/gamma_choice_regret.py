"""IC regret when ``γ`` is chosen from the reports for a budget (spec §5, last bullet).

Not a speed benchmark: a measurement recorded in ``RESULTS.md``. Myerson payments are
IC for a frozen ``γ``; an order with ``gamma: null`` re-chooses ``γ`` from the reported
costs, so one seller's report can move ``γ``. This runs
:func:`mechanisms.audit_gamma_choice` on a Wisconsin subset with a budget that binds
(half the Myerson total at ``γ = 1``) and prints the regret, the regret relative to the
largest payment, and whether any misreport moved ``γ``; beside it, the frozen-rule audit
(:func:`mechanisms.audit_incentives` at the chosen ``γ``) for the same sellers and
misreports, the baseline the re-choice is compared with.

Run:  python benchmarks/gamma_choice_regret.py [--m 40] [--sellers 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from api.cli_mechanism import wisconsin
from mechanisms import (
    MechanismConfig,
    UniformPrior,
    audit_gamma_choice,
    audit_incentives,
    myerson_payments,
)
from mechanisms.payments import SerialExecutor

PRIOR = UniformPrior(1e-4, 5e-4)
CFG = MechanismConfig(gamma=1.0, lam=1e-2, mu=10.0, sigma=100.0, k=4.0, n_grid=12)
FACTORS = (0.5, 0.8, 1.25, 2.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--m", type=int, default=40)
    ap.add_argument("--sellers", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    X_all, y_all = wisconsin(args.m + 100, rng=rng)
    X, y, X_val, y_val = (
        X_all[: args.m],
        y_all[: args.m],
        X_all[args.m :],
        y_all[args.m :],
    )
    costs = PRIOR.sample(args.m, rng=rng)
    serial = SerialExecutor()
    budget = 0.5 * myerson_payments(X, y, costs, PRIOR, CFG, executor=serial).total
    sellers = sorted(int(v) for v in rng.choice(args.m, args.sellers, replace=False))
    choose = {"n_gamma": 5, "n_refine": 2, "n_draws": 5, "unit": "1e-9"}
    t0 = time.perf_counter()
    rep = audit_gamma_choice(
        X,
        y,
        costs,
        PRIOR,
        CFG,
        budget=budget,
        X_val=X_val,
        y_val=y_val,
        sellers=sellers,
        misreports=FACTORS,
        executor=serial,
        **choose,
    )
    t_choice = time.perf_counter() - t0
    frozen = None
    if rep.gamma is not None:
        frozen = audit_incentives(
            X,
            y,
            costs,
            PRIOR,
            CFG.with_(gamma=rep.gamma),
            sellers=sellers,
            misreports=FACTORS,
            executor=serial,
        )
    print(
        json.dumps(
            {
                "m": args.m,
                "budget": budget,
                "gamma_chosen": rep.gamma,
                "gamma_moved_by_a_misreport": rep.gamma_moved,
                "regret_rechosen_gamma": rep.regret_max,
                "regret_rechosen_over_max_payment": rep.regret_max
                / max(rep.max_payment, 1e-300),
                "regret_frozen_gamma": None if frozen is None else frozen.ic_regret_max,
                "regret_frozen_over_max_payment": None
                if frozen is None
                else frozen.ic_regret_max / max(frozen.max_payment, 1e-300),
                "deviations": [
                    {"seller": i, "misreport": r, "gamma": g, "gain": gain}
                    for i, r, g, gain in rep.deviations
                ],
                "seconds": t_choice,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
