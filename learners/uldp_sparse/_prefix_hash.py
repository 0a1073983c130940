"""Public hash functions of the hashed heavy-hitter variant (spec §4.2, TreeHist of
Bassily et al., the reference implementation's oracle).

The curator draws ``t`` pairs ``(h_j: key → [0, M), g_j: key → {±1})`` from public
randomness, independently of the data, and broadcasts them. A key is unique to a
(prefix length, prefix value) pair: ``key(u, ℓ) = 2^ℓ − 1 + u``. The pairs are
Carter–Wegman universal hashes ``((a·key + b) mod P)`` with ``P = 2^31 − 1``, reduced
mod ``M`` (bucket) or to their lowest bit (sign); keys stay below ``2^21``
(:data:`~learners.uldp_sparse._heavy_hitter.MAX_TREE_DEPTH` = 20), so ``a·key`` fits in
``int64``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

IntArray = NDArray[np.int64]
PRIME = (1 << 31) - 1
HASH_BETA = 0.05
"""The reference's failure probability ``β`` in ``t`` and ``M`` (spec §4.2)."""


def prefix_key(prefix: ArrayLike, level: ArrayLike) -> IntArray:
    """``key(u, ℓ) = 2^ℓ − 1 + u``: distinct for distinct (length, prefix) pairs."""
    lv = np.asarray(level, np.int64)
    return np.asarray(np.left_shift(1, lv) - 1 + np.asarray(prefix, np.int64))


def hash_constants(n1: int, beta: float = HASH_BETA) -> tuple[int, int]:
    """The reference constants ``t = ⌊log2(n1/β)⌋`` hash pairs and ``M`` buckets, the
    largest power of two ``≤ ⌊√(n1 / log2(n1/β))⌋`` (both at least 1; spec §4.2: for
    ``n1 = 200``, ``t = 11`` and ``M = 4``)."""
    if n1 < 1:
        raise ValueError(f"n1 must be >= 1, got {n1}")
    lg = math.log2(n1 / beta)
    t = max(1, math.floor(lg))
    cap = max(1, math.floor(math.sqrt(n1 / lg)))
    return t, 1 << (cap.bit_length() - 1)


@dataclass(frozen=True)
class PrefixHashes:
    """``t`` public hash pairs ``(h_j, g_j)`` into ``M`` buckets (``M`` a power of 2).

    Attributes
    ----------
    a, b : ndarray of int
        Coefficients of the bucket hashes ``h_j(key) = ((a_j key + b_j) mod P) mod M``.
    a_sign, b_sign : ndarray of int
        Coefficients of the sign hashes ``g_j(key) = 1 − 2·(((a'_j key + b'_j) mod P) & 1)``.
    width : int
        ``M``.
    """

    a: IntArray
    b: IntArray
    a_sign: IntArray
    b_sign: IntArray
    width: int

    @classmethod
    def draw(cls, n_hashes: int, width: int, rng: np.random.Generator) -> PrefixHashes:
        """``n_hashes`` pairs from public randomness ``rng`` (never from data)."""
        if width < 1 or width & (width - 1):
            raise ValueError(f"width must be a power of two, got {width}")
        a, a_sign = (rng.integers(1, PRIME, n_hashes) for _ in range(2))
        b, b_sign = (rng.integers(0, PRIME, n_hashes) for _ in range(2))
        return cls(a=a, b=b, a_sign=a_sign, b_sign=b_sign, width=int(width))

    @property
    def n_hashes(self) -> int:
        """``t``."""
        return int(self.a.size)

    def bucket(self, cell: ArrayLike, key: ArrayLike) -> IntArray:
        """``h_j(key) ∈ [0, M)`` elementwise (broadcasting ``cell = j`` and ``key``)."""
        j, k = np.asarray(cell, np.int64), np.asarray(key, np.int64)
        return np.asarray(((self.a[j] * k + self.b[j]) % PRIME) % self.width)

    def sign(self, cell: ArrayLike, key: ArrayLike) -> NDArray[np.int8]:
        """``g_j(key) ∈ {±1}`` elementwise."""
        j, k = np.asarray(cell, np.int64), np.asarray(key, np.int64)
        low = ((self.a_sign[j] * k + self.b_sign[j]) % PRIME) & 1
        return np.asarray(1 - 2 * low, dtype=np.int8)
