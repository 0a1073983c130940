"""Public role and group assignment (spec §1.3, §12.1).

Assignments are drawn by the curator from public randomness and the public budgets
``ε_i`` only (never from data): users are ordered by ``ε_i`` (ties in a random order)
and dealt round-robin, so every group gets a similar budget mix (stratified split).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def deal(epsilon: FloatArray, n_groups: int, rng: np.random.Generator) -> IntArray:
    """Group index in ``[0, n_groups)`` of each user, stratified by ``epsilon``.

    Group sizes differ by at most one; each group holds every ``n_groups``-th user of
    the budget order, starting from a random offset per block.
    """
    n = epsilon.size
    perm = rng.permutation(n)
    order = perm[np.argsort(epsilon[perm], kind="stable")]
    out = np.empty(n, dtype=np.int64)
    labels = np.arange(n) % n_groups
    # a random relabelling per block of n_groups users keeps sizes balanced while
    # not always giving group 0 the smallest budget of each block
    blocks = np.arange(n) // n_groups
    shift = rng.integers(0, n_groups, size=int(blocks.max()) + 1 if n else 0)
    out[order] = (labels + shift[blocks]) % n_groups if n else labels
    return out


def split_halves(
    epsilon: FloatArray, rng: np.random.Generator
) -> tuple[IntArray, IntArray]:
    """Indices of a stratified split into two halves (sizes differ by at most one)."""
    g = deal(epsilon, 2, rng)
    return np.flatnonzero(g == 0), np.flatnonzero(g == 1)
