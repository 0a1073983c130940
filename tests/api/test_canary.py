"""Raw-data non-disclosure (T-DP-7, scenario size): high-entropy canary values in a
seller's records never appear in any response body, header or log line seen by another
identity, nor in the OpenAPI document; the owner's own read is the positive control."""

import logging
import secrets

import pytest

from tests.api.conftest import World, offer_body


def _canary() -> tuple[list[float], list[str]]:
    # Random digits in the bounds [0, 10] and [-1, 1]; 14 significant digits each.
    a = 1 + secrets.randbelow(10**13) / 10**13 * 8
    b = -0.9 + secrets.randbelow(10**13) / 10**13 * 1.8
    return [a, b], [repr(a)[:12], repr(b)[:12]]


def test_canaries_never_reach_other_identities(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    c, mid = world.api.client, world.market_id
    values, needles = _canary()
    offer = c.post(
        f"/v1/markets/{mid}/offers", headers=world.seller_a, json=offer_body(x=values)
    )
    assert offer.status_code == 201
    oid = offer.json()["id"]
    # Positive control: the owner sees its records, so the scan below can find them.
    own = c.get(f"/v1/offers/{oid}", headers=world.seller_a).text
    assert all(n in own for n in needles)

    c.post(
        f"/v1/markets/{mid}/offers",
        headers=world.seller_b,
        json=offer_body(x=[1.0, 0.0]),
    )
    order = c.post(
        f"/v1/markets/{mid}/orders",
        headers=world.buyer_a,
        json={"learner": "hetero_dp_logistic", "budget": 5.0},
    ).json()["id"]
    job = c.post(f"/v1/markets/{mid}/tradeoff", headers=world.admin).json()["job_id"]
    requests = [
        ("GET", "/openapi.json", None),
        ("GET", "/v1/markets", None),
        ("GET", f"/v1/markets/{mid}", None),
        ("GET", f"/v1/offers/{oid}", None),
        ("PUT", f"/v1/offers/{oid}", offer_body(x=[1.0, 9.0])),
        ("PUT", f"/v1/offers/{oid}", {"records": "nope"}),
        ("DELETE", f"/v1/offers/{oid}", None),
        ("GET", f"/v1/orders/{order}", None),
        ("GET", f"/v1/orders/{order}/model", None),
        ("GET", f"/v1/orders/{order}/allocations", None),
        ("GET", f"/v1/jobs/{job}", None),
        ("GET", "/v1/sellers/me/earnings", None),
        ("GET", "/v1/sellers/me/privacy", None),
        ("PATCH", f"/v1/markets/{mid}", {"mechanism": {"gamma": 2.0}}),
        ("GET", f"/v1/markets/{mid}", None),
    ]
    scanned = 0
    for who in (world.seller_b, world.buyer_a, world.buyer_b, world.admin, {}):
        for method, path, body in requests:
            r = c.request(method, path, headers=who, json=body)
            assert r.status_code < 500
            text = r.text + str(dict(r.headers))
            scanned += 1
            for needle in needles:
                assert needle not in text, (method, path, r.status_code)
    assert scanned == 5 * len(requests)
    for record in caplog.records:
        for needle in needles:
            assert needle not in record.getMessage()
