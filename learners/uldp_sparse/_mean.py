"""ULDPMean: the two-round user-level mean of vectors (spec §6, weighted per §12.3).

1. ``K = 2^⌈log2 s⌉``; pad to ``K``; public rotation ``w_i = Uᵀ v_i``,
   ``U = H_K diag(σ)/√K``.
2. Public stratified split of the users into a localization half and a mean half, each
   dealt into ``K`` coordinate groups (every user sends one message).
3. Round 1: user ``i`` of ``G_loc,k`` sends ``RR_{ε_i}(H[q_i, β_i])`` for the bin
   ``β_i`` of ``clip(w_ik, −B, B)`` on ``N_b`` bins of width ``τ = 2B/N_b``; the
   curator picks ``b*_k = argmax ĉ_k`` and broadcasts ``I_k = [e_{b*} − τ, e_{b*+1} + τ]``
   (``Δ = 3τ``). A coordinate without localization messages gets ``I_k = [−B, B]``.
4. Round 2: user ``i`` of ``G_mean,k`` sends ``Π_{I_k}(w_ik) + Laplace(Δ/ε_i)``; the
   curator averages with ``λ_i = 1/(v_0 + 2Δ²/ε_i²)``, ``v_0 = τ²/4`` by default.
5. Return ``(U μ̂)[:s]``. A coordinate without round-2 messages is 0 (reported).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from learners.uldp_sparse._curator import locate_bins, weighted_means
from learners.uldp_sparse._hadamard import n_rows, rotation
from learners.uldp_sparse._ledger import PrivacyLedger
from learners.uldp_sparse._messages import BitMessages, ValueMessages
from learners.uldp_sparse._randomizers import bin_randomizer, laplace_randomizer
from learners.uldp_sparse._roles import deal, split_halves

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class MeanResult:
    """The estimate and the public state of one ULDPMean run.

    Attributes
    ----------
    mean : ndarray of shape (s,)
    rotated_mean : ndarray of shape (K,)
        ``μ̂`` in rotated coordinates.
    intervals : ndarray of shape (K, 2)
        The broadcast ``I_k``.
    rotation : ndarray of shape (K, K)
        ``U``.
    localization_users, mean_users : ndarray of int
        Positions (in the input) of the two halves.
    coordinate : ndarray of int, shape (n,)
        The coordinate each user reported on.
    empty_coordinates : ndarray of int
        Rotated coordinates that had no round-2 message (estimated as 0).
    """

    mean: FloatArray
    rotated_mean: FloatArray
    intervals: FloatArray
    rotation: FloatArray
    localization_users: IntArray
    mean_users: IntArray
    coordinate: IntArray
    empty_coordinates: IntArray


def padded_dimension(s: int) -> int:
    """``K = 2^⌈log2 s⌉`` (1 for ``s = 1``)."""
    return 1 if s <= 1 else 1 << math.ceil(math.log2(s))


def uldp_mean(
    values: FloatArray,
    epsilon: FloatArray,
    *,
    bound: float,
    n_bins: int,
    rng_public: np.random.Generator,
    rng_private: np.random.Generator,
    rotate: bool = True,
    v0: float | None = None,
    weighted: bool = True,
    ledger: PrivacyLedger | None = None,
    users: IntArray | None = None,
    stage: str = "estimation",
) -> MeanResult:
    """User-level ``ε_i``-LDP mean of the rows of ``values`` (module docstring).

    Parameters
    ----------
    values : ndarray of shape (n, s)
        One vector per user (computed by the user from its own data).
    epsilon : ndarray of shape (n,)
        Each user's budget (``inf``: exact, non-private).
    bound, n_bins : float, int
        The public range ``[−B, B]`` and the number of bins ``N_b``.
    v0 : float, optional
        Public spread proxy of the clean values (default ``τ²/4``).
    users : ndarray of int, optional
        Ledger indices of the rows (default ``0..n−1``).
    """
    n, s = values.shape
    K = padded_dimension(s)
    signs = rng_public.choice([-1.0, 1.0], size=K) if rotate else np.ones(K)
    U = rotation(signs) if rotate else np.eye(K)
    padded = np.zeros((n, K))
    padded[:, :s] = values
    with np.errstate(over="ignore", invalid="ignore"):  # NaN/±∞: see randomizers
        W = padded @ U  # rows w_i = Uᵀ v_i
    ids = np.arange(n) if users is None else np.asarray(users, dtype=np.int64)
    loc, est = split_halves(epsilon, rng_public)
    coordinate = np.empty(n, dtype=np.int64)
    coordinate[loc] = deal(epsilon[loc], K, rng_public)
    coordinate[est] = deal(epsilon[est], K, rng_public)
    tau = 2.0 * bound / n_bins

    # round 1: localization (one bit per user of the first half)
    row = rng_public.integers(0, n_rows(n_bins), size=loc.size)
    k_loc = coordinate[loc]
    if ledger is not None:
        ledger.charge(ids[loc], epsilon[loc], f"{stage}: bin-localization bit")
    bits = bin_randomizer(
        W[loc, k_loc], bound=bound, n_bins=n_bins, row=row,
        epsilon=epsilon[loc], rng=rng_private,
    )  # fmt: skip
    best, seen = locate_bins(
        BitMessages(group=k_loc, row=row, bit=bits, epsilon=epsilon[loc]),
        n_groups=K, n_bins=n_bins, weighted=weighted,
    )  # fmt: skip
    low = np.where(seen, -bound + (best - 1) * tau, -bound)
    high = np.where(seen, -bound + (best + 2) * tau, bound)

    # round 2: projected value plus Laplace noise (one number per user of the second half)
    k_est = coordinate[est]
    if ledger is not None:
        ledger.charge(ids[est], epsilon[est], f"{stage}: Laplace mean report")
    z = laplace_randomizer(
        W[est, k_est], low=low[k_est], high=high[k_est],
        epsilon=epsilon[est], rng=rng_private,
    )  # fmt: skip
    spread = np.full(K, tau**2 / 4.0 if v0 is None else float(v0))
    mu, filled = weighted_means(
        ValueMessages(group=k_est, value=z, epsilon=epsilon[est]),
        n_groups=K, delta=high - low, v0=spread, weighted=weighted,
    )  # fmt: skip
    return MeanResult(
        mean=np.asarray((U @ mu)[:s], dtype=float),
        rotated_mean=mu,
        intervals=np.column_stack([low, high]),
        rotation=U,
        localization_users=loc,
        mean_users=est,
        coordinate=coordinate,
        empty_coordinates=np.flatnonzero(~filled).astype(np.int64),
    )
