"""Sylvester–Hadamard entries without a matrix (spec ``uldp-sparse-linear-regression.md`` §4.2).

``H_N[r, u] = (−1)^{popcount(r AND u)}`` for ``N`` a power of two. For a domain of
``n`` items that is not a power of two the rows are drawn from ``H_{N'}``,
``N' = 2^⌈log2 n⌉``: the columns ``u < n`` stay orthogonal, so the one-bit frequency
oracle stays unbiased.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray


def hadamard_entry(r: ArrayLike, u: ArrayLike) -> NDArray[np.int8]:
    """``(−1)^{popcount(r & u)}`` elementwise (broadcasting), as ``int8`` ``±1``.

    Examples
    --------
    >>> hadamard_entry([0, 1, 3], [5, 1, 3]).tolist()
    [1, -1, 1]
    """
    bits = np.bitwise_count(
        np.bitwise_and(np.asarray(r, np.int64), np.asarray(u, np.int64))
    )
    parity = np.asarray(bits, dtype=np.int64) & 1
    return np.asarray(1 - 2 * parity, dtype=np.int8)


def n_rows(n_items: int) -> int:
    """``N' = 2^⌈log2 n_items⌉`` (at least 1): how many Hadamard rows cover ``n_items``."""
    return 1 << max(0, math.ceil(math.log2(max(1, n_items))))


def hadamard_matrix(K: int) -> NDArray[np.float64]:
    """The ``K × K`` Sylvester–Hadamard matrix (``K`` a power of two)."""
    idx = np.arange(K)
    return hadamard_entry(idx[:, None], idx[None, :]).astype(float)


def rotation(signs: NDArray[np.float64]) -> NDArray[np.float64]:
    """The public rotation ``U = H_K · diag(σ) / √K`` of spec §6 step 2 (orthogonal)."""
    K = signs.size
    return hadamard_matrix(K) * signs[None, :] / math.sqrt(K)
