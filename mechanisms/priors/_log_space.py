"""Log-space special-function helpers for the cost priors (spec ``mechanism.md`` §2).

The priors evaluate ``Ψ = c + F/f`` as ``exp(log F − log f)`` wherever ``F`` or ``f``
may underflow. This module holds the pieces: ``log(1 − e^x)`` (Mächler 2012),
``log(Φ(u) − Φ(v))`` without cancellation in either tail, a ``logsumexp`` that returns
``−inf`` for all-``−inf`` rows, and the constant ``log √(2π)`` of the normal density.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
from numpy.typing import NDArray
from scipy import special

__all__ = ["LOG_SQRT_2PI", "log1mexp", "log_ndtr_diff", "logsumexp"]

FloatArray = NDArray[np.float64]
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def log1mexp(x: FloatArray) -> FloatArray:
    """``log(1 − e^x)`` for ``x ≤ 0``, accurate at both ends (Mächler 2012)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def log_ndtr_diff(u: FloatArray | float, v: FloatArray | float) -> FloatArray:
    """``log(Φ(u) − Φ(v))`` for ``u ≥ v`` without cancellation in either tail.

    Uses ``log Φ(u) + log(1 − Φ(v)/Φ(u))`` when ``v ≤ 0`` and the mirrored survival form
    ``log Φ(−v) + log(1 − Φ(−u)/Φ(−v))`` when ``v > 0`` (``scipy.special.log_ndtr``).
    """
    u, v = np.broadcast_arrays(np.asarray(u, dtype=float), np.asarray(v, dtype=float))
    upper = v > 0
    hi = np.where(upper, special.log_ndtr(-v), special.log_ndtr(u))
    lo = np.where(upper, special.log_ndtr(-u), special.log_ndtr(v))
    with np.errstate(invalid="ignore"):
        return cast(FloatArray, hi + log1mexp(np.minimum(lo - hi, 0.0)))


def logsumexp(a: FloatArray, *, axis: int) -> FloatArray:
    """``log Σ exp(a)`` along ``axis``; ``−inf`` when every term is ``−inf``."""
    top = np.max(a, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", under="ignore"):
        out = np.log(np.sum(np.exp(a - top), axis=axis)) + np.squeeze(top, axis=axis)
    return cast(FloatArray, out)
