"""The default rule (certified optimum over the candidate-model
range) — allocate's time on Wisconsin before/after, what the restriction costs in G
and in test error, and brute-force IC regret.

1. ``allocate`` on Wisconsin (m = 399, the configuration of
   ``certified_allocation.py``) at ``--before`` (the code extracted with
   ``git archive``; its default was the unrestricted local search, status ``local``)
   and now (default ``certify="auto"``); each variant in its own subprocess,
   interleaved over rounds, best of 5 calls per round; ratios within a round. Also the
   re-solve with one report changed that payments and audits run (models reused).
2. Accuracy: ``G`` of the default rule against the unrestricted local search
   (``certify="report"``) and the test error of the released model (15 draws), on
   Wisconsin at the settings the trade-off selects, and ``G`` on 20 small random
   instances.
3. IC regret by brute force on 5 small instances (40 misreports per seller, full
   re-solves and full payments; ``--regret``).

Run: ``python benchmarks/candidate_range.py [--regret]`` from the repository root.
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
from _common import extract_revision, machine_note, markdown_table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TIMER = r"""
import dataclasses, json, sys, time
import numpy as np
from mechanisms import MechanismConfig, UniformPrior, allocate
from market.datasets import load_wisconsin, train_val_test_split
X, y = load_wisconsin()
sp = train_val_test_split(X, y, random_state=0)
prior = UniformPrior(1e-4, 5e-4)
c = prior.sample(sp.X_train.shape[0], rng=np.random.default_rng(0))
cfg = MechanismConfig(gamma=1.0, lam=1e-3, mu=100.0, sigma=1e3, k=4, eps_avg_max=10.0)
allocate(sp.X_train, sp.y_train, c, prior, cfg)
ts = []
for _ in range(5):
    t = time.perf_counter()
    a = allocate(sp.X_train, sp.y_train, c, prior, cfg)
    ts.append(time.perf_counter() - t)
out = {"t": min(ts), "status": str(a.status), "G": a.objective, "eps_avg": a.eps_avg}
if sys.argv[1] == "after":
    from mechanisms.allocation._eta_search import solve_allocation
    from mechanisms.allocation._problem import Problem
    from mechanisms.allocation._range._candidate_range import scenario_virtual_costs
    psi = prior.virtual_cost(c)
    prob = Problem(sp.X_train, sp.y_train, psi, np.full(c.size, np.inf), cfg,
                   scenario_psi=scenario_virtual_costs(prior, c.size))
    base = solve_allocation(prob)
    rs = []
    for i in range(5):
        p = psi.copy(); p[i] = psi[i] * 1.2
        t = time.perf_counter()
        solve_allocation(dataclasses.replace(prob, psi=p), warm_start=base)
        rs.append(time.perf_counter() - t)
    out["resolve_t"] = float(np.median(rs))
    out["models_t"] = a.timings.get("models")
    out["n_models"] = a.certificate.n_models
    out["n_evals"] = a.certificate.n_bound_solves
