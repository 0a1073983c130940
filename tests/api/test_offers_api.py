"""Offers over HTTP: validation with field paths, scaling with public bounds only,
one active offer per seller, replace/withdraw, owner-only reads, mass assignment."""

import math

import pytest
from sqlmodel import Session

from market.store import Offer, Order, RunStatus
from tests.api.conftest import World, count_rows, market_body, offer_body

JSON = {"content-type": "application/json"}


def _post(world: World, body: object, headers: dict[str, str] | None = None) -> object:
    return world.api.client.post(
        f"/v1/markets/{world.market_id}/offers",
        headers=headers or world.seller_a,
        json=body,
    )


def _stored(world: World, offer_id: int) -> Offer:
    with Session(world.api.client.app.state.engine) as session:  # type: ignore[attr-defined]
        offer = session.get(Offer, offer_id)
        assert offer is not None
        return offer


def test_create_offer_returns_201_and_scales_with_public_bounds(world: World) -> None:
    r = _post(world, offer_body(x=[5.0, 0.5], y=-1, cost=0.25))
    assert r.status_code == 201
    body = r.json()
    assert body["status"] == "active"
    assert body["records"] == [{"x": [5.0, 0.5], "y": -1.0}]
    stored = _stored(world, body["id"])
    # Hand-computed: radius 5 in [0, 10] -> 0; texture 0.5 in [-1, 1] -> 0.5; / sqrt(2).
    (rec,) = stored.records_scaled
    assert rec["x"] == pytest.approx([0.0, 0.5 / math.sqrt(2)], abs=1e-15)
    assert rec["y"] == -1.0
    assert stored.records == [{"x": [5.0, 0.5], "y": -1.0}]


def test_scaling_of_a_record_does_not_depend_on_other_sellers_data(
    world: World,
) -> None:
    """Scaling uses only public bounds: adding extreme offers changes nothing."""
    first = _post(world, offer_body(x=[2.0, -0.25])).json()["id"]
    for headers, x in ((world.seller_b, [10.0, 1.0]),):
        assert _post(world, offer_body(x=x), headers=headers).status_code == 201
    again = world.api.register("seller", "c")
    third = _post(world, offer_body(x=[2.0, -0.25]), headers=again).json()["id"]
    assert _stored(world, first).records_scaled == _stored(world, third).records_scaled
    expected = [(2 * 2.0 / 10 - 1) / math.sqrt(2), (2 * 0.75 / 2 - 1) / math.sqrt(2)]
    assert _stored(world, first).records_scaled[0]["x"] == pytest.approx(
        expected, abs=1e-15
    )


def test_corner_records_have_unit_norm_at_most(world: World) -> None:
    r = _post(world, offer_body(x=[10.0, -1.0]))
    (rec,) = _stored(world, r.json()["id"]).records_scaled
    assert math.hypot(*rec["x"]) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (
            b'{"records": [{"x": [NaN, 0.0], "y": 1}], "reported_cost": 0.1}',
            "records[0].x[0]",
        ),
        (
            b'{"records": [{"x": [1.0, Infinity], "y": 1}], "reported_cost": 0.1}',
            "records[0].x[1]",
        ),
        (b'{"records": [{"x": [1.0], "y": 1}], "reported_cost": 0.1}', "records[0].x"),
        (
            b'{"records": [{"x": [1.0, 0.0, 3.0], "y": 1}], "reported_cost": 0.1}',
            "records[0].x",
        ),
        (
            b'{"records": [{"x": [1.0, 0.0], "y": 0}], "reported_cost": 0.1}',
            "records[0].y",
        ),
        (
            b'{"records": [{"x": [1.0, 0.0], "y": 2}], "reported_cost": 0.1}',
            "records[0].y",
        ),
        (
            b'{"records": [{"x": [1.0, 0.0], "y": NaN}], "reported_cost": 0.1}',
            "records[0].y",
        ),
        (
            b'{"records": [{"x": [11.0, 0.0], "y": 1}], "reported_cost": 0.1}',
            "records[0].x[0]",
        ),
        (
            b'{"records": [{"x": [1.0, -1.5], "y": 1}], "reported_cost": 0.1}',
            "records[0].x[1]",
        ),
        (
            b'{"records": [{"x": [1.0, 0.5], "y": 1}], "reported_cost": 1.5}',
            "reported_cost",
        ),
    ],
)
def test_bad_records_are_422_naming_field_and_nothing_is_stored(
    world: World, raw: bytes, field: str
) -> None:
    r = world.api.client.post(
        f"/v1/markets/{world.market_id}/offers",
        headers={**world.seller_a, **JSON},
        content=raw,
    )
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert field in r.json()["detail"]
    assert count_rows(world.api, Offer) == 0


