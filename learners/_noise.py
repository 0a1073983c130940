"""The learners' continuous noise, in one place (``docs/privacy-numerics.md``).

* :func:`full_precision_uniform`: a uniform on ``(0, 1)`` that returns every double with
  probability proportional to its spacing (the ``U*`` of [Mir12]_, §5.2), so
  ``ln U*`` has no missing low bits near 0 (numpy's ``random()`` is a multiple of
  ``2^{−53}``).
* :func:`snapped_laplace`: the snapping mechanism of [Mir12]_ (§5.2), the
  floating-point-safe replacement of ``value + Laplace(Δ/ε)`` that every Laplace release
  of :mod:`learners` uses, with its accounting :func:`snapping_parameters` (the
  guaranteed ε never exceeds the ε the caller states).
* :func:`sample_gamma_direction_noise`: the objective-perturbation vector
  ``b ∈ R^d`` with density ``p(b) ∝ exp(−‖b‖₂)``. In polar coordinates that is
  ``‖b‖ ~ Gamma(shape=d, scale=1)`` (the radial density is ``r^{d−1} e^{−r}``) times a
  direction uniform on the unit sphere ``S^{d−1}``, which is a normalised standard
  Gaussian vector [CMS11]_. The radius is a sum of ``d`` exponentials ``−ln U*``.

Every sampler takes a ``numpy.random.Generator``: the callers build it with
``np.random.default_rng(random_state)``, so a seed reproduces a draw and ``None`` draws
from OS entropy.

References
----------
.. [CMS11] K. Chaudhuri, C. Monteleoni, A. D. Sarwate, "Differentially private
   empirical risk minimization", JMLR 12 (2011), Algorithm 2.
.. [Mir12] I. Mironov, "On significance of the least significant bits for
   differential privacy", ACM CCS 2012, §5.2 and Theorem 1 there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

SNAP_FP_TERM = 2.0**-48
"""``ρ`` in the snapping guarantee ``ε' = (1 + ρ·B)/λ`` (sensitivity 1). [Mir12]_
Theorem 1 proves ``ρ = 2^{−49}`` for a correctly rounded ``ln``; numpy's ``log`` is
faithful (error below one ulp) but not certified correctly rounded, so the constant is
doubled as headroom (``docs/privacy-numerics.md``)."""

SNAP_TAIL = 40.0
"""The output clamp sits ``SNAP_TAIL·λ`` beyond the input range: it binds with
probability ``e^{−40}/2 ≈ 2·10^{−18}`` per report, so the clamp adds no visible bias."""

_ROUNDING_SLACK = 2.0**-50
"""Relative slack for the few float operations (centre, scale, shift) done on a value
before the mechanism's first clamp; it enlarges the sensitivity that the mechanism
protects so that the computed input moves by at most 1 (in scaled units) between
neighbours, as [Mir12]_ Theorem 1 assumes."""


def full_precision_uniform(
    size: int | tuple[int, ...], *, rng: np.random.Generator
) -> FloatArray:
    """``U*``: every double in ``(0, 1)`` with probability proportional to its spacing.

    ``U = (2^{52} + m)·2^{−52−k}`` with ``m`` uniform on 52 bits and ``P(k) = 2^{−k}``
    (``k ≥ 1``; the leading-zero count of a stream of fair bits, drawn 53 bits at a
    time), i.e. the exact uniform rounded down to a double ([Mir12]_ §5.2). ``k`` is
    capped at 1022 (probability ``2^{−1022}``), so ``U`` is never subnormal, 0 or 1.

    Examples
    --------
    >>> u = full_precision_uniform(5, rng=np.random.default_rng(0))
    >>> bool(((u > 0) & (u < 1)).all())
    True
    """
    shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
    n = math.prod(shape)
    # w ∈ [2^{e−1}, 2^e) with probability 2^{e−54}: k = 54 − e has P(k) = 2^{−k}
    # (w < 2^53 converts to a double exactly, so frexp's exponent is exact)
    w = rng.integers(0, 1 << 53, size=n, dtype=np.int64)
    k = (54 - np.frexp(w.astype(np.float64))[1]).astype(np.int32)
    pending = np.flatnonzero(w == 0)  # 53 zero bits (probability 2^{−53} each)
    k[pending] = 53
    while pending.size:
        w = rng.integers(0, 1 << 53, size=pending.size, dtype=np.int64)
        hit = w > 0
        k[pending[hit]] += (54 - np.frexp(w[hit].astype(np.float64))[1]).astype(
            np.int32
        )
        k[pending[~hit]] += 53
        pending = pending[~hit]
    mantissa = rng.integers(0, 1 << 52, size=n, dtype=np.int64) + (1 << 52)
    u = np.ldexp(mantissa.astype(np.float64), -(52 + np.minimum(k, 1022)))
    return np.asarray(u.reshape(shape), dtype=np.float64)


def _pow2_ceil(x: FloatArray) -> FloatArray:
    """The smallest power of two ``≥ x`` (elementwise, ``x > 0``), exactly."""
    mant, exp = np.frexp(x)  # x = mant·2^exp, mant ∈ [0.5, 1)
    return np.asarray(np.ldexp(1.0, np.where(mant == 0.5, exp - 1, exp)), dtype=float)


@dataclass(frozen=True, slots=True)
class SnappingParameters:
    """The public constants of one snapped Laplace release per entry (all in the units
    where the sensitivity is 1, i.e. divided by ``unit``).

    Attributes
    ----------
    unit : ndarray
        ``Δ_eff ≥ Δ``: the value is divided by it before the mechanism (the sensitivity
        plus the rounding slack of the pre-processing).
    lam : ndarray
        ``λ``, the Laplace scale in units of ``Δ_eff``.
    grid : ndarray
        ``Λ``, the smallest power of two ``≥ λ``: outputs are multiples of it.
    bound : ndarray
        ``B``, the clamp: ``|input| ≤ B`` and ``|output| ≤ B``.
    guaranteed_epsilon : ndarray
        ``(1 + ρ·B)/λ`` ([Mir12]_ Theorem 1 with ``ρ`` = :data:`SNAP_FP_TERM`), never
        above the requested ``ε``.
    """

    unit: FloatArray
    lam: FloatArray
    grid: FloatArray
    bound: FloatArray
    guaranteed_epsilon: FloatArray


def snapping_parameters(
    sensitivity: ArrayLike,
    epsilon: ArrayLike,
    *,
    half_range: ArrayLike,
    magnitude: ArrayLike,
) -> SnappingParameters:
    """Choose ``(Δ_eff, λ, Λ, B)`` so that the snapped release is ``ε``-DP.

    [Mir12]_ Theorem 1: for ``f`` of sensitivity 1 and ``λ < B < 2^{46}·λ`` the
    snapping mechanism ``clamp_B(⌊clamp_B(f) ⊕ S ⊗ λ ⊗ LN(U*)⌉_Λ)`` is
    ``(1/λ + 2^{−49}·B/λ)``-DP. The value of sensitivity ``Δ`` is divided by ``Δ_eff``
    (``Δ`` enlarged by the float error of that division and of the centring), and with
    ``h`` = half the (centred) input range in those units (``half_range/Δ_eff``) the
    clamp is ``B = h + Λ + 40λ`` (a public shift in ``[0, Λ)`` is subtracted first, see
    :func:`snapped_laplace`). Solving ``(1 + ρB)/λ ≤ ε`` with ``B ≤ h + 42λ`` gives

        λ = (1 + ρ·h₀)/(ε − 42ρ),   h₀ = half_range/Δ,

    so the guarantee ``(1 + ρB)/λ`` is at most ``ε``; ``λ ≈ 1/ε`` (the textbook scale)
    to within a relative ``10^{−13}``.

    Parameters
    ----------
    sensitivity : array-like
        ``Δ > 0`` (public).
    epsilon : array-like
        ``ε > 0`` finite (public).
    half_range : array-like
        Public bound on the centred value ``|Π(value) − c|`` (``Δ/2`` for a
        projection onto an interval of width ``Δ``).
    magnitude : array-like
        Public bound on ``|c| + half_range``, the size of the numbers the centring
        rounds (float-error slack only).

    Raises
    ------
    ValueError
        If ``ε`` is too small for the float slack (``ε ≤ 10^{−11}``) or so large that
        ``B ≥ 2^{46}·λ`` (outside the theorem), naming ``epsilon``.
    """
    delta = np.asarray(sensitivity, dtype=float)
    eps = np.asarray(epsilon, dtype=float)
    half = np.asarray(half_range, dtype=float)
    mag = np.asarray(magnitude, dtype=float)
    if not (np.all(delta > 0) and np.all(np.isfinite(delta))):
        raise ValueError("sensitivity must be finite and > 0")
    if not np.all(np.isfinite(eps)) or np.any(eps <= 1e-11):
        raise ValueError(
            "epsilon must be finite and > 1e-11 for a snapped Laplace release"
        )
    rho, tail = SNAP_FP_TERM, SNAP_TAIL
    h0 = half / delta
    # a relative 2^{−48} upward nudge absorbs the rounding of this very formula, so the
    # guarantee computed below is ≤ ε in floating point too (checked)
    lam = (1.0 + rho * h0) / (eps - (tail + 2.0) * rho) * (1.0 + 2.0**-48)
    b_max = h0 + (tail + 2.0) * lam
    unit = (delta + _ROUNDING_SLACK * mag) / (1.0 - _ROUNDING_SLACK * b_max)
    grid = _pow2_ceil(lam)
    bound = half / unit + grid + tail * lam
    if np.any(bound >= 2.0**46 * lam) or np.any(_ROUNDING_SLACK * b_max >= 0.5):
        raise ValueError(
            "epsilon is too large for a snapped Laplace release (B ≥ 2^46·λ)"
        )
    guaranteed = (1.0 + rho * bound) / lam
    if np.any(guaranteed > eps):  # cannot happen by the algebra above; never release
        raise ValueError("epsilon: the snapped release cannot guarantee it")
    return SnappingParameters(
        unit=np.asarray(unit, dtype=float),
        lam=np.asarray(lam, dtype=float),
        grid=grid,
        bound=np.asarray(bound, dtype=float),
        guaranteed_epsilon=np.asarray(guaranteed, dtype=float),
    )


def snapped_laplace(
    value: ArrayLike,
    *,
    low: ArrayLike,
    high: ArrayLike,
    epsilon: ArrayLike,
    rng: np.random.Generator,
) -> FloatArray:
    """``Π_{[low, high]}(value)`` released with the snapping mechanism at ``ε`` ([Mir12]_).

    The floating-point-safe form of ``Π(value) + Laplace((high − low)/ε)``. Per entry,
    with public ``c = (low + high)/2``, ``Δ = high − low`` and the constants of
    :func:`snapping_parameters`:

    1. private coins first (before the value is read): a shift ``σ = Λ·V``,
       ``V ~ U[0, 1)`` (``rng.random``), a fair sign ``S`` and ``U*``
       (:func:`full_precision_uniform`), drawn in that order;
    2. the value: ``NaN`` becomes the public centre ``c`` (a fixed public value; ``±∞``
       clamps to the range), then ``g = (Π(value) − c)/Δ_eff − σ``;
    3. ``y = clamp_B(⌊clamp_B(g) + S·λ·ln U*⌉_Λ)`` — the mechanism of [Mir12]_ §5.2,
       ``⌊·⌉_Λ`` rounding to the nearest multiple of ``Λ`` (ties to even);
    4. the report ``c + Δ_eff·(y + σ)`` (post-processing of ``y`` and the public ``σ``).

    For each fixed ``σ`` steps 2–3 are the snapping mechanism applied to a function of
    sensitivity ≤ 1, so the report is ``ε``-DP (``ε`` ≥ the guaranteed value) and the
    shift, being independent of the data, can be published. Averaged over ``σ`` the
    rounding error is uniform with mean 0, so the report is unbiased for ``Π(value)``
    while the clamp does not bind (all but ``≈ 2·10^{−18}`` of the time); its variance
    is ``2Δ_eff²λ² + Δ_eff²Λ²/12`` (``Λ < 2λ``). ``ε = ∞`` releases ``Π(value)`` as is
    (the exact, non-private mode).

    Examples
    --------
    >>> z = snapped_laplace([0.3], low=0.0, high=1.0, epsilon=1.0,
    ...                     rng=np.random.default_rng(0))
    >>> bool(np.isfinite(z).all())
    True
    """
    arrays = [np.asarray(a, dtype=float) for a in (value, low, high, epsilon)]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    v, lo, hi, eps = (np.broadcast_to(a, shape).ravel() for a in arrays)
    n = v.size
    # coins in a fixed order: shift, sign, then U* (whose bit count varies)
    shift01 = rng.random(n)
    sign = np.where(rng.integers(0, 2, size=n) == 1, 1.0, -1.0)
    u = full_precision_uniform(n, rng=rng)
    centre = lo / 2.0 + hi / 2.0
    exact = np.isinf(eps)
    projected = np.clip(np.where(np.isnan(v), centre, v), lo, hi)
    if exact.all():
        return np.asarray(projected.reshape(shape), dtype=float)
    noisy = ~exact
    width = (hi - lo)[noisy]
    p = snapping_parameters(
        width,
        eps[noisy],
        half_range=width / 2.0,
        magnitude=np.abs(centre[noisy]) + width / 2.0,
    )
    shift = shift01[noisy] * p.grid
    g = (projected[noisy] - centre[noisy]) / p.unit - shift
    g = np.clip(g, -p.bound, p.bound)
    y = g + sign[noisy] * (p.lam * np.log(u[noisy]))
    y = np.clip(np.rint(y / p.grid) * p.grid, -p.bound, p.bound)
    out = projected.copy()
    out[noisy] = centre[noisy] + p.unit * (y + shift)
    return np.asarray(out.reshape(shape), dtype=float)


def sample_gamma_direction_noise(
    d: int, *, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Draw ``b ∈ R^d`` with density proportional to ``exp(−‖b‖₂)``.

    Parameters
    ----------
    d : int
        Dimension, ``d ≥ 1``.
    rng : numpy.random.Generator
        Source of randomness (the caller decides between a seed and OS entropy).

    Returns
    -------
    ndarray of shape (d,)
        ``b = r·u`` with ``r = −Σ_{j≤d} ln U*_j ~ Gamma(d, 1)`` and ``u = g/‖g‖``,
        ``g ~ N(0, I_d)``.

    Raises
    ------
    ValueError
        If ``d`` is not a positive integer or ``rng`` is not a Generator.

    Examples
    --------
    >>> import numpy as np
    >>> b = sample_gamma_direction_noise(3, rng=np.random.default_rng(0))
    >>> b.shape
    (3,)
    """
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
        raise ValueError(f"d must be a positive integer, got {d!r}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator, got {type(rng).__name__}"
        )
    d = int(d)
    g = rng.standard_normal(d)
    norm = float(np.linalg.norm(g))
    while norm == 0.0:  # probability zero, but a zero vector has no direction
        g = rng.standard_normal(d)
        norm = float(np.linalg.norm(g))
    # Gamma(d, 1) as the sum of d exponentials −ln U* (full-precision uniforms: the
    # tail of each exponential is not truncated at 53 bits as −ln(random()) would be)
    radius = float(-np.log(full_precision_uniform(d, rng=rng)).sum())
    return (radius / norm) * g