print(json.dumps(out))
"""


def time_variants(before_rev: str, rounds: int) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory() as tmp:
        extract_revision(before_rev, tmp, ["mechanisms", "learners", "market"])
        out = []
        for r in range(rounds):
            for name, path in (("before", tmp), ("after", str(ROOT))):
                env = dict(os.environ, PYTHONPATH=path)
                res = subprocess.run(
                    [sys.executable, "-c", TIMER, name], env=env, check=True,
                    capture_output=True, text=True, cwd=path,
                )  # fmt: skip
                row = json.loads(res.stdout.strip().splitlines()[-1])
                row.update(round=r, variant=name)
                out.append(row)
                print(row, flush=True)
        return out


WBC_SETTINGS = [  # (γ, λ, μ, σ): what the trade-off selects across γ (RESULTS.md)
    (1e-3, 1e-4, 300.0, 100.0),
    (0.0178, 1e-3, 300.0, 100.0),
    (0.075, 1e-3, 300.0, 100.0),
    (0.316, 1e-3, 300.0, 100.0),
    (1.33, 1e-2, 10.0, 1.0),
    (5.62, 1e-4, 30.0, 0.01),
    (1.0, 1e-3, 100.0, 1e3),
]


def accuracy_wisconsin() -> list[list[object]]:
    from market.datasets import load_wisconsin, train_val_test_split
    from mechanisms import MechanismConfig, UniformPrior, allocate
    from mechanisms.tuning import released_validation_error

    X, y = load_wisconsin()
    sp = train_val_test_split(X, y, random_state=0)
    prior = UniformPrior(1e-4, 5e-4)
    c = np.random.default_rng(0).uniform(1e-4, 5e-4, sp.y_train.size)
    rows = []
    for gamma, lam, mu, sigma in WBC_SETTINGS:
        cfg = MechanismConfig(gamma=gamma, lam=lam, mu=mu, sigma=sigma, k=4,
                              eps_avg_max=10.0)  # fmt: skip
        out = {}
        for rule in ("auto", "report"):
            a = allocate(sp.X_train, sp.y_train, c, prior, cfg.with_(certify=rule))
            err = released_validation_error(
                sp.X_train, sp.y_train, a, sp.X_test, sp.y_test, n_draws=15,
                random_state=101,
            )  # fmt: skip
            out[rule] = (a, err)
        (aa, ea), (ar, er) = out["auto"], out["report"]
        rows.append([gamma, lam, mu, sigma, ar.objective, aa.objective,
                     (aa.objective - ar.objective) / abs(ar.objective),
                     ar.eps_avg, aa.eps_avg, er, ea, str(ar.status), str(aa.status)])  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def accuracy_small(n: int = 20) -> tuple[list[list[object]], dict[str, float]]:
    from mechanisms import allocate
    from tests.mechanisms.test_certified_allocation import PRIOR, random_instance

    rows, gaps = [], []
    for seed in range(n):
        X, y, c, cfg = random_instance(seed)
        a = allocate(X, y, c, PRIOR, cfg.with_(certify="auto"))
        r = allocate(X, y, c, PRIOR, cfg.with_(certify="report"))
        gap = (a.objective - r.objective) / abs(r.objective)
        gaps.append(gap)
        rows.append([seed, c.size, r.objective, a.objective, gap, str(a.status),
                     a.certificate.n_models])  # fmt: skip
    g = np.array(gaps)
    summary = {"median": float(np.median(g)), "max": float(g.max()),
               "min": float(g.min()), "n_better": int((g < -1e-9).sum())}  # fmt: skip
    return rows, summary


def regret_rows() -> list[list[object]]:
    from tests.mechanisms.test_candidate_range import default_instance, ic_regret

    rows = []
    for seed in range(5):
        t = time.perf_counter()
        worst, total, min_util = ic_regret(seed)
        m = default_instance(seed)[2].size
        rows.append([seed, m, total, min_util, worst, time.perf_counter() - t])
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default="1475968", help="revision before this pass")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--regret", action="store_true", help="also brute-force IC regret")
    args = ap.parse_args()
    t0 = time.perf_counter()
    timing = time_variants(args.before, args.rounds)
    by_round: dict[int, dict[str, dict[str, object]]] = {}
    for r in timing:
        by_round.setdefault(int(r["round"]), {})[str(r["variant"])] = r  # type: ignore[call-overload]
    ratios = [
        float(v["after"]["t"]) / float(v["before"]["t"]) for v in by_round.values()
    ]  # type: ignore[arg-type]
    t_table = markdown_table(
        ["round", "variant", "allocate s (best of 5)", "status", "G", "ε_avg",
         "re-solve s (models reused)", "models s", "models", "a-steps"],
        [[r["round"], r["variant"], r["t"], r["status"], r["G"], r["eps_avg"],
          r.get("resolve_t", "–"), r.get("models_t", "–"), r.get("n_models", "–"),
          r.get("n_evals", "–")] for r in timing],
    )  # fmt: skip
    wbc = accuracy_wisconsin()
    w_table = markdown_table(
        ["γ", "λ", "μ", "σ", "G local search", "G default rule", "rel. gap",
         "ε_avg local", "ε_avg default", "test err local", "test err default",
         "status local", "status default"], wbc,
    )  # fmt: skip
    small, summ = accuracy_small()
    s_table = markdown_table(
        ["seed", "m", "G local search", "G default rule", "rel. gap", "status",
         "models"], small,
    )  # fmt: skip
    body = (
        f"Command: `python benchmarks/candidate_range.py` ({time.perf_counter() - t0:.0f} s; "
        f"{machine_note()}).\n\n"
        f"allocate on Wisconsin (m = 399), after/before time ratio per round: "
        f"{[round(x, 2) for x in ratios]}.\n\n" + t_table + "\n\n"
        "Wisconsin (m = 399, costs U[1e-4, 5e-4], split seed 0): the default rule "
        "against the unrestricted local search at the settings the trade-off "
        "selects; test error of the released model, 15 draws.\n\n" + w_table + "\n\n"
        f"20 small random instances (`random_instance`, m 5–11): relative G gap "
        f"default − local search: median {summ['median']:.3g}, max {summ['max']:.3g}, "
        f"min {summ['min']:.3g} ({summ['n_better']} instances where the default rule "
        "is below the local search, i.e. the local search missed the global "
        "optimum).\n\n" + s_table
    )
    if args.regret:
        reg = regret_rows()
        body += "\n\nIC regret by brute force (default rule):\n\n" + markdown_table(
            ["seed", "m", "Σ t_i", "min IR utility", "max regret / t_i", "s"], reg
        )
    print(body)


if __name__ == "__main__":
    main()
