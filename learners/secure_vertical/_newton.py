"""Secure Newton–Raphson over a backend (spec §2, §4.3), and the block algebra of §2.1–§2.2.

Objective (maximised): ``Σ_i a_i ℓ_i(β) − (λ/2)‖β‖² − cᵀβ`` with the logistic
log-likelihood ``ℓ_i = y_i η_i − log(1 + e^{η_i})``, ``η = Xβ`` and ``y ∈ {0, 1}``
(``a = 1``, ``λ = 0``, ``c = 0``: the pooled MLE; spec §7.2 for the DP weights and the
perturbation ``c = (2/η_dp) b``). One step solves

    I(β) Δ = g(β),   g = Xᵀ(a ⊙ (y − π)) − λβ − c,   I = Xᵀ diag(a ⊙ π(1−π)) X + λ I_d,

and sets ``β ← β + Δ`` (spec §2.2). Reveal levels (§4.3 step 4): ``"R1"`` opens ``g``
and ``I`` (``d + d²`` numbers) and solves in the clear, so ``β`` is public every
iteration; ``"R2"`` solves inside the backend and opens only the bit
``max|Δ| < tol`` (nothing at all with ``fixed_iterations``, as DP orders need,
§6 row 14), and finally ``β̂``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from learners.secure_vertical._backend import Backend, cholesky_solve

FloatArray = NDArray[np.float64]
RevealLevel = Literal["R1", "R2"]
REVEAL_LEVELS: tuple[str, ...] = ("R1", "R2")


@dataclass(frozen=True, slots=True)
class NewtonTrace:
    """Outcome of :func:`secure_newton` (``beta`` is the opened estimate)."""

    beta: FloatArray
    n_iter: int
    converged: bool


def secure_newton(
    ops: Backend,
    X: Any,
    y: Any,
    *,
    d: int,
    weights: FloatArray | None = None,
    lam: float = 0.0,
    noise: Any = None,
    reveal: RevealLevel = "R1",
    tol: float = 1e-8,
    max_iter: int = 25,
    fixed_iterations: bool = False,
) -> NewtonTrace:
    """Newton–Raphson from ``β = 0`` on secret ``[X]`` (``n × d``) and ``[y]``.

    Parameters
    ----------
    weights : ndarray of shape (n,) or None
        Public record weights ``a_i`` (DP, §7.2); None means 1.
    noise : secret array of shape (d,) or None
        The secret linear term ``c`` (§7.2); subtracted from the score.
    fixed_iterations : bool
        Run exactly ``max_iter`` steps without opening the convergence bit (R2 only).

    Raises
    ------
    ValueError
        ``reveal`` is not R1/R2, or ``fixed_iterations`` with R1.
    """
    if reveal not in REVEAL_LEVELS:
        raise ValueError(f"reveal must be one of {REVEAL_LEVELS}, got {reveal!r}")
    if fixed_iterations and reveal != "R2":
        raise ValueError("fixed_iterations needs reveal='R2' (R1 opens g and I anyway)")
    ridge = lam * np.eye(d)
    beta: Any = np.zeros(d)
    for it in range(1, max_iter + 1):
        eta = ops.predict(X, beta)
        pi = ops.sigmoid(eta)
        g, info = ops.score_information(X, y, pi, weights)
        if lam:
            g = g - lam * beta
            info = info + ridge
        if noise is not None:
            g = g - noise
        if reveal == "R1":
            g_open = ops.open(g, label="g", row=6, iteration=it)
            i_open = ops.open(info, label="I", row=6, iteration=it)
            delta = cholesky_solve(i_open, g_open)
            beta = np.asarray(beta, dtype=float) + delta
            ops.open(beta, label="beta_t", row=2, iteration=it)
            # a small step is convergence only if it solves I Δ = g: on separable data
            # every π saturates, I → 0 and the least-squares fallback returns Δ ≈ 0
            # while g ≠ 0 (no MLE; the fit must not be reported converged)
            solved = np.max(np.abs(i_open @ delta - g_open)) <= 1e-6 * max(
                1.0, float(np.max(np.abs(g_open)))
            )
            if np.max(np.abs(delta)) < tol and solved:
                return NewtonTrace(np.asarray(beta, dtype=float), it, True)
            continue
        delta = ops.solve(info, g)
        beta = beta + delta
        if not fixed_iterations and ops.below(delta, tol, iteration=it):
            return NewtonTrace(ops.open(beta, label="beta", row=7), it, True)
    final = ops.open(beta, label="beta", row=7) if reveal == "R2" else np.asarray(beta)
    return NewtonTrace(np.asarray(final, dtype=float), max_iter, fixed_iterations)


# ---- block algebra (spec §2.1–§2.2, V2) -----------------------------------------


def information_blocks(
    blocks: list[FloatArray], w: FloatArray
) -> dict[tuple[int, int], FloatArray]:
    """Every block ``I_kl = X_kᵀ D X_l`` (shape ``p_k × p_l``), ``D = diag(w)``.

    **Correction** (spec §2.1): the block at ``(k, l)`` is ``X_kᵀ D X_l``; the paper's
    eq. (7) swaps the two off-diagonal blocks.
    """
    return {
        (k, l): (Xk.T * w) @ Xl
        for k, Xk in enumerate(blocks)
        for l, Xl in enumerate(blocks)  # noqa: E741
    }


def assemble(blocks: dict[tuple[int, int], FloatArray], sizes: list[int]) -> FloatArray:
    """The ``d × d`` matrix with block ``(k, l)`` at rows of ``k`` and columns of ``l``."""
    edges = np.concatenate([[0], np.cumsum(sizes)])
    out = np.zeros((edges[-1], edges[-1]))
    for (k, l), B in blocks.items():  # noqa: E741
        out[edges[k] : edges[k + 1], edges[l] : edges[l + 1]] = B
    return out


def schur_solve(info: FloatArray, g: FloatArray, split: int) -> FloatArray:
    """Solve ``I Δ = g`` by the Schur form of spec §2.2 (needs only ``I_11⁻¹``).

    ``S = I_22 − I_21 I_11⁻¹ I_12``; ``Δ_2 = S⁻¹(g_2 − I_21 I_11⁻¹ g_1)``;
    ``Δ_1 = I_11⁻¹(g_1 − I_12 Δ_2)``, with blocks split after ``split`` coordinates.
    """
    I11, I12 = info[:split, :split], info[:split, split:]
    I21, I22 = info[split:, :split], info[split:, split:]
    g1, g2 = g[:split], g[split:]
    inv11_I12 = np.linalg.solve(I11, I12)
    inv11_g1 = np.linalg.solve(I11, g1)
    S = I22 - I21 @ inv11_I12
    d2 = np.linalg.solve(S, g2 - I21 @ inv11_g1)
    d1 = np.linalg.solve(I11, g1 - I12 @ d2)
    return np.concatenate([d1, d2])
