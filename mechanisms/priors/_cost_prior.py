"""The abstract cost prior and its shared validation (spec ``mechanism.md`` §2).

A seller's privacy cost ``c`` is drawn from a public prior ``F`` with density ``f`` on
``[low, high]`` (``0 ≤ low < high ≤ inf``). :class:`CostPrior` turns a family's
``F``, ``f``, ``F^{-1}`` and ``(log f)'`` on 1-D arrays into the public API: the
virtual cost ``Ψ(c) = c + F(c)/f(c)``, its derivative
``Ψ'(c) = 2 − (F(c)/f(c))·f'(c)/f(c)``, the numerical regularity check (``Ψ``
non-decreasing on a grid, :class:`RegularityReport`) and sampling by inversion.
Ironing is a prior of its own (``_ironing``) built on this base, so the base never
refers to it; :func:`mechanisms.priors.ensure_regular` irons an irregular prior. The
validators shared by every family (:func:`check_real`, :func:`check_support`) and the
array evaluation wrapper live here too. The families
themselves are in the sibling modules ``_closed_form``, ``_parametric``,
``_gaussian_mixture`` and ``_empirical``; all are importable from
:mod:`mechanisms.priors`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "CostPrior",
    "RegularityReport",
    "check_real",
    "check_support",
    "evaluate",
    "high_or_none",
]

FloatArray = NDArray[np.float64]
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


def high_or_none(high: float) -> float | None:
    """``high`` as written by ``to_dict``: an infinite top of support becomes ``None``."""
    return high if math.isfinite(high) else None


def evaluate(fn: Callable[[FloatArray], FloatArray], x: ArrayLike) -> Any:
    """Apply a 1-D vectorised ``fn``: float for scalar input, float ndarray otherwise."""
    if type(x) is float:  # one value (a payment re-solve's report): no reshaping
        return float(np.asarray(fn(np.array([x])), dtype=float)[0])
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
        """Virtual cost ``Ψ(c) = c + F(c)/f(c)`` (spec §2); ``c`` must be in the support.

        One float inside the support skips the validation pass (~70 µs on one value;
        the payments ask once per re-solve): it would accept and keep it unchanged."""
        if isinstance(c, float) and self.contains(c):
            return evaluate(self._virtual_cost, c)
        return evaluate(self._virtual_cost, self.validate_costs(c, name="c"))

    def virtual_cost_in_support(self, c: FloatArray) -> FloatArray:
        """``Ψ(c)`` at a 1-D float array of costs the caller has placed inside the
        support (finite, within ``[low, high]``): :meth:`virtual_cost` without its
        validation pass, for searches that probe many such points at once."""
        return np.asarray(self._virtual_cost(np.asarray(c, dtype=float)), dtype=float)

    def contains(self, c: float) -> bool:
        """Whether one cost is finite, non-negative and inside ``[low, high]``: a cost
        :meth:`validate_costs` accepts and leaves unchanged (it also admits a relative
        ``1e-12`` beyond the support, clipped, which this does not)."""
        return math.isfinite(c) and c >= 0.0 and self.low <= c <= self.high

    def virtual_cost_derivative(self, c: ArrayLike) -> Any:
        """``Ψ'(c) = 2 − (F(c)/f(c))·f'(c)/f(c)``; ``c`` must be in the support (one
        float inside it skips the validation pass, as :meth:`virtual_cost` does)."""
        if isinstance(c, float) and self.contains(c):
            return evaluate(self._virtual_cost_derivative, c)
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
        return cast(FloatArray, np.clip(arr, self.low, self.high))

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
