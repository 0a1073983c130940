"""Secure vertical logistic regression (issue 13; spec ``secure-multiparty-logistic.md``).

Two measurements, written to the ``## Secure vertical logistic (issue 13)`` section of
``benchmarks/RESULTS.md``:

1. One secure Newton step at ``n = 1000``, ``p = 6``, three data parties (V1 data),
   MPyC with three processes on 127.0.0.1 and with one process, against the plain
   float64 step in the same process; the spec measured 80–105 s for a straightforward
   MPyC version, the issue's target is under 20 s. Wall time includes starting the
   party processes and secret-sharing the inputs.
2. V6 scaling: the paper's second simulation (``n = 1000``, ``J = 2`` mixture as in V5,
   two attributes per party, party ``k`` missing 200 consecutive rows at a seeded
   offset) — time to EM convergence plus the Newton fit per ``K``, plain backend; the
   paper's reference protocol (pairwise Z-matrix products) for the complete-data
   Newton fit at ``n = 300``; fitted exponents of time vs ``K`` (log-log least squares).

Run: ``PYTHONPATH=. python benchmarks/secure_vertical.py [--quick]``
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from benchmarks._common import machine_note, markdown_table, write_section
from learners.secure_vertical import SecureVerticalLogisticRegression
from learners.secure_vertical._backend import PlainBackend
from learners.secure_vertical._em import (
    default_init,
    fit_gaussian_mixture,
    impute_conditional_mean,
)
from learners.secure_vertical._ledger import Ledger
from learners.secure_vertical._mpyc_backend import MPyCBackend, quantise
from learners.secure_vertical._newton import secure_newton

BETA = np.array([-0.5, 1.0, -1.0, 0.5, 0.5, -0.5, 0.25])


def v1_blocks(rng: np.random.Generator, n: int) -> tuple[list[np.ndarray], np.ndarray]:
    X = quantise(rng.standard_normal((n, 6)))
    y = (rng.random(n) < 1 / (1 + np.exp(-(BETA[0] + X @ BETA[1:])))).astype(float)
    blocks = [np.hstack([np.ones((n, 1)), X[:, :2]]), X[:, 2:4], X[:, 4:]]
    return blocks, y


def newton_step(
    n: int, processes: list[int], rng: np.random.Generator
) -> list[list[object]]:
    blocks, y = v1_blocks(rng, n)
    rows: list[list[object]] = []
    ops = PlainBackend()
    t0 = time.perf_counter()
    ref = secure_newton(ops, ops.hstack(blocks), y, d=7, max_iter=1)
    plain = time.perf_counter() - t0
    rows.append(["plain float64", 1, plain, 1.0, 0.0])
    for m in processes:
        t0 = time.perf_counter()
        trace = MPyCBackend(m, timeout=1800).newton(
            blocks, y, weights=None, lam=0.0, noise=None, reveal="R1", tol=1e-6,
            max_iter=1, fixed_iterations=False, ledger=Ledger(),
        )  # fmt: skip
        wall = time.perf_counter() - t0
        rows.append(
            [
                f"MPyC, {m} process(es)",
                m,
                wall,
                wall / plain,
                float(np.max(np.abs(trace.beta - ref.beta))),
            ]
        )
        print(rows[-1], flush=True)
    return rows


def v6_data(
    K: int, rng: np.random.Generator, n: int = 1000
) -> tuple[list[np.ndarray], np.ndarray]:
    p = 2 * K
    z = rng.random(n) < 0.25
    X = np.where(z[:, None], -2.0, 2.0) + rng.standard_normal((n, p))
    y = (
        rng.random(n) < 1 / (1 + np.exp(-(-0.5 + 0.5 * X.sum(axis=1) / np.sqrt(p))))
    ).astype(float)
    held = np.ones((n, K), dtype=bool)
    for k in range(K):
        off = int(rng.integers(0, n - 200))
        held[off : off + 200, k] = False
    while not held.any(axis=1).all():  # rows observed by nobody are redrawn
        bad = ~held.any(axis=1)
        held[bad, rng.integers(0, K, size=int(bad.sum()))] = True
    held[:, 0] |= True  # the label holder holds every labelled record
    Xm = X.copy()
    for k in range(K):
        Xm[~held[:, k], 2 * k : 2 * k + 2] = np.nan
    return [Xm[:, 2 * k : 2 * k + 2] for k in range(K)], y


def scaling(
    Ks: list[int], ref_Ks: list[int], rng: np.random.Generator
) -> tuple[list[list[object]], dict[str, float]]:
    rows: list[list[object]] = []
    times_plain, times_ref = [], []
    for K in Ks:
        blocks, y = v6_data(K, rng)
        X = np.hstack(blocks)
        t0 = time.perf_counter()
        fit = fit_gaussian_mixture(
            X,
            default_init(X.shape[1], 2, scale=2.0),
            covariance="fixed_identity",
            max_iter=200,
        )
        t_em = time.perf_counter() - t0
        imp = impute_conditional_mean(X, fit.theta)
        t0 = time.perf_counter()
        est = SecureVerticalLogisticRegression().fit(
            [imp[:, 2 * k : 2 * k + 2] for k in range(K)], y
        )
        t_newton = time.perf_counter() - t0
        times_plain.append(t_em + t_newton)
        rows.append([K, "plain", t_em, fit.n_iter, t_newton, est.n_iter_])
        print(rows[-1], flush=True)
    for K in ref_Ks:
        blocks, y = v6_data(K, rng, n=300)
        full = [np.nan_to_num(b, nan=0.0) for b in blocks]
        t0 = time.perf_counter()
        est = SecureVerticalLogisticRegression(backend="reference", random_state=0).fit(
            full, y
        )
        t = time.perf_counter() - t0
        times_ref.append(t)
        rows.append([K, "reference (n = 300, complete)", None, None, t, est.n_iter_])
        print(rows[-1], flush=True)
    slope = {
        "plain": float(np.polyfit(np.log(Ks), np.log(times_plain), 1)[0]),
        "reference": float(np.polyfit(np.log(ref_Ks), np.log(times_ref), 1)[0])
        if len(ref_Ks) > 1
        else float("nan"),
    }
    return rows, slope


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-mpc", action="store_true")
    ap.add_argument(
        "--step-only", action="store_true", help="print the MPC step rows only"
    )
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    Ks = [3, 5, 10] if args.quick else [3, 5, 10, 15, 25, 45]
    ref_Ks = [3, 5] if args.quick else [3, 5, 8]
    step_rows = [] if args.skip_mpc else newton_step(1000, [3, 1], rng)
    if args.step_only:
        return
    scale_rows, slope = scaling(Ks, ref_Ks, rng)
    body = [
        f"Command: `PYTHONPATH=. python benchmarks/secure_vertical.py{' --quick' if args.quick else ''}` "
        f"({machine_note()}; the machine was shared with other jobs, load average ≈ 10 on 2 cores, "
        "so wall times are inflated; treat them as upper bounds).",
        "",
        "### One secure Newton step, n = 1000, p = 6, three data parties",
        "",
        "Spec §8.2: 80–105 s for a straightforward MPyC version; issue target: under 20 s.",
        "",
        markdown_table(
            ["backend", "processes", "wall s", "× plain", "max abs(β − β_plain)"],
            step_rows,
        )
        if step_rows
        else "(not run)",
        "### V6 scaling (time vs number of parties K)",
        "",
        markdown_table(
            ["K", "mode", "EM s", "EM iters", "Newton s", "Newton iters"], scale_rows
        ),
        f"Fitted exponents of total time vs K: plain {slope['plain']:.2f}, reference {slope['reference']:.2f}.",
        "",
        "Reading: the secure step is exact to 2e-11 against the float64 step on the same "
        "quantised covariates, but the issue's target (< 20 s for one step with three "
        "processes) is **not met** on this shared machine: the batched sigmoid (two "
        "secure comparisons, degree-6 Taylor + 7 squarings, 4 Newton steps for the "
        "reciprocal) dominates; the Hessian and "
        "gradient on integral covariates are cheap. Newton iteration counts of 25 at "
        "K = 25 and 45 are the iteration cap (p = 50 and 90 imputed covariates, near "
        "separation), not convergence. The plain EM + Newton grows with exponent ≈ 1.5 in "
        "K (the EM's per-pattern d×d algebra), the paper's reference protocol with ≈ 2.8 "
        "(one Z-matrix product per pair of parties per iteration, each with an n×g "
        "orthonormalisation).",
    ]
    write_section("Secure vertical logistic (issue 13)", "\n".join(body))


if __name__ == "__main__":
    main(sys.argv[1:])
