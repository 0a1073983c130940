"""The slope of a seller's curve at its own report, from the base allocation alone.

Under the ``η``-search rule with linear ``u`` and ``μ > 0``, where the base's ``η`` sits
at an end of its range and the profile pushes it outward, a seller's curve
``s ↦ ε_i^total(s)`` starts at its report ``c_i`` on a piece where ``η`` stays at that
end and the active set of the weights is the base's. There ``ε_i`` is a smooth
function of ``Ψ_i`` through the fixed-``η`` problem, and its derivative follows from
quantities of the base (:mod:`mechanisms.allocation._reduced_newton`'s notation):

* on the free set ``M`` the a-step is ``a_M = A − s r_M`` with
  ``r_j = ℓ_j(w) + γηΨ_j``, ``‖a‖ = μs``, and its Jacobian in ``r_M`` is
  ``J = −sI + 1p₁ᵀ − r_M p₂ᵀ``, ``p₁ = (s/D)(S₁a − (Q + μ²s)1)``,
  ``p₂ = (s/D)(|M|a − c₁1)``, ``D = S₁c₁ − |M|(Q + μ²s)``, ``S₁ = Σ_M r``,
  ``Q = Σ_M a r``, ``c₁ = Σ_M a``;
* ``∇F(w) = Σ_j a_j ℓ'_j x_j + λw = 0`` at the optimum; differentiating in ``Ψ_i``
  (``∂r_M/∂Ψ_i = γη e_i`` at fixed ``w``) gives the model's response
  ``dw/dΨ_i = −γη (∇²F)⁻¹ Gᵀ J e_i``, ``G`` the rows ``ℓ'_j x_j`` on ``M``, with
  ``GᵀJe_i = −s G_i + p₁ᵢ Σ_M G_j − p₂ᵢ Σ_M r_j G_j``;
* ``da_i/dΨ_i = γη J_ii + J_iᵀ v`` with ``v_j = G_j·dw/dΨ_i``, where
  ``J_iᵀv = −s v_i + p₁ᵀv − r_i p₂ᵀv`` needs only ``aᵀv = (Σ_M a_j G_j)·dw`` and
  ``1ᵀv = (Σ_M G_j)·dw``;
* ``dε_i^total/ds = (η + 2/(4λ + a_i))·(da_i/dΨ_i)·Ψ'(s)`` (spec §3, eq. (3.1); ``η``
  alone without the curvature term).

The three ``d``-vector sums, the inverse of ``∇²F`` (the payment job's frozen base
Hessian, :func:`mechanisms.payments._resolve._local_resolve.base_hessian`, through its
Cholesky factor) and the scalars are computed once per base and process; a seller's slope is then one
``d × d`` product with ``(∇²F)⁻¹``. Measured against a Richardson difference of cold
re-solves (``tests/mechanisms/test_report_slope.py``): the same to ``10⁻⁸`` relative
where the model's response is ``10⁻³`` of the slope.

Where another seller ``j`` joins or leaves the free set (at ``a_j = 0`` or its cap),
``ε_i`` stays continuous and its slope jumps: :func:`kink_slope_change` evaluates the
slope above with ``j``'s terms added to or removed from the sums and from ``∇²F``'s
``GᵀJG`` part, at seller ``i``'s own weight and virtual cost along its sweep, and the
payment sweep leaves such changes unlocated where the jumps are too small to matter
(:func:`mechanisms.payments._kinks.kink_brackets`).

:meth:`mechanisms.payments._resolve._seller_curve.SellerCurve.tangent` hands the slope
to the quadrature's first piece (:mod:`mechanisms.payments._quadrature`, the tangent
panel) where the evaluation at the piece's other end still has ``η`` at the same end
of the range and the seller free; the model's response ``dw/dΨ_i`` also starts the
sweep's first re-solve (``SellerCurve._predicted_point``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import cho_solve

from mechanisms.allocation._problem import Problem
from mechanisms.allocation._range._certify import effective_problem
from mechanisms.allocation._weights_kernel import _jit, kernel_array
from mechanisms.payments._base_memo import base_memo
from mechanisms.payments._resolve._local_resolve import base_losses
from mechanisms.payments._resolve._range_resolve import weights_signature
from mechanisms.priors import CostPrior
from mechanisms.priors._ironing import IronedPrior
from mechanisms.result import Allocation

FloatArray = NDArray[np.float64]

OUTWARD_RTOL = 1e-6
"""The profile's slope at the range end must push ``η`` outward by at least this,
relative to ``1 + |G|`` per unit of ``log η``: a slope near 0 lets ``η`` leave the
end as soon as ``Ψ_i`` moves, and the fixed-``η`` derivative is not the curve's."""


