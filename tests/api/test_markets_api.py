"""Markets over HTTP: admin-only writes, validation naming fields, versioned
parameters on PATCH, the trade-off job record and its status endpoint."""

from typing import Any

import pytest
from sqlmodel import Session, select

from market import numerics
from market.orders import jobs as market_jobs
from market.runtime import job_runner, worker
from market.store import Job, Market, MarketParameters
from tests.api.conftest import (
    Api,
    World,
    count_rows,
    market_body,
    offer_body,
    seed_offers,
)


def test_admin_creates_market_with_documented_defaults(api: Api) -> None:
    admin = api.admin()
    body = market_body()
    del body["lifetime_epsilon_cap"]
    r = api.client.post("/v1/markets", headers=admin, json=body)
    assert r.status_code == 201
    m = r.json()
    assert m["parameters_version"] == 1
    assert m["lifetime_epsilon_cap"] == 10.0
    assert m["out_of_bounds"] == "reject"
    assert m["validation_size"] == 2
    assert "validation" not in m
    assert {k: m["mechanism"][k] for k in ("gamma", "eps_avg_max", "k", "u")} == {
        "gamma": 1.0,
        "eps_avg_max": 5.0,
        "k": 4.0,
        "u": "linear",
    }


def test_only_admins_create_or_patch_markets(world: World) -> None:
    c = world.api.client
    for headers in (world.seller_a, world.buyer_a):
        assert (
            c.post("/v1/markets", headers=headers, json=market_body()).status_code
            == 403
        )
        r = c.patch(
            f"/v1/markets/{world.market_id}", headers=headers, json={"name": "x"}
        )
        assert r.status_code == 403
        r = c.post(f"/v1/markets/{world.market_id}/tradeoff", headers=headers)
        assert r.status_code == 403
    assert c.post("/v1/markets", json=market_body()).status_code == 401
    assert count_rows(world.api, Market) == 1


def test_every_role_reads_public_settings(world: World) -> None:
    c = world.api.client
    for headers in (world.seller_a, world.buyer_a, world.admin):
        page = c.get("/v1/markets", headers=headers).json()
        assert page["total"] == 1
        assert [m["id"] for m in page["items"]] == [world.market_id]
        one = c.get(f"/v1/markets/{world.market_id}", headers=headers)
        assert one.status_code == 200
        assert one.json() == page["items"][0]
        assert c.get("/v1/markets/999", headers=headers).status_code == 404
    assert c.get("/v1/markets").status_code == 401


def test_market_list_pages(api: Api) -> None:
    admin = api.admin()
    for i in range(3):
        api.client.post("/v1/markets", headers=admin, json=market_body(name=f"m{i}"))
    page = api.client.get("/v1/markets?limit=2&offset=1", headers=admin).json()
    assert [m["name"] for m in page["items"]] == ["m1", "m2"]
    assert (page["total"], page["limit"], page["offset"]) == (3, 2, 1)
    assert api.client.get("/v1/markets?limit=0", headers=admin).status_code == 422
    assert api.client.get("/v1/markets?limit=101", headers=admin).status_code == 422


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"features": [{"name": "a", "low": 1.0, "high": 1.0}]}, "features[0].high"),
        (
            {
                "features": [
                    {"name": "a", "low": 0, "high": 1},
                    {"name": "a", "low": 0, "high": 1},
                ]
            },
            "features[1].name",
        ),
        ({"cost_prior": {"family": "cauchy", "params": {}}}, "cost_prior"),
        (
            {"cost_prior": {"family": "uniform", "params": {"low": 2.0, "high": 1.0}}},
            "cost_prior",
        ),
        (
            {"cost_prior": {"family": "exponential", "params": {}}},
            "cost_prior.params.rate",
        ),
        ({"task": "regression"}, "target"),
        ({"target": {"low": 0, "high": 1}}, "target"),
        (
            {"validation": [{"x": [1.0, 0.0], "y": 1}, {"x": [1.0, 2.0], "y": 1}]},
            "validation[1].x[1]",
        ),
        ({"validation": [{"x": [1.0, 0.0], "y": 3}]}, "validation[0].y"),
        ({"mechanism": {"grids": {"alpha": [1.0]}}}, "mechanism.grids.alpha"),
    ],
)
def test_invalid_markets_are_422_naming_the_field(
    api: Api, overrides: dict[str, object], field: str
) -> None:
    r = api.client.post(
        "/v1/markets", headers=api.admin(), json=market_body(**overrides)
    )
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert count_rows(api, Market) == 0


