"""The range certificate's branch-and-bound over a payment job's stale nodes, compiled.

A payment re-solve raises one virtual cost ``Ψ_i`` and certifies its point against
the base allocation's partition of ``[η_lo, η_hi]``
(:func:`mechanisms.allocation._range._certify.certify_range` over a
:class:`~mechanisms.allocation._range._certify.StaleNodes` set). Each node's bound was
certified at the base costs; ``G`` is non-decreasing in every ``Ψ_i``, so it stays a
valid (stale) lower bound of ``P(η_j)``. A cell ``[η₁, η₂]`` has the two-point bound of
its ends' bounds (spec ``mechanism.md`` §4.2, :func:`._two_point.two_point_bound`,
valid when the caps do not depend on ``η`` on the range). The lowest cell still below
the target ``G* − rtol·(1 + |G*|)`` (``G*`` the re-solved point's value) has its stale
ends *renewed*: at the stale point ``w_j``, one exact a-step with the new ``Ψ`` and
the gradient of ``F(w) = min_a G(w, a, η_j)`` give the bound of strong convexity

    P(η_j) ≥ F(w_j) − ‖∇F(w_j)‖² / (2(λ − λ_conv))

(:mod:`._certify`, "Convexity certificate"), never below the stale one. This repeats
until every cell is at or above the target.

:func:`stale_search` runs those steps in one compiled call, in the order
``certify_range`` takes them (its cells, heap order, renewals and final lower bound),
and hands back (:data:`STALE_HANDBACK`) where ``certify_range`` would solve a
fixed-``η`` problem: a renewed end still too low, a cell between two fresh nodes
(a bisection), or an a-step the compiled kernel declines. The caller then runs
``certify_range``'s own loop from the start. Renewals take
:func:`renewal_bound`, which ``certify_range``'s own renewals call too, so both
paths compute the same bounds to the bit; in a payment job (one seller's ``Ψ_i``
raised), :func:`renewal_bound_one`, in ``O(d)`` from a summary of each node.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._range._two_point import two_point_bound
from mechanisms.allocation._reduced_newton import _point_from_r, _weighted_gradient
from mechanisms.allocation._weights_kernel import _jit

FloatArray = NDArray[np.float64]

STALE_DONE = 0  # every cell at or above the target (or the renewal budget spent)
STALE_HANDBACK = 1  # a step needs a solve: run certify_range's own loop


@_jit
def _scores_and_caps(
    losses: FloatArray,
    psi: FloatArray,
    q: float,
    eps_max: FloatArray,
    kcap: float,
    eta: float,
) -> tuple[FloatArray, FloatArray]:
    """``r = ℓ + qΨ`` and the caps ``h_i = min(k/m, ε_i^max/η)`` at ``η``."""
    m = losses.size
    r = np.empty(m)
    h = np.empty(m)
    for i in range(m):
        r[i] = losses[i] + q * psi[i]
        h[i] = min(kcap, eps_max[i] / eta)
    return r, h


@_jit
def renewal_bound(
    X: FloatArray,
    psi: FloatArray,
    eps_max: FloatArray,
    kcap: float,
    q: float,
    eta: float,
    mu: float,
    lam: float,
    sigma: float,
    w: FloatArray,
    A0: float,
    s0: float,
    losses: FloatArray,
    dl: FloatArray,
    modulus: float,
    stale_bound: float,
) -> tuple[bool, float, float, float]:
    """A stale node's bound for the current ``Ψ`` (logistic loss, linear ``u``):
    ``(ok, max(F(w) − ‖∇F(w)‖²/(2·modulus), stale_bound), A, s)``.

    ``losses, dl`` are ``ℓ(Xw), ℓ'(Xw)`` at the stale ``w`` (they do not depend on
    ``Ψ``), ``q = γη``; ``r = ℓ + qΨ`` and the caps ``h_i = min(k/m, ε_i^max/η)``
    give the exact a-step (warm from the node's multipliers ``(A0, s0)``) and
    ``F`` (:func:`._reduced_newton._point_from_r`), then
    ``∇F(w) = Xᵀ(a ⊙ ℓ') + λw``. Not ok where the a-step kernel declines."""
    r, h = _scores_and_caps(losses, psi, q, eps_max, kcap, eta)
    ok, a, A, s, value = _point_from_r(r, h, mu, A0, s0, w, lam, sigma / eta)
    if not ok:
        return False, stale_bound, A0, s0
    g = _weighted_gradient(X, a, dl, lam, w)
    gg = 0.0
    for j in range(g.size):
        gg += g[j] * g[j]
    return True, max(value - gg / (2.0 * modulus), stale_bound), A, s


# One-seller renewals. A payment job's re-solves differ from the base in one seller's
# Ψ_i (``sole_change``), so at a stale node r = ℓ(w) + qΨ differs from the base's in
# r_i alone. The base's a-step there, a_k = clip(A − s·r_k, 0, h) with every cap h
# (eq. (A) of ``_weights_step``: Σa = 1, ‖a‖ = μs), is summarised once per node and
# job: each seller's class (0, free, capped), the free sellers' count n, the sums of
# d_k = r_k − c (c their mean) and d_k², the capped sellers' Σh, Σh², Σh·r, and the
# d-vectors P₁ = Σ_free ℓ'_k x_k, P₂ = Σ_free d_k ℓ'_k x_k, P₃ = Σ_capped h ℓ'_k x_k.
# Raising r_i by Δ ≥ 0 with every class unchanged moves only those sums, and the
# a-step is then in closed form: with B = 1 − Σ_capped h and V = Σd² − (Σd)²/n,
#
#     s² = (B²/n + Σ_capped h²)/(μ² − V),   A_c = (B + s·Σd)/n,   a_k = A_c − s·d_k
#
# (the two equations n·A_c − s·Σd = B and Σ_free a² + Σ_capped h² = μ²s²), and the
# gradient of F is λw + A_c·P₁ − s·P₂ + P₃ (P₂ moved by Δ·ℓ'_i x_i). The classes stay
# while the free weights stay inside (0, h), the zero ones at or below 0 and the
# capped at or above h: checked from the extremes of d in each class. A seller at 0
# stays there (nothing moves) and a capped one while A − s·r_i ≥ h (its weight fixed,
# F moves by h·Δ); anything else takes :func:`renewal_bound` itself.

_READY, _USABLE, _CEN, _N, _S1, _SS, _HC, _H2, _HR, _CAP = range(10)
_DZ_MIN, _DC_MAX, _DM_MAX1, _DM_MAX2, _DM_MIN1, _DM_MIN2 = range(10, 16)
_IM_MAX, _IM_MIN, _VALUE, _A, _S, _HITS, _OUT_HITS = range(16, 23)
_DZ_MIN2, _IZ_MIN, _ENTER_HITS = range(23, 26)
SUMMARY_FIELDS = 26
"""Scalars of one node's one-seller summary (:func:`renewal_bound_one`)."""


@_jit
def _summarise(
    X: FloatArray,
    psi: FloatArray,
    eps_max: FloatArray,
    kcap: float,
    q: float,
    eta: float,
    mu: float,
    lam: float,
    sigma: float,
    w: FloatArray,
    A0: float,
    s0: float,
    losses: FloatArray,
    dl: FloatArray,
    status: NDArray[np.uint8],
    fs: FloatArray,
    P: FloatArray,
) -> None:
    """Fill one node's summary (``status``, ``fs``, ``P`` rows) from the a-step at the
    base's ``psi``; not usable where the kernel declines or the caps differ. Marked
    ready last, so a reader never takes a summary half written."""
    m = losses.size
    d = w.size
    fs[_USABLE] = 0.0
    r, h = _scores_and_caps(losses, psi, q, eps_max, kcap, eta)
    cap = h[0]
    for k in range(m):
        if h[k] != cap:
            fs[_READY] = 1.0
            return
    ok, a, A, s, value = _point_from_r(r, h, mu, A0, s0, w, lam, sigma / eta)
    if not ok or not s > 0.0:
        fs[_READY] = 1.0
        return
    n = 0
    cen = 0.0
    for k in range(m):
        if 0.0 < a[k] < cap:
            n += 1
            cen += r[k]
    if n == 0:
        fs[_READY] = 1.0
        return
    cen /= n
    s1 = ss = hc = h2 = hr = 0.0
    dz_min, dc_max = np.inf, -np.inf
    dz_min2 = np.inf
    iz_min = -1
    dm_max1 = dm_max2 = -np.inf
    dm_min1 = dm_min2 = np.inf
    im_max = im_min = -1
    for j in range(3 * d):
        P[j] = 0.0
    for k in range(m):
        dk = r[k] - cen
        if a[k] <= 0.0:
            status[k] = 0
            if dk < dz_min:
                dz_min2, dz_min, iz_min = dz_min, dk, k
            elif dk < dz_min2:
                dz_min2 = dk
        elif a[k] >= cap:
            status[k] = 2
            dc_max = max(dc_max, dk)
            hc += cap
            h2 += cap * cap
            hr += cap * r[k]
            for j in range(d):
                P[2 * d + j] += cap * dl[k] * X[k, j]
        else:
            status[k] = 1
            s1 += dk
            ss += dk * dk
            if dk > dm_max1:
                dm_max2, dm_max1, im_max = dm_max1, dk, k
            elif dk > dm_max2:
                dm_max2 = dk
            if dk < dm_min1:
                dm_min2, dm_min1, im_min = dm_min1, dk, k
            elif dk < dm_min2:
                dm_min2 = dk
            for j in range(d):
                P[j] += dl[k] * X[k, j]
                P[d + j] += dk * dl[k] * X[k, j]
    fs[_CEN], fs[_N], fs[_S1], fs[_SS] = cen, n, s1, ss
    fs[_HC], fs[_H2], fs[_HR], fs[_CAP] = hc, h2, hr, cap
    fs[_DZ_MIN], fs[_DC_MAX] = dz_min, dc_max
    fs[_DZ_MIN2], fs[_IZ_MIN] = dz_min2, iz_min
    fs[_DM_MAX1], fs[_DM_MAX2], fs[_DM_MIN1], fs[_DM_MIN2] = (
        dm_max1,
        dm_max2,
        dm_min1,
        dm_min2,
    )
    fs[_IM_MAX], fs[_IM_MIN] = im_max, im_min
    fs[_VALUE], fs[_A], fs[_S] = value, A, s
    fs[_USABLE] = 1.0
    fs[_READY] = 1.0


@_jit
def _closed_a_step(
    n: float, s1: float, ss: float, fs: FloatArray, mu: float
) -> tuple[bool, float, float]:
    """``(ok, A_c, s)`` of the a-step in closed form for free sellers with count
    ``n`` and sums ``Σd = s1``, ``Σd² = ss`` (module comment "One-seller renewals")."""
    if not n >= 1.0:
        return False, 0.0, 0.0
    B = 1.0 - fs[_HC]
    den = mu * mu - (ss - s1 * s1 / n)
    if not den > 0.0:
        return False, 0.0, 0.0
    s = math.sqrt((B * B / n + fs[_H2]) / den)
    return True, (B + s * s1) / n, s


@_jit
def _classes_hold(
    Ac: float, s: float, hi_d: float, lo_d: float, dz_min: float, fs: FloatArray
) -> bool:
    """Whether ``a_k = A_c − s·d_k`` keeps every class: the free weights (``d`` in
    ``[lo_d, hi_d]``) inside ``(0, cap)``, the zero ones (``d ≥ dz_min``) at or
    below 0, the capped ones at or above the cap."""
    cap = fs[_CAP]
    return bool(
        Ac - s * hi_d > 0.0
        and Ac - s * lo_d < cap
        and Ac - s * dz_min <= 0.0
        and Ac - s * fs[_DC_MAX] >= cap
    )


@_jit
def renewal_bound_one(
    X: FloatArray,
    psi: FloatArray,
    eps_max: FloatArray,
    kcap: float,
    q: float,
    eta: float,
    mu: float,
    lam: float,
    sigma: float,
    w: FloatArray,
    A0: float,
    s0: float,
    losses: FloatArray,
    dl: FloatArray,
    modulus: float,
    stale_bound: float,
    i: int,
    psi_base_i: float,
    status: NDArray[np.uint8],
    fs: FloatArray,
    P: FloatArray,
) -> tuple[bool, float, float, float]:
    """:func:`renewal_bound` where ``psi`` is the base's but at seller ``i`` (where it
    is ``psi_base_i``, not higher; ``i < 0``: unknown), from the node's one-seller
    summary (filled at the first call; module comment "One-seller renewals") in
    ``O(d)`` where the a-step's classes stay, else :func:`renewal_bound`."""
    if i >= 0 and psi[i] >= psi_base_i:
        if fs[_READY] == 0.0:
            base_psi = psi.copy()
            base_psi[i] = psi_base_i
            _summarise(
                X, base_psi, eps_max, kcap, q, eta, mu, lam, sigma, w, A0, s0, losses,
                dl, status, fs, P,
            )  # fmt: skip
        if fs[_USABLE] == 1.0:
            found, bound, A, s = _summary_renewal(
                X, psi, q, eta, mu, lam, sigma, w, losses, dl, modulus, stale_bound, i,
                psi_base_i, status, fs, P,
            )  # fmt: skip
            if found:
                return True, bound, A, s
    return renewal_bound(
        X, psi, eps_max, kcap, q, eta, mu, lam, sigma, w, A0, s0, losses, dl, modulus,
        stale_bound,
    )  # fmt: skip


@_jit
def _summary_renewal(
    X: FloatArray,
    psi: FloatArray,
    q: float,
    eta: float,
    mu: float,
    lam: float,
    sigma: float,
    w: FloatArray,
    losses: FloatArray,
    dl: FloatArray,
    modulus: float,
    stale_bound: float,
    i: int,
    psi_base_i: float,
    status: NDArray[np.uint8],
    fs: FloatArray,
    P: FloatArray,
) -> tuple[bool, float, float, float]:
    """:func:`renewal_bound_one` from the node's (usable) summary: ``(found, bound,
    A, s)``, not found where the a-step changes a class beyond the variants read."""
    d = w.size
    delta = q * psi[i] - q * psi_base_i
    cls = status[i]
    cap = fs[_CAP]
    ww = 0.0
    for j in range(d):
        ww += w[j] * w[j]
    if cls == 0 or delta == 0.0 or cls == 2:
        A, s = fs[_A], fs[_S]
        value = fs[_VALUE]
        # the base's weights a_k = A_c − s d_k on the free sellers, A_c from the sums
        n = fs[_N]
        Ac = (1.0 - fs[_HC] + s * fs[_S1]) / n
        if cls == 2 and delta != 0.0:
            if not Ac - s * (losses[i] + q * psi[i] - fs[_CEN]) >= cap:
                return False, stale_bound, 0.0, 0.0
            value += cap * delta
        g = np.empty(d)
        for j in range(d):
            g[j] = lam * w[j] + Ac * P[j] - s * P[d + j] + P[2 * d + j]
    else:
        di = losses[i] + q * psi_base_i - fs[_CEN]
        dn = di + delta
        # the free sellers' extremes of d other than seller i's
        top = fs[_DM_MAX2] if int(fs[_IM_MAX]) == i else fs[_DM_MAX1]
        bottom = fs[_DM_MIN2] if int(fs[_IM_MIN]) == i else fs[_DM_MIN1]
        # seller i still free (d_i moved to dn) or out at 0, and the zero seller of
        # least d still at 0 or entering: the first of these whose classes hold
        z = int(fs[_IZ_MIN])
        dz = fs[_DZ_MIN]
        found = False
        out = enter = 0.0
        n = s1 = ss = Ac = s = 0.0
        for variant in range(4):
            out = float(variant % 2)
            enter = float(variant // 2)
            if enter == 1.0 and z < 0:
                break
            n = fs[_N] - out + enter
            s1 = fs[_S1] + (1.0 - out) * delta - out * di
            ss = fs[_SS] + (1.0 - out) * (dn * dn - di * di) - out * di * di
            if enter == 1.0:  # (dz is ∞ where no seller is at 0)
                s1 += dz
                ss += dz * dz
            hi_d, lo_d = top, bottom
            if out == 0.0:
                hi_d, lo_d = max(hi_d, dn), min(lo_d, dn)
            if enter == 1.0:
                hi_d, lo_d = max(hi_d, dz), min(lo_d, dz)
            z_min = fs[_DZ_MIN2] if enter == 1.0 else dz
            if out == 1.0:
                z_min = min(z_min, dn)
            ok, Ac, s = _closed_a_step(n, s1, ss, fs, mu)
            if ok and _classes_hold(Ac, s, hi_d, lo_d, z_min, fs):
                found = True
                break
        if not found:
            return False, stale_bound, 0.0, 0.0
        fs[_OUT_HITS] += out
        fs[_ENTER_HITS] += enter
        cen = fs[_CEN]
        # Σ_free a_k r_k with a_k = A_c − s d_k, r_k = c + d_k; Σ_free a_k²
        lin = n * Ac * cen + Ac * s1 - s * cen * s1 - s * ss + fs[_HR]
        sq = n * Ac * Ac - 2.0 * Ac * s * s1 + s * s * ss + fs[_H2]
        value = lin + 0.5 * lam * ww + mu * math.sqrt(max(sq, 0.0)) + sigma / eta
        A = Ac + s * cen
        g = np.empty(d)
        # P₁, P₂ with seller i's term moved (still free) or taken out (at 0), and
        # the entering seller's added
        c1 = -out * dl[i]
        c2 = (1.0 - out) * delta * dl[i] - out * di * dl[i]
        e1 = dl[z] if enter == 1.0 else 0.0
        e2 = e1 * dz if enter == 1.0 else 0.0
        zz = max(z, 0)
        for j in range(d):
            g[j] = (
                lam * w[j]
                + Ac * (P[j] + c1 * X[i, j] + e1 * X[zz, j])
                - s * (P[d + j] + c2 * X[i, j] + e2 * X[zz, j])
                + P[2 * d + j]
            )
    fs[_HITS] += 1.0  # renewals taken from the summary (observed by the tests)
    gg = 0.0
    for j in range(d):
        gg += g[j] * g[j]
    return True, max(value - gg / (2.0 * modulus), stale_bound), A, s


@_jit
def stale_search(
    skeys: FloatArray,
    sbounds: FloatArray,
    slbs: FloatArray,
    e_inc: float,
    b_inc: float,
    best: float,
    rtol: float,
    max_cells: int,
    sigma: float,
    gamma: float,
    modulus: float,
    X: FloatArray,
    psi: FloatArray,
    eps_max: FloatArray,
    kcap: float,
    mu: float,
    lam: float,
    W: FloatArray,
    A0: FloatArray,
    S0: FloatArray,
    L: FloatArray,
    DL: FloatArray,
    STATUS: NDArray[np.uint8],
    FS: FloatArray,
    PS: FloatArray,
    i: int,
    psi_base_i: float,
) -> tuple[int, float, int]:
    """``(code, lower, n)``: ``certify_range``'s branch-and-bound over the stale
    nodes ``skeys`` (sorted, bounds ``sbounds``, cached cell bounds ``slbs``) with
    the incumbent at ``e_inc`` (bound ``b_inc``, value ``best``) inserted.

    Row ``j`` of ``W, A0, S0, L, DL`` is stale node ``j``'s ``w``, a-step multipliers
    and ``ℓ, ℓ'`` at ``w``; of ``STATUS, FS, PS`` its one-seller summary
    (:func:`renewal_bound_one`, for ``psi`` the base's but at seller ``i ≥ 0``, whose
    base value is ``psi_base_i``). ``lower`` is the certified lower bound over the range and
    ``n`` the renewals, as ``certify_range`` returns them; with
    :data:`STALE_HANDBACK` both are meaningless and the caller runs the Python loop.
    """
    ns = skeys.size
    ncs = ns - 1
    k = int(np.searchsorted(skeys, e_inc))
    replace = k < ns and skeys[k] == e_inc
    K = ns if replace else ns + 1
    keys = np.empty(K)
    bnd = np.empty(K)
    row = np.empty(K, dtype=np.int64)
    stale = np.zeros(K, dtype=np.bool_)
    pos = np.empty(ns, dtype=np.int64)  # stale node j's index in the partition
    for j in range(ns):
        p = j if (j < k or replace) else j + 1
        pos[j] = p
        keys[p] = skeys[j]
        bnd[p] = sbounds[j]
        row[p] = j
        stale[p] = True
    keys[k] = e_inc
    bnd[k] = b_inc
    row[k] = -1
    stale[k] = False
    # the stale cells an incumbent at e_inc touches: (skeys[k−1], skeys[k]] and the next
    fresh = np.ones(ncs, dtype=np.bool_)
    for j in range(max(k - 1, 0), min(k + 1, ncs)):
        fresh[j] = False
    tgt = best - rtol * (1.0 + abs(best))
    nc = K - 1
    cur = np.zeros(nc)  # each partition cell's current bound (valid where in_cur)
    in_cur = np.zeros(nc, dtype=np.bool_)
    cap = nc + 4 * (max_cells + 2)
    hlb = np.empty(cap)  # the heap's entries (lb, cell), unordered; live where hon
    hcell = np.empty(cap, dtype=np.int64)
    hon = np.zeros(cap, dtype=np.bool_)
    nh = 0
    untouched = np.zeros(nc, dtype=np.bool_)
    for j in range(ncs):
        if not fresh[j]:
            continue
        c = pos[j]
        untouched[c] = True
        if slbs[j] < tgt:
            cur[c] = slbs[j]
            in_cur[c] = True
            hlb[nh], hcell[nh], hon[nh] = slbs[j], c, True
            nh += 1
    for c in range(nc):
        if not untouched[c]:
            lb = two_point_bound(sigma, gamma, keys[c], bnd[c], keys[c + 1], bnd[c + 1])
            if math.isnan(lb):
                return STALE_HANDBACK, 0.0, 0
            cur[c] = lb
            in_cur[c] = True
            hlb[nh], hcell[nh], hon[nh] = lb, c, True
            nh += 1
    n = 0
    while n < max_cells:
        top = -1
        for t in range(nh):  # the least (lb, η₁), as heapq pops it
            if hon[t] and (
                top < 0
                or hlb[t] < hlb[top]
                or (hlb[t] == hlb[top] and keys[hcell[t]] < keys[hcell[top]])
            ):
                top = t
        if top < 0:
            break
        lb, c = hlb[top], hcell[top]
        if not (in_cur[c] and cur[c] == lb):
            hon[top] = False  # superseded
            continue
        if lb >= tgt:
            break
        hon[top] = False
        if not (stale[c] or stale[c + 1]):
            return STALE_HANDBACK, 0.0, 0  # a renewed end to solve, or a bisection
        for p in (c, c + 1):
            if not stale[p]:
                continue
            n += 1
            j = row[p]
            eta = keys[p]
            ok, nb, _, _ = renewal_bound_one(
                X, psi, eps_max, kcap, gamma * eta, eta, mu, lam, sigma, W[j],
                A0[j], S0[j], L[j], DL[j], modulus, bnd[p], i, psi_base_i,
                STATUS[j], FS[j], PS[j],
            )  # fmt: skip
            if not ok or math.isnan(nb):
                return STALE_HANDBACK, 0.0, 0
            bnd[p] = nb
            stale[p] = False
            for cc in (p - 1, p):
                if 0 <= cc < nc:
                    v = two_point_bound(
                        sigma, gamma, keys[cc], bnd[cc], keys[cc + 1], bnd[cc + 1]
                    )
                    if math.isnan(v):
                        return STALE_HANDBACK, 0.0, 0
                    if nh == cap:
                        return STALE_HANDBACK, 0.0, 0
                    cur[cc] = v
                    in_cur[cc] = True
                    hlb[nh], hcell[nh], hon[nh] = v, cc, True
                    nh += 1
    lower = best
    for t in range(nh):
        if hon[t] and in_cur[hcell[t]] and cur[hcell[t]] == hlb[t]:
            lower = min(lower, hlb[t])
    for j in range(ncs):  # fresh cells above the target, never entered
        if fresh[j] and not (slbs[j] < tgt) and not in_cur[pos[j]]:
            lower = min(lower, slbs[j])
    return STALE_DONE, lower, n