@dataclass(frozen=True)
class _BaseSlopeTerms:
    """What every seller's slope shares (one base, one process)."""

    eta: float
    gamma_eta: float
    s: float
    D: float
    S1: float
    Q_mu: float  # Q + μ²s
    c1: float
    n_free: int
    free: NDArray[np.bool_]
    r: FloatArray
    dl: FloatArray
    u_g: FloatArray  # Σ_M G_j
    u_rg: FloatArray  # Σ_M r_j G_j
    u_ag: FloatArray  # Σ_M a_j G_j
    h_inv: FloatArray  # (∇²F)⁻¹, d × d
    curvature_lam: float | None  # λ of the curvature term, None without it
    hessian: FloatArray  # ∇²F itself (kink_slope_change updates it)
    X: FloatArray  # the effective problem's records
    caps: FloatArray  # h_j = min(k/m, ε_j^max/η)
    mu: float
    norm2: float  # ‖a‖²


@dataclass(frozen=True)
class Response:
    """Seller ``i``'s first-order response to its own ``Ψ_i`` at the base:
    ``dw/dΨ_i`` (the model), ``da_i/dΨ_i`` (its weight) and ``dε_i^total/da_i``."""

    dw: FloatArray
    da_i: float
    deps_da: float


def response(
    prob: Problem, base: Allocation, hessian: FloatArray | None, i: int
) -> Response | None:
    """:class:`Response` of seller ``i`` (module docstring), or ``None`` where the
    module's conditions do not hold: the ``η``-search rule (a profile, certified),
    linear ``u``, the logistic loss, ``μ > 0``, no ``ε^max`` cap below ``k/m``,
    ``η`` at an end of its range with the profile pushing outward, seller ``i``
    free, and a frozen positive definite ``hessian`` (the job's)."""
    terms = _terms(prob, base, hessian)
    if terms is None or not terms.free[i]:
        return None
    a_i = float(base.weights[i])
    dw, da = _seller_response(
        kernel_array(prob.X[i]), a_i, float(terms.r[i]), float(terms.dl[i]),
        terms.s, terms.D, terms.S1, terms.Q_mu, terms.c1, float(terms.n_free),
        terms.gamma_eta, terms.u_g, terms.u_rg, terms.u_ag, terms.h_inv,
    )  # fmt: skip
    deps = terms.eta
    if terms.curvature_lam is not None:
        deps += 2.0 / (4.0 * terms.curvature_lam + a_i)
    if not math.isfinite(da):  # NaN where dw is not finite
        return None
    return Response(dw, da, deps)


def _terms(
    prob: Problem, base: Allocation, hessian: FloatArray | None
) -> _BaseSlopeTerms | None:
    """:class:`_BaseSlopeTerms` of the base, once per (base, Hessian) and process."""
    if hessian is None:
        return None
    # the problem is the base's own
    entry = base_memo(
        base, "report_slope_terms", hessian,
        lambda: (prob, _base_terms(prob, base, hessian)),
    )  # fmt: skip
    terms: _BaseSlopeTerms | None = (
        entry[1] if entry[0] is prob else _base_terms(prob, base, hessian)
    )
    return terms


