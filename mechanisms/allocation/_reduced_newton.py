"""Newton's method on the reduced objective ``F(w) = min_a G(w, a, η)`` (fixed ``η``).

With linear ``u`` and ``μ > 0`` the a-block minimiser ``a*(w)`` is unique and, on a fixed
active set, an explicit function of ``r = ℓ(w) + γηΨ`` (see
:mod:`mechanisms.weights_step`). So ``F`` is differentiable (Danskin) with

    ∇F(w) = Σ_i a*_i ℓ'_i x_i + λw (+ c),

and, on the free set ``M`` (``0 < a_i < h_i``), differentiating ``a_M = A − s r_M`` with
``Σ_M a = 1 − Σ_U h`` and ``‖a‖² = μ²s²`` held gives

    ∂a_M/∂r_M = −sI + 1 p₁ᵀ − r_M p₂ᵀ,
    p₁ = (s/D)(S₁a − (Q + μ²s)1),  p₂ = (s/D)(|M|a − c₁1),
    D = S₁c₁ − |M|(Q + μ²s),  S₁ = Σ_M r,  Q = Σ_M a r,  c₁ = Σ_M a,

hence ``∇²F = Σ a_i ℓ''_i x_i x_iᵀ + λI + Gᵀ(∂a/∂r)G`` with ``G`` the rows ``ℓ'_i x_i``
on ``M``. The last term is negative semi-definite (``a*`` is the gradient of a concave
function of ``r``); ``∇²F`` is positive definite when ``λ > λ_conv`` (paper Thm 4.1,
convexity in ``(w, log a)``).

When it is not (``λ ≤ λ_conv``, the default rule's candidate models), ``F`` has
directions of negative curvature, and its minimisers can sit at the end of long, nearly
flat valleys. The step is therefore a **trust-region** Newton step on the exact
``∇²F``: ``min gᵀs + ½sᵀ∇²F s`` over ``‖s‖ ≤ Δ`` (Moré–Sorensen, solved exactly from
the eigendecomposition of the ``d × d`` matrix), with ``Δ`` grown while the model
predicts ``F``'s decrease and shrunk when it does not (Nocedal & Wright, Alg. 4.1).
Where ``∇²F`` is positive definite and the Newton step fits, it *is* the Newton step,
so convergence stays quadratic. (The earlier fallback, a DC step on the w-block Hessian
alone, crawls along such a valley with a fixed step ``H_w⁻¹∇F``: 122 steps at
``m = 10⁵``, 492 at ``2·10⁵`` for the cost-free model; ``benchmarks/RESULTS.md``,
issue 16, h16alloc.) A step is accepted when ``F`` falls by at least ``10⁻⁴`` of the
predicted decrease, so every accepted step is a descent step. ``w`` has only ``d``
entries, so this needs a handful of O(m d²) passes where the plain block alternation
needs hundreds of sweeps when the weights are selective.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._problem import Problem
from mechanisms.allocation._weights_kernel import _jit
from mechanisms.allocation._weights_step import (
    WeightsStepState,
    solve_weights_compiled,
    state_from_weights,
)

FloatArray = NDArray[np.float64]

ACCEPT = 1e-4  # accept a step when F falls by this fraction of the predicted decrease


@dataclass(frozen=True, eq=False)
class _Point:
    w: FloatArray
    z: FloatArray
    losses: FloatArray
    dl: FloatArray  # ℓ'(z)
    d2: FloatArray | None  # ℓ''(z) when the loss pass gave it (logistic)
    r: FloatArray
    a: FloatArray
    state: WeightsStepState | None
    value: float


@_jit
def _logistic_pass(
    z: FloatArray, y: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(ℓ, ℓ', ℓ'')`` of the logistic loss in one pass (one ``exp``, one ``log1p``
    per record; :class:`learners.losses.LogisticLoss` takes five array passes).

    With ``t = −yz`` and ``e = exp(−|t|)``: ``ℓ = max(t, 0) + log1p(e)``,
    ``σ(t) = 1/(1 + e)`` (``t ≥ 0``) or ``e/(1 + e)``, ``ℓ' = −yσ(t)``,
    ``ℓ'' = σ(t)(1 − σ(t)) = σ(z)σ(−z)`` for ``y = ±1``.
    """
    m = z.size
    val = np.empty(m)
    d1 = np.empty(m)
    d2 = np.empty(m)
    for i in range(m):
        t = -y[i] * z[i]
        e = math.exp(-abs(t))
        val[i] = max(t, 0.0) + math.log1p(e)
        sig = 1.0 / (1.0 + e) if t >= 0.0 else e / (1.0 + e)
        d1[i] = -y[i] * sig
        d2[i] = sig * (1.0 - sig)
    return val, d1, d2


