"""What each user computes on its own records before randomizing (spec §3, §5).

Records arrive flat (``X`` of shape ``(N, d)``, ``user`` the owner of each record);
per-user sums are products with a sparse user-by-record indicator, so nothing loops
over users and no ``N × d`` temporary is made. Each user's output depends on its own
records only (a row of the indicator selects them).

Finite records can still overflow (entries near ``1e160`` square to ``∞``, and
``∞ − ∞`` is ``NaN``). A user whose local statistics are not finite computes from the
fixed public value instead (a zero Gram matrix and vector, so ``θ̂_i = 0``; a zero
screening score), so its message is still a message of the protocol and the fit
never fails because of one user's magnitudes (``docs/privacy-numerics.md``).
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
    """``c_i = X_iᵀ y_i`` for each member (marginal covariances, spec §3 Screening);
    an entry that overflows (``±∞``, ``NaN``) is the public value 0."""
    with np.errstate(over="ignore", invalid="ignore"):
        c = np.asarray(user_indicator(user, members, y) @ X, dtype=float)
    return np.where(np.isfinite(c), c, 0.0)


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
        with np.errstate(over="ignore", invalid="ignore"):
            corr = np.abs(Xi.T @ yi)
            local_ok = bool(np.isfinite(corr).all()) and bool(
                np.isfinite(Xi.T @ Xi).all()
            )
        lam = 0.1 * float(corr.max()) / max(len(rec), 1) + 1e-12 if local_ok else 1.0
        nz = np.zeros(0, dtype=np.int64)
        # a user whose local statistics overflow skips the Lasso (public fallback:
        # the screening order below, itself computed from public zeros)
        for _ in range(15 if local_ok else 0):
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
    """Each member's ``G_i = X_iᵀX_i``, ``b_i = X_iᵀy_i`` and record count ``m_i``.

    A member whose ``G_i`` or ``b_i`` is not finite (overflow) gets the public
    ``G_i = 0``, ``b_i = 0`` (module docstring); ``m_i`` is its own record count."""
    A = user_indicator(user, members)
    s = Xs.shape[1]
    G = np.empty((members.size, s, s))
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(s):  # loop over coordinates, not users
            G[:, j, :] = A @ (Xs * Xs[:, [j]])
        b = np.asarray(A @ (Xs * y[:, None]), dtype=float)
    bad = ~(np.isfinite(G).all(axis=(1, 2)) & np.isfinite(b).all(axis=1))
    G[bad] = 0.0
    b[bad] = 0.0
    m = np.asarray(A.sum(axis=1), dtype=float).reshape(-1)
    return G, b, m


def local_ols(G: FloatArray, b: FloatArray) -> FloatArray:
    """Each user's min-norm least squares ``θ̂_i = G_i⁺ b_i`` (spec §5, A7); a user
    whose (finite) ``G_i`` is too large for the decomposition, or whose solution is
    not finite, gets the public ``θ̂_i = 0``."""
    finite = np.asarray(np.isfinite(G).all(axis=(1, 2)), dtype=bool)
    G = np.where(finite[:, None, None], G, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        try:
            pinv = np.linalg.pinv(G, hermitian=True)
        except np.linalg.LinAlgError:  # one user's matrix: decompose them one by one
            pinv = np.stack([_safe_pinv(g) for g in G]) if G.size else G
        sol = np.einsum("nij,nj->ni", pinv, b)
    ok = np.isfinite(sol).all(axis=1)
    return np.asarray(np.where(ok[:, None], sol, 0.0), dtype=float)


def _safe_pinv(g: FloatArray) -> FloatArray:
    """``g⁺``, or the public zero matrix when the decomposition fails."""
    try:
        return np.asarray(np.linalg.pinv(g, hermitian=True), dtype=float)
    except np.linalg.LinAlgError:
        return np.zeros_like(g)


def local_gradients(
    G: FloatArray, b: FloatArray, m: FloatArray, theta: FloatArray
) -> FloatArray:
    """``g_i(θ) = (2/m_i) X_iᵀ(X_i θ − y_i)`` (spec §5, M-SLR); an overflowing
    gradient is handed to the randomizer as is (it maps ``NaN`` to the public centre
    and clips ``±∞``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return (2.0 / m)[:, None] * (G @ theta - b)
