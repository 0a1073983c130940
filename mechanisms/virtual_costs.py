"""Cost priors and Myerson virtual costs (spec ``mechanism.md`` §2).

A seller's privacy cost ``c`` is drawn from a public prior ``F`` with density ``f`` on
``[low, high]`` (``high`` may be ``inf``). Its *virtual cost* (procurement form of
Myerson's virtual value) is

    Ψ(c) = c + F(c) / f(c),

and the Myerson payments of spec §5 are incentive compatible when ``Ψ`` is
non-decreasing (the prior is *regular*). This module holds the abstract
:class:`CostPrior` and the two closed-form families of the spec (uniform and
exponential); the other families live in :mod:`mechanisms.priors`, ironing in
:mod:`mechanisms.ironing`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

if TYPE_CHECKING:
    from mechanisms.ironing import IronedPrior

__all__ = [
    "CostPrior",
    "ExponentialPrior",
    "RegularityReport",
    "UniformPrior",
    "ensure_regular",
    "virtual_costs",
]

FloatArray = NDArray[np.float64]
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SUPPORT_RTOL = 1e-12


@dataclass(frozen=True, slots=True)
class RegularityReport:
    """Outcome of a numerical regularity check of ``Ψ`` (spec §2).

    Attributes
    ----------
    regular : bool
        ``True`` when ``Ψ(c_k) − Ψ(c_{k+1}) ≤ rtol·max(|Ψ(c_k)|, |Ψ(c_{k+1})|)`` for every
        pair of consecutive grid points (``rtol`` absorbs rounding only).
    worst_decrease : float
        ``max_k (Ψ(c_k) − Ψ(c_{k+1}))`` over consecutive grid points, clamped at 0.
    at : float
        The cost ``c_k`` where the worst decrease starts (``nan`` when there is none).
    """

    regular: bool
    worst_decrease: float
    at: float


def check_real(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    strict: bool = False,
    allow_inf: bool = False,
) -> float:
    """Return ``value`` as a float, or raise ``ValueError`` naming ``name``.

    Parameters
    ----------
    name : str
        Parameter name used in the error message.
    value : Any
        The candidate value (bools are rejected).
    low : float, optional
        Lower bound: ``value ≥ low`` (``> low`` when ``strict``).
    strict : bool
        Whether the bound is strict.
    allow_inf : bool
        Whether ``+inf`` is acceptable.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    out = float(value)
    if math.isnan(out) or (math.isinf(out) and not (allow_inf and out > 0)):
        raise ValueError(f"{name} must be finite, got {out!r}")
    if low is not None and (out <= low if strict else out < low):
        relation = ">" if strict else "≥"
        raise ValueError(f"{name} must be {relation} {low}, got {out!r}")
    return out


def check_support(low: Any, high: Any) -> tuple[float, float]:
    """Validate a support ``[low, high]`` with ``0 ≤ low < high ≤ inf``."""
    lo = check_real("low", low, low=0.0)
    hi = check_real("high", high, allow_inf=True)
    if not hi > lo:
        raise ValueError(f"high must be > low = {lo!r}, got {hi!r}")
    return lo, hi