@_jit
def _seller_response(
    x_i: FloatArray,
    a_i: float,
    r_i: float,
    dl_i: float,
    s: float,
    D: float,
    S1: float,
    Q_mu: float,
    c1: float,
    n_free: float,
    gamma_eta: float,
    u_g: FloatArray,
    u_rg: FloatArray,
    u_ag: FloatArray,
    h_inv: FloatArray,
) -> tuple[FloatArray, float]:
    """``(dw/dΨ_i, da_i/dΨ_i)`` of the module docstring for the seller with record
    ``x_i``, weight ``a_i``, ``r_i`` and ``ℓ'_i`` at the base, from the base's shared
    terms (:class:`_BaseSlopeTerms`); ``da`` is NaN where ``dw`` is not finite. In one
    compiled call (as NumPy expressions, about fifteen array operations: 14.5 µs a
    seller against 4.9 µs, at ``d = 20``)."""
    p1_i = (s / D) * (S1 * a_i - Q_mu)
    p2_i = (s / D) * (n_free * a_i - c1)
    d = x_i.size
    g_i = np.empty(d)
    b = np.empty(d)
    for j in range(d):
        g_i[j] = dl_i * x_i[j]
        b[j] = (-s * g_i[j] + p1_i * u_g[j]) - p2_i * u_rg[j]
    dw = np.dot(h_inv, b)
    finite = True
    for j in range(d):
        dw[j] = -gamma_eta * dw[j]
        finite &= math.isfinite(dw[j])
    v_i = np.dot(g_i, dw)
    a_v = np.dot(u_ag, dw)
    one_v = np.dot(u_g, dw)
    p1_v = (s / D) * (S1 * a_v - Q_mu * one_v)
    p2_v = (s / D) * (n_free * a_v - c1 * one_v)
    j_ii = -s + p1_i - r_i * p2_i
    da = gamma_eta * j_ii + (-s * v_i + p1_v - r_i * p2_v)
    return dw, da if finite else np.nan


def report_slope(
    prob: Problem,
    base: Allocation,
    hessian: FloatArray | None,
    prior: CostPrior,
    i: int,
    report: float,
    res: Response | None = None,
) -> float | None:
    """``dε_i^total/ds`` at ``s = report`` (seller ``i``'s own report, where ``base``
    is the allocation) on the rule's curve: ``(dε_i/da_i)(da_i/dΨ_i)Ψ'(report)``
    from :func:`response` (``res`` where the caller has it), or ``None`` where that
    does not apply or the prior is ironed (``Ψ̄`` is flat and kinked on its ironed
    intervals) or ``Ψ'`` is not finite at the report."""
    if isinstance(prior, IronedPrior):
        return None
    if res is None:
        res = response(prob, base, hessian, i)
    if res is None:
        return None
    dpsi = float(prior.virtual_cost_derivative(float(report)))
    out = res.deps_da * res.da_i * dpsi
    return out if math.isfinite(out) else None


def _base_terms(
    prob: Problem, base: Allocation, hessian: FloatArray
) -> _BaseSlopeTerms | None:
    eff, lam_conv = effective_problem(prob)
    cfg = eff.cfg
    prof = base.profile
    eta = float(base.eta)
    if (
        prof is None
        or lam_conv is None
        or not base.certified
        or cfg.mode != "default"
        or cfg.u != "linear"
        or cfg.loss != "logistic"
        or eff.noise is not None
        or not cfg.mu > 0.0
        or not cfg.gamma > 0.0
        or not eta > 0.0
    ):
        return None
    grid = np.asarray(prof.grid)
    at_top, at_bottom = eta == float(grid[-1]), eta == float(grid[0])
    if not (at_top or at_bottom) or at_top == at_bottom:
        return None
    kcap = cfg.k / eff.m
    if not np.all(eff.eps_max / eta >= kcap):
        return None
    a = np.asarray(base.weights, dtype=np.float64)
    psi = np.asarray(eff.psi, dtype=np.float64)
    if not np.all(np.isfinite(psi)):
        return None
    # dP/dη at the end, no ε^max cap holding anyone: −σ/η² + γΨᵀa (spec §4.1)
    slope = -cfg.sigma / eta**2 + cfg.gamma * float(psi @ a)
    scale = 1.0 + abs(float(base.mode_objective or base.objective))
    outward = -slope if at_top else slope
    if not outward * eta > OUTWARD_RTOL * scale:
        return None
    at_w = base_losses(prob, base)  # (Xw, ℓ, ℓ', ℓ'') at the base's w
    if at_w is None:
        return None
    _, losses, dl, _ = at_w
    gamma_eta = cfg.gamma * eta
    r = losses + gamma_eta * psi
    # free as the sweep's active signatures read it (status 1)
    free = weights_signature(kernel_array(a), kcap, eff.eps_max, eta) == 1
    n_free = int(free.sum())
    norm_a = float(np.sqrt(a @ a))
    if n_free < 2 or not norm_a > 0.0:
        return None
    s = norm_a / cfg.mu
    r_m, a_m = r[free], a[free]
    S1, Q, c1 = float(r_m.sum()), float(a_m @ r_m), float(a_m.sum())
    Q_mu = Q + cfg.mu**2 * s
    D = S1 * c1 - n_free * Q_mu
    if not (math.isfinite(D) and D != 0.0):
        return None
    G = eff.X[free] * dl[free, None]
    try:
        chol = np.linalg.cholesky(hessian)
    except np.linalg.LinAlgError:
        return None
    # (LLᵀ)⁻¹ once: a seller's slope is then a d × d product (two triangular solves
    # per seller cost more in SciPy's call overhead than the whole product)
    h_inv = cho_solve((chol, True), np.eye(chol.shape[0]))
    return _BaseSlopeTerms(
        eta=eta,
        gamma_eta=gamma_eta,
        s=s,
        D=D,
        S1=S1,
        Q_mu=Q_mu,
        c1=c1,
        n_free=n_free,
        free=free,
        r=r,
        dl=np.asarray(dl, dtype=np.float64),
        u_g=kernel_array(G.sum(axis=0)),
        u_rg=kernel_array(r_m @ G),
        u_ag=kernel_array(a_m @ G),
        h_inv=kernel_array(h_inv),
        curvature_lam=float(cfg.lam) if cfg.curvature_overhead else None,
        hessian=np.asarray(hessian, dtype=np.float64),
        X=np.asarray(eff.X, dtype=np.float64),
        caps=np.asarray(eff.caps(eta), dtype=np.float64),
        mu=float(cfg.mu),
        norm2=float(a @ a),
    )