@pytest.mark.parametrize(
    "mechanism",
    [
        {"gamma": -1.0},
        {"k": 0.5},
        {"eps_avg_max": 0},
        {"u": "cubic"},
        {"lam": 0},
        {"beta": 1},
    ],
)
def test_invalid_mechanism_settings_are_422(
    api: Api, mechanism: dict[str, object]
) -> None:
    r = api.client.post(
        "/v1/markets", headers=api.admin(), json=market_body(mechanism=mechanism)
    )
    assert r.status_code == 422
    loc = r.json()["detail"][0]["loc"]
    assert loc[:3] == ["body", "mechanism", next(iter(mechanism))]
    assert count_rows(api, Market) == 0


@pytest.mark.parametrize(
    "extra", [{"id": 5}, {"created_by": 1}, {"parameters_version": 9}]
)
def test_server_owned_market_fields_are_rejected(
    api: Api, extra: dict[str, object]
) -> None:
    r = api.client.post(
        "/v1/markets", headers=api.admin(), json={**market_body(), **extra}
    )
    assert r.status_code == 422
    assert count_rows(api, Market) == 0


def test_patch_appends_a_parameters_version_and_orders_keep_theirs(
    world: World,
) -> None:
    c, mid = world.api.client, world.market_id
    seed_offers(world)
    order = c.post(
        f"/v1/markets/{mid}/orders",
        headers=world.buyer_a,
        json={"learner": "hetero_dp_logistic", "budget": 3.0},
    ).json()["id"]
    r = c.patch(
        f"/v1/markets/{mid}", headers=world.admin, json={"mechanism": {"gamma": 0.25}}
    )
    assert r.status_code == 200
    m = r.json()
    assert m["parameters_version"] == 2
    assert m["mechanism"]["gamma"] == 0.25
    assert m["mechanism"]["k"] == 4.0  # untouched settings carry over
    assert (
        c.get(f"/v1/orders/{order}", headers=world.buyer_a).json()["parameters_version"]
        == 1
    )
    later = c.post(
        f"/v1/markets/{mid}/orders",
        headers=world.buyer_a,
        json={"learner": "hetero_dp_logistic", "budget": 3.0},
    ).json()["id"]
    assert (
        c.get(f"/v1/orders/{later}", headers=world.buyer_a).json()["parameters_version"]
        == 2
    )
    with Session(c.app.state.engine) as session:  # type: ignore[attr-defined]
        versions = session.exec(
            select(MarketParameters.version, MarketParameters.values).order_by(
                MarketParameters.version
            )
        ).all()
    assert [v for v, _ in versions] == [1, 2]
    assert versions[0][1]["gamma"] == 1.0  # the old version is unchanged (append-only)


def test_patch_without_mechanism_keeps_the_version(world: World) -> None:
    c = world.api.client
    r = c.patch(
        f"/v1/markets/{world.market_id}",
        headers=world.admin,
        json={"name": "renamed", "lifetime_epsilon_cap": 7.5},
    )
    assert r.status_code == 200
    assert (r.json()["name"], r.json()["lifetime_epsilon_cap"]) == ("renamed", 7.5)
    assert r.json()["parameters_version"] == 1


@pytest.mark.parametrize(
    "body",
    [
        {"mechanism": {"gamma": -2}},
        {"task": "regression"},
        {"lifetime_epsilon_cap": 0},
        {"id": 3},
    ],
)
def test_bad_patch_is_422_and_changes_nothing(
    world: World, body: dict[str, object]
) -> None:
    c = world.api.client
    before = c.get(f"/v1/markets/{world.market_id}", headers=world.admin).json()
    r = c.patch(f"/v1/markets/{world.market_id}", headers=world.admin, json=body)
    assert r.status_code == 422
    assert c.get(f"/v1/markets/{world.market_id}", headers=world.admin).json() == before


def test_patch_unknown_market_is_404(world: World) -> None:
    r = world.api.client.patch(
        "/v1/markets/77", headers=world.admin, json={"name": "x"}
    )
    assert r.status_code == 404


