"""The admin's allocation view in pages: every page together is the whole allocation
in seller order, and the figures over the whole order (totals, IR count, ε histogram)
are the same on every page and equal to what the rows themselves give."""

import math
from typing import Any

import pytest

from market import ledgers, numerics
from market.orders import ALLOCATIONS_PAGE_MAX
from tests.api.conftest import World
from tests.api.test_orders_api import _finish, _place

N = 7


def _seed(world: World) -> tuple[int, list[ledgers.SellerSpend]]:
    """``N`` sellers through the bulk route, an order settled with spends of varied ε
    and payments (one paid below its IR line, one given no ε); the order id and the
    spends."""
    rows = [
        {"seller_name": f"p{i}", "records": [{"x": [float(i), 0.5], "y": 1}],
         "reported_cost": 0.1 + 0.1 * i}
        for i in range(N)
    ]  # fmt: skip
    r = world.api.client.post(
        f"/v1/markets/{world.market_id}/offers:bulk",
        headers=world.admin,
        json={"offers": rows},
    )
    assert r.status_code == 201, r.text
    made = r.json()["items"]
    eps = [0.9, 0.0, 0.25, 1.4, 0.6, 0.6, 2.0]
    spends = [
        ledgers.SellerSpend(
            item["seller_id"], item["offer_id"], e,
            # seller 3 is paid 1 cent under c·ε = 0.4·1.4 = 0.56: IR fails
            55 if i == 3 else math.ceil(100 * (0.1 + 0.1 * i) * e) + 7 * i + 1,
            {"method": "full_solve", "i": i},
        )
        for i, (item, e) in enumerate(zip(made, eps, strict=True))
    ]  # fmt: skip
    oid = _place(world).json()["id"]
    _finish(world, oid, spends)
    return oid, spends


def _get(world: World, oid: int, **params: Any) -> Any:
    r = world.api.client.get(
        f"/v1/orders/{oid}/allocations", headers=world.admin, params=params
    )
    assert r.status_code == 200, r.text
    return r.json()


def test_pages_together_are_the_whole_allocation_in_seller_order(
    world: World,
) -> None:
    oid, spends = _seed(world)
    whole = _get(world, oid)
    assert (whole["total"], whole["limit"], whole["offset"]) == (N, 1000, 0)
    assert [a["seller_id"] for a in whole["items"]] == sorted(
        s.seller_id for s in spends
    )
    pages = [_get(world, oid, limit=3, offset=k) for k in (0, 3, 6)]
    assert [len(p["items"]) for p in pages] == [3, 3, 1]
    assert [a for p in pages for a in p["items"]] == whole["items"]
    past = _get(world, oid, limit=3, offset=9)
    assert past["items"] == []
    keys = ("total", "total_payment", "individually_rational", "sellers_used",
            "epsilon_histogram")  # fmt: skip
    for page in [*pages, past]:
        assert {k: page[k] for k in keys} == {k: whole[k] for k in keys}
    by_seller = {s.seller_id: s for s in spends}
    for a in whole["items"]:
        s = by_seller[a["seller_id"]]
        assert (a["offer_id"], a["epsilon"], a["payment_minor"]) == (
            s.offer_id, s.epsilon, s.payment_minor,
        )  # fmt: skip
        assert a["certificate"] == s.certificate


def test_whole_order_figures_are_those_of_the_rows(world: World) -> None:
    oid, spends = _seed(world)
    view = _get(world, oid, limit=2)
    items = _get(world, oid)["items"]
    assert view["total_payment"] == ledgers.to_major(
        sum(s.payment_minor for s in spends)
    )
    assert view["sellers_used"] == N - 1
    ir = [
        numerics.individually_rational(
            a["payment_minor"], a["reported_cost"], a["epsilon"],
            u="linear", u_power=2.0,
        )
        for a in items
    ]  # fmt: skip
    assert [a["individually_rational"] for a in items] == ir
    assert view["individually_rational"] == sum(ir) == N - 1
    assert [a["privacy_cost"] for a in items] == [
        a["reported_cost"] * a["epsilon"] for a in items
    ]
    # the console's rule: 12 equal bins from the smallest to the largest ε, the
    # largest in the last bin
    eps = [a["epsilon"] for a in items]
    lo, hi = min(eps), max(eps)
    width = (hi - lo) / 12
    counts = [0] * 12
    for e in eps:
        counts[min(11, math.floor((e - lo) / width))] += 1
    assert view["epsilon_histogram"] == {
        "low": lo,
        "high": lo + 12 * width,
        "counts": counts,
    }


def test_page_bounds_are_checked(world: World) -> None:
    oid, _ = _seed(world)
    c = world.api.client
    for params in ({"limit": 0}, {"limit": ALLOCATIONS_PAGE_MAX + 1}, {"offset": -1}):
        r = c.get(f"/v1/orders/{oid}/allocations", headers=world.admin, params=params)
        assert r.status_code == 422, params
    assert len(_get(world, oid, limit=ALLOCATIONS_PAGE_MAX)["items"]) == N


@pytest.mark.parametrize(
    ("payment_minor", "cost", "eps", "u", "power"),
    [
        (56, 0.4, 1.4, "linear", 2.0),  # 0.4·1.4 is 0.5599… in floats
        (55, 0.4, 1.4, "linear", 2.0),
        (30, 0.3, 1.0, "linear", 2.0),  # exactly on the line
        (29, 0.3, 1.0, "linear", 2.0),
        (1, 0.7, 0.0, "linear", 2.0),
        (49, 0.5, 1.0, "power", 2.0),
        (50, 0.5, 1.0, "power", 2.0),
        (12, 0.2, 0.77, "power", 1.5),
    ],
)
def test_whole_array_ir_is_the_one_seller_rule(
    payment_minor: int, cost: float, eps: float, u: str, power: float
) -> None:
    paid = payment_minor / 100  # the nearest float of the decimal amount
    line = cost * (eps if u == "linear" else eps**power)
    assert numerics.privacy_cost(cost, eps, u=u, u_power=power) == line
    assert numerics.individually_rational(
        payment_minor, cost, eps, u=u, u_power=power
    ) == (paid >= line)
    many = numerics.individually_rational_all(
        [payment_minor] * 3, [cost] * 3, [eps] * 3, u=u, u_power=power
    )
    assert many.tolist() == [paid >= line] * 3


def test_admin_client_reads_every_page(world: World) -> None:
    from api.client import AdminClient

    oid, _ = _seed(world)
    key = world.admin["Authorization"].removeprefix("Bearer ")
    transport = world.api.client._transport  # the test app, in process
    with AdminClient("http://testserver", key, transport=transport) as admin:
        assert admin.allocation_items(oid, page=3) == _get(world, oid)["items"]
        first = admin.allocations(oid, limit=2, offset=2)
    assert [a["seller_id"] for a in first["items"]] == [
        a["seller_id"] for a in _get(world, oid)["items"][2:4]
    ]
