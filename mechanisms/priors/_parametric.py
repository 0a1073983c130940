"""Truncated normal, Beta and log-normal cost priors (spec ``mechanism.md`` §2).

Each family's ``F`` needs a special function (``Φ``, the regularised incomplete beta
``I_x``), so ``Ψ = c + F/f`` is evaluated in log space (``scipy.special.log_ndtr``)
wherever ``F`` or ``f`` may underflow; ``Ψ`` is then finite wherever ``F/f`` fits in a
double.

* Truncated normal ``N(mean, std²)`` on ``[low, high]``: ``F/f = std·(Φ(z) − Φ(α))/φ(z)``,
  ``Ψ' = 2 + (F/f)·z/std``; log-concave, hence regular.
* ``Beta(α, β)`` rescaled to ``[low, high]``: ``F = I_x(α, β)``; regular for ``β ≥ 1``,
  irregular near the top for ``β < 1``.
* Log-normal, ``log c ~ N(mean_log, sigma_log²)``: ``F/f = sigma_log·c·Φ(t)/φ(t)``;
  regular.

The uniform and exponential families are in :mod:`mechanisms.priors._closed_form`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import numpy as np
from scipy import special, stats

from mechanisms.priors._cost_prior import (
    CostPrior,
    FloatArray,
    check_real,
    check_support,
    high_or_none,
)
from mechanisms.priors._log_space import LOG_SQRT_2PI, log_ndtr_diff

__all__ = ["BetaPrior", "LogNormalPrior", "TruncatedNormalPrior"]


@dataclass(frozen=True, slots=True)
class TruncatedNormalPrior(CostPrior):
    """Normal ``N(mean, std²)`` restricted to ``[low, high]``.

    With ``z = (c − mean)/std``, ``α = (low − mean)/std``:
    ``F/f = std·(Φ(z) − Φ(α))/φ(z)`` (log space), ``(log f)' = −z/std``, so
    ``Ψ' = 2 + (F/f)·z/std``. Log-concave, hence regular.

    Parameters
    ----------
    mean : float
    std : float
        ``> 0``.
    low, high : float
        Support, ``0 ≤ low < high ≤ inf``.
    """

    family: ClassVar[str] = "truncated_normal"
    mean: float
    std: float
    low: float = 0.0
    high: float = math.inf

    def __post_init__(self) -> None:
        lo, hi = check_support(self.low, self.high)
        object.__setattr__(self, "mean", check_real("mean", self.mean))
        object.__setattr__(
            self, "std", check_real("std", self.std, low=0.0, strict=True)
        )
        object.__setattr__(self, "low", lo)
        object.__setattr__(self, "high", hi)
        if not np.isfinite(self._log_mass()):
            raise ValueError("std is too small: the support carries no normal mass")
        if math.isfinite(hi) and not math.isfinite(
            float(self._ratio(np.array([hi]))[0])
        ):
            raise ValueError("high is too many std above mean: Ψ(high) overflows")

    def _z(self, c: FloatArray) -> FloatArray:
        return (c - self.mean) / self.std

    def _alpha(self) -> float:
        return (self.low - self.mean) / self.std

    def _log_mass(self) -> float:
        beta = (self.high - self.mean) / self.std
        return float(log_ndtr_diff(np.array(beta), np.array(self._alpha())))

    def _cdf(self, c: FloatArray) -> FloatArray:
        return np.exp(log_ndtr_diff(self._z(c), self._alpha()) - self._log_mass())

    def _pdf(self, c: FloatArray) -> FloatArray:
        z = self._z(c)
        return np.exp(-0.5 * z * z - LOG_SQRT_2PI - self._log_mass()) / self.std

    def _ppf(self, q: FloatArray) -> FloatArray:
        beta = (self.high - self.mean) / self.std
        return cast(
            FloatArray,
            stats.truncnorm.ppf(q, self._alpha(), beta, loc=self.mean, scale=self.std),
        )

    def _ratio(self, c: FloatArray) -> FloatArray:
        z = self._z(c)
        with np.errstate(over="ignore"):
            return self.std * np.exp(
                log_ndtr_diff(z, self._alpha()) + 0.5 * z * z + LOG_SQRT_2PI
            )

    def _dlogpdf(self, c: FloatArray) -> FloatArray:
        return -self._z(c) / self.std

    def to_dict(self) -> dict[str, Any]:
        params = {"mean": self.mean, "std": self.std, "low": self.low}
        return {
            "family": self.family,
            "params": {**params, "high": high_or_none(self.high)},
        }


@dataclass(frozen=True, slots=True)
class BetaPrior(CostPrior):
    """``Beta(alpha, beta)`` rescaled to ``[low, high]``: ``c = low + (high − low)·x``.

    ``F = I_x(α, β)``, ``f = x^{α−1}(1−x)^{β−1} / (B(α, β)·(high − low))``,
    ``(log f)' = ((α−1)/x − (β−1)/(1−x))/(high − low)``; ``Ψ'(low) = 1 + 1/α``.
    For ``β > 1``, ``f(high) = 0`` and ``Ψ(c) → +inf`` as ``c → high`` (returned as
    ``inf`` at ``high`` exactly). For ``β < 1`` the density blows up at ``high``,
    ``Ψ`` decreases near the top and the prior is *irregular* (iron it).

    Parameters
    ----------
    alpha, beta : float
        Shape parameters ``> 0``.
    low, high : float
        Support, ``0 ≤ low < high < inf``.
    """

    family: ClassVar[str] = "beta"
    alpha: float
    beta: float
    low: float = 0.0
    high: float = 1.0

    def __post_init__(self) -> None:
        lo, hi = check_support(self.low, self.high)
        if math.isinf(hi):
            raise ValueError("high must be finite for a beta prior")
        object.__setattr__(
            self, "alpha", check_real("alpha", self.alpha, low=0.0, strict=True)
        )
        object.__setattr__(
            self, "beta", check_real("beta", self.beta, low=0.0, strict=True)
        )
        object.__setattr__(self, "low", lo)
        object.__setattr__(self, "high", hi)

    def _x(self, c: FloatArray) -> FloatArray:
        return np.clip((c - self.low) / (self.high - self.low), 0.0, 1.0)

    def _logpdf_x(self, x: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore"):
            return cast(
                FloatArray,
                special.xlogy(self.alpha - 1.0, x)
                + special.xlog1py(self.beta - 1.0, -x)
                - special.betaln(self.alpha, self.beta),
            )

    def _cdf(self, c: FloatArray) -> FloatArray:
        return cast(FloatArray, special.betainc(self.alpha, self.beta, self._x(c)))

    def _pdf(self, c: FloatArray) -> FloatArray:
        return np.exp(self._logpdf_x(self._x(c))) / (self.high - self.low)

    def _ppf(self, q: FloatArray) -> FloatArray:
        return cast(
            FloatArray,
            self.low
            + (self.high - self.low) * special.betaincinv(self.alpha, self.beta, q),
        )

    def _ratio(self, c: FloatArray) -> FloatArray:
        x, a, b = self._x(c), self.alpha, self.beta
        cdf = special.betainc(a, b, x)
        # Where I_x underflows: I_x = x^a(1−x)^b/(aB)·₂F₁(a+b, 1; a+1; x) (DLMF 8.17.8).
        small = (cdf <= 0) & (x > 0)
        series = np.zeros(x.shape)
        if small.any():
            xs = x[small]
            series[small] = (
                xs * (1.0 - xs) / a * special.hyp2f1(a + b, 1.0, a + 1.0, xs)
            )
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            ratio = np.exp(np.log(cdf) - self._logpdf_x(x))
        ratio = np.where(cdf > 0, ratio, series)
        return (self.high - self.low) * np.where(x > 0, ratio, 0.0)

    def _dlogpdf(self, c: FloatArray) -> FloatArray:
        x = self._x(c)
        with np.errstate(divide="ignore", invalid="ignore"):
            left = np.where(self.alpha == 1.0, 0.0, (self.alpha - 1.0) / x)
            right = np.where(self.beta == 1.0, 0.0, (self.beta - 1.0) / (1.0 - x))
        return (left - right) / (self.high - self.low)

    def _virtual_cost_derivative(self, c: FloatArray) -> FloatArray:
        x = self._x(c)
        with np.errstate(invalid="ignore", over="ignore"):
            out = CostPrior._virtual_cost_derivative(self, c)
        out = np.where(x == 0, 1.0 + 1.0 / self.alpha, out)
        top = math.inf if self.beta > 1 else (-math.inf if self.beta < 1 else np.nan)
        return np.where((x == 1) & (self.beta != 1), top, out)

    def to_dict(self) -> dict[str, Any]:
        params = {
            "alpha": self.alpha,
            "beta": self.beta,
            "low": self.low,
            "high": self.high,
        }
        return {"family": self.family, "params": params}


@dataclass(frozen=True, slots=True)
class LogNormalPrior(CostPrior):
    """Log-normal costs on ``[0, inf)``: ``log c ~ N(mean_log, sigma_log²)``.

    With ``t = (log c − mean_log)/sigma_log`` and the Mills-type ratio
    ``M(t) = Φ(t)/φ(t)``: ``F/f = sigma_log·c·M(t)``, ``Ψ' = 2 + M(t)(sigma_log + t)``
    (``Ψ'(0) = 1``). ``M`` is increasing, so the prior is regular.

    Parameters
    ----------
    mean_log : float
    sigma_log : float
        ``> 0``.
    """

    family: ClassVar[str] = "lognormal"
    mean_log: float
    sigma_log: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean_log", check_real("mean_log", self.mean_log))
        sigma = check_real("sigma_log", self.sigma_log, low=0.0, strict=True)
        object.__setattr__(self, "sigma_log", sigma)

    @property
    def low(self) -> float:  # type: ignore[override]
        return 0.0

    @property
    def high(self) -> float:  # type: ignore[override]
        return math.inf

    def _t(self, c: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore"):
            return (np.log(c) - self.mean_log) / self.sigma_log

    def _mills(self, t: FloatArray) -> FloatArray:
        with np.errstate(over="ignore", invalid="ignore"):
            return cast(
                FloatArray, np.exp(special.log_ndtr(t) + 0.5 * t * t + LOG_SQRT_2PI)
            )

    def _cdf(self, c: FloatArray) -> FloatArray:
        return cast(FloatArray, special.ndtr(self._t(c)))

    def _pdf(self, c: FloatArray) -> FloatArray:
        t = self._t(c)
        with np.errstate(divide="ignore", invalid="ignore"):
            dens = np.exp(-0.5 * t * t - LOG_SQRT_2PI) / (self.sigma_log * c)
        return np.where(c > 0, dens, 0.0)

    def _ppf(self, q: FloatArray) -> FloatArray:
        return cast(
            FloatArray, np.exp(self.mean_log + self.sigma_log * special.ndtri(q))
        )

    def _ratio(self, c: FloatArray) -> FloatArray:
        with np.errstate(invalid="ignore", over="ignore"):
            out = self.sigma_log * c * self._mills(self._t(c))
        return np.where(c > 0, out, 0.0)

    def _dlogpdf(self, c: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore"):
            return -(1.0 + self._t(c) / self.sigma_log) / c

    def _virtual_cost_derivative(self, c: FloatArray) -> FloatArray:
        t = self._t(c)
        with np.errstate(invalid="ignore", over="ignore"):
            out = 2.0 + self._mills(t) * (self.sigma_log + t)
        return np.where(c > 0, out, 1.0)

    def to_dict(self) -> dict[str, Any]:
        params = {"mean_log": self.mean_log, "sigma_log": self.sigma_log}
        return {"family": self.family, "params": params}
