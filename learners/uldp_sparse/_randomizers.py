"""The users' side: local randomizers (spec §4.2, §6, §12), vectorised across users.

Each function is elementwise over users: user ``i``'s message depends only on its own
input (``v[i]`` / ``value[i]``), the broadcast state (its public row, level, interval),
its budget ``epsilon[i]`` and its own private coins (the ``i``-th draw of ``rng``; the
draws are made before the data is read, so one user's data never changes another
user's coins). Nothing here sees another user's data, and only the message leaves.
A user with ``ε_i = ∞`` (the exact, non-private mode) sends its value unchanged.

Non-finite inputs (a user's own computation can overflow: the Gram matrix of records
with entries near ``1e160``) never reach the noise as such: ``NaN`` is replaced by the
public centre of the range (0 for the bins, the interval's midpoint for the Laplace
report) and ``±∞`` is clipped to the range, so every message lies in the randomizer's
output space whatever the input (``docs/privacy-numerics.md``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from learners._noise import snapped_laplace
from learners.uldp_sparse._hadamard import hadamard_entry
from learners.uldp_sparse._prefix_hash import PrefixHashes, prefix_key

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
LaplaceRelease = Callable[..., FloatArray]
"""``release(value, *, low, high, epsilon, rng)`` → the reports (default
:func:`learners._noise.snapped_laplace`)."""


def keep_probability(epsilon: ArrayLike) -> FloatArray:
    """Randomized response keeps the bit with probability ``e^ε/(1 + e^ε)`` (§4.2)."""
    eps = np.asarray(epsilon, dtype=float)
    return np.asarray(1.0 / (1.0 + np.exp(-eps)), dtype=float)


def debias_factor(epsilon: ArrayLike) -> FloatArray:
    """``c_ε = (e^ε + 1)/(e^ε − 1) = 1/tanh(ε/2)`` (§4.3; 1 at ``ε = ∞``)."""
    eps = np.asarray(epsilon, dtype=float)
    with np.errstate(divide="ignore"):
        return np.asarray(1.0 / np.tanh(eps / 2.0), dtype=float)


def bit_weight(epsilon: ArrayLike) -> FloatArray:
    """Inverse-variance weight of a one-bit message, ``w_i = tanh²(ε_i/2)`` (§12.2)."""
    eps = np.asarray(epsilon, dtype=float)
    return np.asarray(np.tanh(eps / 2.0) ** 2, dtype=float)


def one_bit_randomizer(
    x: NDArray[np.int8], epsilon: FloatArray, rng: np.random.Generator
) -> NDArray[np.int8]:
    """Randomized response on ``x ∈ {±1}``: keep with ``e^ε/(1+e^ε)``, else flip.

    Two outputs whose probabilities differ by the factor ``e^ε`` at most: ``ε``-LDP
    whatever the input (§4.2).
    """
    coins = rng.random(x.shape[0])  # private coins, drawn before the data is read
    keep = coins < keep_probability(epsilon)
    return np.where(keep, x, -x).astype(np.int8)


def tree_prefix(v: IntArray, level: IntArray, n_levels: int) -> IntArray:
    """``pre_ℓ(v) = v >> (L − ℓ)``: the length-``ℓ`` prefix of ``v``'s ``L``-bit code."""
    return np.right_shift(
        np.asarray(v, np.int64), n_levels - np.asarray(level, np.int64)
    )


def heavy_hitter_randomizer(
    v: IntArray,
    *,
    level: IntArray,
    row: IntArray,
    n_levels: int,
    epsilon: FloatArray,
    rng: np.random.Generator,
) -> NDArray[np.int8]:
    """One bit per user: ``RR_ε(H[r_i, pre_{ℓ_i}(v_i)])`` (direct Hadamard response, §4.2)."""
    x = hadamard_entry(row, tree_prefix(v, level, n_levels))
    return one_bit_randomizer(x, epsilon, rng)


def hashed_heavy_hitter_randomizer(
    v: IntArray,
    *,
    level: IntArray,
    cell: IntArray,
    row: IntArray,
    n_levels: int,
    hashes: PrefixHashes,
    epsilon: FloatArray,
    rng: np.random.Generator,
) -> NDArray[np.int8]:
    """One bit per user, hashed variant (spec §4.2):
    ``RR_ε(g_{j_i}(key) · H_M[r_i, h_{j_i}(key)])``, ``key = key(pre_{ℓ_i}(v_i), ℓ_i)``,
    with the public level ``ℓ_i``, hash index ``j_i`` (``cell``) and row ``r_i < M``."""
    key = prefix_key(tree_prefix(v, level, n_levels), level)
    x = hashes.sign(cell, key) * hadamard_entry(row, hashes.bucket(cell, key))
    return one_bit_randomizer(x.astype(np.int8), epsilon, rng)


def bin_index(value: FloatArray, *, bound: float, n_bins: int) -> IntArray:
    """The histogram bin of ``clip(value, −B, B)`` on ``N_b`` bins of width ``2B/N_b``
    (``NaN`` counts as the public centre 0)."""
    tau = 2.0 * bound / n_bins
    a = np.clip(np.where(np.isnan(value), 0.0, value), -bound, bound)
    return np.minimum(np.floor((a + bound) / tau), n_bins - 1).astype(np.int64)


def bin_randomizer(
    value: FloatArray,
    *,
    bound: float,
    n_bins: int,
    row: IntArray,
    epsilon: FloatArray,
    rng: np.random.Generator,
) -> NDArray[np.int8]:
    """Round 1 of ULDPMean (§6 step 4): ``RR_ε(H[q_i, β_i])`` for the user's bin ``β_i``."""
    x = hadamard_entry(row, bin_index(value, bound=bound, n_bins=n_bins))
    return one_bit_randomizer(x, epsilon, rng)


def laplace_randomizer(
    value: FloatArray,
    *,
    low: FloatArray,
    high: FloatArray,
    epsilon: FloatArray,
    rng: np.random.Generator,
    release: LaplaceRelease = snapped_laplace,
) -> FloatArray:
    """Round 2 of ULDPMean (§6 step 5): ``Π_{[low, high]}(value) + Laplace(Δ/ε_i)``.

    ``Δ = high − low`` is the sensitivity of the projection, so the report is
    ``ε_i``-LDP. Out-of-range values are clipped, never dropped (§6, D2); ``NaN`` is
    the interval's public midpoint. The noise is the snapping mechanism
    (:func:`learners._noise.snapped_laplace`: the floating-point-safe Laplace, whose
    guaranteed ε is at most ``ε_i``; reports are finite, within ``Δ·(B + Λ)`` of the
    midpoint). ``release`` is the mechanism (a test may pass a spy that checks its
    inputs).
    """
    return release(
        np.asarray(value, dtype=float),
        low=np.asarray(low, dtype=float),
        high=np.asarray(high, dtype=float),
        epsilon=np.asarray(epsilon, dtype=float),
        rng=rng,
    )
