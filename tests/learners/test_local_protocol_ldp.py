"""Seller custody of ``ldp_missing_logistic``: DS / TP as rounds of report batches."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from learners import (
    LEARNERS,
    LDPMissingLogisticRegression,
    ReportRequest,
    answer_request,
    seller_generators,
    validate_report,
)
from learners.ldp_missing import sampling_radius, simulate
from learners.ldp_missing._sgd import replay_server, step_sizes
from learners.registry import ReleaseContext
from tests.learners._protocol_client import as_client


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    d = simulate(
        n,
        beta=[0.0, 1.0, -0.5],
        alpha=[1.0, 1.0],
        alpha_parametrizes="observed",
        rng=np.random.default_rng(seed),
    )
    X = d.X / math.sqrt(2.0)  # ‖x‖ ≤ 1 = x_norm_bound
    return X, 2.0 * d.y01 - 1.0


@pytest.mark.parametrize("algorithm", ["two_phase", "dummy"])
@pytest.mark.parametrize(("round_size", "restart"), [(7, False), (25, True)])
def test_seller_answers_equal_the_library_fit_bit_for_bit(
    algorithm: str, round_size: int, restart: bool
) -> None:
    n = 120
    X, y = _data(n)
    assert np.isnan(X).any()  # missing cells: dummy inputs take part
    eps = np.random.default_rng(1).uniform(0.5, 4.0, n)
    kw: dict[str, Any] = {"algorithm": algorithm, "x_norm_bound": 1.0}
    lib = LDPMissingLogisticRegression(**kw, round_size=round_size, random_state=9)
    lib.fit(X, y, sample_epsilon=eps)
    public_rng, rngs = seller_generators(9, n)
    proto = LDPMissingLogisticRegression(**kw).protocol(
        epsilon=eps, n_records=np.ones(n, dtype=np.int64), n_features=2,
        round_size=round_size, random_state=public_rng,
    )  # fmt: skip
    proto = as_client(proto, X, y, rngs, restart=restart)
    est = proto.result()
    np.testing.assert_array_equal(est.coef_, lib.coef_)
    assert est.intercept_ == lib.intercept_
    if algorithm == "two_phase":
        np.testing.assert_array_equal(est.alpha_, lib.alpha_)
    assert est.privacy_report_.custody == "seller"
    assert lib.privacy_report_.custody == "platform"
    assert est.privacy_report_.stages == lib.privacy_report_.stages
    np.testing.assert_allclose(
        est.privacy_report_.sample_epsilon_total, eps, rtol=1e-15
    )
    phases = 2 if algorithm == "two_phase" else 1
    assert proto.round == phases * math.ceil(n / round_size)


def test_every_report_is_computed_at_the_iterate_of_its_rounds_start() -> None:
    """The public iterate a round publishes is the spec's server (projected steps
    ``η_t = c_t/√t``) replayed on every earlier report of the phase; with
    ``round_size = 1`` that is the spec's SGD step for step."""
    n, size = 40, 6
    X, y = _data(n, seed=3)
    eps = np.full(n, 2.0)
    for round_size in (1, size):
        log: list[tuple[int, ReportRequest, dict[str, Any]]] = []
        public_rng, rngs = seller_generators(2, n)
        proto = LDPMissingLogisticRegression(
            algorithm="dummy", x_norm_bound=1.0
        ).protocol(
            epsilon=eps, n_records=np.ones(n, dtype=np.int64), n_features=2,
            round_size=round_size, random_state=public_rng,
        )  # fmt: skip
        est = as_client(
            proto, X, y, rngs, seen=lambda i, q, r, log=log: log.append((i, q, r))
        ).result()
        Z = np.array([r["z"][0] for _, _, r in log])
        G = math.sqrt(2.0)
        c = 0.1 * 2.0 * math.sqrt(3.0) / float(sampling_radius(G, 3, 2.0))
        steps = step_sizes(np.full(n, c), positions=n)
        order = np.arange(n)
        for t, (_, req, _) in enumerate(log):
            start = (t // round_size) * round_size  # reports before this round
            b = replay_server(
                Z[:start], order=order[:start], steps=steps, ball=math.sqrt(3.0)
            )
            np.testing.assert_allclose(req.public["coef"], b, rtol=0, atol=1e-12)
        final = replay_server(Z, order=order, steps=steps, ball=math.sqrt(3.0))
        np.testing.assert_allclose(np.r_[est.intercept_, est.coef_], final, atol=1e-12)


def test_sellers_with_several_records_one_request_per_phase() -> None:
    n_rec = np.array([3, 1, 4, 2, 5, 1])
    eps = np.array([1.0, 2.0, 0.0, 0.5, 1.5, 3.0])
    X, y = _data(int(n_rec.sum()), seed=4)
    public_rng, rngs = seller_generators(0, n_rec.size)
    proto = LDPMissingLogisticRegression(x_norm_bound=1.0).protocol(
        epsilon=eps,
        n_records=n_rec,
        n_features=2,
        round_size=4,
        random_state=public_rng,
    )
    asked: dict[int, list[ReportRequest]] = {}
    est = as_client(
        proto, X, y, rngs, seen=lambda i, q, r: asked.setdefault(i, []).append(q)
    ).result()
    assert sorted(asked) == [0, 1, 3, 4, 5]  # ε = 0: never asked
    for i, reqs in asked.items():
        assert [q.public["phase"] for q in reqs] == ["missingness", "outcome"]
        assert sum(q.epsilon for q in reqs) == pytest.approx(eps[i], rel=1e-15)
        assert all(q.public["n_records"] == n_rec[i] for q in reqs)
    np.testing.assert_allclose(
        est.privacy_report_.sample_epsilon_total, np.repeat(eps, n_rec), rtol=1e-15
    )


def test_a_seller_that_stops_is_dropped_and_charged_only_what_it_sent() -> None:
    n = 60
    X, y = _data(n, seed=5)
    eps = np.full(n, 2.0)
    public_rng, rngs = seller_generators(1, n)
    proto = LDPMissingLogisticRegression(x_norm_bound=1.0).protocol(
        epsilon=eps, n_records=np.ones(n, dtype=np.int64), n_features=2,
        round_size=10, random_state=public_rng,
    )  # fmt: skip
    phase2_round = 6  # rounds 0–5: missingness phase; 6–11: outcome phase
    asked: dict[int, list[int]] = {}
    never, late = {0, 1, 2}, {10, 11}
    est = as_client(
        proto, X, y, rngs, drop=never, stop=dict.fromkeys(late, phase2_round),
        seen=lambda i, q, r: asked.setdefault(i, []).append(q.round),
    ).result()  # fmt: skip
    assert proto.delivered() == set(range(n)) - never - late
    assert all(r < phase2_round for i in late for r in asked.get(i, []))
    total = np.asarray(est.privacy_report_.sample_epsilon_total)
    assert (total[sorted(never)] == 0).all()
    np.testing.assert_array_equal(total[sorted(late)], 1.0)  # phase 1 only
    stage1, stage2 = (np.asarray(s.sample_epsilon) for s in est.privacy_report_.stages)
    assert (stage2[sorted(late)] == 0).all()
    assert (stage1[sorted(late)] == 1.0).all()
    others = sorted(set(range(n)) - never - late)
    np.testing.assert_array_equal(total[others], 2.0)


def _request(n_rec: int = 2) -> tuple[ReportRequest, dict[str, Any]]:
    proto = LDPMissingLogisticRegression(algorithm="dummy", x_norm_bound=1.0).protocol(
        epsilon=[1.5], n_records=[n_rec], n_features=2, round_size=5, random_state=0
    )
    reqs = proto.next_round()
    assert reqs is not None
    X, y = _data(n_rec)
    return reqs[0], answer_request(reqs[0], X, y, rng=0)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r.pop("z"), "z"),
        (lambda r: r.update(z=r["z"][:1]), "z"),
        (lambda r: r.update(z=[row[:2] for row in r["z"]]), "z"),
        (lambda r: r.update(z=[[2.0 * v for v in row] for row in r["z"]]), "z"),
        (lambda r: r.update(z=[[0.5 * v for v in row] for row in r["z"]]), "z"),
        (lambda r: r.update(z=[[float("nan")] * 3, r["z"][1]]), "z"),
        (lambda r: r.update(z=[[float("inf"), 0, 0], r["z"][1]]), "z"),
        (lambda r: r.update(x=[1.0]), "x"),
    ],
)
def test_validate_report_refuses_reports_off_the_sampling_sphere(
    mutate: Any, field: str
) -> None:
    req, rep = _request()
    validate_report(req, rep)
    mutate(rep)
    with pytest.raises(ValueError, match=rf"^{field}:"):
        validate_report(req, rep)


