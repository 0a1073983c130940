"""``allocate`` vs one scikit-learn ``LogisticRegression(lbfgs)`` fit, same data, same process.

The short form of ``allocation_speed.py`` without the (slow) paper-style reference:
Wisconsin (best of 5) and synthetic m ∈ {10³, 10⁴, 10⁵}, d ∈ {10, 50} (best of 3), with
that script's configurations. Prints one markdown row per case.

Run: ``python benchmarks/allocation_vs_sklearn.py``
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from allocation_speed import PRIOR, WBC_CFG, synthetic_cfg
from sklearn.linear_model import LogisticRegression

from market.datasets import load_wisconsin, make_synthetic, train_val_test_split
from mechanisms import allocate


def best_of(f: Callable[[], object], n: int) -> float:
    """Smallest wall time of ``n`` calls (the machine is shared and noisy)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def row(
    name: str, X: np.ndarray, y: np.ndarray, c: np.ndarray, cfg: object, n: int
) -> str:
    ta = best_of(lambda: allocate(X, y, c, PRIOR, cfg), n)
    ts = best_of(lambda: LogisticRegression(solver="lbfgs").fit(X, y), n)
    m, d = X.shape
    return f"| {name} | {m} | {d} | {ta:.3f} | {1e6 * ta / m:.0f} | {ts:.3f} | {ta / ts:.2f} |"


def main() -> None:
    rng = np.random.default_rng(0)
    X, y = load_wisconsin()
    sp = train_val_test_split(X, y, random_state=0)
    c = rng.uniform(1e-4, 5e-4, size=sp.y_train.size)
    print(
        "| data | m | d | allocate s | µs per seller | sklearn s | allocate / sklearn |"
    )
    print("|---|---|---|---|---|---|---|")
    print(row("Wisconsin", sp.X_train, sp.y_train, c, WBC_CFG, 5))
    for d in (10, 50):
        for m in (1000, 10_000, 100_000):
            data = make_synthetic(m, d, label_noise=0.05, random_state=rng)
            print(row("synthetic", data.X, data.y, data.costs, synthetic_cfg(m), 3))


if __name__ == "__main__":
    main()
