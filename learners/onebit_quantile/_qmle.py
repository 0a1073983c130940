"""The curator's estimate: QMLE, sandwich covariance, Wald inference (spec §2.4–§2.5, §3.5).

:func:`estimate_public_x` and :func:`estimate_private_x` are the whole curator side:
their inputs are the report objects (bits, budgets, public rows) and public
configuration — never a raw response or a private covariate (spec V-B12).

Inference: ``√n(β̂ − β*) → N(0, A⁻¹BA⁻¹)`` (paper Theorem 4 / 6); ``Cov(β̂) ≈ Ĉ/n`` with
``Ĉ = Â⁻¹B̂Â⁻¹`` (``covariance="sandwich"``, the default) or ``I(β̂)⁻¹`` (``"model"``,
paper Corollary 3: only if the working model is taken as correct). No covariance is
reported when the optimum is on the parameter box or ``Â`` is singular.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import chi2, norm
from threadpoolctl import threadpool_limits

from learners.onebit_quantile._model import QuantileWorkingModel
from learners.onebit_quantile._optimize import OptimizeResult, maximize_in_box
from learners.onebit_quantile._private_x import CornerPrior, PrivateXLikelihood
from learners.onebit_quantile._public_x import PublicXLikelihood
from learners.onebit_quantile._randomizers import PrivateXReports, PublicXReports

FloatArray = NDArray[np.float64]
CovarianceKind = Literal["sandwich", "model"]
SCREEN_USERS = 20_000
"""Public X with more users: the restarts run on a fixed sub-sample of this size and
the full data are polished from the best end point (Fisher scoring, then L-BFGS-B if
needed): every full-data pass is ``O(n·d)``."""

PUBLIC_X_ESTIMAND = (
    "pseudo-true β* of the asymmetric-Laplace α-quantile working model (QMLE); the "
    "conditional α-quantile coefficients when the working model is correct"
)
PRIVATE_X_ESTIMAND = (
    "maximizer of the expected log-likelihood under the curator's two-point prior over "
    "the private covariates, not necessarily the regression coefficients: with "
    "covariates spread inside their intervals the endpoint prior attenuates the slopes "
    "by roughly E[x̃_j²] (spec §3.6)"
)


@dataclass(frozen=True, slots=True)
class QMLEResult:
    """One fit: estimate, covariance and diagnostics (spec §5's report list).

    Attributes
    ----------
    params : ndarray of shape (d,)
        ``β̂`` (the caller's order: coefficients, then the intercept if any).
    covariance : ndarray of shape (d, d) or None
        ``Cov(β̂) ≈ Ĉ/n``; None when ``on_boundary`` or ``Â`` is singular.
    covariance_kind : {"sandwich", "model"}
    loglik : float
        ``ℓ_n(β̂)`` (average over the users who reported).
    grad_norm : float
        Projected-gradient infinity norm of ``−ℓ_n`` at ``β̂`` (rescaled coordinates).
    on_boundary : bool
        ``β̂`` ended on the parameter box (too little information; no covariance).
    converged : bool
    n_users : int
        Users who sent a report (``ε_i > 0``).
    estimand : str
        What ``β̂`` estimates (the prior's caveat for private X, spec §3.6).
    """

    params: FloatArray
    covariance: FloatArray | None
    covariance_kind: CovarianceKind
    loglik: float
    grad_norm: float
    on_boundary: bool
    converged: bool
    n_users: int
    estimand: str
    n_evaluations: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def bse(self) -> FloatArray:
        """Standard errors ``√diag(Cov)`` (NaN where no covariance is reported)."""
        if self.covariance is None:
            return np.full(self.params.shape, np.nan)
        return np.sqrt(np.maximum(np.diag(self.covariance), 0.0))

    def conf_int(self, level: float = 0.95) -> FloatArray:
        """Wald intervals ``β̂_j ± z_{(1+level)/2}·SE_j``, shape ``(d, 2)``.

        Raises
        ------
        ValueError
            ``level`` is not in (0, 1).
        """
        if not (isinstance(level, int | float) and 0.0 < float(level) < 1.0):
            raise ValueError(f"level must be in (0, 1), got {level!r}")
        half = float(norm.ppf(0.5 + float(level) / 2.0)) * self.bse
        return np.column_stack([self.params - half, self.params + half])

    def wald_test(
        self, R: ArrayLike, r: ArrayLike | None = None
    ) -> tuple[float, float]:
        """Wald statistic of ``Rβ = r`` and its ``χ²_{rank R}`` p-value (spec §2.5)."""
        if self.covariance is None:
            raise ValueError("no covariance: the fit is on the boundary or singular")
        Rm = np.atleast_2d(np.asarray(R, dtype=float))
        rv = np.zeros(Rm.shape[0]) if r is None else np.asarray(r, dtype=float)
        diff = Rm @ self.params - rv
        stat = float(diff @ np.linalg.solve(Rm @ self.covariance @ Rm.T, diff))
        rank = int(np.linalg.matrix_rank(Rm))
        return stat, float(chi2.sf(stat, rank))


def _covariance(
    lik: PublicXLikelihood | PrivateXLikelihood,
    beta: FloatArray,
    kind: CovarianceKind,
) -> tuple[FloatArray | None, tuple[str, ...]]:
    try:
        if kind == "model":
            cov = np.linalg.inv(lik.fisher(beta)) / lik.n
        else:
            A, B = lik.sandwich_parts(beta)
            A_inv = np.linalg.inv(A)
            cov = A_inv @ B @ A_inv.T / lik.n
    except np.linalg.LinAlgError:
        return None, ("singular information matrix: no standard errors",)
    if not np.all(np.isfinite(cov)):
        return None, ("non-finite covariance: no standard errors",)
    return 0.5 * (cov + cov.T), ()


def _finish(
    lik: PublicXLikelihood | PrivateXLikelihood,
    opt: OptimizeResult,
    *,
    covariance: CovarianceKind,
    estimand: str,
) -> QMLEResult:
    cov: FloatArray | None = None
    notes: tuple[str, ...] = ()
    if opt.on_boundary:
        notes = ("on the parameter box: too little information, no standard errors",)
    else:
        cov, notes = _covariance(lik, opt.beta, covariance)
    return QMLEResult(
        params=opt.beta,
        covariance=cov,
        covariance_kind=covariance,
        loglik=-opt.value,
        grad_norm=opt.grad_norm,
        on_boundary=opt.on_boundary,
        converged=opt.converged,
        n_users=lik.n,
        estimand=estimand,
        n_evaluations=opt.n_evaluations,
        notes=notes,
    )


def default_box(model: QuantileWorkingModel) -> float:
    """``2·max(|c_l|, |c_u|)`` in rescaled coordinates (spec §2.4 PROPOSAL)."""
    return 2.0 * max(abs(model.low), abs(model.high))


def _starts(
    lik: PublicXLikelihood | PrivateXLikelihood, intercept_index: int | None
) -> list[FloatArray]:
    return [lik.initial(), lik.constant_start(intercept_index=intercept_index)]


def estimate_public_x(
    reports: PublicXReports,
    *,
    model: QuantileWorkingModel,
    intercept_index: int | None,
    box: float | None = None,
    n_restarts: int = 2,
    covariance: CovarianceKind = "sandwich",
) -> QMLEResult:
    """QMLE of the public-X protocol (spec §2.4) from the curator's reports only.

    Runs with one BLAS thread: the work is ``O(n·d)`` element-wise passes and
    ``d × d`` algebra, where BLAS threads only add synchronisation (on a busy machine
    L-BFGS-B's tiny products slowed down a hundredfold).
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _estimate_public_x(
            reports,
            model=model,
            intercept_index=intercept_index,
            box=box,
            n_restarts=n_restarts,
            covariance=covariance,
        )


def _estimate_public_x(
    reports: PublicXReports,
    *,
    model: QuantileWorkingModel,
    intercept_index: int | None,
    box: float | None = None,
    n_restarts: int = 2,
    covariance: CovarianceKind = "sandwich",
) -> QMLEResult:
    lik = PublicXLikelihood(reports, model)
    half = default_box(model) if box is None else float(box)
    scales = lik.column_scales()
    if lik.n > SCREEN_USERS:
        pick = np.sort(
            np.random.default_rng(0).choice(lik.n, size=SCREEN_USERS, replace=False)
        )
        sub = PublicXReports(
            X=reports.X[pick], z=reports.z[pick], epsilon=reports.epsilon[pick]
        )
        sub_lik = PublicXLikelihood(sub, model)
        screen = maximize_in_box(
            sub_lik.value_grad,
            starts=_starts(sub_lik, intercept_index),
            scales=scales,
            box=half,
            n_restarts=n_restarts,
            newton=sub_lik.value_grad_fisher,
        )
        opt = maximize_in_box(
            lik.value_grad,
            starts=[screen.beta],
            scales=scales,
            box=half,
            n_restarts=0,
            newton=lik.value_grad_fisher,
            newton_first=True,
        )
    else:
        opt = maximize_in_box(
            lik.value_grad,
            starts=_starts(lik, intercept_index),
            scales=scales,
            box=half,
            n_restarts=n_restarts,
            newton=lik.value_grad_fisher,
        )
    return _finish(lik, opt, covariance=covariance, estimand=PUBLIC_X_ESTIMAND)


def estimate_private_x(
    reports: PrivateXReports,
    *,
    model: QuantileWorkingModel,
    prior: CornerPrior,
    private_index: list[int],
    public_index: list[int],
    intercept_index: int | None,
    box: float | None = None,
    n_restarts: int = 2,
    covariance: CovarianceKind = "sandwich",
) -> QMLEResult:
    """QMLE of the private-X protocol (spec §3.3) from the curator's reports only
    (one BLAS thread, as :func:`estimate_public_x`)."""
    with threadpool_limits(limits=1, user_api="blas"):
        return _estimate_private_x(
            reports,
            model=model,
            prior=prior,
            private_index=private_index,
            public_index=public_index,
            intercept_index=intercept_index,
            box=box,
            n_restarts=n_restarts,
            covariance=covariance,
        )


def _estimate_private_x(
    reports: PrivateXReports,
    *,
    model: QuantileWorkingModel,
    prior: CornerPrior,
    private_index: list[int],
    public_index: list[int],
    intercept_index: int | None,
    box: float | None,
    n_restarts: int,
    covariance: CovarianceKind,
) -> QMLEResult:
    lik = PrivateXLikelihood(
        reports,
        model,
        prior=prior,
        private_index=private_index,
        public_index=public_index,
    )
    opt = maximize_in_box(
        lik.value_grad,
        starts=_starts(lik, intercept_index),
        scales=lik.column_scales(),
        box=default_box(model) if box is None else float(box),
        n_restarts=n_restarts,
        newton=lik.value_grad_fisher,
    )
    return _finish(lik, opt, covariance=covariance, estimand=PRIVATE_X_ESTIMAND)


def z_value(level: float) -> float:
    """``z_{(1+level)/2}`` (1.959964 for 95 %)."""
    return float(norm.ppf(0.5 + level / 2.0)) if 0 < level < 1 else math.nan
