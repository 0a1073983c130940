"""``ldp_missing_logistic`` with the records on the sellers' machines: rounds of report
batches against the spec's one-report-per-step SGD, at equal ε.

Design (spec ``ldp-logistic-missing-data.md`` §10, the paper's flipped-sign setting):
x ~ U[−1, 1], β* = (0, 1), α* = (1, 1) with σ = P(observed), every record at the same
ε. For each trial one data set is drawn and fitted by every method (paired):
``sequential`` is the library's SGD (one report per step, the spec);
``rounds of R`` is the seller-custody protocol with ``round_size = R`` (every report of
a round computed at the iterate of the round's start), its rounds answered in process
(:func:`learners.local_protocol.run_vectorized`, the unseeded library path). Reported:
mean ± sd over trials of the excess empirical cross-entropy on the full data (risk)
and of ``‖β̂ − β*‖`` (err), and the mean paired risk difference to ``sequential`` with
its standard error.

Run: ``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/ldp_missing_rounds.py
[--n 10000] [--trials 20] [--seed 0] [--write]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import machine_note, markdown_table, write_section

from learners import LDPMissingLogisticRegression
from learners.ldp_missing import cross_entropy, simulate
from learners.local_protocol import run_vectorized

BETA = (0.0, 1.0)
ALPHA = (1.0, 1.0)
EPS = (1.0, 10.0)
ROUND_SIZES = (None, 10, 100, 1000)


def _fit(
    algorithm: str,
    round_size: int | None,
    X: np.ndarray,
    y: np.ndarray,
    eps: float,
    rng: np.random.Generator,
) -> np.ndarray:
    n = X.shape[0]
    est = LDPMissingLogisticRegression(algorithm=algorithm, random_state=rng)
    if round_size is None:
        est.fit(X, y, sample_epsilon=np.full(n, eps))
    else:
        proto = est.protocol(
            epsilon=np.full(n, eps),
            n_records=np.ones(n, dtype=np.int64),
            n_features=X.shape[1],
            round_size=round_size,
            random_state=rng,
            custody="platform",
        )
        run_vectorized(proto, X, y, rng)
        proto.finish_into(est)
    return np.r_[est.intercept_, est.coef_]


def run(n: int, trials: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    rows = []
    for algorithm in ("two_phase", "dummy"):
        for eps in EPS:
            risks: dict[int | None, list[float]] = {r: [] for r in ROUND_SIZES}
            errs: dict[int | None, list[float]] = {r: [] for r in ROUND_SIZES}
            for _ in range(trials):
                data = simulate(
                    n, beta=BETA, alpha=ALPHA, alpha_parametrizes="observed", rng=rng
                )
                y = 2.0 * data.y01 - 1.0
                base = cross_entropy(np.array(BETA), data.X_full, data.y01)
                for r in ROUND_SIZES:
                    beta = _fit(algorithm, r, data.X, y, eps, rng)
                    risks[r].append(cross_entropy(beta, data.X_full, data.y01) - base)
                    errs[r].append(float(np.linalg.norm(beta - np.array(BETA))))
            seq = np.array(risks[None])
            for r in ROUND_SIZES:
                rk, er = np.array(risks[r]), np.array(errs[r])
                diff = rk - seq
                rows.append(
                    [
                        algorithm,
                        f"{eps:g}",
                        "sequential (spec)" if r is None else f"rounds of {r}",
                        "–"
                        if r is None
                        else str(-(-n // r) * (2 if algorithm == "two_phase" else 1)),
                        f"{rk.mean():.4f} ± {rk.std():.4f}",
                        f"{er.mean():.3f} ± {er.std():.3f}",
                        "–"
                        if r is None
                        else f"{diff.mean():+.4f} ± {diff.std(ddof=1) / np.sqrt(trials):.4f}",
                    ]
                )
                print(rows[-1], flush=True)
    header = [
        "algorithm",
        "ε",
        "SGD",
        "rounds",
        "risk",
        "err ‖β̂ − β*‖",
        "risk − sequential (± s.e.)",
    ]
    return markdown_table(header, rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    table = run(args.n, args.trials, args.seed)
    took = time.perf_counter() - t0
    cmd = (
        "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/ldp_missing_rounds.py "
        f"--n {args.n} --trials {args.trials} --seed {args.seed} --write"
    )
    body = (
        f"`{cmd}`\n\n{machine_note()}; {took:.0f} s. n = {args.n} records (one per "
        f"seller), β* = {BETA}, α* = {ALPHA} (σ = P(observed)), {args.trials} paired "
        "trials per row (one data set per trial, fitted by every row); risk = excess "
        "empirical cross-entropy on the full data. `rounds` = report rounds of the "
        "seller-custody protocol (both phases for two_phase).\n\n" + table
    )
    print(body)
    if args.write:
        write_section(
            "ldp_missing_logistic: report rounds (seller custody) vs one report per "
            f"step, n = {args.n}",
            body,
        )


if __name__ == "__main__":
    main()
