"""The strict a-step in O(log m) from sorted virtual costs (spec ``mechanism.md`` §4.2,
§4.4), compiled.

In mode ``strict`` every seller's linear cost at ``η`` is ``r_j = c + qΨ_j`` with one
public constant ``c`` and ``q = γη > 0``, so ``r`` is ordered as ``Ψ`` at every ``η``.
With every cap ``h = k/m`` the a-step (problem (4.2)) has the solution
``a_j = clip(A − s r_j, 0, h)`` with ``Σ a = 1`` and ``‖a‖₂ = μs``: the capped sellers
(``A − s r_j ≥ h``) are the cheapest, the zero ones the dearest, the free ones a
contiguous run between them. Sorting ``Ψ`` once per payment job makes each class a
range of ranks, found by two binary searches on the same predicates the O(m) kernel
applies record by record, and every sum the active-set step needs (``Σ r_j``, the
spread ``Σ (r_j − r̄)²``, ``Σ a_j``, ``Σ a_j²``, ``Σ Ψ_j a_j`` over a class) follows
from prefix sums of ``δ_j = Ψ_j − Ψ_ref`` and ``δ_j²``. One seller's changed ``Ψ_i``
is its base entry taken out of its class and the new value put into the class its own
predicate gives.

Precision. Over a free run the weights ``a_j = A − s r_j`` lie within ``h`` of each
other while ``s·qδ_j`` can be ``10⁶`` times wider at a large ``η``: ``Σ a_j²`` or the
spread from plain prefix sums would lose about twelve digits to cancellation. The
prefix sums and the few O(1) combinations are therefore kept in double-double
arithmetic (Knuth's ``TwoSum``, Dekker's ``TwoProduct``), which leaves the results as
accurate as the O(m) pass's (measured against it: ``tests/mechanisms/
test_sorted_astep.py``).

The iteration is the O(m) kernel's (:func:`mechanisms.allocation._weights_kernel.
weights_kernel` with equal caps): re-centre ``A`` at the warm ``s`` by bracketed Newton
on ``Σ a = 1`` (bisection where no weight is free), then the closed-form active-set
step to a fixed point of the class counts (classes are down-sets in ``r``, so equal
counts are equal sets), a vertex with no free weight handled as there, and the same
acceptance test ``Σ a = 1``, ``‖a‖ = μs`` to ``10⁻⁹`` plus the weights' rounding. ``ok = False`` (no warm start,
a failed check) sends the caller to the O(m) path.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._weights_kernel import _jit, _kkt_holds, _theta_step

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

_SPLIT = 134217729.0  # 2^27 + 1, Dekker's splitter for doubles
_TINY = 5e-324  # the least positive double: v ≥ _TINY exactly when v > 0


# ------------------------------------------------------------ double-double arithmetic


@_jit
def _two_sum(a: float, b: float) -> tuple[float, float]:
    """``(s, e)`` with ``s = fl(a + b)`` and ``a + b = s + e`` exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@_jit
def _quick(a: float, b: float) -> tuple[float, float]:
    """Renormalise ``a + b`` with ``|a| ≥ |b|`` (Dekker's ``FastTwoSum``)."""
    s = a + b
    return s, b - (s - a)


@_jit
def _two_prod(a: float, b: float) -> tuple[float, float]:
    """``(p, e)`` with ``p = fl(ab)`` and ``ab = p + e`` exactly (Dekker)."""
    p = a * b
    t = _SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@_jit
def _dd_add(ah: float, al: float, bh: float, bl: float) -> tuple[float, float]:
    s, e = _two_sum(ah, bh)
    return _quick(s, e + (al + bl))


@_jit
def _dd_mul(ah: float, al: float, bh: float, bl: float) -> tuple[float, float]:
    p, e = _two_prod(ah, bh)
    return _quick(p, e + (ah * bl + al * bh))


@_jit
def _dd_scale(ah: float, al: float, b: float) -> tuple[float, float]:
    p, e = _two_prod(ah, b)
    return _quick(p, e + al * b)


# ---------------------------------------------------------------------- the prefix sums


