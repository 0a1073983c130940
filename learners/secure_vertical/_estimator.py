"""The orderable estimator :class:`SecureVerticalLogisticRegression` (spec §2–§7)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any, ClassVar, Self, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from learners._validation import (
    RANDOM_STATE_CONSTRAINT,
    check_groups,
    check_sample_epsilon,
)
from learners.privacy import (
    CENTRAL_GUARANTEES,
    Guarantee,
    NonPrivateFitWarning,
    PrivacyReport,
)
from learners.registry import ReleaseContext
from learners.secure_vertical._backend import PlainBackend
from learners.secure_vertical._blocks import check_blocks, check_labels
from learners.secure_vertical._categorical import (
    check_levels,
    dummy_design,
    noisy_tables,
    pattern_tables,
    saturated_em,
)
from learners.secure_vertical._dp import (
    clip_radii,
    clip_rows,
    em_from_moments,
    expand_report,
    imputation_scale,
    mpc_dp_report,
    noisy_pattern_moments,
    objective_weights,
    record_epsilon,
)
from learners.secure_vertical._em import (
    COVARIANCES,
    default_init,
    fit_gaussian_mixture,
    impute_conditional_mean,
    patterns,
    record_theta,
)
from learners.secure_vertical._joint_noise import JointNoise, contributors, joint_noise
from learners.secure_vertical._ledger import Ledger
from learners.secure_vertical._newton import NewtonTrace, secure_newton
from learners.spec import LearnerSpec, ParamError, ParamSpec

FloatArray = NDArray[np.float64]
BACKENDS: tuple[str, ...] = ("plain", "reference", "mpc")
IMPUTATIONS: tuple[str, ...] = ("em", "complete_case")  # orderable (numeric schemas)
LEARNER_IMPUTATIONS: tuple[str, ...] = (*IMPUTATIONS, "categorical_em")


def check_installation(
    params: Mapping[str, Any], features: Sequence[Mapping[str, Any]]
) -> None:
    """Refuse an order this installation cannot run: ``backend="mpc"`` without the
    optional extra ``mpc`` (:class:`~learners.spec.ParamError` on ``backend``)."""
    from learners.secure_vertical._mpyc_backend import MISSING_EXTRA, mpc_available

    if params.get("backend") == "mpc" and not mpc_available():
        raise ParamError("backend", MISSING_EXTRA)


class SecureVerticalLogisticRegression(BaseEstimator):
    """Logistic regression over vertically partitioned, partially overlapping databases.

    Party ``k`` holds the column block ``X_k`` of the records it has (rows aligned on the
    public record key; a NaN row: the party does not hold the record); the first party
    holds ``y`` and the intercept. The fit is the pooled maximum-likelihood Newton–Raphson
    of spec §2 computed by a backend (§8.4): ``"plain"`` (float64, one process, with a
    ledger of what MPC mode opens), ``"reference"`` (the paper's protocols with
    simulated parties, §4.1: **not private**, for reproduction only) or ``"mpc"``
    (MPyC, the optional extra ``mpc``). Missing blocks are imputed by EM (Gaussian
    mixture, §5) or the records dropped (``complete_case``). With ``backend="mpc"`` the
    parties share only the blocks they hold: a non-DP EM runs inside MPC at reveal
    level ``em_reveal`` (E2: M-step on shares, only ``θ`` opened per iteration; E1:
    pattern sums opened; responsibilities secret at both; ``J ≤ 2``), a DP fit
    releases ``θ`` from noisy pattern moments, and in both cases the imputation runs
    inside MPC (no process sees an imputed value, §6 row 12). With ``sample_epsilon`` or
    ``party_epsilon`` the release is DP (§7): ``ε_θ`` for the imputation model, then the
    heterogeneous objective perturbation for ``β`` (reveal level R2, fixed iterations),
    labelled ``mpc_plus_dp`` when ``backend="mpc"`` and with the central label
    ``guarantee`` when ``backend="plain"`` (the blocks were then pooled in the clear in
    one process: nothing was computed in MPC). Without either the fit is **not
    differentially private**: it warns (:class:`~learners.privacy.NonPrivateFitWarning`),
    ``dp_`` is False and ``privacy_report_`` None (spec §4.3 allows non-DP fits).

    With ``backend="mpc"`` every covariate (and the intercept column) is shared as an
    integer on the public grid ``2⁻⁸`` (§3.1, §8.3 PROPOSAL), rounded to the nearest
    grid point: each entry moves by at most ``2⁻⁹ ≈ 0.002``, so the fit is the one on the
    rounded covariates (agreement with a float64 fit on those same rounded rows: about
    5e-8; with the unrounded ones: about 2e-4 at n = 1000, 1e-3 at n = 100). Arithmetic inside MPC is fixed point with
    32 fractional bits in 64. In a DP fit each block is clipped ``√p_k·2⁻⁹`` inside its
    radius first, so the rounded rows still have ``‖x‖ ≤ 1``.

    Parameters
    ----------
    backend : {"plain", "reference", "mpc"}, default="plain"
    imputation : {"em", "complete_case", "categorical_em"}, default="em"
        ``"categorical_em"``: every column is categorical (codes ``0..L−1``, level
        counts in ``categorical_levels``); the saturated multinomial model of spec §5.5
        is fitted by EM from the per-pattern contingency tables (released with
        ``ε_θ`` discrete Laplace noise in a DP fit), each column becomes dummies
        (reference level 0 dropped), and a missing block's dummies are its posterior
        level probabilities given the record's observed cell.
    lam : float, default=0.0
        Ridge ``λ ≥ 0`` (``> 0`` for a DP fit).
    random_state : int, Generator or None, default=None
        DP noise; None draws from OS entropy.
    n_components : int, default=2
        Mixture components ``J`` of a non-DP imputation (a DP fit uses ``J = 1``, §7.3).
    covariance : {"full", "fixed_identity", "diagonal", "tied"}, default="full"
    reveal : {"R1", "R2"} or None, default=None
        None: R1 for a non-DP fit, R2 for a DP fit (which requires R2).
    tol : float or None, default=None
        Newton stop ``max|Δ| < tol``; None: 1e-8 (plain/reference), 1e-6 (mpc).
    max_iter : int, default=25
    dp_iterations : int, default=12
        Newton steps of a DP fit (a fixed count: nothing is opened per iteration).
    theta_share : float, default=0.2
        Fraction of the smallest record ε spent on the imputation model (DP, missing
        blocks, ``imputation="em"``).
    em_max_iter : int, default=2000
    em_reveal : {"E1", "E2"}, default="E2"
        Reveal level of the EM inside MPC (spec §5.4; ``backend="mpc"``, non-DP,
        missing blocks): ``"E2"`` computes the M-step on shares and opens only
        ``θ_{t+1}`` per iteration (§6 row 8); ``"E1"`` also opens the per-pattern sums
        ``(c, s, Q)`` (§6 row 10) and runs the M-step at every party. The plain
        backend's EM is in the clear and its ledger records E2.
    mpc_parties : int, default=1
        MPyC processes (1: single process; ≥ 3 for secrecy).
    mpc_timeout : float, default=600
        Seconds before the MPyC parties are stopped.
    categorical_levels : list of list of int or None, default=None
        Per party, the level count of each of its columns (``categorical_em`` only).
    guarantee : {"conditional_on_allocation", "end_to_end"}, default="conditional_on_allocation"
        Label of a DP fit on ``backend="plain"``: central DP of the released model,
        given the allocation (``"end_to_end"``: the allocation saw costs and public
        data only). A DP fit on ``backend="mpc"`` is labelled ``"mpc_plus_dp"``.

    Attributes
    ----------
    coef_ : ndarray of shape (p,)
        In the order of the concatenated blocks (in the units given to ``fit``; a DP fit
        clips rows first).
    intercept_ : float
    n_iter_ : int
    ledger_ : Ledger
        What was opened to whom (§6); ``leakage_rows_`` the table rows that applied.
    dp_ : bool
        Whether the fit was differentially private (a ``sample_epsilon`` or
        ``party_epsilon`` was given).
    privacy_report_ : PrivacyReport or None
        None for a non-DP fit.
    theta_ : Theta or None
        The imputation model (public: opened at E2, or released with DP).
    dummy_columns_ : list of (party, column, level) or None
        ``categorical_em``: what each coefficient is (in ``coef_`` order).
    cell_probabilities_ : ndarray or None
        ``categorical_em``: the fitted full-table cell probabilities ``q``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 3))
    >>> y = (X @ [1.0, -1.0, 0.5] + rng.logistic(size=200) > 0).astype(float)
    >>> dp = SecureVerticalLogisticRegression(lam=0.01, random_state=0)
    >>> dp = dp.fit([X[:, :1], X[:, 1:]], y, party_epsilon=2.0)  # ε = 2 for both parties
    >>> dp.coef_.shape, dp.privacy_report_.guarantee  # plain backend: in the clear
    ((3,), 'conditional_on_allocation')
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     est = SecureVerticalLogisticRegression().fit([X[:, :1], X[:, 1:]], y)
    >>> est.dp_, est.privacy_report_, caught[0].category.__name__
    (False, None, 'NonPrivateFitWarning')
    """

    learner_spec: ClassVar[LearnerSpec] = LearnerSpec(
        name="secure_vertical_logistic",
        tasks=("classification",),
        privacy_model="mpc",
        mechanism_loss="logistic",
        overhead="none",
        missing_values=True,
        partition="vertical",
        params=(
            ParamSpec(
                name="backend",
                kind="choice",
                default="plain",
                choices=("plain", "mpc"),
                doc="plain: float64 in the market's worker; mpc: MPyC (needs the 'mpc' extra)",
            ),
            ParamSpec(
                name="imputation",
                kind="choice",
                default="em",
                choices=IMPUTATIONS,
                doc="em: Gaussian imputation model released with DP; complete_case: drop records some party lacks",
            ),
        ),
        market_check=check_installation,
        summary="secure logistic regression over vertically partitioned databases "
        "(parties as sellers; MPC + DP; ε_i = min over the parties holding the record)",
    )

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "backend": [StrOptions(set(BACKENDS))],
        "imputation": [StrOptions(set(LEARNER_IMPUTATIONS))],
        "categorical_levels": [list, tuple, None],
        "lam": [Interval(Real, 0, None, closed="left")],
        "random_state": RANDOM_STATE_CONSTRAINT,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "covariance": [StrOptions(set(COVARIANCES))],
        "reveal": [StrOptions({"R1", "R2"}), None],
        "tol": [Interval(Real, 0, None, closed="neither"), None],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "dp_iterations": [Interval(Integral, 1, None, closed="left")],
        "theta_share": [Interval(Real, 0, 1, closed="neither")],
        "em_max_iter": [Interval(Integral, 1, None, closed="left")],
        "em_reveal": [StrOptions({"E1", "E2"})],
        "mpc_parties": [Interval(Integral, 1, None, closed="left")],
        "mpc_timeout": [Interval(Real, 0, None, closed="neither")],
        "guarantee": [StrOptions(set(CENTRAL_GUARANTEES))],
    }

    def __init__(
        self,
        *,
        backend: str = "plain",
        imputation: str = "em",
        lam: float = 0.0,
        random_state: int | np.random.Generator | None = None,
        n_components: int = 2,
        covariance: str = "full",
        reveal: str | None = None,
        tol: float | None = None,
        max_iter: int = 25,
        dp_iterations: int = 12,
        theta_share: float = 0.2,
        em_max_iter: int = 2000,
        em_reveal: str = "E2",
        mpc_parties: int = 1,
        mpc_timeout: float = 600.0,
        categorical_levels: Sequence[Sequence[int]] | None = None,
        guarantee: str = "conditional_on_allocation",
    ) -> None:
        self.backend = backend
        self.imputation = imputation
        self.lam = lam
        self.random_state = random_state
        self.n_components = n_components
        self.covariance = covariance
        self.reveal = reveal
        self.tol = tol
        self.max_iter = max_iter
        self.dp_iterations = dp_iterations
        self.theta_share = theta_share
        self.em_max_iter = em_max_iter
        self.em_reveal = em_reveal
        self.mpc_parties = mpc_parties
        self.mpc_timeout = mpc_timeout
        self.categorical_levels = categorical_levels
        self.guarantee = guarantee

    # ---- the order protocol ------------------------------------------------------

    @classmethod
    def for_order(cls, params: Mapping[str, Any], *, context: ReleaseContext) -> Self:
        """An order: the buyer's backend and imputation, the mechanism's ``λ``, three
        MPyC processes for ``backend="mpc"``, and (``backend="plain"``) the
        ``end_to_end`` label only when the allocation saw no private data."""
        checked = cls.learner_spec.check_params(params)
        parties = 3 if checked["backend"] == "mpc" else 1
        guarantee = (
            "conditional_on_allocation"
            if context.allocation_uses_data
            else "end_to_end"
        )
        return cls(lam=context.lam, mpc_parties=parties, guarantee=guarantee, **checked)

    def design_matrix(self, X: Any) -> FloatArray:
        """The rows the mechanism prices: one per party (each party is one seller).

        Row ``k`` is ``√(n_k/n)·e_k``: the party's coverage of the record universe, a
        function of the public key lists only (no covariate value), label ``+1``.
        """
        _, held = check_blocks(X)
        cover = held.mean(axis=0)
        return np.diag(np.sqrt(cover))

    def export_model(self) -> dict[str, Any]:
        """Coefficients (concatenated block order), intercept, the backend and reveal
        level, and what was opened (§6 rows and quantities)."""
        check_is_fitted(self)
        return {
            "coef": [float(v) for v in self.coef_],
            "intercept": float(self.intercept_),
            "classes": [int(c) for c in self.classes_],
            "decision": "sign(coefficients·x + intercept)",
            "backend": self.backend,
            "differentially_private": bool(self.dp_),
            "reveal_level": self.reveal_,
            "imputation": self.imputation,
            "n_iter": int(self.n_iter_),
            "opened": self.ledger_.summary(),
            "leakage_rows": sorted(self.leakage_rows_),
        }

    # ---- fitting -----------------------------------------------------------------

    def fit(
        self,
        X: Any,
        y: ArrayLike,
        *,
        sample_epsilon: ArrayLike | None = None,
        party_epsilon: ArrayLike | None = None,
        groups: ArrayLike | None = None,
    ) -> Self:
        """Fit on ``X = blocks`` (list of per-party arrays, rows aligned) and ``y``
        (held by the first party; NaN for unlabelled records).

        ``party_epsilon`` (one ε per party: it applies to all its records) or
        ``sample_epsilon`` (one ε per record) make the release DP (§7); record ``i``
        then spends at most ``min_{k∈s_i} ε_k`` (or its ``sample_epsilon``). A scalar
        is the same ε for every party (record). Without either the fit is not private
        and says so (:class:`~learners.privacy.NonPrivateFitWarning`, ``dp_ = False``).

        ``groups`` (scikit-learn's convention: the privacy unit of each record) may be
        given only as one distinct integer per record: the unit here is the record,
        the data subject whose attributes the parties hold (spec §7.1); a unit with
        several records would need group privacy, which the fit does not account for.

        Raises
        ------
        ValueError
            Bad blocks or labels (see :func:`check_blocks`), both or malformed privacy
            budgets, ``groups`` of the wrong length, not integers or repeating a value,
            ``lam = 0`` with DP, or ``backend="mpc"`` without the extra.
        """
        self._validate_params()
        blocks, held = check_blocks(X)
        y01, labelled, pm = check_labels(y, held[:, 0])
        check_groups(groups, n_samples=held.shape[0], one_per_group=True)
        eps_rec = self._record_epsilon(held, sample_epsilon, party_epsilon)
        dp = eps_rec is not None
        n_all = held.shape[0]
        active = np.ones(n_all, dtype=bool) if eps_rec is None else eps_rec > 0
        if not active.any():
            given = "party_epsilon" if party_epsilon is not None else "sample_epsilon"
            raise ValueError(f"{given}: every record has ε = 0 (nothing to fit)")
        if not active.all():  # records with ε_i = 0 are not used at all
            assert eps_rec is not None
            blocks = [b[active] for b in blocks]
            held, y01, labelled = held[active], y01[active], labelled[active]
            eps_rec = eps_rec[active]
        if dp and not self.lam > 0:
            raise ValueError("lam must be > 0 for a DP fit (objective perturbation)")
        if self.backend == "reference" and (dp or not held.all()):
            raise ValueError(
                "backend='reference' runs the paper's protocol on complete, non-DP data only"
            )
        reveal = self.reveal or ("R2" if dp else "R1")
        if dp and reveal != "R2":
            raise ValueError(
                "reveal: a DP fit requires R2 (nothing opened per iteration)"
            )
        rng = np.random.default_rng(self.random_state)
        sizes = [b.shape[1] for b in blocks]
        ledger = Ledger()
        self.dummy_columns_: list[tuple[int, int, int]] | None = None
        self.cell_probabilities_: FloatArray | None = None
        cat_eps_theta = 0.0
        if self.imputation == "categorical_em":
            blocks, cat_eps_theta = self._categorical_blocks(
                blocks, eps_rec, rng, ledger
            )
            held = np.ones_like(held)
            sizes = [b.shape[1] for b in blocks]
        c0 = 1.0
        if dp:
            c0, radii = clip_radii(sizes)
            inner = radii
            if self.backend == "mpc":  # room for the 2^-8 rounding (class docstring)
                from learners.secure_vertical._mpyc_backend import rounding_margin

                inner = np.array(
                    [
                        max(0.0, r - rounding_margin(p))
                        for r, p in zip(radii, sizes, strict=True)
                    ]
                )
            blocks = [clip_rows(b, r) for b, r in zip(blocks, inner, strict=True)]
        Xfull = np.hstack(blocks)
        n = Xfull.shape[0]
        eps_theta = np.full(n, cat_eps_theta)
        keep = np.ones(n, dtype=bool)
        self.theta_ = None
        X_observed = Xfull.copy()  # NaN: missing (MPC imputes inside the protocol)
        imp_scales: dict[tuple[int, ...], FloatArray] = {}
        if not held.all():
            if self.imputation == "complete_case":
                keep = np.asarray(held.all(axis=1), dtype=bool)
            elif dp:
                assert eps_rec is not None
                eps_theta[:] = float(self.theta_share) * float(eps_rec.min())
                Xfull, imp_scales = self._dp_impute(
                    Xfull, sizes, radii, eps_theta[0], rng, ledger
                )
            elif self.backend == "mpc":
                pass  # EM (em_reveal) and imputation run inside MPC (below)
            else:
                init = default_init(Xfull.shape[1], self.n_components)
                fit = fit_gaussian_mixture(
                    Xfull, init, covariance=self.covariance, max_iter=self.em_max_iter,  # type: ignore[arg-type]
                    ledger=ledger,
                )  # fmt: skip
                self.theta_ = fit.theta
                Xfull = impute_conditional_mean(Xfull, fit.theta)
        mpc_em = (
            self.backend == "mpc" and not dp and not held.all()
            and self.imputation == "em"
        )  # fmt: skip
        rows = keep if mpc_em else keep & labelled
        if not (keep & labelled).any():
            raise ValueError("blocks: no labelled record is complete (complete_case)")
        edges = np.concatenate([[0], np.cumsum(sizes)])
        party_blocks = [Xfull[rows, edges[k] : edges[k + 1]] for k in range(len(sizes))]
        mpc_imputation = None
        weights_em: FloatArray | None = None
        if self.backend == "mpc":
            # covariates shared as integers on the public 2^-8 grid (§8.3)
            from learners.secure_vertical._mpyc_backend import (
                GRID_BITS,
                MPCImputation,
                quantise,
                require_mpc,
            )

            require_mpc()
            if mpc_em:
                # §5.4 E1/E2: EM inside MPC from the public start; records without y
                # take part in the EM and get weight 0 in the logistic fit
                Xo = X_observed[rows]
                party_blocks = [
                    np.nan_to_num(Xo[:, edges[k] : edges[k + 1]], nan=0.0)
                    for k in range(len(sizes))
                ]
                em = {"covariance": self.covariance, "max_iter": int(self.em_max_iter),
                      "tol": 1e-8, "reveal": self.em_reveal}  # fmt: skip
                init = default_init(Xo.shape[1], self.n_components)
                mpc_imputation = MPCImputation.build(init, Xo, {}, em)
                if not labelled[rows].all():
                    weights_em = labelled[rows].astype(float)
            elif self.theta_ is not None:
                # §5.4/§5.6: the parties share only what they hold (zeros elsewhere);
                # the imputation runs inside MPC from the public θ (§6 row 12)
                Xo = X_observed[rows]
                party_blocks = [
                    np.nan_to_num(Xo[:, edges[k] : edges[k + 1]], nan=0.0)
                    for k in range(len(sizes))
                ]
                mpc_imputation = MPCImputation.build(self.theta_, Xo, imp_scales)
            party_blocks = [quantise(b) for b in party_blocks]
            c0 = math.floor(c0 * 2.0**GRID_BITS) / 2.0**GRID_BITS  # public; never grows
        party_blocks[0] = np.hstack(
            [np.full((int(rows.sum()), 1), c0), party_blocks[0]]
        )
        weights = weights_em
        noise: JointNoise | None = None
        lam = float(self.lam)
        a = np.zeros(0)
        eta = 0.0
        if dp:
            assert eps_rec is not None
            targets = eps_rec[rows] - eps_theta[rows]
            if np.any(targets <= 0):
                raise ValueError(
                    "sample_epsilon: nothing left for β after ε_θ; raise ε"
                )
            a, eta, lam = objective_weights(targets, lam)
            # §7.2: c drawn jointly by t + 1 compute parties in MPC (one drawer in plain)
            drawers = contributors(self.mpc_parties) if self.backend == "mpc" else 1
            noise = joint_noise(2.0 / eta, sum(sizes) + 1, drawers, rng,
                                seeded=self.random_state is not None)  # fmt: skip
            weights = a
        y_fit = np.where(labelled, y01, 0.0)[rows]
        trace = self._run(party_blocks, y_fit, weights=weights, lam=lam, noise=noise,
                          reveal=reveal, dp=dp, ledger=ledger,
                          imputation=mpc_imputation)  # fmt: skip
        self._set_result(trace, c0=c0, pm=pm, reveal=reveal, ledger=ledger)
        self.dp_ = dp
        self.privacy_report_: PrivacyReport | None = None
        if dp:
            assert noise is not None
            grad = (
                self._mpc_grad_norm
                if self.backend == "mpc"
                else self._grad_norm(
                    party_blocks, y01[rows], a, lam, noise.total(), trace.beta
                )
            )
            # plain: the blocks were pooled in the clear, so a central label
            label: Guarantee = (
                "mpc_plus_dp"
                if self.backend == "mpc"
                else cast(Guarantee, self.guarantee)
            )
            self.privacy_report_ = expand_report(mpc_dp_report(
                eps_theta=eps_theta, a=a, eta=eta, lam=lam, labelled=rows,
                grad_norm=grad, gtol=self._tol(), guarantee=label,
            ), active)  # fmt: skip
            self.lam_effective_ = lam
        else:
            warnings.warn(
                "secure_vertical_logistic: no sample_epsilon or party_epsilon, so the "
                "fit is not differentially private (dp_ = False, privacy_report_ = "
                "None)",
                NonPrivateFitWarning,
                stacklevel=2,
            )
        return self

    def _record_epsilon(
        self, held: NDArray[np.bool_], sample_epsilon: Any, party_epsilon: Any
    ) -> FloatArray | None:
        if sample_epsilon is not None and party_epsilon is not None:
            raise ValueError("give sample_epsilon or party_epsilon, not both")
        if party_epsilon is not None:
            n_parties = held.shape[1]
            pe = check_sample_epsilon(
                party_epsilon, n_samples=n_parties, name="party_epsilon", per="party"
            )
            return record_epsilon(held, pe)
        if sample_epsilon is not None:
            return check_sample_epsilon(sample_epsilon, n_samples=held.shape[0])
        return None

    def _categorical_blocks(
        self, blocks: list[FloatArray], eps_rec: FloatArray | None,
        rng: np.random.Generator, ledger: Ledger,
    ) -> tuple[list[FloatArray], float]:  # fmt: skip
        """§5.5: pattern tables (noisy with ``ε_θ`` in a DP fit) → saturated EM →
        dummy blocks with imputed posterior probabilities; returns the blocks and
        ``ε_θ`` (0 without DP)."""
        levels, W = check_levels(blocks, self.categorical_levels)
        tables = pattern_tables(W, levels)
        eps_theta = 0.0
        if eps_rec is not None:
            eps_theta = float(self.theta_share) * float(eps_rec.min())
            tables = noisy_tables(tables, eps_theta, rng)
        label = "pattern tables N_m" + (" + DP noise" if eps_rec is not None else "")
        for _, counts in tables:
            ledger.record(label, counts.shape, row=13)
        q = saturated_em(levels, tables, n_iter=int(self.em_max_iter))
        self.cell_probabilities_ = q
        out, self.dummy_columns_ = dummy_design(
            W, levels, q, [b.shape[1] for b in blocks]
        )
        return out, eps_theta

    def _dp_impute(
        self, X: FloatArray, sizes: list[int], radii: FloatArray, eps_theta: float,
        rng: np.random.Generator, ledger: Ledger,
    ) -> tuple[FloatArray, dict[tuple[int, ...], FloatArray]]:  # fmt: skip
        """§7.3: noisy pattern moments → EM (post-processing) → imputation, clipped
        with a public factor; returns the imputed design and the factors per pattern
        (keyed by its observed coordinates)."""
        moments = noisy_pattern_moments(X, eps_theta, rng)
        for pat in moments.pats:
            ledger.record(
                "pattern moments + DP noise (s_m, Q_m)", (pat.obs.size,), row=10
            )
        theta = em_from_moments(moments, X.shape[1], n=X.shape[0])
        record_theta(ledger, theta, iteration=None)
        self.theta_ = theta
        out = impute_conditional_mean(X, theta)
        scales: dict[tuple[int, ...], FloatArray] = {}
        block_of = np.repeat(np.arange(len(sizes), dtype=np.intp), sizes)
        radius_of = radii[block_of]
        for pat in patterns(X):
            if pat.mis.size == 0:
                continue
            r_obs = float(
                np.sqrt(sum(radii[k] ** 2 for k in np.unique(block_of[pat.obs])))
            )
            scale = imputation_scale(
                theta, pat, r_obs, radius_of[pat.mis], block_of[pat.mis]
            )
            out[np.ix_(pat.rows, pat.mis)] *= scale[None, :]
            scales[tuple(int(c) for c in pat.obs)] = scale
        return out, scales

    def _tol(self) -> float:
        if self.tol is not None:
            return float(self.tol)
        return 1e-6 if self.backend == "mpc" else 1e-8

    def _run(
        self, party_blocks: list[FloatArray], y: FloatArray, *, weights: Any, lam: float,
        noise: JointNoise | None, reveal: str, dp: bool, ledger: Ledger,
        imputation: Any = None,
    ) -> NewtonTrace:  # fmt: skip
        d = sum(b.shape[1] for b in party_blocks)
        max_iter = self.dp_iterations if dp else self.max_iter
        if self.backend == "reference":
            from learners.secure_vertical._reference import reference_newton

            return reference_newton(party_blocks, y, tol=self._tol(), max_iter=max_iter,
                                    ledger=ledger, random_state=self.random_state)  # fmt: skip
        if self.backend == "mpc":
            from learners.secure_vertical._mpyc_backend import MPyCBackend

            runner = MPyCBackend(
                n_parties=self.mpc_parties, timeout=float(self.mpc_timeout)
            )
            trace = runner.newton(party_blocks, y, weights=weights, lam=lam, noise=noise,
                                  reveal=reveal, tol=self._tol(), max_iter=max_iter,
                                  fixed_iterations=dp, ledger=ledger,
                                  imputation=imputation)  # fmt: skip
            self._mpc_grad_norm: float = runner.last_grad_norm
            if runner.last_theta is not None:
                self.theta_ = runner.last_theta
            return trace
        ops = PlainBackend(ledger)
        Xs = ops.hstack(
            [ops.share(k, b, integral=False) for k, b in enumerate(party_blocks)]
        )
        ys = ops.share(0, y, integral=True)
        c = None if noise is None else noise.total()
        return secure_newton(ops, Xs, ys, d=d, weights=weights, lam=lam, noise=c,
                             reveal=reveal, tol=self._tol(), max_iter=max_iter,  # type: ignore[arg-type]
                             fixed_iterations=dp)  # fmt: skip

    @staticmethod
    def _grad_norm(
        party_blocks: list[FloatArray], y: FloatArray, a: FloatArray, lam: float,
        noise: Any, beta: FloatArray,
    ) -> float:  # fmt: skip
        """``‖∇F(β̂)‖`` of the perturbed objective (a diagnostic kept in the market)."""
        Z = np.hstack(party_blocks)
        pi = 1.0 / (1.0 + np.exp(-(Z @ beta)))
        g = Z.T @ (a * (y - pi)) - lam * beta - np.asarray(noise)
        return float(np.linalg.norm(g))

    def _set_result(
        self, trace: NewtonTrace, *, c0: float, pm: bool, reveal: str, ledger: Ledger
    ) -> None:
        beta = trace.beta
        self.intercept_ = float(beta[0] * c0)
        self.coef_ = np.asarray(beta[1:], dtype=float)
        self.n_iter_ = trace.n_iter
        self.converged_ = trace.converged
        self.reveal_ = reveal
        self.ledger_ = ledger
        self.leakage_rows_ = ledger.rows() | {1}
        self.classes_ = np.array([-1, 1]) if pm else np.array([0, 1])
        self.n_features_in_ = int(self.coef_.size)

    # ---- prediction --------------------------------------------------------------

    def decision_function(self, X: ArrayLike) -> FloatArray:
        """``x·coef_ + intercept_`` for rows of the concatenated blocks."""
        check_is_fitted(self)
        Z = _as_matrix(X, self.n_features_in_)
        return np.asarray(Z @ self.coef_ + self.intercept_, dtype=float)

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """The class (``classes_[1]`` where the decision is positive)."""
        out = np.where(
            self.decision_function(X) > 0, self.classes_[1], self.classes_[0]
        )
        return np.asarray(out)

    def predict_proba(self, X: ArrayLike) -> FloatArray:
        """``[1 − σ, σ]`` of the decision."""
        z = self.decision_function(X)
        p1 = 1.0 / (1.0 + np.exp(-z))
        return np.column_stack([1.0 - p1, p1])


def _as_matrix(X: Any, p: int) -> FloatArray:
    if isinstance(X, list | tuple) and X and np.ndim(X[0]) == 2:
        X = np.hstack([np.asarray(b, dtype=float) for b in X])
    Z = np.asarray(X, dtype=float)
    if Z.ndim != 2 or Z.shape[1] != p or not np.isfinite(Z).all():
        raise ValueError(f"X must be finite with {p} columns (the concatenated blocks)")
    return Z
