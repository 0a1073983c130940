"""``OneBitQuantileRegression``: the orderable one-bit LDP quantile-regression learner."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from learners._validation import RANDOM_STATE_CONSTRAINT, check_groups
from learners.local_protocol import Custody, run_in_process, seller_generators
from learners.onebit_quantile._checks import check_sample_epsilon
from learners.onebit_quantile._protocol import (
    BitPlan,
    OneBitProtocol,
    estimate,
    randomize,
)
from learners.onebit_quantile._qmle import QMLEResult
from learners.onebit_quantile._report import inference_fields, privacy_report
from learners.onebit_quantile._spec import ONEBIT_QUANTILE_SPEC, for_order_kwargs
from learners.onebit_quantile._units import MarketUnits
from learners.registry import ReleaseContext
from learners.spec import LearnerSpec

FloatArray = NDArray[np.float64]


class OneBitQuantileRegression(RegressorMixin, BaseEstimator):
    """α-quantile regression from one-bit LDP reports, with Wald inference [NM21]_.

    Each record's owner randomizes on its own with its budget ``ε_i`` (``local``
    guarantee), then the curator maximizes the exact likelihood of the bits under an
    asymmetric-Laplace working model (spec ``one-bit-ldp-qmle.md``):

    - ``private_x=False`` (spec §2): the covariates are public (the curator knows
      them); the user sends one bit of its response truncated to ``interval`` at
      ``ε_i``. Only the response is protected.
    - ``private_x=True`` (spec §3): each private covariate, truncated to its public
      ``bounds_X``, is sent as one more bit; the ``k + 1`` bits share ``ε_i``
      (``budget_split``, default equal). The intercept and ``public_features`` are
      never privatized and cost nothing. The estimand is the maximizer under the
      curator's two-point ``prior``, **not necessarily the regression coefficients**
      (spec §3.6): the endpoint prior attenuates slopes of covariates spread inside
      their intervals.

    Parameters
    ----------
    alpha : float
        Quantile level in (0, 1).
    interval : array-like of 2 floats
        The response's public truncation interval ``[c_l, c_u]``, ``c_l < c_u``. Raw
        responses outside it are valid (clipped by the randomizer).
    scale : float, default=1.0
        The working model's scale ``σ > 0``.
    private_x : bool, default=False
    fit_intercept : bool, default=True
        A public constant column (last parameter).
    bounds_X : tuple (low, high) of float or array-like, default=None
        Public per-feature bounds, required with ``private_x=True``.
    public_features : sequence of int, default=None
        With ``private_x``: features the curator knows (never privatized).
    prior : {"endpoint", "moment_matched"}, default="endpoint"
        The curator's two-point prior: interval endpoints (paper), or
        ``m_j ± ρ_j W_j/2`` with public ``prior_rho`` (spec §3.6 PROPOSAL).
    prior_rho : float or array-like, default=None
        ``ρ_j ∈ (0, 1]``; None is ``1/√3`` (uniform covariates).
    budget_split : array-like, default=None
        Public fractions of ``ε_i`` per bit (response first), summing to 1.
    covariance : {"sandwich", "model"}, default="sandwich"
    box : float, default=None
        Half-width of the parameter box in rescaled coordinates; None is
        ``2·max(|c_l|, |c_u|)`` (spec §2.4).
    n_restarts : int, default=2
        Perturbed extra starts of the optimizer.
    report_units : mapping, default=None
        A market's public schema (``features`` bounds, ``target`` bounds); when set,
        :meth:`export_model` publishes standard errors and intervals in its raw units.
    random_state : int, numpy.random.Generator or None, default=None
        Source of the randomizers' coins (simulating the users' devices). An int
        seed runs the seller-custody protocol in process, record ``i`` answering with
        the ``i``-th generator of ``seller_generators(seed, n)``: the fit equals the
        sellers' own answers with those generators bit for bit (slower: one generator
        per record). A Generator or None (OS entropy) draws every record's answer at
        once from that one stream with the same randomizer functions (same law).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    bse_ : ndarray of shape (n_features + fit_intercept,)
        Standard errors, intercept last (NaN when the fit is on the parameter box).
    cov_params_ : ndarray or None
        ``Cov(β̂) ≈ Ĉ/n``, same order.
    on_boundary_ : bool
    result_ : QMLEResult
    privacy_report_ : PrivacyReport
        Guarantee ``local``; one stage per bit, adding up to each record's ``ε_i``.

    References
    ----------
    .. [NM21] H. Nakai-Kasai (Nakai), K. Murakami (seed paper), "One-bit Submission for
       Locally Private Quasi-MLE: Its Asymptotic Normality and Limitation", with the
       corrections of spec ``one-bit-ldp-qmle.md``.

    Examples
    --------
    >>> import numpy as np
    >>> from learners.onebit_quantile import sample_ald_noise
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (20000, 1))
    >>> y = 0.5 + X[:, 0] + 0.5 * sample_ald_noise(20000, alpha=0.3, rng=rng)
    >>> est = OneBitQuantileRegression(
    ...     alpha=0.3, interval=[-2, 3], scale=0.5, random_state=1
    ... ).fit(X, y, sample_epsilon=2.0)
    >>> est.conf_int().shape  # rows [low, high]: the slope, then the intercept
    (2, 2)
    >>> bool(abs(est.coef_[0] - 1.0) < 4 * est.bse_[0])
    True
    >>> est.privacy_report_.guarantee
    'local'
    """

    learner_spec: ClassVar[LearnerSpec] = ONEBIT_QUANTILE_SPEC
    """Registry entry (:data:`learners.LEARNERS`)."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "interval": ["array-like"],
        "scale": [Interval(Real, 0, None, closed="neither")],
        "private_x": ["boolean"],
        "fit_intercept": ["boolean"],
        "bounds_X": [tuple, list, None],
        "public_features": ["array-like", None],
        "prior": [StrOptions({"endpoint", "moment_matched"})],
        "prior_rho": [Interval(Real, 0, 1, closed="right"), "array-like", None],
        "budget_split": ["array-like", None],
        "covariance": [StrOptions({"sandwich", "model"})],
        "box": [Interval(Real, 0, None, closed="neither"), None],
        "n_restarts": [Interval(Integral, 0, None, closed="left")],
        "report_units": [dict, None],
        "random_state": RANDOM_STATE_CONSTRAINT,
    }

    def __init__(
        self,
        *,
        alpha: float,
        interval: ArrayLike,
        scale: float = 1.0,
        private_x: bool = False,
        fit_intercept: bool = True,
        bounds_X: Any = None,
        public_features: ArrayLike | None = None,
        prior: str = "endpoint",
        prior_rho: Any = None,
        budget_split: ArrayLike | None = None,
        covariance: str = "sandwich",
        box: float | None = None,
        n_restarts: int = 2,
        report_units: dict[str, Any] | None = None,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.alpha = alpha
        self.interval = interval
        self.scale = scale
        self.private_x = private_x
        self.fit_intercept = fit_intercept
        self.bounds_X = bounds_X
        self.public_features = public_features
        self.prior = prior
        self.prior_rho = prior_rho
        self.budget_split = budget_split
        self.covariance = covariance
        self.box = box
        self.n_restarts = n_restarts
        self.report_units = report_units
        self.random_state = random_state

    # ---- the registry protocol ----

    @classmethod
    def for_order(cls, params: Mapping[str, Any], *, context: ReleaseContext) -> Self:
        """The learner for an order: the buyer's ``interval`` and ``scale`` (raw target
        units) mapped to the market's scaled target, the scaled features' public bounds
        ``[−1/√d, 1/√d]`` for ``private_x``, and the market's units for the export."""
        return cls(**for_order_kwargs(params, context=context))

    def design_matrix(self, X: ArrayLike) -> FloatArray:
        """Rows the mechanism prices: ``X``, or ``[X, 1]/√2`` with an intercept
        (``‖row‖₂ ≤ 1`` for scaled records)."""
        arr = np.asarray(X, dtype=float)
        if not self.fit_intercept:
            return arr
        return np.hstack([arr, np.ones((arr.shape[0], 1))]) / math.sqrt(2.0)

    # ---- fit ----

    @_fit_context(prefer_skip_nested_validation=True)  # type: ignore[untyped-decorator]
    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        *,
        sample_epsilon: ArrayLike,
        groups: ArrayLike | None = None,
    ) -> Self:
        """Randomize each record with its ``ε_i`` (users with ``ε_i = 0`` send nothing),
        then estimate from the reports alone.

        Raises
        ------
        ValueError
            Non-finite ``X``/``y``, a bad ``interval``, ``sample_epsilon`` negative,
            non-finite or all zero, ``private_x`` without ``bounds_X``, or more than
            20 private features (the parameter is named).
        """
        X_arr, y_arr = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        n, p = X_arr.shape
        check_groups(groups, n_samples=n, one_per_group=True)
        eps = check_sample_epsilon(sample_epsilon, n)
        params = self._protocol_params()
        plan = BitPlan.from_params(params, p)
        if not isinstance(self.random_state, Integral):
            # one stream (a Generator, or OS entropy): every record's answer drawn at
            # once by the same randomizer functions (the law of per-seller answers)
            used = eps > 0
            arrays = randomize(
                plan,
                X_arr[used],
                y_arr[used],
                eps[used],
                np.random.default_rng(self.random_state),
            )
            result = estimate(plan, arrays, eps[used], params)
            self.finish_fit(result, p, eps, plan)
            return self
        # an int seed: the seller-custody protocol in process, one generator per record
        public_rng, rngs = seller_generators(self.random_state, n)
        proto = self.protocol(
            epsilon=eps,
            n_records=np.ones(n, dtype=np.int64),
            random_state=public_rng,
            custody="platform",
            n_features=p,
        )
        run_in_process(proto, X_arr, y_arr, rngs)
        proto.finish_into(self)
        return self

    # ---- the seller-custody protocol ----

    def _protocol_params(self) -> dict[str, Any]:
        params: dict[str, Any] = self.get_params()
        params.pop("random_state")
        return params

    def protocol(
        self,
        *,
        epsilon: ArrayLike,
        n_records: ArrayLike,
        n_features: int | None = None,
        scaling: Mapping[str, Any] | None = None,
        random_state: int | np.random.Generator | None = None,
        custody: Custody = "seller",
    ) -> OneBitProtocol:
        """This learner as one round of report requests (:mod:`learners.local_protocol`).

        ``epsilon``/``n_records``: each seller's ``ε_i`` and record count;
        ``n_features``: the number of features (default: the market's, from
        ``report_units``); ``scaling``: the market's public scaling for the sellers'
        clients (None: records in this learner's units).
        """
        if n_features is None:
            units = MarketUnits.from_schema(self.report_units or {})
            if units is None:
                raise ValueError(
                    "n_features: needed without a market schema (report_units)"
                )
            n_features = units.n_features
        return OneBitProtocol(
            params=self._protocol_params(),
            epsilon=epsilon,
            n_records=n_records,
            n_features=n_features,
            scaling=scaling,
            random_state=random_state,
            custody=custody,
        )

    def finish_fit(
        self, result: QMLEResult, p: int, record_epsilon: FloatArray, plan: BitPlan
    ) -> None:
        """Set the fitted attributes from the curator's ``result`` (``record_epsilon``:
        each record's ε, 0 for records that sent nothing)."""
        self._set_fitted(result, p)
        self.n_features_in_ = p
        fractions, labels = plan.fractions()
        self.privacy_report_ = privacy_report(
            record_epsilon,
            fractions=fractions,
            stage_labels=labels,
            result=result,
            private_x=plan.private_x,
        )
        if not result.converged:
            warnings.warn(
                f"the quasi-likelihood optimizer stopped at projected-gradient norm "
                f"{result.grad_norm:.3g}",
                ConvergenceWarning,
                stacklevel=3,
            )

    def _set_fitted(self, result: QMLEResult, p: int) -> None:
        beta = result.params
        self.coef_ = beta[:p].copy()
        self.intercept_ = float(beta[p]) if self.fit_intercept else 0.0
        self.bse_ = result.bse
        self.cov_params_ = result.covariance
        self.on_boundary_ = bool(result.on_boundary)
        self.result_ = result

    # ---- fitted model ----

    def predict(self, X: ArrayLike) -> FloatArray:
        """The conditional α-quantile ``x·coef_ + intercept_``."""
        check_is_fitted(self)
        X_arr = validate_data(self, X, dtype=np.float64, reset=False)
        return np.asarray(X_arr @ self.coef_ + self.intercept_, dtype=float)

    def conf_int(self, level: float = 0.95) -> FloatArray:
        """Wald intervals, rows ``[low, high]`` in the order of ``bse_`` (intercept last)."""
        check_is_fitted(self)
        return self.result_.conf_int(level)

    def export_model(self) -> dict[str, Any]:
        """JSON-safe fitted model.

        ``coef``/``intercept`` are in the units of ``fit``'s ``X``/``y`` (the market's
        scaled units; the market maps them to raw units). ``standard_errors`` and
        ``conf_int_95`` (``{"coefficients", "intercept"}``, 95 % Wald intervals) are
        in **raw market units** when ``report_units`` is set (the exact covariance of
        the market's affine map ``M Cov Mᵀ``, so they match the published
        coefficients), else in ``fit``'s units; ``inference.units`` says which. Both are
        None when the fit is on the parameter box.
        """
        check_is_fitted(self)
        units = MarketUnits.from_schema(self.report_units or {})
        if units is not None and units.n_features != self.n_features_in_:
            units = None
        return {
            "coef": [float(v) for v in self.coef_],
            "intercept": float(self.intercept_) if self.fit_intercept else None,
            **inference_fields(
                self.result_, intercept=bool(self.fit_intercept), units=units
            ),
            "quantile": float(self.alpha),
            "private_x": bool(self.private_x),
            "prior": self.prior if self.private_x else None,
            "prediction": "conditional alpha-quantile: coefficients·x + intercept",
        }
