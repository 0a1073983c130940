"""The users' side: the bit flip ``Q_bf`` and the one-shot reports (spec §1, §2.1, §3.1).

Everything here runs "on the user's device": it sees one user's raw values and budget
and returns bits. The curator's code (:mod:`._public_x`, :mod:`._private_x`) receives
only the report objects defined here, which hold the bits, the budgets they were drawn
with, and — public X only — the covariates the curator already knows.

Bit flip on ``[c_l, c_u]`` at budget ``ε`` (spec §1.1): truncate ``v`` to the interval,
then send ``z₊`` with probability ``q_ε(v) = 1/2 + (v − m)/(W·C_ε)``, which lies in
``[1/(1 + e^ε), e^ε/(1 + e^ε)]``: the report is ε-LDP for any raw ``v`` (±∞ included).
Response bits are coded ``{0, 1}``; covariate bits ``{−1, +1}`` (as in the paper).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int8]


def check_budgets(epsilon: ArrayLike, *, name: str = "epsilon") -> FloatArray:
    """Return ``epsilon`` as floats after checking every entry is finite and ``> 0``.

    Raises
    ------
    ValueError
        Naming ``name`` and the first bad index: a randomizer never runs at ``ε ≤ 0``
        (a user with no budget sends nothing instead).
    """
    eps = np.asarray(epsilon, dtype=float)
    flat = eps.reshape(-1)
    bad = np.flatnonzero(~np.isfinite(flat) | (flat <= 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{name} must be finite and > 0 in a randomizer; {name}[{i}] = {flat[i]!r}"
        )
    return eps


def check_interval(
    low: float, high: float, *, name: str = "interval"
) -> tuple[float, float]:
    """Return ``(low, high)`` as floats; ``ValueError`` naming ``name`` unless finite and
    ``low < high``."""
    lo, hi = float(low), float(high)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(
            f"{name} must be finite with low < high (a public, non-empty interval), "
            f"got [{low!r}, {high!r}]"
        )
    return lo, hi


def _truncate(
    v: ArrayLike, low: ArrayLike, high: ArrayLike, *, name: str
) -> FloatArray:
    arr = np.asarray(v, dtype=float)
    if np.isnan(arr).any():
        raise ValueError(
            f"{name} must not contain NaN (±inf is clipped to the interval)"
        )
    return np.asarray(np.clip(arr, low, high), dtype=float)


def bit_flip_probability(
    v: ArrayLike, *, epsilon: ArrayLike, low: float, high: float
) -> FloatArray:
    """``q_ε(t(v)) = P(z = z₊ | v)`` of the bit flip on ``[low, high]`` (spec §1.1).

    Examples
    --------
    >>> bit_flip_probability([-1.0, 0.0, 1.0, np.inf], epsilon=1.0, low=-1.0, high=1.0).round(4).tolist()
    [0.2689, 0.5, 0.7311, 0.7311]
    """
    lo, hi = check_interval(low, high)
    eps = check_budgets(epsilon)
    vt = _truncate(v, lo, hi, name="v")
    # halves first: hi − lo of a finite public interval can overflow (±1e308)
    frac = np.clip((vt / 2.0 - lo / 2.0) / (hi / 2.0 - lo / 2.0), 0.0, 1.0)
    # q = 1/(1 + e^ε) + tanh(ε/2)·frac: both terms ≥ 0, so no rounding below the floor
    return np.asarray(expit(-eps) + np.tanh(eps / 2.0) * frac, dtype=float)


def bit_flip(
    v: ArrayLike,
    *,
    epsilon: ArrayLike,
    low: float,
    high: float,
    rng: np.random.Generator,
) -> IntArray:
    """One ``Q_bf`` bit per value: 1 (``z₊``) with probability :func:`bit_flip_probability`."""
    q = bit_flip_probability(v, epsilon=epsilon, low=low, high=high)
    return (rng.random(q.shape) < q).astype(np.int8)


def split_budget(
    epsilon: ArrayLike, *, n_private: int, split: ArrayLike | None = None
) -> FloatArray:
    """Per-bit budgets ``(ε₀, ε₁, …, ε_k)`` of each user, summing to its ``ε_i`` (spec §1.2).

    ``split``: public fractions of length ``k + 1`` (response first) summing to 1;
    default equal, ``ε_i/(k + 1)`` per bit (the paper's rule).

    Returns
    -------
    ndarray of shape (n_users, k + 1)
    """
    eps = np.asarray(epsilon, dtype=float).reshape(-1)
    if split is None:
        frac = np.full(n_private + 1, 1.0 / (n_private + 1))
    else:
        frac = np.asarray(split, dtype=float).reshape(-1)
        if frac.shape != (n_private + 1,):
            raise ValueError(
                f"budget_split must have k + 1 = {n_private + 1} entries (response "
                f"first), got {frac.shape[0]}"
            )
        if not (np.isfinite(frac).all() and (frac > 0).all()):
            raise ValueError("budget_split entries must be finite and > 0")
        if abs(float(frac.sum()) - 1.0) > 1e-12:
            raise ValueError(f"budget_split must sum to 1, got {float(frac.sum())!r}")
    return np.asarray(eps[:, None] * frac[None, :], dtype=float)


@dataclass(frozen=True, slots=True)
class PublicXReports:
    """What the curator holds after the public-X protocol (spec §2.1): per participating
    user its public covariate row, its one response bit and the budget it was drawn with.

    Attributes
    ----------
    X : ndarray of shape (n_users, n_columns)
        Public design rows (intercept column included if fitted).
    z : ndarray of shape (n_users,), int8 in {0, 1}
    epsilon : ndarray of shape (n_users,)
    """

    X: FloatArray
    z: IntArray
    epsilon: FloatArray


@dataclass(frozen=True, slots=True)
class PrivateXReports:
    """What the curator holds after the private-X protocol (spec §3.1): per participating
    user ``k`` covariate bits, one response bit, the ``k + 1`` budgets, and the public
    columns (intercept, features declared public) it knew anyway.

    Attributes
    ----------
    z_x : ndarray of shape (n_users, k), int8 in {−1, +1}
    z_y : ndarray of shape (n_users,), int8 in {0, 1}
    bit_epsilon : ndarray of shape (n_users, k + 1)
        Response budget first, then one per covariate bit.
    X_public : ndarray of shape (n_users, n_public)
    """

    z_x: IntArray
    z_y: IntArray
    bit_epsilon: FloatArray
    X_public: FloatArray


def randomize_public_x(
    X: FloatArray,
    y: ArrayLike,
    *,
    epsilon: FloatArray,
    low: float,
    high: float,
    rng: np.random.Generator,
) -> PublicXReports:
    """Each user with ``ε_i > 0`` sends one bit of its truncated ``y_i`` (spec §2.1);
    users with ``ε_i = 0`` send nothing and are absent from the reports (spec §6)."""
    used = epsilon > 0
    z = bit_flip(
        np.asarray(y, dtype=float)[used],
        epsilon=epsilon[used],
        low=low,
        high=high,
        rng=rng,
    )
    return PublicXReports(X=X[used], z=z, epsilon=epsilon[used])


def randomize_private_x(
    X_private: FloatArray,
    X_public: FloatArray,
    y: ArrayLike,
    *,
    epsilon: FloatArray,
    low: float,
    high: float,
    bounds: tuple[FloatArray, FloatArray],
    split: ArrayLike | None,
    rng: np.random.Generator,
) -> PrivateXReports:
    """Each user with ``ε_i > 0`` sends ``k + 1`` bits: its truncated response at
    ``ε_{i0}`` and each truncated private covariate at ``ε_{ij}``, the budgets summing
    to ``ε_i`` (spec §1.2, §3.1 Correction: every bit uses its share)."""
    used = epsilon > 0
    k = X_private.shape[1]
    bits_eps = split_budget(epsilon[used], n_private=k, split=split)
    z_y = bit_flip(
        np.asarray(y, dtype=float)[used],
        epsilon=bits_eps[:, 0],
        low=low,
        high=high,
        rng=rng,
    )
    z_x = np.empty((int(used.sum()), k), dtype=np.int8)
    lo, hi = bounds
    for j in range(k):
        bit = bit_flip(
            X_private[used, j],
            epsilon=bits_eps[:, j + 1],
            low=float(lo[j]),
            high=float(hi[j]),
            rng=rng,
        )
        z_x[:, j] = 2 * bit - 1
    return PrivateXReports(
        z_x=z_x, z_y=z_y, bit_epsilon=bits_eps, X_public=X_public[used]
    )
