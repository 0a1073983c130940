"""The curator's side, public X: the exact likelihood of the response bits (spec §2.4–§2.5).

Only a :class:`~._randomizers.PublicXReports` (public rows, bits, budgets) reaches this
module. With ``Λ_i = Ψ_{ε_i}(βᵀx_i)`` (heterogeneous budgets as per-user constants,
spec §6):

    ℓ_n(β) = (1/n) Σ_i [z_i log Λ_i + (1 − z_i) log(1 − Λ_i)]
    s_i = u_i Ψ'_i x_i,   u_i = (z_i − Λ_i)/(Λ_i(1 − Λ_i))
    H_i = [u_i Ψ''_i − (z_i/Λ_i² + (1 − z_i)/(1 − Λ_i)²) Ψ'_i²] x_i x_iᵀ
    I   = (1/n) Σ_i Ψ'_i²/(Λ_i(1 − Λ_i)) x_i x_iᵀ

Each evaluation is ``O(n·d)``. The paper's ``+ log F_X(x_i)`` term is β-free and
dropped (spec §2.4 Correction).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from learners.onebit_quantile._model import QuantileWorkingModel, privacy_factors
from learners.onebit_quantile._randomizers import PublicXReports

FloatArray = NDArray[np.float64]
TINY = 1e-300
"""Floor of ``Λ`` and ``1 − Λ`` (only reached when ``1/(1 + e^ε)`` underflows)."""


CHUNK = 1 << 15
"""Rows per block: the temporaries of one block stay in cache (the ``O(n·d)`` passes
are memory-bound for large ``n``)."""


class PublicXLikelihood:
    """``−ℓ_n`` with its gradient, Fisher information and sandwich parts (module docstring).

    Parameters
    ----------
    reports : PublicXReports
        Rows ``x_i`` (public), bits ``z_i`` and budgets ``ε_i > 0``.
    model : QuantileWorkingModel
        The working model and the public interval.
    """

    def __init__(self, reports: PublicXReports, model: QuantileWorkingModel) -> None:
        self.X = np.ascontiguousarray(reports.X, dtype=float)
        self.z = reports.z.astype(bool)
        self.sign = 2.0 * reports.z - 1.0
        self.t, self.r = privacy_factors(reports.epsilon)
        self.model = model
        self.n, self.dim = self.X.shape

    def _blocks(self) -> range:
        return range(0, self.n, CHUNK)

    def _block(
        self, beta: FloatArray, lo: int, *, second: bool = False
    ) -> tuple[
        slice, FloatArray, FloatArray, FloatArray, FloatArray | None, FloatArray
    ]:
        """Rows ``lo:lo+CHUNK``: the observed bit's probability ``S`` (``Λ`` or ``1 − Λ``),
        ``u = (z − Λ)/(Λ(1 − Λ)) = ±1/S``, ``Ψ'``, (optionally) ``Ψ''``, and ``Λ(1 − Λ)``."""
        sl = slice(lo, min(lo + CHUNK, self.n))
        tails = self.model.tail_terms(self.X[sl] @ beta, second=second)
        t, r = self.t[sl], self.r[sl]
        P = tails.a * t + r
        Q = tails.b * t + r
        P = np.maximum(P, TINY)
        Q = np.maximum(Q, TINY)
        S = np.where(self.z[sl], P, Q)
        d2 = None if tails.d2 is None else tails.d2 * t
        return sl, S, self.sign[sl] / S, tails.d1 * t, d2, P * Q

    def value_grad(self, beta: FloatArray) -> tuple[float, FloatArray]:
        """``(−ℓ_n(β), −∇ℓ_n(β))``."""
        ll, grad = 0.0, np.zeros(self.dim)
        for lo in self._blocks():
            sl, S, u, d1, _, _ = self._block(beta, lo)
            ll += float(np.log(S).sum())
            grad += self.X[sl].T @ (u * d1)
        return -ll / self.n, -grad / self.n

    def value_grad_fisher(
        self, beta: FloatArray
    ) -> tuple[float, FloatArray, FloatArray]:
        """``(−ℓ_n, −∇ℓ_n, I)`` in one pass; ``I(β) = (1/n) Σ Ψ'²/(Λ(1 − Λ)) x xᵀ`` is
        the expected information given the rows (Fisher scoring, ``covariance="model"``)."""
        ll, grad = 0.0, np.zeros(self.dim)
        info = np.zeros((self.dim, self.dim))
        for lo in self._blocks():
            sl, S, u, d1, _, PQ = self._block(beta, lo)
            ll += float(np.log(S).sum())
            Xs = self.X[sl]
            grad += Xs.T @ (u * d1)
            info += (Xs.T * (d1 * d1 / PQ)) @ Xs
        return -ll / self.n, -grad / self.n, info / self.n

    def fisher(self, beta: FloatArray) -> FloatArray:
        """``I(β)`` alone (see :meth:`value_grad_fisher`)."""
        return self.value_grad_fisher(beta)[2]

    def sandwich_parts(self, beta: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(Â, B̂) = ((1/n) Σ H_i, (1/n) Σ s_i s_iᵀ)`` at ``β``."""
        A = np.zeros((self.dim, self.dim))
        B = np.zeros((self.dim, self.dim))
        for lo in self._blocks():
            sl, _, u, d1, d2, _ = self._block(beta, lo, second=True)
            assert d2 is not None
            c_score = (u * d1) ** 2  # u² = z/Λ² + (1 − z)/(1 − Λ)² for a bit z
            Xs = self.X[sl]
            A += (Xs.T * (u * d2 - c_score)) @ Xs
            B += (Xs.T * c_score) @ Xs
        return A / self.n, B / self.n

    def initial(self) -> FloatArray:
        """Least squares of the unbiased pseudo-responses ``m + W(z − 1/2)/t`` on ``x``
        (spec §2.4 step 2: ``E[ỹ | x] = E[t(Y) | x]``)."""
        m = self.model
        y_tilde = m.mid + m.width * (self.z - 0.5) / self.t
        beta, *_ = np.linalg.lstsq(self.X, y_tilde, rcond=None)
        return np.asarray(beta, dtype=float)

    def column_scales(self) -> FloatArray:
        """Public column RMS (spec §2.4 step 1; the rows are public here)."""
        rms = np.sqrt(np.mean(self.X * self.X, axis=0))
        return np.where(rms > 0, rms, 1.0)

    def constant_start(self, *, intercept_index: int | None) -> FloatArray:
        """``θ ≡ m`` when there is an intercept, else ``β = 0``."""
        beta = np.zeros(self.dim)
        if intercept_index is not None:
            beta[intercept_index] = self.model.mid
        return beta
