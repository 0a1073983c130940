"""The payment re-solve's branch-and-bound, compiled.

A payment re-solve raises one seller's ``Ψ_i`` and re-runs the certified range search
of :mod:`mechanisms.allocation._range._candidate_range` from the base's seed
(:func:`~mechanisms.allocation._range._candidate_range.resolve_one_seller`). Where every cap
is ``k/m`` on the whole range and ``μ > 0`` — the payments of a large market — each
of its points is an O(1) one-seller or shifted-``η`` update of a cached summary
(:func:`~mechanisms.allocation._weights_kernel.one_seller_value`,
:func:`~mechanisms.allocation._weights_kernel.shifted_value`) and each cell bound the
closed-form chord bound, so the search is about a hundred O(1) steps whose cost in
Python is the interpreter's (measured at ``m = 10⁴``: 0.5 ms per re-solve, ~3 µs a
step, three quarters of all payment time). :func:`one_seller_search` runs the same
search in one compiled call:

- the same best-first order: cells ordered by ``(bound, push counter)``, a strict
  total order, so the pop sequence is the one of :mod:`heapq`;
- the same points: the seed's stale cells renewed once per ``(model, η)`` key,
  the geometric midpoint ``√(η₁η₂)`` bisection, the stop at the target
  ``v − rtol(1 + |v|)``, the unsplittable cells' bounds kept in the certificate;
- the same evaluation per point (``_Search.evaluate`` and ``_Search._one_seller``):
  a cached summary of ``(j, η)``, else the nearest cached ``η`` of model ``j``
  shifted, else a summary built on the key's second visit, else the O(m) kernel;
- the same polish (the safeguarded Illinois secant on ``p_j'`` in ``log η``).

Its summaries live in a :class:`CompiledCache` (one per base and process, as the
Python search's ``OneSellerCache``), filled by the same visit rule, so the same
sequence of re-solves takes the same evaluation paths and gives the same floating
point results as the Python search on a fresh ``OneSellerCache``
(``tests/mechanisms/test_one_seller_search.py``). When the O(m) kernel fails (the
NumPy a-step would be needed) the call returns status ``BAIL`` and the caller runs
the Python search.

Measured (``benchmarks/RESULTS.md``): 30–45 µs a re-solve against 0.4–0.6 ms in
Python. The first call compiles the search with the a-step kernels it links, about
15 s, once: numba keeps the machine code on disk (``cache=True``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._weights_kernel import (
    SUMMARY_SIZE,
    chord_argmin,
    one_seller_value,
    range_summary,
    range_value_kernel,
    shifted_value,
)

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

OK, BAIL = 0, 1
# point columns: model, η, value, A, s, slope, fresh (evaluated in this search)
_J, _ETA, _VAL, _A, _S, _SLOPE, _FRESH = range(7)
# cell columns: bound, push counter, model, end point, end point
_LB, _CNT, _CJ, _P1, _P2 = range(5)
# counters: one-seller updates, shifted updates, summaries built, O(m) kernels
N_STATS = 4
# The polish answers the secant's point of least |p_j'| unless the search holds a
# point lower by more than this, relative to 1 + |G| (``_stationary_point``).
STATIONARY_SLACK = 1e-12

try:
    from numba import njit

    _jit = njit(cache=True)  # holds the GIL: the cache is shared by threads
    # the search's bookkeeping helpers, inlined into it in numba's IR (one LLVM
    # module to optimise, which links the a-step kernels once)
    _inline = njit(cache=True, inline="always")
    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - numba is a declared dependency
    HAVE_NUMBA = False


@dataclass(frozen=True)
class KeyTable:
    """An open-addressing hash table ``(model, η) → int`` in arrays (linear probing;
    ``keys_j`` holds the model's index plus one and 0 marks an empty slot, so a new
    table is zero-filled memory that the OS maps in as it is touched: filling the
    visits table with a marker took 7 ms per worker process at Wisconsin's size, two
    allocations' time; ``count[0]`` entries; never more than half full). Numba's typed
    dict would do, but costs seconds more to compile."""

    keys_j: IntArray
    keys_eta: FloatArray
    values: IntArray
    count: IntArray

    @classmethod
    def empty(cls, max_entries: int) -> KeyTable:
        size = 1 << max(4, int(2 * max_entries - 1).bit_length())
        return cls(
            np.zeros(size, dtype=np.int64),
            np.zeros(size),
            np.zeros(size, dtype=np.int64),
            np.zeros(1, dtype=np.int64),
        )


@dataclass(eq=False)
class CompiledCache:
    """Summaries of the base problem (virtual costs ``psi``) at ``(model, η)`` keys
    for :func:`one_seller_search`, as ``OneSellerCache`` for the Python search:
    ``buf[:index.count[0]]`` the summaries, ``index`` key → row, ``visits`` key →
    visits, ``etas[j, :n_etas[j]]`` the sorted ``η`` of model ``j``'s valid
    summaries, ``stats`` counts of the evaluations by kind (``N_STATS``). ``buf`` is
    reserved, not touched, up to ``max_summaries`` rows."""

    psi: FloatArray
    buf: FloatArray
    index: KeyTable
    visits: KeyTable
    etas: FloatArray
    n_etas: IntArray
    stats: IntArray
    max_summaries: int
    max_visits: int

    @classmethod
    def empty(
        cls, psi: FloatArray, n_models: int, max_summaries: int, max_visits: int
    ) -> CompiledCache:
        return cls(
            np.ascontiguousarray(psi, dtype=np.float64),
            np.empty((max_summaries, SUMMARY_SIZE)),
            KeyTable.empty(max_summaries),
            KeyTable.empty(max_visits),
            np.empty((n_models, max_summaries)),
            np.zeros(n_models, dtype=np.int64),
            np.zeros(N_STATS, dtype=np.int64),
            max_summaries,
            max_visits,
        )

    @property
    def n_summaries(self) -> int:
        return int(self.index.count[0])


@dataclass(frozen=True)
class SeedArrays:
    """A :class:`~mechanisms.allocation._range._candidate_range.RangeSeed` as arrays: its
    points (columns as ``_J … _FRESH``; no state → ``A = s = 0``, the cold start),
    its cells ``(bound, model, end, end)``, the index of its best point, and per
    point the first point of its ``(model, η)`` key (the search renews a key once).
    Only seed points are ever renewed: a cell with a stale end is a seed cell."""

    points: FloatArray
    cells: FloatArray
    best: int
    key_of: IntArray


def seed_arrays(seed: Any) -> SeedArrays:
    """The points and cells of ``seed`` (a ``RangeSeed``), each point once."""
    rows: list[list[float]] = []
    where: dict[int, int] = {}

    def add(p: Any) -> int:
        k = where.get(id(p))
        if k is None:
            k = where[id(p)] = len(rows)
            A, s = (p.state.A, p.state.s) if p.state is not None else (0.0, 0.0)
            rows.append([p.j, p.eta, p.value, A, s, p.slope, 0.0])
        return k

    best = add(seed.best)
    cells = [[lb, j, add(p1), add(p2)] for lb, j, p1, p2 in seed.cells]
    first: dict[tuple[float, float], int] = {}
    key_of = [first.setdefault((r[0], r[1]), k) for k, r in enumerate(rows)]
    return SeedArrays(
        np.array(rows, dtype=np.float64).reshape(-1, 7),
        np.array(cells, dtype=np.float64).reshape(-1, 4),
        best,
        np.array(key_of, dtype=np.int64),
    )


def one_seller_search(
    losses: FloatArray,
    psi: FloatArray,
    eps_max: FloatArray,
    base: FloatArray,
    cfg: tuple[float, float, float, float],
    i: int,
    seed: SeedArrays,
    cache: CompiledCache,
    rtol: float,
    max_evals: int,
) -> tuple[int, FloatArray, float, int]:
    """The range search of a one-seller re-solve (module docstring).

    ``psi`` equals ``cache.psi`` except at ``i``, where it is not lower; ``cfg`` is
    ``(γ, σ, μ, k/m)`` with every cap ``k/m`` on the range. Returns ``(status,
    best, lower, n_evals)``: ``best`` the polished optimum as a point row (columns
    ``_J … _SLOPE``), ``lower`` the certified lower bound; status ``BAIL`` when a
    point needed the NumPy a-step (then nothing else is meaningful).
    """
    gamma, sigma, mu, kcap = cfg
    # flat arguments: the dispatcher types arrays and scalars on a fast path, a
    # tuple of arrays through ``numba.typeof`` (~50 µs a call)
    return _search(  # type: ignore[no-any-return]
        losses, psi, cache.psi, eps_max, base, gamma, sigma, mu, kcap, i,
        cache.max_summaries, cache.max_visits, cache.buf, cache.index.count,
        cache.index.keys_j, cache.index.keys_eta, cache.index.values,
        cache.visits.keys_j, cache.visits.keys_eta, cache.visits.values,
        cache.visits.count, cache.etas, cache.n_etas, cache.stats, seed.points,
        seed.cells, seed.best, seed.key_of, rtol, max_evals,
    )  # fmt: skip


if HAVE_NUMBA:

    @_jit
    def _grow(a: FloatArray, n: int) -> FloatArray:
        if n < a.shape[0]:
            return a
        out = np.empty((2 * a.shape[0], a.shape[1]))
        out[:n] = a[:n]
        return out

    @_jit
    def _less(h: FloatArray, x: int, y: int) -> bool:
        lx, ly = h[x, _LB], h[y, _LB]
        return bool(lx < ly or (lx == ly and h[x, _CNT] < h[y, _CNT]))

    @_jit
    def _swap(h: FloatArray, x: int, y: int) -> None:
        for c in range(5):
            t = h[x, c]
            h[x, c] = h[y, c]
            h[y, c] = t

    @_jit
    def _push(  # type: ignore[no-untyped-def]
        h, n, counter, lb, j, p1, p2
    ):
        """Add the cell ``(lb, counter, j, p1, p2)`` to the heap ``h[:n]``."""
        h = _grow(h, n)
        h[n, _LB] = lb
        h[n, _CNT] = counter
        h[n, _CJ] = j
        h[n, _P1] = p1
        h[n, _P2] = p2
        k = n
        while k > 0:
            parent = (k - 1) >> 1
            if not _less(h, k, parent):
                break
            _swap(h, k, parent)
            k = parent
        return h

    @_jit
    def _pop(h: FloatArray, n: int) -> tuple[float, int, int, int]:
        """Remove the least cell of ``h[:n]``: its ``(bound, model, end, end)``."""
        top = (h[0, _LB], int(h[0, _CJ]), int(h[0, _P1]), int(h[0, _P2]))
        last = n - 1
        for c in range(5):
            h[0, c] = h[last, c]
        k = 0
        while True:
            c = 2 * k + 1
            if c >= last:
                break
            if c + 1 < last and _less(h, c + 1, c):
                c += 1
            if not _less(h, c, k):
                break
            _swap(h, k, c)
            k = c
        return top

    @_jit
    def _chord_bound(
        pts: FloatArray, a: int, b: int, base: FloatArray, sigma: float
    ) -> float:
        """``_Search.cell_bound`` where the caps do not move on the cell."""
        e1, e2 = pts[a, _ETA], pts[b, _ETA]
        v1, v2 = pts[a, _VAL], pts[b, _VAL]
        b0 = base[int(pts[a, _J])]
        g1 = v1 - b0 - sigma / e1
        g2 = v2 - b0 - sigma / e2
        slope = (g2 - g1) / (e2 - e1)
        eta = chord_argmin(sigma, slope, e1, e2)
        val = b0 + sigma / eta + g1 + slope * (eta - e1)
        return float(min(val, v1, v2))

    @_jit
    def _insort(etas: FloatArray, n_etas: IntArray, j: int, eta: float) -> None:
        n = n_etas[j]
        k = np.searchsorted(etas[j, :n], eta, side="right")
        for t in range(n, k, -1):
            etas[j, t] = etas[j, t - 1]
        etas[j, k] = eta
        n_etas[j] = n + 1

    @_inline
    def _slot(keys_j: IntArray, keys_eta: FloatArray, j: int, eta: float) -> int:
        """The slot of key ``(j, η)``, or the empty slot where it belongs."""
        mask = keys_j.size - 1
        k = hash((j, eta)) & mask
        while keys_j[k] != 0 and (keys_j[k] != j + 1 or keys_eta[k] != eta):
            k = (k + 1) & mask
        return k

    @_jit
    def _evaluate(j, eta, A0, s0, prob, par, cache):  # type: ignore[no-untyped-def]
        """``_Search.evaluate`` of ``p_j(η)`` from the warm ``(A0, s0)``:
        ``(ok, value, A, s, slope)``; ``ok = False`` where the O(m) kernel failed."""
        losses, psi, cache_psi, eps_max, base = prob
        gamma, sigma, mu, kcap = par[0], par[1], par[2], par[3]
        i, max_summaries, max_visits = par[4], par[5], par[6]
        buf, n_sm, ij, ie, iv, vj, ve, vv, vn, etas, n_etas, stats = cache
        psi_old, psi_new = cache_psi[i], psi[i]
        const = base[j] + sigma / eta
        q = gamma * eta
        ell_i = losses[j, i]
        ok = False
        value = A = s = pa = 0.0
        slot = _slot(ij, ie, j, eta)
        row = iv[slot] if ij[slot] == j + 1 else -1
        if row < 0:  # ``_Search._shifted``: the nearest cached η of model j
            n = n_etas[j]
            if n > 0:
                k = np.searchsorted(etas[j, :n], eta, side="left")
                lo_k = max(k - 1, 0)
                first, second = lo_k, -1
                if min(k + 1, n) - lo_k == 2:  # two neighbours, nearest first
                    if abs(etas[j, lo_k + 1] - eta) < abs(etas[j, lo_k] - eta):
                        first, second = lo_k + 1, lo_k
                    else:
                        second = lo_k + 1
                for t in (first, second):
                    if t < 0 or ok:
                        continue
                    srow = iv[_slot(ij, ie, j, etas[j, t])]
                    ok, value, A, s, pa = shifted_value(
                        buf[srow], i, ell_i, gamma * eta, psi_old, psi_new, mu, const
                    )
                if ok:
                    stats[1] += 1
            if not ok:  # a summary on the key's second visit
                if vn[0] >= max_visits:  # forget one-off points (seller-specific η)
                    vj[:] = 0
                    vn[0] = 0
                vs = _slot(vj, ve, j, eta)
                if vj[vs] == j + 1:
                    vv[vs] += 1
                else:
                    vj[vs], ve[vs], vv[vs] = j + 1, eta, 1
                    vn[0] += 1
                if vv[vs] >= 2 and n_sm[0] < max_summaries:
                    row = n_sm[0]
                    buf[row] = range_summary(
                        losses[j], cache_psi, q, eta, kcap, eps_max, mu, A0, s0
                    )
                    n_sm[0] = row + 1
                    ij[slot], ie[slot], iv[slot] = j + 1, eta, row
                    stats[2] += 1
                    if buf[row, 0] != 0.0:
                        _insort(etas, n_etas, j, eta)
        if not ok and row >= 0:
            ok, value, A, s, pa = one_seller_value(
                buf[row], i, ell_i, q, psi_old, psi_new, mu, const
            )
            if ok:
                stats[0] += 1
        if not ok:
            ok, value, A, s, pa = range_value_kernel(
                losses[j], psi, gamma * eta, eta, kcap, eps_max, mu, const, A0, s0
            )
            stats[3] += 1
        return ok, value, A, s, gamma * pa - sigma / (eta * eta)

    @_inline
    def _point(j, eta, A0, s0, pts, n_pts, best, prob, par, cache):  # type: ignore[no-untyped-def]
        """Evaluate and append ``p_j(η)`` to ``pts`` (``_Search._record``):
        ``(ok, pts, n_pts, best)``."""
        ok, value, A, s, slope = _evaluate(j, eta, A0, s0, prob, par, cache)
        if not ok:
            return False, pts, n_pts, best
        pts = _grow(pts, n_pts)
        pts[n_pts, _J] = j
        pts[n_pts, _ETA] = eta
        pts[n_pts, _VAL] = value
        pts[n_pts, _A] = A
        pts[n_pts, _S] = s
        pts[n_pts, _SLOPE] = slope
        pts[n_pts, _FRESH] = 1.0
        if best < 0 or value < pts[best, _VAL]:
            best = n_pts
        return True, pts, n_pts + 1, best

    @_inline
    def _renew(p, fresh, key_of, pts, n_pts, best, prob, par, cache):  # type: ignore[no-untyped-def]
        """The fresh point of seed point ``p``'s key, evaluated once per search
        from ``p``'s multipliers: ``(ok, index, pts, n_pts, best)``."""
        k = key_of[p]
        if fresh[k] >= 0:
            return True, fresh[k], pts, n_pts, best
        ok, pts, n_pts, best = _point(
            int(pts[p, _J]), pts[p, _ETA], pts[p, _A], pts[p, _S], pts, n_pts, best,
            prob, par, cache,
        )  # fmt: skip
        if not ok:
            return False, -1, pts, n_pts, best
        fresh[k] = n_pts - 1
        return True, n_pts - 1, pts, n_pts, best

    @_jit
    def _search(  # type: ignore[no-untyped-def]
        losses, psi, cache_psi, eps_max, base, gamma, sigma, mu, kcap, i,
        max_summaries, max_visits, buf, n_sm, ij, ie, iv, vj, ve, vv, vn, etas,
        n_etas, stats, seed_pts, seed_cells, seed_best, key_of, rtol, max_evals,
    ):  # fmt: skip
        prob = (losses, psi, cache_psi, eps_max, base)
        par = (gamma, sigma, mu, kcap, i, max_summaries, max_visits)
        cache = (buf, n_sm, ij, ie, iv, vj, ve, vv, vn, etas, n_etas, stats)
        n_seed = seed_pts.shape[0]
        pts = np.empty((n_seed + 256, 7))
        pts[:n_seed] = seed_pts
        n_pts = n_seed
        heap = np.empty((max(2 * seed_cells.shape[0], 64), 5))
        n_heap = 0
        counter = 0
        best = -1
        fresh = np.full(n_seed, -1, dtype=np.int64)  # per seed key: its renewal
        fail = (BAIL, np.zeros(6), 0.0, 0)

        ok, _, pts, n_pts, best = _renew(
            seed_best, fresh, key_of, pts, n_pts, best, prob, par, cache
        )
        if not ok:
            return fail
        for c in range(seed_cells.shape[0]):
            counter += 1
            heap = _push(
                heap, n_heap, counter, seed_cells[c, 0], seed_cells[c, 1],
                seed_cells[c, 2], seed_cells[c, 3],
            )  # fmt: skip
            n_heap += 1

        dropped = np.inf
        while n_heap > 0 and n_pts - n_seed < max_evals:
            v = pts[best, _VAL]
            if heap[0, _LB] >= v - rtol * (1.0 + abs(v)):
                break
            lb, j, p1, p2 = _pop(heap, n_heap)
            n_heap -= 1
            if pts[p1, _FRESH] == 0.0 or pts[p2, _FRESH] == 0.0:
                ok, q1, pts, n_pts, best = _renew(
                    p1, fresh, key_of, pts, n_pts, best, prob, par, cache
                )
                if not ok:
                    return fail
                ok, q2, pts, n_pts, best = _renew(
                    p2, fresh, key_of, pts, n_pts, best, prob, par, cache
                )
                if not ok:
                    return fail
                counter += 1
                lb = _chord_bound(pts, q1, q2, base, sigma)
                heap = _push(heap, n_heap, counter, lb, j, q1, q2)
                n_heap += 1
                continue
            e1, e2 = pts[p1, _ETA], pts[p2, _ETA]
            mid = math.sqrt(e1 * e2)
            if not (e1 < mid < e2):
                # cannot be split in floating point: its bound stays in the certificate
                dropped = min(dropped, lb)
                continue
            ok, pts, n_pts, best = _point(
                j, mid, pts[p1, _A], pts[p1, _S], pts, n_pts, best, prob, par, cache
            )
            if not ok:
                return fail
            pm = n_pts - 1
            counter += 1
            heap = _push(
                heap, n_heap, counter, _chord_bound(pts, p1, pm, base, sigma),
                j, p1, pm,
            )  # fmt: skip
            n_heap += 1
            counter += 1
            heap = _push(
                heap, n_heap, counter, _chord_bound(pts, pm, p2, base, sigma),
                j, pm, p2,
            )  # fmt: skip
            n_heap += 1

        lower = min(pts[best, _VAL], dropped)
        j_best = int(pts[best, _J])
        e_best = pts[best, _ETA]
        part = np.empty(2 * n_heap)  # the best model's partition points, sorted
        n_part = 0
        for c in range(n_heap):
            lower = min(lower, heap[c, _LB])
            if int(heap[c, _CJ]) != j_best:
                continue
            for col in (_P1, _P2):
                part[n_part] = pts[int(heap[c, col]), _ETA]
                n_part += 1
        part = np.sort(part[:n_part])

        # ``_polish`` where the caps do not move: Illinois secant on p_j' in log η,
        # bracketed from the best point through the partition points downhill
        bp = best
        slope_b = pts[bp, _SLOPE]
        if slope_b != 0.0:
            root = bp  # ``_stationary_point``: the first least |slope| tried
            near = bp
            far = -1
            prev_e = e_best
            for t in range(n_part):
                k = t if slope_b < 0.0 else n_part - 1 - t
                e = part[k]
                if (e <= e_best if slope_b < 0.0 else e >= e_best) or e == prev_e:
                    continue
                prev_e = e
                ok, pts, n_pts, best = _point(
                    j_best, e, pts[near, _A], pts[near, _S], pts, n_pts, best,
                    prob, par, cache,
                )  # fmt: skip
                if not ok:
                    return fail
                q = n_pts - 1
                if abs(pts[q, _SLOPE]) < abs(pts[root, _SLOPE]):
                    root = q
                if pts[q, _SLOPE] > 0.0 if slope_b < 0.0 else pts[q, _SLOPE] < 0.0:
                    far = q
                    break
                near = q
            if far >= 0:
                left, right = (near, far) if slope_b < 0.0 else (far, near)
                x0, f0 = math.log(pts[left, _ETA]), pts[left, _SLOPE]
                x1, f1 = math.log(pts[right, _ETA]), pts[right, _SLOPE]
                side = 0
                A0, s0 = pts[bp, _A], pts[bp, _S]
                for _ in range(100):
                    x = (x0 * f1 - x1 * f0) / (f1 - f0)
                    if not (min(x0, x1) < x < max(x0, x1)):
                        x = 0.5 * (x0 + x1)
                    ok, pts, n_pts, best = _point(
                        j_best, math.exp(x), A0, s0, pts, n_pts, best,
                        prob, par, cache,
                    )  # fmt: skip
                    if not ok:
                        return fail
                    A0, s0 = pts[n_pts - 1, _A], pts[n_pts - 1, _S]
                    slope = pts[n_pts - 1, _SLOPE]
                    if abs(slope) < abs(pts[root, _SLOPE]):
                        root = n_pts - 1
                    if slope == 0.0 or abs(x1 - x0) <= 1e-13:
                        break
                    if (slope < 0.0) == (f0 < 0.0):
                        x0, f0 = x, slope
                        if side == -1:
                            f1 *= 0.5
                        side = -1
                    else:
                        x1, f1 = x, slope
                        if side == 1:
                            f0 *= 0.5
                        side = 1
                    if abs(x1 - x0) <= 1e-13 * max(1.0, abs(x)):
                        break
                v = pts[root, _VAL]
                if not pts[best, _VAL] < v - STATIONARY_SLACK * (1.0 + abs(v)):
                    best = root
        out = pts[best, :6].copy()
        return OK, out, lower, n_pts - n_seed