def _evaluate(
    prob: Problem,
    eta: float,
    w: FloatArray,
    state: WeightsStepState | None,
    a0: FloatArray | None = None,
) -> _Point:
    """``F`` at ``w``; the a-step warm-starts from ``state``, else from ``a0``."""
    cfg = prob.cfg
    z = prob.X @ w
    d2: FloatArray | None = None
    if cfg.loss == "logistic":
        losses, dl, d2 = _logistic_pass(z, prob.y)
    else:
        loss = prob.loss
        losses, dl = loss.value(z, prob.y), loss.derivative(z, prob.y)
    r = losses + cfg.gamma * eta * prob.psi
    caps = prob.caps(eta)
    if state is None and a0 is not None:
        state = state_from_weights(a0, r, caps, cfg.mu)
    a, new_state = solve_weights_compiled(r, caps, cfg.mu, state)
    value = (
        float(a @ r)
        + 0.5 * cfg.lam * float(w @ w)
        + cfg.mu * float(np.linalg.norm(a))
        + cfg.sigma / eta
    )
    c = prob.linear_term(eta)
    if c is not None:
        value += float(c @ w)
    return _Point(w, z, losses, dl, d2, r, a, new_state, value)


def _gradient(prob: Problem, eta: float, p: _Point) -> FloatArray:
    g = prob.X.T @ (p.a * p.dl) + prob.cfg.lam * p.w
    c = prob.linear_term(eta)
    return g if c is None else g + c


# Rows per block of the weighted Gram product (a block fits in L2 for d ≤ 32).
GRAM_BLOCK = 8192
SPARSE_BLOCK = 0.75  # gather a block's support rows when they are at most this share


def weighted_gram(
    X: FloatArray,
    weights: FloatArray,
    V: FloatArray | None = None,
    support: NDArray[np.bool_] | None = None,
) -> tuple[FloatArray, FloatArray | None]:
    """``(Xᵀ diag(weights) X, XᵀV)`` (weights of any sign; ``V`` of shape ``(m, k)``
    or ``None``) in one pass over ``X``, without a masked copy of it.

    Rows are taken in contiguous blocks; each block is scaled into one reused buffer
    next to its rows of ``V`` and multiplied into the ``d × (d + k)`` accumulator (one
    GEMM per block), so the extra memory is ``GRAM_BLOCK·(d + k)`` floats and every row
    is read from main memory once. ``support``: the rows where ``weights`` or ``V`` may
    be non-zero (the others are skipped: a block's support rows are gathered into the
    buffer when they are at most ``SPARSE_BLOCK`` of it). The a-step puts no weight on
    most records when the caps ``k/m`` bind (``a_i > 0`` on ~36 % of them at
    ``k = 4``), so this skips most of the flops.
    """
    m, d = X.shape
    k = 0 if V is None else V.shape[1]
    acc = np.zeros((d, d + k))
    buf = np.empty((min(m, GRAM_BLOCK), d + k))
    for lo in range(0, m, GRAM_BLOCK):
        hi = min(lo + GRAM_BLOCK, m)
        idx = None
        if support is not None:
            idx = np.flatnonzero(support[lo:hi])
            if idx.size > SPARSE_BLOCK * (hi - lo):
                idx = None
            else:
                idx += lo
        if idx is None:
            Xb, wb = X[lo:hi], weights[lo:hi]
            Vb = None if V is None else V[lo:hi]
        else:
            Xb, wb = X.take(idx, axis=0), weights.take(idx)
            Vb = None if V is None else V.take(idx, axis=0)
        out = buf[: Xb.shape[0]]
        np.multiply(Xb, wb[:, None], out=out[:, :d])
        if Vb is not None:
            out[:, d:] = Vb
        acc += Xb.T @ out
    return acc[:, :d], (acc[:, d:] if V is not None else None)


