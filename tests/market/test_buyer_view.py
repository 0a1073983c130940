"""What a buyer sees of an order (issue 14, item 6): only what the market's privacy
mode covers, every field documented; new markets protect by default (``strict``)."""

from typing import Any

from market.pipeline.results import SUMMARY_FIELDS
from tests.market.pipeline_helpers import market_body, stand_in_payments
from tests.market.test_orders_run import Env, env

__all__ = ["env", "stand_in_payments"]

BUYER_GUIDE_HEADING = "## What a buyer sees of an order"


def _new_market(env: Env, **mechanism: Any) -> int:
    body = market_body(rng=env.rng)
    body["mechanism"] = mechanism  # nothing else: the defaults of a new market
    r = env.client.post("/v1/markets", headers=env.admin, json=body)
    assert r.status_code == 201, r.text
    mid = int(r.json()["id"])
    from tests.market.pipeline_helpers import add_sellers

    env.sellers = add_sellers(env.client, mid, 20, rng=env.rng)
    return mid


def test_new_markets_default_to_the_end_to_end_mode(
    env: Env, stand_in_payments: Any
) -> None:
    mid = _new_market(env)
    market = env.client.get(f"/v1/markets/{mid}", headers=env.admin).json()
    assert market["mechanism"]["mode"] == "strict"
    oid = env.order(mid)
    env.drain()
    st = env.status(oid)
    assert st["status"] == "succeeded", st["error"]
    assert st["summary"]["guarantee"] == "end_to_end"


def test_buyer_summary_has_only_documented_fields(
    env: Env, stand_in_payments: Any
) -> None:
    from pathlib import Path

    for mode in ("strict", "default"):
        mid = _new_market(env, mode=mode)
        oid = env.order(mid)
        env.drain()
        summary = env.status(oid)["summary"]
        assert set(summary) == set(SUMMARY_FIELDS)
        for hidden in ("sellers_offered", "sellers_eligible", "timings"):
            assert hidden not in summary
    guide = (Path(__file__).parents[2] / "docs" / "buyer.md").read_text()
    section = guide.split(BUYER_GUIDE_HEADING, 1)[1].split("\n## ", 1)[0]
    for name in SUMMARY_FIELDS:
        assert f"`{name}`" in section, name
