"""``ULDPSparseLinearRegression``: the orderable user-level LDP sparse regression."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from numbers import Integral, Real
from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from learners._validation import RANDOM_STATE_CONSTRAINT, check_groups
from learners.local_protocol import Custody, run_in_process, seller_generators
from learners.registry import ReleaseContext
from learners.spec import LearnerSpec
from learners.uldp_sparse._checks import check_user_epsilon
from learners.uldp_sparse._defaults import DefaultSettings, default_settings
from learners.uldp_sparse._heavy_hitter import tree_depth
from learners.uldp_sparse._ledger import PrivacyLedger
from learners.uldp_sparse._pipeline import PipelineConfig, fit_pipeline
from learners.uldp_sparse._protocol import ULDPSparseProtocol
from learners.uldp_sparse._report import privacy_report
from learners.uldp_sparse._spec import ULDP_SPARSE_SPEC, for_order_kwargs

FloatArray = NDArray[np.float64]


class ULDPSparseLinearRegression(RegressorMixin, BaseEstimator):
    """Sparse linear regression under user-level local DP [MJY24]_ (2-SLR / M-SLR).

    The privacy unit is a user (a seller) with **all** its records (``groups``). Users
    are split in two halves by public randomness. Each user of the selection half runs
    a local selector on its own records, draws one selected index and sends one
    randomized bit of it through a prefix-tree heavy-hitter protocol (spec §3–§4); the
    curator keeps ``≈ k`` indices, ``Ŝ``. The estimation half then either fits local
    OLS on ``Ŝ`` and averages the vectors with the two-round user-level mean (2-SLR,
    spec §5–§6), or runs private accelerated mini-batch gradient descent with one fresh
    batch of users per step (M-SLR, spec §7). Every user sends exactly one message at
    its own ``ε_i`` (heterogeneous budgets, spec §12, with inverse-variance weights
    that depend on public ``ε_i`` only); users with ``ε_i = 0`` send nothing.

    Parameters
    ----------
    algorithm : {"two_round", "multi_round"}, default="two_round"
    sparsity : int, default=8
        ``k``, the target support size (capped at ``d``).
    selector : {"screening", "post_lasso", "screening_signed"}, default="screening"
        Screening ranks ``|X_iᵀy_i|`` (spec §3, PROPOSAL); PostLasso screens to
        ``k_screen`` columns then runs an adjusted Lasso on them;
        ``"screening_signed"`` is the reference code's Screening on the signed
        ``X_iᵀy_i`` (misses negative coefficients; for reproducing the paper's and the
        spec's calibration, where every ``θ*_j > 0``, not for products).
    k_sel : int, default=None
        Local set size; None is ``⌈k/2⌉``.
    k_screen : int, default=None
        PostLasso screening size; None is ``max(2·k_sel, k²/4)`` capped at ``d``.
    n_bins : int or None, default=None
        ``N_b`` bins of the localization round. None: by the default rule (below).
    bound : float or None, default=None
        ``B``: public coefficient range ``[−B, B]`` (2-SLR), in units of ``x_scale·X``.
        None: by the default rule.
    hh_alpha : float or None, default=None
        Heavy-hitter pruning share ``α`` (0: top-k per level; the reference uses 0.1).
        None: by the default rule.
    hh_oracle : {"direct", "hashed"}, default="direct"
        Heavy-hitter frequency oracle: direct Hadamard response per level (spec A2
        default) or the hashed TreeHist variant (``t`` hash pairs into ``M`` buckets,
        median over hash cells; spec §4.2), for trees too deep for the direct one.
    hh_levels : {"all", "pruned"} or None, default=None
        Tree levels the selection users are dealt to: all ``L`` (spec §4.1) or, an
        option **not in the spec**, only those where the pruning can drop a candidate
        (with ``α = 0`` the levels ``2^ℓ ≤ k`` keep all their candidates whatever the
        bits say, so their users' bits are wasted). None: by the default rule.
    batch_size : int, default=40
        M-SLR users per step ``b``; ``T = ⌊|G_est|/b⌋`` steps, every user in one.
    small_batch_fallback : bool, default=True
        M-SLR requires ``b ≥ 16K`` (``K = 2^⌈log2 s⌉``, ``s = |Ŝ|`` plus one with an
        intercept) and otherwise falls back to 2-SLR (spec §7); ``algorithm_`` says
        which ran. False runs M-SLR at any ``b`` (the paper's ``b = 40``).
    gradient_bound : float, default=3.0
        M-SLR gradient range ``B``.
    step_c0, step_power : float, default=0.1, 0.2
        M-SLR step ``η_t = c0·(t + 1)^p``.
    update : {"ac_sa", "reference"}, default="ac_sa"
        M-SLR step from ``θ_t`` (AC-SA) or from the middle point (reference code).
    fit_intercept : bool, default=False
        Add a public constant column to the estimation stage (never selected).
    x_scale : float, default=1.0
        Public factor applied to ``X`` inside the fit (the market passes ``√d``);
        ``coef_`` is in the units of the ``X`` given to ``fit``.
    rotate : bool, default=True
        Random Hadamard rotation inside ULDPMean.
    weighted : bool, default=True
        Inverse-variance weights by public ``ε_i`` (spec §12); False: plain averages.
    exact : bool, default=False
        NON-PRIVATE exact mode for tests (spec §4.4, A8): raw indices counted, plain
        averages; the report then says ``ε = inf``.
    random_state : int, numpy.random.Generator or None, default=None
        Seeds both the public randomness and the users' private coins (tests); None
        draws from OS entropy.

    Default rule
    ------------
    The settings left at None are chosen in ``fit`` from public quantities only (the
    number of users with ``ε_i > 0``, their median ``ε``, ``d`` and ``k``;
    :mod:`learners.uldp_sparse._defaults`, ``docs/uldp-sparse-defaults.md``): with
    ``ρ = √(n₁/L)/(2k·c_ε) ≥ 1`` top-k pruning on the pruning levels, else the
    reference ``α = 0.1``; ``n_bins = 4`` below ``u = 100`` users per coordinate, else
    8; ``bound = min(B_max, ε√u/56)`` with ``B_max = 0.5`` below ``u = 100``, else 1.
    At the paper's default size (n = 400, m = 100, d = 256, ε = 4) that is
    ``α = 0.1``, ``N_b = 4``, ``B = 0.253``; at n = 20,000 users and ε = 4 it is the
    spec's ``α = 0``, ``N_b = 8``, ``B = 1`` (with ``hh_levels = "pruned"``).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Zero outside ``support_``.
    intercept_ : float
    support_ : ndarray of int
        ``Ŝ``, the selected feature indices.
    selection_ : HeavyHitterResult
    ledger_ : PrivacyLedger
        Per-user spend and message count.
    privacy_report_ : PrivacyReport
        Guarantee ``user_level_local``; every record carries its user's spend.
    algorithm_ : {"two_round", "multi_round"}
        The estimation stage that ran (``"two_round"`` when M-SLR fell back).
    n_users_ : int
    settings_ : DefaultSettings
        What the default rule read and chose (``hh_alpha``, ``hh_levels``,
        ``n_bins``, ``bound``; a value given to the constructor wins over it).
    empty_coordinates_ : int
        ULDPMean coordinates that had no users (estimated as 0).

    References
    ----------
    .. [MJY24] Y. Ma, K. Jia, H. Yang, "Better Locally Private Sparse Estimation Given
       Multiple Samples Per User", ICML 2024, with the corrections of spec
       ``uldp-sparse-linear-regression.md``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> n, m, d = 400, 100, 64
    >>> X = rng.standard_normal((n * m, d))
    >>> theta = np.zeros(d); theta[[3, 17]] = 0.5
    >>> y = X @ theta + rng.standard_normal(n * m)
    >>> est = ULDPSparseLinearRegression(sparsity=2, exact=True, random_state=0)
    >>> est.fit(X, y, sample_epsilon=1.0, groups=np.repeat(np.arange(n), m)).support_
    array([ 3, 17])
    """

    learner_spec: ClassVar[LearnerSpec] = ULDP_SPARSE_SPEC
    """Registry entry (:data:`learners.LEARNERS`)."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "algorithm": [StrOptions({"two_round", "multi_round"})],
        "sparsity": [Interval(Integral, 1, None, closed="left")],
        "selector": [StrOptions({"screening", "post_lasso", "screening_signed"})],
        "k_sel": [Interval(Integral, 1, None, closed="left"), None],
        "k_screen": [Interval(Integral, 1, None, closed="left"), None],
        "n_bins": [Interval(Integral, 2, None, closed="left"), None],
        "bound": [Interval(Real, 0, None, closed="neither"), None],
        "hh_alpha": [Interval(Real, 0, 1, closed="left"), None],
        "hh_oracle": [StrOptions({"direct", "hashed"})],
        "hh_levels": [StrOptions({"all", "pruned"}), None],
        "batch_size": [Interval(Integral, 2, None, closed="left")],
        "small_batch_fallback": ["boolean"],
        "gradient_bound": [Interval(Real, 0, None, closed="neither")],
        "step_c0": [Interval(Real, 0, None, closed="neither")],
        "step_power": [Interval(Real, None, None, closed="neither")],
        "update": [StrOptions({"ac_sa", "reference"})],
        "fit_intercept": ["boolean"],
        "x_scale": [Interval(Real, 0, None, closed="neither")],
        "rotate": ["boolean"],
        "weighted": ["boolean"],
        "exact": ["boolean"],
        "random_state": RANDOM_STATE_CONSTRAINT,
    }

    def __init__(
        self,
        *,
        algorithm: str = "two_round",
        sparsity: int = 8,
        selector: str = "screening",
        k_sel: int | None = None,
        k_screen: int | None = None,
        n_bins: int | None = None,
        bound: float | None = None,
        hh_alpha: float | None = None,
        hh_oracle: str = "direct",
        hh_levels: str | None = None,
        batch_size: int = 40,
        small_batch_fallback: bool = True,
        gradient_bound: float = 3.0,
        step_c0: float = 0.1,
        step_power: float = 0.2,
        update: str = "ac_sa",
        fit_intercept: bool = False,
        x_scale: float = 1.0,
        rotate: bool = True,
        weighted: bool = True,
        exact: bool = False,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.algorithm = algorithm
        self.sparsity = sparsity
        self.selector = selector
        self.k_sel = k_sel
        self.k_screen = k_screen
        self.n_bins = n_bins
        self.bound = bound
        self.hh_alpha = hh_alpha
        self.hh_oracle = hh_oracle
        self.hh_levels = hh_levels
        self.batch_size = batch_size
        self.small_batch_fallback = small_batch_fallback
        self.gradient_bound = gradient_bound
        self.step_c0 = step_c0
        self.step_power = step_power
        self.update = update
        self.fit_intercept = fit_intercept
        self.x_scale = x_scale
        self.rotate = rotate
        self.weighted = weighted
        self.exact = exact
        self.random_state = random_state

    # ---- the registry protocol ----

    @classmethod
    def for_order(cls, params: Mapping[str, Any], *, context: ReleaseContext) -> Self:
        """The learner for an order's params, with ``x_scale = √d`` from the market's
        public schema (features on ``[−1/√d, 1/√d]`` become ``[−1, 1]``)."""
        return cls(**for_order_kwargs(params, context=context))

    def design_matrix(self, X: ArrayLike) -> FloatArray:
        """The scaled records themselves (``‖row‖₂ ≤ 1``); the market prices one
        summary row per seller built from these (``docs/mathematics.md`` §7)."""
        return np.asarray(X, dtype=float)

    # ---- fit ----

    def _config(self, d: int, eps_user: FloatArray) -> PipelineConfig:
        k = min(int(self.sparsity), d)
        rule = default_settings(eps_user, d=d, k=k, intercept=bool(self.fit_intercept))
        self.settings_: DefaultSettings = replace(
            rule,
            hh_alpha=rule.hh_alpha if self.hh_alpha is None else float(self.hh_alpha),
            hh_levels=rule.hh_levels if self.hh_levels is None else str(self.hh_levels),
            n_bins=rule.n_bins if self.n_bins is None else int(self.n_bins),
            bound=rule.bound if self.bound is None else float(self.bound),
        )
        chosen = self.settings_
        k_sel = min(d, int(self.k_sel) if self.k_sel is not None else math.ceil(k / 2))
        k_screen = (
            int(self.k_screen)
            if self.k_screen is not None
            else max(2 * k_sel, k * k // 4)
        )
        return PipelineConfig(
            algorithm=str(self.algorithm),
            k=k,
            selector=str(self.selector),
            k_sel=k_sel,
            k_screen=max(k_sel, min(d, k_screen)),
            alpha=chosen.hh_alpha,
            n_bins=chosen.n_bins,
            bound=chosen.bound,
            gradient_bound=float(self.gradient_bound),
            batch_size=int(self.batch_size),
            small_batch_fallback=bool(self.small_batch_fallback),
            oracle=str(self.hh_oracle),
            levels=chosen.hh_levels,
            step_c0=float(self.step_c0),
            step_power=float(self.step_power),
            update=str(self.update),
            fit_intercept=bool(self.fit_intercept),
            rotate=bool(self.rotate),
            weighted=bool(self.weighted),
            exact=bool(self.exact),
            x_scale=float(self.x_scale),
        )

    @_fit_context(prefer_skip_nested_validation=True)  # type: ignore[untyped-decorator]
    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        *,
        sample_epsilon: ArrayLike,
        groups: ArrayLike | None = None,
    ) -> Self:
        """Run the protocol: each user (``groups``; None: one record per user) sends one
        message at its ``ε_i`` (``sample_epsilon``, equal on all of a user's records).

        Raises
        ------
        ValueError
            Non-finite ``X``/``y``, ``groups`` of the wrong shape or type,
            ``sample_epsilon`` negative, non-finite, all zero or varying within a user,
            ``n_features`` beyond the prefix tree (``2^20``), or a parameter out of
            range (named).
        """
        X_arr, y_arr = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        n_records, d = X_arr.shape
        tree_depth(d)
        g = check_groups(groups, n_samples=n_records)
        if g is None:
            g = np.arange(n_records, dtype=np.int64)
        _, user = np.unique(g, return_inverse=True)
        user = user.astype(np.int64)
        eps_user = check_user_epsilon(sample_epsilon, user)
        if not self.exact and self.hh_oracle == "direct":
            self._fit_protocol(X_arr, y_arr, user, eps_user)
            return self
        budgets = np.where(eps_user > 0, np.inf, 0.0) if self.exact else eps_user
        rngs = tuple(np.random.default_rng(self.random_state).spawn(2))
        ledger = PrivacyLedger(budgets)
        fit = fit_pipeline(
            X_arr, y_arr, user, budgets, self._config(d, eps_user),
            (rngs[0], rngs[1]), ledger,
        )  # fmt: skip
        self.coef_ = fit.coef
        self.intercept_ = fit.intercept
        self.support_ = fit.support
        self.selection_ = fit.selection
        self.empty_coordinates_ = fit.empty_coordinates
        self.n_rounds_ = fit.n_rounds
        self.algorithm_ = fit.algorithm
        self.n_users_ = int(eps_user.size)
        self.ledger_ = ledger
        self.privacy_report_ = privacy_report(ledger, user, exact=bool(self.exact))
        return self

    def _fit_protocol(
        self,
        X: FloatArray,
        y: FloatArray,
        user: NDArray[np.int64],
        eps_user: FloatArray,
    ) -> None:
        """The seller-custody protocol in process: users in order, each answering on
        its own records with its own generator spawned from ``random_state``."""
        order = np.argsort(user, kind="stable")
        n_records = np.bincount(user, minlength=eps_user.size).astype(np.int64)
        public_rng, rngs = seller_generators(self.random_state, eps_user.size)
        proto = self.protocol(
            epsilon=eps_user,
            n_records=n_records,
            n_features=X.shape[1],
            random_state=public_rng,
            custody="platform",
        )
        run_in_process(proto, X[order], y[order], rngs)
        proto.finish_into(self)
        # the report is per record in the caller's order
        rep = self.privacy_report_
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        self.privacy_report_ = replace(
            rep,
            sample_epsilon=tuple(np.asarray(rep.sample_epsilon)[inverse].tolist()),
            sample_epsilon_total=tuple(
                np.asarray(rep.sample_epsilon_total)[inverse].tolist()
            ),
            stages=tuple(
                replace(
                    st,
                    sample_epsilon=tuple(
                        np.asarray(st.sample_epsilon)[inverse].tolist()
                    ),
                )
                for st in rep.stages
            ),
        )

    def protocol(
        self,
        *,
        epsilon: ArrayLike,
        n_records: ArrayLike,
        n_features: int,
        scaling: Mapping[str, Any] | None = None,
        random_state: int | np.random.Generator | None = None,
        custody: Custody = "seller",
    ) -> ULDPSparseProtocol:
        """This learner as rounds of report requests (:mod:`learners.local_protocol`):
        seller ``i`` is one user with ``n_records[i]`` records and budget
        ``epsilon[i]``; ``scaling``: the market's public scaling for the sellers'
        clients (None: records in this learner's units)."""
        params: dict[str, Any] = self.get_params()
        params.pop("random_state")
        return ULDPSparseProtocol(
            params=params,
            epsilon=epsilon,
            n_records=n_records,
            n_features=n_features,
            scaling=scaling,
            random_state=random_state,
            custody=custody,
        )

    # ---- fitted model ----

    def predict(self, X: ArrayLike) -> FloatArray:
        """``X[:, Ŝ] θ̂_Ŝ + intercept_``."""
        check_is_fitted(self)
        X_arr = validate_data(self, X, dtype=np.float64, reset=False)
        return np.asarray(X_arr @ self.coef_ + self.intercept_, dtype=float)

    def export_model(self) -> dict[str, Any]:
        """JSON-safe fitted model: ``coef`` (zero off the support) and ``intercept`` in
        the units of ``fit``'s ``X``/``y`` (0.0 when not fitted: the market's affine map
        to raw units still needs it), the ``support`` and the protocol's public facts."""
        check_is_fitted(self)
        return {
            "coef": [float(v) for v in self.coef_],
            "intercept": float(self.intercept_),
            "support": [int(j) for j in self.support_],
            "algorithm": str(self.algorithm),
            "algorithm_run": str(self.algorithm_),
            "sparsity": int(self.sparsity),
            "empty_coordinates": int(self.empty_coordinates_),
            "rounds": int(self.n_rounds_),
            "prediction": "coefficients·x + intercept (zero outside the support)",
        }
