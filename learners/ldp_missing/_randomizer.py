"""The ℓ2-ball private sampling randomizer ``Q_ps(v; G, ε)`` (spec §3), vectorised.

The randomness of one report is data-independent and drawn up front
(:class:`SamplingNoise`): a uniform ``U_s`` for the sign, a uniform ``U_T`` for
``T ~ Bernoulli(π_ε)`` and a direction ``u`` uniform on ``S^{d−1}``. Given the input
``v`` (``‖v‖ ≤ G``) the report is

1. ``ŵ = v/‖v‖`` (``e₁`` when ``v = 0``: any unit vector will do, spec §3 step 1);
2. ``s = +1`` iff ``U_s < 1/2 + ‖v‖/(2G)``; ``ṽ = s·G·ŵ`` (so ``E ṽ = v``);
3. ``T = 1`` iff ``U_T < π_ε``;
4. ``u ← −u`` when ``T = 1`` and ``⟨u, ṽ⟩ < 0`` or ``T = 0`` and ``⟨u, ṽ⟩ > 0``;
5. ``Z = B·u`` with ``B = G·C_ε·κ_d``, so ``‖Z‖ = B`` exactly and ``E Z = v``.

The compiled SGD pass (``_kernel``) applies the same steps one row at a time, because
its inputs depend on the current iterate; :func:`apply_private_sampling` is the
reference it is tested against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from learners.ldp_missing._constants import (
    check_epsilon,
    pi_epsilon,
    sampling_radius,
)

__all__ = [
    "SamplingNoise",
    "apply_private_sampling",
    "draw_sampling_noise",
    "private_sampling",
]


@dataclass(frozen=True, slots=True)
class SamplingNoise:
    """Data-independent randomness of ``n`` reports (module docstring).

    Attributes
    ----------
    sign : ndarray of shape (n,)
        ``U_s ~ U[0, 1)``.
    hemisphere : ndarray of shape (n,)
        ``U_T ~ U[0, 1)``.
    direction : ndarray of shape (n, d)
        Rows uniform on the unit sphere ``S^{d−1}``.
    """

    sign: NDArray[np.float64]
    hemisphere: NDArray[np.float64]
    direction: NDArray[np.float64]


def draw_sampling_noise(n: int, d: int, *, rng: np.random.Generator) -> SamplingNoise:
    """Draw the randomness of ``n`` reports in ``R^d`` (normalised Gaussian rows)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator, got {type(rng).__name__}"
        )
    sign = rng.random(n)
    hemisphere = rng.random(n)
    g = rng.standard_normal((n, d))
    norms = np.linalg.norm(g, axis=1)
    while (zero := norms == 0.0).any():  # probability zero: redraw those rows
        g[zero] = rng.standard_normal((int(zero.sum()), d))
        norms = np.linalg.norm(g, axis=1)
    return SamplingNoise(sign, hemisphere, g / norms[:, None])


def _check_inputs(V: ArrayLike, bound: float) -> NDArray[np.float64]:
    arr = np.asarray(V, dtype=float)
    if arr.ndim != 2:
        raise ValueError(f"V must have shape (n, d), got {arr.shape}")
    if not np.isfinite(arr).all():  # says that, never which row or what value
        raise ValueError("V must be finite")
    if not (math.isfinite(float(bound)) and float(bound) > 0):
        raise ValueError(f"bound must be finite and > 0, got {bound!r}")
    return arr


def apply_private_sampling(
    V: ArrayLike,
    *,
    bound: float,
    radius: ArrayLike,
    pi: ArrayLike,
    noise: SamplingNoise,
) -> NDArray[np.float64]:
    """Reports ``Z`` of inputs ``V`` with pre-drawn ``noise`` (spec §3, steps 1–5).

    Parameters
    ----------
    V : array-like of shape (n, d)
        Finite inputs with ``‖v_i‖ ≤ bound``; rows above it are projected onto the
        sphere of radius ``bound`` first (the norm is computed without overflow, so
        entries near ``1e300`` are projected too). Nothing about the inputs is
        returned besides the reports.
    bound : float
        ``G``.
    radius, pi : float or array-like of shape (n,)
        ``B_i`` and ``π_{ε_i}`` of each report.
    noise : SamplingNoise
        From :func:`draw_sampling_noise` with the same ``(n, d)``.

    Returns
    -------
    Z : ndarray of shape (n, d)
        ``‖Z_i‖ = B_i``.
    """
    V_arr = _check_inputs(V, bound)
    G = float(bound)
    # ‖v‖ and ⟨u, v⟩/‖v‖ on v/max|v_j| (in [−1, 1]): no overflow for finite entries
    peak = np.abs(V_arr).max(axis=1) if V_arr.size else np.zeros(V_arr.shape[0])
    unit = V_arr / np.where(peak > 0, peak, 1.0)[:, None]
    unit_norms = np.linalg.norm(unit, axis=1)
    with np.errstate(over="ignore"):
        norms = peak * unit_norms
    clipped = np.minimum(norms, G)
    u = noise.direction
    safe = np.where(unit_norms > 0, unit_norms, 1.0)
    dot = np.where(unit_norms > 0, np.einsum("ij,ij->i", u, unit) / safe, u[:, 0])
    s = np.where(noise.sign < 0.5 + clipped / (2.0 * G), 1.0, -1.0)
    side = s * dot  # sign of ⟨u, ṽ⟩
    T = noise.hemisphere < np.asarray(pi, dtype=float)
    flip = (T & (side < 0)) | (~T & (side > 0))
    scale = np.where(flip, -1.0, 1.0) * np.asarray(radius, dtype=float)
    return np.asarray(scale[:, None] * u, dtype=float)


def private_sampling(
    V: ArrayLike,
    *,
    bound: float,
    epsilon: ArrayLike,
    rng: np.random.Generator | int | None = None,
) -> NDArray[np.float64]:
    """``Q_ps(v_i; G, ε_i)`` for every row of ``V`` (spec §3): ``ε_i``-LDP, unbiased.

    Parameters
    ----------
    V : array-like of shape (n, d)
        Inputs, ``‖v_i‖₂ ≤ bound`` (``v = 0`` gives a uniform point on the sphere).
    bound : float
        Public input bound ``G > 0``.
    epsilon : float or array-like of shape (n,)
        Budgets ``ε_i > 0``.
    rng : Generator, int or None
        ``np.random.default_rng(rng)``; None draws from OS entropy.

    Returns
    -------
    ndarray of shape (n, d)
        Reports on the sphere of radius ``B_i = G·C_{ε_i}·κ_d``.

    Raises
    ------
    ValueError
        ``V`` not finite (no row or value named) or not 2-d, ``bound ≤ 0``, or an
        ``ε_i ≤ 0`` (index named: budgets are public).

    Examples
    --------
    >>> Z = private_sampling([[0.5, 0.0]], bound=1.0, epsilon=1.0, rng=0)
    >>> round(float(np.linalg.norm(Z)), 4)  # B = 1 · C_1 · π/2
    3.3991
    """
    V_arr = _check_inputs(V, bound)
    n, d = V_arr.shape
    eps = np.broadcast_to(check_epsilon(epsilon), (n,))
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    noise = draw_sampling_noise(n, d, rng=gen)
    return apply_private_sampling(
        V_arr,
        bound=bound,
        radius=sampling_radius(bound, d, eps),
        pi=pi_epsilon(eps),
        noise=noise,
    )
