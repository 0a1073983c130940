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

from mechanisms.priors._cost_prior import CostPrior, FloatArray

__all__ = ["IronedPrior", "lower_convex_hull"]

_Q_RTOL = 1e-8  # consecutive nodes need q_{k+1} − q_k > _Q_RTOL·q_{k+1}
_GAP_RTOL = 1e-9  # smaller hull gaps (relative to slope·Δq) are rounding, not ironing
_REFINE = 129  # extra nodes across the two cells at each end of an ironed interval


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


def _hull(
    c: FloatArray, q: FloatArray
) -> tuple[NDArray[np.intp], FloatArray, NDArray[np.bool_]]:
    """Lower hull of ``H = q·c``: vertex indices, segment slopes, ironed segments."""
    h = q * c  # H(F(c)) = c·F(c), exact
    hull = lower_convex_hull(q, h)
    slopes = np.diff(h[hull]) / np.diff(q[hull])
    return hull, slopes, _ironed_segments(q, h, hull, slopes)


def _ironed_segments(
    q: FloatArray, h: FloatArray, hull: NDArray[np.intp], slopes: FloatArray
) -> NDArray[np.bool_]:
    """Hull segments with a skipped node above the chord by more than
    ``_GAP_RTOL·|slope|·(q_b − q_a)`` (real ironing, not rounding)."""
    out = np.zeros(slopes.size, dtype=bool)
    for j in np.flatnonzero(np.diff(hull) > 1):
        a, b = hull[j], hull[j + 1]
        gap = np.max(h[a + 1 : b] - (h[a] + slopes[j] * (q[a + 1 : b] - q[a])))
        out[j] = gap > _GAP_RTOL * abs(slopes[j]) * (q[b] - q[a])
    return out


