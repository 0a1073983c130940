"""Per-record convex losses, vectorised in the linear predictor ``z = x·w``.

Each loss gives ``ℓ(z, y)``, its derivative ``ℓ'(z, y)`` and second derivative
``ℓ''(z, y)`` with respect to ``z``, so a weighted empirical risk
``R(w) = Σ_i a_i ℓ(x_i·w, y_i)`` has

* gradient ``∇R(w) = Xᵀ (a ∘ ℓ'(Xw, y))``,
* Hessian ``∇²R(w) = Xᵀ diag(a ∘ ℓ''(Xw, y)) X`` (its diagonal:
  ``Σ_i a_i ℓ''_i x_{ij}²``), and Hessian-vector product ``Xᵀ (a ∘ ℓ'' ∘ Xv)``.

These are the ``ℓ_i(w)`` of spec ``mechanism.md`` §4 and §7 (paper eq. (10)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, cast

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit

FloatArray = NDArray[np.float64]


class Loss(Protocol):
    """A convex per-record loss of the linear predictor."""

    @property
    def name(self) -> str: ...

    def value(self, z: FloatArray, y: FloatArray) -> FloatArray: ...

    def derivative(self, z: FloatArray, y: FloatArray) -> FloatArray: ...

    def curvature(self, z: FloatArray, y: FloatArray) -> FloatArray: ...


@dataclass(frozen=True, slots=True)
class LogisticLoss:
    """``ℓ(z, y) = log(1 + exp(−y z))`` for labels ``y ∈ {−1, +1}``.

    ``ℓ' = −y·σ(−y z)``, ``ℓ'' = σ(z)σ(−z) ≤ 1/4`` (the bound used by the privacy
    proof, spec §3 Correction).
    """

    name: str = "logistic"

    def value(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return np.logaddexp(0.0, -y * z)

    def derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return cast(FloatArray, -y * expit(-y * z))

    def curvature(self, z: FloatArray, y: FloatArray) -> FloatArray:
        s = expit(z)
        return cast(FloatArray, s * (1.0 - s))


@dataclass(frozen=True, slots=True)
class SquaredLoss:
    """``ℓ(z, y) = (y − z)²/2``; ``ℓ' = z − y``, ``ℓ'' = 1``."""

    name: str = "squared"

    def value(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return 0.5 * (y - z) ** 2

    def derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return z - y

    def curvature(self, z: FloatArray, y: FloatArray) -> FloatArray:
        return np.ones_like(z)


@dataclass(frozen=True, slots=True)
class PinballLoss:
    """Check loss ``ρ_τ(y − z)`` with its kink smoothed on ``|y − z| ≤ h``.

    With residual ``r = y − z``: ``ρ(r) = τ r`` for ``r ≥ h``, ``(τ − 1) r`` for
    ``r ≤ −h`` and, in between, the quadratic that matches value and slope at ``±h``:
    ``ρ(r) = r²/(4h) + (τ − 1/2) r + h/4``. It is convex, C¹, and within ``h/4`` of
    the exact pinball loss; ``h → 0`` recovers it (quantile regression).
    """

    quantile: float = 0.5
    smoothing: float = 1e-3
    name: str = "pinball"

    def value(self, z: FloatArray, y: FloatArray) -> FloatArray:
        r = y - z
        h, t = self.smoothing, self.quantile
        quad = r * r / (4.0 * h) + (t - 0.5) * r + h / 4.0
        return np.where(r >= h, t * r, np.where(r <= -h, (t - 1.0) * r, quad))

    def derivative(self, z: FloatArray, y: FloatArray) -> FloatArray:
        r = y - z
        h, t = self.smoothing, self.quantile
        # dρ/dr, then d/dz = −dρ/dr
        drho = np.where(r >= h, t, np.where(r <= -h, t - 1.0, r / (2.0 * h) + t - 0.5))
        return -drho

    def curvature(self, z: FloatArray, y: FloatArray) -> FloatArray:
        r = y - z
        return np.where(np.abs(r) < self.smoothing, 1.0 / (2.0 * self.smoothing), 0.0)


def make_loss(name: str, *, quantile: float = 0.5, smoothing: float = 1e-3) -> Loss:
    """Return the loss called ``name`` (``"logistic"``, ``"squared"`` or ``"pinball"``)."""
    if name == "logistic":
        return LogisticLoss()
    if name == "squared":
        return SquaredLoss()
    if name == "pinball":
        return PinballLoss(quantile=quantile, smoothing=smoothing)
    raise ValueError(f"loss must be 'logistic', 'squared' or 'pinball', got {name!r}")


def weighted_risk(
    loss: Loss, w: FloatArray, X: FloatArray, y: FloatArray, a: FloatArray
) -> float:
    """``Σ_i a_i ℓ(x_i·w, y_i)``."""
    return float(a @ loss.value(X @ w, y))


def weighted_gradient(
    loss: Loss, w: FloatArray, X: FloatArray, y: FloatArray, a: FloatArray
) -> FloatArray:
    """``Xᵀ (a ∘ ℓ'(Xw, y))``."""
    return X.T @ (a * loss.derivative(X @ w, y))


def weighted_hessian(
    loss: Loss, w: FloatArray, X: FloatArray, y: FloatArray, a: FloatArray
) -> FloatArray:
    """``Xᵀ diag(a ∘ ℓ''(Xw, y)) X``."""
    c = a * loss.curvature(X @ w, y)
    return (X.T * c) @ X


def weighted_hessian_diagonal(
    loss: Loss, w: FloatArray, X: FloatArray, y: FloatArray, a: FloatArray
) -> FloatArray:
    """Diagonal of the Hessian: ``Σ_i a_i ℓ''_i x_{ij}²``."""
    c = a * loss.curvature(X @ w, y)
    return (X * X).T @ c


def weighted_hessian_vector(
    loss: Loss,
    w: FloatArray,
    X: FloatArray,
    y: FloatArray,
    a: FloatArray,
    v: FloatArray,
) -> FloatArray:
    """Hessian-vector product ``Xᵀ (a ∘ ℓ''(Xw, y) ∘ Xv)``."""
    c = a * loss.curvature(X @ w, y)
    return X.T @ (c * (X @ v))
