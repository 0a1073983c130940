"""BOLA/BFLA matrix (T-API-2): every endpoint × identity × ownership against an
expected-status table. Owners' state-changing calls run last, in a fixed order."""

from typing import Any

import pytest

from tests.api.conftest import World, offer_body

IDS = ("nobody", "admin", "seller_a", "seller_b", "buyer_a", "buyer_b")
ORDER = {"learner": "hetero_dp_logistic", "budget": 5.0}


def _row(*statuses: int | None) -> dict[str, int | None]:
    assert len(statuses) == len(IDS)
    return dict(zip(IDS, statuses, strict=True))


# (method, path template, body, expected statuses for IDS). {M} market, {O} seller A's
# offer, {R} buyer A's order, {J} a job; non-owners must get 404 on others' objects.
MATRIX: list[tuple[str, str, Any, dict[str, int | None]]] = [
    ("GET", "/v1/me", None, _row(401, 200, 200, 200, 200, 200)),
    ("GET", "/v1/markets", None, _row(401, 200, 200, 200, 200, 200)),
    ("GET", "/v1/markets/{M}", None, _row(401, 200, 200, 200, 200, 200)),
    ("PATCH", "/v1/markets/{M}", {"name": "x"}, _row(401, 200, 403, 403, 403, 403)),
    ("POST", "/v1/markets/{M}/tradeoff", None, _row(401, 202, 403, 403, 403, 403)),
    ("GET", "/v1/jobs/{J}", None, _row(401, 200, 403, 403, 403, 403)),
    ("GET", "/v1/offers/{O}", None, _row(401, 403, 200, 404, 403, 403)),
    ("PUT", "/v1/offers/{O}", offer_body(), _row(401, 403, None, 404, 403, 403)),
    ("DELETE", "/v1/offers/{O}", None, _row(401, 403, None, 404, 403, 403)),
    ("POST", "/v1/markets/{M}/orders", ORDER, _row(401, 403, 403, 403, 202, 202)),
    ("GET", "/v1/orders/{R}", None, _row(401, 200, 403, 403, 200, 404)),
    ("GET", "/v1/orders/{R}/model", None, _row(401, 403, 403, 403, 409, 404)),
    ("GET", "/v1/orders/{R}/model.onnx", None, _row(401, 403, 403, 403, 409, 404)),
    ("GET", "/v1/orders/{R}/allocations", None, _row(401, 200, 403, 403, 403, 403)),
    ("GET", "/v1/sellers/me/earnings", None, _row(401, 403, 200, 200, 403, 403)),
    ("GET", "/v1/sellers/me/privacy", None, _row(401, 403, 200, 200, 403, 403)),
]


def _objects(world: World) -> dict[str, int]:
    c = world.api.client
    offer = c.post(
        f"/v1/markets/{world.market_id}/offers",
        headers=world.seller_a,
        json=offer_body(),
    ).json()["id"]
    # a second seller's offer: an order needs two
    r = c.post(
        f"/v1/markets/{world.market_id}/offers",
        headers=world.seller_b,
        json=offer_body(x=[8.0, -0.5], y=-1),
    )
    assert r.status_code == 201, r.text
    order = c.post(
        f"/v1/markets/{world.market_id}/orders", headers=world.buyer_a, json=ORDER
    ).json()["id"]
    job = c.post(f"/v1/markets/{world.market_id}/tradeoff", headers=world.admin).json()[
        "job_id"
    ]
    return {"M": world.market_id, "O": offer, "R": order, "J": job}


def test_authorization_matrix(world: World) -> None:
    objects = _objects(world)
    headers = {
        "nobody": {},
        "admin": world.admin,
        "seller_a": world.seller_a,
        "seller_b": world.seller_b,
        "buyer_a": world.buyer_a,
        "buyer_b": world.buyer_b,
    }
    mismatches = []
    cells = 0
    for method, template, body, expected in MATRIX:
        path = template.format(**objects)
        for who in IDS:
            if expected[who] is None:
                continue  # the owner's state change, checked below
            cells += 1
            r = world.api.client.request(method, path, headers=headers[who], json=body)
            if r.status_code != expected[who]:
                mismatches.append((method, template, who, expected[who], r.status_code))
    assert mismatches == []
    assert cells == len(MATRIX) * len(IDS) - 2
    # Owners last: replace, then withdraw the replacement.
    c = world.api.client
    new = c.put(f"/v1/offers/{objects['O']}", headers=world.seller_a, json=offer_body())
    assert new.status_code == 200
    assert (
        c.delete(f"/v1/offers/{new.json()['id']}", headers=world.seller_a).status_code
        == 204
    )


@pytest.mark.parametrize(
    "path", ["/v1/offers/{}", "/v1/orders/{}", "/v1/orders/{}/model"]
)
def test_other_accounts_objects_look_exactly_like_missing_ones(
    world: World, path: str
) -> None:
    objects = _objects(world)
    own = objects["O"] if "offers" in path else objects["R"]
    stranger = world.seller_b if "offers" in path else world.buyer_b
    existing = world.api.client.get(path.format(own), headers=stranger)
    missing = world.api.client.get(path.format(99_999), headers=stranger)
    assert existing.status_code == missing.status_code == 404
    assert existing.json()["detail"].replace(str(own), "#") == missing.json()[
        "detail"
    ].replace("99999", "#")
    assert existing.headers.keys() == missing.headers.keys()
