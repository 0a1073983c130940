"""The curator's side, private X: likelihood of ``z^(Y)`` given ``z^(X)`` (spec §3.2–§3.5).

Only a :class:`~._randomizers.PrivateXReports` reaches this module. Under the
curator's product two-point prior the response bit of a report ``z`` is 1 with
probability

    Φ(β, z) = Σ_s P̂(s | z) Ψ_{ε₀}(βᵀx(s)),   x(s)_j = m_j + s_j ρ_j W_j/2,

and ``ℓ_n(β) = (1/n) Σ [z^(Y) log Φ + (1 − z^(Y)) log(1 − Φ)]`` is **maximized** (spec
§3.3 Correction). Two exact evaluation paths:

- **cells** (no public column varies across users: at most a public intercept): the
  data reduce to counts ``N_{g,r,1}``, ``N_{g,r,0}`` per budget level ``g`` and report
  ``r``; every evaluation is one transform per level (spec §3.4, §6), independent of
  ``n``;
- **per user** (features declared public vary across users): each user's posterior
  weights over the ``2^k`` corners, ``O(n·2^k)`` per evaluation.

Both hand the same per-cell arrays to the score, Hessian and sandwich of spec §3.5.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from learners.onebit_quantile._model import QuantileWorkingModel, privacy_factors
from learners.onebit_quantile._randomizers import PrivateXReports
from learners.onebit_quantile._transform import (
    corner_signs,
    posterior_transform,
    posterior_weights,
    report_index,
)

FloatArray = NDArray[np.float64]
TINY = 1e-300
MAX_CELLS = 2**25
"""Largest ``levels × 2^k`` (cells path) or ``users × 2^k`` (per-user path) evaluated."""


@dataclass(frozen=True, slots=True)
class CornerPrior:
    """The curator's public prior over the private covariates (spec §3.2, §3.6).

    ``center`` ``m_j`` and ``half_width`` ``W_j/2`` of each covariate's public interval;
    ``rho`` ``ρ_j ∈ (0, 1]`` puts the two points at ``m_j ± ρ_j W_j/2`` (1: the paper's
    endpoint prior; ``√E[x̃_j²]``: the moment-matched prior).
    """

    center: FloatArray
    half_width: FloatArray
    rho: FloatArray

    def corners(self) -> FloatArray:
        """``x(s)`` for every corner, shape ``(2^k, k)``."""
        k = self.center.shape[0]
        return self.center + corner_signs(k) * (self.rho * self.half_width)

    def tau(self, bit_epsilon: FloatArray) -> FloatArray:
        """``τ_j = ρ_j tanh(ε_j/2)`` for covariate budgets of shape (..., k)."""
        return self.rho * np.tanh(bit_epsilon / 2.0)


@dataclass(frozen=True, slots=True)
class Cells:
    """Per-cell probabilities and derivatives at one ``β`` (a cell: budget level and
    report, or one user): ``P = Φ``, ``Q = 1 − Φ``, ``D1 = Φ'``, ``D2 = Φ''``."""

    P: FloatArray
    Q: FloatArray
    D1: FloatArray
    D2: FloatArray | None
    n1: FloatArray
    n0: FloatArray


