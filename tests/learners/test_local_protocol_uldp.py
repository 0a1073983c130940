"""Seller custody of ``uldp_sparse_linear``: selection round, then ULDPMean rounds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from learners import (
    LEARNERS,
    ReportRequest,
    ULDPSparseLinearRegression,
    answer_request,
    seller_generators,
    validate_report,
)
from learners.registry import ReleaseContext
from tests.learners._protocol_client import as_client


def _data(n_users: int, m: int, d: int = 16, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n_users * m, d))
    theta = np.zeros(d)
    theta[[2, 9]] = [0.8, -0.6]
    y = X @ theta + 0.3 * rng.standard_normal(n_users * m)
    return X, y, np.repeat(np.arange(n_users), m)


CASES = [
    {"sparsity": 2, "fit_intercept": True},
    {"sparsity": 2, "selector": "post_lasso"},
    {
        "sparsity": 2,
        "algorithm": "multi_round",
        "batch_size": 20,
        "small_batch_fallback": False,
        "fit_intercept": True,
    },
]


@pytest.mark.parametrize("kwargs", CASES)
@pytest.mark.parametrize("restart", [False, True])
def test_seller_answers_equal_the_library_fit_bit_for_bit(
    kwargs: dict[str, Any], restart: bool
) -> None:
    n, m = 120, 8
    X, y, groups = _data(n, m)
    eps_user = np.random.default_rng(3).uniform(0.5, 3.0, n)
    lib = ULDPSparseLinearRegression(**kwargs, random_state=7).fit(
        X, y, sample_epsilon=eps_user[groups], groups=groups
    )
    public_rng, rngs = seller_generators(7, n)
    proto = ULDPSparseLinearRegression(**kwargs).protocol(
        epsilon=eps_user, n_records=np.full(n, m), n_features=X.shape[1],
        random_state=public_rng,
    )  # fmt: skip
    asked: dict[int, int] = {}
    proto = as_client(
        proto, X, y, rngs, restart=restart,
        seen=lambda i, q, r: asked.__setitem__(i, asked.get(i, 0) + 1),
    )  # fmt: skip
    est = proto.result()
    assert sorted(asked) == list(range(n))
    assert set(asked.values()) == {1}  # one message per seller over the whole protocol
    np.testing.assert_array_equal(est.coef_, lib.coef_)
    assert est.intercept_ == lib.intercept_
    np.testing.assert_array_equal(est.support_, lib.support_)
    assert est.algorithm_ == lib.algorithm_
    assert est.privacy_report_.custody == "seller"
    assert lib.privacy_report_.custody == "platform"
    assert est.privacy_report_.stages == lib.privacy_report_.stages
    np.testing.assert_array_equal(
        est.privacy_report_.sample_epsilon_total, eps_user[groups]
    )


def test_library_privacy_report_follows_the_callers_record_order() -> None:
    n, m = 60, 5
    X, y, groups = _data(n, m, seed=1)
    perm = np.random.default_rng(0).permutation(groups.size)
    eps_user = np.linspace(0.5, 2.0, n)
    est = ULDPSparseLinearRegression(sparsity=2, random_state=0).fit(
        X[perm], y[perm], sample_epsilon=eps_user[groups[perm]], groups=groups[perm]
    )
    np.testing.assert_array_equal(
        est.privacy_report_.sample_epsilon_total, eps_user[groups[perm]]
    )


def test_the_support_is_found_and_non_deliverers_spend_nothing() -> None:
    n, m = 400, 20
    X, y, _ = _data(n, m, seed=2)
    eps = np.full(n, 4.0)
    drop = set(range(0, n, 10))
    public_rng, rngs = seller_generators(5, n)
    proto = ULDPSparseLinearRegression(sparsity=2, k_sel=2).protocol(
        epsilon=eps, n_records=np.full(n, m), n_features=X.shape[1],
        random_state=public_rng,
    )  # fmt: skip
    est = as_client(proto, X, y, rngs, drop=drop).result()
    assert 2 in est.support_  # the strongest coefficient is selected and estimated
    assert abs(est.coef_[2] - 0.8) < 0.3
    assert proto.delivered() == set(range(n)) - drop
    total = np.asarray(est.privacy_report_.sample_epsilon_total).reshape(n, m)
    assert (total[sorted(drop)] == 0).all()
    assert (np.delete(total, sorted(drop), axis=0) == 4.0).all()
    assert est.ledger_.within_budget()


def test_no_selection_report_fails_with_a_reason() -> None:
    n, m = 20, 5
    X, y, _ = _data(n, m)
    public_rng, rngs = seller_generators(0, n)
    proto = ULDPSparseLinearRegression(sparsity=2).protocol(
        epsilon=np.ones(n), n_records=np.full(n, m), n_features=X.shape[1],
        random_state=public_rng,
    )  # fmt: skip
    first = proto.next_round()
    assert first is not None
    proto = as_client(proto, X, y, rngs, drop=set(first))
    with pytest.raises(ValueError, match="too few sellers delivered"):
        proto.result()


def _requests() -> dict[str, tuple[ReportRequest, dict[str, Any]]]:
    n, m = 12, 6
    X, y, _ = _data(n, m)
    _, rngs = seller_generators(0, n)
    proto = ULDPSparseLinearRegression(sparsity=2).protocol(
        epsilon=np.ones(n), n_records=np.full(n, m), n_features=X.shape[1],
        random_state=0,
    )  # fmt: skip
    out: dict[str, tuple[ReportRequest, dict[str, Any]]] = {}
    as_client(
        proto, X, y, rngs,
        seen=lambda i, q, r: out.setdefault(q.randomizer.split(".")[1], (q, r)),
    )  # fmt: skip
    return out


@pytest.mark.parametrize(
    ("kind", "report", "field"),
    [
        ("heavy_hitter_bit@1", {}, "bit"),
        ("heavy_hitter_bit@1", {"bit": 0}, "bit"),
        ("heavy_hitter_bit@1", {"bit": [1]}, "bit"),
        ("heavy_hitter_bit@1", {"bit": True}, "bit"),
        ("bin_bit@1", {"bit": 2}, "bit"),
        ("bin_bit@1", {"bit": 1, "index": 3}, "index"),
        ("laplace@1", {"value": float("nan")}, "value"),
        ("laplace@1", {"value": "0.5"}, "value"),
        ("laplace@1", {"value": [0.1, 0.2]}, "value"),
    ],
)
def test_validate_report_refuses_reports_outside_the_output_space(
    kind: str, report: dict[str, Any], field: str
) -> None:
    req, honest = _requests()[kind]
    validate_report(req, honest)
    with pytest.raises(ValueError, match=rf"^{field}:"):
        validate_report(req, report)


def test_the_order_builds_the_protocol_with_the_market_scaling() -> None:
    d = 4
    market = {
        "features": [{"low": 0.0, "high": 10.0}] * d,
        "target": {"low": -5.0, "high": 5.0},
    }
    ctx = ReleaseContext(lam=1.0, task="regression", market=market)
    spec = LEARNERS.spec("uldp_sparse_linear")
    assert spec.seller_custody
    proto = spec.build_protocol(
        {"sparsity": 2}, context=ctx, epsilon=[1.0] * 6, n_records=[5] * 6
    )
    reqs = proto.next_round()
    assert reqs is not None
    req = next(iter(reqs.values()))
    assert req.public["scaling"]["target"] == {"low": -5.0, "high": 5.0}
    raw = np.random.default_rng(0).uniform(0, 10, (5, d))
    validate_report(req, answer_request(req, raw, np.linspace(-5, 5, 5), rng=0))
    with pytest.raises(ValueError, match=r"^hh_oracle"):
        ULDPSparseLinearRegression(hh_oracle="hashed").protocol(
            epsilon=[1.0, 1.0], n_records=[2, 2], n_features=d
        )
