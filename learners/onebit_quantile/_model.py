"""The α-quantile working model and its success probability ``Ψ_ε`` (spec §2.2–§2.3).

Working density: asymmetric Laplace, ``f_θ(y) = (α(1 − α)/σ)·exp(−ρ_α((y − θ)/σ))``
with ``θ = βᵀx`` the conditional α-quantile. A user truncates its response to
``[c_l, c_u]`` and sends one bit from the bit flip, so the bit is 1 with probability

    Ψ_ε(θ) = 1/2 + (μ_t(θ) − m)/(W·C_ε),   μ_t(θ) = E_θ[t(Y)],

``Ψ'_ε = (F_θ(c_u) − F_θ(c_l))/(W C_ε)`` and ``Ψ''_ε = (f_θ(c_l) − f_θ(c_u))/(W C_ε)``.
Since ``1/C_ε = tanh(ε/2)``, everything but that factor is ε-free; this module
computes the ε-free parts once per ``θ`` and lets the likelihoods attach each user's
``tanh(ε_i/2)`` (spec §6).

Numerics (spec §2.3, §5): the success probability is written as
``Λ = a(θ)·t + r`` and ``1 − Λ = b(θ)·t + r`` with ``a = (μ_t − c_l)/W``,
``b = (c_u − μ_t)/W`` (``a + b = 1``), ``t = tanh(ε/2)``, ``r = 1/(1 + e^ε)``: two sums
of non-negative terms, so neither probability loses digits near 0 or 1. Every
exponential is taken of a clipped, non-positive exponent (no overflow however far
``θ`` is from the interval) and the tail regions use ``expm1`` (no cancellation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

FloatArray = NDArray[np.float64]


def privacy_factors(epsilon: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """``(t, r) = (tanh(ε/2), 1/(1 + e^ε))`` element-wise: ``1/C_ε`` and ``q_ε(c_l)``."""
    eps = np.asarray(epsilon, dtype=float)
    return np.tanh(eps / 2.0), expit(-eps)


@dataclass(frozen=True, slots=True)
class TailTerms:
    """The ε-free parts of ``Ψ`` and its derivatives at each ``θ``.

    ``a``, ``b``: ``(μ_t − c_l)/W`` and ``(c_u − μ_t)/W``; ``d1 = (F(c_u) − F(c_l))/W``;
    ``d2 = (f(c_l) − f(c_u))/W`` (``None`` unless asked for).
    """

    a: FloatArray
    b: FloatArray
    d1: FloatArray
    d2: FloatArray | None = None


@dataclass(frozen=True, slots=True)
class QuantileWorkingModel:
    """Asymmetric-Laplace working model truncated to ``[low, high]`` (spec §2.3).

    Parameters
    ----------
    alpha : float
        Quantile level ``α ∈ (0, 1)``.
    sigma : float
        Working scale ``σ > 0`` (a fixed hyperparameter).
    low, high : float
        The public truncation interval ``[c_l, c_u]``, ``c_l < c_u``.

    Examples
    --------
    >>> m = QuantileWorkingModel(alpha=0.3, sigma=1.0, low=-2.0, high=3.0)
    >>> round(float(m.psi(0.0, epsilon=2.5)), 4)
    0.5953
    >>> round(float(m.psi_prime(0.0, epsilon=2.5)), 5)
    0.10882
    """

    alpha: float
    sigma: float
    low: float
    high: float

    def __post_init__(self) -> None:
        if not (0.0 < float(self.alpha) < 1.0):
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise ValueError(f"scale must be finite and > 0, got {self.sigma!r}")
        if not (
            math.isfinite(self.low)
            and math.isfinite(self.high)
            and self.low < self.high
        ):
            raise ValueError(
                f"interval must be finite with low < high, got [{self.low!r}, {self.high!r}]"
            )

    @property
    def width(self) -> float:
        """``W = c_u − c_l``."""
        return float(self.high - self.low)

    @property
    def mid(self) -> float:
        """``m = (c_l + c_u)/2``."""
        return 0.5 * float(self.low + self.high)

    # ---- the ε-free kernel ----

    def tail_terms(self, theta: ArrayLike, *, second: bool = False) -> TailTerms:
        """``a, b, d1`` (and ``d2`` with ``second=True``) at every ``θ`` (class docstring).

        With ``A = e^{−α(c_u−θ)⁺/σ}``, ``B = e^{−(1−α)(θ−c_l)⁺/σ}``,
        ``L = e^{−α(c_l−θ)⁺/σ}``, ``U = e^{−(1−α)(θ−c_u)⁺/σ}`` (all exponents ``≤ 0``)
        and ``δ = min(max(θ − c_l, 0), W)``, the three regions of spec §2.3 are one
        expression each (in every region the factors that do not belong to it are 1):

            W·a  = δ − (ασ/(1−α))(U − B) + ((1−α)σ/α)(L − A)
            W·b  = W − W·a   (written out so that no tail loses digits)
            W·d1 = (1−α)(L − A) + α(U − B)
            W·d2 = (α(1−α)/σ)(B·L − A·U)

        ``L = min(A·e^{αW/σ}, 1)`` and ``U = min(B·e^{(1−α)W/σ}, 1)``, so only two
        exponentials per element are taken (four when ``W/σ`` is so large that
        ``e^{αW/σ}`` would overflow).
        """
        th = np.asarray(theta, dtype=float)
        al, s, w = float(self.alpha), float(self.sigma), self.width
        A = np.exp(np.minimum(th - self.high, 0.0) * (al / s))
        B = np.exp(np.maximum(th - self.low, 0.0) * (-(1.0 - al) / s))
        if max(al, 1.0 - al) * w / s < 600.0:
            L = np.minimum(A * math.exp(al * w / s), 1.0)
            U = np.minimum(B * math.exp((1.0 - al) * w / s), 1.0)
        else:
            L = np.exp(np.minimum(th - self.low, 0.0) * (al / s))
            U = np.exp(np.minimum(self.high - th, 0.0) * ((1.0 - al) / s))
        low_tail = L - A
        high_tail = U - B
        delta = np.clip(th - self.low, 0.0, w)
        c_lo = (1.0 - al) * s / al
        c_hi = al * s / (1.0 - al)
        aw = delta - c_hi * high_tail + c_lo * low_tail
        bw = (w - delta) + c_hi * high_tail - c_lo * low_tail
        a = np.clip(aw / w, 0.0, 1.0)
        b = np.clip(bw / w, 0.0, 1.0)
        d1 = ((1.0 - al) / w) * low_tail + (al / w) * high_tail
        d2 = None
        if second:
            d2 = (al * (1.0 - al) / (s * w)) * (B * L - A * U)
        return TailTerms(a=a, b=b, d1=d1, d2=d2)

    # ---- Ψ and its derivatives (spec §2.2) ----

    def truncated_mean(self, theta: ArrayLike) -> FloatArray:
        """``μ_t(θ) = E_θ[t(Y)]``."""
        return self.low + self.width * self.tail_terms(theta).a

    def psi(self, theta: ArrayLike, *, epsilon: ArrayLike) -> FloatArray:
        """``Ψ_ε(θ)``: the probability that the response bit is 1 (spec §2.2)."""
        t, r = privacy_factors(epsilon)
        return self.tail_terms(theta).a * t + r

    def psi_prime(self, theta: ArrayLike, *, epsilon: ArrayLike) -> FloatArray:
        """``Ψ'_ε(θ) = (F_θ(c_u) − F_θ(c_l))/(W C_ε) > 0``."""
        t, _ = privacy_factors(epsilon)
        return self.tail_terms(theta).d1 * t

    def psi_second(self, theta: ArrayLike, *, epsilon: ArrayLike) -> FloatArray:
        """``Ψ''_ε(θ) = (f_θ(c_l) − f_θ(c_u))/(W C_ε)``."""
        t, _ = privacy_factors(epsilon)
        d2 = self.tail_terms(theta, second=True).d2
        assert d2 is not None
        return d2 * t

    # ---- the working distribution itself ----

    def cdf(self, y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """``F_θ(y)``: ``α e^{(1−α)(y−θ)/σ}`` for ``y ≤ θ``, else ``1 − (1−α) e^{−α(y−θ)/σ}``."""
        d = np.asarray(y, dtype=float) - np.asarray(theta, dtype=float)
        al, s = float(self.alpha), float(self.sigma)
        left = al * np.exp((1.0 - al) * np.minimum(d, 0.0) / s)
        right = 1.0 - (1.0 - al) * np.exp(-al * np.maximum(d, 0.0) / s)
        return np.asarray(np.where(d <= 0.0, left, right), dtype=float)

    def pdf(self, y: ArrayLike, theta: ArrayLike) -> FloatArray:
        """``f_θ(y) = (α(1−α)/σ)·exp(−ρ_α((y − θ)/σ))``."""
        d = (np.asarray(y, dtype=float) - np.asarray(theta, dtype=float)) / self.sigma
        al = float(self.alpha)
        rho = np.where(d <= 0.0, (al - 1.0) * d, al * d)
        return np.asarray((al * (1.0 - al) / self.sigma) * np.exp(-rho), dtype=float)

    def sample(self, theta: ArrayLike, *, rng: np.random.Generator) -> FloatArray:
        """Draws of ``Y ~ ALD(α, θ, σ)`` (spec §7: ``θ + σ·w`` by inversion)."""
        th = np.asarray(theta, dtype=float)
        return th + self.sigma * sample_ald_noise(th.shape, alpha=self.alpha, rng=rng)


def sample_ald_noise(
    shape: int | tuple[int, ...], *, alpha: float, rng: np.random.Generator
) -> FloatArray:
    """Standard asymmetric-Laplace noise ``w`` with ``P(w ≤ 0) = α`` (spec §7, S1).

    ``w = log(U/α)/(1 − α)`` if ``U ≤ α``, else ``−log((1 − U)/(1 − α))/α``.
    """
    u = rng.random(shape)
    # both logs see arguments in (0, 1]; 1 − U > 0 since U < 1
    lower = np.log(np.maximum(u, 1e-300) / alpha) / (1.0 - alpha)
    upper = -np.log((1.0 - u) / (1.0 - alpha)) / alpha
    return np.where(u <= alpha, lower, upper)