def test_index_of_the_bad_record_is_named_in_a_multi_record_market(
    world: World,
) -> None:
    admin = world.admin
    body = market_body(
        task="regression",
        target={"low": 0.0, "high": 100.0},
        name="reg",
        validation=None,
    )
    market = world.api.client.post("/v1/markets", headers=admin, json=body).json()["id"]
    records = [{"x": [1.0, 0.0], "y": 10.0} for _ in range(5)]
    records[3] = {"x": [1.0, 7.5], "y": 10.0}
    r = world.api.client.post(
        f"/v1/markets/{market}/offers",
        headers=world.seller_a,
        json={"records": records, "reported_cost": 0.1},
    )
    assert r.status_code == 422
    assert r.json()["field"] == "records[3].x[1]"
    records[3] = {"x": [1.0, 0.0], "y": 101.0}
    r = world.api.client.post(
        f"/v1/markets/{market}/offers",
        headers=world.seller_a,
        json={"records": records, "reported_cost": 0.1},
    )
    assert r.json()["field"] == "records[3].y"


def test_classification_offer_takes_one_record(world: World) -> None:
    body = offer_body()
    body["records"] = [{"x": [1.0, 0.0], "y": 1}] * 2  # type: ignore[index]
    r = _post(world, body)
    assert r.status_code == 422
    assert r.json()["field"] == "records"


def test_clip_market_clips_to_bounds_instead_of_rejecting(world: World) -> None:
    body = market_body(out_of_bounds="clip", name="clipped")
    market = world.api.client.post(
        "/v1/markets", headers=world.admin, json=body
    ).json()["id"]
    r = world.api.client.post(
        f"/v1/markets/{market}/offers",
        headers=world.seller_a,
        json=offer_body(x=[50.0, -9.0]),
    )
    assert r.status_code == 201
    (rec,) = _stored(world, r.json()["id"]).records_scaled
    assert rec["x"] == pytest.approx([1 / math.sqrt(2), -1 / math.sqrt(2)], abs=1e-15)


def test_second_active_offer_is_409(world: World) -> None:
    assert _post(world, offer_body()).status_code == 201
    r = _post(world, offer_body(x=[1.0, 0.0]))
    assert r.status_code == 409
    assert count_rows(world.api, Offer) == 1
    # Another seller is not affected.
    assert _post(world, offer_body(), headers=world.seller_b).status_code == 201


@pytest.mark.parametrize(
    "extra",
    [
        {"id": 99},
        {"seller_id": 1},
        {"status": "withdrawn"},
        {"records_scaled": []},
        {"market_id": 2},
        {"replaces_id": 1},
        {"created_at": "2020-01-01T00:00:00Z"},
    ],
)
def test_server_owned_fields_are_rejected_and_nothing_stored(
    world: World, extra: dict[str, object]
) -> None:
    r = _post(world, {**offer_body(), **extra})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", next(iter(extra))]
    assert count_rows(world.api, Offer) == 0


def test_offer_routes_need_a_seller(world: World) -> None:
    for headers in (world.buyer_a, world.admin):
        assert _post(world, offer_body(), headers=headers).status_code == 403
    assert (
        world.api.client.post(
            f"/v1/markets/{world.market_id}/offers", json=offer_body()
        ).status_code
        == 401
    )
    assert _post(world, offer_body()).status_code == 201
    assert (
        world.api.client.post(
            "/v1/markets/999/offers", headers=world.seller_b, json=offer_body()
        ).status_code
        == 404
    )


def test_only_the_owner_reads_an_offer(world: World) -> None:
    offer_id = _post(world, offer_body()).json()["id"]
    c = world.api.client
    assert c.get(f"/v1/offers/{offer_id}", headers=world.seller_a).status_code == 200
    other = c.get(f"/v1/offers/{offer_id}", headers=world.seller_b)
    missing = c.get("/v1/offers/12345", headers=world.seller_b)
    assert other.status_code == missing.status_code == 404
    assert other.json()["detail"].replace(str(offer_id), "N") == missing.json()[
        "detail"
    ].replace("12345", "N")
    assert c.get(f"/v1/offers/{offer_id}", headers=world.buyer_a).status_code == 403
    assert c.get(f"/v1/offers/{offer_id}", headers=world.admin).status_code == 403
    assert c.get(f"/v1/offers/{offer_id}").status_code == 401
    assert (
        c.put(
            f"/v1/offers/{offer_id}", headers=world.seller_b, json=offer_body()
        ).status_code
        == 404
    )
    assert c.delete(f"/v1/offers/{offer_id}", headers=world.seller_b).status_code == 404
    assert _stored(world, offer_id).status == "active"


