"""DS and TP as rounds of report batches (seller custody; spec §4–§6, §9).

The spec's private SGD is sequentially interactive with one report per step: user
``t`` randomizes its gradient at the iterate ``b^(t−1)``. With records on the sellers'
machines every step is a network round, so the protocol batches it:

    per phase: sellers in a public random order (a fresh permutation per phase, drawn
    from public randomness), cut into rounds of about ``round_size`` records (a seller's
    records are never split across rounds);
    round r: every seller of the round receives the current iterate ``b`` and returns,
    for each of its records, ``z = Q_ps(v(b); G, ε_phase)`` (spec §3; the library's
    :func:`~learners.ldp_missing.private_sampling`);
    server: the round's reports are applied one at a time in the public order with the
    spec's steps and projections, ``b ← Π_R(b − η_t z_t)``, ``η_t = c_t/√t``,
    ``c_t = γ·2R/B_t`` (spec §4, §9).

The only difference from the spec's SGD is that every report of a round is computed at
the iterate of the round's start (a delayed gradient); with ``round_size = 1`` the
protocol is the spec's SGD step for step. Privacy is unchanged: each record sends one
``Q_ps`` report per phase at its phase budget (``ε_i`` for DS; ``ε_i·s`` then
``ε_i − ε_i·s`` for TP), and the public state of a round (iterate, ``α̂``, ``r̂``,
``p_min``) is computed from earlier reports only (spec §2).

Randomizer ``ldp_missing_logistic.private_sampling@1``: the seller computes its inputs
``v`` from its own records and the public state — phase ``"missingness"``:
``v = (σ(bᵀy') − m)·y'`` with ``y' = (1, y)``, ``G = √2``; phase ``"outcome"``:
``v = w·(σ(bᵀx') − y)·x'`` with ``x' = (1, x)``, ``w = 0`` for a record with a missing
cell (the dummy input, spec §5), else 1 (DS) or ``1/r̂_y`` (TP, spec §6) — and sends
``{"z": n_i × d}``, each row on the sphere of radius ``B = G·C_ε·κ_d``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit

from learners.ldp_missing._algorithms import observation_probabilities
from learners.ldp_missing._constants import sampling_radius
from learners.ldp_missing._randomizer import private_sampling
from learners.ldp_missing._report import DS_STAGE, MECHANISM, TP_STAGES
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
from learners.privacy import PrivacyReport, PrivacySpend, StageSpend

FloatArray = NDArray[np.float64]
RANDOMIZER = "ldp_missing_logistic.private_sampling@1"
RADIUS_RTOL = 1e-9
"""Relative tolerance of the report norm check (``‖z‖ = B`` up to rounding)."""


def sampling_inputs(
    X: FloatArray,
    y01: FloatArray,
    *,
    phase: str,
    coef: FloatArray,
    r_hat: FloatArray | None,
) -> FloatArray:
    """A user's un-randomized inputs ``v`` at the public iterate ``coef`` (module
    docstring): the gradient of the phase's logistic loss, dummy 0 for a record with
    a missing cell in the outcome phase, inverse-probability weighted with ``r_hat``."""
    missing = np.isnan(X).any(axis=1)
    ones = np.ones((X.shape[0], 1))
    if phase == "missingness":
        feats = np.hstack([ones, y01[:, None]])
        target = missing.astype(float)
        weight = np.ones(X.shape[0])
    else:
        feats = np.hstack([ones, np.where(np.isnan(X), 0.0, X)])
        target = y01
        w_obs = np.ones(X.shape[0]) if r_hat is None else 1.0 / r_hat[y01.astype(int)]
        weight = np.where(missing, 0.0, w_obs)
    g = weight * (expit(feats @ coef) - target)
    return np.asarray(g[:, None] * feats, dtype=float)


def _labels01(y: FloatArray) -> FloatArray:
    bad = np.flatnonzero((y != 1.0) & (y != -1.0))
    if bad.size:
        raise ValueError(f"y must be -1 or +1; y[{int(bad[0])}] = {y[bad[0]]!r}")
    return (y + 1.0) / 2.0


def _answer(
    request: ReportRequest, X: FloatArray, y: FloatArray, rng: np.random.Generator
) -> dict[str, Any]:
    pub = request.public
    coef = np.asarray(pub["coef"], dtype=float)
    phase = str(pub["phase"])
    k = int(pub.get("n_features", coef.size - 1))
    if X.shape[1] != k:
        raise ValueError(f"X: the request is for {k} features, got {X.shape[1]}")
    if np.isinf(X).any():
        raise ValueError("X must not contain infinity (np.nan marks a missing cell)")
    r_hat = None if pub.get("r_hat") is None else np.asarray(pub["r_hat"], dtype=float)
    V = sampling_inputs(X, _labels01(y), phase=phase, coef=coef, r_hat=r_hat)
    Z = private_sampling(V, bound=float(pub["bound"]), epsilon=request.epsilon, rng=rng)
    return {"z": Z}


def _answer_many(
    request: ReportRequest,
    X: FloatArray,
    y: FloatArray,
    epsilon: FloatArray,
    rng: np.random.Generator,
) -> dict[str, Any]:
    pub = request.public
    r_hat = None if pub.get("r_hat") is None else np.asarray(pub["r_hat"], dtype=float)
    V = sampling_inputs(
        X, _labels01(y), phase=str(pub["phase"]),
        coef=np.asarray(pub["coef"], dtype=float), r_hat=r_hat,
    )  # fmt: skip
    return {
        "z": private_sampling(V, bound=float(pub["bound"]), epsilon=epsilon, rng=rng)
    }


def _validate(request: ReportRequest, report: Mapping[str, Any]) -> None:
    pub = request.public
    d = len(pub["coef"])
    n = int(pub["n_records"])
    check_report_keys(report, ("z",))
    Z = report_array(report, "z", shape=(n, d))
    B = float(sampling_radius(float(pub["bound"]), d, request.epsilon))
    norms = np.linalg.norm(Z, axis=1)
    off = np.flatnonzero(np.abs(norms - B) > RADIUS_RTOL * B)
    if off.size:
        i = int(off[0])
        raise ValueError(
            f"z: every row must have norm B = {B:.12g} (the sphere of private "
            f"sampling); row {i} has norm {norms[i]:.12g}"
        )


register_randomizer(
    Randomizer(
        RANDOMIZER,
        _answer,
        _validate,
        "l2-ball private sampling of each record's gradient at the public iterate",
        _answer_many,
    )
)


def _rounds(
    order: NDArray[np.int64], n_records: NDArray[np.int64], size: int
) -> list[list[int]]:
    """Cut the sellers in ``order`` into consecutive rounds of at least ``size``
    records (the last may be smaller)."""
    out: list[list[int]] = []
    cur: list[int] = []
    count = 0
    for i in order.tolist():
        cur.append(int(i))
        count += int(n_records[i])
        if count >= size:
            out.append(cur)
            cur, count = [], 0
    if cur:
        out.append(cur)
    return out


@register_protocol
class LDPMissingProtocol(LocalProtocol):
    """DS (one phase) or TP (two phases) as rounds of report batches."""

    kind = "ldp_missing_logistic"
    learner = "ldp_missing_logistic"

    def __init__(self, *, n_features: int, round_size: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._configure(n_features, round_size)

    def _configure(self, n_features: int, round_size: int) -> None:
        if isinstance(round_size, bool) or int(round_size) < 1:
            raise ValueError(f"round_size must be an integer >= 1, got {round_size!r}")
        self.k = int(n_features)
        self.round_size = int(round_size)
        p = self.params
        self.algorithm = str(p.get("algorithm", "two_phase"))
        self.split = float(p.get("phase_split", 0.5))
        self.gamma = float(p.get("gamma", 0.1))
        x_bound = p.get("x_norm_bound")
        self.x_bound = math.sqrt(self.k) if x_bound is None else float(x_bound)
        beta = p.get("beta_radius")
        self.beta_radius = math.sqrt(self.k + 1.0) if beta is None else float(beta)
        self.alpha_radius = float(p.get("alpha_radius", 4.0))
        self.p_floor = float(p.get("p_floor", 0.0))
        phases = (
            ["outcome"] if self.algorithm == "dummy" else ["missingness", "outcome"]
        )
        self.phases = phases
        self.phase = -1
        self.schedule: list[list[int]] = []
        self.next_in_phase = 0
        self.coef = np.zeros(0)
        self.t = 0
        self.alpha: FloatArray | None = None
        self.r_hat: FloatArray | None = None
        self.phase_spent = np.zeros((len(phases), self.n_sellers))

    # --- public state of a phase -------------------------------------------

    def _phase_eps(self, phase: int) -> FloatArray:
        if self.algorithm == "dummy":
            return self.epsilon
        eps1 = self.epsilon * self.split
        return eps1 if phase == 0 else self.epsilon - eps1

    def _bound(self) -> float:
        if self.phases[self.phase] == "missingness":
            return math.sqrt(2.0)
        G = math.sqrt(1.0 + self.x_bound**2)
        if self.r_hat is not None:
            G /= float(self.r_hat.min())
        return G

    def _ball(self) -> float:
        return (
            self.alpha_radius
            if self.phases[self.phase] == "missingness"
            else self.beta_radius
        )

    def _start_phase(self) -> None:
        self.phase += 1
        if self.phases[self.phase] == "outcome" and self.algorithm == "two_phase":
            self.alpha = self.coef.copy()
            self.r_hat = observation_probabilities(self.alpha, p_floor=self.p_floor)
        d = 2 if self.phases[self.phase] == "missingness" else self.k + 1
        self.coef = np.zeros(d)
        self.t = 0
        eps = self._phase_eps(self.phase)
        live = np.flatnonzero((eps > 0) & ~self.failed).astype(np.int64)
        order = self.rng.permutation(live)
        self.schedule = _rounds(order, self.n_records, self.round_size)
        self.next_in_phase = 0

    def _plan(self) -> dict[int, ReportRequest] | None:
        while self.phase < 0 or self.next_in_phase >= len(self.schedule):
            if self.phase + 1 >= len(self.phases):
                return None
            self._start_phase()
        sellers = self.schedule[self.next_in_phase]
        eps = self._phase_eps(self.phase)
        pub = {
            "n_features": self.k,
            "phase": self.phases[self.phase],
            "coef": self.coef.tolist(),
            "bound": self._bound(),
            "r_hat": None
            if self.r_hat is None or self.phases[self.phase] != "outcome"
            else self.r_hat.tolist(),
        }
        return {
            i: ReportRequest(
                self.round,
                RANDOMIZER,
                float(eps[i]),
                self._public(n_records=int(self.n_records[i]), **pub),
            )
            for i in sellers
        }

    def _absorb(
        self,
        reports: Mapping[int, Mapping[str, Any]],
        requests: Mapping[int, ReportRequest],
    ) -> None:
        if self.phase < 0:
            return
        sellers = self.schedule[self.next_in_phase]
        self.next_in_phase += 1
        G, ball = self._bound(), self._ball()
        d = self.coef.size
        b = self.coef
        for i in sellers:  # the public order of the round
            if i not in reports:
                continue
            eps = requests[i].epsilon
            self.phase_spent[self.phase, i] += eps
            c = self.gamma * 2.0 * ball / float(sampling_radius(G, d, eps))
            for z in np.asarray(reports[i]["z"], dtype=float).reshape(-1, d):
                self.t += 1
                b = b - (c / math.sqrt(self.t)) * z
                norm = math.sqrt(float(b @ b))
                if norm > ball:
                    b = b * (ball / norm)
        self.coef = b

    # --- result -------------------------------------------------------------

    def _new_estimator(self) -> Any:
        from learners.ldp_missing._estimator import LDPMissingLogisticRegression

        return LDPMissingLogisticRegression(**self.params)

    def _finish(self, est: Any) -> None:
        final = self.phase_spent[-1]
        self._check_enough(int((final > 0).sum()), 1, "reports of the last phase")
        beta = self.coef
        est.intercept_ = float(beta[0])
        est.coef_ = np.asarray(beta[1:], dtype=float)
        est.classes_ = np.array([-1, 1])
        est.n_features_in_ = self.k
        est.alpha_ = None if self.alpha is None else self.alpha.copy()
        est.p_min_ = None if self.r_hat is None else float(self.r_hat.min())
        est.privacy_report_ = self._report()

    def _report(self) -> PrivacyReport:
        labels = [DS_STAGE] if self.algorithm == "dummy" else list(TP_STAGES)
        per_record = [np.repeat(s, self.n_records) for s in self.phase_spent]
        total = np.sum(per_record, axis=0) if per_record else np.zeros(0)
        stages = tuple(
            StageSpend(lab, tuple(float(e) for e in s))
            for lab, s in zip(labels, per_record, strict=True)
        )
        worst = int(np.argmax(total)) if total.size else 0
        spends = tuple(
            PrivacySpend(f"{st.label} (worst record)", st.sample_epsilon[worst])
            for st in stages
            if st.sample_epsilon
        )
        as_tuple = tuple(float(e) for e in total)
        return PrivacyReport(
            mechanism=MECHANISM + f"; rounds of about {self.round_size} reports",
            guarantee="local",
            neighbouring="replace_one",
            sample_epsilon=as_tuple,
            sample_epsilon_total=as_tuple,
            epsilon_max=float(total.max()) if total.size else 0.0,
            grad_norm=0.0,
            gtol=0.0,
            spends=spends,
            stages=stages,
        )

    # --- state ----------------------------------------------------------------

    def _dump(self) -> dict[str, Any]:
        return {
            "n_features": self.k,
            "round_size": self.round_size,
            "phase": self.phase,
            "schedule": self.schedule,
            "next_in_phase": self.next_in_phase,
            "coef": self.coef.tolist(),
            "t": self.t,
            "alpha": None if self.alpha is None else self.alpha.tolist(),
            "r_hat": None if self.r_hat is None else self.r_hat.tolist(),
            "phase_spent": self.phase_spent.tolist(),
        }

    def _load(self, data: Mapping[str, Any]) -> None:
        self._configure(int(data["n_features"]), int(data["round_size"]))
        self.phase = int(data["phase"])
        self.schedule = [[int(i) for i in r] for r in data["schedule"]]
        self.next_in_phase = int(data["next_in_phase"])
        self.coef = np.asarray(data["coef"], dtype=float)
        self.t = int(data["t"])
        self.alpha = (
            None if data["alpha"] is None else np.asarray(data["alpha"], dtype=float)
        )
        self.r_hat = (
            None if data["r_hat"] is None else np.asarray(data["r_hat"], dtype=float)
        )
        self.phase_spent = np.asarray(data["phase_spent"], dtype=float)


def build_protocol(
    params: Mapping[str, Any],
    *,
    context: Any = None,
    epsilon: Any,
    n_records: Any,
    random_state: Any = None,
) -> LDPMissingProtocol:
    """The seller-custody protocol of an order (the learner's ``local_protocol``):
    the learner :meth:`~LDPMissingLogisticRegression.for_order` builds, with the
    order's ``round_size``, and the market's public scaling for the sellers' clients.

    Raises
    ------
    ValueError
        Without a market schema (``context.market["features"]``): the number of
        features is unknown.
    """
    from learners.ldp_missing._estimator import LDPMissingLogisticRegression

    checked = LDPMissingLogisticRegression.learner_spec.check_params(params)
    scaling = market_scaling(context)
    if scaling is None:
        raise ValueError("context: a market schema with features is needed")
    est = LDPMissingLogisticRegression(
        x_norm_bound=1.0, **{k: v for k, v in checked.items() if k != "round_size"}
    )
    return est.protocol(
        epsilon=epsilon,
        n_records=n_records,
        n_features=len(scaling["features"]),
        round_size=int(checked["round_size"]),
        scaling=scaling,
        random_state=random_state,
    )
