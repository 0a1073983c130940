"""γ for a budget: cost as a ratio to one payment computation, and what it buys.

Run:  python benchmarks/gamma_for_budget.py [--sizes 300 3000] [--draws 10]
      [--budget-share 0.5] [--write]

For each market size ``m`` (synthetic records, ``strict`` mode with ``λ = 0.01``,
``μ = 1``, ``σ = 300``, ``k = 4``, ``L = 20`` — the market defaults' ``σ = 1`` buys so
little ``ε`` that every γ gives a chance-level model on this data — costs ~ U[0.05, 0.5] under that public prior, a public validation
set of 200 rows and a held-out test set of 2,000 rows from the same distribution):

1. **One payment computation**: ``myerson_payments`` at one γ (the base allocation
   included), on the default process pool.
2. **γ for the budget**: :func:`mechanisms.choose_gamma` with its defaults (13-point
   log grid on ``[1e-3, 1e3]``, 3 refinements, 15 public-proxy draws, at most 2
   payment computations). The budget is ``--budget-share`` of the expected payment
   ``Σ Ψ_i u(ε_i)`` at the grid's smallest γ (about the most the range can spend).
3. **Best affordable fixed γ on the same grid**: the **test** error of the model
   actually released on the sellers' records at every grid γ (``--draws`` noise
   draws; a benchmark may spend the synthetic records' privacy, a market may not),
   and affordability in increasing γ (the payment bounds where they decide, exact
   payments where they do not) until an affordable γ is found that no larger γ beats
   on test error (larger γ are then "skipped"); the best is the affordable γ of least
   test error.

The ratio in (2) is wall time over (1). (3) is what a buyer who knew the records'
test error would pick; the chosen γ's test error and spend are reported beside it.
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from benchmarks._common import machine_note, markdown_table, write_section
from mechanisms import MechanismConfig, UniformPrior, allocate, myerson_payments
from mechanisms.money import to_minor_units
from mechanisms.payments import default_workers, expected_payments
from mechanisms.tuning import choose_gamma, released_validation_error
from mechanisms.tuning._gamma_for_budget import payment_bounds

CFG = MechanismConfig(
    gamma=1.0, lam=0.01, mu=1.0, sigma=300.0, k=4.0, eps_avg_max=20.0, mode="strict"
)
PRIOR = UniformPrior(0.05, 0.5)
UNIT = 0.01
D = 10
TITLE = "γ for a budget: cost and what it buys"


def draw(m: int, rng: np.random.Generator, w: np.ndarray) -> tuple[Any, Any]:
    """Gaussian features scaled by the public constant ``3·sqrt(d)`` and clipped to
    the unit ball; labels from ``w`` with 10% flips."""
    X = rng.normal(size=(m, D)) / (3.0 * np.sqrt(D))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X @ w >= 0, 1.0, -1.0)
    return X, np.where(rng.random(m) < 0.1, -y, y)


def paid(payments: Any) -> float:
    return float(to_minor_units(payments, UNIT).sum()) * UNIT


def run(m: int, *, draws: int, share: float, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    w = rng.normal(size=D)
    X, y = draw(m, rng, w)
    Xv, yv = draw(200, rng, w)
    Xt, yt = draw(2000, rng, w)
    costs = PRIOR.sample(m, rng=rng)
    grid = np.geomspace(1e-3, 1e3, 13)
    with ProcessPoolExecutor(default_workers()) as pool:
        # the budget: a share of the expected payment Σ Ψ_i u(ε_i) at the smallest γ
        # (what the range can spend, in expectation over costs)
        top = allocate(X, y, costs, PRIOR, CFG.with_(gamma=float(grid[0])))
        budget = round(share * float(expected_payments(top).sum()), 2)
        # warm the pool's workers (imports, compiled kernels) before timing anything
        myerson_payments(
            X, y, costs, PRIOR, CFG.with_(gamma=1.0), sellers=[0, 1], executor=pool
        )
        t0 = time.perf_counter()
        choice = choose_gamma(
            X, y, costs, PRIOR, CFG, budget=budget, X_val=Xv, y_val=yv,
            unit=UNIT, executor=pool, random_state=seed,
        )  # fmt: skip
        t_choose = time.perf_counter() - t0
        # one payment computation, at the chosen γ (or the middle of the grid)
        g_one = float(choice.gamma) if choice.gamma is not None else 1.0
        t0 = time.perf_counter()
        myerson_payments(X, y, costs, PRIOR, CFG.with_(gamma=g_one), executor=pool)
        t_one = time.perf_counter() - t0
        # the fixed grid: the released model's test error at every γ, then
        # affordability in increasing γ (bounds where they decide, else exact
        # payments) until an affordable γ is found whose test error no larger γ beats
        allocs, errs = [], []
        for g in grid:
            alloc = allocate(X, y, costs, PRIOR, CFG.with_(gamma=float(g)))
            allocs.append(alloc)
            errs.append(
                released_validation_error(
                    X, y, alloc, Xt, yt, n_draws=draws, random_state=seed + 1
                )
            )
        rows = []
        found: float | None = None
        for j, (g, alloc, err) in enumerate(zip(grid, allocs, errs, strict=True)):
            low, high = payment_bounds(alloc, costs, PRIOR)
            lo, hi = paid(low), paid(high)
            if found is not None and err >= found:
                rows.append((float(g), None, "skipped", math.nan, err, lo, hi))
                continue
            if hi <= budget:
                spend, ok, how = math.nan, True, "bound"
            elif lo > budget:
                spend, ok, how = math.nan, False, "bound"
            else:
                pay = myerson_payments(
                    X, y, costs, PRIOR, alloc.config, executor=pool, base=alloc
                )
                spend = paid(pay.payments)
                ok, how = spend <= budget, "exact"
            if ok and min(errs[j:]) >= err:
                found = err
            rows.append((float(g), ok, how, spend, err, lo, hi))
    fixed_ok = [r for r in rows if r[1]]
    best = min(fixed_ok, key=lambda r: r[4]) if fixed_ok else None
    chosen_err = math.nan
    if choice.allocation is not None:
        chosen_err = released_validation_error(
            X, y, choice.allocation, Xt, yt, n_draws=draws, random_state=seed + 1
        )
    best_spend = math.nan
    if best is not None:
        if math.isnan(best[3]):
            cfg = CFG.with_(gamma=best[0])
            with ProcessPoolExecutor(default_workers()) as pool:
                best_spend = paid(
                    myerson_payments(X, y, costs, PRIOR, cfg, executor=pool).payments
                )
        else:
            best_spend = best[3]
    return {
        "m": m,
        "budget": budget,
        "t_one": t_one,
        "t_choose": t_choose,
        "ratio": t_choose / t_one,
        "n_exact": choice.n_exact,
        "timings": {k: round(v, 2) for k, v in choice.timings.items()},
        "n_points": len(choice.points),
        "gamma": choice.gamma,
        "spend": choice.total_payment,
        "val_err": choice.validation_error,
        "test_err": chosen_err,
        "reason": choice.reason,
        "note": choice.note,
        "best_gamma": None if best is None else best[0],
        "best_spend": best_spend,
        "best_err": None if best is None else best[4],
        "grid": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[300, 3000])
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--budget-share", type=float, default=0.5)
    ap.add_argument("--write", action="store_true", help="write RESULTS.md section")
    args = ap.parse_args()
    results = []
    for m in args.sizes:
        r = run(m, draws=args.draws, share=args.budget_share)
        results.append(r)
        print(
            f"m={m}: one payment {r['t_one']:.1f}s, choose {r['t_choose']:.1f}s "
            f"{r['timings']} "
            f"(ratio {r['ratio']:.2f}, {r['n_exact']} exact, {r['n_points']} γ), "
            f"γ={r['gamma']}, spend {r['spend']:.2f}/{r['budget']:.2f}, "
            f"test err {r['test_err']:.3f}; best fixed γ={r['best_gamma']} "
            f"spend {r['best_spend']:.2f} err {r['best_err']:.3f}; {r['note']}",
            flush=True,
        )
        for g, ok, how, spend, err, lo, hi in r["grid"]:
            print(
                f"   γ={g:9.3g} affordable={ok!s:5} ({how}) spend={spend:.2f} "
                f"bounds=[{lo:.2f}, {hi:.2f}] test err={err:.3f}"
            )
    if args.write:
        cmd = (
            "python benchmarks/gamma_for_budget.py --sizes "
            + " ".join(str(m) for m in args.sizes)
            + f" --draws {args.draws} --budget-share {args.budget_share} --write"
        )
        table = markdown_table(
            [
                "m", "one payment (s)", "γ for budget (s)", "ratio", "exact payments",
                "γ evaluated", "budget", "chosen γ", "spend", "test error",
                "best fixed γ", "its spend", "its test error",
            ],
            [
                (
                    r["m"], r["t_one"], r["t_choose"], r["ratio"], r["n_exact"],
                    r["n_points"], r["budget"], r["gamma"], r["spend"],
                    r["test_err"], r["best_gamma"], r["best_spend"], r["best_err"],
                )
                for r in results
            ],
        )  # fmt: skip
        notes = "\n".join(
            f"- m = {r['m']}: {r['note'] or 'budget (nearly) spent, no note'}"
            for r in results
        )
        body = (
            f"Command: `{cmd}` ({machine_note()}).\n\n"
            "Synthetic market (d = 10, `strict` mode, λ = 0.01, μ = 1, σ = 300, k = 4, "
            "L = 20, "
            "costs ~ U[0.05, 0.5]), budget = "
            f"{args.budget_share:g} × the expected payment Σ Ψ_i u(ε_i) at γ = 10⁻³. "
            "One payment "
            "computation = `myerson_payments` at the chosen γ (base allocation "
            "included). Test error: the model released on the records at that γ, "
            f"{args.draws} noise draws, 2,000 held-out rows. Best fixed γ: the "
            "affordable grid γ of least test error (what a buyer who could see the "
            "test error would pick).\n\n" + table + "\nNotes returned with the "
            "choice:\n\n" + notes
        )
        write_section(TITLE, body)


if __name__ == "__main__":
    main()