def _hessian(prob: Problem, eta: float, p: _Point) -> FloatArray:
    """The exact ``∇²F = H_w + sym(J)`` (module docstring), ``H_w = Σ a_i ℓ''_i x_i x_iᵀ
    + λI`` alone when the free set is empty.

    ``−s GᵀG`` of ``J`` is folded into the weighted Gram product (weights
    ``a_i ℓ''_i − s ℓ'_i²`` on the free set ``M``); the rank-two part needs ``Gᵀ1``,
    ``Gᵀr`` and ``Gᵀa`` (``p₁``, ``p₂`` are combinations of ``1`` and ``a``), three
    columns of the same GEMM.
    """
    cfg = prob.cfg
    d = prob.X.shape[1]
    wts = p.a * (prob.loss.curvature(p.z, prob.y) if p.d2 is None else p.d2)
    J = None
    if p.state is not None:
        s = p.state.s
        v = p.state.A - s * p.r
        free = (v > 0.0) & (v < prob.caps(eta))
        n = int(np.count_nonzero(free))
        if n:
            aM, rM = p.a[free], p.r[free]
            S1, c1, Q = float(rM.sum()), float(aM.sum()), float(aM @ rM)
            D = S1 * c1 - n * (Q + cfg.mu**2 * s)
            if D != 0.0:
                J = (s, S1, c1, Q, n, D)
    # wts and the columns vanish where a_i = 0 (M ⊆ {a > 0}); one block: no gather
    support = p.a > 0.0 if prob.m > GRAM_BLOCK else None
    if J is None:
        H, _ = weighted_gram(prob.X, wts, support=support)
        H.flat[:: d + 1] += cfg.lam
        return H
    s, S1, c1, Q, n, D = J
    G = np.where(free, p.dl, 0.0)  # ℓ'_i on M, 0 elsewhere
    wts -= s * G * G
    V = np.empty((prob.m, 3))
    V[:, 0] = G
    np.multiply(G, p.r, out=V[:, 1])
    np.multiply(G, p.a, out=V[:, 2])
    H, XV = weighted_gram(prob.X, wts, V, support)
    assert XV is not None
    g1, gr, ga = XV.T
    # Gᵀp₁ and Gᵀp₂ from Gᵀ1 and Gᵀa (p₁, p₂ are affine in a on M).
    gp1 = (s / D) * (S1 * ga - (Q + cfg.mu**2 * s) * g1)
    gp2 = (s / D) * (n * ga - c1 * g1)
    K = np.outer(g1, gp1) - np.outer(gr, gp2)
    H += 0.5 * (K + K.T)
    H.flat[:: d + 1] += cfg.lam
    return H


def _newton_step(H: FloatArray, g: FloatArray) -> FloatArray | None:
    """``−H⁻¹g`` by Cholesky; ``None`` when ``H`` is not positive definite."""
    try:
        L = np.linalg.cholesky(H)
    except np.linalg.LinAlgError:
        return None
    return -np.linalg.solve(L.T, np.linalg.solve(L, g))


def _trust_region_step(
    e: FloatArray, V: FloatArray, g: FloatArray, radius: float
) -> tuple[FloatArray, bool]:
    """``argmin gᵀs + ½sᵀHs`` over ``‖s‖ ≤ radius`` for ``H = V diag(e) Vᵀ``
    (``e`` ascending); ``(s, on_boundary)``.

    The Newton step if ``H ≻ 0`` and it fits; else ``s(ν) = −V (Vᵀg)/(e + ν)`` with
    ``ν > max(0, −e₁)`` the root of ``‖s(ν)‖ = radius`` (safeguarded Newton on
    ``1/‖s(ν)‖``, nearly linear in ``ν``), or, in the "hard case" where
    ``‖s(ν)‖ < radius`` as ``ν ↓ −e₁``, that limit plus a multiple of the lowest
    eigenvector (Moré & Sorensen 1983).
    """
    gt = V.T @ g
    if e[0] > 0.0:
        s = -gt / e
        if float(np.linalg.norm(s)) <= radius:
            return V @ s, False
    lo = max(0.0, -float(e[0]))
    tiny = 1e-14 * max(1.0, float(np.abs(e).max()))
    shifted = e + lo
    keep = shifted > tiny
    if not keep.all():
        base = np.zeros_like(gt)
        base[keep] = -gt[keep] / shifted[keep]
        nb = float(np.linalg.norm(base))
        if nb <= radius and float(np.abs(gt[~keep]).max()) <= tiny * (
            1.0 + float(np.abs(gt).max())
        ):
            # Hard case: fill up to the radius along the lowest eigenvector.
            base[0] += math.sqrt(max(radius * radius - nb * nb, 0.0))
            return V @ base, True
    a, b = lo, lo + float(np.linalg.norm(g)) / radius  # ‖s(b)‖ ≤ radius
    nu = b
    for _ in range(100):
        q = gt / np.maximum(e + nu, tiny)
        sn = float(np.linalg.norm(q))
        if sn > radius:
            a = nu
        else:
            b = nu
        if abs(sn - radius) <= 1e-10 * radius or not a < b:
            break
        # Newton on φ(ν) = 1/‖s(ν)‖ − 1/radius: φ' = Σ q_i²/(e_i + ν) / ‖s‖³.
        dphi = float(q @ (q / np.maximum(e + nu, tiny))) / sn**3
        step = nu - (1.0 / sn - 1.0 / radius) / dphi if dphi > 0.0 else math.nan
        nu = step if a < step < b else 0.5 * (a + b)
        if not a < nu < b:
            nu = b
            break
    return V @ (-gt / np.maximum(e + nu, tiny)), True