class PrivateXLikelihood:
    """``−ℓ_n`` on the private-X reports (module docstring).

    Parameters
    ----------
    reports : PrivateXReports
    model : QuantileWorkingModel
        The response's working model and public interval.
    prior : CornerPrior
    private_index, public_index : sequence of int
        Positions of the privatized covariates and of the public columns (the
        columns of ``reports.X_public``, in order) in the parameter vector.
    """

    _n1: FloatArray
    _n0: FloatArray

    def __init__(
        self,
        reports: PrivateXReports,
        model: QuantileWorkingModel,
        *,
        prior: CornerPrior,
        private_index: list[int],
        public_index: list[int],
    ) -> None:
        self.model, self.prior = model, prior
        self.priv = np.asarray(private_index, dtype=int)
        self.pub = np.asarray(public_index, dtype=int)
        self.dim = len(private_index) + len(public_index)
        self.k = len(private_index)
        self.n = int(reports.z_y.shape[0])
        self.reports = reports
        Xp = reports.X_public
        self.per_user = bool(Xp.shape[1]) and bool(self.n and not np.all(Xp == Xp[:1]))
        self.corners = prior.corners()
        if self.per_user:
            self._init_per_user()
        else:
            self._init_cells()

    # ---- setup ----

    def _init_cells(self) -> None:
        rep = self.reports
        if self.n and np.all(rep.bit_epsilon == rep.bit_epsilon[:1]):
            levels, g_idx = rep.bit_epsilon[:1], np.zeros(self.n, dtype=np.int64)
        else:
            levels, g_idx = np.unique(rep.bit_epsilon, axis=0, return_inverse=True)
        n_levels, n_corners = levels.shape[0], 2**self.k
        if n_levels * n_corners > MAX_CELLS:
            raise ValueError(
                f"private_x: {n_levels} budget levels × 2^{self.k} corners exceed the "
                f"exact transform's limit ({MAX_CELLS} cells)"
            )
        cell = g_idx.reshape(-1) * n_corners + report_index(rep.z_x)
        size = n_levels * n_corners
        total = np.bincount(cell, minlength=size).astype(float)
        ones = np.bincount(cell, weights=rep.z_y.astype(float), minlength=size)
        used = total > 0
        self._used = used
        self._n1 = np.asarray(ones[used], dtype=float)
        self._n0 = np.asarray((total - ones)[used], dtype=float)
        self._t0, self._r0 = privacy_factors(levels[:, 0])
        self._tau = self.prior.tau(levels[:, 1:])
        design = np.empty((n_corners, self.dim))
        design[:, self.priv] = self.corners
        if self.pub.size:
            design[:, self.pub] = rep.X_public[0] if self.n else 0.0
        self._design = design

    def _init_per_user(self) -> None:
        rep = self.reports
        if self.n * 2**self.k > MAX_CELLS:
            raise ValueError(
                f"private_x with public features: {self.n} users × 2^{self.k} corners "
                f"exceed the exact evaluation's limit ({MAX_CELLS})"
            )
        self._W = posterior_weights(rep.z_x, self.prior.tau(rep.bit_epsilon[:, 1:]))
        self._t0, self._r0 = privacy_factors(rep.bit_epsilon[:, 0])
        self._n1 = np.asarray(rep.z_y, dtype=float)
        self._n0 = np.asarray(1.0 - self._n1, dtype=float)

    # ---- evaluation ----

    def cells(self, beta: FloatArray, *, second: bool = False) -> Cells:
        """``Φ``, ``1 − Φ``, ``Φ'`` (and ``Φ''``) of every non-empty cell at ``β``."""
        if self.per_user:
            return self._cells_per_user(beta, second=second)
        return self._cells_transform(beta, second=second)

    def _cells_transform(self, beta: FloatArray, *, second: bool) -> Cells:
        Dc = self._design
        tails = self.model.tail_terms(Dc @ beta, second=second)
        stacked = np.vstack([tails.a, tails.b, tails.d1[None, :] * Dc.T])
        T = posterior_transform(stacked, self._tau)  # (L, 2 + d, 2^k)
        t0, r0 = self._t0[:, None], self._r0[:, None]
        used = self._used
        P = np.maximum(t0 * T[:, 0] + r0, TINY).reshape(-1)[used]
        Q = np.maximum(t0 * T[:, 1] + r0, TINY).reshape(-1)[used]
        D1 = (t0[:, None] * T[:, 2:]).transpose(0, 2, 1).reshape(-1, self.dim)[used]
        D2 = None
        if second:
            assert tails.d2 is not None
            outer = tails.d2[None, None, :] * Dc.T[:, None, :] * Dc.T[None, :, :]
            T2 = posterior_transform(outer, self._tau)  # (L, d, d, 2^k)
            T2 = self._t0[:, None, None, None] * T2
            D2 = T2.transpose(0, 3, 1, 2).reshape(-1, self.dim, self.dim)[used]
        return Cells(P=P, Q=Q, D1=D1, D2=D2, n1=self._n1, n0=self._n0)

    def _cells_per_user(self, beta: FloatArray, *, second: bool) -> Cells:
        Xp, C, W = self.reports.X_public, self.corners, self._W
        theta = (Xp @ beta[self.pub])[:, None] + (C @ beta[self.priv])[None, :]
        tails = self.model.tail_terms(theta, second=second)
        t0 = self._t0
        P = np.maximum(t0 * (W * tails.a).sum(axis=1) + self._r0, TINY)
        Q = np.maximum(t0 * (W * tails.b).sum(axis=1) + self._r0, TINY)
        Wd1 = W * tails.d1
        D1 = np.empty((self.n, self.dim))
        D1[:, self.priv] = t0[:, None] * (Wd1 @ C)
        D1[:, self.pub] = (t0 * Wd1.sum(axis=1))[:, None] * Xp
        D2 = None
        if second:
            assert tails.d2 is not None
            Wd2 = t0[:, None] * W * tails.d2
            full = np.empty((self.n, 2**self.k, self.dim))
            full[:, :, self.priv] = C[None, :, :]
            full[:, :, self.pub] = Xp[:, None, :]
            D2 = np.einsum("ns,nsa,nsb->nab", Wd2, full, full)
        return Cells(P=P, Q=Q, D1=D1, D2=D2, n1=self._n1, n0=self._n0)

    # ---- the likelihood's pieces (spec §3.3, §3.5) ----

    def value_grad(self, beta: FloatArray) -> tuple[float, FloatArray]:
        """``(−ℓ_n(β), −∇ℓ_n(β))``."""
        c = self.cells(beta)
        ll = float(c.n1 @ np.log(c.P) + c.n0 @ np.log(c.Q))
        coef = c.n1 / c.P - c.n0 / c.Q
        return -ll / self.n, -(coef @ c.D1) / self.n

    def value_grad_fisher(
        self, beta: FloatArray
    ) -> tuple[float, FloatArray, FloatArray]:
        """``(−ℓ_n, −∇ℓ_n, I)`` with ``I = (1/n) Σ_cells N Φ'Φ'ᵀ/(Φ(1 − Φ))`` (the
        reports' empirical frequencies; spec V-B4 with ``p̂(r) = N_r/n``)."""
        c = self.cells(beta)
        ll = float(c.n1 @ np.log(c.P) + c.n0 @ np.log(c.Q))
        coef = c.n1 / c.P - c.n0 / c.Q
        w = (c.n1 + c.n0) / (c.P * c.Q)
        info = (c.D1.T * w) @ c.D1
        return -ll / self.n, -(coef @ c.D1) / self.n, info / self.n

    def fisher(self, beta: FloatArray) -> FloatArray:
        """``I(β)`` alone (see :meth:`value_grad_fisher`)."""
        return self.value_grad_fisher(beta)[2]

    def sandwich_parts(self, beta: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(Â, B̂)``: count-weighted Hessian and score outer products (spec §3.5)."""
        c = self.cells(beta, second=True)
        assert c.D2 is not None
        coef = c.n1 / c.P - c.n0 / c.Q
        sq = c.n1 / c.P**2 + c.n0 / c.Q**2
        outer = (c.D1.T * sq) @ c.D1
        A = (np.tensordot(coef, c.D2, axes=1) - outer) / self.n
        return A, outer / self.n

    def initial(self) -> FloatArray:
        """Least squares of the unbiased pseudo-response on the unbiased pseudo-covariates
        ``ξ_j = m_j + (W_j/2) z_j/tanh(ε_j/2)`` and the public columns (spec §3.5)."""
        rep, m = self.reports, self.model
        y_tilde = m.mid + m.width * (rep.z_y - 0.5) / np.tanh(rep.bit_epsilon[:, 0] / 2)
        xi = self.prior.center + self.prior.half_width * rep.z_x / np.tanh(
            rep.bit_epsilon[:, 1:] / 2
        )
        design = np.empty((self.n, self.dim))
        design[:, self.priv] = xi
        design[:, self.pub] = rep.X_public
        beta, *_ = np.linalg.lstsq(design, y_tilde, rcond=None)
        return np.asarray(beta, dtype=float)

    def column_scales(self) -> FloatArray:
        """``√((a_j² + b_j²)/2)`` for private covariates, RMS for public columns."""
        p = self.prior
        lo, hi = p.center - p.half_width, p.center + p.half_width
        scales = np.ones(self.dim)
        scales[self.priv] = np.sqrt((lo**2 + hi**2) / 2.0)
        if self.pub.size and self.n:
            Xp = self.reports.X_public
            scales[self.pub] = np.sqrt(np.mean(Xp * Xp, axis=0))
        return np.where(scales > 0, scales, 1.0)

    def constant_start(self, *, intercept_index: int | None) -> FloatArray:
        """``θ ≡ m`` when there is an intercept, else ``β = 0``."""
        beta = np.zeros(self.dim)
        if intercept_index is not None:
            beta[intercept_index] = self.model.mid
        return beta
