"""``POST /v1/markets/{id}/offers:bulk`` (issue 16): many sellers' offers in one
request, validated as a whole (one bad row → 422 naming its index, nothing stored),
the same record rules as the single-offer endpoint, admin only."""

import json
from typing import Any

import httpx
import pytest

from market.schemas import BulkOfferIn, OfferCreate
from market.store import Account, Offer
from tests.api.conftest import World, count_rows, offer_body


def _bulk(
    world: World, rows: list[dict[str, Any]], headers: dict[str, str] | None = None
) -> httpx.Response:
    return world.api.client.post(
        f"/v1/markets/{world.market_id}/offers:bulk",
        headers=world.admin if headers is None else headers,
        json={"offers": rows},
    )


def _row(i: int, **overrides: Any) -> dict[str, Any]:
    """A valid one-record row creating seller ``bulk-<i>``."""
    x = [float(i % 10), (i % 7) / 7 - 0.5]
    row: dict[str, Any] = offer_body(x=x, y=1 if i % 2 else -1, cost=0.01 * (i % 90))
    row["seller_name"] = f"bulk-{i}"
    row.update(overrides)
    return row


def _seller_id(world: World, headers: dict[str, str]) -> int:
    return int(world.api.client.get("/v1/me", headers=headers).json()["id"])


def _counts(world: World) -> tuple[int, int]:
    return count_rows(world.api, Offer), count_rows(world.api, Account)


def test_bulk_creates_new_and_existing_sellers_offers(world: World) -> None:
    existing = _seller_id(world, world.seller_a)
    rows = [_row(i) for i in range(5)]
    rows[2] = offer_body(x=[3.0, 0.25], cost=0.2) | {"seller_id": existing}
    before_offers, before_accounts = _counts(world)
    r = _bulk(world, rows)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["created"] == 5
    assert body["sellers_created"] == 4
    assert [item["index"] for item in body["items"]] == list(range(5))
    assert body["items"][2]["seller_id"] == existing
    assert body["items"][2]["api_key"] is None
    assert _counts(world) == (before_offers + 5, before_accounts + 4)
    # Each new seller's key works once handed over, and reads exactly its own offer.
    client = world.api.client
    for i in (0, 4):
        item = body["items"][i]
        headers = {"Authorization": f"Bearer {item['api_key']}"}
        me = client.get("/v1/me", headers=headers).json()
        assert me == {"id": item["seller_id"], "name": f"bulk-{i}", "role": "seller"}
        offer = client.get(f"/v1/offers/{item['offer_id']}", headers=headers).json()
        assert offer["records"] == [
            {"x": rows[i]["records"][0]["x"], "y": float(rows[i]["records"][0]["y"])}
        ]
        assert offer["reported_cost"] == rows[i]["reported_cost"]
    # The existing seller sees the offer made on its behalf as its active offer.
    mine = client.get(
        f"/v1/offers/{body['items'][2]['offer_id']}", headers=world.seller_a
    )
    assert mine.status_code == 200
    assert mine.json()["status"] == "active"
    # ... and a second single POST is then a conflict (one active offer per market).
    single = client.post(
        f"/v1/markets/{world.market_id}/offers",
        headers=world.seller_a,
        json=offer_body(),
    )
    assert single.status_code == 409


def test_bulk_offers_are_scaled_like_single_offers(world: World) -> None:
    """Same record, same stored scaled form, whichever endpoint stored it."""
    from sqlmodel import Session

    record = offer_body(x=[2.5, -0.75], y=-1, cost=0.4)
    single = world.api.client.post(
        f"/v1/markets/{world.market_id}/offers", headers=world.seller_b, json=record
    ).json()["id"]
    bulk = _bulk(world, [record | {"seller_name": "z"}]).json()["items"][0]["offer_id"]
    with Session(world.api.client.app.state.engine) as session:  # type: ignore[attr-defined]
        a, b = session.get(Offer, single), session.get(Offer, bulk)
        assert a is not None
        assert b is not None
        assert a.records_scaled == b.records_scaled
        assert a.records == b.records


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"records": [{"x": [11.0, 0.0], "y": 1}]}, "records[0].x[0]"),  # out of bounds
        ({"records": [{"x": [1.0, 0.0, 3.0], "y": 1}]}, "records[0].x"),  # length
        ({"records": [{"x": [1.0, None], "y": 1}]}, "records[0].x[1]"),  # not missable
        ({"records": [{"x": [1.0, 0.0], "y": 0}]}, "records[0].y"),  # label
        ({"reported_cost": 2.0}, "reported_cost"),  # outside the prior's support
        (  # one record per seller in a classification market
            {"records": [{"x": [1.0, 0.0], "y": 1}, {"x": [2.0, 0.0], "y": 1}]},
            "records",
        ),
    ],
)
def test_one_bad_row_is_422_naming_its_index_and_nothing_is_stored(
    world: World, bad: dict[str, Any], field: str
) -> None:
    rows = [_row(i) for i in range(8)]
    rows[3] |= bad
    before = _counts(world)
    r = _bulk(world, rows)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == f"offers[3].{field}"
    assert _counts(world) == before
    # The single-offer endpoint refuses the same body with the same field.
    single = {k: v for k, v in rows[3].items() if k != "seller_name"}
    one = world.api.client.post(
        f"/v1/markets/{world.market_id}/offers", headers=world.seller_a, json=single
    )
    assert one.status_code == 422
    assert one.json()["field"] == field


def test_the_first_of_several_bad_rows_is_named(world: World) -> None:
    rows = [_row(i) for i in range(10)]
    rows[7]["records"][0]["x"][1] = 5.0
    rows[4]["records"][0]["y"] = 3
    r = _bulk(world, rows)
    assert r.status_code == 422
    assert r.json()["field"] == "offers[4].records[0].y"


