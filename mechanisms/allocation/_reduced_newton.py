"""Newton's method on the reduced objective ``F(w) = min_a G(w, a, η)`` (fixed ``η``).

With linear ``u`` and ``μ > 0`` the a-block minimiser ``a*(w)`` is unique and, on a fixed
active set, an explicit function of ``r = ℓ(w) + γηΨ`` (see
:mod:`mechanisms.allocation._weights_step`). So ``F`` is differentiable (Danskin) with

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

With ``μ = 0`` (the default mode only; :func:`._block_solver.solve_at_eta`) the a-step is
the linear programme "fill the smallest ``r_i`` up to their caps" (ties by index), so
``a*(w)`` is piecewise constant and ``F = min_a Σ a_i r_i(w) + λ‖w‖²/2`` is a minimum of
smooth functions, one per vertex ``a``: off the ties ``∇F`` is the formula above and
``∇²F = H_w`` (``∂a/∂r = 0``; there is no free set). Its kinks are concave (a minimum
of smooth pieces), so a local minimiser is a stationary point of the piece active there
(if two pieces are active, each gradient is zero on every direction) and a trust-region
step across a kink only lowers ``F`` further; the method runs unchanged, and replaces
the alternation of LP and weighted-ridge steps (the DC sweeps), which needed five
weighted logistic fits per candidate model on Wisconsin (``benchmarks/RESULTS.md``).

When ``∇²F`` is not positive definite (``λ ≤ λ_conv``, the default rule's candidate
models), ``F`` has directions of negative curvature, and its minimisers can sit at the
end of long, nearly flat valleys. The step is therefore a **trust-region** Newton step on the exact
``∇²F``: ``min gᵀs + ½sᵀ∇²F s`` over ``‖s‖ ≤ Δ`` (Moré–Sorensen, solved exactly from
Cholesky factorisations of ``∇²F + νI``, or from the eigendecomposition of the
``d × d`` matrix in the hard case), with ``Δ`` grown while the model
predicts ``F``'s decrease and shrunk when it does not (Nocedal & Wright, Alg. 4.1).
Where ``∇²F`` is positive definite and the Newton step fits, it *is* the Newton step,
so convergence stays quadratic. (The earlier fallback, a DC step on the w-block Hessian
alone, crawls along such a valley with a fixed step ``H_w⁻¹∇F``: 122 steps at
``m = 10⁵``, 492 at ``2·10⁵`` for the cost-free model; ``benchmarks/RESULTS.md``,
"Allocation constant factors".) A step is accepted when ``F`` falls by at least ``10⁻⁴`` of the
predicted decrease, so every accepted step is a descent step. ``w`` has only ``d``
entries, so this needs a handful of O(m d²) passes where the plain block alternation
needs hundreds of sweeps when the weights are selective.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._logistic_kernel import logistic_pass as _logistic_pass
from mechanisms.allocation._logistic_kernel import logistic_value_slope
from mechanisms.allocation._problem import Problem
from mechanisms.allocation._weights_kernel import (
    _equal_cap,
    _jit,
    caps_exceed_one,
    clip_weights_counted,
    kernel_array,
    weights_kernel_sums,
)
from mechanisms.allocation._weights_step import (
    WeightsStepState,
    solve_weights_compiled,
    state_from_weights,
)

FloatArray = NDArray[np.float64]

ACCEPT = 1e-4  # accept a step when F falls by this fraction of the predicted decrease


def _norm(v: FloatArray) -> float:
    """``‖v‖₂`` as :func:`numpy.linalg.norm` computes it (``sqrt(v·v)``, the same
    rounding) without its per-call overhead (~5 µs, thousands of calls per solve)."""
    return math.sqrt(float(v @ v))


@dataclass(eq=False, slots=True)  # not frozen: built per evaluation (~1 µs less)
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


def _evaluate(
    prob: Problem,
    eta: float,
    w: FloatArray,
    state: WeightsStepState | None,
    caps: FloatArray,
    a0: FloatArray | None = None,
) -> _Point:
    """``F`` at ``w`` (``caps = prob.caps(eta)``); the a-step warm-starts from
    ``state``, else from ``a0``.

    The logistic loss with a warm (or cold) multiplier state takes one compiled pass
    (:func:`_logistic_point`: loss, a-step and ``F``); the a-step's NumPy solver
    finishes where the kernel declines (non-finite ``r``, forced caps, ``μ = 0``)."""
    w = kernel_array(w)  # e.g. a result's read-only weights (a re-solve's start)
    cfg = prob.cfg
    q = cfg.gamma * eta
    c = prob.linear_term(eta)
    const = cfg.sigma / eta
    known = _known_losses(prob, w) if cfg.loss == "logistic" else None
    if cfg.loss == "logistic" and (state is not None or a0 is None):
        A0, s0 = (state.A, state.s) if state is not None else (0.0, 0.0)
        if known is not None:
            z, losses, dl, d2 = known
            r = losses + q * prob.psi
            ok, a, A, s, value = _point_from_r(
                r, caps, cfg.mu, A0, s0, w, cfg.lam, const
            )
        else:
            z = prob.X @ w
            ok, losses, dl, d2, r, a, A, s, value = _logistic_point(
                z, prob.y, q, prob.psi, caps, cfg.mu, A0, s0, w, cfg.lam, const
            )
        if ok:
            if c is not None:
                value += float(c @ w)
            return _Point(w, z, losses, dl, d2, r, a, WeightsStepState(A, s), value)
    elif known is not None:
        z, losses, dl, d2 = known
        r = losses + q * prob.psi
    elif cfg.loss == "logistic":
        z = prob.X @ w
        losses, dl, d2, r = _logistic_pass(z, prob.y, q, prob.psi)
    else:
        z = prob.X @ w
        loss = prob.loss
        losses, dl, d2 = loss.value(z, prob.y), loss.derivative(z, prob.y), None
        r = losses + q * prob.psi
    if state is None and a0 is not None:
        state = state_from_weights(a0, r, caps, cfg.mu)
    a, new_state = solve_weights_compiled(r, caps, cfg.mu, state)
    value = float(a @ r) + 0.5 * cfg.lam * float(w @ w) + cfg.mu * _norm(a) + const
    if c is not None:
        value += float(c @ w)
    return _Point(w, z, losses, dl, d2, r, a, new_state, value)


_LAST_LOSSES: list[tuple[Any, Any, FloatArray, tuple[FloatArray, ...]] | None] = [None]
"""The last solve's final point's ``(Xw, ℓ, ℓ', ℓ'')`` (logistic loss), by its
records (weak references) and a copy of ``w``: the next solve from that ``w`` (the η
polish's, at another ``η``; a payment re-solve's, at other virtual costs) skips the
product ``Xw`` and the loss pass, which depend on neither. One entry, replaced
whole, so threads at worst recompute."""


def _known_losses(prob: Problem, w: FloatArray) -> tuple[FloatArray, ...] | None:
    """``(Xw, ℓ, ℓ', ℓ'')`` of :data:`_LAST_LOSSES` if it holds these records and
    ``w``, else ``None``."""
    hit = _LAST_LOSSES[0]
    if hit is None or hit[0]() is not prob.X or hit[1]() is not prob.y:
        return None
    if hit[2].tobytes() != w.tobytes():  # the same bits (a -0.0 only recomputes)
        return None
    return hit[3]


def _remember_losses(prob: Problem, p: _Point) -> None:
    if prob.cfg.loss == "logistic" and p.d2 is not None:
        entry = (p.z, p.losses, p.dl, p.d2)
        _LAST_LOSSES[0] = (weakref.ref(prob.X), weakref.ref(prob.y), p.w.copy(), entry)


@_jit
def _logistic_point(
    z: FloatArray,
    y: FloatArray,
    q: float,
    psi: FloatArray,
    h: FloatArray,
    mu: float,
    A0: float,
    s0: float,
    w: FloatArray,
    lam: float,
    const: float,
) -> tuple[
    bool, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, float, float, float
]:
    """One evaluation of ``F`` for the logistic loss in one compiled call:
    ``(ok, ℓ, ℓ', ℓ'', r, a, A, s, F)`` with :func:`_logistic_pass`'s loss pass, the
    a-step kernel (:func:`weights_kernel` warm from ``(A0, s0)``, cold when
    ``s0 = 0``) and ``F = ⟨r, a⟩ + λ‖w‖²/2 + μ‖a‖ + const``. Not ok (``a`` empty)
    where the kernel declines or does not apply (``μ = 0``, ``Σ h ≤ 1``): the caller
    solves the a-step with NumPy."""
    val, d1, d2, r = _logistic_pass(z, y, q, psi)
    ok, a, A, s, value = _point_from_r(r, h, mu, A0, s0, w, lam, const)
    return ok, val, d1, d2, r, a, A, s, value


@_jit
def _point_from_r(
    r: FloatArray,
    h: FloatArray,
    mu: float,
    A0: float,
    s0: float,
    w: FloatArray,
    lam: float,
    const: float,
) -> tuple[bool, FloatArray, float, float, float]:
    """The a-step and ``F`` of :func:`_logistic_point` from ``r = ℓ + qΨ``:
    ``(ok, a, A, s, F)``; not ok (``a`` empty) where the kernel declines or does not
    apply (``μ = 0``, ``Σ h ≤ 1``)."""
    empty = np.empty(0)
    c = _equal_cap(h)
    if not (mu > 0.0 and caps_exceed_one(h, c)):
        return False, empty, 0.0, 0.0, 0.0
    ok, A, s, tot, n_free = weights_kernel_sums(r, h, c, mu, A0, s0)
    if not ok:
        return False, empty, 0.0, 0.0, 0.0
    a = clip_weights_counted(A, s, r, h, tot, n_free)
    lin = 0.0
    sq = 0.0
    for i in range(a.size):
        lin += a[i] * r[i]
        sq += a[i] * a[i]
    ww = 0.0
    for j in range(w.size):
        ww += w[j] * w[j]
    value = lin + 0.5 * lam * ww + mu * math.sqrt(sq) + const
    return True, a, A, s, value


def _gradient(prob: Problem, eta: float, p: _Point) -> FloatArray:
    """``∇F(w) = Xᵀ(a ⊙ ℓ') + λw (+ c)`` (module docstring)."""
    g = _weighted_gradient(prob.X, p.a, p.dl, prob.cfg.lam, p.w)
    c = prob.linear_term(eta)
    return g if c is None else g + c


@_jit
def _weighted_gradient(
    X: FloatArray, a: FloatArray, dl: FloatArray, lam: float, w: FloatArray
) -> FloatArray:
    """``Xᵀ(a ⊙ ℓ') + λw`` over the rows with ``a_i ≠ 0`` only (in one compiled
    pass; the NumPy form took three array operations, ~10 µs at 399 records)."""
    d = w.size
    g = np.empty(d)
    for j in range(d):
        g[j] = lam * w[j]
    for i in range(a.size):
        c = a[i] * dl[i]
        if c != 0.0:
            for j in range(d):
                g[j] += c * X[i, j]
    return g


GRAM_BLOCK_BYTES = 512 * 1024
"""Target size of the Hessian's gathered block (``rows·(2d + 3)`` floats): about a
quarter of a 2 MiB L2, so the two buffers stay cached between the gather and the GEMM.
Measured on a 2 MiB-L2 Xeon at ``m = 10⁴, d = 20``: 8,192-row blocks (4.4 MB) took
1.0 ms a Gram product, 1,524-row blocks (this size) 0.52 ms; BLAS's own GEMM on the
8,192-row operands ran at 18 GFlop/s, on 2,048 rows at 40."""

GRAM_BLOCK_MIN, GRAM_BLOCK_MAX = 1024, 8192  # rows; a GEMM's depth below that is slow


@_jit
def gram_block_rows(m: int, d: int) -> int:
    """Rows per block of :func:`_weighted_gram`: ``GRAM_BLOCK_BYTES`` of ``2d + 3``
    floats per row, within ``[GRAM_BLOCK_MIN, GRAM_BLOCK_MAX]``, at most ``m``."""
    rows = GRAM_BLOCK_BYTES // (8 * (2 * d + 3))
    return min(m, max(GRAM_BLOCK_MIN, min(GRAM_BLOCK_MAX, rows)))


@_jit
def _hessian_block(
    X: FloatArray,
    lo: int,
    hi: int,
    a: FloatArray,
    d2: FloatArray,
    dl: FloatArray,
    r: FloatArray,
    h: FloatArray,
    A: float,
    s: float,
    with_free: bool,
    Xb: FloatArray,
    Ob: FloatArray,
    sums: FloatArray,
) -> int:
    """Gather the rows ``lo ≤ i < hi`` with ``a_i > 0`` into ``Xb`` and, next to them
    in ``Ob``, the rows scaled by the Hessian weight and the columns ``G_i·(1, r_i,
    a_i)``; return their number (one pass over the block, no masked copies).

    The weight is ``a_i ℓ''_i``, minus ``s ℓ'_i²`` on the free set ``M`` (``0 < A −
    s r_i < h_i``) when ``with_free``; ``G_i = ℓ'_i`` on ``M``, else 0. Rows with
    ``a_i = 0`` carry neither (``M ⊆ {a > 0}``). ``sums += (Σ_M r, Σ_M a, Σ_M a r,
    |M|)``.
    """
    d = X.shape[1]
    n = 0
    for i in range(lo, hi):
        if not a[i] > 0.0:
            continue
        wt = a[i] * d2[i]
        g = 0.0
        if with_free:
            v = A - s * r[i]
            if v > 0.0 and v < h[i]:
                g = dl[i]
                wt -= s * g * g
                sums[0] += r[i]
                sums[1] += a[i]
                sums[2] += a[i] * r[i]
                sums[3] += 1.0
            Ob[n, d] = g
            Ob[n, d + 1] = g * r[i]
            Ob[n, d + 2] = g * a[i]
        for j in range(d):
            x = X[i, j]
            Xb[n, j] = x
            Ob[n, j] = x * wt
        n += 1
    return n


def _hessian(prob: Problem, eta: float, p: _Point, caps: FloatArray) -> FloatArray:
    """The exact ``∇²F = H_w + sym(J)`` (module docstring), ``H_w = Σ a_i ℓ''_i x_i x_iᵀ
    + λI`` alone when the free set is empty.

    ``−s GᵀG`` of ``J`` is folded into the weighted Gram product (weights
    ``a_i ℓ''_i − s ℓ'_i²`` on the free set ``M``); the rank-two part needs ``Gᵀ1``,
    ``Gᵀr`` and ``Gᵀa`` (``p₁``, ``p₂`` are combinations of ``1`` and ``a``), three
    columns of the same product. Rows are taken in blocks (:func:`gram_block_rows`):
    the rows with ``a_i > 0`` (on ~36 % of the records when the caps ``k/m`` bind)
    are gathered and scaled by :func:`_hessian_block` into two reused buffers and
    multiplied into the ``d × (d + 3)`` accumulator, one GEMM per block, so every row
    of ``X`` is read once and the extra memory is about ``GRAM_BLOCK_BYTES``.
    """
    cfg = prob.cfg
    X = prob.X
    d2 = prob.loss.curvature(p.z, prob.y) if p.d2 is None else p.d2
    A, s = (p.state.A, p.state.s) if p.state is not None else (0.0, 0.0)
    mu2, lam = cfg.mu**2, cfg.lam
    if p.state is not None:
        acc, sums = _weighted_gram(X, p.a, d2, p.dl, p.r, caps, A, s, True)
        ok, H = _assemble_hessian(acc, sums, s, mu2, lam)
        if ok:
            return H
        # degenerate (D = 0 on a non-empty free set): drop the a-sensitivity term
    acc, sums = _weighted_gram(X, p.a, d2, p.dl, p.r, caps, A, s, False)
    return _assemble_hessian(acc, sums, s, mu2, lam)[1]


@_jit
def _assemble_hessian(
    acc: FloatArray, sums: FloatArray, s: float, mu2: float, lam: float
) -> tuple[bool, FloatArray]:
    """``∇²F`` from the Gram accumulator ``acc = [Σ w_i x_i x_iᵀ | Xᵀ(G, Gr, Ga)]``
    (the last three columns only with the free-set term) and the free-set sums
    ``(S₁, c₁, Q, |M|)``: ``H_w − sGᵀG + sym(Gᵀ1 (Gᵀp₁)ᵀ − Gᵀr (Gᵀp₂)ᵀ) + λI`` with
    ``Gᵀp₁ = (s/D)(S₁ Gᵀa − (Q + μ²s) Gᵀ1)``, ``Gᵀp₂ = (s/D)(|M| Gᵀa − c₁ Gᵀ1)``
    (``p₁``, ``p₂`` are affine in ``a`` on ``M``; module docstring). ``(False, ·)``
    when ``D = S₁c₁ − |M|(Q + μ²s) = 0`` on a non-empty free set."""
    d = acc.shape[0]
    H = np.empty((d, d))
    for i in range(d):
        for j in range(d):
            H[i, j] = acc[i, j]
    n = sums[3]
    if acc.shape[1] > d and n > 0.0:
        S1, c1, Q = sums[0], sums[1], sums[2]
        D = S1 * c1 - n * (Q + mu2 * s)
        if D == 0.0:
            return False, H
        gp1 = np.empty(d)
        gp2 = np.empty(d)
        for i in range(d):
            g1, ga = acc[i, d], acc[i, d + 2]
            gp1[i] = (s / D) * (S1 * ga - (Q + mu2 * s) * g1)
            gp2[i] = (s / D) * (n * ga - c1 * g1)
        for i in range(d):
            for j in range(d):
                kij = acc[i, d] * gp1[j] - acc[i, d + 1] * gp2[j]
                kji = acc[j, d] * gp1[i] - acc[j, d + 1] * gp2[i]
                H[i, j] += 0.5 * (kij + kji)
    for i in range(d):
        H[i, i] += lam
    return True, H


@_jit
def _weighted_gram(
    X: FloatArray,
    a: FloatArray,
    d2: FloatArray,
    dl: FloatArray,
    r: FloatArray,
    caps: FloatArray,
    A: float,
    s: float,
    with_free: bool,
) -> tuple[FloatArray, FloatArray]:
    """``([Σ w_i x_i x_iᵀ | Xᵀ(G, Gr, Ga)], free-set sums)`` of :func:`_hessian`
    (the three columns only ``with_free``), one GEMM per block of rows."""
    m, d = X.shape
    k = 3 if with_free else 0
    block = gram_block_rows(m, d)
    Xb = np.empty((block, d))
    Ob = np.empty((block, d + k))
    acc = np.zeros((d, d + k))
    sums = np.zeros(4)
    for lo in range(0, m, block):
        hi = min(lo + block, m)
        n = _hessian_block(X, lo, hi, a, d2, dl, r, caps, A, s, with_free, Xb, Ob, sums)
        if n:
            acc += np.dot(Xb[:n].T, Ob[:n])
    return acc, sums


@_jit
def _shifted_cholesky(H: FloatArray, nu: float, L: FloatArray) -> bool:
    """``H + νI = LLᵀ`` into ``L`` (lower triangle); ``False`` at a non-positive pivot."""
    d = H.shape[0]
    for j in range(d):
        acc = H[j, j] + nu
        for k in range(j):
            acc -= L[j, k] * L[j, k]
        if not acc > 0.0:
            return False
        L[j, j] = math.sqrt(acc)
        for i in range(j + 1, d):
            acc = H[i, j]
            for k in range(j):
                acc -= L[i, k] * L[j, k]
            L[i, j] = acc / L[j, j]
    return True


@_jit
def _lower_solve(L: FloatArray, b: FloatArray, out: FloatArray) -> None:
    """``L out = b`` (forward substitution; ``out`` is not ``b``)."""
    for i in range(b.size):
        acc = b[i]
        for k in range(i):
            acc -= L[i, k] * out[k]
        out[i] = acc / L[i, i]


@_jit
def _upper_solve(L: FloatArray, b: FloatArray, out: FloatArray) -> None:
    """``Lᵀ out = b`` (back substitution; ``out`` may be ``b``)."""
    for i in range(b.size - 1, -1, -1):
        acc = b[i]
        for k in range(i + 1, b.size):
            acc -= L[k, i] * out[k]
        out[i] = acc / L[i, i]


@_jit
def _cholesky_solve(H: FloatArray, g: FloatArray) -> tuple[bool, FloatArray]:
    """``(True, H⁻¹g)`` by the Cholesky factorisation ``H = LLᵀ`` (column by column,
    then the two triangular solves); ``(False, ·)`` when a pivot is not positive, i.e.
    ``H`` is not (numerically) positive definite. ``d × d`` with ``d`` in the tens:
    compiled, this is a few microseconds where three LAPACK calls through NumPy cost
    ~0.1 ms (most of the Newton step's time on small instances)."""
    d = g.size
    L = np.zeros((d, d))
    x = np.empty(d)
    if not _shifted_cholesky(H, 0.0, L):
        return False, x
    _lower_solve(L, g, x)  # L u = g
    _upper_solve(L, x, x)  # Lᵀ x = u
    return True, x


def _newton_step(H: FloatArray, g: FloatArray) -> FloatArray | None:
    """``−H⁻¹g`` by Cholesky; ``None`` when ``H`` is not positive definite."""
    ok, x = _cholesky_solve(H, g)
    return -x if ok else None


def _trust_region_step(
    e: FloatArray, V: FloatArray, g: FloatArray, radius: float
) -> tuple[FloatArray, bool]:
    """``argmin gᵀs + ½sᵀHs`` over ``‖s‖ ≤ radius`` for ``H = V diag(e) Vᵀ``
    (``e`` ascending); ``(s, on_boundary)``.

    The Newton step if ``H ≻ 0`` and it fits; else ``s(ν) = −V (Vᵀg)/(e + ν)`` with
    ``ν > max(0, −e₁)`` the root of ``‖s(ν)‖ = radius`` (safeguarded Newton on
    ``1/‖s(ν)‖``, nearly linear in ``ν``), or, in the "hard case" where
    ``‖s(ν)‖ < radius`` as ``ν ↓ −e₁``, that limit plus a multiple of the lowest
    eigenvector (Moré & Sorensen 1983). Compiled (:func:`_trust_region_kernel`): the
    root search takes up to tens of vector operations on ``d`` entries, each a few
    microseconds through NumPy.
    """
    boundary, step = _trust_region_kernel(e, V, g, float(radius))
    return step, boundary


@_jit
def _dot(u: FloatArray, v: FloatArray) -> float:
    acc = 0.0
    for i in range(u.size):
        acc += u[i] * v[i]
    return acc


@_jit
def _rotate(V: FloatArray, c: FloatArray) -> FloatArray:
    """``V c`` (``d × d`` by ``d``)."""
    d = c.size
    out = np.zeros(d)
    for j in range(d):
        cj = c[j]
        for i in range(d):
            out[i] += V[i, j] * cj
    return out


@_jit
def _trust_region_kernel(
    e: FloatArray, V: FloatArray, g: FloatArray, radius: float
) -> tuple[bool, FloatArray]:
    """:func:`_trust_region_step` as ``(on_boundary, s)``."""
    d = g.size
    gt = np.empty(d)  # Vᵀg
    for j in range(d):
        acc = 0.0
        for i in range(d):
            acc += V[i, j] * g[i]
        gt[j] = acc
    q = np.empty(d)
    if e[0] > 0.0:
        for j in range(d):
            q[j] = -gt[j] / e[j]
        if math.sqrt(_dot(q, q)) <= radius:
            return False, _rotate(V, q)
    lo = max(0.0, -e[0])
    e_max = 0.0
    g_max = 0.0
    for j in range(d):
        e_max = max(e_max, abs(e[j]))
        g_max = max(g_max, abs(gt[j]))
    tiny = 1e-14 * max(1.0, e_max)
    n_drop = 0
    drop_max = 0.0
    for j in range(d):
        sh = e[j] + lo
        if sh > tiny:
            q[j] = -gt[j] / sh
        else:
            q[j] = 0.0
            n_drop += 1
            drop_max = max(drop_max, abs(gt[j]))
    if n_drop > 0:
        nb = math.sqrt(_dot(q, q))
        if nb <= radius and drop_max <= tiny * (1.0 + g_max):
            # Hard case: fill up to the radius along the lowest eigenvector.
            q[0] += math.sqrt(max(radius * radius - nb * nb, 0.0))
            return True, _rotate(V, q)
    a, b = lo, lo + math.sqrt(_dot(g, g)) / radius  # ‖s(b)‖ ≤ radius
    nu = b
    for _ in range(100):
        for j in range(d):
            q[j] = gt[j] / max(e[j] + nu, tiny)
        sn = math.sqrt(_dot(q, q))
        if sn > radius:
            a = nu
        else:
            b = nu
        if abs(sn - radius) <= 1e-10 * radius or not a < b:
            break
        # Newton on φ(ν) = 1/‖s(ν)‖ − 1/radius: φ' = Σ q_i²/(e_i + ν) / ‖s‖³.
        acc = 0.0
        for j in range(d):
            acc += q[j] * (q[j] / max(e[j] + nu, tiny))
        dphi = acc / sn**3
        step = nu - (1.0 / sn - 1.0 / radius) / dphi if dphi > 0.0 else math.nan
        nu = step if a < step < b else 0.5 * (a + b)
        if not a < nu < b:
            nu = b
            break
    for j in range(d):
        q[j] = -gt[j] / max(e[j] + nu, tiny)
    return True, _rotate(V, q)


@_jit
def _trust_region_factored(
    H: FloatArray, g: FloatArray, radius: float
) -> tuple[bool, bool, FloatArray]:
    """``(ok, on_boundary, s)``: the trust-region step of :func:`_trust_region_step`
    from Cholesky factorisations of ``H + νI`` alone (Moré & Sorensen 1983; Nocedal &
    Wright, Alg. 4.3), no eigendecomposition.

    ``ν`` is bracketed by Gershgorin bounds on the spectrum ``[λ₋, λ₊]`` of ``H``:
    ``‖s(ν)‖ = radius`` needs ``‖g‖/radius − λ₊ ≤ ν ≤ ‖g‖/radius − λ₋`` and
    ``ν ≥ −min H_ii``. Each factorisation either fails (``ν < −λ_min``: raise the lower
    end) or gives ``s(ν) = −(H + νI)⁻¹g``, which moves the end on its side of the root;
    the next ``ν`` is the Newton step on ``1/radius − 1/‖s(ν)‖`` (``ν + (‖s‖/‖q‖)²
    (‖s‖ − radius)/radius``, ``q = L⁻¹s``) when it falls inside the bracket, else the
    bracket's geometric mean. Stops at ``|‖s‖ − radius| ≤ 10⁻¹⁰ radius`` (the
    eigendecomposition's root test); ``ν = 0`` is tried first when it may be the
    answer (``s`` inside the ball). Not ok when the bracket collapses first — the "hard
    case", where ``g`` misses the lowest eigenvector and ``‖s(ν)‖ < radius`` down to
    ``ν = −λ_min`` — or ``g = 0``: the caller takes the eigendecomposition's step. A
    factorisation costs ``d³/3`` flops (a few µs at ``d = 31``), a LAPACK
    eigendecomposition ~150 µs.
    """
    d = g.size
    s = np.zeros(d)
    gnorm = math.sqrt(_dot(g, g))
    if not (gnorm > 0.0 and radius > 0.0 and math.isfinite(radius)):
        return False, False, s
    lam_lo = math.inf
    lam_hi = -math.inf
    diag_min = math.inf
    for i in range(d):
        off = 0.0
        for j in range(d):
            if j != i:
                off += abs(H[i, j])
        lam_lo = min(lam_lo, H[i, i] - off)
        lam_hi = max(lam_hi, H[i, i] + off)
        diag_min = min(diag_min, H[i, i])
    lo = max(0.0, -diag_min, gnorm / radius - lam_hi)
    hi = max(lo, gnorm / radius - lam_lo)
    nu = lo
    L = np.zeros((d, d))
    q = np.empty(d)
    neg_g = -g
    for _ in range(100):
        if not lo <= nu <= hi:
            nu = max(math.sqrt(lo * hi), lo + 1e-3 * (hi - lo))
        if not _shifted_cholesky(H, nu, L):
            lo = max(lo, nu)
            if not hi - lo > 1e-13 * max(1.0, hi):
                return False, False, s
            nu = max(math.sqrt(lo * hi), lo + 1e-3 * (hi - lo))
            continue
        _lower_solve(L, neg_g, q)  # L q = −g, then Lᵀ s = q
        _upper_solve(L, q, s)
        sn = math.sqrt(_dot(s, s))
        if nu == 0.0 and sn <= radius:
            return True, False, s.copy()  # the Newton step fits
        if abs(sn - radius) <= 1e-10 * radius:
            return True, True, s.copy()
        if sn < radius:
            hi = nu
        else:
            lo = nu
        if not hi - lo > 1e-13 * max(1.0, hi):
            return False, False, s
        _lower_solve(L, s, q)  # q = L⁻¹s
        qn2 = _dot(q, q)
        step = nu + (sn * sn / qn2) * (sn - radius) / radius if qn2 > 0.0 else -1.0
        nu = step if lo < step < hi else max(math.sqrt(lo * hi), lo + 1e-3 * (hi - lo))
    return False, False, s


class _Model:
    """The quadratic model ``gᵀs + ½sᵀHs`` of one iteration and its trust-region
    steps: by factorisations (:func:`_trust_region_factored`) while they succeed,
    else (and from then on) by the eigendecomposition, computed at most once."""

    def __init__(self, H: FloatArray, g: FloatArray) -> None:
        self.H = H
        self.g = g
        self.eig: tuple[FloatArray, FloatArray] | None = None

    def eigen(self) -> tuple[FloatArray, FloatArray]:
        if self.eig is None:
            self.eig = np.linalg.eigh(self.H)
        return self.eig

    def step(self, radius: float) -> tuple[FloatArray, bool]:
        """``(s, on_boundary)`` of ``min gᵀs + ½sᵀHs`` over ``‖s‖ ≤ radius``."""
        if self.eig is None:
            ok, boundary, s = _trust_region_factored(self.H, self.g, float(radius))
            if ok:
                return s, boundary
        return _trust_region_step(*self.eigen(), self.g, radius)


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
    return _norm(_gradient(prob, eta, q)) < gnorm


@_jit
def _kernel_rounding_accept(
    X: FloatArray,
    lam: float,
    value: float,
    pred: float,
    gnorm: float,
    wq: FloatArray,
    aq: FloatArray,
    dlq: FloatArray,
    vq: float,
) -> bool:
    """:func:`_rounding_accept` in the compiled loop: the trial point ``(wq, aq)``
    (value ``vq``, slopes ``dlq``) is accepted where the predicted decrease ``pred``
    is under ``F``'s rounding, ``F`` did not rise beyond it and ``‖∇F‖`` shrank
    below ``gnorm``."""
    scale = 1.0 + abs(value)
    if -pred > 1e-12 * scale or vq > value + 1e-13 * scale:
        return False
    gq = _weighted_gradient(X, aq, dlq, lam, wq)
    return bool(math.sqrt(np.dot(gq, gq)) < gnorm)


NEWTON_CONVERGED, NEWTON_HANDOFF, NEWTON_MAX_ITER, NEWTON_FLAT = 0, 1, 2, 3

FROZEN_ACCEPT = 0.25
"""A step on a frozen Hessian is taken when ``F`` falls by more than this fraction of
the decrease its model predicts (the ratio at which the trust region would shrink)."""

FROZEN_CONTRACTION = 0.1
"""Chord steps on a frozen Hessian continue while each accepted one shrinks ``‖∇F‖``
at least this much; after one that does not, the exact ``∇²F`` takes over."""

NO_HESSIAN = np.empty((0, 0))
"""The compiled kernels' "no frozen Hessian" (:func:`kernel_hessian`)."""


def kernel_hessian(hessian: FloatArray | None) -> FloatArray:
    """``hessian`` as the compiled kernels take it: a contiguous, writable float64
    ``d × d`` array, or :data:`NO_HESSIAN`."""
    if hessian is None:
        return NO_HESSIAN
    return kernel_array(hessian)


def _frozen_step(
    prob: Problem,
    eta: float,
    p: _Point,
    g: FloatArray,
    gnorm: float,
    hessian0: FloatArray,
    caps: FloatArray,
) -> _Point | None:
    """A chord step: the Newton step on a frozen Hessian ``H₀``.

    A payment re-solve raises one seller's ``Ψ_i`` and starts from the base's
    ``w``: there ``∇²F`` differs from the base's own Hessian ``H₀`` only through the
    a-step's response to one ``r_i`` (``O(1/m)`` of it), while forming ``∇²F`` is
    a weighted Gram product over all records, the largest cost of a re-solve at
    large ``m`` (:func:`_weighted_gram`). The step ``−H₀⁻¹∇F`` is taken when the
    ratio of ``F``'s actual to predicted decrease exceeds :data:`FROZEN_ACCEPT` (or
    where the predicted decrease is under ``F``'s rounding and ``‖∇F‖`` shrank, as
    :func:`_rounding_accept`); otherwise, or where ``H₀`` is not positive definite,
    ``None``, and the iteration runs on the exact ``∇²F`` as if this step had not
    been tried. :func:`newton_reduced` takes such steps from its first iteration
    while each accepted one shrinks ``‖∇F‖`` by :data:`FROZEN_CONTRACTION` (the
    chord method converges linearly, at a rate of about ``‖H₀⁻¹(∇²F − H₀)‖``: a few
    thousandths for one seller's change at ``m`` in the thousands, so two chord
    steps reach the tolerance a Newton step does, each one evaluation of ``F``
    instead of an evaluation and a Gram product). Convergence is still tested on
    the exact ``∇F``, so the solver stops where it would without ``H₀``, to the
    same tolerance."""
    step = _newton_step(hessian0, g)
    if step is None:
        return None
    pred = _predicted(g, hessian0, step)
    q = _evaluate(prob, eta, p.w + step, p.state, caps)
    if _ratio(q.value - p.value, pred) > FROZEN_ACCEPT or _rounding_accept(
        prob, eta, p, q, pred, gnorm
    ):
        return q
    return None


def hessian_at(
    prob: Problem, eta: float, w: FloatArray, a: FloatArray
) -> FloatArray:
    """``∇²F`` at ``w`` (fixed ``η``; the a-step warm from the weights ``a``): a
    base's Hessian, frozen for its payment re-solves (:func:`_frozen_step`)."""
    caps = prob.caps(eta)
    p = _evaluate(prob, eta, np.asarray(w, dtype=float), None, caps, np.asarray(a))
    return _hessian(prob, eta, p, caps)


@_jit
def _model_step(
    H: FloatArray,
    g: FloatArray,
    radius: float,
    have_eig: bool,
    e: FloatArray,
    V: FloatArray,
) -> tuple[bool, FloatArray, bool, FloatArray, FloatArray]:
    """:meth:`_Model.step` compiled: ``(on_boundary, s, have_eig, e, V)``, the
    factorised step while it succeeds, else (and from then on, ``have_eig``) the
    eigendecomposition ``H = V diag(e) Vᵀ``'s."""
    if not have_eig:
        ok, boundary, step = _trust_region_factored(H, g, radius)
        if ok:
            return boundary, step, have_eig, e, V
        e, V = np.linalg.eigh(H)
        have_eig = True
    boundary, step = _trust_region_kernel(e, V, g, radius)
    return boundary, step, have_eig, e, V


@_jit
def _trial(
    X: FloatArray,
    y: FloatArray,
    psi: FloatArray,
    q: float,
    caps: FloatArray,
    mu: float,
    lam: float,
    const: float,
    A: float,
    s: float,
    w: FloatArray,
    step: FloatArray,
    value: float,
    pred: float,
) -> tuple[
    bool, float, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray,
    FloatArray, FloatArray, float, float, float,
]:  # fmt: skip
    """The trial point ``w + step`` of :func:`_newton_kernel` (the a-step warm from
    the current ``(A, s)``) and :func:`_ratio` of its actual to predicted decrease:
    ``(ok, ρ, w, z, ℓ, ℓ', ℓ'', r, a, A, s, F)``; not ok where the a-step kernel
    declines."""
    wq = w + step
    zq = np.dot(X, wq)
    ok, lq, dlq, d2q, rq, aq, Aq, sq, vq = _logistic_point(
        zq, y, q, psi, caps, mu, A, s, wq, lam, const
    )
    actual = vq - value
    rho = actual / pred if pred < 0.0 and math.isfinite(actual) else -math.inf
    return ok, rho, wq, zq, lq, dlq, d2q, rq, aq, Aq, sq, vq


@_jit
def _newton_kernel(
    X: FloatArray,
    y: FloatArray,
    psi: FloatArray,
    q: float,
    caps: FloatArray,
    mu: float,
    lam: float,
    const: float,
    gtol: float,
    max_iter: int,
    w: FloatArray,
    z: FloatArray,
    losses: FloatArray,
    dl: FloatArray,
    d2: FloatArray,
    r: FloatArray,
    a: FloatArray,
    A: float,
    s: float,
    value: float,
    H0: FloatArray,
) -> tuple[
    int, int, float, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray,
    FloatArray, FloatArray, float, float, float, FloatArray,
]:  # fmt: skip
    """The iterations of :func:`newton_reduced` in one compiled call (the logistic
    loss with the compiled a-step, ``μ > 0``, no extrapolation). ``H0``: a frozen
    Hessian for chord steps from the first iteration (:func:`_frozen_step`), or a
    ``0 × 0`` array.

    The same operations as the Python loop, in the same order: the gradient and its
    test, ``∇²F`` (:func:`_weighted_gram`, :func:`_assemble_hessian`), the
    Newton step where it fits the radius, else the trust-region step (the first
    radius from the eigenvalues, :func:`_model_step`), the trial point
    (:func:`_logistic_point`), the ratio test, the radius update and the internal
    doubling. It returns ``(code, iterations, radius, point…, ∇F)``: converged; at
    ``max_iter``; flat (a rejected step whose shrunken radius is below
    ``10⁻¹²(1 + ‖w‖)``, where the loop gives up); or, where the a-step kernel
    declines a trial point, a hand-off to the Python loop at the start of that
    iteration (point and radius), which then repeats it with the NumPy a-step.
    """
    mu2 = mu * mu
    radius = math.inf
    it = 0
    frozen = H0.shape[0] == w.size
    prev_gnorm = math.inf
    while True:
        g = _weighted_gradient(X, a, dl, lam, w)
        gnorm = math.sqrt(np.dot(g, g))
        wnorm = math.sqrt(np.dot(w, w))
        if gnorm <= gtol * (1.0 + wnorm):
            return (
                NEWTON_CONVERGED, it, radius, w, z, losses, dl, d2, r, a, A, s, value,
                g,
            )  # fmt: skip
        if it == max_iter:
            return (
                NEWTON_MAX_ITER, it, radius, w, z, losses, dl, d2, r, a, A, s, value,
                g,
            )  # fmt: skip
        radius0 = radius
        if frozen and gnorm > FROZEN_CONTRACTION * prev_gnorm:
            frozen = False
        if frozen:  # _frozen_step: a chord step on H0
            frozen = False
            has_step, x = _cholesky_solve(H0, g)
            if has_step:
                step = -x
                pred = _predicted(g, H0, step)
                okq, rho, wq, zq, lq, dlq, d2q, rq, aq, Aq, sq, vq = _trial(
                    X, y, psi, q, caps, mu, lam, const, A, s, w, step, value, pred
                )
                if not okq:
                    return (
                        NEWTON_HANDOFF, it, radius0, w, z, losses, dl, d2, r, a, A, s,
                        value, g,
                    )  # fmt: skip
                if rho > FROZEN_ACCEPT or _kernel_rounding_accept(
                    X, lam, value, pred, gnorm, wq, aq, dlq, vq
                ):
                    w, z, losses, dl, d2, r, a, A, s, value = (
                        wq, zq, lq, dlq, d2q, rq, aq, Aq, sq, vq
                    )  # fmt: skip
                    frozen = True
                    prev_gnorm = gnorm
                    it += 1
                    continue
        acc, sums = _weighted_gram(X, a, d2, dl, r, caps, A, s, True)
        ok, H = _assemble_hessian(acc, sums, s, mu2, lam)
        if not ok:
            acc, sums = _weighted_gram(X, a, d2, dl, r, caps, A, s, False)
            H = _assemble_hessian(acc, sums, s, mu2, lam)[1]
        has_newton, x = _cholesky_solve(H, g)
        newton = -x
        newton_norm = math.sqrt(np.dot(newton, newton)) if has_newton else 0.0
        have_eig, e, V = False, np.empty(0), np.empty((0, 0))
        while True:
            if has_newton and newton_norm <= radius:
                step, boundary = newton, False
            else:
                if math.isinf(radius):  # indefinite: the model needs a bound
                    if not have_eig:
                        e, V = np.linalg.eigh(H)
                        have_eig = True
                    radius = gnorm / max(np.abs(e).max(), 1e-300)
                boundary, step, have_eig, e, V = _model_step(
                    H, g, radius, have_eig, e, V
                )
            pred = _predicted(g, H, step)
            okq, rho, wq, zq, lq, dlq, d2q, rq, aq, Aq, sq, vq = _trial(
                X, y, psi, q, caps, mu, lam, const, A, s, w, step, value, pred
            )
            if not okq:
                return (
                    NEWTON_HANDOFF, it, radius0, w, z, losses, dl, d2, r, a, A, s,
                    value, g,
                )  # fmt: skip
            snorm = math.sqrt(np.dot(step, step))
            if rho < 0.25:
                radius = 0.25 * snorm
            elif rho > 0.75 and boundary:
                radius = 2.0 * radius
                for _ in range(MAX_DOUBLINGS):  # _internal_doubling
                    boundary2, step2, have_eig, e, V = _model_step(
                        H, g, radius, have_eig, e, V
                    )
                    pred2 = _predicted(g, H, step2)
                    ok2, rho2, w2, z2, l2, dl2, d22, r2, a2, A2, s2, v2 = _trial(
                        X, y, psi, q, caps, mu, lam, const, A, s, w, step2, value,
                        pred2,
                    )  # fmt: skip
                    if not ok2:
                        return (
                            NEWTON_HANDOFF, it, radius0, w, z, losses, dl, d2, r, a,
                            A, s, value, g,
                        )  # fmt: skip
                    if not (v2 < vq and rho2 > 0.75):
                        break
                    wq, zq, lq, dlq, d2q, rq, aq, Aq, sq, vq = (
                        w2, z2, l2, dl2, d22, r2, a2, A2, s2, v2
                    )  # fmt: skip
                    if not boundary2:
                        break
                    radius = 2.0 * radius
            if rho > ACCEPT or _kernel_rounding_accept(
                X, lam, value, pred, gnorm, wq, aq, dlq, vq
            ):
                break
            if radius <= 1e-12 * (1.0 + wnorm):
                return (
                    NEWTON_FLAT, it, radius, w, z, losses, dl, d2, r, a, A, s, value,
                    g,
                )  # fmt: skip
        w, z, losses, dl, d2, r, a, A, s, value = (
            wq, zq, lq, dlq, d2q, rq, aq, Aq, sq, vq
        )  # fmt: skip
        it += 1


class NewtonSolution(NamedTuple):
    """What :func:`newton_reduced` returns: the minimiser ``w``, ``a*(w)`` and its
    multipliers, the iterations, whether ``‖∇F‖`` met the tolerance, ``F(w)``, the
    per-record losses ``ℓ(Xw)`` (the candidate range keeps them, one pass fewer) and
    ``∇F(w)`` (the KKT check's ``∇_w G``, by the envelope theorem)."""

    w: FloatArray
    a: FloatArray
    state: WeightsStepState | None
    iterations: int
    converged: bool
    value: float
    losses: FloatArray
    gradient: FloatArray


def newton_reduced(
    prob: Problem,
    eta: float,
    *,
    w0: FloatArray,
    state: WeightsStepState | None,
    gtol: float,
    max_iter: int,
    a0: FloatArray | None = None,
    extrapolate: bool = False,
    hessian0: FloatArray | None = None,
) -> NewtonSolution:
    """Minimise ``F``; return ``(w, a*(w), state, iterations, converged, F(w), ℓ)``.

    ``state`` (or, without one, the nearby weights ``a0``) warm-starts the a-step.
    Trust-region Newton on the exact ``∇²F`` (module docstring); the radius starts
    unbounded (a plain Newton step wherever ``∇²F ≻ 0``) and is first set, to
    ``‖∇F‖/max|eig ∇²F|``, at the first indefinite Hessian or rejected step. A very
    successful step on the radius is extended on the same model by internal doubling
    (:func:`_internal_doubling`). Steps on the radius come from factorisations
    (:class:`_Model`); ``∇²F`` is diagonalised only for the first radius and in the
    hard case.

    ``extrapolate``: a very successful step inside the radius (the Newton step) is
    extended too (:func:`_extrapolate`).

    ``hessian0``: a Hessian of ``F`` at a nearby point (a payment re-solve's base),
    tried instead of ``∇²F`` from the first iteration while its steps converge fast
    (:func:`_frozen_step`).

    For the logistic loss with ``μ > 0`` (no extrapolation, no paper noise term, a
    row-major ``X``) the iterations run compiled (:func:`_newton_kernel`: the same operations in the same
    order, so the same iterates to the bit); this loop takes over where the compiled
    a-step declines a trial point, and runs the other cases.

    Converged means ``‖∇F(w)‖ ≤ gtol·(1 + ‖w‖)``, i.e. both block KKT conditions hold
    (``a = a*(w)`` exactly, and ``∇_w G(w, a) = ∇F(w)``).
    """
    caps = prob.caps(eta)
    p = _evaluate(prob, eta, np.asarray(w0, dtype=float), state, caps, a0)
    radius = math.inf
    start = 0
    cfg = prob.cfg
    if (
        not extrapolate
        and cfg.loss == "logistic"
        and cfg.mu > 0.0
        and prob.X.flags.c_contiguous  # the compiled X·w (BLAS) needs a row-major X
        and p.d2 is not None
        and p.state is not None
        and prob.linear_term(eta) is None
    ):
        out = _newton_kernel(
            prob.X, prob.y, prob.psi, cfg.gamma * eta, caps, cfg.mu, cfg.lam,
            cfg.sigma / eta, gtol, max_iter, p.w, p.z, p.losses, p.dl, p.d2, p.r,
            p.a, p.state.A, p.state.s, p.value, kernel_hessian(hessian0),
        )  # fmt: skip
        code, it, radius = out[0], out[1], out[2]
        w, z, losses, dl, d2, r, a, A, s, value, g = out[3:]
        p = _Point(w, z, losses, dl, d2, r, a, WeightsStepState(A, s), value)
        _remember_losses(prob, p)
        if code == NEWTON_CONVERGED:
            return NewtonSolution(p.w, p.a, p.state, it, True, p.value, p.losses, g)
        if code in (NEWTON_MAX_ITER, NEWTON_FLAT):
            return NewtonSolution(p.w, p.a, p.state, it, False, p.value, p.losses, g)
        start = it
    # chord steps on hessian0 from the first iteration while each accepted one
    # shrinks ‖∇F‖ by FROZEN_CONTRACTION (a hand-off from the kernel later than
    # that resumes on exact Hessians)
    frozen = hessian0 is not None and start == 0
    prev_gnorm = math.inf
    for it in range(start, max_iter + 1):
        g = _gradient(prob, eta, p)
        gnorm = _norm(g)
        if gnorm <= gtol * (1.0 + _norm(p.w)):
            _remember_losses(prob, p)
            return NewtonSolution(p.w, p.a, p.state, it, True, p.value, p.losses, g)
        if it == max_iter:
            break
        if frozen and gnorm > FROZEN_CONTRACTION * prev_gnorm:
            frozen = False
        if frozen:
            assert hessian0 is not None
            q = _frozen_step(prob, eta, p, g, gnorm, hessian0, caps)
            if q is not None:
                p, prev_gnorm = q, gnorm
                continue
            frozen = False
        H = _hessian(prob, eta, p, caps)
        model = _Model(H, g)
        # The trust-region step is the Newton step whenever ∇²F ≻ 0 and that step fits
        # (Cholesky); otherwise it comes from factorisations of H + νI, and only the
        # first radius (or a hard case) needs the ``d × d`` eigendecomposition.
        newton = _newton_step(H, g)
        while True:
            if newton is not None and _norm(newton) <= radius:
                step, boundary = newton, False
            else:
                if math.isinf(radius):  # indefinite: the model needs a bound
                    e = model.eigen()[0]
                    radius = gnorm / max(float(np.abs(e).max()), 1e-300)
                step, boundary = model.step(radius)
            pred = _predicted(g, H, step)
            q = _evaluate(prob, eta, p.w + step, p.state, caps)
            rho = _ratio(q.value - p.value, pred)
            snorm = _norm(step)
            if rho < 0.25:
                radius = 0.25 * snorm
            elif rho > 0.75 and boundary:
                radius = 2.0 * radius
                q, radius = _internal_doubling(prob, eta, p, q, model, radius, caps)
            elif rho > 0.75 and extrapolate:
                q = _extrapolate(prob, eta, p, q, step, caps)
            if rho > ACCEPT or _rounding_accept(prob, eta, p, q, pred, gnorm):
                break
            if radius <= 1e-12 * (1.0 + _norm(p.w)):
                # No representable descent: F is flat here to machine precision.
                return NewtonSolution(
                    p.w, p.a, p.state, it, False, p.value, p.losses, g
                )
        p = q
    _remember_losses(prob, p)
    return NewtonSolution(p.w, p.a, p.state, max_iter, False, p.value, p.losses, g)


def value_and_gradient(
    prob: Problem, eta: float, w: FloatArray, state: WeightsStepState | None
) -> tuple[float, FloatArray, WeightsStepState | None]:
    """``(F(w), ∇F(w), a-step multipliers)`` at fixed ``η`` from one evaluation, no
    Newton step (``state`` warm-starts the a-step). What a certified lower bound
    ``F(w) − ‖∇F(w)‖²/(2(λ − λ_conv))`` at a given ``w`` needs."""
    p = _evaluate(prob, eta, np.asarray(w, dtype=float), state, prob.caps(eta))
    return p.value, _gradient(prob, eta, p), p.state


def loss_pass(prob: Problem, w: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(ℓ(Xw), ℓ'(Xw))`` per record: what :func:`value_and_gradient` at ``w`` needs
    besides the virtual costs, for :func:`value_and_gradient_from_losses`."""
    z = prob.X @ np.asarray(w, dtype=float)
    if prob.cfg.loss == "logistic":
        return logistic_value_slope(z, prob.y)
    return prob.loss.value(z, prob.y), prob.loss.derivative(z, prob.y)


def value_and_gradient_from_losses(
    prob: Problem,
    eta: float,
    w: FloatArray,
    state: WeightsStepState | None,
    losses: FloatArray,
    dl: FloatArray,
) -> tuple[float, FloatArray, WeightsStepState | None]:
    """:func:`value_and_gradient` at ``w`` given ``(ℓ(Xw), ℓ'(Xw))`` (:func:`loss_pass`):
    the same operations without the product ``Xw`` and the loss pass, so the same
    values to the bit (the a-step and ``F`` of :func:`_point_from_r`, the gradient of
    :func:`_gradient`). Where the compiled a-step declines, the full evaluation."""
    cfg = prob.cfg
    if state is not None and cfg.loss == "logistic" and prob.linear_term(eta) is None:
        r = losses + (cfg.gamma * eta) * prob.psi
        ok, a, A, s, value = _point_from_r(
            r, prob.caps(eta), cfg.mu, state.A, state.s, w, cfg.lam, cfg.sigma / eta
        )
        if ok:
            g = _weighted_gradient(prob.X, a, dl, cfg.lam, w)
            return value, g, WeightsStepState(A, s)
    return value_and_gradient(prob, eta, w, state)


MAX_DOUBLINGS = 30  # internal doublings of the radius per iteration


@_jit
def _predicted(g: FloatArray, H: FloatArray, step: FloatArray) -> float:
    """The quadratic model's change ``gᵀs + ½sᵀHs``."""
    d = g.size
    lin = 0.0
    quad = 0.0
    for i in range(d):
        lin += g[i] * step[i]
        acc = 0.0
        for j in range(d):
            acc += H[i, j] * step[j]
        quad += step[i] * acc
    return lin + 0.5 * quad


def _ratio(actual: float, pred: float) -> float:
    """Actual over predicted decrease (``−∞`` for a non-descent model or a
    non-finite ``F``)."""
    return actual / pred if pred < 0.0 and math.isfinite(actual) else -math.inf


def _internal_doubling(
    prob: Problem,
    eta: float,
    p: _Point,
    q: _Point,
    model: _Model,
    radius: float,
    caps: FloatArray,
) -> tuple[_Point, float]:
    """Extend a very successful boundary step on the same model ("internal doubling",
    Dennis & Schnabel 1983, Alg. A6.4.5): while the step to the doubled radius still
    lowers ``F`` below the current trial and the model predicts it well
    (``ρ > 0.75``), take it and double again.

    From a start where ``∇²F`` is indefinite (``w = 0`` with a small ``μ``: the
    a-sensitivity term dominates) the first radius is a gradient step, and plain
    doubling needs one Hessian per factor of two to reach the minimiser's scale
    (five on Wisconsin at ``μ = 1``); a trial here costs one evaluation of ``F``
    (O(m·d)) and a few ``d × d`` factorisations against the Hessian's O(m·d²). Every
    trial accepted is a descent step with ``ρ > 0.75``, so the iteration's guarantees
    stand.
    Returns the best trial and the radius for the next iteration.
    """
    for _ in range(MAX_DOUBLINGS):
        step, boundary = model.step(radius)
        pred = _predicted(model.g, model.H, step)
        r = _evaluate(prob, eta, p.w + step, p.state, caps)
        rho = _ratio(r.value - p.value, pred)
        if not (r.value < q.value and rho > 0.75):
            break
        q = r
        if not boundary:
            break  # the model's minimiser lies inside: no further doubling helps
        radius = 2.0 * radius
    return q, radius


def _extrapolate(
    prob: Problem,
    eta: float,
    p: _Point,
    q: _Point,
    step: FloatArray,
    caps: FloatArray,
) -> _Point:
    """Extend a very successful Newton step ``s`` (inside the radius, ``ρ > 0.75``)
    to ``2s, 4s, …`` while ``F`` keeps falling; return the best trial.

    Where the weights act almost as a linear programme's (a tiny ``μ``: records
    swap in and out of the support along every step), ``∇²F`` sees only the
    smooth part of ``F`` and the Newton step stops at the first record that swaps:
    the iterates crawl along a straight valley by steps of about the same length
    (F falling ~1e-5 relative per iteration for hundreds of iterations). A trial
    costs one evaluation of ``F`` against the Hessian's O(m·d²) pass and an
    iteration's; every trial taken lowers ``F`` below the accepted step, so the
    iteration stays a descent method.
    """
    t = 2.0
    for _ in range(MAX_DOUBLINGS):
        r = _evaluate(prob, eta, p.w + t * step, p.state, caps)
        if not r.value < q.value:
            break
        q = r
        t *= 2.0
    return q