def _rounding_accept(
    prob: Problem, eta: float, p: _Point, q: _Point, pred: float, gnorm: float
) -> bool:
    """Accept a step whose predicted decrease is below ``F``'s rounding.

    Near the minimiser the predicted decrease can fall under ``ε_mach·|F|``; the ratio
    test then rejects every step on rounding noise and shrinking ``Δ`` only makes
    no-progress steps (this ran 500 iterations, ~30 evaluations each, at
    ``‖∇F‖ ≈ 1e-8 > gtol``). Accept the step instead when ``F`` did not rise beyond
    rounding and ``‖∇F‖`` shrank.
    """
    scale = 1.0 + abs(p.value)
    if -pred > 1e-12 * scale or q.value > p.value + 1e-13 * scale:
        return False
    return float(np.linalg.norm(_gradient(prob, eta, q))) < gnorm


def newton_reduced(
    prob: Problem,
    eta: float,
    *,
    w0: FloatArray,
    state: WeightsStepState | None,
    gtol: float,
    max_iter: int,
    a0: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, WeightsStepState | None, int, bool, float]:
    """Minimise ``F``; return ``(w, a*(w), state, iterations, converged, F(w))``.

    ``state`` (or, without one, the nearby weights ``a0``) warm-starts the a-step.
    Trust-region Newton on the exact ``∇²F`` (module docstring); the radius starts
    unbounded (a plain Newton step wherever ``∇²F ≻ 0``) and is first set, to
    ``‖∇F‖/max|eig ∇²F|``, at the first indefinite Hessian or rejected step.

    Converged means ``‖∇F(w)‖ ≤ gtol·(1 + ‖w‖)``, i.e. both block KKT conditions hold
    (``a = a*(w)`` exactly, and ``∇_w G(w, a) = ∇F(w)``).
    """
    p = _evaluate(prob, eta, np.asarray(w0, dtype=float), state, a0)
    radius = math.inf
    for it in range(max_iter + 1):
        g = _gradient(prob, eta, p)
        gnorm = float(np.linalg.norm(g))
        if gnorm <= gtol * (1.0 + float(np.linalg.norm(p.w))):
            return p.w, p.a, p.state, it, True, p.value
        if it == max_iter:
            break
        H = _hessian(prob, eta, p)
        eig: tuple[FloatArray, FloatArray] | None = None
        while True:
            newton = _newton_step(H, g) if math.isinf(radius) else None
            if newton is not None:
                step, boundary = newton, False
            else:
                if eig is None:
                    eig = np.linalg.eigh(H)
                if math.isinf(radius):  # indefinite: the model needs a bound
                    radius = gnorm / max(float(np.abs(eig[0]).max()), 1e-300)
                step, boundary = _trust_region_step(*eig, g, radius)
            pred = float(g @ step) + 0.5 * float(step @ (H @ step))
            q = _evaluate(prob, eta, p.w + step, p.state)
            actual = q.value - p.value
            rho = actual / pred if pred < 0.0 and math.isfinite(actual) else -math.inf
            snorm = float(np.linalg.norm(step))
            if rho < 0.25:
                radius = 0.25 * snorm
            elif rho > 0.75 and boundary:
                radius = 2.0 * radius
            if rho > ACCEPT or _rounding_accept(prob, eta, p, q, pred, gnorm):
                break
            if radius <= 1e-12 * (1.0 + float(np.linalg.norm(p.w))):
                # No representable descent: F is flat here to machine precision.
                return p.w, p.a, p.state, it, False, p.value
        p = q
    return p.w, p.a, p.state, max_iter, False, p.value
