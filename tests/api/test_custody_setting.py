"""Custody as a market setting: ``platform`` (default, sellers upload records) or
``seller`` (strict mode only; offers carry a public ``n_records`` and no records)."""

from typing import Any

import pytest

from market.store import Market, Offer
from tests.api.conftest import Api, count_rows, market_body


def custody_market(**overrides: object) -> dict[str, object]:
    body = market_body(custody="seller")
    body.update(overrides)
    return body


def seller_offer(n: int = 1, cost: float = 0.3, **extra: Any) -> dict[str, Any]:
    return {"n_records": n, "reported_cost": cost, **extra}


def _market(api: Api, admin: dict[str, str], body: dict[str, object]) -> int:
    r = api.client.post("/v1/markets", headers=admin, json=body)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def test_custody_defaults_to_platform_and_is_shown(api: Api) -> None:
    admin = api.admin()
    r = api.client.post("/v1/markets", headers=admin, json=market_body())
    assert r.status_code == 201, r.text
    assert r.json()["custody"] == "platform"
    r = api.client.post("/v1/markets", headers=admin, json=custody_market())
    assert r.status_code == 201, r.text
    mid = r.json()["id"]
    assert r.json()["custody"] == "seller"
    assert r.json()["mechanism"]["mode"] == "strict"
    seller = api.register("seller")
    shown = api.client.get(f"/v1/markets/{mid}", headers=seller).json()
    assert shown["custody"] == "seller"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"mechanism": {"lam": 1.0, "mode": "default"}}, "mechanism.mode"),
        ({"custody": "nobody"}, "custody"),
    ],
)
def test_seller_custody_needs_strict_mode(
    api: Api, overrides: dict[str, object], field: str
) -> None:
    admin = api.admin()
    r = api.client.post("/v1/markets", headers=admin, json=custody_market(**overrides))
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert count_rows(api, Market) == 0


def test_seller_custody_market_cannot_be_patched_out_of_strict_mode(api: Api) -> None:
    admin = api.admin()
    mid = _market(api, admin, custody_market())
    r = api.client.patch(
        f"/v1/markets/{mid}", headers=admin, json={"mechanism": {"mode": "default"}}
    )
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "mechanism.mode"
    r = api.client.get(f"/v1/markets/{mid}", headers=admin)
    assert r.json()["mechanism"]["mode"] == "strict"
    assert r.json()["parameters_version"] == 1


def test_seller_custody_offer_declares_a_count_and_holds_no_records(api: Api) -> None:
    admin = api.admin()
    mid = _market(api, admin, custody_market())
    seller = api.register("seller")
    r = api.client.post(
        f"/v1/markets/{mid}/offers", headers=seller, json=seller_offer(max_epsilon=2.0)
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["n_records"] == 1
    assert body["records"] == []
    assert body["max_epsilon"] == 2.0
    mine = api.client.get("/v1/sellers/me/offers", headers=seller).json()["items"]
    assert [(o["id"], o["n_records"]) for o in mine] == [(body["id"], 1)]


ONE_RECORD = [{"x": [5.0, 0.5], "y": 1}]


@pytest.mark.parametrize(
    ("offer", "field"),
    [
        ({"records": ONE_RECORD, "reported_cost": 0.3}, "records"),
        ({"records": ONE_RECORD, "n_records": 1, "reported_cost": 0.3}, "records"),
        ({"reported_cost": 0.3}, "n_records"),
        # a classification market prices one record per seller
        ({"n_records": 2, "reported_cost": 0.3}, "n_records"),
        ({"n_records": 1, "reported_cost": -1.0}, "reported_cost"),
    ],
)
def test_bad_seller_custody_offers_are_422_and_nothing_is_stored(
    api: Api, offer: dict[str, Any], field: str
) -> None:
    admin = api.admin()
    mid = _market(api, admin, custody_market())
    seller = api.register("seller")
    r = api.client.post(f"/v1/markets/{mid}/offers", headers=seller, json=offer)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.json()
    assert count_rows(api, Offer) == 0


def test_platform_custody_offers_still_need_records(api: Api) -> None:
    admin = api.admin()
    mid = _market(api, admin, market_body())
    seller = api.register("seller")
    for offer, field in (
        (seller_offer(), "records"),
        ({"records": ONE_RECORD, "n_records": 1, "reported_cost": 0.3}, "n_records"),
    ):
        r = api.client.post(f"/v1/markets/{mid}/offers", headers=seller, json=offer)
        assert r.status_code == 422, r.text
        assert r.json()["field"] == field
    assert count_rows(api, Offer) == 0


def test_bulk_offers_follow_the_custody_rules(api: Api) -> None:
    admin = api.admin()
    mid = _market(api, admin, custody_market())
    rows = [seller_offer(seller_name=f"s{i}") for i in range(3)]
    bad = [*rows, {**seller_offer(seller_name="s9"), "records": ONE_RECORD}]
    url = f"/v1/markets/{mid}/offers:bulk"
    r = api.client.post(url, headers=admin, json={"offers": bad})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "offers[3].records"
    assert count_rows(api, Offer) == 0
    r = api.client.post(url, headers=admin, json={"offers": rows})
    assert r.status_code == 201, r.text
    assert count_rows(api, Offer) == 3