@_jit
def prefix_sums(ps: FloatArray, ref: float) -> FloatArray:
    """``(m + 1) × 4`` double-double prefix sums of ``δ_j = ps_j − ref`` and ``δ_j²``
    over the sorted ``ps``: row ``k`` holds ``Σ_{j<k} δ_j`` (hi, lo) and
    ``Σ_{j<k} δ_j²`` (hi, lo)."""
    m = ps.size
    out = np.zeros((m + 1, 4))
    s1h = s1l = s2h = s2l = 0.0
    for j in range(m):
        dh, dl = _two_sum(ps[j], -ref)
        s1h, s1l = _dd_add(s1h, s1l, dh, dl)
        qh, ql = _dd_mul(dh, dl, dh, dl)
        s2h, s2l = _dd_add(s2h, s2l, qh, ql)
        out[j + 1, 0] = s1h
        out[j + 1, 1] = s1l
        out[j + 1, 2] = s2h
        out[j + 1, 3] = s2l
    return out


@_jit
def count_at_least(
    ps: FloatArray, A: float, s: float, c: float, q: float, bound: float
) -> int:
    """How many sorted ``ps_j`` have ``A − s(c + qΨ_j) ≥ bound`` (``bound = h``: the
    capped ones), evaluated exactly as the O(m) kernel evaluates each record; the
    predicate is monotone in ``Ψ`` for ``q, s > 0`` (each correctly rounded step is),
    so the count is a binary search."""
    lo = 0
    hi = ps.size
    while lo < hi:
        mid = (lo + hi) >> 1
        v = A - s * (c + q * ps[mid])
        if v >= bound:
            lo = mid + 1
        else:
            hi = mid
    return lo


@_jit
def _range_dd(P: FloatArray, a: int, b: int, col: int) -> tuple[float, float]:
    """``Σ_{a ≤ j < b}`` of prefix column ``col`` (0: δ, 2: δ²) in double-double."""
    if b <= a:
        return 0.0, 0.0
    return _dd_add(P[b, col], P[b, col + 1], -P[a, col], -P[a, col + 1])


# ------------------------------------------------------------------------- class sums


@_jit
def _class_sums(
    ps: FloatArray,
    P: FloatArray,
    ref: float,
    ri: int,
    psi_i: float,
    A: float,
    s: float,
    c: float,
    q: float,
    h: float,
) -> tuple[int, int, int, float, float, float, float, float, float]:
    """At ``(A, s)``, with the sorted entry at rank ``ri`` replaced by ``psi_i``:
    ``(n_up, n_mid, cls_i, D1, D1_lo, D2, D2_lo, U1, U1_lo)`` — the class counts,
    seller ``i``'s class (0 zero, 1 free, 2 capped), and in double-double
    ``Σ_free δ``, ``Σ_free δ²`` and ``Σ_capped δ``."""
    k_up = count_at_least(ps, A, s, c, q, h)
    k_nz = count_at_least(ps, A, s, c, q, _TINY)  # A − s r_j > 0
    if k_nz < k_up:  # cannot happen for s > 0, h > 0 (capped ⊂ non-zero)
        k_nz = k_up
    d1h, d1l = _range_dd(P, k_up, k_nz, 0)
    d2h, d2l = _range_dd(P, k_up, k_nz, 2)
    u1h, u1l = _range_dd(P, 0, k_up, 0)
    n_up = k_up
    n_mid = k_nz - k_up
    # take seller i's base entry out of its class
    bh, bl = _two_sum(ps[ri], -ref)
    if ri < k_up:
        n_up -= 1
        u1h, u1l = _dd_add(u1h, u1l, -bh, -bl)
    elif ri < k_nz:
        n_mid -= 1
        d1h, d1l = _dd_add(d1h, d1l, -bh, -bl)
        sh, sl = _dd_mul(bh, bl, bh, bl)
        d2h, d2l = _dd_add(d2h, d2l, -sh, -sl)
    # and put its new value into the class its own predicate gives
    v = A - s * (c + q * psi_i)
    nh, nl = _two_sum(psi_i, -ref)
    cls = 0
    if v >= h:
        cls = 2
        n_up += 1
        u1h, u1l = _dd_add(u1h, u1l, nh, nl)
    elif v > 0.0:
        cls = 1
        n_mid += 1
        d1h, d1l = _dd_add(d1h, d1l, nh, nl)
        sh, sl = _dd_mul(nh, nl, nh, nl)
        d2h, d2l = _dd_add(d2h, d2l, sh, sl)
    return n_up, n_mid, cls, d1h, d1l, d2h, d2l, u1h, u1l


