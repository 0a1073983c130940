"""Cost-prior families and the dict codec used by the REST API (spec ``mechanism.md`` §2).

Every prior is a frozen dataclass subclass of :class:`CostPrior` (defined, with the
uniform and exponential families, in :mod:`mechanisms.virtual_costs`). ``Ψ = c + F/f``
is evaluated in log space (``scipy.special.log_ndtr``) wherever ``F`` or ``f`` may
underflow, so ``Ψ`` is finite wherever ``F/f`` fits in a double (at the top of a bounded
support: whenever ``f(high) > 0`` is not absurdly small; :class:`TruncatedNormalPrior`
rejects supports where ``Ψ(high)`` overflows, mixtures return ``inf`` there and in
gaps where the density underflows, which ironing flattens). This module is the public
import path for all priors and helpers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike
from scipy import special, stats

from mechanisms.ironing import IronedPrior
from mechanisms.virtual_costs import (
    LOG_SQRT_2PI,
    CostPrior,
    ExponentialPrior,
    FloatArray,
    RegularityReport,
    UniformPrior,
    check_real,
    check_support,
    ensure_regular,
    log_ndtr_diff,
    logsumexp,
    virtual_costs,
)

__all__ = [
    "BetaPrior",
    "CostPrior",
    "EmpiricalPrior",
    "ExponentialPrior",
    "GaussianMixturePrior",
    "IronedPrior",
    "LogNormalPrior",
    "RegularityReport",
    "TruncatedNormalPrior",
    "UniformPrior",
    "ensure_regular",
    "prior_from_dict",
    "virtual_costs",
]

_CHUNK = 1 << 20  # points × components evaluated at once by the mixture


def _high_or_none(high: float) -> float | None:
    return high if math.isfinite(high) else None


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
        return stats.truncnorm.ppf(
            q, self._alpha(), beta, loc=self.mean, scale=self.std
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
            "params": {**params, "high": _high_or_none(self.high)},
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
            return (
                special.xlogy(self.alpha - 1.0, x)
                + special.xlog1py(self.beta - 1.0, -x)
                - special.betaln(self.alpha, self.beta)
            )

    def _cdf(self, c: FloatArray) -> FloatArray:
        return special.betainc(self.alpha, self.beta, self._x(c))

    def _pdf(self, c: FloatArray) -> FloatArray:
        return np.exp(self._logpdf_x(self._x(c))) / (self.high - self.low)

    def _ppf(self, q: FloatArray) -> FloatArray:
        return self.low + (self.high - self.low) * special.betaincinv(
            self.alpha, self.beta, q
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
            return np.exp(special.log_ndtr(t) + 0.5 * t * t + LOG_SQRT_2PI)

    def _cdf(self, c: FloatArray) -> FloatArray:
        return special.ndtr(self._t(c))

    def _pdf(self, c: FloatArray) -> FloatArray:
        t = self._t(c)
        with np.errstate(divide="ignore", invalid="ignore"):
            dens = np.exp(-0.5 * t * t - LOG_SQRT_2PI) / (self.sigma_log * c)
        return np.where(c > 0, dens, 0.0)

    def _ppf(self, q: FloatArray) -> FloatArray:
        return np.exp(self.mean_log + self.sigma_log * special.ndtri(q))

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


@dataclass(frozen=True, eq=False)
class GaussianMixturePrior(CostPrior):
    """Mixture ``Σ_j w_j N(m_j, s_j²)`` restricted (as a whole) to ``[low, high]``.

    ``f(c) = Σ_j w_j φ(z_j)/s_j / Z`` with ``z_j = (c − m_j)/s_j`` and
    ``Z = Σ_j w_j (Φ(β_j) − Φ(α_j))``; ``F(c) = Σ_j w_j (Φ(z_j) − Φ(α_j)) / Z``;
    ``(log f)' = −Σ_j π_j(c) z_j/s_j`` with ``π_j ∝ w_j φ(z_j)/s_j``. All sums are
    taken in log space. Two well-separated narrow bumps give an irregular prior.
    ``ppf`` inverts ``F`` by safeguarded Newton from a tabulated start.

    Parameters
    ----------
    weights : sequence of float
        ``w_j ≥ 0`` with a positive sum (normalised internally).
    means : sequence of float
    stds : sequence of float
        ``s_j > 0``.
    low, high : float
        Support, ``0 ≤ low < high ≤ inf``.
    """

    family: ClassVar[str] = "gaussian_mixture"
    weights: tuple[float, ...]
    means: tuple[float, ...]
    stds: tuple[float, ...]
    low: float = 0.0
    high: float = math.inf

    def __post_init__(self) -> None:
        lo, hi = check_support(self.low, self.high)
        object.__setattr__(self, "low", lo)
        object.__setattr__(self, "high", hi)
        n = None
        for name, low_bound in (("weights", 0.0), ("means", None), ("stds", 0.0)):
            try:
                raw = np.atleast_1d(np.asarray(getattr(self, name), dtype=float))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{name} must be a sequence of real numbers") from exc
            if raw.ndim != 1 or raw.size == 0 or (n is not None and raw.size != n):
                raise ValueError(
                    f"{name} must be a non-empty 1-D sequence of equal length"
                )
            n = raw.size
            vals = tuple(
                check_real(
                    f"{name}[{j}]", float(v), low=low_bound, strict=name == "stds"
                )
                for j, v in enumerate(raw)
            )
            object.__setattr__(self, name, vals)
        if not sum(self.weights) > 0:
            raise ValueError("weights must have a positive sum")
        if not np.isfinite(self._log_mass):
            raise ValueError("stds are too small: the support carries no mixture mass")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_dict() == other.to_dict()  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return hash((self.weights, self.means, self.stds, self.low, self.high))

    @cached_property
    def _components(self) -> dict[str, FloatArray]:
        """Normalised weights, means, stds and the per-component ``Φ`` at ``low``."""
        w = np.asarray(self.weights) / sum(self.weights)
        m, s = np.asarray(self.means), np.asarray(self.stds)
        alpha = (self.low - m) / s
        sign = np.where(alpha > 0, -1.0, 1.0)  # survival form above the mean
        with np.errstate(divide="ignore"):
            logw = np.log(w)
        return {
            "w": w,
            "logw": logw,
            "m": m,
            "s": s,
            "alpha": alpha,
            "sign": sign,
            "cdf_alpha": special.ndtr(sign * alpha),
        }

    @cached_property
    def _log_mass(self) -> float:
        k = self._components
        upper = log_ndtr_diff((self.high - k["m"]) / k["s"], k["alpha"])
        return float(logsumexp(k["logw"] + upper, axis=0))

    def _terms(self, c: FloatArray, *, need: str = "Ffd") -> FloatArray:
        """Rows ``(log F, log f, (log f)')`` at ``c`` (only those named in ``need``:
        ``F``, ``f``, ``d``; the others are left ``nan``), in chunks of points."""
        out = np.full((3, c.size), np.nan)
        step = max(1, _CHUNK // len(self.weights))
        for start in range(0, c.size, step):
            chunk = slice(start, start + step)
            out[:, chunk] = self._chunk_terms(c[chunk], need=need)
        out[:2] -= self._log_mass
        return out

    def _chunk_terms(self, c: FloatArray, *, need: str) -> FloatArray:
        """Unnormalised terms; ``Σ w_j(Φ(z_j) − Φ(α_j))`` in plain space (one ``ndtr``
        per term, survival form for ``α_j > 0``), redone in log space where it
        underflows."""
        k = self._components
        z = (c[:, None] - k["m"]) / k["s"]
        out = np.full((3, c.size), np.nan)
        if "F" in need:
            mass = k["w"] * k["sign"] * (special.ndtr(k["sign"] * z) - k["cdf_alpha"])
            total = np.sum(mass, axis=1)
            with np.errstate(divide="ignore"):
                out[0] = np.log(np.maximum(total, 0.0))
            tiny = total < 1e-280
            if tiny.any():
                log_terms = k["logw"] + log_ndtr_diff(z[tiny], k["alpha"])
                out[0, tiny] = logsumexp(log_terms, axis=1)
        if "f" in need or "d" in need:
            log_dens = k["logw"] - 0.5 * z * z - LOG_SQRT_2PI - np.log(k["s"])
            out[1] = logsumexp(log_dens, axis=1)
        if "d" in need:
            shift = np.where(np.isfinite(out[1]), out[1], 0.0)[:, None]
            out[2] = -np.sum(np.exp(log_dens - shift) * z / k["s"], axis=1)
        return out

    def _cdf(self, c: FloatArray) -> FloatArray:
        return np.minimum(np.exp(self._terms(c, need="F")[0]), 1.0)

    def _pdf(self, c: FloatArray) -> FloatArray:
        return np.exp(self._terms(c, need="f")[1])

    def _ratio(self, c: FloatArray) -> FloatArray:
        log_cdf, log_pdf, _ = self._terms(c, need="Ff")
        with np.errstate(over="ignore", invalid="ignore"):
            return np.where(np.isneginf(log_cdf), 0.0, np.exp(log_cdf - log_pdf))

    def _dlogpdf(self, c: FloatArray) -> FloatArray:
        return self._terms(c, need="d")[2]

    @cached_property
    def _table(self) -> tuple[FloatArray, FloatArray]:
        m, s = self._components["m"], self._components["s"]
        top = self.high if math.isfinite(self.high) else float(np.max(m + 40.0 * s))
        top = max(top, self.low + 1e-300)
        grid = np.unique(
            np.concatenate(
                [
                    np.linspace(self.low, top, 4097),
                    np.quantile(np.clip(m, self.low, top), np.linspace(0, 1, 1025)),
                ]
            )
        )
        return grid, np.maximum.accumulate(self._cdf(grid))

    def _grid_ppf(self, q: FloatArray) -> FloatArray:
        grid, table = self._table
        return np.interp(q, table, grid)

    def _ppf(self, q: FloatArray) -> FloatArray:
        grid, table = self._table
        k = np.clip(np.searchsorted(table, q), 1, grid.size - 1)
        lo, hi = grid[k - 1], grid[k]
        x = np.clip(np.interp(q, table, grid), lo, hi)
        active = np.flatnonzero((q > 0) & (q < 1))
        for _ in range(100):  # safeguarded Newton: quadratic, or bisection of [lo, hi]
            if active.size == 0:
                break
            log_cdf, log_pdf, _ = self._terms(x[active], need="Ff")
            gap = np.exp(log_cdf) - q[active]
            lo[active] = np.where(gap < 0, x[active], lo[active])
            hi[active] = np.where(gap > 0, x[active], hi[active])
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                new = x[active] - gap / np.exp(log_pdf)
            inside = (new >= lo[active]) & (new <= hi[active])
            new = np.where(inside, new, 0.5 * (lo[active] + hi[active]))
            new = np.where(gap == 0, x[active], new)
            moved = np.abs(new - x[active]) > 1e-15 * np.abs(new)
            x[active] = new
            active = active[moved & (np.abs(gap) > 1e-16)]
        return np.where(q <= 0, self.low, np.where(q >= 1, self.high, x))

    def to_dict(self) -> dict[str, Any]:
        params = {
            "weights": list(self.weights),
            "means": list(self.means),
            "stds": list(self.stds),
            "low": self.low,
            "high": _high_or_none(self.high),
        }
        return {"family": self.family, "params": params}


@dataclass(frozen=True)
class EmpiricalPrior(CostPrior):
    """Smoothed prior estimated from past bids: a Gaussian KDE reflected at the ends.

    ``f(c) ∝ Σ_i [φ_h(c − b_i) + φ_h(c − (2·low − b_i)) + φ_h(c − (2·high − b_i))]`` on
    ``[low, high]``, renormalised to mass one (a :class:`GaussianMixturePrior` with the
    reflected centres), so ``F``, ``f`` and ``Ψ`` are exact for this density. Past bids
    are *public* market history (the market publishes them), so estimating the prior
    from them spends no seller privacy. A multi-modal bid history gives an irregular
    prior: check it and iron it.

    Parameters
    ----------
    bids : tuple of float
        Past bids, each in ``[low, high]``.
    bandwidth : float
        Kernel standard deviation ``h > 0``.
    low, high : float
        Support, ``0 ≤ low < high < inf``.
    """

    family: ClassVar[str] = "empirical"
    bids: tuple[float, ...]
    bandwidth: float
    low: float
    high: float
    _mixture: GaussianMixturePrior = field(init=False, repr=False, compare=False)

    #: Default top of the support: ``max(bids)·(1 + MARGIN)``.
    MARGIN: ClassVar[float] = 0.1

    def __post_init__(self) -> None:
        lo, hi = check_support(self.low, self.high)
        if math.isinf(hi):
            raise ValueError("high must be finite for an empirical prior")
        h = check_real("bandwidth", self.bandwidth, low=0.0, strict=True)
        bids = _check_bids(self.bids, low=lo, high=hi)
        centres = np.concatenate([bids, 2.0 * lo - bids, 2.0 * hi - bids])
        mixture = GaussianMixturePrior(
            (1.0,) * centres.size, tuple(centres), (h,) * centres.size, lo, hi
        )
        for name, value in (
            ("low", lo),
            ("high", hi),
            ("bandwidth", h),
            ("bids", tuple(bids)),
        ):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_mixture", mixture)

    @classmethod
    def from_bids(
        cls,
        bids: ArrayLike,
        *,
        bandwidth: float | None = None,
        low: float | None = None,
        high: float | None = None,
    ) -> EmpiricalPrior:
        """Build the prior from public past bids.

        ``low`` defaults to 0, ``high`` to ``max(bids)·(1 + MARGIN)``; ``bandwidth`` to
        Silverman's rule ``0.9·min(sd, IQR/1.34)·n^{-1/5}`` (falling back to ``sd``,
        then to ``(high − low)/10``, when the spread is zero).
        """
        arr = _check_bids(bids, low=0.0, high=math.inf)
        lo = 0.0 if low is None else check_real("low", low, low=0.0)
        hi = float(np.max(arr)) * (1.0 + cls.MARGIN) if high is None else high
        if high is None and not hi > lo:
            raise ValueError(
                "bids must have max(bids) > low to default high; pass high"
            )
        if bandwidth is None:
            sd = float(np.std(arr, ddof=1)) if arr.size > 1 else 0.0
            iqr = float(np.subtract(*np.percentile(arr, [75, 25])))
            spread = min(sd, iqr / 1.34) if iqr > 0 else sd
            if not spread > 0:
                spread = (float(hi) - lo) / 10.0 / 0.9
            bandwidth = 0.9 * spread * arr.size ** (-0.2)
        return cls(tuple(arr.tolist()), bandwidth, lo, hi)

    def _cdf(self, c: FloatArray) -> FloatArray:
        return self._mixture._cdf(c)

    def _pdf(self, c: FloatArray) -> FloatArray:
        return self._mixture._pdf(c)

    def _ppf(self, q: FloatArray) -> FloatArray:
        return self._mixture._ppf(q)

    def _grid_ppf(self, q: FloatArray) -> FloatArray:
        return self._mixture._grid_ppf(q)

    def _ratio(self, c: FloatArray) -> FloatArray:
        return self._mixture._ratio(c)

    def _dlogpdf(self, c: FloatArray) -> FloatArray:
        return self._mixture._dlogpdf(c)

    def to_dict(self) -> dict[str, Any]:
        params = {
            "bids": list(self.bids),
            "bandwidth": self.bandwidth,
            "low": self.low,
            "high": self.high,
        }
        return {"family": self.family, "params": params}


def _check_bids(bids: Any, *, low: float, high: float) -> FloatArray:
    try:
        arr = np.asarray(bids, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError("bids must be a sequence of real numbers") from exc
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("bids must be a non-empty 1-D sequence")
    bad = ~np.isfinite(arr) | (arr < low) | (arr > high)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"bids[{i}] = {arr[i]!r} is not a finite cost in [{low}, {high}]"
        )
    return arr


# ---------------------------------------------------------------------- dict codec
_REQUIRED: dict[str, tuple[str, ...]] = {
    "uniform": ("low", "high"),
    "exponential": ("rate",),
    "truncated_normal": ("mean", "std"),
    "beta": ("alpha", "beta"),
    "lognormal": ("mean_log", "sigma_log"),
    "empirical": ("bids",),
    "gaussian_mixture": ("weights", "means", "stds"),
    "ironed": ("base",),
}
_OPTIONAL: dict[str, tuple[str, ...]] = {
    "truncated_normal": ("low", "high"),
    "beta": ("low", "high"),
    "empirical": ("bandwidth", "low", "high"),
    "gaussian_mixture": ("low", "high"),
    "ironed": ("n_points",),
}


def prior_from_dict(d: Mapping[str, Any]) -> CostPrior:
    """Build a prior from ``{"family": ..., "params": {...}}`` (REST API form).

    Families and params (``[...]`` optional): ``uniform`` {low, high};
    ``exponential`` {rate}; ``truncated_normal`` {mean, std, [low=0], [high=None→inf]};
    ``beta`` {alpha, beta, [low=0], [high=1]}; ``lognormal`` {mean_log, sigma_log};
    ``empirical`` {bids, [bandwidth], [low], [high]} (see
    :meth:`EmpiricalPrior.from_bids`); ``gaussian_mixture`` {weights, means, stds,
    [low=0], [high=None→inf]}; ``ironed`` {base: <prior dict>, [n_points]}.
    ``to_dict`` writes an infinite ``high`` as ``None``. Unknown families, missing or
    unknown params raise ``ValueError`` naming them.
    """
    if not isinstance(d, Mapping):
        raise ValueError(f"prior must be a mapping, got {type(d).__name__}")
    family, params = d.get("family"), d.get("params", {})
    if not isinstance(family, str) or family not in _REQUIRED:
        raise ValueError(f"family must be one of {sorted(_REQUIRED)}, got {family!r}")
    if not isinstance(params, Mapping):
        raise ValueError(f"params must be a mapping, got {type(params).__name__}")
    required, optional = _REQUIRED[family], _OPTIONAL.get(family, ())
    for name in required:
        if name not in params:
            raise ValueError(f"missing parameter {name!r} for family {family!r}")
    for name in params:
        if name not in required + optional:
            raise ValueError(f"unknown parameter {name!r} for family {family!r}")
    p = dict(params)
    if family in ("truncated_normal", "gaussian_mixture") and p.get("high") is None:
        p["high"] = math.inf
    if family == "empirical":
        return EmpiricalPrior.from_bids(p.pop("bids"), **p)
    if family == "ironed":
        if not isinstance(p["base"], Mapping):
            raise ValueError("base must be a prior dict {'family': ..., 'params': ...}")
        return IronedPrior(prior_from_dict(p.pop("base")), **p)
    return _CLASSES[family](**p)


_CLASSES: dict[str, type[CostPrior]] = {
    "uniform": UniformPrior,
    "exponential": ExponentialPrior,
    "truncated_normal": TruncatedNormalPrior,
    "beta": BetaPrior,
    "lognormal": LogNormalPrior,
    "gaussian_mixture": GaussianMixturePrior,
}