def log1mexp(x: FloatArray) -> FloatArray:
    """``log(1 − e^x)`` for ``x ≤ 0``, accurate at both ends (Mächler 2012)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def log_ndtr_diff(u: FloatArray, v: FloatArray) -> FloatArray:
    """``log(Φ(u) − Φ(v))`` for ``u ≥ v`` without cancellation in either tail.

    Uses ``log Φ(u) + log(1 − Φ(v)/Φ(u))`` when ``v ≤ 0`` and the mirrored survival form
    ``log Φ(−v) + log(1 − Φ(−u)/Φ(−v))`` when ``v > 0`` (``scipy.special.log_ndtr``).
    """
    u, v = np.broadcast_arrays(np.asarray(u, dtype=float), np.asarray(v, dtype=float))
    upper = v > 0
    hi = np.where(upper, special.log_ndtr(-v), special.log_ndtr(u))
    lo = np.where(upper, special.log_ndtr(-u), special.log_ndtr(v))
    with np.errstate(invalid="ignore"):
        return hi + log1mexp(np.minimum(lo - hi, 0.0))


def logsumexp(a: FloatArray, *, axis: int) -> FloatArray:
    """``log Σ exp(a)`` along ``axis``; ``−inf`` when every term is ``−inf``."""
    top = np.max(a, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", under="ignore"):
        out = np.log(np.sum(np.exp(a - top), axis=axis)) + np.squeeze(top, axis=axis)
    return out


def evaluate(fn: Callable[[FloatArray], FloatArray], x: ArrayLike) -> Any:
    """Apply a 1-D vectorised ``fn``: float for scalar input, float ndarray otherwise."""
    arr = np.asarray(x, dtype=float)
    out = np.asarray(fn(np.atleast_1d(arr).ravel()), dtype=float).reshape(arr.shape)
    return float(out) if arr.ndim == 0 else out


class CostPrior(ABC):
    """A public prior on one seller's privacy cost (spec §2).

    Subclasses are frozen dataclasses exposing ``low`` and ``high`` (the support,
    ``0 ≤ low < high ≤ inf``) and implement ``_cdf``, ``_pdf``, ``_ppf`` on 1-D
    float arrays; they override ``_ratio`` (``F/f``) and ``_dlogpdf``
    (``f'/f``) where the default is unstable.
    """

    family: ClassVar[str]
    low: float
    high: float

    # ----------------------------------------------------------- to implement
    @abstractmethod
    def _cdf(self, c: FloatArray) -> FloatArray:
        """``F(c)`` for ``c`` in the support."""

    @abstractmethod
    def _pdf(self, c: FloatArray) -> FloatArray:
        """``f(c)`` for ``c`` in the support."""

    @abstractmethod
    def _ppf(self, q: FloatArray) -> FloatArray:
        """``F^{-1}(q)`` for ``q ∈ [0, 1]``."""

    def _grid_ppf(self, q: FloatArray) -> FloatArray:
        """Approximate ``F^{-1}(q)``, good enough to place grid nodes (default: exact)."""
        return self._ppf(q)

    @abstractmethod
    def _dlogpdf(self, c: FloatArray) -> FloatArray:
        """``(log f)'(c) = f'(c)/f(c)`` for ``c`` in the support."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """``{"family": ..., "params": {...}}`` as read by ``prior_from_dict``."""

    def _ratio(self, c: FloatArray) -> FloatArray:
        """``F(c)/f(c)``, with the limit ``0`` where ``F(c) = 0``."""
        cdf, pdf = self._cdf(c), self._pdf(c)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(cdf > 0, cdf / pdf, 0.0)

    def _virtual_cost(self, c: FloatArray) -> FloatArray:
        return c + self._ratio(c)

    def _virtual_cost_derivative(self, c: FloatArray) -> FloatArray:
        # Ψ' = 1 + (F/f)' = 2 − (F/f)·(log f)'; the product is 0 where F/f = 0.
        ratio = self._ratio(c)
        with np.errstate(invalid="ignore"):
            prod = np.where(ratio == 0, 0.0, ratio * self._dlogpdf(c))
        return 2.0 - prod

    # ------------------------------------------------------------ public API
    def cdf(self, c: ArrayLike) -> Any:
        """Prior CDF ``F(c)``: 0 below ``low``, 1 above ``high``."""
        return evaluate(lambda x: self._outside(x, self._cdf, below=0.0, above=1.0), c)

    def pdf(self, c: ArrayLike) -> Any:
        """Prior density ``f(c)``: 0 outside the support."""
        return evaluate(lambda x: self._outside(x, self._pdf, below=0.0, above=0.0), c)

    def ppf(self, q: ArrayLike) -> Any:
        """Quantile function ``F^{-1}(q)`` for ``q ∈ [0, 1]``."""
        arr = np.asarray(q, dtype=float)
        if not np.all((arr >= 0) & (arr <= 1)):
            bad = int(np.flatnonzero(~((arr >= 0) & (arr <= 1)).ravel())[0])
            raise ValueError(f"q[{bad}] must be in [0, 1], got {arr.ravel()[bad]!r}")
        return evaluate(lambda x: np.clip(self._ppf(x), self.low, self.high), arr)

    def virtual_cost(self, c: ArrayLike) -> Any:
        """Virtual cost ``Ψ(c) = c + F(c)/f(c)`` (spec §2); ``c`` must be in the support."""
        return evaluate(self._virtual_cost, self.validate_costs(c, name="c"))

    def virtual_cost_derivative(self, c: ArrayLike) -> Any:
        """``Ψ'(c) = 2 − (F(c)/f(c))·f'(c)/f(c)``; ``c`` must be in the support."""
        return evaluate(self._virtual_cost_derivative, self.validate_costs(c, name="c"))

    def validate_costs(self, costs: ArrayLike, *, name: str = "costs") -> FloatArray:
        """Return ``costs`` as a float array clipped to the support, or raise.

        Raises ``ValueError`` naming ``name`` and the first offending (flat) index for
        NaN/inf, negative values, or values outside ``[low, high]`` by more than a
        relative ``1e-12``.
        """
        try:
            arr = np.array(costs, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name} must be an array of real numbers") from exc
        problem = self._first_invalid(arr.ravel())
        if problem is not None:
            i, why = problem
            raise ValueError(f"{name}[{i}] = {float(arr.ravel()[i])!r} {why}")
        return np.clip(arr, self.low, self.high)

    def check_regularity(
        self, *, n_points: int = 2001, rtol: float = 1e-9
    ) -> RegularityReport:
        """Check numerically that ``Ψ`` is non-decreasing (spec §2, regularity).

        The grid is the union of ``n_points`` equally spaced costs and the quantiles at
        ``n_points`` equally spaced levels, over ``[low, high]`` or, for an unbounded
        support, over ``[F^{-1}(1e-9), F^{-1}(1 − 1e-9)]``.
        """
        grid = self.regularity_grid(n_points=n_points)
        psi = self._virtual_cost(grid)
        with np.errstate(invalid="ignore"):
            # inf − inf (nan) and rises to inf are fine; a fall from inf is a violation.
            drops = np.nan_to_num(
                psi[:-1] - psi[1:], nan=0.0, neginf=0.0, posinf=np.inf
            )
            scale = np.nan_to_num(
                np.maximum(np.abs(psi[:-1]), np.abs(psi[1:])), posinf=0.0
            )
        k = int(np.argmax(drops))
        worst = max(float(drops[k]), 0.0)
        regular = bool(np.all(drops <= rtol * scale))
        return RegularityReport(
            regular=regular,
            worst_decrease=worst,
            at=float(grid[k]) if worst > 0 else math.nan,
        )

    def regularity_grid(self, *, n_points: int = 2001) -> FloatArray:
        """Sorted union of a uniform cost grid and a uniform quantile grid (see above)."""
        if isinstance(n_points, bool) or not isinstance(n_points, int) or n_points < 2:
            raise ValueError(f"n_points must be an integer ≥ 2, got {n_points!r}")
        if math.isfinite(self.high):
            lo, hi, qs = self.low, self.high, np.linspace(0.0, 1.0, n_points)
        else:
            qs = np.linspace(1e-9, 1.0 - 1e-9, n_points)
            lo, hi = float(self._ppf(qs[:1])[0]), float(self._ppf(qs[-1:])[0])
        both = np.concatenate([np.linspace(lo, hi, n_points), self._grid_ppf(qs)])
        return np.unique(np.clip(both, self.low, self.high))

    def sample(
        self, n: int, *, rng: np.random.Generator | int | None = None
    ) -> FloatArray:
        """Draw ``n`` costs by inversion, ``F^{-1}(U)``; OS entropy unless ``rng`` given."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        u = np.random.default_rng(rng).uniform(size=int(n))
        return np.clip(self._ppf(u), self.low, self.high)

    def ironed(self, *, n_points: int = 2001) -> IronedPrior:
        """Myerson-ironed version of this prior (see :class:`mechanisms.ironing.IronedPrior`)."""
        from mechanisms.ironing import IronedPrior

        return IronedPrior(self, n_points=n_points)

    # --------------------------------------------------------------- helpers
    def _first_invalid(self, flat: FloatArray) -> tuple[int, str] | None:
        """First index that is NaN/inf, negative or outside the support (and why)."""
        tol_lo = _SUPPORT_RTOL * max(abs(self.low), 1.0)
        finite_high = math.isfinite(self.high)
        tol_hi = _SUPPORT_RTOL * max(abs(self.high), 1.0) if finite_high else 0.0
        reasons = (
            (~np.isfinite(flat), "is not finite"),
            (flat < 0, "is negative"),
            (
                flat < self.low - tol_lo,
                f"is below the prior's support low = {self.low!r}",
            ),
            (
                flat > self.high + tol_hi,
                f"is above the prior's support high = {self.high!r}",
            ),
        )
        bad = np.zeros(flat.shape, dtype=bool)
        for mask, _ in reasons:
            bad |= mask
        if not bad.any():
            return None
        i = int(np.flatnonzero(bad)[0])
        return i, next(text for mask, text in reasons if mask[i])

    def _outside(
        self,
        x: FloatArray,
        fn: Callable[[FloatArray], FloatArray],
        *,
        below: float,
        above: float,
    ) -> FloatArray:
        inside = (x >= self.low) & (x <= self.high)
        out = np.where(x < self.low, below, above)
        if inside.any():
            out[inside] = fn(x[inside])
        out[np.isnan(x)] = np.nan
        return out


@dataclass(frozen=True, slots=True)
class UniformPrior(CostPrior):
    """Uniform costs on ``[low, high]``: ``F = (c − low)/(high − low)``, ``Ψ(c) = 2c − low``.

    Parameters
    ----------
    low, high : float
        The support, ``0 ≤ low < high < inf``.
    """

    family: ClassVar[str] = "uniform"
    low: float
    high: float

    def __post_init__(self) -> None:
        lo, hi = check_support(self.low, self.high)
        if math.isinf(hi):
            raise ValueError("high must be finite for a uniform prior")
        object.__setattr__(self, "low", lo)
        object.__setattr__(self, "high", hi)

    def _cdf(self, c: FloatArray) -> FloatArray:
        return (c - self.low) / (self.high - self.low)

    def _pdf(self, c: FloatArray) -> FloatArray:
        return np.full(c.shape, 1.0 / (self.high - self.low))

    def _ppf(self, q: FloatArray) -> FloatArray:
        return self.low + q * (self.high - self.low)

    def _ratio(self, c: FloatArray) -> FloatArray:
        return c - self.low

    def _dlogpdf(self, c: FloatArray) -> FloatArray:
        return np.zeros(c.shape)

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "params": {"low": self.low, "high": self.high}}


