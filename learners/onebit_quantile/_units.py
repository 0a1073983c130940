"""Market units ↔ the scaled units a learner is fitted in (public bounds only).

A market scales every record with its *public* schema (``market/offers/records.py``): feature
``j`` to ``x̃_j = (2(x_j − low_j)/(high_j − low_j) − 1)/√d`` and a quantile target to
``ỹ = 2(y − lo)/(hi − lo) − 1``, and publishes a fitted ``(w, b)`` in raw units as
(``market/pipeline/results.py``)

    w_raw_j = h·2 w_j/((high_j − low_j)√d),
    b_raw   = lo + h·(b − Σ_j w_j (2 low_j/(high_j − low_j) + 1)/√d + 1),   h = (hi − lo)/2.

That map is affine, so the covariance of the raw coefficients is exactly
``M Cov Mᵀ`` with ``M`` its Jacobian (:meth:`MarketUnits.jacobian`); this module uses
it to publish standard errors and intervals in the same units as the coefficients.
It also maps a buyer's raw response interval and working scale to the scaled target.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class MarketUnits:
    """A market's public scaling (module docstring).

    Attributes
    ----------
    low, high : ndarray of shape (n_features,)
        Public feature bounds.
    target : tuple of float or None
        Public target bounds ``(lo, hi)``; None for an unscaled target.
    """

    low: FloatArray
    high: FloatArray
    target: tuple[float, float] | None

    @classmethod
    def from_schema(cls, schema: Mapping[str, Any]) -> MarketUnits | None:
        """From a market's public schema (``features`` with ``low``/``high``, ``target``);
        None when the schema has no features."""
        features = schema.get("features") or []
        if not features:
            return None
        target = schema.get("target")
        return cls(
            low=np.array([float(f["low"]) for f in features]),
            high=np.array([float(f["high"]) for f in features]),
            target=None
            if not target
            else (float(target["low"]), float(target["high"])),
        )

    def to_dict(self) -> dict[str, Any]:
        """The public schema this was built from (JSON-safe)."""
        return {
            "features": [
                {"low": float(lo), "high": float(hi)}
                for lo, hi in zip(self.low, self.high, strict=True)
            ],
            "target": None
            if self.target is None
            else {"low": self.target[0], "high": self.target[1]},
        }

    @property
    def n_features(self) -> int:
        return int(self.low.size)

    def scale_response(self, values: list[float]) -> list[float]:
        """Raw target values → the scaled target ``2(y − lo)/(hi − lo) − 1``."""
        if self.target is None:
            return [float(v) for v in values]
        lo, hi = self.target
        return [2.0 * (float(v) - lo) / (hi - lo) - 1.0 for v in values]

    def scale_width(self, value: float) -> float:
        """A raw length on the target (e.g. the working scale ``σ``) → scaled units."""
        if self.target is None:
            return float(value)
        lo, hi = self.target
        return 2.0 * float(value) / (hi - lo)

    def feature_bounds(self) -> tuple[FloatArray, FloatArray]:
        """Public bounds of the scaled features: ``[−1/√d, 1/√d]`` each."""
        edge = 1.0 / math.sqrt(self.n_features)
        return np.full(self.n_features, -edge), np.full(self.n_features, edge)

    def jacobian(self, *, intercept: bool) -> FloatArray:
        """``M = ∂(w_raw, b_raw)/∂(w, b)`` (the intercept row/column last if present)."""
        d = self.n_features
        root_d = math.sqrt(d)
        span = self.high - self.low
        half = 1.0 if self.target is None else (self.target[1] - self.target[0]) / 2
        size = d + 1 if intercept else d
        M = np.zeros((size, size))
        M[np.arange(d), np.arange(d)] = half * 2.0 / (span * root_d)
        if intercept:
            M[d, :d] = -half * (2.0 * self.low / span + 1.0) / root_d
            M[d, d] = half
        return M

    def to_raw(self, params: FloatArray, *, intercept: bool) -> FloatArray:
        """``(w_raw, b_raw)`` of scaled ``(w, b)`` (the market's map, for checks)."""
        M = self.jacobian(intercept=intercept)
        out = M @ params
        if intercept and self.target is not None:
            lo, hi = self.target
            out[-1] += lo + (hi - lo) / 2.0
        return out
