"""What running the local learners as their seller-custody protocol costs in process.

A seeded library fit of a local learner spawns one generator per seller and answers the
protocol seller by seller (so that it equals the sellers' own answers bit for bit); an
unseeded fit draws a round's answers at once with the same randomizer functions. This
times both (best of 2, one BLAS thread) and, for ``ldp_missing_logistic``, the
library's default one-report-per-step SGD.

Run: ``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/local_protocol_cost.py
[--write]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import machine_note, markdown_table, write_section

from learners import (
    LDPMissingLogisticRegression,
    OneBitQuantileRegression,
    ULDPSparseLinearRegression,
)
from learners.ldp_missing import simulate
from learners.onebit_quantile import sample_ald_noise


def _best(fit: Callable[[], Any]) -> float:
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        fit()
        times.append(time.perf_counter() - t0)
    return min(times)


def run() -> list[list[str]]:
    rng = np.random.default_rng(0)
    rows: list[list[str]] = []

    def add(learner: str, n: int, how: str, seconds: float) -> None:
        rows.append(
            [learner, str(n), how, f"{seconds:.2f}", f"{1e6 * seconds / n:.0f}"]
        )
        print(rows[-1], flush=True)

    for n in (10_000, 100_000):
        X = rng.uniform(-1, 1, (n, 2))
        y = X @ np.array([1.0, -1.0]) + sample_ald_noise(n, alpha=0.3, rng=rng)
        for rs, how in (
            (None, "OS entropy (answers drawn at once)"),
            (1, "seeded (seller by seller)"),
        ):
            est = OneBitQuantileRegression(alpha=0.3, interval=[-4, 4], random_state=rs)
            add(
                "onebit_quantile",
                n,
                how,
                _best(lambda est=est, X=X, y=y: est.fit(X, y, sample_epsilon=2.0)),
            )
    n = 10_000
    d = simulate(
        n, beta=[0.0, 1.0], alpha=[1.0, 1.0], alpha_parametrizes="observed", rng=rng
    )
    y = 2.0 * d.y01 - 1.0
    eps = np.ones(n)
    for kw, how in (
        ({}, "one report per step (library default)"),
        ({"round_size": 100}, "rounds of 100, OS entropy"),
        (
            {"round_size": 100, "random_state": 1},
            "rounds of 100, seeded (seller by seller)",
        ),
    ):
        est = LDPMissingLogisticRegression(**kw)
        add(
            "ldp_missing_logistic (two_phase)",
            n,
            how,
            _best(lambda est=est: est.fit(d.X, y, sample_epsilon=eps)),
        )
    users, m, dim = 2_000, 20, 64
    Xu = rng.standard_normal((users * m, dim))
    yu = Xu[:, 3] * 0.5 + rng.standard_normal(users * m)
    groups = np.repeat(np.arange(users), m)
    for rs, how in ((None, "OS entropy"), (1, "seeded")):
        est = ULDPSparseLinearRegression(sparsity=4, random_state=rs)
        add(
            "uldp_sparse_linear (users × 20 records)", users, how + " (seller by seller)",
            _best(lambda est=est: est.fit(Xu, yu, sample_epsilon=2.0, groups=groups)),
        )  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    rows = run()
    header = ["learner", "sellers", "fit", "seconds (best of 2)", "µs per seller"]
    cmd = "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/local_protocol_cost.py --write"
    body = (
        f"`{cmd}`\n\n{machine_note()}; the machine is shared, compare within this run. "
        "Library fits of the local learners, randomizers included.\n\n"
        + markdown_table(header, rows)
    )
    print(body)
    if args.write:
        write_section(
            "Local learners: the seller-custody protocol run in process", body
        )


if __name__ == "__main__":
    main()
