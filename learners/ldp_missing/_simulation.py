"""The paper's simulation design (spec §1, §8, §10), for tests and benchmarks.

``x ~ U[−1, 1]^k``, ``P(y = 1 | x) = σ(β*ᵀx')``, and ``x`` missing with
``P(m = 1 | y) = σ(α*ᵀy')`` (``alpha_parametrizes="missing"``, the model as written)
or ``P(m = 0 | y) = σ(α*ᵀy')`` (``"observed"``, the flipped sign the paper's
experiments very probably used, spec §8.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit, log_expit

__all__ = ["MissingData", "cross_entropy", "missing_data_limit", "simulate"]


@dataclass(frozen=True, slots=True)
class MissingData:
    """A simulated sample: ``X_full`` (all covariates), ``X`` (missing rows NaN),
    ``y01 ∈ {0, 1}``, ``missing``."""

    X_full: NDArray[np.float64]
    X: NDArray[np.float64]
    y01: NDArray[np.float64]
    missing: NDArray[np.bool_]


def simulate(
    n: int,
    *,
    beta: ArrayLike,
    alpha: ArrayLike,
    alpha_parametrizes: Literal["missing", "observed"] = "missing",
    rng: np.random.Generator,
) -> MissingData:
    """Draw ``n`` records of the design above (``k = len(beta) − 1``)."""
    b = np.asarray(beta, dtype=float)
    a = np.asarray(alpha, dtype=float)
    if alpha_parametrizes not in ("missing", "observed"):
        raise ValueError(
            f"alpha_parametrizes must be 'missing' or 'observed', got {alpha_parametrizes!r}"
        )
    X_full = rng.uniform(-1.0, 1.0, (n, b.size - 1))
    y01 = (rng.random(n) < expit(b[0] + X_full @ b[1:])).astype(float)
    p = expit(a[0] + a[1] * y01)
    p_missing = p if alpha_parametrizes == "missing" else 1.0 - p
    missing = rng.random(n) < p_missing
    X = np.where(missing[:, None], np.nan, X_full)
    return MissingData(X_full, X, y01, missing)


def cross_entropy(
    beta: ArrayLike, X: NDArray[np.float64], y01: NDArray[np.float64]
) -> float:
    """Mean ``ℓ(β; x, y) = log(1 + e^{βᵀx'}) − y·βᵀx'`` over the rows (spec §1)."""
    b = np.asarray(beta, dtype=float)
    t = b[0] + X @ b[1:]
    return float(np.mean(-log_expit(t) + (1.0 - y01) * t))


def missing_data_limit(
    beta: ArrayLike,
    alpha: ArrayLike,
    *,
    alpha_parametrizes: Literal["missing", "observed"] = "missing",
) -> NDArray[np.float64]:
    """Unconstrained DS limit ``(β₀* + log(r₁/r₀), β₁*, …)`` (spec §1, useful fact)."""
    b = np.array(beta, dtype=float)
    a = np.asarray(alpha, dtype=float)
    p = expit(a[0] + a[1] * np.array([0.0, 1.0]))
    r = 1.0 - p if alpha_parametrizes == "missing" else p
    b[0] += float(np.log(r[1] / r[0]))
    return b