@dataclass(frozen=True)
class IronedPrior(CostPrior):
    """A prior with Myerson's ironed virtual cost ``Ψ̄`` (spec §2).

    ``cdf``, ``pdf``, ``ppf``, ``low``, ``high`` are the base prior's; ``virtual_cost``
    returns ``Ψ̄(c) = H̄'(F(c))``, built on nodes ``c_k`` (uniform in cost, uniform in
    quantile and geometric in both quantile tails, ``n_points`` each; nodes closer
    than ``1e-8·q`` in quantile are merged so that ``H`` slopes are well resolved):

    * ``H`` is evaluated exactly at every node as ``c_k·q_k``; after a first hull,
      ``129`` extra nodes are placed across the cells at each end of every ironed
      interval (the tangency points) and the hull is recomputed;
    * a hull segment of ``H̄`` that passes strictly below skipped nodes by more than
      ``1e-9·|slope|·(segment length)`` is an *ironed interval*: ``Ψ̄`` is constant
      there, equal to the segment's slope;
    * elsewhere ``H`` is convex at node resolution and ``Ψ̄(c) = Ψ(c)``, clipped to the
      node values ``v_k ≤ Ψ̄ ≤ v_{k+1}`` of its cell (``v_k = Ψ(c_k)``, clipped at hull
      vertices to the adjacent slopes, then made non-decreasing by a running max).
      The clip binds only at rounding level for a regular prior, and makes ``Ψ̄``
      non-decreasing by construction;
    * above the last node (unbounded support: ``q > 1 − 1e-9``, or a top node where
      ``Ψ = inf``), ``Ψ̄ = max(Ψ(c), v_last)``: ironing assumes a regular far tail.

    Since ironed cells integrate to ``slope·Δq = ΔH̄`` and the others to ``ΔH``,
    ``∫ Ψ̄ dF = H̄(1) − H̄(0) = ∫ Ψ dF``.

    Parameters
    ----------
    base : CostPrior
        The prior to iron.
    n_points : int
        Nodes per node family (``≥ 16``).

    Attributes
    ----------
    ironed_intervals : tuple of (float, float)
        Cost intervals ``[c_a, c_b]`` on which ``Ψ̄`` is constant.
    """

    family: ClassVar[str] = "ironed"
    base: CostPrior
    _: KW_ONLY
    n_points: int = 2001
    _q: FloatArray = field(init=False, repr=False, compare=False)
    _v: FloatArray = field(init=False, repr=False, compare=False)
    _exact: NDArray[np.bool_] = field(init=False, repr=False, compare=False)
    _level: FloatArray = field(init=False, repr=False, compare=False)
    ironed_intervals: tuple[tuple[float, float], ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.base, CostPrior):
            raise ValueError(
                f"base must be a CostPrior, got {type(self.base).__name__}"
            )
        n = self.n_points
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 16:
            raise ValueError(f"n_points must be an integer ≥ 16, got {n!r}")
        c, q = self._nodes(int(n), extra=np.empty(0))
        hull, slopes, ironed = _hull(c, q)
        if ironed.any():  # refine around the ends of ironed intervals, then redo
            ends = hull[
                np.concatenate([np.flatnonzero(ironed), np.flatnonzero(ironed) + 1])
            ]
            lo, hi = c[np.maximum(ends - 1, 0)], c[np.minimum(ends + 1, c.size - 1)]
            extra = np.linspace(lo, hi, _REFINE).ravel()
            c, q = self._nodes(int(n), extra=extra)
            hull, slopes, ironed = _hull(c, q)
        seg = np.clip(np.searchsorted(q[hull], q, side="right") - 1, 0, slopes.size - 1)
        inner = ironed[seg]
        inner[hull] = False  # nodes strictly inside an ironed segment
        values = self.base._virtual_cost(c)
        left = np.concatenate([[-math.inf], slopes])
        right = np.concatenate([slopes, [math.inf]])
        values[hull] = np.clip(values[hull], left, right)
        values[inner] = slopes[seg[inner]]
        last = int(np.flatnonzero(np.isfinite(values))[-1])
        values = np.maximum.accumulate(values)
        cell_ironed = ironed[seg[:-1]]
        # An ironed cell takes the value of the segment's inner node(s) (constant).
        level = np.where(inner[:-1], values[:-1], values[1:])
        intervals = tuple(
            (float(c[hull[j]]), float(c[hull[j + 1]])) for j in np.flatnonzero(ironed)
        )
        object.__setattr__(self, "n_points", int(n))
        object.__setattr__(self, "_q", q[: last + 1])
        object.__setattr__(self, "_v", values[: last + 1])
        object.__setattr__(self, "_exact", ~cell_ironed[:last])
        object.__setattr__(self, "_level", level[:last])
        object.__setattr__(self, "ironed_intervals", intervals)

    def _nodes(self, n: int, *, extra: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Node costs ``c_k`` (strictly increasing in ``q``) and ``q_k = F(c_k)``."""
        base = self.base
        bounded = math.isfinite(base.high)
        q_top = 1.0 if bounded else 1.0 - 1e-9
        tails = 10.0 ** -np.linspace(1.0, 9.0, max(n // 16, 8))
        levels = np.concatenate([np.linspace(0.0, q_top, n), tails, 1.0 - tails])
        c_top = base.high if bounded else float(base._ppf(np.array([q_top]))[0])
        c = np.concatenate(
            [
                np.linspace(base.low, c_top, n),
                base._grid_ppf(levels[levels <= q_top]),
                extra,
            ]
        )
        c = np.unique(np.clip(c, base.low, c_top))
        q = np.maximum.accumulate(np.clip(base._cdf(c), 0.0, 1.0))
        q[0] = 0.0
        if bounded:
            q[-1] = 1.0
        keep = np.ones(c.size, dtype=bool)
        last = 0
        for k in range(1, c.size):  # merge nodes whose Δq is not resolved
            if q[k] - q[last] > _Q_RTOL * q[k]:
                keep[k], last = True, k
            else:
                keep[k] = False
        if bounded and not keep[-1]:  # keep the exact top node instead
            keep[last] = last == 0
            keep[-1] = True
        return c[keep], q[keep]

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
    def _cells(
        self, c: FloatArray
    ) -> tuple[FloatArray, NDArray[np.intp], NDArray[np.bool_]]:
        """``q = F(c)``, the node cell index of each ``q`` and whether it is in the nodes."""
        q = np.clip(self.base._cdf(c), 0.0, 1.0)
        k = np.clip(
            np.searchsorted(self._q, q, side="right") - 1,
            0,
            max(self._exact.size - 1, 0),
        )
        return q, k, q <= self._q[-1]

    def _virtual_cost(self, c: FloatArray) -> FloatArray:
        _, k, inside = self._cells(c)
        out = np.empty(c.shape)
        if self._exact.size == 0:  # a single node: everything is tail
            inside[:] = False
        exact = inside & self._exact[k] if self._exact.size else inside
        flat = inside & ~exact
        out[flat] = self._level[k[flat]]
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
        """``Ψ'(c)`` where ``Ψ̄ = Ψ`` strictly inside its clip range, else 0."""
        psi_bar = self._virtual_cost(c)
        psi = self.base._virtual_cost(c)
        _, k, inside = self._cells(c)
        follows = psi_bar == psi
        if self._exact.size:
            follows &= ~inside | self._exact[k]
            lo, hi = self._v[k], self._v[np.minimum(k + 1, self._v.size - 1)]
            follows &= ~inside | ((psi >= lo) & (psi <= hi))
        out = np.zeros(c.shape)
        if follows.any():
            out[follows] = self.base._virtual_cost_derivative(c[follows])
        return out

    def to_dict(self) -> dict[str, Any]:
        params = {"base": self.base.to_dict(), "n_points": self.n_points}
        return {"family": self.family, "params": params}
