"""The paper's synthetic design and the experiment loop (spec §10.1, §15 V5–V7).

Shared by the ``slow`` tests and ``benchmarks/uldp_sparse.py``: ``x ~ N(0, I_d)``,
``ξ ~ N(0, 1)``, ``θ*_j = 0.2`` on an 8-sparse support (the reference's ``{0..7}`` or a
uniformly random one), ``m`` records per user; metrics are the unsquared ℓ2 error and
the F1 of the selected support. "Best over the grid" takes, per metric, the best mean
over configurations (the paper's oracle tuning, spec D8).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from learners.uldp_sparse._estimator import ULDPSparseLinearRegression

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
S_STAR, BETA = 8, 0.2
ZERO_ESTIMATOR_L2 = float(np.sqrt(S_STAR) * BETA)
"""ℓ2 error of ``θ̂ = 0``: ``√8 · 0.2 ≈ 0.566``."""


@dataclass(frozen=True)
class Design:
    """One simulated data set: records, owners, truth."""

    X: FloatArray
    y: FloatArray
    groups: IntArray
    theta: FloatArray
    support: IntArray


def independent_design(
    n: int,
    m: int,
    d: int,
    *,
    rng: np.random.Generator,
    random_support: bool = False,
) -> Design:
    """``n`` users with ``m`` records each; support ``{0..7}`` (reference, D3) or 8
    indices drawn uniformly (``random_support``, the honest benchmark)."""
    S = (
        np.sort(rng.choice(d, S_STAR, replace=False))
        if random_support
        else np.arange(S_STAR)
    )
    theta = np.zeros(d)
    theta[S] = BETA
    X = rng.standard_normal((n * m, d))
    y = X @ theta + rng.standard_normal(n * m)
    return Design(X, y, np.repeat(np.arange(n), m), theta, S.astype(np.int64))


def f1_score(selected: IntArray, truth: IntArray) -> float:
    """F1 of a selected support against the true one."""
    tp = len(set(np.asarray(selected).tolist()) & set(np.asarray(truth).tolist()))
    return 2.0 * tp / (len(selected) + len(truth))


def local_lasso_l2(d: int, m: int, *, rng: np.random.Generator) -> float:
    """The paper's local baseline: ``LassoCV`` (5-fold, no intercept) on one user's
    fresh ``m`` records; its ℓ2 error."""
    from sklearn.linear_model import LassoCV

    des = independent_design(1, m, d, rng=rng)
    coef = LassoCV(cv=5, fit_intercept=False).fit(des.X, des.y).coef_
    return float(np.linalg.norm(coef - des.theta))


@dataclass(frozen=True)
class SettingResult:
    """Mean ℓ2 and F1 of each configuration over the runs, and the best of each."""

    l2: dict[str, float]
    f1: dict[str, float]

    @property
    def best_l2(self) -> float:
        return min(self.l2.values())

    @property
    def best_f1(self) -> float:
        return max(self.f1.values())


def run_setting(
    *,
    n: int,
    m: int,
    d: int,
    epsilon: float,
    configs: Mapping[str, Mapping[str, Any]],
    runs: int,
    seed: int = 0,
    random_support: bool = False,
) -> SettingResult:
    """Every configuration on the same ``runs`` data sets (seeds ``seed + r``)."""
    l2: dict[str, list[float]] = {name: [] for name in configs}
    f1: dict[str, list[float]] = {name: [] for name in configs}
    for r in range(runs):
        rng = np.random.default_rng(seed + r)
        des = independent_design(n, m, d, rng=rng, random_support=random_support)
        for name, params in configs.items():
            est = ULDPSparseLinearRegression(random_state=seed + r, **params)
            est.fit(des.X, des.y, sample_epsilon=epsilon, groups=des.groups)
            l2[name].append(float(np.linalg.norm(est.coef_ - des.theta)))
            f1[name].append(f1_score(est.support_, des.support))
    return SettingResult(
        l2={k: float(np.mean(v)) for k, v in l2.items()},
        f1={k: float(np.mean(v)) for k, v in f1.items()},
    )


def grid(
    *, n_bins: Sequence[int], bounds: Sequence[float], **fixed: Any
) -> dict[str, dict[str, Any]]:
    """Named configurations over ``N_b × B`` with ``fixed`` parameters."""
    prefix = ",".join(f"{k}={v}" for k, v in sorted(fixed.items()))
    return {
        f"{prefix},n_bins={nb},bound={b}": dict(fixed, n_bins=nb, bound=b)
        for nb in n_bins
        for b in bounds
    }


def multi_round_grid(
    *, n_bins: Sequence[int], gradient_bounds: Sequence[float], **fixed: Any
) -> dict[str, dict[str, Any]]:
    """Named M-SLR configurations over ``N_b ×`` gradient bound with ``fixed``
    parameters, at the paper's batch size (no small-batch fallback to 2-SLR)."""
    base = dict(fixed, algorithm="multi_round", small_batch_fallback=False)
    prefix = ",".join(f"{k}={v}" for k, v in sorted(base.items()))
    return {
        f"{prefix},n_bins={nb},gradient_bound={gb}": dict(
            base, n_bins=nb, gradient_bound=gb
        )
        for nb in n_bins
        for gb in gradient_bounds
    }