class _Sums(NamedTuple):
    """The free set's sums of the module docstring at one state: ``|M|``, ``S₁``,
    ``Q``, ``c₁`` and ``Σ_M G_j``, ``Σ_M r_j G_j``, ``Σ_M a_j G_j``."""

    n: float
    S1: float
    Q: float
    c1: float
    u_g: FloatArray
    u_rg: FloatArray
    u_ag: FloatArray

    def toggled(self, sign: float, r_j: float, a_j: float, g_j: FloatArray) -> _Sums:
        """The sums with seller ``j`` (``r_j``, ``a_j``, row ``G_j``) added to the free
        set (``sign = 1``) or taken out of it (``sign = −1``)."""
        return _Sums(
            self.n + sign,
            self.S1 + sign * r_j,
            self.Q + sign * a_j * r_j,
            self.c1 + sign * a_j,
            self.u_g + sign * g_j,
            self.u_rg + sign * r_j * g_j,
            self.u_ag + sign * a_j * g_j,
        )

    def q_mu_and_d(self, s: float, mu: float) -> tuple[float, float]:
        """``Q + μ²s`` and ``D = S₁c₁ − |M|(Q + μ²s)`` at the scale ``s``."""
        q_mu = self.Q + mu**2 * s
        return q_mu, self.S1 * self.c1 - self.n * q_mu


def _coupling(sums: _Sums, s: float, mu: float) -> FloatArray:
    """The rank-two part of ``Gᵀ(∂a/∂r)G`` in ``∇²F`` (module docstring's ``J``
    without its ``−sI``): ``u_g p₁ᵀ − u_rg p₂ᵀ`` with ``p₁ = Σ_M p₁ⱼG_j``,
    ``p₂ = Σ_M p₂ⱼG_j``."""
    q_mu, D = sums.q_mu_and_d(s, mu)
    p1 = (s / D) * (sums.S1 * sums.u_ag - q_mu * sums.u_g)
    p2 = (s / D) * (sums.n * sums.u_ag - sums.c1 * sums.u_g)
    out: FloatArray = np.outer(sums.u_g, p1) - np.outer(sums.u_rg, p2)
    return out


