"""``GET /v1/learners?market_id=``: only the learners the market can take, and every
one of them accepts an order with its schema's defaults (what the console sends)."""

from typing import Any

from tests.api.conftest import Api


def _market(api: Api, admin: dict[str, str], **body: Any) -> int:
    base: dict[str, Any] = {
        "name": "m",
        "task": "classification",
        "features": [
            {"name": "a", "low": -1, "high": 1},
            {"name": "b", "low": 0, "high": 1},
        ],
        "cost_prior": {"family": "uniform", "params": {"low": 0.0, "high": 1.0}},
        "mechanism": {"gamma": 0.01},
    }
    r = api.client.post("/v1/markets", headers=admin, json=base | body)
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _names(api: Api, market_id: int | None = None) -> set[str]:
    q = "" if market_id is None else f"?market_id={market_id}"
    r = api.client.get(f"/v1/learners{q}")
    assert r.status_code == 200, r.text
    return {item["name"] for item in r.json()["items"]}


def test_each_market_lists_only_learners_it_takes(api: Api) -> None:
    admin = api.admin()
    everything = _names(api)
    assert len(everything) >= 5
    cls = _market(api, admin)
    miss = _market(
        api,
        admin,
        features=[{"name": "a", "low": -1, "high": 1, "missable": True}],
    )
    reg = _market(api, admin, task="regression", target={"low": -5, "high": 5})
    qua = _market(api, admin, task="quantile", target={"low": -5, "high": 5})
    vert = _market(
        api,
        admin,
        partition="vertical",
        record_key="id",
        parties=[{"name": "p0", "features": ["a"]}, {"name": "p1", "features": ["b"]}],
    )
    listed = {m: _names(api, m) for m in (cls, miss, reg, qua, vert)}
    # Every learner shown is one the market accepts at placement (same rules), and
    # every learner not shown is refused there with 422 naming `learner`.
    buyer = api.register("buyer")
    for mid, names in listed.items():
        assert names, f"market {mid} lists no learner"
        for name in everything - names:
            r = api.client.post(
                f"/v1/markets/{mid}/orders",
                headers=buyer,
                json={"learner": name, "budget": 10, "gamma": 0.01},
            )
            assert r.status_code == 422, (mid, name, r.text)
            assert "learner" in r.text, r.text
    assert "secure_vertical_logistic" not in listed[cls]
    assert listed[vert] == {"secure_vertical_logistic"}
    assert "hetero_dp_logistic" not in listed[miss]
    assert "ldp_missing_logistic" in listed[miss]
    assert "uldp_sparse_linear" in listed[reg]
    assert "onebit_quantile" in listed[qua]
    assert "hetero_dp_logistic" not in listed[qua]
    # The union covers the catalogue: every learner can be ordered somewhere.
    assert set().union(*listed.values()) == everything


def test_unknown_market_is_404(api: Api) -> None:
    r = api.client.get("/v1/learners?market_id=999")
    assert r.status_code == 404
    r = api.client.get("/v1/learners?market_id=0")
    assert r.status_code == 422


def test_admins_list_a_markets_offers_with_their_sellers(api: Api) -> None:
    admin = api.admin()
    mid = _market(api, admin)
    other = _market(api, admin, name="other")
    rows = [
        {
            "seller_name": f"s{j}",
            "records": [{"x": [0.1, 0.2], "y": 1}],
            "reported_cost": 0.5,
        }
        for j in range(3)
    ]
    r = api.client.post(
        f"/v1/markets/{mid}/offers:bulk", headers=admin, json={"offers": rows}
    )
    assert r.status_code == 201, r.text
    seller = {"Authorization": f"Bearer {r.json()['items'][0]['api_key']}"}
    offer_id = r.json()["items"][0]["offer_id"]
    assert (
        api.client.delete(f"/v1/offers/{offer_id}", headers=seller).status_code == 204
    )
    page = api.client.get(f"/v1/markets/{mid}/offers", headers=admin).json()
    assert page["total"] == 3
    assert {i["seller_name"] for i in page["items"]} == {"s0", "s1", "s2"}
    assert all("records" not in i for i in page["items"])
    active = api.client.get(
        f"/v1/markets/{mid}/offers?status=active", headers=admin
    ).json()
    assert active["total"] == 2
    assert offer_id not in {i["id"] for i in active["items"]}
    assert (
        api.client.get(f"/v1/markets/{other}/offers", headers=admin).json()["total"]
        == 0
    )
    # Only admins: a seller's key is refused (reported costs are per-seller figures).
    assert (
        api.client.get(f"/v1/markets/{mid}/offers", headers=seller).status_code == 403
    )
    assert api.client.get("/v1/markets/999/offers", headers=admin).status_code == 404
