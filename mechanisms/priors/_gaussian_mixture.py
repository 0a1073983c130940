"""Gaussian-mixture cost prior (spec ``mechanism.md`` §2).

``Σ_j w_j N(m_j, s_j²)`` restricted as a whole to ``[low, high]``, with
``z_j = (c − m_j)/s_j``, ``α_j = (low − m_j)/s_j`` and the mass
``Z = Σ_j w_j (Φ(β_j) − Φ(α_j))``:

    f(c) = Σ_j w_j φ(z_j)/s_j / Z,   F(c) = Σ_j w_j (Φ(z_j) − Φ(α_j)) / Z,
    (log f)'(c) = −Σ_j π_j(c) z_j/s_j,   π_j ∝ w_j φ(z_j)/s_j.

All sums are taken in log space, so ``Ψ = c + F/f`` is ``inf`` only at the top of the
support and in gaps where the density underflows (ironing flattens those). Two
well-separated narrow bumps give an irregular prior. ``F^{-1}`` is found by safeguarded
Newton from a tabulated start. :class:`mechanisms.priors.EmpiricalPrior` is a
mixture of reflected kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, cast

import numpy as np
from scipy import special

from mechanisms.priors._cost_prior import (
    CostPrior,
    FloatArray,
    check_real,
    check_support,
    high_or_none,
)
from mechanisms.priors._log_space import LOG_SQRT_2PI, log_ndtr_diff, logsumexp

__all__ = ["GaussianMixturePrior"]

_CHUNK = 1 << 20  # points × components evaluated at once by the mixture


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
        return type(other) is type(self) and self.to_dict() == other.to_dict()

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
        return cast(FloatArray, np.minimum(np.exp(self._terms(c, need="F")[0]), 1.0))

    def _pdf(self, c: FloatArray) -> FloatArray:
        return cast(FloatArray, np.exp(self._terms(c, need="f")[1]))

    def _ratio(self, c: FloatArray) -> FloatArray:
        log_cdf, log_pdf, _ = self._terms(c, need="Ff")
        with np.errstate(over="ignore", invalid="ignore"):
            return np.where(np.isneginf(log_cdf), 0.0, np.exp(log_cdf - log_pdf))

    def _dlogpdf(self, c: FloatArray) -> FloatArray:
        return cast(FloatArray, self._terms(c, need="d")[2])

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
            "high": high_or_none(self.high),
        }
        return {"family": self.family, "params": params}