def kink_slope_change(
    prob: Problem,
    base: Allocation,
    hessian: FloatArray | None,
    i: int,
    a_i: float,
    psi_i: float,
    changes: Sequence[tuple[int, int, int]],
) -> float | None:
    """``Σ |Δ(dε_i^total/dΨ_i)|`` over ``changes``: the jumps of seller ``i``'s slope
    where other sellers change status, estimated at the state where seller ``i``
    has weight ``a_i`` and virtual cost ``psi_i`` (the other sellers as at the base).

    ``changes`` holds ``(j, before, after)`` statuses (0 at zero, 1 free, 2 at the
    cap). Where seller ``j`` joins or leaves the free set ``M`` at ``a_j = 0`` or at
    its cap ``h_j``, the allocation stays continuous (so does ``ε_i``), and only
    the derivative of the a-step changes: ``|M|``, ``S₁``, ``Q``, ``c₁`` and the
    three ``d``-vector sums gain or lose ``j``'s terms, and ``∇²F`` its term of
    ``Gᵀ(∂a/∂r)G`` (``−sG_jG_jᵀ`` and the rank-two coupling). The slope
    ``da_i/dΨ_i`` of the module docstring is evaluated on both sides, the model's
    response included. The state is the base's with seller ``i``'s own terms
    replaced (its weight, ``r_i``, ``‖a‖``); the others drift by ``O(1/m)`` along the
    sweep, which the caller's safety factor covers. ``None`` where
    :func:`response`'s conditions fail at the base, seller ``i`` is not free there,
    or a change is not between neighbouring statuses (``0 ↔ 2`` skips the free set)
    or is seller ``i``'s own."""
    t = _terms(prob, base, hessian)
    if t is None or not t.free[i] or not (a_i > 0.0 and math.isfinite(psi_i)):
        return None
    a0, r0 = float(base.weights[i]), float(t.r[i])
    r_i = r0 + t.gamma_eta * (psi_i - float(prob.psi[i]))
    g_i = t.dl[i] * t.X[i]
    q0 = t.Q_mu - t.mu**2 * t.s
    at_base = _Sums(float(t.n_free), t.S1, q0, t.c1, t.u_g, t.u_rg, t.u_ag)
    here = _Sums(
        at_base.n,
        t.S1 + (r_i - r0),
        q0 + (a_i * r_i - a0 * r0),
        t.c1 + (a_i - a0),
        t.u_g,
        t.u_rg + (r_i - r0) * g_i,
        t.u_ag + (a_i - a0) * g_i,
    )
    norm2 = t.norm2 + a_i**2 - a0**2
    if not norm2 > 0.0:
        return None
    s = math.sqrt(norm2) / t.mu
    try:
        return _slope_jumps(t, i, here, at_base, s, a_i, r_i, changes)
    except (ZeroDivisionError, np.linalg.LinAlgError):  # a degenerate a-step
        return None


def _slope_jumps(
    t: _BaseSlopeTerms,
    i: int,
    here: _Sums,
    at_base: _Sums,
    s: float,
    a_i: float,
    r_i: float,
    changes: Sequence[tuple[int, int, int]],
) -> float | None:
    """The body of :func:`kink_slope_change` at the state ``here``."""
    x_i, dl_i = kernel_array(t.X[i]), float(t.dl[i])

    def weight_slope(sums: _Sums, hessian: FloatArray) -> float:
        """``da_i/dΨ_i`` at the state ``sums`` (:func:`_seller_response`)."""
        q_mu, D = sums.q_mu_and_d(s, t.mu)
        _, da = _seller_response(
            x_i, a_i, r_i, dl_i, s, D, sums.S1, q_mu, sums.c1, sums.n, t.gamma_eta,
            kernel_array(sums.u_g), kernel_array(sums.u_rg), kernel_array(sums.u_ag),
            kernel_array(np.asarray(np.linalg.inv(hessian), dtype=np.float64)),
        )  # fmt: skip
        return float(da)

    coupling = _coupling(here, s, t.mu)
    H = t.hessian - _coupling(at_base, t.s, t.mu) + coupling
    slope = weight_slope(here, H)
    total = 0.0
    for j, before, after in changes:
        if j == i or {before, after} not in ({0, 1}, {1, 2}):
            return None
        a_j = 0.0 if 0 in (before, after) else float(t.caps[j])
        g_j = t.dl[j] * t.X[j]
        sign = -1.0 if t.free[j] else 1.0
        other = here.toggled(sign, float(t.r[j]), a_j, g_j)
        H_j = H - sign * s * np.outer(g_j, g_j) - coupling + _coupling(other, s, t.mu)
        total += abs(weight_slope(other, H_j) - slope)
    deps = t.eta
    if t.curvature_lam is not None:
        deps += 2.0 / (4.0 * t.curvature_lam + a_i)
    out = deps * total
    return out if math.isfinite(out) else None
