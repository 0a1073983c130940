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
