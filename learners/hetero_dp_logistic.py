"""Logistic regression released with heterogeneous objective perturbation (spec §3)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from numbers import Real
from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from learners._newton import minimize_ridge_risk
from learners._noise import sample_gamma_direction_noise
from learners._sign_classifier import SignClassifierMixin
from learners._validation import (
    RANDOM_STATE_CONSTRAINT,
    check_groups,
    check_sample_epsilon,
    check_sign_labels,
    check_unit_rows,
    resolve_privacy_weights,
)
from learners.losses import LogisticLoss
from learners.privacy import (
    CENTRAL_GUARANTEES,
    objective_perturbation_report,
    ridge_remedy,
)
from learners.registry import ReleaseContext
from learners.spec import LearnerSpec, ParamSpec

_SQRT2 = math.sqrt(2.0)


class HeteroDPLogisticRegression(SignClassifierMixin, ClassifierMixin, BaseEstimator):
    """Logistic regression with a per-record (heterogeneous) ε-DP guarantee.

    Implements the paper's Algorithm 0 (spec ``mechanism.md`` §3), objective
    perturbation [CMS11]_ with record weights ``a ∈ Δ_n``. ``fit`` draws ``b ∈ R^d``
    with density ``∝ exp(−‖b‖)`` (``‖b‖ ~ Gamma(d, 1)``, uniform direction) and releases

        ŵ = argmin_w Σ_i a_i log(1 + exp(−y_i x_i·w)) + (λ/2)‖w‖² + (2/η)·bᵀw,

    computed by damped Newton to ``‖∇‖ ≤ gtol``. With ``‖x_i‖ ≤ 1`` and ``y_i ∈ {±1}``,
    record ``i`` gets ``ε_i = a_i·η + 2·ln(1 + a_i/(4λ))`` against replacement of its
    record (``privacy_report_``).

    Parameters
    ----------
    lam : float, default=1e-2
        Ridge parameter ``λ > 0``.
    eta : float or None, default=None
        ``η > 0``; required with ``fit(..., weights=a)``, must be None with
        ``fit(..., sample_epsilon=ε)`` (then ``η = Σ ε_i``).
    fit_intercept : bool, default=False
        If True the model is fitted on ``x̃ = [x, 1]/√2`` (so ``‖x̃‖ ≤ 1`` and the
        guarantee is unchanged) and ``coef_ = w̃[:d]/√2``, ``intercept_ = w̃[d]/√2``.
        The ridge term ``λ‖w̃‖²/2`` then equals ``λ(‖coef_‖² + intercept_²)``: it also
        shrinks the intercept, unlike scikit-learn's ``LogisticRegression``.
    guarantee : {"conditional_on_allocation", "end_to_end"}, default="conditional_on_allocation"
        Recorded in the report. Pass ``"end_to_end"`` only when the weights were chosen
        without the private data (spec §4.4); the estimator cannot check it.
    gtol : float, default=1e-10
        Gradient-norm tolerance of the argmin (the proof assumes the exact minimiser).
    random_state : int, numpy.random.Generator or None, default=None
        Noise source, ``np.random.default_rng(random_state)``; None uses OS entropy.
        A Generator is used as is (each fit advances it).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
        0.0 when ``fit_intercept=False``.
    classes_ : ndarray of shape (2,)
        ``array([-1, 1])``.
    n_features_in_ : int
    privacy_report_ : PrivacyReport
        Per-record ``sample_epsilon`` (``a_i·η``), ``sample_epsilon_total``, the public
        solver certificate (``gtol``, or ``inf`` if it was not met), the guarantee type
        and ``lam_effective``.
    lam_effective_ : float
        The ridge the release used (``lam``, or raised by the remedy of
        ``fit(..., sample_epsilon_total=...)``).

    References
    ----------
    .. [CMS11] K. Chaudhuri, C. Monteleoni, A. D. Sarwate, "Differentially private
       empirical risk minimization", JMLR 12 (2011), Algorithm 2.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.6, 0.0], [0.0, 0.6], [-0.6, 0.0], [0.0, -0.6]])
    >>> y = np.array([1, 1, -1, -1])
    >>> clf = HeteroDPLogisticRegression(lam=0.1, random_state=0)
    >>> clf = clf.fit(X, y, sample_epsilon=[1e6, 1e6, 1e6, 1e6])
    >>> clf.predict(X).tolist()
    [1, 1, -1, -1]
    >>> round(clf.privacy_report_.sample_epsilon_total[0], 4)  # 1e6 + 2 ln(1 + 0.25/0.4)
    1000000.971
    """

    learner_spec: ClassVar[LearnerSpec] = LearnerSpec(
        name="hetero_dp_logistic",
        tasks=("classification",),
        privacy_model="central",
        mechanism_loss="logistic",
        overhead="objective_perturbation",
        params=(
            ParamSpec(
                name="fit_intercept",
                kind="bool",
                default=True,
                doc="fit an intercept (rows [x, 1]/√2, so ‖x̃‖ ≤ 1 still holds)",
            ),
        ),
        summary="logistic regression, heterogeneous objective perturbation "
        "(one record per seller; ε_i = a_i·η + 2 ln(1 + a_i/(4λ)))",
    )
    """Registry entry (:data:`learners.LEARNERS`)."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "lam": [Interval(Real, 0, None, closed="neither")],
        "eta": [Interval(Real, 0, None, closed="neither"), None],
        "fit_intercept": ["boolean"],
        "guarantee": [StrOptions(set(CENTRAL_GUARANTEES))],
        "gtol": [Interval(Real, 0, None, closed="neither")],
        "random_state": RANDOM_STATE_CONSTRAINT,
    }

    def __init__(
        self,
        *,
        lam: float = 1e-2,
        eta: float | None = None,
        fit_intercept: bool = False,
        guarantee: str = "conditional_on_allocation",
        gtol: float = 1e-10,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.lam = lam
        self.eta = eta
        self.fit_intercept = fit_intercept
        self.guarantee = guarantee
        self.gtol = gtol
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        *,
        sample_epsilon: ArrayLike | None = None,
        weights: ArrayLike | None = None,
        groups: ArrayLike | None = None,
        sample_epsilon_total: ArrayLike | None = None,
    ) -> Self:
        """Release the perturbed argmin for per-record privacy ``sample_epsilon`` or ``(weights, eta)``.

        ``sample_epsilon`` is the noise part ``a_i·η`` (the curvature term ``Δ_i`` is
        added on top, see ``privacy_report_``); one per record, or a scalar for the
        same ε on every record (likewise ``sample_epsilon_total``). ``sample_epsilon_total`` instead caps
        each record's **total** guarantee: weights proportional to it, and when a
        target is at or below its curvature term the ridge is raised ([CMS11]_'s
        remedy, :func:`learners.privacy.ridge_remedy`); the ridge used is
        ``lam_effective_`` and ``privacy_report_.lam_effective``.

        Raises
        ------
        ValueError
            Non-finite input, a row with ``‖x_i‖ > 1`` or a label outside ``{−1, +1}``
            (the message names the input, never a row or a value), or an invalid
            privacy request (see
            :func:`learners._validation.resolve_privacy_weights`).
        """
        X_arr, y_arr = validate_data(self, X, y, dtype=np.float64, y_numeric=False)
        check_groups(groups, n_samples=X_arr.shape[0], one_per_group=True)
        check_unit_rows(X_arr, name="X")
        y_pm = check_sign_labels(y_arr, name="y")
        lam = float(self.lam)
        if sample_epsilon_total is not None:
            if (
                sample_epsilon is not None
                or weights is not None
                or self.eta is not None
            ):
                raise ValueError(
                    "sample_epsilon_total: give it alone (no sample_epsilon, weights "
                    "or eta)"
                )
            target = check_sample_epsilon(
                sample_epsilon_total,
                name="sample_epsilon_total",
                n_samples=X_arr.shape[0],
            )
            a, eta, lam = ridge_remedy(target, lam)
        else:
            a, eta = resolve_privacy_weights(
                sample_epsilon=sample_epsilon,
                weights=weights,
                eta=self.eta,
                n_samples=X_arr.shape[0],
            )
        Z = self._design(X_arr)
        rng = np.random.default_rng(self.random_state)
        b = sample_gamma_direction_noise(Z.shape[1], rng=rng)
        res = minimize_ridge_risk(
            LogisticLoss(),
            Z,
            y_pm,
            a,
            lam,
            c=(2.0 / eta) * b,
            gtol=self.gtol,
        )
        if not res.converged:
            warnings.warn(  # no achieved norm or iteration count: both are data-dependent
                f"argmin did not reach gtol={self.gtol:g}; the privacy proof assumes the "
                "exact minimiser",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.lam_effective_ = lam
        self._set_coefficients(res.w, n_features=X_arr.shape[1])
        self.classes_ = np.array([-1, 1])
        self.privacy_report_ = objective_perturbation_report(
            a,
            eta=eta,
            lam=lam,
            guarantee=self.guarantee,
            grad_norm=res.grad_norm,
            gtol=float(self.gtol),
        )
        return self

    @classmethod
    def for_order(cls, params: Mapping[str, Any], *, context: ReleaseContext) -> Self:
        """The release for an order: the buyer's ``params``, the mechanism's ``λ``, and
        the ``end_to_end`` label only when the allocation saw no private data."""
        checked = cls.learner_spec.check_params(params)
        guarantee = (
            "conditional_on_allocation"
            if context.allocation_uses_data
            else "end_to_end"
        )
        return cls(lam=context.lam, guarantee=guarantee, **checked)

    def design_matrix(self, X: ArrayLike) -> NDArray[np.float64]:
        """Rows the mechanism prices: ``X``, or ``[X, 1]/√2`` with an intercept.

        The allocation's ``w`` lives in the same space as the released ``w̃``, so the
        mechanism's ``Σ a_i ℓ_i(w)`` is the release's weighted risk (spec §3–§4).
        """
        return self._design(np.asarray(X, dtype=float))

    def export_model(self) -> dict[str, Any]:
        """``coef``/``intercept`` in the (scaled) feature units of ``fit``'s ``X``,
        the classes and the decision rule."""
        check_is_fitted(self)
        return {
            "coef": [float(v) for v in self.coef_],
            "intercept": float(self.intercept_) if self.fit_intercept else None,
            "classes": [-1, 1],
            "decision": "sign(coefficients·x + intercept)",
        }

    def _design(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """``X`` itself, or ``[X, 1]/√2`` with an intercept (keeps ``‖x̃‖ ≤ 1``)."""
        if not self.fit_intercept:
            return X
        return np.hstack([X, np.ones((X.shape[0], 1))]) / _SQRT2

    def _set_coefficients(self, w: NDArray[np.float64], *, n_features: int) -> None:
        if self.fit_intercept:
            self.coef_ = w[:n_features] / _SQRT2
            self.intercept_ = float(w[n_features] / _SQRT2)
        else:
            self.coef_ = w.copy()
            self.intercept_ = 0.0

    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """``x·coef_ + intercept_`` for each row; positive means class ``+1``."""
        check_is_fitted(self)
        X_arr = validate_data(self, X, dtype=np.float64, reset=False)
        return X_arr @ self.coef_ + self.intercept_
