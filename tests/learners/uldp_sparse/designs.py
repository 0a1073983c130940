"""Synthetic designs of spec ``uldp-sparse-linear-regression.md`` §10.1 / §15."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Design:
    X: FloatArray
    y: FloatArray
    groups: NDArray[np.int64]
    theta: FloatArray
    support: NDArray[np.int64]


def independent_design(
    n: int,
    m: int,
    d: int,
    *,
    rng: np.random.Generator,
    support: NDArray[np.int64] | None = None,
    value: float = 0.2,
) -> Design:
    """``x ~ N(0, I_d)``, ``ξ ~ N(0, 1)``, ``θ*_j = value`` on the support (default
    the reference's ``{0..7}``)."""
    S = np.arange(8) if support is None else np.asarray(support, dtype=np.int64)
    theta = np.zeros(d)
    theta[S] = value
    X = rng.standard_normal((n * m, d))
    y = X @ theta + rng.standard_normal(n * m)
    return Design(X, y, np.repeat(np.arange(n), m), theta, np.sort(S))


def f1(selected: NDArray[np.int64], truth: NDArray[np.int64]) -> float:
    """F1 of the selected support against the true one."""
    tp = len(set(selected.tolist()) & set(truth.tolist()))
    return 2.0 * tp / (len(selected) + len(truth))
