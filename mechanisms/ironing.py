"""Myerson ironing of an irregular cost prior (spec ``mechanism.md`` §2).

In quantile space ``q = F(c)`` let ``H(q) = ∫_0^q Ψ(F^{-1}(s)) ds``. Because
``d/dc [c·F(c)] = F(c) + c·f(c) = Ψ(c)·f(c)``, this integral has the closed form

    H(F(c)) = c·F(c) − low·F(low) = c·F(c),

so ``H`` is known exactly at every node ``(F(c_k), c_k)`` without quadrature. Ironing
replaces ``H`` by its lower convex hull ``H̄`` and ``Ψ`` by ``Ψ̄(c) = H̄'(F(c))``
(Myerson 1981, §6). Since ``H̄`` and ``H`` agree at both ends of the quantile range,
``∫ Ψ̄ dF = ∫ Ψ dF``; ``Ψ̄`` is non-decreasing, constant on each ironed interval and
equal to ``Ψ`` where ``H`` is already convex.
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mechanisms.virtual_costs import CostPrior, FloatArray

_GAP_RTOL = 1e-10  # hull gaps below this (relative to max H) do not count as ironing


def lower_convex_hull(x: ArrayLike, y: ArrayLike) -> NDArray[np.intp]:
    """Indices of the vertices of the lower convex hull (Andrew's monotone chain).

    Parameters
    ----------
    x : array_like of shape (n,)
        Strictly increasing abscissae.
    y : array_like of shape (n,)
        Ordinates.

    Returns
    -------
    ndarray of int
        Increasing vertex indices, always including ``0`` and ``n − 1``; collinear
        middle points are dropped.
    """
    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    if xs.ndim != 1 or xs.shape != ys.shape or xs.size < 1:
        raise ValueError("x and y must be 1-D arrays of the same non-zero length")
    if np.any(np.diff(xs) <= 0):
        raise ValueError("x must be strictly increasing")
    px, py = xs.tolist(), ys.tolist()
    hull: list[int] = []
    for k in range(len(px)):
        while len(hull) >= 2:
            o, a = hull[-2], hull[-1]
            cross = (px[a] - px[o]) * (py[k] - py[o]) - (py[a] - py[o]) * (
                px[k] - px[o]
            )
            if cross > 0:
                break
            hull.pop()
        hull.append(k)
    return np.asarray(hull, dtype=np.intp)


@dataclass(frozen=True)
class IronedPrior(CostPrior):
    """A prior with Myerson's ironed virtual cost ``Ψ̄`` (spec §2).

    ``cdf``, ``pdf``, ``ppf``, ``low``, ``high`` are the base prior's; ``virtual_cost``
    returns ``Ψ̄(c) = H̄'(F(c))`` computed on a node set ``c_k`` (uniform in cost,
    uniform in quantile, and geometric in both quantile tails; ``n_points`` each):

    * hull vertices get ``clip(Ψ(c_k), s⁻, s⁺)`` (``s^±``: slopes of the adjacent hull
      segments, so ``Ψ̄ = Ψ`` there when the prior is regular), nodes strictly inside a
      hull segment get that segment's slope;
    * between two consecutive hull vertices (``H`` convex there) ``Ψ̄ = Ψ`` clipped to
      the two node values; elsewhere (ironed segments) ``Ψ̄`` is linear in
      ``q = F(c)`` between node values. Node values are non-decreasing, so ``Ψ̄`` is
      non-decreasing across cells by construction (inside a convex cell it follows
      ``Ψ``, which the hull certifies at node resolution);
    * above the last node (unbounded support: ``q > 1 − 1e-9``, or a top node where
      ``Ψ = inf``), ``Ψ̄ = max(Ψ(c), Ψ̄(last node))`` — ironing assumes a regular tail.

    Parameters
    ----------
    base : CostPrior
        The prior to iron.
    n_points : int
        Nodes per node family (``≥ 16``).

    Attributes
    ----------
    ironed_intervals : tuple of (float, float)
        Cost intervals ``[c_a, c_b]`` where ``H̄ < H`` strictly inside (``Ψ̄`` constant).
    """

    family: ClassVar[str] = "ironed"
    base: CostPrior
    _: KW_ONLY
    n_points: int = 2001
    _q: FloatArray = field(init=False, repr=False, compare=False)
    _v: FloatArray = field(init=False, repr=False, compare=False)
    _exact: NDArray[np.bool_] = field(init=False, repr=False, compare=False)
    ironed_intervals: tuple[tuple[float, float], ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.base, CostPrior):
            raise ValueError(
                f"base must be a CostPrior, got {type(self.base).__name__}"
            )
        n = self.n_points
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 16:
            raise ValueError(f"n_points must be an integer ≥ 16, got {n!r}")
        c, q = self._nodes(int(n))
        h = q * c  # H(F(c)) = c·F(c), exact
        hull = lower_convex_hull(q, h)
        slopes = np.diff(h[hull]) / np.diff(q[hull])
        seg = np.clip(np.searchsorted(q[hull], q, side="right") - 1, 0, slopes.size - 1)
        values = slopes[seg]
        left = np.concatenate([[-math.inf], slopes])
        right = np.concatenate([slopes, [math.inf]])
        values[hull] = np.clip(self.base._virtual_cost(c[hull]), left, right)
        last = int(np.flatnonzero(np.isfinite(values))[-1])
        vertex = np.zeros(q.size, dtype=bool)
        vertex[hull] = True
        object.__setattr__(self, "n_points", int(n))
        object.__setattr__(self, "_q", q[: last + 1])
        object.__setattr__(self, "_v", values[: last + 1])
        object.__setattr__(self, "_exact", (vertex[:-1] & vertex[1:])[:last])
        object.__setattr__(
            self, "ironed_intervals", self._intervals(c, q, h, hull, slopes)
        )

    def _nodes(self, n: int) -> tuple[FloatArray, FloatArray]:
        """Node costs ``c_k`` (strictly increasing in ``q``) and ``q_k = F(c_k)``."""
        base = self.base
        bounded = math.isfinite(base.high)
        q_top = 1.0 if bounded else 1.0 - 1e-9
        tails = 10.0 ** -np.linspace(1.0, 9.0, max(n // 16, 8))
        levels = np.concatenate([np.linspace(0.0, q_top, n), tails, 1.0 - tails])
        c_top = base.high if bounded else float(base._ppf(np.array([q_top]))[0])
        c = np.concatenate(
            [np.linspace(base.low, c_top, n), base._grid_ppf(levels[levels <= q_top])]
        )
        c = np.unique(np.clip(c, base.low, c_top))
        keep = np.concatenate([[True], np.diff(c) > 1e-9 * (c_top - base.low)])
        if not keep[-1]:  # keep the exact top node, drop its near-duplicate instead
            keep[np.flatnonzero(keep)[-1]] = c.size == 1
            keep[-1] = True
        c = c[keep]
        q = np.maximum.accumulate(np.clip(base._cdf(c), 0.0, 1.0))
        q[0] = 0.0
        if bounded:
            q[-1] = 1.0
        _, first = np.unique(q, return_index=True)
        return c[first], q[first]

    @staticmethod
    def _intervals(
        c: FloatArray,
        q: FloatArray,
        h: FloatArray,
        hull: NDArray[np.intp],
        slopes: FloatArray,
    ) -> tuple[tuple[float, float], ...]:
        """Hull segments with a node strictly above them by more than ``_GAP_RTOL``."""
        out = []
        tol = _GAP_RTOL * max(float(np.max(np.abs(h))), 1e-300)
        for j in np.flatnonzero(np.diff(hull) > 1):
            a, b = hull[j], hull[j + 1]
            chord = h[a] + slopes[j] * (q[a + 1 : b] - q[a])
            if np.max(h[a + 1 : b] - chord) > tol:
                out.append((float(c[a]), float(c[b])))
        return tuple(out)

    # ------------------------------------------------------------ delegation
    @property
    def low(self) -> float:  # type: ignore[override]
        return self.base.low

    @property
    def high(self) -> float:  # type: ignore[override]
        return self.base.high

    def _cdf(self, c: FloatArray) -> FloatArray:
        return self.base._cdf(c)

    def _pdf(self, c: FloatArray) -> FloatArray:
        return self.base._pdf(c)

    def _ppf(self, q: FloatArray) -> FloatArray:
        return self.base._ppf(q)

    def _grid_ppf(self, q: FloatArray) -> FloatArray:
        return self.base._grid_ppf(q)

    def _dlogpdf(self, c: FloatArray) -> FloatArray:
        return self.base._dlogpdf(c)

    # --------------------------------------------------------- ironed Ψ̄
    def _virtual_cost(self, c: FloatArray) -> FloatArray:
        q = np.clip(self.base._cdf(c), 0.0, 1.0)
        inside = q <= self._q[-1]
        out = np.interp(q, self._q, self._v)
        if self._exact.size:
            k = np.clip(
                np.searchsorted(self._q, q, side="right") - 1, 0, self._exact.size - 1
            )
            exact = inside & self._exact[k]
            if exact.any():
                psi = self.base._virtual_cost(c[exact])
                out[exact] = np.clip(psi, self._v[k[exact]], self._v[k[exact] + 1])
        if not inside.all():
            tail = self.base._virtual_cost(c[~inside])
            out[~inside] = np.maximum(tail, self._v[-1])
        return out

    def _ratio(self, c: FloatArray) -> FloatArray:
        return self._virtual_cost(c) - c

    def _virtual_cost_derivative(self, c: FloatArray) -> FloatArray:
        """``dΨ̄/dc = f(c)·dΨ̄/dq`` (piecewise constant in ``q``); ``Ψ'`` in the tail."""
        q = np.clip(self.base._cdf(c), 0.0, 1.0)
        k = np.clip(
            np.searchsorted(self._q, q, side="right") - 1, 0, max(self._q.size - 2, 0)
        )
        dq = np.diff(self._q)
        slope = np.diff(self._v) / dq if dq.size else np.zeros(1)
        out = slope[k] * self.base._pdf(c)
        tail = q > self._q[-1]
        if tail.any():
            psi = self.base._virtual_cost(c[tail])
            deriv = self.base._virtual_cost_derivative(c[tail])
            out[tail] = np.where(psi > self._v[-1], deriv, 0.0)
        return out

    def to_dict(self) -> dict[str, Any]:
        params = {"base": self.base.to_dict(), "n_points": self.n_points}
        return {"family": self.family, "params": params}