@_jit
def _free_r_sum(
    n_mid: int, d1h: float, d1l: float, c: float, q: float, ref: float
) -> tuple[float, float]:
    """``Σ_free r_j = n(c + qΨ_ref) + qΣ_free δ_j`` in double-double."""
    ph, pl = _two_prod(q, ref)
    ph, pl = _dd_add(ph, pl, c, 0.0)
    ph, pl = _dd_scale(ph, pl, float(n_mid))
    bh, bl = _dd_scale(d1h, d1l, q)
    return _dd_add(ph, pl, bh, bl)


@_jit
def _free_spread(
    n_mid: int, d1h: float, d1l: float, d2h: float, d2l: float, q: float
) -> float:
    """``V = Σ_free (r_j − r̄)² = q²(Σδ² − (Σδ)²/n)``, the difference taken in
    double-double (the free run can be far narrower than the ``δ_j``)."""
    xh, xl = _dd_mul(d1h, d1l, d1h, d1l)
    xh, xl = _dd_scale(xh, xl, 1.0 / n_mid)
    vh, vl = _dd_add(d2h, d2l, -xh, -xl)
    vh, vl = _dd_scale(vh, vl, q)
    vh, vl = _dd_scale(vh, vl, q)
    return vh + vl


@_jit
def _sums_at(
    ps: FloatArray,
    P: FloatArray,
    ref: float,
    ri: int,
    psi_i: float,
    A: float,
    s: float,
    c: float,
    q: float,
    h: float,
) -> tuple[float, float, int, int, float, float]:
    """``(Σ a, Σ a², n_free, n_capped, ΣΨa, Σ_capped (A − s r_j − h))`` at
    ``a = clip(A − s r, 0, h)`` (the last: ``s`` times the capped sellers' cap
    multipliers).

    A free weight is ``a_j = e − sqδ_j`` with ``e = A − s(c + qΨ_ref)``, so over the
    free run ``Σ a = ne − sqΣδ``, ``Σ a² = ne² − 2esqΣδ + s²q²Σδ²`` and
    ``ΣΨa = Ψ_ref·Σa + eΣδ − sqΣδ²``, each in double-double."""
    n_up, n_mid, _cls, d1h, d1l, d2h, d2l, u1h, u1l = _class_sums(
        ps, P, ref, ri, psi_i, A, s, c, q, h
    )
    nf = float(n_mid)
    ph, pl = _two_prod(q, ref)
    ph, pl = _dd_add(ph, pl, c, 0.0)
    eh, el = _dd_scale(ph, pl, -s)
    eh, el = _dd_add(eh, el, A, 0.0)  # e = A − s(c + qΨ_ref)
    sq_ = s * q
    bh, bl = _dd_scale(d1h, d1l, -sq_)  # −sqΣδ
    fh, fl = _dd_scale(eh, el, nf)
    fh, fl = _dd_add(fh, fl, bh, bl)  # Σ_free a
    th, tl = _dd_scale(float(n_up), 0.0, h)
    tot_h, tot_l = _dd_add(th, tl, fh, fl)
    # Σ_free a² = ne² + 2e(−sqΣδ) + (sq)²Σδ²
    x1h, x1l = _dd_mul(eh, el, eh, el)
    x1h, x1l = _dd_scale(x1h, x1l, nf)
    x2h, x2l = _dd_mul(eh, el, bh, bl)
    x1h, x1l = _dd_add(x1h, x1l, 2.0 * x2h, 2.0 * x2l)
    x3h, x3l = _dd_scale(d2h, d2l, sq_)
    x3h, x3l = _dd_scale(x3h, x3l, sq_)
    x1h, x1l = _dd_add(x1h, x1l, x3h, x3l)
    hh, hl = _two_prod(h, h)
    hh, hl = _dd_scale(hh, hl, float(n_up))
    sqh, sql = _dd_add(hh, hl, x1h, x1l)
    # ΣΨa = h(n_up Ψ_ref + Σ_capped δ) + Ψ_ref Σ_free a + eΣδ − sqΣδ²
    uh, ul = _dd_scale(float(n_up), 0.0, ref)
    uh, ul = _dd_add(uh, ul, u1h, u1l)
    uh, ul = _dd_scale(uh, ul, h)
    yh, yl = _dd_scale(fh, fl, ref)
    uh, ul = _dd_add(uh, ul, yh, yl)
    yh, yl = _dd_mul(eh, el, d1h, d1l)
    uh, ul = _dd_add(uh, ul, yh, yl)
    yh, yl = _dd_scale(d2h, d2l, -sq_)
    uh, ul = _dd_add(uh, ul, yh, yl)
    # Σ_capped (A − s r_j − h) = n_up(A − h) − s(n_up(c + qΨ_ref) + qΣ_capped δ)
    kh, kl = _dd_scale(ph, pl, float(n_up))
    zh, zl = _dd_scale(u1h, u1l, q)
    kh, kl = _dd_add(kh, kl, zh, zl)
    kh, kl = _dd_scale(kh, kl, -s)
    zh, zl = _two_sum(A, -h)
    zh, zl = _dd_scale(zh, zl, float(n_up))
    kh, kl = _dd_add(kh, kl, zh, zl)
    return tot_h + tot_l, sqh + sql, n_mid, n_up, uh + ul, kh + kl


