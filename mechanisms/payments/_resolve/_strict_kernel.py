"""The strict-mode one-seller re-solve, compiled (spec ``mechanism.md`` §4.2, §4.4, §5).

In mode ``strict`` the search value does not depend on the records or on ``w``
(spec §4.4): with ``c`` the public loss constant and ``Σ a_i = 1``,

    V(a, η) = c·Σa + μ‖a‖₂ + σ/η + γη Σ_i Ψ_i a_i,   a ∈ C(η),                (4.1)

where ``C(η)`` caps every weight at ``h(η) = min(k/m, E/η)``: here every seller has
the same ``ε^max = E`` (possibly ``∞``), so the caps are equal at every ``η``. The
profile ``P(η) = min_a V`` has the unique minimiser ``a*(η)`` (``μ > 0``), and by the
envelope theorem ``P'(η) = γΨᵀa* − σ/η² + (h/η)·Σ_capped β_j`` where ``E/η < k/m``
(``β_j = (A − s r_j − h)/s`` the capped sellers' cap multipliers: the cap
``E/η`` tightens as ``η`` grows), ``γΨᵀa* − σ/η²`` where the caps are ``k/m`` (the
η-condition of spec §4.2).

:func:`strict_resolve_kernel` runs, for seller ``i``'s ``Ψ_i`` changed, the same rule as
the full search of :func:`mechanisms.allocation._eta_search.solve_allocation`: the
certified global minimum of ``P`` over ``[η_lo, η_hi]``, at a root of ``P'`` (or an end
of the range where ``P`` still falls outward). Every point is one exact a-step (problem
(4.2); :mod:`._sorted_astep` in O(log m), else the O(m) kernel
:func:`mechanisms.allocation._weights_kernel.weights_kernel`, warm-started), so each
node's value is exact. A cell ``[η₁, η₂]``'s lower bound is the two-point bound of
:func:`mechanisms.allocation._range._two_point.two_point_bound`, which holds for
``σ/η + min_{a∈C} (affine in η)`` over a fixed set ``C``: where the caps do not move on
the cell, from ``P(η₁)`` and ``P(η₂)``; where they do (``E/η₂ < k/m``), ``C(η) ⊆ C(η₁)``
on the cell, so ``P`` lies above the same problem over ``C(η₁)``, whose value at ``η₂``
is one more a-step (with the caps ``h(η₁)``).

Stale grid values. ``V(a, η)`` is non-decreasing in ``Ψ_i`` at every ``a ∈ C(η)``
(its coefficient ``γηa_i ≥ 0``), so ``P(η)`` — over ``C(η)`` or any fixed set — is
non-decreasing in ``Ψ_i``. A payment sweep raises the report, so where ``Ψ_i`` is at
least the base's, the base's values ``P_base(η_j)`` at the grid points (and over
``C(η_{j−1})`` at ``η_j``, for the cells whose caps move; :func:`grid_states`) are
lower bounds on the re-solve's. The two-point bound is non-decreasing in its end
values (it is ``min_{η, S ≥ 0}`` of the larger of two functions, each increasing in
one end value), so a cell bounded from stale end values has a valid lower bound. Such
a node is *stale*: its value is that bound, its slope unknown. Steps:

1. the coarse grid (the full search's, warm-started from the base's multipliers
   there). Where ``Ψ_i`` is below the base's, every grid point is evaluated. Else
   every grid point enters stale, and only the one with the lowest stale value and
   its neighbours are evaluated;
2. the local minimum in the best evaluated point's basin: a bracket of ``P'``
   changing sign from ``−`` to ``+``, then safeguarded secant steps in ``log η`` to
   floating-point resolution (the full search's polish stops at
   ``|T(η) − η| ≤ 10⁻¹³η``, the same root); a stale point the descent looks at is
   evaluated first;
3. best-first branch-and-bound over the cells between points until every cell's bound
   is within ``rtol·(1 + |V|)`` of the incumbent (always an evaluated point). The
   lowest cell is bisected, or, when an end is stale, that end is evaluated instead
   (at the same ``η``, re-bounding the cells on both sides); a point that beats the
   incumbent starts a new local minimisation there.

``ok = False`` (an a-step failed its check, the bound did not close within
``max_cells`` solves) sends the caller to the full search.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._range._two_point import two_point_bound
from mechanisms.allocation._weights_kernel import _jit, weights_kernel
from mechanisms.payments._resolve._sorted_astep import sorted_value

FloatArray = NDArray[np.float64]

OUT_SIZE = 11
"""``strict_resolve_kernel``'s output: ``ok, η, A, s, value, lower bound, P'(η),
Ψᵀa, a_i, n_evals, h(η)``."""

_COLS = 10
"""A node: ``η, V, Ψᵀa, A, s, a_i, P'(η)``, the lower bound of the cell from this
node to the next, the stale flag (1: ``V`` is the base's ``P(η)``, a lower bound;
``Ψᵀa, a_i, P'`` unknown; ``A, s`` the base's multipliers) and, for a stale grid node
``η_j``, the base's value at ``η_j`` over ``C(η_{j−1})`` (the right end of a cell
whose caps move)."""

_STALE = 8
_STALE_W = 9


@_jit
def cap_at(eta: float, kcap: float, e_max: float) -> float:
    """``h(η) = min(k/m, E/η)``."""
    return min(kcap, e_max / eta)


@_jit
def _evaluate(
    psi: FloatArray,
    i: int,
    psi_i: float,
    eta: float,
    c: float,
    gamma: float,
    mu: float,
    sigma: float,
    hc: float,
    h: FloatArray,
    r: FloatArray,
    A0: float,
    s0: float,
) -> tuple[bool, float, float, float, float, float, float]:
    """``(ok, V, Ψᵀa, A, s, a_i, held)`` of the exact a-step at ``η`` with
    ``Ψ_i = psi_i`` and every cap ``hc``: ``r_j = c + (γη)Ψ_j`` as the full search
    builds it, ``a = clip(A − s r, 0, hc)``, ``held`` as
    :func:`._sorted_astep.sorted_value` (O(m))."""
    m = psi.size
    q = gamma * eta
    for j in range(m):
        r[j] = c + q * psi[j]
        h[j] = hc
    r[i] = c + q * psi_i
    ok, A, s = weights_kernel(r, h, mu, A0, s0)
    if not ok:
        return False, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    tot = 0.0
    sq = 0.0
    pa = 0.0
    held = 0.0
    for j in range(m):
        v = A - s * r[j]
        a = min(max(v, 0.0), hc)
        tot += a
        sq += a * a
        pj = psi_i if j == i else psi[j]
        pa += pj * a
        if v >= hc:
            held += (v - hc) / s
    a_i = min(max(A - s * r[i], 0.0), hc)
    value = c * tot + mu * math.sqrt(sq) + sigma / eta + gamma * eta * pa
    if not math.isfinite(value):
        return False, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    return True, value, pa, A, s, a_i, held


@_jit
def _value_at(
    sc: tuple[FloatArray, FloatArray, float, int, FloatArray, int, float],
    eta: float,
    c: float,
    gamma: float,
    mu: float,
    sigma: float,
    hc: float,
    h: FloatArray,
    r: FloatArray,
    A0: float,
    s0: float,
) -> tuple[bool, float, float, float, float, float, float]:
    """:func:`._sorted_astep.sorted_value` (O(log m)) with every cap ``hc``; where it
    declines, the O(m) :func:`_evaluate` from the same warm start.
    ``sc = (ps, P, ref, ri, psi, i, psi_i)``: the sorted base ``Ψ`` with its prefix
    sums, seller ``i``'s rank there, the base ``Ψ`` in seller order and the changed
    ``Ψ_i``."""
    ps, P, ref, ri, psi, i, psi_i = sc
    out = sorted_value(ps, P, ref, ri, psi_i, eta, c, gamma, mu, sigma, hc, A0, s0)
    if out[0]:
        return out
    return _evaluate(psi, i, psi_i, eta, c, gamma, mu, sigma, hc, h, r, A0, s0)


@_jit
def _eval_node(
    sc: tuple[FloatArray, FloatArray, float, int, FloatArray, int, float],
    eta: float,
    c: float,
    gamma: float,
    mu: float,
    sigma: float,
    kcap: float,
    e_max: float,
    h: FloatArray,
    r: FloatArray,
    A0: float,
    s0: float,
    nodes: FloatArray,
    n: int,
    row: FloatArray,
) -> tuple[bool, int, int, float, float]:
    """Evaluate ``P`` at ``η`` (caps ``h(η)``), insert the node (fresh; it replaces a
    node at the same ``η``) and re-bound the two cells next to it:
    ``(ok, n, position, V, P'(η))``."""
    hc = cap_at(eta, kcap, e_max)
    ok, v, pa, A, s, a_i, held = _value_at(
        sc, eta, c, gamma, mu, sigma, hc, h, r, A0, s0
    )
    if not ok:
        return False, n, -1, 0.0, 0.0
    slope = gamma * pa - sigma / (eta * eta)
    if hc < kcap:  # the cap E/η tightens with η
        slope += held * hc / eta
    row[0], row[1], row[2], row[3], row[4], row[5] = eta, v, pa, A, s, a_i
    row[6] = slope
    row[7] = np.inf
    row[8] = 0.0
    row[9] = v
    n, k = _insert(nodes, n, eta, row)
    for cell in (k - 1, k):
        if 0 <= cell < n - 1:
            ok = _bound_cell(nodes, cell, sc, c, gamma, mu, sigma, kcap, e_max, h, r)
            if not ok:
                return False, n, k, v, slope
    return True, n, k, v, slope


@_jit
def _bound_cell(
    nodes: FloatArray,
    k: int,
    sc: tuple[FloatArray, FloatArray, float, int, FloatArray, int, float],
    c: float,
    gamma: float,
    mu: float,
    sigma: float,
    kcap: float,
    e_max: float,
    h: FloatArray,
    r: FloatArray,
) -> bool:
    """The lower bound of ``P`` on the cell from node ``k`` to ``k + 1`` (module
    docstring), stored in ``nodes[k, 7]``; ``False`` when the extra a-step of a cell
    whose caps move failed. A stale end's value is a lower bound on ``P`` there, and
    the two-point bound is non-decreasing in its end values, so the cell's bound
    holds; a stale right end ``η_j`` of a cell whose caps move takes the base's value
    over ``C(η_{j−1}) ⊇ C(η₁)`` (every grid node is a node, so ``η₁ ≥ η_{j−1}``)."""
    e1, l1 = nodes[k, 0], nodes[k, 1]
    e2, l2 = nodes[k + 1, 0], nodes[k + 1, 1]
    h1 = cap_at(e1, kcap, e_max)
    if cap_at(e2, kcap, e_max) < h1 and nodes[k + 1, _STALE] != 0.0:
        l2 = nodes[k + 1, _STALE_W]
    elif cap_at(e2, kcap, e_max) < h1:
        # the same problem over C(η₁) at η₂, warm from node k + 1
        ok, l2, _, _, _, _, _ = _value_at(
            sc, e2, c, gamma, mu, sigma, h1, h, r, nodes[k + 1, 3], nodes[k + 1, 4]
        )
        if not ok:
            return False
    nodes[k, 7] = two_point_bound(sigma, gamma, e1, l1, e2, l2)
    return True


@_jit
def grid_states(
    psi: FloatArray,
    grid: FloatArray,
    c: float,
    gamma: float,
    mu: float,
    sigma: float,
    kcap: float,
    e_max: float,
) -> tuple[bool, FloatArray, FloatArray, FloatArray, FloatArray]:
    """``(ok, A, s, V, W)`` at every grid ``η_j`` for ``Ψ`` as given, top down as the
    full search's grid: the a-step multipliers (caps ``h(η_j)``; the warm starts of
    every re-solve), the profile ``V_j = P(η_j)``, and ``W_j`` the value of the same
    problem over ``C(η_{j−1})`` at ``η_j`` (``V_j`` where the caps do not move on
    ``[η_{j−1}, η_j]``; ``W_0 = V_0``). Both are non-decreasing in every ``Ψ_i``
    (``γη a_i ≥ 0`` at every ``a``), so they bound a re-solve's values from below
    wherever its ``Ψ_i`` is at least the given one (:func:`strict_resolve_kernel`)."""
    m = psi.size
    n = grid.size
    h = np.empty(m)
    r = np.empty(m)
    As = np.zeros(n)
    ss = np.zeros(n)
    Vs = np.zeros(n)
    Ws = np.zeros(n)
    A0 = 0.0
    s0 = 0.0
    for k in range(n - 1, -1, -1):
        hc = cap_at(grid[k], kcap, e_max)
        ok, v, _, A, s, _, _ = _evaluate(
            psi, 0, psi[0], grid[k], c, gamma, mu, sigma, hc, h, r, A0, s0
        )
        if not ok:
            return False, As, ss, Vs, Ws
        As[k] = A
        ss[k] = s
        Vs[k] = v
        Ws[k] = v
        if k > 0:
            h1 = cap_at(grid[k - 1], kcap, e_max)
            if hc < h1:
                ok, w, _, _, _, _, _ = _evaluate(
                    psi, 0, psi[0], grid[k], c, gamma, mu, sigma, h1, h, r, A, s
                )
                if not ok:
                    return False, As, ss, Vs, Ws
                Ws[k] = w
        A0 = A
        s0 = s
    return True, As, ss, Vs, Ws


@_jit
def _insert(nodes: FloatArray, n: int, eta: float, row: FloatArray) -> tuple[int, int]:
    """Insert ``row`` (``η, V, Ψᵀa, A, s, a_i``) into the ``η``-sorted ``nodes[:n]``;
    ``(n + 1, position)`` (an ``η`` already present is replaced, ``(n, position)``)."""
    k = 0
    while k < n and nodes[k, 0] < eta:
        k += 1
    if k < n and nodes[k, 0] == eta:
        nodes[k, :] = row
        return n, k
    for t in range(n, k, -1):
        nodes[t, :] = nodes[t - 1, :]
    nodes[k, :] = row
    return n + 1, k


@_jit
def strict_resolve_kernel(
    sc: tuple[FloatArray, FloatArray, float, int, FloatArray, int, float],
    grid: FloatArray,
    grid_A: FloatArray,
    grid_s: FloatArray,
    grid_V: FloatArray,
    grid_W: FloatArray,
    stale: bool,
    c: float,
    gamma: float,
    mu: float,
    sigma: float,
    kcap: float,
    e_max: float,
    rtol: float,
    max_cells: int,
) -> FloatArray:
    """The rule's optimum with seller ``i``'s ``Ψ_i`` changed (module docstring;
    ``sc`` as :func:`_value_at`); caps ``h(η) = min(k/m, E/η)``, ``μ > 0``.
    ``grid_A, grid_s, grid_V, grid_W``: the base's :func:`grid_states`; ``stale``:
    the new ``Ψ_i`` is at least the base's, so ``grid_V, grid_W`` are lower bounds.
    Returns ``OUT_SIZE`` values (``out[0] = 0``: not ok)."""
    out = np.zeros(OUT_SIZE)
    m = sc[4].size
    n_grid = grid.size
    h = np.empty(m)
    r = np.empty(m)
    cap = n_grid + max_cells + 8 * 300 + 8  # every evaluation is a node
    nodes = np.empty((cap, _COLS))
    row = np.empty(_COLS)
    n = 0
    n_evals = 0
    # 1. the coarse grid, each point warm-started from the base's multipliers there
    if stale:
        # every node stale, then fresh at the lowest and its neighbours
        for k in range(n_grid):
            nodes[k, 0] = grid[k]
            nodes[k, 1] = grid_V[k]
            nodes[k, 2] = np.nan
            nodes[k, 3] = grid_A[k]
            nodes[k, 4] = grid_s[k]
            nodes[k, 5] = np.nan
            nodes[k, 6] = np.nan
            nodes[k, 7] = np.inf
            nodes[k, _STALE] = 1.0
            nodes[k, _STALE_W] = grid_W[k]
        n = n_grid
        for k in range(n - 1):
            _bound_cell(nodes, k, sc, c, gamma, mu, sigma, kcap, e_max, h, r)
        j = 0
        for k in range(1, n):
            if grid_V[k] < grid_V[j]:
                j = k
        for k in range(max(j - 1, 0), min(j + 2, n)):
            ok, n_evals = _refresh(
                nodes, n, k, sc, c, gamma, mu, sigma, kcap, e_max, h, r, row, n_evals
            )
            if not ok:
                return out
    else:
        for k in range(n_grid):
            ok, n, _, _, _ = _eval_node(
                sc, grid[k], c, gamma, mu, sigma, kcap, e_max, h, r, grid_A[k],
                grid_s[k], nodes, n, row,
            )  # fmt: skip
            n_evals += 1
            if not ok:
                return out
    best = -1
    for k in range(n):
        if nodes[k, _STALE] == 0.0 and (best < 0 or nodes[k, 1] < nodes[best, 1]):
            best = k
    # 2.–3. local minimum in the best point's basin, then branch-and-bound
    start = best
    for _round in range(8):
        ok, n, best, n_evals = _local_min(
            nodes, n, start, sc, c, gamma, mu, sigma, kcap, e_max, h, r, n_evals
        )
        if not ok:
            return out
        closed = False
        better = -1
        while n_evals < n_grid + max_cells:
            vb = nodes[best, 1]
            target = vb - rtol * (1.0 + abs(vb))
            low, low_b = _lowest_cell(nodes, n)
            if low < 0 or low_b >= target:
                closed = True
                break
            if nodes[low, _STALE] != 0.0 or nodes[low + 1, _STALE] != 0.0:
                # refresh a stale end (the lower one of two) instead of bisecting
                st = low + 1
                if nodes[low, _STALE] != 0.0 and (
                    nodes[low + 1, _STALE] == 0.0 or nodes[low, 1] <= nodes[low + 1, 1]
                ):
                    st = low
                ok, n_evals = _refresh(
                    nodes, n, st, sc, c, gamma, mu, sigma, kcap, e_max, h, r, row,
                    n_evals,
                )  # fmt: skip
                if not ok:
                    return out
                if nodes[st, 1] < target:
                    better = st
                    break
                continue
            e1 = nodes[low, 0]
            e2 = nodes[low + 1, 0]
            mid = math.sqrt(e1 * e2)
            if not e1 < mid < e2:
                break  # below floating resolution: the bound stands (not closed)
            st = low if nodes[low, 1] <= nodes[low + 1, 1] else low + 1
            ok, n, k_new, v, _ = _eval_node(
                sc, mid, c, gamma, mu, sigma, kcap, e_max, h, r, nodes[st, 3],
                nodes[st, 4], nodes, n, row,
            )  # fmt: skip
            n_evals += 1
            if not ok:
                return out
            if k_new <= best:
                best += 1
            if v < vb - rtol * (1.0 + abs(vb)):
                better = k_new
                break
        if better >= 0:
            start = better
            continue
        if not closed:
            return out
        _, lower = _lowest_cell(nodes, n)
        lower = min(lower, nodes[best, 1])
        eta = nodes[best, 0]
        out[0] = 1.0
        out[1] = eta
        out[2] = nodes[best, 3]
        out[3] = nodes[best, 4]
        out[4] = nodes[best, 1]
        out[5] = lower
        out[6] = nodes[best, 6]
        out[7] = nodes[best, 2]
        out[8] = nodes[best, 5]
        out[9] = n_evals
        out[10] = cap_at(eta, kcap, e_max)
        return out
    return out


@_jit
def _refresh(
    nodes: FloatArray,
    n: int,
    k: int,
    sc: tuple[FloatArray, FloatArray, float, int, FloatArray, int, float],
    c: float,
    gamma: float,
    mu: float,
    sigma: float,
    kcap: float,
    e_max: float,
    h: FloatArray,
    r: FloatArray,
    row: FloatArray,
    n_evals: int,
) -> tuple[bool, int]:
    """Make node ``k`` fresh: a stale node is evaluated at its ``η`` (warm from the
    base's multipliers there), in place, and the cells on both sides re-bounded;
    ``(ok, n_evals)``. A fresh node is left as it is."""
    if nodes[k, _STALE] == 0.0:
        return True, n_evals
    ok, _, _, _, _ = _eval_node(
        sc, nodes[k, 0], c, gamma, mu, sigma, kcap, e_max, h, r, nodes[k, 3],
        nodes[k, 4], nodes, n, row,
    )  # fmt: skip
    return ok, n_evals + 1


@_jit
def _lowest_cell(nodes: FloatArray, n: int) -> tuple[int, float]:
    """The cell between consecutive nodes with the lowest bound, and that bound
    (``(−1, ∞)`` with fewer than two nodes)."""
    low = -1
    low_b = np.inf
    for k in range(n - 1):
        b = nodes[k, 7]
        if b < low_b:
            low_b = b
            low = k
    return low, low_b


@_jit
def _slope(nodes: FloatArray, k: int) -> float:
    """``P'(η_k)`` at node ``k`` (module docstring)."""
    return float(nodes[k, 6])


@_jit
def _local_min(
    nodes: FloatArray,
    n: int,
    start: int,
    sc: tuple[FloatArray, FloatArray, float, int, FloatArray, int, float],
    c: float,
    gamma: float,
    mu: float,
    sigma: float,
    kcap: float,
    e_max: float,
    h: FloatArray,
    r: FloatArray,
    n_evals: int,
) -> tuple[bool, int, int, int]:
    """The local minimum of ``P`` in the basin of node ``start`` (an evaluated node;
    the result is an evaluated point no worse than it): ``(ok, n, index of the
    minimum, n_evals)``. A stale neighbour is evaluated before its value is compared.

    With ``P'(start) < 0`` (else mirrored): the right neighbour ``R`` has
    ``P(R) ≥ P(start)`` or is a better point; between a point where ``P`` falls and one
    no lower, ``P`` has a local minimum. The bracket is halved (in ``log η``) until
    ``P' ≥ 0`` at its right end; then safeguarded secant steps on ``P'`` (Illinois)
    shrink ``[L, R]`` with ``P'(L) < 0 ≤ P'(R)`` to floating-point resolution. At an
    end of the range where ``P`` still falls outward, that end is the minimum.
    """
    row = np.empty(_COLS)
    L = start
    d0 = _slope(nodes, L)
    if d0 == 0.0:
        return True, n, L, n_evals
    right = d0 < 0.0
    # walk in the descent direction to a neighbour that is not lower, or the end
    while True:
        nb = L + 1 if right else L - 1
        if nb < 0 or nb >= n:
            return True, n, L, n_evals  # P falls to the end of the range
        ok, n_evals = _refresh(
            nodes, n, nb, sc, c, gamma, mu, sigma, kcap, e_max, h, r, row, n_evals
        )
        if not ok:
            return False, n, L, n_evals
        if nodes[nb, 1] < nodes[L, 1]:
            L = nb
            d = _slope(nodes, L)
            if d == 0.0:
                return True, n, L, n_evals
            if (d < 0.0) != right:
                break  # slope changed sign at a lower point: bracket [nb±1, nb]
            continue
        break
    # bracket ends as η values: x_l (P' < 0 side) and x_r (P' ≥ 0 side)
    nb = L + 1 if right else L - 1
    # (if the slope at L already changed sign, the bracket is [previous, L])
    dL = _slope(nodes, L)
    if (dL < 0.0) != right:
        nb = L - 1 if right else L + 1
        a_k, b_k = nb, L
    else:
        a_k, b_k = L, nb
    # a_k: on the descent side of the minimum (P' has the sign of the walk),
    # b_k: beyond it or the wall (P(b) ≥ P(a) or P' changed sign)
    ea = nodes[a_k, 0]
    eb = nodes[b_k, 0]
    fa = _slope(nodes, a_k)
    fb = _slope(nodes, b_k)
    va = nodes[a_k, 1]
    for _ in range(200):
        if (fa < 0.0) != (fb < 0.0) or fb == 0.0:
            break
        # both slopes descend toward b, and P(b) ≥ P(a): halve toward a
        mid = math.sqrt(ea * eb)
        if not (min(ea, eb) < mid < max(ea, eb)):
            break
        ok, n, k_new, v, fm = _eval_node(
            sc, mid, c, gamma, mu, sigma, kcap, e_max, h, r, nodes[a_k, 3],
            nodes[a_k, 4], nodes, n, row,
        )  # fmt: skip
        n_evals += 1
        if not ok:
            return False, n, a_k, n_evals
        if k_new <= a_k:
            a_k += 1
        if k_new <= b_k:
            b_k += 1
        if fm == 0.0:
            return True, n, k_new, n_evals
        if (fm < 0.0) != (fa < 0.0):
            b_k, eb, fb = k_new, mid, fm
        elif v < va:
            a_k, ea, fa, va = k_new, mid, fm, v
        else:
            b_k, eb, fb = k_new, mid, fm
    if (fa < 0.0) == (fb < 0.0) and fb != 0.0:
        return True, n, a_k if nodes[a_k, 1] <= nodes[b_k, 1] else b_k, n_evals
    # Illinois on P'(exp x) between a (sign of fa) and b (opposite sign)
    xa = math.log(ea)
    xb = math.log(eb)
    side = 0
    for _ in range(100):
        if fb == 0.0:
            break
        x = xb - fb * (xb - xa) / (fb - fa)
        if not (min(xa, xb) < x < max(xa, xb)):
            x = 0.5 * (xa + xb)
        eta = math.exp(x)
        if not (min(ea, eb) < eta < max(ea, eb)):
            break  # the bracket is at floating-point resolution
        k_st = a_k if abs(x - xa) <= abs(x - xb) else b_k
        ok, n, k_new, v, fm = _eval_node(
            sc, eta, c, gamma, mu, sigma, kcap, e_max, h, r, nodes[k_st, 3],
            nodes[k_st, 4], nodes, n, row,
        )  # fmt: skip
        n_evals += 1
        if not ok:
            return False, n, a_k, n_evals
        if k_new <= a_k:
            a_k += 1
        if k_new <= b_k:
            b_k += 1
        if fm == 0.0:
            return True, n, k_new, n_evals
        if (fm < 0.0) == (fb < 0.0):
            b_k, xb, eb, fb = k_new, x, eta, fm
            if side == -1:
                fa *= 0.5
            side = -1
        else:
            a_k, xa, ea, fa = k_new, x, eta, fm
            if side == 1:
                fb *= 0.5
            side = 1
        if abs(eb - ea) <= 4e-16 * max(ea, eb):
            break
    # the end with the smaller |P'| (its value is within rounding of the other's)
    fa_t = abs(_slope(nodes, a_k))
    fb_t = abs(_slope(nodes, b_k))
    return True, n, a_k if fa_t <= fb_t else b_k, n_evals