@dataclass(frozen=True, slots=True)
class ExponentialPrior(CostPrior):
    """Exponential costs with rate ``r`` on ``[0, inf)``.

    ``F = 1 − e^{−rc}``, ``f = r e^{−rc}``, so ``Ψ(c) = c + (e^{rc} − 1)/r``
    (computed with ``expm1``) and ``Ψ'(c) = 1 + e^{rc}``.

    Parameters
    ----------
    rate : float
        ``r > 0``.
    """

    family: ClassVar[str] = "exponential"
    rate: float

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "rate", check_real("rate", self.rate, low=0.0, strict=True)
        )

    @property
    def low(self) -> float:  # type: ignore[override]
        return 0.0

    @property
    def high(self) -> float:  # type: ignore[override]
        return math.inf

    def _cdf(self, c: FloatArray) -> FloatArray:
        return -np.expm1(-self.rate * c)

    def _pdf(self, c: FloatArray) -> FloatArray:
        return self.rate * np.exp(-self.rate * c)

    def _ppf(self, q: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore"):
            return -np.log1p(-q) / self.rate

    def _ratio(self, c: FloatArray) -> FloatArray:
        with np.errstate(over="ignore"):
            return np.expm1(self.rate * c) / self.rate

    def _dlogpdf(self, c: FloatArray) -> FloatArray:
        return np.full(c.shape, -self.rate)

    def _virtual_cost_derivative(self, c: FloatArray) -> FloatArray:
        with np.errstate(over="ignore"):
            return 1.0 + np.exp(self.rate * c)

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "params": {"rate": self.rate}}