@_jit
def _vertex_sorted(
    ps: FloatArray,
    ri: int,
    psi_i: float,
    n_up: int,
    cls_i: int,
    k_up: int,
    c: float,
    q: float,
    h: float,
    mu: float,
) -> tuple[bool, float, float]:
    """No free weight (``_weights_kernel._vertex`` on sorted costs): the ``n_up``
    capped sellers must carry all the weight (``n_up·h = 1``), and with
    ``s' = √n_up·h/μ`` the dearest of them must stay ``h/s'`` below the cheapest
    other one; then ``(s'τ, s')`` with ``τ`` midway."""
    m = ps.size
    tot = n_up * h
    sq = n_up * (h * h)
    if n_up == 0 or not abs(tot - 1.0) <= 1e-12:
        return False, 0.0, 0.0
    s2 = math.sqrt(sq) / mu
    # the dearest capped Ψ and the cheapest other one, seller i at its new value
    top = -np.inf
    j = k_up - 1
    if j == ri:
        j -= 1
    if j >= 0:
        top = ps[j]
    low = np.inf
    j = k_up
    if j == ri:
        j += 1
    if j < m:
        low = ps[j]
    if cls_i == 2:
        top = max(top, psi_i)
    else:
        low = min(low, psi_i)
    need = c + q * top + h / s2
    room = c + q * low if math.isfinite(low) else np.inf
    if not need < room:
        return False, 0.0, 0.0
    tau = need if math.isinf(room) else 0.5 * (need + room)
    return True, s2 * tau, s2


