"""The exact posterior transform over the ``2^k`` prior corners (spec §3.2, §3.4).

Prior: a product of two-point laws, corner ``s ∈ {−1, +1}^k`` at
``x(s)_j = m_j + s_j ρ_j W_j/2`` with mass ``2^{−k}`` (``ρ_j = 1``: the paper's endpoint
prior). Given the report ``z ∈ {−1, +1}^k`` the posterior factorizes,
``P̂(s | z) = Π_j (1 + τ_j z_j s_j)/2`` with ``τ_j = ρ_j tanh(ε_j/2)`` (``= 2π_j − 1``),
so for any corner function ``ψ`` the vector of all ``Σ_s P̂(s | z_r) ψ_s`` is
``(K_1 ⊗ … ⊗ K_k) ψ``. It is computed without forming the Kronecker product: view ``ψ``
as a ``2 × … × 2`` array and apply each ``K_j`` along its axis, ``O(k·2^k)``; users
with different budgets (spec §6) differ only in ``τ``, so one call handles ``L`` budget
levels at once (``O(L·k·2^k)``).

Indexing: report/corner ``r`` has bit ``k − 1 − j`` set iff coordinate ``j`` is ``+1``
(C order of the ``2 × … × 2`` array).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]


def corner_signs(k: int) -> FloatArray:
    """``s[r, j] ∈ {−1, +1}`` for every corner ``r`` (module docstring's order).

    Examples
    --------
    >>> corner_signs(2).tolist()
    [[-1.0, -1.0], [-1.0, 1.0], [1.0, -1.0], [1.0, 1.0]]
    """
    r = np.arange(2**k)[:, None]
    bits = (r >> (k - 1 - np.arange(k))[None, :]) & 1
    return (2.0 * bits - 1.0).astype(float)


def report_index(z_x: ArrayLike) -> NDArray[np.int64]:
    """The index ``r`` of each ``±1`` report row (inverse of :func:`corner_signs`)."""
    z = np.asarray(z_x)
    k = z.shape[1]
    weights = (1 << (k - 1 - np.arange(k))).astype(np.int64)
    out = ((z > 0).astype(np.int64) * weights[None, :]).sum(axis=1)
    return np.asarray(out, dtype=np.int64)


def posterior_transform(values: ArrayLike, tau: ArrayLike) -> FloatArray:
    """``(K_1 ⊗ … ⊗ K_k) ψ`` for each budget level (spec §3.4).

    Parameters
    ----------
    values : array-like of shape (..., 2**k)
        Corner functions ``ψ_s`` (leading axes: several functions at once, e.g. the
        gradient components ``ψ'_s x(s)_l``).
    tau : array-like of shape (n_levels, k)
        ``τ_{gj} = 2π_{gj} − 1`` of each budget level ``g`` and coordinate ``j``.

    Returns
    -------
    ndarray of shape (n_levels, ..., 2**k)
        ``out[g, ..., r] = Σ_s Π_j (1 + τ_{gj} z(r)_j s_j)/2 · values[..., s]``.
    """
    v = np.asarray(values, dtype=float)
    t = np.asarray(tau, dtype=float)
    n_levels, k = t.shape
    if v.shape[-1] != 2**k:
        raise ValueError(f"values must end in 2**k = {2**k} corners, got {v.shape}")
    lead = v.shape[:-1]
    batch = int(np.prod(lead)) if lead else 1
    out = np.broadcast_to(v.reshape(1, batch, 2**k), (n_levels, batch, 2**k)).copy()
    for j in range(k):
        view = out.reshape(n_levels, batch, 2**j, 2, 2 ** (k - j - 1))
        x0 = view[:, :, :, 0, :]
        x1 = view[:, :, :, 1, :]
        mean = 0.5 * (x0 + x1)
        half = (0.5 * t[:, j])[:, None, None, None] * (x0 - x1)
        view[:, :, :, 0, :] = mean + half
        view[:, :, :, 1, :] = mean - half
    return out.reshape((n_levels, *lead, 2**k))


def posterior_weights(z_x: ArrayLike, tau: ArrayLike) -> FloatArray:
    """``P̂(s | z_i)`` for every user and corner, ``O(n·2^k)`` memory (per-user path and
    the brute-force test oracle).

    Parameters
    ----------
    z_x : array-like of shape (n_users, k), entries ±1
    tau : array-like of shape (n_users, k)

    Returns
    -------
    ndarray of shape (n_users, 2**k)
    """
    z = np.asarray(z_x, dtype=float)
    t = np.asarray(tau, dtype=float)
    n, k = z.shape
    w = np.ones((n, 1))
    for j in range(k):
        tz = t[:, j] * z[:, j]
        factor = np.column_stack([0.5 * (1.0 - tz), 0.5 * (1.0 + tz)])
        w = (w[:, :, None] * factor[:, None, :]).reshape(n, -1)
    return w