def virtual_costs(
    costs: ArrayLike,
    priors: CostPrior | Sequence[CostPrior],
    *,
    name: str = "costs",
) -> FloatArray:
    """Per-seller virtual costs ``Ψ_i(c_i) = c_i + F_i(c_i)/f_i(c_i)`` (spec §2).

    Parameters
    ----------
    costs : array_like of shape (n_sellers,)
        Reported costs ``c_i``, each in the support of its prior.
    priors : CostPrior or sequence of CostPrior
        One prior shared by all sellers, or one per seller (``F_i``). Pass ironed priors
        (:func:`ensure_regular`) when the payments must be incentive compatible.
    name : str
        Name used in error messages.

    Returns
    -------
    ndarray of shape (n_sellers,)

    Raises
    ------
    ValueError
        Naming ``name`` and the seller index for a bad cost, or ``priors`` for a
        length mismatch or a non-prior entry.
    """
    arr = np.atleast_1d(np.array(costs, dtype=float))
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if isinstance(priors, CostPrior):
        return np.asarray(priors.virtual_cost(priors.validate_costs(arr, name=name)))
    plist = list(priors)
    if len(plist) != arr.size:
        raise ValueError(f"priors has {len(plist)} entries but {name} has {arr.size}")
    groups: dict[int, list[int]] = {}
    for i, prior in enumerate(plist):
        if not isinstance(prior, CostPrior):
            raise ValueError(
                f"priors[{i}] must be a CostPrior, got {type(prior).__name__}"
            )
        problem = prior._first_invalid(arr[i : i + 1])
        if problem is not None:
            raise ValueError(f"{name}[{i}] = {float(arr[i])!r} {problem[1]}")
        groups.setdefault(id(prior), []).append(i)
    out = np.empty(arr.size)
    for idx in groups.values():
        prior = plist[idx[0]]
        out[idx] = prior._virtual_cost(np.clip(arr[idx], prior.low, prior.high))
    return out


def ensure_regular(prior: CostPrior, *, n_points: int = 2001) -> CostPrior:
    """``prior`` itself when :meth:`CostPrior.check_regularity` passes, else ``prior.ironed()``."""
    if prior.check_regularity(n_points=n_points).regular:
        return prior
    return prior.ironed(n_points=n_points)