@_jit
def sorted_astep(
    ps: FloatArray,
    P: FloatArray,
    ref: float,
    ri: int,
    psi_i: float,
    c: float,
    q: float,
    h: float,
    mu: float,
    A0: float,
    s0: float,
) -> tuple[bool, float, float]:
    """``(ok, A, s)`` of the a-step at ``r = c + qΨ`` (every cap ``h``), the sorted
    base ``Ψ`` with rank ``ri`` replaced by ``psi_i``, warm from ``(A0, s0)``."""
    if not (s0 > 0.0 and q > 0.0 and h > 0.0 and mu > 0.0):
        return False, 0.0, 0.0
    s = s0
    # re-centre A at the warm s: Σ clip(A − s r, 0, h) = 1 is piecewise linear and
    # non-decreasing in A (slope: the free count), −1 at s·min r and Σh − 1 ≥ 0 at
    # s·max r + h; bracketed Newton from the warm A, bisection where a step leaves
    # the bracket or no weight is free (the O(m) kernel's _theta_step)
    r_lo = c + q * min(ps[0] if ri != 0 else ps[min(1, ps.size - 1)], psi_i)
    last = ps.size - 1
    r_hi = c + q * max(ps[last] if ri != last else ps[max(last - 1, 0)], psi_i)
    lo = s * r_lo
    hi = s * r_hi + h
    A = min(max(A0, lo), hi)
    for _ in range(200):
        tot, _sq, n_mid, n_up, _pa, _k = _sums_at(ps, P, ref, ri, psi_i, A, s, c, q, h)
        stop, A, lo, hi = _theta_step(A, tot - 1.0, n_mid, lo, hi, n_up)
        if stop:
            break
    prev_u = -1
    prev_m = -1
    prev_c = -1
    for _ in range(60):
        n_up, n_mid, cls_i, d1h, d1l, d2h, d2l, _u1h, _u1l = _class_sums(
            ps, P, ref, ri, psi_i, A, s, c, q, h
        )
        if n_mid == 0:
            k_up = count_at_least(ps, A, s, c, q, h)
            ok, A, s = _vertex_sorted(ps, ri, psi_i, n_up, cls_i, k_up, c, q, h, mu)
            if not ok:
                return False, 0.0, 0.0
            n_up2, n_mid2, _c, _a, _b, _d, _e, _f, _g = _class_sums(
                ps, P, ref, ri, psi_i, A, s, c, q, h
            )
            return n_mid2 == 0 and n_up2 == n_up, A, s  # the clip reproduces it
        V = _free_spread(n_mid, d1h, d1l, d2h, d2l, q)
        H1 = n_up * h
        H2 = n_up * (h * h)
        c1 = 1.0 - H1
        denom = mu * mu - V
        if denom <= 0.0:
            return False, 0.0, 0.0
        s = math.sqrt((H2 + c1 * c1 / n_mid) / denom)
        rh, rl = _free_r_sum(n_mid, d1h, d1l, c, q, ref)
        rh, rl = _dd_scale(rh, rl, s)
        rh, rl = _dd_add(rh, rl, c1, 0.0)
        A = (rh + rl) / n_mid  # A = (c₁ + sΣ_free r)/n
        if n_up == prev_u and n_mid == prev_m and cls_i == prev_c:
            break
        prev_u, prev_m, prev_c = n_up, n_mid, cls_i
    tot, sq, n_free, _n_up, _pa, _k = _sums_at(ps, P, ref, ri, psi_i, A, s, c, q, h)
    if not _kkt_holds(tot, sq, mu, A, s, n_free, h):
        return False, 0.0, 0.0
    return True, A, s


@_jit
def sorted_value(
    ps: FloatArray,
    P: FloatArray,
    ref: float,
    ri: int,
    psi_i: float,
    eta: float,
    c: float,
    gamma: float,
    mu: float,
    sigma: float,
    h: float,
    A0: float,
    s0: float,
) -> tuple[bool, float, float, float, float, float, float]:
    """``(ok, V, Ψᵀa, A, s, a_i, held)`` of the exact a-step at ``η`` with every cap
    ``h`` (module docstring): ``V = c·Σa + μ‖a‖ + σ/η + γηΨᵀa``, the strict search
    value (spec (4.1)), and ``held = Σ_capped (A − s r_j − h)/s``, the sum of the
    capped sellers' cap multipliers (what a cap that moves with ``η`` adds to
    ``dP/dη``)."""
    q = gamma * eta
    ok, A, s = sorted_astep(ps, P, ref, ri, psi_i, c, q, h, mu, A0, s0)
    if not ok:
        return False, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    tot, sq, _n_free, _n_up, pa, k = _sums_at(ps, P, ref, ri, psi_i, A, s, c, q, h)
    a_i = min(max(A - s * (c + q * psi_i), 0.0), h)
    value = c * tot + mu * math.sqrt(max(sq, 0.0)) + sigma / eta + q * pa
    if not math.isfinite(value):
        return False, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    return True, value, pa, A, s, a_i, max(k, 0.0) / s