def test_answer_refuses_labels_that_are_not_signs() -> None:
    req, _ = _request()
    X, _ = _data(2)
    with pytest.raises(ValueError, match=r"^y must be -1 or \+1"):
        answer_request(req, X, np.array([1.0, 0.0]), rng=0)


def test_the_order_builds_the_protocol_with_its_round_size_and_scaling() -> None:
    market = {"features": [{"low": 0.0, "high": 4.0}, {"low": -1.0, "high": 1.0}]}
    ctx = ReleaseContext(lam=1.0, task="classification", market=market)
    spec = LEARNERS.spec("ldp_missing_logistic")
    assert spec.seller_custody
    proto = spec.build_protocol(
        {"algorithm": "two_phase", "round_size": 3},
        context=ctx, epsilon=[1.0] * 7, n_records=[1] * 7, random_state=0,
    )  # fmt: skip
    reqs = proto.next_round()
    assert reqs is not None
    assert len(reqs) == 3
    req = next(iter(reqs.values()))
    assert req.public["scaling"]["target"] is None  # ±1 labels are not scaled
    assert req.epsilon == 0.5
    raw = np.array([[2.0, np.nan]])  # a missing cell stays missing
    rep = answer_request(req, raw, np.array([1.0]), rng=0)
    validate_report(req, rep)
    # platform custody keeps the spec's one-report-per-step SGD
    est = LDPMissingLogisticRegression.for_order({"round_size": 3}, context=ctx)
    assert est.round_size is None
