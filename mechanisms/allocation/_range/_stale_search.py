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
paths compute the same bounds to the bit.
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
    m = losses.size
    r = np.empty(m)
    h = np.empty(m)
    for i in range(m):
        r[i] = losses[i] + q * psi[i]
        h[i] = min(kcap, eps_max[i] / eta)
    ok, a, A, s, value = _point_from_r(r, h, mu, A0, s0, w, lam, sigma / eta)
    if not ok:
        return False, stale_bound, A0, s0
    g = _weighted_gradient(X, a, dl, lam, w)
    gg = 0.0
    for j in range(g.size):
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
) -> tuple[int, float, int]:
    """``(code, lower, n)``: ``certify_range``'s branch-and-bound over the stale
    nodes ``skeys`` (sorted, bounds ``sbounds``, cached cell bounds ``slbs``) with
    the incumbent at ``e_inc`` (bound ``b_inc``, value ``best``) inserted.

    Row ``j`` of ``W, A0, S0, L, DL`` is stale node ``j``'s ``w``, a-step multipliers
    and ``ℓ, ℓ'`` at ``w``. ``lower`` is the certified lower bound over the range and
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
            ok, nb, _, _ = renewal_bound(
                X, psi, eps_max, kcap, gamma * eta, eta, mu, lam, sigma, W[j],
                A0[j], S0[j], L[j], DL[j], modulus, bnd[p],
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
