"""HeavyHitter over a binary prefix tree (spec §4): users' one-bit reports, the curator's
frequency oracle level by level, and pruning.

Each selection user is dealt one tree level ``ℓ_i`` (public, stratified by ``ε_i``) and
a public Hadamard row ``r_i ∈ [0, 2^{ℓ_i})``; it sends **one** bit
``RR_{ε_i}(H[r_i, pre_{ℓ_i}(v_i)])``, drawn once and reused by the curator for every
candidate prefix (the reference code re-draws it per candidate: defect D1).

Hashed variant (``oracle="hashed"``, the reference's TreeHist oracle, spec §4.2): the
curator also draws ``t`` public hash pairs, deals each level's users into ``t`` hash
cells (stratified by ``ε_i``, sizes differing by at most one: the balanced analogue of
the reference's "uniform, re-drawn until each cell has ≥ 3 users") and gives each a row
``r_i ∈ [0, M)``; the user sends ``RR_{ε_i}(g_{j_i}(key) H_M[r_i, h_{j_i}(key)])`` and the
curator takes the median over cells. Meant for trees too deep for direct bookkeeping;
at moderate ``d`` it is noisier than the direct oracle (spec §4.2, §15).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from learners.uldp_sparse._curator import frequency_oracle, hashed_frequency_oracle
from learners.uldp_sparse._ledger import PrivacyLedger
from learners.uldp_sparse._messages import BitMessages
from learners.uldp_sparse._prefix_hash import PrefixHashes, hash_constants
from learners.uldp_sparse._randomizers import (
    hashed_heavy_hitter_randomizer,
    heavy_hitter_randomizer,
)
from learners.uldp_sparse._roles import deal

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
MAX_TREE_DEPTH = 20
"""Deepest prefix tree supported: ``d ≤ 2^20`` features."""
STAGE = "selection: heavy-hitter bit"
ORACLES = ("direct", "hashed")
LEVEL_RULES = ("all", "pruned")


def first_pruned_level(k: int, alpha: float) -> int:
    """The first level whose top-``k`` pruning can drop a candidate: ``⌊log2 k⌋ + 1``
    under top-k pruning (``α = 0``: levels with ``2^ℓ ≤ k`` keep every candidate,
    whatever the estimates), 1 under the reference rule (``α > 0`` keeps only
    ``k_lo = 1`` at early levels)."""
    return 1 if alpha > 0 else k.bit_length()


def assign_levels(
    epsilon: FloatArray,
    *,
    n_levels: int,
    k: int,
    alpha: float,
    rule: str,
    rng: np.random.Generator,
) -> IntArray:
    """Each selection user's public tree level, dealt stratified by ``ε_i``.

    ``"all"`` (spec §4.1): levels ``1..L``, ``≈ n1/L`` users each. ``"pruned"``
    (**not in the spec**, an option): only the levels where pruning can drop a candidate
    (:func:`first_pruned_level`), so no bit is spent on a level whose survivors are
    fixed in advance; the assignment stays public and data-independent.
    """
    if rule not in LEVEL_RULES:
        raise ValueError(f"hh_levels must be one of {LEVEL_RULES}, got {rule!r}")
    first = 1
    if rule == "pruned":
        first = min(first_pruned_level(k, alpha), n_levels)
    return deal(epsilon, n_levels - first + 1, rng) + first


@dataclass(frozen=True)
class HeavyHitterResult:
    """The selected support and what the curator kept on the way (public output).

    Attributes
    ----------
    support : ndarray of int
        ``Ŝ``, sorted.
    survivors : list of ndarray
        ``P_ℓ`` for ``ℓ = 1..L``.
    estimates : ndarray
        ``f̂_L`` of the last level's survivors (same order as ``survivors[-1]``).
    n_levels : int
        ``L = ⌈log2 d⌉``.
    hashes : PrefixHashes or None
        The public hash pairs of the hashed oracle (None: direct oracle).
    """

    support: IntArray
    survivors: list[IntArray] = field(default_factory=list)
    estimates: FloatArray = field(default_factory=lambda: np.zeros(0))
    n_levels: int = 1
    hashes: PrefixHashes | None = None


def tree_depth(d: int) -> int:
    """``L = max(1, ⌈log2 d⌉)``.

    Raises
    ------
    ValueError
        ``d`` exceeds ``2^20`` (the prefix tree's depth limit), naming ``n_features``.
    """
    if d < 1:
        raise ValueError(f"n_features must be >= 1, got {d}")
    L = max(1, math.ceil(math.log2(d)))
    if L > MAX_TREE_DEPTH:
        raise ValueError(
            f"n_features: d = {d} exceeds the prefix tree's {2**MAX_TREE_DEPTH} leaves"
        )
    return L


def prune(
    candidates: IntArray,
    estimates: FloatArray,
    *,
    level: int,
    n_levels: int,
    k: int,
    alpha: float,
    n_total: float,
) -> IntArray:
    """Survivors ``P_ℓ ⊆ C_ℓ`` (spec §4.3).

    Keep the top ``k_lo(ℓ) = min(|C|, ⌈max(k/2^{L−ℓ}, 1)⌉)`` always; among the top
    ``k_hi = min(k, |C|)`` keep the others too when ``α = 0`` (PROPOSAL default), or
    only those with ``f̂ ≥ α·n_total`` (the reference rule, ``α > 0``).
    """
    n_c = candidates.size
    order = np.argsort(-estimates, kind="stable")
    k_hi = min(k, n_c)
    k_lo = min(n_c, math.ceil(max(k / 2 ** (n_levels - level), 1.0)))
    keep = order[:k_lo]
    extra = order[k_lo:k_hi]
    if alpha > 0:
        extra = extra[estimates[extra] >= alpha * n_total]
    return np.sort(candidates[np.concatenate([keep, extra])])


def _leaves(
    survivors: IntArray, estimates: FloatArray, d: int
) -> tuple[IntArray, FloatArray]:
    """``Ŝ = {u ∈ P_L : u < d}``; if empty, the best-ranked valid leaf (PROPOSAL)."""
    valid = survivors < d
    if valid.any():
        return survivors[valid], estimates[valid]
    return np.array([d - 1], dtype=np.int64), np.zeros(1)


def heavy_hitters(
    v: IntArray,
    epsilon: FloatArray,
    *,
    d: int,
    k: int,
    rng_public: np.random.Generator,
    rng_private: np.random.Generator,
    alpha: float = 0.0,
    weighted: bool = True,
    ledger: PrivacyLedger | None = None,
    users: IntArray | None = None,
    oracle: str = "direct",
    levels: str = "all",
) -> HeavyHitterResult:
    """The private protocol of spec §4 on reported indices ``v``: one level and one bit
    per user, the ``oracle`` ``"direct"`` (Hadamard response, default) or ``"hashed"``;
    ``levels`` is the level rule of :func:`assign_levels`.

    ``users``: the ledger indices of the senders (default ``0..n1−1``).
    """
    if oracle not in ORACLES:
        raise ValueError(f"oracle must be one of {ORACLES}, got {oracle!r}")
    n1 = v.size
    L = tree_depth(d)
    level = assign_levels(
        epsilon, n_levels=L, k=k, alpha=alpha, rule=levels, rng=rng_public
    )
    if oracle == "hashed":
        return _hashed(
            v, epsilon, level, d=d, k=k, rng_public=rng_public,
            rng_private=rng_private, alpha=alpha, weighted=weighted, ledger=ledger,
            users=users,
        )  # fmt: skip
    row = rng_public.integers(0, np.left_shift(1, level))
    if ledger is not None:
        ledger.charge(np.arange(n1) if users is None else users, epsilon, STAGE)
    bits = heavy_hitter_randomizer(
        v, level=level, row=row, n_levels=L, epsilon=epsilon, rng=rng_private
    )
    messages = BitMessages(group=level, row=row, bit=bits, epsilon=epsilon)
    return curate_tree(messages, d=d, k=k, alpha=alpha, weighted=weighted)


def _hashed(
    v: IntArray,
    epsilon: FloatArray,
    level: IntArray,
    *,
    d: int,
    k: int,
    rng_public: np.random.Generator,
    rng_private: np.random.Generator,
    alpha: float,
    weighted: bool,
    ledger: PrivacyLedger | None,
    users: IntArray | None,
) -> HeavyHitterResult:
    """The hashed variant (module docstring): public hashes, cells and rows first."""
    n1 = v.size
    L = tree_depth(d)
    t, M = hash_constants(n1)
    hashes = PrefixHashes.draw(t, M, rng_public)
    cell = np.empty(n1, dtype=np.int64)
    for lv in range(1, L + 1):  # levels, not users
        mine = np.flatnonzero(level == lv)
        cell[mine] = deal(epsilon[mine], t, rng_public)
    row = rng_public.integers(0, M, size=n1)
    if ledger is not None:
        ledger.charge(np.arange(n1) if users is None else users, epsilon, STAGE)
    bits = hashed_heavy_hitter_randomizer(
        v, level=level, cell=cell, row=row, n_levels=L, hashes=hashes,
        epsilon=epsilon, rng=rng_private,
    )  # fmt: skip
    messages = BitMessages(group=level, row=row, bit=bits, epsilon=epsilon, cell=cell)
    return curate_tree(
        messages, d=d, k=k, alpha=alpha, weighted=weighted, hashes=hashes
    )


def curate_tree(
    messages: BitMessages,
    *,
    d: int,
    k: int,
    alpha: float = 0.0,
    weighted: bool = True,
    hashes: PrefixHashes | None = None,
) -> HeavyHitterResult:
    """The curator's descent: estimate the candidates of each level from that level's
    bits (direct oracle, or the hashed one when ``hashes`` is given), prune, expand the
    survivors' children (spec §4.3)."""
    L = tree_depth(d)
    n1 = float(messages.bit.size)
    candidates = np.array([0, 1], dtype=np.int64)
    survivors: list[IntArray] = []
    estimates = np.zeros(2)
    for level in range(1, L + 1):
        if level > 1:
            candidates = np.sort(
                np.concatenate([2 * survivors[-1], 2 * survivors[-1] + 1])
            )
        mask = messages.group == level
        sub = BitMessages(
            group=messages.group[mask],
            row=messages.row[mask],
            bit=messages.bit[mask],
            epsilon=messages.epsilon[mask],
            cell=None if messages.cell is None else messages.cell[mask],
        )
        if hashes is None:
            f_hat = frequency_oracle(sub, candidates, n_total=n1, weighted=weighted)
        else:
            f_hat = hashed_frequency_oracle(
                sub, candidates, level=level, hashes=hashes, n_total=n1,
                weighted=weighted,
            )  # fmt: skip
        kept = prune(
            candidates, f_hat, level=level, n_levels=L, k=k, alpha=alpha, n_total=n1
        )
        survivors.append(kept)
        estimates = f_hat[np.searchsorted(candidates, kept)]
    support, est = _leaves(survivors[-1], estimates, d)
    return HeavyHitterResult(
        support=support, survivors=survivors, estimates=est, n_levels=L, hashes=hashes
    )


def exact_heavy_hitters(v: IntArray, *, d: int, k: int) -> HeavyHitterResult:
    """Exact, non-private mode (spec §4.4, ``ε = ∞``): the top-``k`` counted indices."""
    counts = np.bincount(v, minlength=d).astype(float)
    order = np.argsort(-counts, kind="stable")[: min(k, d)]
    keep = order[counts[order] > 0] if (counts[order] > 0).any() else order[:1]
    support = np.sort(keep).astype(np.int64)
    return HeavyHitterResult(
        support=support,
        survivors=[support],
        estimates=counts[support],
        n_levels=tree_depth(d),
    )