@pytest.mark.parametrize(
    ("raw_row", "loc_tail"),
    [
        (
            '{"records": [{"x": [1.0, "a"], "y": 1}], "reported_cost": 0.1, "seller_name": "q"}',
            ["records", 0, "x", 1],
        ),
        ('{"records": [], "reported_cost": 0.1, "seller_name": "q"}', ["records"]),
        (
            '{"records": [{"x": [1.0, 0.0], "y": 1}], "reported_cost": -1, "seller_name": "q"}',
            ["reported_cost"],
        ),
        (
            '{"records": [{"x": [1.0, 0.0], "y": 1}], "reported_cost": 0.1, "seller_name": "q", "status": "x"}',
            ["status"],
        ),
        ('{"records": [{"x": [1.0, 0.0], "y": 1}], "reported_cost": 0.1}', []),
        (
            '{"records": [{"x": [1.0, 0.0], "y": 1}], "reported_cost": 0.1, "seller_name": "q", "seller_id": 1}',
            [],
        ),
        (
            '{"records": [{"x": [1.0, 0.0], "y": 1}], "reported_cost": 0.1, "seller_name": ""}',
            ["seller_name"],
        ),
    ],
)
def test_schema_errors_name_the_row(
    world: World, raw_row: str, loc_tail: list[Any]
) -> None:
    good = json.dumps(_row(0))
    raw = f'{{"offers": [{good}, {good.replace("bulk-0", "bulk-1")}, {raw_row}]}}'
    before = _counts(world)
    r = world.api.client.post(
        f"/v1/markets/{world.market_id}/offers:bulk",
        headers=world.admin | {"content-type": "application/json"},
        content=raw.encode(),
    )
    assert r.status_code == 422, r.text
    # a record is a union (plain or keyed for vertical markets): drop the union tag
    tags = {"RecordIn", "KeyedRecordIn"}
    locs = [[p for p in e["loc"] if p not in tags] for e in r.json()["detail"]]
    assert any(
        loc[:3] == ["body", "offers", 2] and loc[3 : 3 + len(loc_tail)] == loc_tail
        for loc in locs
    ), locs
    assert _counts(world) == before


def test_bulk_rows_are_single_offers_plus_a_seller() -> None:
    """The bulk row *is* the single-offer schema (so it inherits its strictness)."""
    assert issubclass(BulkOfferIn, OfferCreate)
    extra = set(BulkOfferIn.model_fields) - set(OfferCreate.model_fields)
    assert extra == {"seller_id", "seller_name"}


def test_seller_with_an_active_offer_is_409_and_nothing_is_stored(world: World) -> None:
    client = world.api.client
    r = client.post(
        f"/v1/markets/{world.market_id}/offers",
        headers=world.seller_a,
        json=offer_body(),
    )
    assert r.status_code == 201
    rows = [_row(i) for i in range(4)]
    rows[2] = offer_body() | {"seller_id": _seller_id(world, world.seller_a)}
    before = _counts(world)
    r = _bulk(world, rows)
    assert r.status_code == 409
    assert r.json()["detail"].startswith("offers[2].seller_id")
    assert _counts(world) == before


def test_repeated_unknown_or_non_seller_ids_are_422(world: World) -> None:
    a = _seller_id(world, world.seller_a)
    buyer = _seller_id(world, world.buyer_a)
    before = _counts(world)
    cases = [
        (
            [offer_body() | {"seller_id": a}, _row(1), offer_body() | {"seller_id": a}],
            "offers[2].seller_id",
        ),
        ([_row(0), offer_body() | {"seller_id": 999_999}], "offers[1].seller_id"),
        ([offer_body() | {"seller_id": buyer}], "offers[0].seller_id"),
    ]
    for rows, field in cases:
        r = _bulk(world, rows)
        assert r.status_code == 422, r.text
        assert r.json()["field"] == field
    assert _counts(world) == before


def test_only_admins_may_ingest_in_bulk(world: World) -> None:
    rows = [_row(0)]
    for headers in (world.seller_a, world.buyer_a):
        assert _bulk(world, rows, headers=headers).status_code == 403
    assert _bulk(world, rows, headers={}).status_code == 401
    r = world.api.client.post(
        "/v1/markets/999/offers:bulk", headers=world.admin, json={"offers": rows}
    )
    assert r.status_code == 404


def test_bulk_has_its_own_body_limit(make_api) -> None:  # type: ignore[no-untyped-def]
    from tests.api.conftest import build_world

    world = build_world(
        make_api(max_request_bytes=2_000, max_bulk_request_bytes=40_000)
    )
    rows = [_row(i) for i in range(100)]  # ~10 kB: over the general limit
    assert len(json.dumps({"offers": rows})) > 2_000
    assert _bulk(world, rows).status_code == 201
    big = [_row(i) for i in range(100, 600)]  # ~50 kB: over the bulk limit
    r = _bulk(world, big)
    assert r.status_code == 413
    single = offer_body() | {"pad": "x" * 3000}
    r = world.api.client.post(
        f"/v1/markets/{world.market_id}/offers", headers=world.seller_a, json=single
    )
    assert r.status_code == 413


def test_bulk_offers_take_part_in_orders(world: World) -> None:
    """Bulk-stored offers are ordinary active offers: the pipeline's loader sees them."""
    from sqlmodel import Session

    from market import offers as offers_module

    r = _bulk(world, [_row(i) for i in range(6)])
    assert r.status_code == 201
    with Session(world.api.client.app.state.engine) as session:  # type: ignore[attr-defined]
        active = offers_module.list_active_offers(session, market_id=world.market_id)
    assert {o.id for o in active} == {item["offer_id"] for item in r.json()["items"]}