def test_tradeoff_job_is_queued_and_readable_by_admins_only(world: World) -> None:
    c = world.api.client
    r = c.post(
        f"/v1/markets/{world.market_id}/tradeoff",
        headers=world.admin,
        json={"gammas": [0.1, 1.0]},
    )
    assert r.status_code == 202
    job_id = r.json()["job_id"]
    status = c.get(f"/v1/jobs/{job_id}", headers=world.admin).json()
    assert status["status"] == "queued"
    assert status["points"] is None
    for headers in (world.seller_a, world.buyer_a):
        assert c.get(f"/v1/jobs/{job_id}", headers=headers).status_code == 403
    assert c.get("/v1/jobs/999", headers=world.admin).status_code == 404
    with Session(c.app.state.engine) as session:  # type: ignore[attr-defined]
        job = session.get(Job, job_id)
        assert job is not None
        assert job.params == {
            "gammas": [0.1, 1.0],
            "learner": "hetero_dp_logistic",
            "params": {"fit_intercept": True},
        }


def test_tradeoff_job_reports_points_when_done(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = world.api.client
    # With two sellers, Δ_upper = 2 ln(1 + 1/(4λ)) must fit the lifetime cap of 3 for
    # an order (and so the curve, which uses the same caps) to include them.
    lam = {"mechanism": {"lam": 1.0}}
    assert (
        c.patch(
            f"/v1/markets/{world.market_id}", headers=world.admin, json=lam
        ).status_code
        == 200
    )
    for headers, x, y in (
        (world.seller_a, [1.0, 0.0], 1),
        (world.seller_b, [9.0, 0.5], -1),
    ):
        assert (
            c.post(
                f"/v1/markets/{world.market_id}/offers",
                headers=headers,
                json=offer_body(x=x, y=y),
            ).status_code
            == 201
        )
    job_id = c.post(
        f"/v1/markets/{world.market_id}/tradeoff", headers=world.admin
    ).json()["job_id"]
    seen: dict[str, object] = {}

    def fake_tradeoff(X, y, costs, **kw):  # type: ignore[no-untyped-def]
        seen.update(X=X, y=y, costs=costs, **kw)
        return [
            {"gamma": g, "validation_error": 0.5, "total_payment": 1.0 / g}
            for g in kw["gammas"]
        ]

    monkeypatch.setattr(numerics, "tradeoff", fake_tradeoff)
    _run_job(c.app.state.engine, job_id)  # type: ignore[attr-defined]
    status = c.get(f"/v1/jobs/{job_id}", headers=world.admin).json()
    assert status["status"] == "succeeded", status["error"]
    assert len(status["points"]) == len(market_jobs.DEFAULT_GAMMAS)
    assert set(status["points"][0]) == {"gamma", "validation_error", "total_payment"}
    # The computation saw the rows an order prices (the scaled offers with the
    # learner's intercept column), and the validation set as the ordered learner's
    # predict takes it (the scaled records): it scores the learner's own release.
    assert seen["X"].shape == (2, 3)  # type: ignore[attr-defined]
    assert list(seen["costs"]) == [0.3, 0.3]  # type: ignore[call-overload]
    assert seen["X_val"].shape == (2, 2)  # type: ignore[attr-defined]
    assert seen["release"].name == "hetero_dp_logistic"  # type: ignore[attr-defined]


def test_tradeoff_failure_is_recorded_with_a_reason(world: World) -> None:
    c = world.api.client
    job_id = c.post(
        f"/v1/markets/{world.market_id}/tradeoff", headers=world.admin
    ).json()["job_id"]
    _run_job(c.app.state.engine, job_id)  # type: ignore[attr-defined]
    status = c.get(f"/v1/jobs/{job_id}", headers=world.admin).json()
    assert status["status"] == "failed"
    assert "offers" in status["error"]


def test_tradeoff_needs_a_validation_set(world: World) -> None:
    c = world.api.client
    body = market_body(name="noval", validation=None)
    mid = c.post("/v1/markets", headers=world.admin, json=body).json()["id"]
    r = c.post(f"/v1/markets/{mid}/tradeoff", headers=world.admin)
    assert r.status_code == 422
    assert r.json()["field"] == "validation"
    assert c.post("/v1/markets/999/tradeoff", headers=world.admin).status_code == 404
    bad = c.post(
        f"/v1/markets/{world.market_id}/tradeoff",
        headers=world.admin,
        json={"gammas": [-1]},
    )
    assert bad.status_code == 422
    assert count_rows(world.api, Job) == 0


def _run_job(db_engine: Any, job_id: int) -> str:
    """Claim the queued job and run it to its end in this thread."""
    from market.store import Job

    assert worker.claim(db_engine, Job, owner="test", lease_seconds=60) == job_id
    return job_runner.run_claimed_job(db_engine, job_id, owner="test", lease_seconds=60)
