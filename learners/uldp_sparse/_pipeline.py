"""The two-stage pipeline (spec §2): selection half → HeavyHitter → ``Ŝ``; estimation
half → 2-SLR (local OLS + ULDPMean) or M-SLR (private accelerated mini-batch GD).

Users with ``ε_i = 0`` take no part (their absence does not depend on their data).
Every participating user sends exactly one message at its full ``ε_i`` (one role, one
round, one coordinate), charged to the ledger before it is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from learners.uldp_sparse._heavy_hitter import (
    HeavyHitterResult,
    exact_heavy_hitters,
    heavy_hitters,
)
from learners.uldp_sparse._ledger import PrivacyLedger
from learners.uldp_sparse._local import (
    gram,
    local_gradients,
    local_ols,
    pick_one,
    post_lasso_sets,
    screening_scores,
    top_k_rows,
    top_k_signed_rows,
)
from learners.uldp_sparse._mean import padded_dimension, uldp_mean
from learners.uldp_sparse._roles import deal, split_halves

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True, kw_only=True)
class PipelineConfig:
    """Public settings of one fit (the estimator's parameters, resolved)."""

    algorithm: str
    k: int
    selector: str
    k_sel: int
    k_screen: int
    alpha: float
    n_bins: int
    bound: float
    gradient_bound: float
    batch_size: int
    step_c0: float
    step_power: float
    update: str
    fit_intercept: bool
    rotate: bool
    weighted: bool
    exact: bool
    x_scale: float = 1.0
    small_batch_fallback: bool = True
    oracle: str = "direct"
    levels: str = "all"


@dataclass(frozen=True)
class SparseFit:
    """Result of the pipeline in the units of the ``X`` it was given (the estimation
    stage works on ``x_scale·X``, where the public ranges ``bound`` are stated)."""

    coef: FloatArray
    intercept: float
    support: IntArray
    selection: HeavyHitterResult
    empty_coordinates: int
    n_rounds: int
    n_selection: int
    n_estimation: int
    algorithm: str = "two_round"


def _select(
    X: FloatArray,
    y: FloatArray,
    user: IntArray,
    sel: IntArray,
    eps: FloatArray,
    cfg: PipelineConfig,
    rngs: tuple[np.random.Generator, np.random.Generator],
    ledger: PrivacyLedger,
) -> HeavyHitterResult:
    public, private = rngs
    d = X.shape[1]
    if cfg.selector == "post_lasso":
        sets = post_lasso_sets(X, y, user, sel, k_sel=cfg.k_sel, k_screen=cfg.k_screen)
    elif cfg.selector == "screening_signed":
        sets = top_k_signed_rows(screening_scores(X, y, user, sel), cfg.k_sel)
    else:
        sets = top_k_rows(screening_scores(X, y, user, sel), cfg.k_sel)
    v = pick_one(sets, private)
    if cfg.exact:
        ledger.charge(sel, eps[sel], "selection: exact index (non-private)")
        return exact_heavy_hitters(v, d=d, k=cfg.k)
    return heavy_hitters(
        v, eps[sel], d=d, k=cfg.k, rng_public=public, rng_private=private,
        alpha=cfg.alpha, weighted=cfg.weighted, ledger=ledger, users=sel,
        oracle=cfg.oracle, levels=cfg.levels,
    )  # fmt: skip


def _mean(
    values: FloatArray,
    users: IntArray,
    eps: FloatArray,
    *,
    bound: float,
    cfg: PipelineConfig,
    rngs: tuple[np.random.Generator, np.random.Generator],
    ledger: PrivacyLedger,
    stage: str,
) -> tuple[FloatArray, int]:
    if cfg.exact:  # spec A8: plain averages at ε = ∞
        ledger.charge(users, eps[users], f"{stage}: exact value (non-private)")
        return values.mean(axis=0), 0
    res = uldp_mean(
        values, eps[users], bound=bound, n_bins=cfg.n_bins, rng_public=rngs[0],
        rng_private=rngs[1], rotate=cfg.rotate, weighted=cfg.weighted,
        ledger=ledger, users=users, stage=stage,
    )  # fmt: skip
    return res.mean, int(res.empty_coordinates.size)


def _multi_round(
    G: FloatArray,
    b: FloatArray,
    m: FloatArray,
    est: IntArray,
    eps: FloatArray,
    cfg: PipelineConfig,
    rngs: tuple[np.random.Generator, np.random.Generator],
    ledger: PrivacyLedger,
) -> tuple[FloatArray, int, int]:
    """M-SLR (spec §7): AC-SA with one fresh batch of users per step."""
    s = b.shape[1]
    T = max(1, est.size // cfg.batch_size)
    batch = deal(eps[est], T, rngs[0])
    theta = np.zeros(s)
    theta_ag = np.zeros(s)
    empty = 0
    for t in range(T):  # rounds (sequential interaction), each vectorised over users
        beta = (t + 2) / 2.0
        theta_md = theta / beta + (1 - 1 / beta) * theta_ag
        mine = np.flatnonzero(batch == t)
        grads = local_gradients(G[mine], b[mine], m[mine], theta_md)
        g_hat, n_empty = _mean(
            grads, est[mine], eps, bound=cfg.gradient_bound, cfg=cfg, rngs=rngs,
            ledger=ledger, stage="estimation (M-SLR gradient)",
        )  # fmt: skip
        empty += n_empty
        eta = cfg.step_c0 * (t + 1) ** cfg.step_power
        base = theta if cfg.update == "ac_sa" else theta_md
        theta = base - eta * g_hat
        theta_ag = theta / beta + (1 - 1 / beta) * theta_ag
    return theta_ag, empty, T


BATCH_USERS_PER_COORDINATE = 16
"""M-SLR needs ``b ≥ 16K`` users per step (spec §7 PROPOSAL), else 2-SLR runs."""


def estimation_algorithm(cfg: PipelineConfig, n_columns: int) -> str:
    """The estimation stage that runs: ``cfg.algorithm``, except that M-SLR falls back to
    2-SLR when its batch is smaller than ``16·K`` (spec §7: "require ``b ≥ 16K`` or fall
    back to 2-SLR"), ``K = 2^⌈log2 s⌉`` the padded dimension of the gradients averaged by
    ULDPMean (``s = |Ŝ|``, plus one for the intercept column). With fewer users each
    coordinate of each half of a step's ULDPMean has fewer than 8 users on average.
    ``b``, ``|Ŝ|`` and ``K`` are public, so the choice is post-processing.
    """
    if cfg.algorithm != "multi_round" or not cfg.small_batch_fallback:
        return cfg.algorithm
    K = padded_dimension(n_columns)
    if cfg.batch_size < BATCH_USERS_PER_COORDINATE * K:
        return "two_round"
    return "multi_round"


def fit_pipeline(
    X: FloatArray,
    y: FloatArray,
    user: IntArray,
    eps: FloatArray,
    cfg: PipelineConfig,
    rngs: tuple[np.random.Generator, np.random.Generator],
    ledger: PrivacyLedger,
) -> SparseFit:
    """Run 2-SLR or M-SLR on records ``(X, y)`` owned by ``user`` with budgets ``eps``
    (one per user); the ledger records every message."""
    d = X.shape[1]
    active = np.flatnonzero(eps > 0)
    first, second = split_halves(eps[active], rngs[0])
    sel, est = active[first], active[second]
    selection = _select(X, y, user, sel, eps, cfg, rngs, ledger)
    support = selection.support
    Xs = X[:, support] * cfg.x_scale  # the ranking above is invariant to the scale
    if cfg.fit_intercept:
        Xs = np.hstack([Xs, np.ones((Xs.shape[0], 1))])
    theta = np.zeros(Xs.shape[1])
    empty, rounds = 0, 0
    algorithm = estimation_algorithm(cfg, Xs.shape[1])
    if est.size:
        G, b, m = gram(Xs, y, user, est)
        if algorithm == "multi_round":
            theta, empty, rounds = _multi_round(G, b, m, est, eps, cfg, rngs, ledger)
        else:
            theta, empty = _mean(
                local_ols(G, b), est, eps, bound=cfg.bound, cfg=cfg, rngs=rngs,
                ledger=ledger, stage="estimation (2-SLR)",
            )  # fmt: skip
            rounds = 2
    coef = np.zeros(d)
    coef[support] = theta[: support.size] * cfg.x_scale
    intercept = float(theta[-1]) if cfg.fit_intercept else 0.0
    return SparseFit(
        coef=coef,
        intercept=intercept,
        support=support,
        selection=selection,
        empty_coordinates=empty,
        n_rounds=rounds,
        n_selection=int(sel.size),
        n_estimation=int(est.size),
        algorithm=algorithm,
    )
