"""``LDPMissingLogisticRegression``: the orderable learner of algorithms DS and TP."""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from learners._sign_classifier import SignClassifierMixin
from learners._validation import (
    RANDOM_STATE_CONSTRAINT,
    check_groups,
    check_sample_epsilon,
    check_sign_labels,
)
from learners.ldp_missing._algorithms import dummy_submission, two_phase
from learners.ldp_missing._protocol import LDPMissingProtocol
from learners.ldp_missing._report import local_report
from learners.local_protocol import (
    Custody,
    run_in_process,
    run_vectorized,
    seller_generators,
)
from learners.registry import ReleaseContext
from learners.spec import LearnerSpec, ParamSpec

ALGORITHMS = ("two_phase", "dummy")
ROUND_SIZE_DEFAULT = 100
"""Reports per round of the seller-custody protocol (``benchmarks/RESULTS.md``)."""


def _build_protocol(params: Mapping[str, Any], **kwargs: Any) -> Any:
    """The seller-custody protocol (``learners.ldp_missing._protocol``)."""
    from learners.ldp_missing._protocol import build_protocol

    return build_protocol(params, **kwargs)


class LDPMissingLogisticRegression(
    SignClassifierMixin,
    ClassifierMixin,
    BaseEstimator,
):
    """Locally private logistic regression with missing covariates (spec §3–§7, §9).

    Each record ``i`` is randomized on its own with its budget ``ε_i`` by the ℓ2-ball
    private sampling mechanism ``Q_ps`` (spec §3) inside private projected SGD (§4),
    one report per record and phase. A record with any ``NaN`` covariate is missing
    (``m_i = 1``) and reports a dummy (``v = 0``: a uniform point on the sphere).

    - ``algorithm="dummy"`` (DS, §5): one phase with ``ε_i``; consistent for the
      complete-case model, i.e. only the intercept is biased, by ``log(r₁/r₀)`` with
      ``r_y = P(m = 0 | y)`` (§1).
    - ``algorithm="two_phase"`` (TP, §6): ``ε_i·phase_split`` on the missingness model
      ``P(m = 1 | y) = σ(α₀ + α₁y)``, then ``ε_i·(1 − phase_split)`` on the
      inverse-probability-weighted gradient ``(1 − m_i)∇ℓ/r̂_{y_i}``.

    Step sizes ``η_t = γ·2R/(B_i√t)`` use each user's own radius ``B_i`` (§9).
    Records with ``sample_epsilon = 0`` are skipped (they spend nothing).

    Parameters
    ----------
    algorithm : {"two_phase", "dummy"}, default="two_phase"
    gamma : float, default=0.1
        Step constant ``γ`` (spec §4 PROPOSAL).
    beta_radius : float or None, default=None
        ``R_β`` (projection ball of ``(β₀, β)``); None: ``√(k + 1)`` (§7).
    alpha_radius : float, default=4.0
        ``R_α`` of the missingness model (§6 PROPOSAL; must exceed ``‖α*‖``).
    x_norm_bound : float or None, default=None
        Public ``R_x ≥ ‖x_i‖₂``; None: ``√k`` (covariates in ``[−1, 1]^k``). The
        gradient bound is ``G = √(1 + R_x²)``. Rows above it are refused.
    phase_split : float, default=0.5
        Share of ``ε_i`` spent by TP's phase 1.
    p_floor : float, default=0.0
        Floor of ``r̂_y`` (§6 PROPOSAL; 0 = off).
    round_size : int or None, default=None
        None: the spec's SGD, one report per step at the current iterate (§4).
        An integer: the seller-custody variant, rounds of about ``round_size``
        reports all computed at the iterate of the round's start
        (:mod:`learners.ldp_missing._protocol`; ``1`` is the spec's SGD again). The
        fit then runs that protocol in process: with an int ``random_state`` record
        ``i`` answers with the ``i``-th generator of ``seller_generators(seed, n)``
        (equal to the sellers' own answers bit for bit); with a Generator or None a
        round's answers are drawn at once from that one stream (same law).
    random_state : int, numpy.random.Generator or None, default=None
        Order and randomizer noise; None draws from OS entropy (the service).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    classes_ : ndarray ``[-1, 1]``
    alpha_ : ndarray of shape (2,) or None
        TP's ``α̂`` (a post-processing of phase-1 reports); None for DS.
    p_min_ : float or None
        TP's ``min_y r̂_y``.
    privacy_report_ : PrivacyReport
        Guarantee ``local``; per-record ``ε_i``; one stage per phase.

    Examples
    --------
    >>> X = np.array([[0.5], [np.nan], [-0.5], [0.2]])
    >>> clf = LDPMissingLogisticRegression(algorithm="dummy", random_state=0)
    >>> clf = clf.fit(X, [1, -1, -1, 1], sample_epsilon=[1.0, 1.0, 2.0, 0.0])
    >>> [s.label for s in clf.privacy_report_.stages]
    ['dummy submission: private sampling of the gradient']
    >>> clf.privacy_report_.sample_epsilon_total
    (1.0, 1.0, 2.0, 0.0)
    """

    learner_spec: ClassVar[LearnerSpec] = LearnerSpec(
        name="ldp_missing_logistic",
        tasks=("classification",),
        privacy_model="local",
        mechanism_loss="logistic",
        overhead="none",
        missing_values=True,
        params=(
            ParamSpec(
                name="algorithm",
                kind="choice",
                default="two_phase",
                choices=ALGORITHMS,
                doc="two_phase (IPW, unbiased under missingness given y) or dummy "
                "(complete-case; intercept biased when missingness depends on y)",
            ),
            ParamSpec(
                name="gamma",
                kind="float",
                default=0.1,
                low=1e-3,
                high=10.0,
                doc="SGD step constant γ (η_t = γ·2R/(B_i·√t))",
            ),
            ParamSpec(
                name="alpha_radius",
                kind="float",
                default=4.0,
                low=0.1,
                high=20.0,
                doc="bound R_α on the missingness model's parameters (two_phase)",
            ),
            ParamSpec(
                name="round_size",
                kind="int",
                default=ROUND_SIZE_DEFAULT,
                low=1,
                high=100_000,
                doc="reports per round when the records stay with their sellers (each "
                "round's reports use the iterate of the round's start); with the "
                "records on the platform the SGD takes one report per step",
            ),
        ),
        local_protocol=_build_protocol,
        summary="local DP logistic regression with missable features: one private-"
        "sampling report per record and phase (ε_i, or ε_i/2 + ε_i/2)",
    )
    """Registry entry (:data:`learners.LEARNERS`)."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "algorithm": [StrOptions(set(ALGORITHMS))],
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "beta_radius": [Interval(Real, 0, None, closed="neither"), None],
        "alpha_radius": [Interval(Real, 0, None, closed="neither")],
        "x_norm_bound": [Interval(Real, 0, None, closed="neither"), None],
        "phase_split": [Interval(Real, 0, 1, closed="neither")],
        "p_floor": [Interval(Real, 0, 1, closed="left")],
        "round_size": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": RANDOM_STATE_CONSTRAINT,
    }

    def __init__(
        self,
        *,
        algorithm: str = "two_phase",
        gamma: float = 0.1,
        beta_radius: float | None = None,
        alpha_radius: float = 4.0,
        x_norm_bound: float | None = None,
        phase_split: float = 0.5,
        p_floor: float = 0.0,
        round_size: int | None = None,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.algorithm = algorithm
        self.gamma = gamma
        self.beta_radius = beta_radius
        self.alpha_radius = alpha_radius
        self.x_norm_bound = x_norm_bound
        self.phase_split = phase_split
        self.p_floor = p_floor
        self.round_size = round_size
        self.random_state = random_state

    @classmethod
    def for_order(cls, params: Mapping[str, Any], *, context: ReleaseContext) -> Self:
        """The learner for an order: the buyer's ``params``; the market's rows are
        scaled with public bounds to ``‖x‖₂ ≤ 1``, so ``x_norm_bound = 1``. With the
        records on the platform the spec's one-report-per-step SGD runs
        (``round_size`` applies to seller custody, :meth:`protocol`)."""
        checked = cls.learner_spec.check_params(params)
        checked.pop("round_size")
        return cls(x_norm_bound=1.0, **checked)

    def _x_bound(self, k: int) -> float:
        return math.sqrt(k) if self.x_norm_bound is None else float(self.x_norm_bound)

    def design_matrix(self, X: ArrayLike) -> NDArray[np.float64]:
        """Rows the mechanism prices: ``[x̃, 1]/G`` with ``G = √(1 + R_x²)``.

        ``x̃`` is ``x`` with each missing (``NaN``) entry replaced by the public
        constant 0, the centre of the public bounds (the market scales features to
        ``[−1, 1]/√d``), never by a statistic of the data. So ``‖row‖₂ ≤ 1``, and in
        the market (``R_x = 1``) the rows are those of ``hetero_dp_logistic`` with an
        intercept. The allocation only needs finite rows to price ``ε_i``; the fit
        itself treats the record as missing.
        """
        X_arr = np.asarray(X, dtype=float)
        if X_arr.ndim != 2:
            raise ValueError(f"X must have shape (n, k), got {X_arr.shape}")
        filled = np.where(np.isnan(X_arr), 0.0, X_arr)
        ones = np.ones((X_arr.shape[0], 1))
        return np.hstack([filled, ones]) / math.sqrt(
            1.0 + self._x_bound(X_arr.shape[1]) ** 2
        )

    def _check_fit_inputs(
        self, X: ArrayLike, y: ArrayLike, sample_epsilon: ArrayLike
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        X_arr, y_arr = validate_data(
            self, X, y, dtype=np.float64, ensure_all_finite="allow-nan"
        )
        y01 = (check_sign_labels(y_arr, name="y") + 1.0) / 2.0
        eps = check_sample_epsilon(
            sample_epsilon, n_samples=X_arr.shape[0], require_positive=True
        )
        complete = ~np.isnan(X_arr).any(axis=1)
        R_x = self._x_bound(X_arr.shape[1])
        with np.errstate(over="ignore"):  # an overflowing norm is out of range too
            norms = np.linalg.norm(np.where(np.isnan(X_arr), 0.0, X_arr), axis=1)
            over = complete & ~(norms <= R_x * (1.0 + 1e-12))
        if over.any():  # says that, never which row or what norm
            raise ValueError(
                f"X rows must have norm <= x_norm_bound = {R_x:g} (public bounds; "
                "the privacy proof needs it); some complete row does not"
            )
        return X_arr, y01, eps

    @_fit_context(prefer_skip_nested_validation=True)  # type: ignore[untyped-decorator]
    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        *,
        sample_epsilon: ArrayLike,
        groups: ArrayLike | None = None,
    ) -> Self:
        """Run DS or TP with per-record budgets ``sample_epsilon`` (``ε_i ≥ 0``; a
        scalar: the same ε for every record).

        Raises
        ------
        ValueError
            Infinite covariates, a complete row above ``x_norm_bound``, a label outside
            ``{−1, +1}``, an ``ε_i`` that is negative or not finite (index named), every
            ``ε_i = 0`` (``sample_epsilon``: nothing to fit), or no complete record
            among those with ``ε_i > 0`` (``X``: every report would be a dummy, spec §5
            and §6, so the model would be fitted on noise alone). That last check reads
            the records' missingness pattern, which the curator running the
            randomizers holds anyway; it is a refusal to fit, not part of the LDP
            release.
        """
        X_arr, y01, eps = self._check_fit_inputs(X, y, sample_epsilon)
        if not (~np.isnan(X_arr).any(axis=1) & (eps > 0)).any():
            # every report would be a dummy (spec §5-§6): the model would be noise
            raise ValueError(
                "X: no record with sample_epsilon > 0 is complete (each would report a "
                "dummy; nothing to fit)"
            )
        check_groups(groups, n_samples=X_arr.shape[0], one_per_group=True)
        k = X_arr.shape[1]
        if self.round_size is not None:
            n = X_arr.shape[0]
            seeded = isinstance(self.random_state, Integral)
            stream = np.random.default_rng(self.random_state)
            public_rng, rngs = seller_generators(stream, n if seeded else 0)
            proto = self.protocol(
                epsilon=eps,
                n_records=np.ones(n, dtype=np.int64),
                n_features=k,
                round_size=int(self.round_size),
                random_state=public_rng,
                custody="platform",
            )
            if seeded:  # one generator per record: equal to the sellers' answers
                run_in_process(proto, X_arr, 2.0 * y01 - 1.0, rngs)
            else:  # one stream: a round's answers at once, same functions and law
                run_vectorized(proto, X_arr, 2.0 * y01 - 1.0, stream)
            proto.finish_into(self)
            return self
        rng = np.random.default_rng(self.random_state)
        common: dict[str, Any] = {
            "x_bound": self._x_bound(k),
            "beta_radius": math.sqrt(k + 1.0)
            if self.beta_radius is None
            else float(self.beta_radius),
            "gamma": float(self.gamma),
            "rng": rng,
        }
        if self.algorithm == "dummy":
            ds = dummy_submission(X_arr, y01, eps, **common)
            beta, self.alpha_, self.p_min_ = ds.beta, None, None
        else:
            tp = two_phase(
                X_arr,
                y01,
                eps,
                alpha_radius=float(self.alpha_radius),
                split=float(self.phase_split),
                p_floor=float(self.p_floor),
                **common,
            )
            beta, self.alpha_, self.p_min_ = tp.beta, tp.alpha, tp.p_min
        self.intercept_ = float(beta[0])
        self.coef_ = np.asarray(beta[1:], dtype=float)
        self.classes_ = np.array([-1, 1])
        self.privacy_report_ = local_report(
            eps, algorithm=self.algorithm, split=float(self.phase_split)
        )
        return self

    def protocol(
        self,
        *,
        epsilon: ArrayLike,
        n_records: ArrayLike,
        n_features: int,
        round_size: int | None = None,
        scaling: Mapping[str, Any] | None = None,
        random_state: int | np.random.Generator | None = None,
        custody: Custody = "seller",
    ) -> LDPMissingProtocol:
        """This learner as rounds of report batches (:mod:`learners.local_protocol`).

        ``epsilon``/``n_records``: each seller's per-record ``ε_i`` and its record
        count; ``round_size``: reports per round (default: this learner's
        ``round_size``, else the order default); ``scaling``: the market's public
        scaling for the sellers' clients (None: records in this learner's units).
        """
        size = round_size if round_size is not None else self.round_size
        params: dict[str, Any] = self.get_params()
        params.pop("random_state")
        return LDPMissingProtocol(
            params=params,
            epsilon=epsilon,
            n_records=n_records,
            n_features=n_features,
            round_size=ROUND_SIZE_DEFAULT if size is None else int(size),
            scaling=scaling,
            random_state=random_state,
            custody=custody,
        )

    def export_model(self) -> dict[str, Any]:
        """``coef``/``intercept`` in the units of ``fit``'s ``X``, the algorithm, TP's
        ``α̂`` and ``p_min`` (post-processing of the reports), the decision rule."""
        check_is_fitted(self)
        return {
            "coef": [float(v) for v in self.coef_],
            "intercept": self.intercept_,
            "classes": [-1, 1],
            "algorithm": self.algorithm,
            "missingness_alpha": None
            if self.alpha_ is None
            else [float(a) for a in self.alpha_],
            "p_min": self.p_min_,
            "decision": "sign(coefficients·x + intercept)",
        }

    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """``x̃·coef_ + intercept_``; a missing entry counts as the public centre 0
        (as in :meth:`design_matrix`)."""
        check_is_fitted(self)
        X_arr = validate_data(
            self, X, dtype=np.float64, reset=False, ensure_all_finite="allow-nan"
        )
        filled = np.where(np.isnan(X_arr), 0.0, X_arr)
        return np.asarray(filled @ self.coef_ + self.intercept_, dtype=float)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags
