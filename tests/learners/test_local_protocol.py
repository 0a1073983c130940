"""Seller custody: the report-round interface and the one-bit learner's protocol.

The central property: the protocol answered seller by seller, through JSON as a
seller's client would (``answer_request`` on each seller's own records with its own
generator), gives the library fit bit for bit.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from learners import (
    LEARNERS,
    OneBitQuantileRegression,
    ReportRequest,
    answer_request,
    seller_generators,
    validate_report,
)
from learners.local_protocol import market_scaling, scale_records
from learners.onebit_quantile import sample_ald_noise
from learners.registry import ReleaseContext
from tests.learners._protocol_client import as_client as _as_client


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, 2))
    y = 0.5 + X @ np.array([1.0, -1.0]) + 0.5 * sample_ald_noise(n, alpha=0.3, rng=rng)
    return X, y


ONEBIT_CASES = [
    {"alpha": 0.3, "interval": [-3.0, 4.0], "scale": 0.5},
    {
        "alpha": 0.3,
        "interval": [-3.0, 4.0],
        "scale": 0.5,
        "private_x": True,
        "bounds_X": ([-1.0, -1.0], [1.0, 1.0]),
        "public_features": [1],
    },
    {
        "alpha": 0.5,
        "interval": [-3.0, 4.0],
        "private_x": True,
        "bounds_X": (-1.0, 1.0),
        "fit_intercept": False,
    },
]


@pytest.mark.parametrize("kwargs", ONEBIT_CASES)
@pytest.mark.parametrize("restart", [False, True])
def test_onebit_seller_answers_equal_the_library_fit_bit_for_bit(
    kwargs: dict[str, Any], restart: bool
) -> None:
    n = 400
    X, y = _data(n)
    eps = np.random.default_rng(5).uniform(0.5, 3.0, n)
    lib = OneBitQuantileRegression(**kwargs, random_state=11).fit(
        X, y, sample_epsilon=eps
    )
    public_rng, rngs = seller_generators(11, n)
    proto = OneBitQuantileRegression(**kwargs).protocol(
        epsilon=eps, n_records=np.ones(n, dtype=np.int64), n_features=2,
        random_state=public_rng,
    )  # fmt: skip
    proto = _as_client(proto, X, y, rngs, restart=restart)
    est = proto.result()
    np.testing.assert_array_equal(est.coef_, lib.coef_)
    assert est.intercept_ == lib.intercept_
    np.testing.assert_array_equal(est.bse_, lib.bse_)
    assert est.privacy_report_.custody == "seller"
    assert lib.privacy_report_.custody == "platform"
    assert est.privacy_report_.stages == lib.privacy_report_.stages
    np.testing.assert_array_equal(est.privacy_report_.sample_epsilon_total, eps)
    assert proto.delivered() == set(range(n))
    assert est.predict(X[:3]).shape == (3,)


def test_onebit_non_deliverers_are_dropped_and_spend_nothing() -> None:
    """Sellers that never answer are out of ``delivered``, their records carry ε = 0
    in the privacy report, and the fit is the library fit with their budgets at 0
    (every other seller keeps its generator)."""
    n = 300
    X, y = _data(n, seed=1)
    eps = np.full(n, 2.0)
    drop = {0, 7, 8, 150, 299}
    public_rng, rngs = seller_generators(4, n)
    proto = OneBitQuantileRegression(alpha=0.3, interval=[-3, 4]).protocol(
        epsilon=eps, n_records=np.ones(n, dtype=np.int64), n_features=2,
        random_state=public_rng,
    )  # fmt: skip
    est = _as_client(proto, X, y, rngs, drop=drop).result()
    assert proto.delivered() == set(range(n)) - drop
    total = np.asarray(est.privacy_report_.sample_epsilon_total)
    assert (total[sorted(drop)] == 0).all()
    assert (np.delete(total, sorted(drop)) == 2.0).all()
    eps0 = eps.copy()
    eps0[sorted(drop)] = 0.0
    lib = OneBitQuantileRegression(alpha=0.3, interval=[-3, 4], random_state=4).fit(
        X, y, sample_epsilon=eps0
    )
    np.testing.assert_array_equal(est.coef_, lib.coef_)
    assert est.result_.n_users == n - len(drop)


def test_onebit_sellers_with_several_records_and_zero_budget() -> None:
    """A seller answers for all its records in one report; a seller with ε_i = 0 gets
    no request; per record the report states its seller's ε."""
    n_rec = np.array([3, 1, 4, 2, 5])
    eps = np.array([1.0, 0.0, 2.0, 0.5, 1.5])
    X, y = _data(int(n_rec.sum()), seed=2)
    public_rng, rngs = seller_generators(0, n_rec.size)
    proto = OneBitQuantileRegression(alpha=0.5, interval=[-3, 4]).protocol(
        epsilon=eps, n_records=n_rec, n_features=2, random_state=public_rng
    )
    reqs = proto.next_round()
    assert reqs is not None
    assert sorted(reqs) == [0, 2, 3, 4]
    assert [reqs[i].public["n_records"] for i in (0, 2, 3, 4)] == [3, 4, 2, 5]
    assert all(reqs[i].epsilon == eps[i] for i in reqs)
    est = _as_client(proto, X, y, rngs).result()
    np.testing.assert_array_equal(
        est.privacy_report_.sample_epsilon_total, np.repeat(eps, n_rec)
    )
    assert est.result_.n_users == int(n_rec[eps > 0].sum())
    assert proto.next_round() is None


def _one_request(private_x: bool) -> tuple[ReportRequest, dict[str, Any]]:
    kwargs = ONEBIT_CASES[1 if private_x else 0]
    proto = OneBitQuantileRegression(**kwargs).protocol(
        epsilon=[1.0], n_records=[3], n_features=2, random_state=0
    )
    reqs = proto.next_round()
    assert reqs is not None
    X, y = _data(3)
    return reqs[0], answer_request(reqs[0], X, y, rng=0)


@pytest.mark.parametrize(
    ("private_x", "mutate", "field"),
    [
        (False, lambda r: r.pop("z"), "z"),
        (False, lambda r: r.update(z=[0, 1]), "z"),
        (False, lambda r: r.update(z=[0, 1, 2]), "z"),
        (False, lambda r: r.update(z=[0, 1, -1]), "z"),
        (False, lambda r: r.update(z=[0, 1, 0.5]), "z"),
        (False, lambda r: r.update(z=[True, False, True]), "z"),
        (False, lambda r: r.update(z="011"), "z"),
        (False, lambda r: r.update(x=[[0.1, 0.2]] * 2), "x"),
        (False, lambda r: r.update(x=[[0.1, float("nan")]] * 3), "x"),
        (False, lambda r: r.update(x=[[0.1, float("inf")]] * 3), "x"),
        (False, lambda r: r.update(y=[1.0, 2.0, 3.0]), "y"),
        (True, lambda r: r.update(z_x=[[1], [1], [0]]), "z_x"),
        (True, lambda r: r.update(z_x=[[1, 1], [1, 1], [1, 1]]), "z_x"),
        (True, lambda r: r.update(z_y=[0, 1, -1]), "z_y"),
        (True, lambda r: r.pop("x_public"), "x_public"),
        (True, lambda r: r.update(x_public=[[None], [1.0], [1.0]]), "x_public"),
    ],
)
def test_validate_report_refuses_reports_outside_the_output_space(
    private_x: bool, mutate: Any, field: str
) -> None:
    req, rep = _one_request(private_x)
    validate_report(req, rep)  # the honest report passes
    mutate(rep)
    with pytest.raises(ValueError, match=rf"^{field}:"):
        validate_report(req, rep)


def test_submit_names_the_seller_and_records_nothing_on_a_bad_report() -> None:
    proto = OneBitQuantileRegression(alpha=0.5, interval=[-3, 4]).protocol(
        epsilon=[1.0, 1.0], n_records=[1, 1], n_features=2, random_state=0
    )
    reqs = proto.next_round()
    assert reqs is not None
    X, y = _data(2)
    good = answer_request(reqs[0], X[:1], y[:1], rng=0)
    with pytest.raises(ValueError, match=r"^reports\[1\]\.z:"):
        proto.submit({0: good, 1: {"z": [5], "x": [[0.0, 0.0]]}})
    with pytest.raises(ValueError, match=r"^reports\[2\]"):
        proto.submit({2: good})
    assert proto.round == 0
    assert proto.pending is not None
    assert not proto.spent.any()
    assert proto.delivered() == set()


def test_answer_request_refuses_records_that_do_not_match_the_request() -> None:
    req, _ = _one_request(False)
    X, y = _data(4)
    with pytest.raises(ValueError, match=r"^X: the request is for 3 records"):
        answer_request(req, X, y, rng=0)
    with pytest.raises(ValueError, match=r"^y must have one entry"):
        answer_request(req, X[:3], y[:2], rng=0)


def test_request_json_is_checked_field_by_field() -> None:
    req, _ = _one_request(False)
    wire = req.to_json()
    assert ReportRequest.from_json(json.loads(json.dumps(wire))) == req
    for name, value in [
        ("round", -1),
        ("randomizer", "onebit_quantile.bits@99"),
        ("epsilon", 0.0),
        ("epsilon", float("inf")),
        ("public", [1]),
    ]:
        bad = dict(wire, **{name: value})
        with pytest.raises(ValueError, match=rf"^request\.{name}:"):
            ReportRequest.from_json(bad)
    with pytest.raises(ValueError, match=r"^request\.epsilon: missing"):
        ReportRequest.from_json({k: v for k, v in wire.items() if k != "epsilon"})


def test_market_scaling_is_applied_on_the_sellers_side() -> None:
    """With a market schema the request carries the public scaling; a seller answering
    with raw values gives the report of the scaled records (same generator)."""
    market = {
        "features": [{"low": 0.0, "high": 10.0}, {"low": -5.0, "high": 5.0}],
        "target": {"low": 0.0, "high": 100.0},
    }
    ctx = ReleaseContext(lam=1.0, task="quantile", market=market)
    spec = LEARNERS.spec("onebit_quantile")
    proto = spec.build_protocol(
        {"alpha": 0.5}, context=ctx, epsilon=[1.0, 2.0], n_records=[2, 1]
    )
    reqs = proto.next_round()
    assert reqs is not None
    assert reqs[0].public["scaling"] == market_scaling(ctx)
    raw_X = np.array([[2.0, 1.0], [12.0, -5.0]])  # 12 is above the bound: clipped
    raw_y = np.array([30.0, 70.0])
    Xs, ys = scale_records(raw_X, raw_y, market)
    np.testing.assert_allclose(Xs, np.array([[-0.6, 0.2], [1.0, -1.0]]) / np.sqrt(2.0))
    np.testing.assert_allclose(ys, [-0.4, 0.4])
    rep = answer_request(reqs[0], raw_X, raw_y, rng=3)
    np.testing.assert_allclose(rep["x"], Xs)
    unscaled = ReportRequest(
        0,
        reqs[0].randomizer,
        reqs[0].epsilon,
        {k: v for k, v in reqs[0].public.items() if k != "scaling"},
    )
    assert answer_request(unscaled, Xs, ys, rng=3) == rep
    validate_report(reqs[0], rep)
    with pytest.raises(ValueError, match=r"^x: public features are scaled"):
        validate_report(reqs[0], dict(rep, x=[[0.2, 0.9], [0.1, 0.1]]))


def test_the_spec_says_which_learners_run_with_seller_custody() -> None:
    assert LEARNERS.seller_custody() == [
        "ldp_missing_logistic",
        "onebit_quantile",
        "uldp_sparse_linear",
    ]
    assert LEARNERS.spec("onebit_quantile").seller_custody
    assert LEARNERS.spec("onebit_quantile").to_dict()["seller_custody"] is True
    for name in ("hetero_dp_logistic", "secure_vertical_logistic"):
        spec = LEARNERS.spec(name)
        assert not spec.seller_custody
        with pytest.raises(ValueError, match=r"^learner:"):
            spec.build_protocol({}, epsilon=[1.0], n_records=[1])


def test_result_refuses_an_unfinished_or_empty_protocol() -> None:
    proto = OneBitQuantileRegression(alpha=0.5, interval=[-3, 4]).protocol(
        epsilon=[1.0, 1.0, 1.0], n_records=[1, 1, 1], n_features=2, random_state=0
    )
    assert proto.next_round() is not None
    with pytest.raises(ValueError, match="rounds are left"):
        proto.result()
    proto.submit({})  # nobody delivered
    assert proto.next_round() is None
    assert proto.delivered() == set()
    with pytest.raises(ValueError, match="too few sellers delivered"):
        proto.result()
