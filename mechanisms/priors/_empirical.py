"""Empirical cost prior: a smoothed density of past bids (spec ``mechanism.md`` §2).

A Gaussian kernel density estimate reflected at both ends of ``[low, high]``,

    f(c) ∝ Σ_i [φ_h(c − b_i) + φ_h(c − (2·low − b_i)) + φ_h(c − (2·high − b_i))],

renormalised to mass one on the support. It is evaluated as a
:class:`mechanisms.priors.GaussianMixturePrior` with the reflected centres, so
``F``, ``f`` and ``Ψ = c + F/f`` are exact for this density. The default bandwidth is
Silverman's rule ``h = 0.9·min(sd, IQR/1.34)·n^{-1/5}``. Past bids are public market
history, so estimating the prior from them spends no seller privacy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from mechanisms.priors._cost_prior import (
    CostPrior,
    FloatArray,
    check_real,
    check_support,
)
from mechanisms.priors._gaussian_mixture import GaussianMixturePrior

__all__ = ["EmpiricalPrior"]


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
