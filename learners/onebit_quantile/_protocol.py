"""The one-bit learner as one round of report requests (seller custody).

One round: every seller with ``ε_i > 0`` is asked for the bits of all its records at
its full ``ε_i`` (each record is its own privacy unit, spec §1): one response bit per
record with public X (spec §2.1), ``k + 1`` bits sharing ``ε_i`` with private X
(spec §1.2, §3.1). Features the model treats as known to the curator (all of them with
public X; those in ``public_features`` with private X) are sent in the clear with the
bits, in the learner's units; nothing else leaves the seller.

Randomizer ``onebit_quantile.bits@1``: the seller's client calls
:func:`randomize_public_x` / :func:`randomize_private_x`, the functions the library fit
calls, on its own records.

Report (``n = public["n_records"]``): public X ``{"z": n bits in {0, 1}, "x": n × p}``;
private X ``{"z_y": n bits in {0, 1}, "z_x": n × k in {−1, +1}, "x_public": n × |public|}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from learners.local_protocol import (
    LocalProtocol,
    Randomizer,
    ReportRequest,
    check_report_keys,
    market_scaling,
    register_protocol,
    register_randomizer,
    report_array,
)
from learners.onebit_quantile._checks import (
    check_bounds_X,
    check_public_features,
    check_response_interval,
    prior_rho,
)
from learners.onebit_quantile._model import QuantileWorkingModel
from learners.onebit_quantile._private_x import CornerPrior
from learners.onebit_quantile._qmle import (
    QMLEResult,
    estimate_private_x,
    estimate_public_x,
)
from learners.onebit_quantile._randomizers import (
    PrivateXReports,
    PublicXReports,
    randomize_private_x,
    randomize_public_x,
    split_budget,
)
from learners.onebit_quantile._spec import MAX_PRIVATE_FEATURES

FloatArray = NDArray[np.float64]
RANDOMIZER = "onebit_quantile.bits@1"


@dataclass(frozen=True, slots=True)
class BitPlan:
    """The public settings of a one-bit fit (from the estimator's parameters)."""

    p: int
    private_x: bool
    low: float
    high: float
    private: list[int]
    public: list[int]
    lo: FloatArray
    hi: FloatArray
    split: list[float] | None

    @classmethod
    def from_params(cls, params: Mapping[str, Any], p: int) -> BitPlan:
        """Check the parameters that shape the reports (``ValueError`` naming them)."""
        low, high = check_response_interval(params["interval"])
        split = params.get("budget_split")
        split_list = None if split is None else [float(v) for v in np.ravel(split)]
        if not params.get("private_x", False):
            return cls(
                p, False, low, high, [], list(range(p)), np.zeros(0), np.zeros(0), None
            )
        public = check_public_features(params.get("public_features"), p)
        private = [j for j in range(p) if j not in public]
        if len(private) > MAX_PRIVATE_FEATURES:
            raise ValueError(
                f"private_x: {len(private)} private features; the exact transform "
                f"handles at most {MAX_PRIVATE_FEATURES} (declare others in "
                "public_features)"
            )
        lo, hi = check_bounds_X(params.get("bounds_X"), p)
        split_budget(np.ones(1), n_private=len(private), split=split_list)  # checks it
        return cls(
            p, True, low, high, private, public, lo[private], hi[private], split_list
        )

    def public_json(self) -> dict[str, Any]:
        return {
            "n_features": self.p,
            "private_x": self.private_x,
            "interval": [self.low, self.high],
            "private_features": self.private,
            "public_features": self.public,
            "bounds_low": self.lo.tolist(),
            "bounds_high": self.hi.tolist(),
            "budget_split": self.split,
        }

    @classmethod
    def from_public(cls, pub: Mapping[str, Any]) -> BitPlan:
        return cls(
            int(pub["n_features"]),
            bool(pub["private_x"]),
            float(pub["interval"][0]),
            float(pub["interval"][1]),
            [int(j) for j in pub["private_features"]],
            [int(j) for j in pub["public_features"]],
            np.asarray(pub["bounds_low"], dtype=float),
            np.asarray(pub["bounds_high"], dtype=float),
            None if pub.get("budget_split") is None else list(pub["budget_split"]),
        )

    def fractions(self) -> tuple[FloatArray, list[str]]:
        """Budget fraction and stage label of each bit (response first)."""
        if not self.private_x:
            return np.ones(1), ["response bit"]
        frac = split_budget(np.ones(1), n_private=len(self.private), split=self.split)[
            0
        ]
        return frac, ["response bit"] + [f"covariate bit x[{j}]" for j in self.private]


def randomize(
    plan: BitPlan,
    X: FloatArray,
    y: FloatArray,
    epsilon: FloatArray,
    rng: np.random.Generator,
) -> dict[str, NDArray[Any]]:
    """The users' side for records ``X``/``y`` with budgets ``epsilon`` (> 0): the
    learner's own randomizers; returns the report arrays."""
    if not plan.private_x:
        rep = randomize_public_x(
            X, y, epsilon=epsilon, low=plan.low, high=plan.high, rng=rng
        )
        return {"z": rep.z, "x": rep.X}
    priv = randomize_private_x(
        X[:, plan.private],
        X[:, plan.public],
        y,
        epsilon=epsilon,
        low=plan.low,
        high=plan.high,
        bounds=(plan.lo, plan.hi),
        split=plan.split,
        rng=rng,
    )
    return {"z_y": priv.z_y, "z_x": priv.z_x, "x_public": priv.X_public}


def estimate(
    plan: BitPlan,
    arrays: Mapping[str, NDArray[Any]],
    epsilon: FloatArray,
    params: Mapping[str, Any],
) -> QMLEResult:
    """The curator's side: the QMLE from the report arrays of the participating
    records (``epsilon``: their budgets) alone."""
    p = plan.p
    intercept = bool(params.get("fit_intercept", True))
    model = QuantileWorkingModel(
        alpha=float(params["alpha"]),
        sigma=float(params.get("scale", 1.0)),
        low=plan.low,
        high=plan.high,
    )
    intercept_index = p if intercept else None
    common: dict[str, Any] = {
        "box": params.get("box"),
        "n_restarts": int(params.get("n_restarts", 2)),
        "covariance": params.get("covariance", "sandwich"),
    }
    n = epsilon.size
    ones = np.ones((n, 1))
    if not plan.private_x:
        X = np.asarray(arrays["x"], dtype=float).reshape(n, p)
        design = np.hstack([X, ones]) if intercept else X
        reports = PublicXReports(
            X=design, z=np.asarray(arrays["z"], dtype=np.int8), epsilon=epsilon
        )
        return estimate_public_x(
            reports, model=model, intercept_index=intercept_index, **common
        )
    k = len(plan.private)
    Xp = np.asarray(arrays["x_public"], dtype=float).reshape(n, len(plan.public))
    if intercept:
        Xp = np.hstack([Xp, ones])
    public_cols = plan.public + ([p] if intercept else [])
    bits_eps = split_budget(epsilon, n_private=k, split=plan.split)
    reports_x = PrivateXReports(
        z_x=np.asarray(arrays["z_x"], dtype=np.int8).reshape(n, k),
        z_y=np.asarray(arrays["z_y"], dtype=np.int8),
        bit_epsilon=bits_eps,
        X_public=Xp,
    )
    prior = CornerPrior(
        center=(plan.lo + plan.hi) / 2.0,
        half_width=(plan.hi - plan.lo) / 2.0,
        rho=prior_rho(str(params.get("prior", "endpoint")), params.get("prior_rho"), k),
    )
    return estimate_private_x(
        reports_x,
        model=model,
        prior=prior,
        private_index=plan.private,
        public_index=public_cols,
        intercept_index=intercept_index,
        **common,
    )


# --- the randomizer as a seller answers it ----------------------------------


def _answer(
    request: ReportRequest, X: FloatArray, y: FloatArray, rng: np.random.Generator
) -> dict[str, Any]:
    plan = BitPlan.from_public(request.public)
    if X.shape[1] != plan.p:
        raise ValueError(f"X: the request is for {plan.p} features, got {X.shape[1]}")
    if np.isnan(X).any():
        raise ValueError("X: this learner has no missing values (a cell is empty)")
    eps = np.full(X.shape[0], float(request.epsilon))
    return dict(randomize(plan, X, y, eps, rng))


def _check_scaled(request: ReportRequest, name: str, values: FloatArray) -> None:
    """With a market's scaling, public features lie in ``[−1/√d, 1/√d]``."""
    if not request.public.get("scaling") or not values.size:
        return
    limit = (1.0 + 1e-12) / math.sqrt(int(request.public["n_features"]))
    if np.abs(values).max() > limit:
        raise ValueError(
            f"{name}: public features are scaled to [-1/sqrt(d), 1/sqrt(d)] = "
            f"[{-limit:.6g}, {limit:.6g}]; a value is outside"
        )


def _validate(request: ReportRequest, report: Mapping[str, Any]) -> None:
    plan = BitPlan.from_public(request.public)
    n = int(request.public["n_records"])
    if not plan.private_x:
        check_report_keys(report, ("z", "x"))
        report_array(report, "z", shape=(n,), alphabet=(0, 1))
        _check_scaled(request, "x", report_array(report, "x", shape=(n, plan.p)))
        return
    check_report_keys(report, ("z_y", "z_x", "x_public"))
    report_array(report, "z_y", shape=(n,), alphabet=(0, 1))
    report_array(report, "z_x", shape=(n, len(plan.private)), alphabet=(-1, 1))
    xp = report_array(report, "x_public", shape=(n, len(plan.public)))
    _check_scaled(request, "x_public", xp)


register_randomizer(
    Randomizer(
        RANDOMIZER,
        _answer,
        _validate,
        "one bit flip of the truncated response per record (public X), or k + 1 bit "
        "flips sharing ε (private X); public features in the clear",
    )
)


# --- the protocol -------------------------------------------------------------


@register_protocol
class OneBitProtocol(LocalProtocol):
    """One round: every seller with ``ε_i > 0`` sends the bits of all its records."""

    kind = "onebit_quantile"
    learner = "onebit_quantile"

    def __init__(self, *, n_features: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.n_features = int(n_features)
        self.plan = BitPlan.from_params(self.params, self.n_features)
        self.reports: dict[int, dict[str, Any]] = {}

    def _plan(self) -> dict[int, ReportRequest] | None:
        if self.round > 0:
            return None
        pub = self.plan.public_json()
        return {
            int(i): ReportRequest(
                0,
                RANDOMIZER,
                float(self.epsilon[i]),
                self._public(n_records=int(self.n_records[i]), **pub),
            )
            for i in np.flatnonzero(self.epsilon > 0)
        }

    def _absorb(
        self,
        reports: Mapping[int, Mapping[str, Any]],
        requests: Mapping[int, ReportRequest],
    ) -> None:
        for i, rep in reports.items():
            self.reports[int(i)] = {k: rep[k] for k in rep}

    def _new_estimator(self) -> Any:
        from learners.onebit_quantile._estimator import OneBitQuantileRegression

        return OneBitQuantileRegression(**self.params)

    def _finish(self, est: Any) -> None:
        sellers = sorted(self.reports)
        n_rep = int(sum(int(self.n_records[i]) for i in sellers))
        self._check_enough(n_rep, 2, "records' reports")
        keys = ("z", "x") if not self.plan.private_x else ("z_y", "z_x", "x_public")
        arrays = {
            key: np.concatenate(
                [np.asarray(self.reports[i][key], dtype=float) for i in sellers]
            )
            for key in keys
        }
        eps = np.concatenate(
            [np.full(int(self.n_records[i]), self.spent[i]) for i in sellers]
        )
        result = estimate(self.plan, arrays, eps, self.params)
        est.finish_fit(result, self.n_features, self.record_epsilon(), self.plan)

    def _dump(self) -> dict[str, Any]:
        return {
            "n_features": self.n_features,
            "reports": {str(i): r for i, r in self.reports.items()},
        }

    def _load(self, data: Mapping[str, Any]) -> None:
        self.n_features = int(data["n_features"])
        self.plan = BitPlan.from_params(self.params, self.n_features)
        self.reports = {int(i): dict(r) for i, r in data["reports"].items()}


def build_protocol(
    params: Mapping[str, Any],
    *,
    context: Any = None,
    epsilon: Any,
    n_records: Any,
    random_state: Any = None,
) -> OneBitProtocol:
    """The seller-custody protocol of an order (the learner's ``local_protocol``):
    the learner :meth:`~OneBitQuantileRegression.for_order` builds, its parameters,
    and the market's public scaling for the sellers' clients."""
    from learners.onebit_quantile._estimator import OneBitQuantileRegression
    from learners.registry import ReleaseContext

    ctx = context if context is not None else ReleaseContext(lam=1.0, task="quantile")
    est = OneBitQuantileRegression.for_order(params, context=ctx)
    return est.protocol(
        epsilon=epsilon,
        n_records=n_records,
        scaling=market_scaling(ctx),
        random_state=random_state,
    )
