"""The curator's side: aggregators that read messages only (spec §4.3, §6, §12).

Every function here takes :class:`BitMessages` / :class:`ValueMessages` (and public
quantities); none receives raw data or a pre-noise value. Weights depend only on the
public budgets ``ε_i`` and public scales, so they are post-processing (§12).
Weights are normalised by their largest value within the aggregate: with equal
budgets every weight is exactly ``1.0`` and the weighted estimators reduce, bit for
bit, to the plain ones (V9(a)).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from learners.uldp_sparse._hadamard import hadamard_entry
from learners.uldp_sparse._messages import BitMessages, ValueMessages
from learners.uldp_sparse._prefix_hash import PrefixHashes, prefix_key
from learners.uldp_sparse._randomizers import bit_weight, debias_factor

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def _normalised(w: FloatArray) -> FloatArray:
    top = float(w.max()) if w.size else 1.0
    return w / top if top > 0 else np.ones_like(w)


def frequency_oracle(
    messages: BitMessages,
    candidates: IntArray,
    *,
    n_total: float,
    weighted: bool = True,
) -> FloatArray:
    """Estimated counts ``f̂(u)`` of the candidates ``u`` from one group's bits.

    ``f̂(u) = n_total · Σ_i w_i ζ_i(u) / Σ_i w_i`` with ``ζ_i(u) = c_i y_i H[r_i, u]``
    (unbiased for the indicator ``1{pre(v_i) = u}``) and ``w_i = tanh²(ε_i/2)``
    (``weighted``) or 1 (§4.3, §12.2). With ``n_total = |G|`` and equal budgets this is
    the plain ``c_ε Σ_i y_i H[r_i, u]``. No messages: zeros.
    """
    if messages.bit.size == 0:
        return np.zeros(candidates.size)
    c = debias_factor(messages.epsilon)
    w = _normalised(bit_weight(messages.epsilon)) if weighted else np.ones(c.size)
    # Σ_i w_i c_i y_i H[r_i, u] = Σ_r (Σ_{i: r_i = r} w_i c_i y_i) H[r, u]
    rows, inverse = np.unique(messages.row, return_inverse=True)
    per_row = np.bincount(inverse, weights=w * c * messages.bit, minlength=rows.size)
    total = per_row @ hadamard_entry(rows[:, None], candidates[None, :])
    return np.asarray(n_total * total / w.sum(), dtype=float)


def hashed_frequency_oracle(
    messages: BitMessages,
    candidates: IntArray,
    *,
    level: int,
    hashes: PrefixHashes,
    n_total: float,
    weighted: bool = True,
) -> FloatArray:
    """Estimated counts of the candidate prefixes ``u`` of one level, hashed oracle
    (spec §4.3): per hash cell ``j`` (``messages.cell``)
    ``f̂_j(u) = n_total · Σ_{i: j_i = j} w_i ζ_i(u) / Σ_{i: j_i = j} w_i`` with
    ``ζ_i(u) = c_i y_i g_j(key_u) H_M[r_i, h_j(key_u)]`` (the reference's
    ``t·L·c_ε Σ`` with ``γ = n_total/|G_{ℓ,j}|`` in place of ``t·L``, equal in
    expectation, and the weights of §12.2); ``f̂(u) = median_j f̂_j(u)`` over the cells
    that have messages. Each cell's estimate is unbiased for the count over the draw of
    the hashes (a colliding key adds ``± its count`` with a random sign). No messages:
    zeros.
    """
    if messages.bit.size == 0:
        return np.zeros(candidates.size)
    if messages.cell is None:
        raise ValueError("cell: the hashed oracle needs each message's hash index")
    c = debias_factor(messages.epsilon)
    w = _normalised(bit_weight(messages.epsilon)) if weighted else np.ones(c.size)
    contrib = w * c * messages.bit
    keys = prefix_key(candidates, level)
    cells = np.unique(messages.cell)
    est = np.empty((cells.size, candidates.size))
    for idx, j in enumerate(cells):  # t hash cells (about log2(n1/β)), not users
        mine = messages.cell == j
        rows, inverse = np.unique(messages.row[mine], return_inverse=True)
        per_row = np.bincount(inverse, weights=contrib[mine], minlength=rows.size)
        cols = hashes.bucket(j, keys)
        total = (per_row @ hadamard_entry(rows[:, None], cols[None, :])) * hashes.sign(
            j, keys
        )
        est[idx] = n_total * total / w[mine].sum()
    return np.asarray(np.median(est, axis=0), dtype=float)


def locate_bins(
    messages: BitMessages, *, n_groups: int, n_bins: int, weighted: bool = True
) -> tuple[IntArray, NDArray[np.bool_]]:
    """Round 1 of ULDPMean: the bin ``b*_k = argmax_b ĉ_k(b)`` of each coordinate ``k``.

    Returns the bins and a mask of the coordinates that had at least one message.
    """
    bins = np.arange(n_bins)
    scores = np.zeros((n_groups, n_bins))
    if messages.bit.size:
        c = debias_factor(messages.epsilon)
        w = _normalised(bit_weight(messages.epsilon)) if weighted else np.ones(c.size)
        # per (coordinate, row) sums first, then one Hadamard row each
        keys = messages.group * (int(messages.row.max()) + 1) + messages.row
        uniq, inverse = np.unique(keys, return_inverse=True)
        sums = np.bincount(inverse, weights=w * c * messages.bit, minlength=uniq.size)
        width = int(messages.row.max()) + 1
        zeta = sums[:, None] * hadamard_entry((uniq % width)[:, None], bins[None, :])
        np.add.at(scores, uniq // width, zeta)
    seen = np.bincount(messages.group, minlength=n_groups) > 0
    return np.argmax(scores, axis=1).astype(np.int64), seen


def laplace_weights(
    epsilon: FloatArray, delta: FloatArray, v0: FloatArray
) -> FloatArray:
    """``λ_i = 1/(v_0 + 2Δ²/ε_i²)`` (§12.3; ``ε_i = ∞`` gives ``1/v_0``)."""
    with np.errstate(divide="ignore"):
        noise_var = np.where(np.isinf(epsilon), 0.0, 2.0 * delta**2 / epsilon**2)
    return np.asarray(1.0 / (v0 + noise_var), dtype=float)


def weighted_means(
    messages: ValueMessages,
    *,
    n_groups: int,
    delta: FloatArray,
    v0: FloatArray,
    weighted: bool = True,
) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Round 2 of ULDPMean: ``μ̂_k = Σ λ_i z_i / Σ λ_i`` per coordinate (§12.3).

    ``delta``, ``v0``: per coordinate (public). Coordinates without messages are 0,
    flagged in the returned mask.
    """
    g = messages.group
    if weighted:
        lam = laplace_weights(messages.epsilon, delta[g], v0[g])
        lam = _normalised(lam)
    else:
        lam = np.ones(g.size)
    num = np.bincount(g, weights=lam * messages.value, minlength=n_groups)
    den = np.bincount(g, weights=lam, minlength=n_groups)
    seen = den > 0
    out = np.zeros(n_groups)
    out[seen] = num[seen] / den[seen]
    return out, seen
