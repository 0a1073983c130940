"""Cost of the floating-point-safe noise against numpy's textbook samplers.

Three measurements, each old against new in one process (best of ``--repeat``):

1. the Laplace report: ``clip(v) + (Δ/ε)·rng.laplace()`` (the textbook release the
   learners used) against :func:`learners._noise.snapped_laplace` (Mironov's snapping
   mechanism with a full-precision ``U*``), per batch of ``n`` reports;
2. the objective-perturbation vector: ``rng.gamma(d)`` radius against the sum of ``d``
   exponentials ``−ln U*`` (:func:`learners._noise.sample_gamma_direction_noise`);
3. one ``uldp_sparse_linear`` fit with either Laplace release (the share of the fit);

and the empirical audit of the snapped release (lower bound on ε from 2·10⁵ draws per
input at the worst pair, a 2ε twin for contrast).

Run: ``PYTHONPATH=$PWD python benchmarks/snapped_noise.py`` (one to two minutes).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._common import machine_note, markdown_table, write_section
from learners._noise import full_precision_uniform, snapped_laplace

TITLE = "Floating-point-safe noise: snapped Laplace and U* against numpy's samplers"


def paired_best(
    old: Callable[[], Any], new: Callable[[], Any], *, repeat: int
) -> tuple[float, float]:
    """Smallest wall time of each of ``old`` and ``new``, the calls interleaved (the
    shared machine's load then hits both alike)."""
    best = [float("inf"), float("inf")]
    for _ in range(max(repeat, 1)):
        for j, fn in enumerate((old, new)):
            t0 = time.perf_counter()
            fn()
            best[j] = min(best[j], time.perf_counter() - t0)
    return best[0], best[1]


def textbook_laplace(
    value: np.ndarray,
    *,
    low: np.ndarray,
    high: np.ndarray,
    epsilon: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """The previous release: ``Π(value) + Laplace((high − low)/ε)`` from ``rng.laplace``."""
    draws = rng.laplace(0.0, 1.0, value.shape[0])
    return np.clip(value, low, high) + (high - low) / epsilon * draws


def _old_gamma_vector(d: int, rng: np.random.Generator) -> np.ndarray:
    g = rng.standard_normal(d)
    return rng.gamma(shape=d, scale=1.0) / np.linalg.norm(g) * g


def _new_gamma_vector(d: int, rng: np.random.Generator) -> np.ndarray:
    g = rng.standard_normal(d)
    r = float(-np.log(full_precision_uniform(d, rng=rng)).sum())
    return r / np.linalg.norm(g) * g


def laplace_rows(repeat: int) -> list[list[Any]]:
    rows = []
    for n in (1_000, 100_000, 1_000_000):
        rng = np.random.default_rng(0)
        v = rng.normal(0, 1, n)
        low, high, eps = np.full(n, -0.3), np.full(n, 0.45), rng.uniform(0.1, 8, n)
        kw = {"low": low, "high": high, "epsilon": eps, "rng": rng}
        t_old, t_new = paired_best(
            lambda kw=kw, v=v: textbook_laplace(v, **kw),
            lambda kw=kw, v=v: snapped_laplace(v, **kw),
            repeat=repeat,
        )
        rows.append(
            [f"Laplace report, n = {n:,}", t_old * 1e3, t_new * 1e3, t_new / t_old]
        )
    return rows


def gamma_rows(repeat: int) -> list[list[Any]]:
    rows = []
    calls = 2_000
    for d in (3, 30, 300):
        rng = np.random.default_rng(0)

        def run(fn: Any, d: int = d, rng: np.random.Generator = rng) -> None:
            for _ in range(calls):
                fn(d, rng)

        t_old, t_new = paired_best(
            lambda: run(_old_gamma_vector),
            lambda: run(_new_gamma_vector),
            repeat=repeat,
        )
        rows.append(
            [
                f"objective-perturbation b, d = {d} ({calls} draws)",
                t_old * 1e3,
                t_new * 1e3,
                t_new / t_old,
            ]
        )
    return rows


def fit_rows(repeat: int) -> list[list[Any]]:
    import learners.uldp_sparse._mean as mean_module
    from learners.uldp_sparse import ULDPSparseLinearRegression, independent_design
    from learners.uldp_sparse._randomizers import laplace_randomizer

    des = independent_design(4000, 20, 64, rng=np.random.default_rng(1))

    def fit() -> None:
        ULDPSparseLinearRegression(sparsity=8, random_state=0).fit(
            des.X, des.y, sample_epsilon=2.0, groups=des.groups
        )

    def fit_with(release: Any) -> Callable[[], None]:
        def patched(*a: Any, **k: Any) -> np.ndarray:
            return laplace_randomizer(*a, release=release, **k)

        def run() -> None:
            mean_module.laplace_randomizer = patched  # type: ignore[assignment]
            try:
                fit()
            finally:
                mean_module.laplace_randomizer = laplace_randomizer  # type: ignore[assignment]

        return run

    t_old, t_new = paired_best(
        fit_with(textbook_laplace), fit_with(snapped_laplace), repeat=repeat
    )
    return [
        [
            "uldp_sparse_linear fit, 4,000 users × 20 records, d = 64",
            t_old * 1e3,
            t_new * 1e3,
            t_new / t_old,
        ]
    ]


def audit_rows() -> list[list[Any]]:
    from tests.learners.test_snapped_laplace import _honest, _twin, epsilon_lower_bound

    rows = []
    for eps in (0.5, 1.0, 4.0):
        rng = np.random.default_rng(11)
        rows.append(
            [
                eps,
                epsilon_lower_bound(_honest, eps, rng),
                epsilon_lower_bound(_twin, eps, rng),
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    speed = laplace_rows(args.repeat) + gamma_rows(args.repeat) + fit_rows(args.repeat)
    audit = audit_rows()
    body = (
        f"Command: `PYTHONPATH=$PWD python benchmarks/snapped_noise.py` "
        f"({machine_note()}; load average {load:.1f} at the start; best of "
        f"{args.repeat}, old and new calls interleaved in one process).\n\n"
        + markdown_table(
            ["what", "old (ms)", "new (ms)", "new/old"],
            speed,
        )
        + "\nold: numpy's `rng.laplace` / `rng.gamma` (textbook, open to Mironov's "
        "floating-point attack); new: `learners._noise.snapped_laplace` (snapping "
        "mechanism, full-precision U*) and the Gamma radius as a sum of −ln U*.\n\n"
        "Empirical audit of the snapped release (worst pair of inputs, 2·10⁵ draws "
        "each, Clopper–Pearson at α = 10⁻⁶; `tests/learners/test_snapped_laplace.py`):\n\n"
        + markdown_table(
            ["ε claimed", "lower bound, snapped release", "lower bound, 2ε twin"],
            audit,
        )
    )
    print(body)
    if not args.no_write:
        write_section(TITLE, body)


if __name__ == "__main__":
    main()