def test_put_replaces_and_links_back(world: World) -> None:
    c = world.api.client
    old = _post(world, offer_body(x=[1.0, 0.0], cost=0.5)).json()["id"]
    r = c.put(
        f"/v1/offers/{old}",
        headers=world.seller_a,
        json=offer_body(x=[2.0, 0.0], cost=0.1),
    )
    assert r.status_code == 200
    new = r.json()
    assert new["id"] != old
    assert new["replaces_id"] == old
    assert new["records"] == [{"x": [2.0, 0.0], "y": 1.0}]
    assert (
        c.get(f"/v1/offers/{old}", headers=world.seller_a).json()["status"]
        == "replaced"
    )
    # The replaced offer cannot be replaced again; the new one can.
    assert (
        c.put(
            f"/v1/offers/{old}", headers=world.seller_a, json=offer_body()
        ).status_code
        == 409
    )
    assert (
        c.put(
            f"/v1/offers/{new['id']}", headers=world.seller_a, json=offer_body()
        ).status_code
        == 200
    )


def test_put_with_bad_records_changes_nothing(world: World) -> None:
    old = _post(world, offer_body()).json()["id"]
    r = world.api.client.put(
        f"/v1/offers/{old}", headers=world.seller_a, json=offer_body(x=[1.0, 3.0])
    )
    assert r.status_code == 422
    assert r.json()["field"] == "records[0].x[1]"
    assert _stored(world, old).status == "active"
    assert count_rows(world.api, Offer) == 1


def _running_order(world: World, *, offer_ids: list[int] | None) -> None:
    theirs = _post(world, offer_body(x=[8.0, -0.5]), headers=world.seller_b)
    assert theirs.status_code in (201, 409), theirs.text  # an order needs two offers
    r = world.api.client.post(
        f"/v1/markets/{world.market_id}/orders",
        headers=world.buyer_a,
        json={"learner": "hetero_dp_logistic", "budget": 5.0},
    )
    with Session(world.api.client.app.state.engine) as session:  # type: ignore[attr-defined]
        order = session.get(Order, r.json()["id"])
        assert order is not None
        order.status = RunStatus.RUNNING
        order.offer_ids = offer_ids
        session.add(order)
        session.commit()


@pytest.mark.parametrize("snapshot", ["mine", "unknown"])
def test_put_is_409_while_a_running_order_uses_the_offer(
    world: World, snapshot: str
) -> None:
    mine = _post(world, offer_body()).json()["id"]
    _running_order(world, offer_ids=[mine] if snapshot == "mine" else None)
    r = world.api.client.put(
        f"/v1/offers/{mine}", headers=world.seller_a, json=offer_body()
    )
    assert r.status_code == 409
    assert _stored(world, mine).status == "active"


def test_put_is_allowed_when_running_orders_use_other_offers(world: World) -> None:
    mine = _post(world, offer_body()).json()["id"]
    theirs = _post(world, offer_body(), headers=world.seller_b).json()["id"]
    _running_order(world, offer_ids=[theirs])
    r = world.api.client.put(
        f"/v1/offers/{mine}", headers=world.seller_a, json=offer_body()
    )
    assert r.status_code == 200


def test_delete_withdraws_once_and_allows_a_new_offer(world: World) -> None:
    c = world.api.client
    offer_id = _post(world, offer_body()).json()["id"]
    r = c.delete(f"/v1/offers/{offer_id}", headers=world.seller_a)
    assert r.status_code == 204
    assert r.content == b""
    assert c.delete(f"/v1/offers/{offer_id}", headers=world.seller_a).status_code == 409
    assert (
        c.get(f"/v1/offers/{offer_id}", headers=world.seller_a).json()["status"]
        == "withdrawn"
    )
    assert _post(world, offer_body()).status_code == 201
    assert _stored(world, offer_id).records == [{"x": [5.0, 0.5], "y": 1.0}]


def test_oversize_offer_upload_is_413_and_nothing_stored(make_api) -> None:  # type: ignore[no-untyped-def]
    small = make_api(max_request_bytes=2048)
    admin = small.admin()
    mid = small.client.post("/v1/markets", headers=admin, json=market_body()).json()[
        "id"
    ]
    seller = small.register("seller")
    records = [{"x": [1.0, 0.0], "y": 1}] * 200
    big = {"records": records, "reported_cost": 0.1}
    r = small.client.post(f"/v1/markets/{mid}/offers", headers=seller, json=big)
    assert r.status_code == 413

    def chunks():  # type: ignore[no-untyped-def]
        payload = (
            '{"records": [' + ", ".join(['{"x": [1.0, 0.0], "y": 1}'] * 200)
        ).encode()
        for i in range(0, len(payload), 100):
            yield payload[i : i + 100]
        yield b'], "reported_cost": 0.1}'

    r = small.client.post(
        f"/v1/markets/{mid}/offers", headers={**seller, **JSON}, content=chunks()
    )
    assert r.status_code == 413
    assert count_rows(small, Offer) == 0
