"""The two closed-form cost-prior families of the spec (``mechanism.md`` §2).

* Uniform on ``[low, high]``: ``F = (c − low)/(high − low)``, ``Ψ(c) = 2c − low``.
* Exponential with rate ``r`` on ``[0, inf)``: ``F = 1 − e^{−rc}``, ``f = r e^{−rc}``,
  ``Ψ(c) = c + (e^{rc} − 1)/r`` (``expm1``), ``Ψ'(c) = 1 + e^{rc}``.

Both are regular (``Ψ`` increasing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from mechanisms.priors._cost_prior import (
    CostPrior,
    FloatArray,
    check_real,
    check_support,
)

__all__ = ["ExponentialPrior", "UniformPrior"]


@dataclass(frozen=True, slots=True)
class UniformPrior(CostPrior):
    """Uniform costs on ``[low, high]``: ``F = (c − low)/(high − low)``, ``Ψ(c) = 2c − low``.

    Parameters
    ----------
    low, high : float
        The support, ``0 ≤ low < high < inf``.
    """

    family: ClassVar[str] = "uniform"
    low: float
    high: float

    def __post_init__(self) -> None:
        lo, hi = check_support(self.low, self.high)
        if math.isinf(hi):
            raise ValueError("high must be finite for a uniform prior")
        object.__setattr__(self, "low", lo)
        object.__setattr__(self, "high", hi)

    def _cdf(self, c: FloatArray) -> FloatArray:
        return (c - self.low) / (self.high - self.low)

    def _pdf(self, c: FloatArray) -> FloatArray:
        return np.full(c.shape, 1.0 / (self.high - self.low))

    def _ppf(self, q: FloatArray) -> FloatArray:
        return self.low + q * (self.high - self.low)

    def _ratio(self, c: FloatArray) -> FloatArray:
        return c - self.low

    def _dlogpdf(self, c: FloatArray) -> FloatArray:
        return np.zeros(c.shape)

    def _virtual_cost_derivative(self, c: FloatArray) -> FloatArray:
        # Ψ(c) = 2c − low: Ψ' = 2 (the general form's value, without its guards)
        return np.full(c.shape, 2.0)

    def virtual_cost(self, c: ArrayLike) -> Any:
        """``Ψ(c) = c + (c − low)``; one float inside the support in scalar arithmetic
        (the same two roundings as the array form; a payment sweep asks a few times
        per seller, about 6 µs each through arrays)."""
        if isinstance(c, float) and self.contains(c):
            x = float(c)
            return x + (x - self.low)
        return CostPrior.virtual_cost(self, c)

    def virtual_cost_derivative(self, c: ArrayLike) -> Any:
        """``Ψ'(c) = 2``; one float inside the support without arrays."""
        if isinstance(c, float) and self.contains(c):
            return 2.0
        return CostPrior.virtual_cost_derivative(self, c)

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "params": {"low": self.low, "high": self.high}}


@dataclass(frozen=True, slots=True)
class ExponentialPrior(CostPrior):
    """Exponential costs with rate ``r`` on ``[0, inf)``.

    ``F = 1 − e^{−rc}``, ``f = r e^{−rc}``, so ``Ψ(c) = c + (e^{rc} − 1)/r``
    (computed with ``expm1``) and ``Ψ'(c) = 1 + e^{rc}``.

    Parameters
    ----------
    rate : float
        ``r > 0``.
    """

    family: ClassVar[str] = "exponential"
    rate: float

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "rate", check_real("rate", self.rate, low=0.0, strict=True)
        )

    @property
    def low(self) -> float:  # type: ignore[override]
        return 0.0

    @property
    def high(self) -> float:  # type: ignore[override]
        return math.inf

    def _cdf(self, c: FloatArray) -> FloatArray:
        return -np.expm1(-self.rate * c)

    def _pdf(self, c: FloatArray) -> FloatArray:
        return self.rate * np.exp(-self.rate * c)

    def _ppf(self, q: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore"):
            return -np.log1p(-q) / self.rate

    def _ratio(self, c: FloatArray) -> FloatArray:
        with np.errstate(over="ignore"):
            return np.expm1(self.rate * c) / self.rate

    def _dlogpdf(self, c: FloatArray) -> FloatArray:
        return np.full(c.shape, -self.rate)

    def _virtual_cost_derivative(self, c: FloatArray) -> FloatArray:
        with np.errstate(over="ignore"):
            return 1.0 + np.exp(self.rate * c)

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "params": {"rate": self.rate}}
