"""What each user computes on its own records before randomizing (spec §3, §5).

Records arrive flat (``X`` of shape ``(N, d)``, ``user`` the owner of each record);
per-user sums are products with a sparse user-by-record indicator, so nothing loops
over users and no ``N × d`` temporary is made. Each user's output depends on its own
records only (a row of the indicator selects them).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def user_indicator(
    user: IntArray, members: IntArray, weights: FloatArray | None = None
) -> sp.csr_matrix:
    """Sparse ``(len(members), N)`` matrix with row ``j`` selecting the records of user
    ``members[j]`` (entries ``weights`` of those records, default 1)."""
    pos = np.full(int(user.max()) + 1 if user.size else 0, -1, dtype=np.int64)
    pos[members] = np.arange(members.size)
    rows = pos[user]
    mine = rows >= 0
    data = np.ones(int(mine.sum())) if weights is None else weights[mine]
    return sp.csr_matrix(
        (data, (rows[mine], np.flatnonzero(mine))), shape=(members.size, user.size)
    )


def screening_scores(
    X: FloatArray, y: FloatArray, user: IntArray, members: IntArray
) -> FloatArray:
    """``c_i = X_iᵀ y_i`` for each member (marginal covariances, spec §3 Screening)."""
    return np.asarray(user_indicator(user, members, y) @ X, dtype=float)


def top_k_rows(scores: FloatArray, k: int) -> IntArray:
    """Indices of the ``k`` largest ``|score|`` of each row (PROPOSAL: absolute value)."""
    k = min(k, scores.shape[1])
    part = np.argpartition(-np.abs(scores), k - 1, axis=1)[:, :k]
    return part.astype(np.int64)


def top_k_signed_rows(scores: FloatArray, k: int) -> IntArray:
    """Indices of the ``k`` largest **signed** scores of each row: the reference
    implementation's Screening (spec §3), blind to negative coefficients."""
    k = min(k, scores.shape[1])
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return part.astype(np.int64)


def pick_one(sets: IntArray, rng: np.random.Generator) -> IntArray:
    """Each user reports one index of its local set uniformly (private coin)."""
    choice = rng.integers(0, sets.shape[1], size=sets.shape[0])
    return np.asarray(sets[np.arange(sets.shape[0]), choice], dtype=np.int64)


def post_lasso_sets(
    X: FloatArray,
    y: FloatArray,
    user: IntArray,
    members: IntArray,
    *,
    k_sel: int,
    k_screen: int,
) -> IntArray:
    """PostLasso(k_sel, k_screen) of spec §3: screening to ``k_screen`` columns, then a
    Lasso whose penalty is adjusted (at most 15 times: halve below ``k_sel`` non-zeros,
    ×1.5 above ``2·k_sel``) from ``0.1·λ_max`` (deviation: no cross-validation, for
    speed); padded by the largest ``|c_j|`` (PROPOSAL). Local work, one Lasso per user.
    """
    from sklearn.linear_model import Lasso

    scores = screening_scores(X, y, user, members)
    screened = top_k_rows(scores, k_screen)
    order = np.argsort(user, kind="stable")
    starts = np.searchsorted(user[order], members)
    ends = np.searchsorted(user[order], members, side="right")
    out = np.empty((members.size, k_sel), dtype=np.int64)
    for j in range(members.size):  # local fits: each user on its own records
        rec = order[starts[j] : ends[j]]
        cols = screened[j]
        Xi, yi = X[np.ix_(rec, cols)], y[rec]
        lam = 0.1 * float(np.abs(Xi.T @ yi).max()) / max(len(rec), 1) + 1e-12
        nz = np.zeros(0, dtype=np.int64)
        for _ in range(15):
            coef = Lasso(alpha=lam, max_iter=2000).fit(Xi, yi).coef_
            nz = np.flatnonzero(coef)
            if nz.size < k_sel:
                lam /= 2.0
            elif nz.size > 2 * k_sel:
                lam *= 1.5
            else:
                break
        by_score = cols[np.argsort(-np.abs(scores[j, cols]), kind="stable")]
        chosen = list(cols[nz][: 2 * k_sel])
        chosen += [c for c in by_score if c not in chosen][
            : max(0, k_sel - len(chosen))
        ]
        out[j] = np.asarray(chosen[:k_sel])
    return out


def gram(
    Xs: FloatArray, y: FloatArray, user: IntArray, members: IntArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Each member's ``G_i = X_iᵀX_i``, ``b_i = X_iᵀy_i`` and record count ``m_i``."""
    A = user_indicator(user, members)
    s = Xs.shape[1]
    G = np.empty((members.size, s, s))
    for j in range(s):  # loop over coordinates, not users
        G[:, j, :] = A @ (Xs * Xs[:, [j]])
    b = np.asarray(A @ (Xs * y[:, None]), dtype=float)
    m = np.asarray(A.sum(axis=1), dtype=float).reshape(-1)
    return G, b, m


def local_ols(G: FloatArray, b: FloatArray) -> FloatArray:
    """Each user's min-norm least squares ``θ̂_i = G_i⁺ b_i`` (spec §5, A7)."""
    sol = np.einsum("nij,nj->ni", np.linalg.pinv(G, hermitian=True), b)
    return np.asarray(sol, dtype=float)


def local_gradients(
    G: FloatArray, b: FloatArray, m: FloatArray, theta: FloatArray
) -> FloatArray:
    """``g_i(θ) = (2/m_i) X_iᵀ(X_i θ − y_i)`` (spec §5, M-SLR)."""
    return (2.0 / m)[:, None] * (G @ theta - b)
