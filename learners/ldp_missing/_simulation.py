"""The paper's simulation design (spec §1, §8, §10), for tests and benchmarks.

``x ~ U[−1, 1]^k``, ``P(y = 1 | x) = σ(β*ᵀx')``, and ``x`` missing with
``P(m = 1 | y) = σ(α*ᵀy')`` (``alpha_parametrizes="missing"``, the model as written)
or ``P(m = 0 | y) = σ(α*ᵀy')`` (``"observed"``, the flipped sign the paper's
experiments very probably used, spec §8.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from learners.ldp_missing._algorithms import dummy_submission, two_phase

__all__ = [
    "MissingData",
    "Trial",
    "cross_entropy",
    "missing_data_limit",
    "run_trial",
    "run_trials",
    "simulate",
]


@dataclass(frozen=True, slots=True)
class MissingData:
    """A simulated sample: ``X_full`` (all covariates), ``X`` (missing rows NaN),
    ``y01 ∈ {0, 1}``, ``missing``."""

    X_full: NDArray[np.float64]
    X: NDArray[np.float64]
    y01: NDArray[np.float64]
    missing: NDArray[np.bool_]


def simulate(
    n: int,
    *,
    beta: ArrayLike,
    alpha: ArrayLike,
    alpha_parametrizes: Literal["missing", "observed"] = "missing",
    rng: np.random.Generator,
) -> MissingData:
    """Draw ``n`` records of the design above (``k = len(beta) − 1``)."""
    b = np.asarray(beta, dtype=float)
    a = np.asarray(alpha, dtype=float)
    if alpha_parametrizes not in ("missing", "observed"):
        raise ValueError(
            f"alpha_parametrizes must be 'missing' or 'observed', got {alpha_parametrizes!r}"
        )
    X_full = rng.uniform(-1.0, 1.0, (n, b.size - 1))
    y01 = (rng.random(n) < expit(b[0] + X_full @ b[1:])).astype(float)
    p = expit(a[0] + a[1] * y01)
    p_missing = p if alpha_parametrizes == "missing" else 1.0 - p
    missing = rng.random(n) < p_missing
    X = np.where(missing[:, None], np.nan, X_full)
    return MissingData(X_full, X, y01, missing)


def cross_entropy(
    beta: ArrayLike, X: NDArray[np.float64], y01: NDArray[np.float64]
) -> float:
    """Mean ``ℓ(β; x, y) = log(1 + e^{βᵀx'}) − y·βᵀx'`` over the rows (spec §1)."""
    b = np.asarray(beta, dtype=float)
    t = b[0] + X @ b[1:]
    return float(np.mean(-log_expit(t) + (1.0 - y01) * t))


def missing_data_limit(
    beta: ArrayLike,
    alpha: ArrayLike,
    *,
    alpha_parametrizes: Literal["missing", "observed"] = "missing",
) -> NDArray[np.float64]:
    """Unconstrained DS limit ``(β₀* + log(r₁/r₀), β₁*, …)`` (spec §1, useful fact)."""
    b = np.array(beta, dtype=float)
    a = np.asarray(alpha, dtype=float)
    p = expit(a[0] + a[1] * np.array([0.0, 1.0]))
    r = 1.0 - p if alpha_parametrizes == "missing" else p
    b[0] += float(np.log(r[1] / r[0]))
    return b


@dataclass(frozen=True, slots=True)
class Trial:
    """One fit of the spec §10 experiment: ``err = ‖β̂ − β*‖`` and ``risk`` = excess
    empirical cross-entropy on the **full** simulated data (spec §8.6; may be < 0)."""

    beta: NDArray[np.float64]
    err: float
    risk: float
    alpha: NDArray[np.float64] | None


def _complete_case_mle(data: MissingData) -> NDArray[np.float64]:
    """Non-private baseline: the unpenalised MLE on the complete cases."""
    keep = ~data.missing
    X, y = data.X_full[keep], data.y01[keep]

    def loss(b: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        t = b[0] + X @ b[1:]
        r = expit(t) - y
        grad = np.concatenate([[r.mean()], X.T @ r / y.size])
        return cross_entropy(b, X, y), grad

    res = minimize(loss, np.zeros(X.shape[1] + 1), jac=True, method="BFGS")
    return np.asarray(res.x, dtype=float)


def run_trial(
    method: Literal["dummy", "two_phase", "nonprivate"],
    data: MissingData,
    epsilon: ArrayLike,
    *,
    beta_star: ArrayLike,
    rng: np.random.Generator,
    **options: Any,
) -> Trial:
    """Fit ``method`` on ``data`` (spec §10 defaults: ``R_β = √2`` for k = 1, R_α = 4,
    γ = 0.1, ``x ∈ [−1, 1]^k``; ``options`` override them) and score it."""
    n, k = data.X.shape
    eps = np.broadcast_to(np.asarray(epsilon, dtype=float), (n,))
    kw: dict[str, Any] = {
        "x_bound": float(np.sqrt(k)),
        "beta_radius": float(np.sqrt(k + 1)),
        "gamma": 0.1,
        "rng": rng,
    }
    kw.update(options)
    alpha = None
    if method == "nonprivate":
        beta = _complete_case_mle(data)
    elif method == "dummy":
        beta = dummy_submission(data.X, data.y01, eps, **kw).beta
    else:
        kw.setdefault("alpha_radius", 4.0)
        tp = two_phase(data.X, data.y01, eps, **kw)
        beta, alpha = tp.beta, tp.alpha
    b_star = np.asarray(beta_star, dtype=float)
    risk = cross_entropy(beta, data.X_full, data.y01) - cross_entropy(
        b_star, data.X_full, data.y01
    )
    return Trial(beta, float(np.linalg.norm(beta - b_star)), risk, alpha)


def run_trials(
    method: Literal["dummy", "two_phase", "nonprivate"],
    *,
    trials: int,
    n: int,
    beta: ArrayLike,
    alpha: ArrayLike,
    alpha_parametrizes: Literal["missing", "observed"],
    epsilon: ArrayLike,
    rng: np.random.Generator,
    **options: Any,
) -> list[Trial]:
    """``trials`` independent (data, fit) pairs of :func:`simulate` and :func:`run_trial`."""
    out = []
    for _ in range(trials):
        data = simulate(
            n, beta=beta, alpha=alpha, alpha_parametrizes=alpha_parametrizes, rng=rng
        )
        out.append(run_trial(method, data, epsilon, beta_star=beta, rng=rng, **options))
    return out
