"""Promises through the API (``docs/money-and-settings.md``): settings outside what the
numerics can run are ``422`` naming the field (on create and PATCH), integers too long
for the JSON parser are ``422`` naming the field, sellers are paid at least their
reported cost of privacy in whole cents (the allocations view counts IR without slack),
an order never pays on an allocation far from its KKT conditions, and a fuzz of accepted settings: every
order succeeds or fails with a named domain reason, never an internal error."""

from __future__ import annotations

import math
import warnings
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from market.numerics import SETTING_RANGES
from market.pipeline import compute
from market.pipeline.compute import OrderFailedError, check_certified
from tests.api.conftest import (
    Api,
    World,
    build_world,
    market_body,
    offer_body,
    run_queued_orders,
)

ORDER = {"learner": "hetero_dp_logistic", "budget": 100.0, "gamma": 1.0}
TIME_LIMIT = 30.0  # seconds per order: over it, the order fails with that reason


def _market_with_offers(
    world: World, mechanism: dict[str, Any], costs: tuple[float, float] = (0.3, 0.4)
) -> int:
    c = world.api.client
    r = c.post(
        "/v1/markets",
        headers=world.admin,
        json=market_body(
            name=f"m{len(str(mechanism))}{id(mechanism)}", mechanism=mechanism
        ),
    )
    assert r.status_code == 201, r.text
    mid = int(r.json()["id"])
    for who, x, cost in (
        (world.seller_a, [2.0, 0.5], costs[0]),
        (world.seller_b, [8.0, -0.5], costs[1]),
    ):
        body = offer_body(x=x, y=1 if x[0] < 5 else -1, cost=cost)
        r = c.post(f"/v1/markets/{mid}/offers", headers=who, json=body)
        assert r.status_code == 201, r.text
    return mid


def _order(
    world: World, mid: int, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    c = world.api.client
    r = c.post(f"/v1/markets/{mid}/orders", headers=world.buyer_a, json=body or ORDER)
    assert r.status_code == 202, r.text
    run_queued_orders(world.api, lease_seconds=120, time_limit=TIME_LIMIT)
    return dict(c.get(f"/v1/orders/{r.json()['id']}", headers=world.buyer_a).json())


# --- 3. settings the numerics cannot run are refused by name ------------------------


@pytest.mark.parametrize(
    "mechanism",
    [
        {"lam": 5e-324},
        {"lam": 1, "eps_avg_max": 1e-300},
        {"lam": 1, "u": "power", "u_power": 8.67},
    ],
)
def test_settings_the_numerics_cannot_run_are_422_on_create_and_patch(
    world: World, mechanism: dict[str, Any]
) -> None:
    c = world.api.client
    field = (
        next(k for k in mechanism if k in ("eps_avg_max", "u_power"))
        if len(mechanism) > 1
        else "lam"
    )
    r = c.post(
        "/v1/markets", headers=world.admin, json=market_body(mechanism=mechanism)
    )
    assert r.status_code == 422, r.text
    assert r.json()["field"] == f"mechanism.{field}"
    r = c.patch(
        f"/v1/markets/{world.market_id}",
        headers=world.admin,
        json={"mechanism": mechanism},
    )
    assert r.status_code == 422, r.text
    assert r.json()["field"] == f"mechanism.{field}"


@pytest.mark.parametrize(
    ("template", "field"),
    [
        (
            '{"records": [{"x": [%s, 0.5], "y": 1}], "reported_cost": 0.3}',
            "records[0].x[0]",
        ),
        (
            '{"records": [{"x": [1.0, 0.5], "y": 1}], "reported_cost": %s}',
            "reported_cost",
        ),
    ],
)
def test_an_integer_too_long_to_parse_is_422_naming_the_field(
    world: World, template: str, field: str
) -> None:
    body = (template % ("9" * 5000)).encode()
    r = world.api.client.post(
        f"/v1/markets/{world.market_id}/offers",
        headers={**world.seller_a, "content-type": "application/json"},
        content=body,
    )
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field


# --- 1. money: IR in the cents paid, counted without slack --------------------------


def test_small_costs_are_paid_at_least_their_cost_in_whole_cents(world: World) -> None:
    # Costs of a tenth of a cent per unit ε: floors paid 0.00 to sellers giving ε > 0.
    mid = _market_with_offers(world, {"lam": 1.0}, costs=(0.001, 0.0015))
    order = _order(world, mid, {**ORDER, "budget": 5.0})
    assert order["status"] == "succeeded", order["error"]
    oid = order["id"]
    view = world.api.client.get(f"/v1/orders/{oid}/allocations", headers=world.admin)
    assert view.status_code == 200
    items = view.json()["items"]
    assert items
    for a in items:
        assert a["privacy_cost"] == pytest.approx(a["reported_cost"] * a["epsilon"])
        assert a["individually_rational"] is True
        assert a["payment_minor"] / 100 >= a["reported_cost"] * a["epsilon"]
        if a["epsilon"] > 0:
            assert a["payment_minor"] >= 1
    assert view.json()["individually_rational"] == len(items)
    assert sum(a["payment_minor"] for a in items) <= 500


# --- 4. an order never pays on an allocation far from its KKT conditions -----------


def test_an_inaccurate_allocation_fails_the_order_before_payment() -> None:
    far = SimpleNamespace(
        certified=False, status="optimal_inaccurate", message="kkt=1e-3",
        kkt=SimpleNamespace(max=lambda: 1e-3),
    )  # fmt: skip
    with pytest.raises(OrderFailedError, match=r"KKT conditions.*nothing was paid"):
        check_certified(far, None)
    unknown = SimpleNamespace(certified=False, status="optimal_inaccurate", message="")
    with pytest.raises(OrderFailedError, match=r"nothing was paid"):
        check_certified(unknown, None)  # no residuals: not payable either
    # between KKT_TOL and 1e-4: paid, and the stage and the summary say so
    near = SimpleNamespace(
        certified=False, status="optimal_inaccurate", message="kkt=5e-6",
        kkt=SimpleNamespace(max=lambda: 5e-6),
    )  # fmt: skip
    assert check_certified(near, None) == 0
    ok = SimpleNamespace(certified=False, status="uncertified")  # paid, and said so
    cert = SimpleNamespace(rule_certified=False)
    pay = SimpleNamespace(
        rule_certified=False, sellers=[SimpleNamespace(index=0, certificate=cert)]
    )
    assert check_certified(ok, pay) == 1  # counted, and reported in the summary
    assert check_certified(ok, SimpleNamespace(rule_certified=True, sellers=[])) == 0


@pytest.mark.parametrize(
    ("status", "stage"),
    [("optimal", "payments"), ("uncertified", "payments_uncertified"),
     ("local", "payments_uncertified")],
)  # fmt: skip
def test_an_uncertified_allocation_is_said_before_its_payments(
    monkeypatch: pytest.MonkeyPatch, status: str, stage: str
) -> None:
    """The order's stage names an allocation that is not certified optimal before any
    payment is computed (the buyer sees it in ``progress.stage``)."""
    events: list[str] = []
    alloc = SimpleNamespace(
        status=status, success=True, message="gap 1e-3",
        kkt=SimpleNamespace(max=lambda: 1e-9),
    )  # fmt: skip

    def allocate(*args: Any, **kwargs: Any) -> Any:
        events.append("allocate")
        return alloc

    def pay(*args: Any, **kwargs: Any) -> Any:
        events.append("pay")
        return SimpleNamespace(rule_certified=True, sellers=[])

    monkeypatch.setattr(compute.numerics, "allocate", allocate)
    monkeypatch.setattr(compute.numerics, "myerson_payments", pay)
    rep = SimpleNamespace(stage=events.append, fraction=lambda done, total: None)
    inst = SimpleNamespace(
        config=lambda gamma=None: SimpleNamespace(gamma=1.0),
        costs=[0.1], prior=None, eps_max=None,
    )  # fmt: skip
    run = SimpleNamespace(instance=inst, gamma=1.0, budget_minor=100)
    rows = compute.PricedRows(X=[[0.0]], y=[1.0], X_val=None)
    compute._solve_and_pay(run, rows, rep)  # type: ignore[arg-type]
    assert events == ["allocating", "allocate", stage, "pay"]


def test_a_power_utility_order_fails_with_a_domain_reason(world: World) -> None:
    mid = _market_with_offers(world, {"lam": 1.0, "u": "power", "u_power": 2.0})
    order = _order(world, mid)
    if order["status"] == "failed":
        assert not order["error"].startswith("internal error"), order["error"]
    else:
        assert order["status"] == "succeeded"


# --- fuzz: every accepted setting runs or fails with a named domain reason ----------


def _setting(name: str) -> st.SearchStrategy[float]:
    lo, hi = SETTING_RANGES[name]
    positive = st.floats(
        min_value=math.log(max(lo, hi * 1e-12)), max_value=math.log(hi)
    ).map(math.exp)
    return st.one_of(st.just(lo), st.just(hi), positive)


@st.composite
def mechanisms_(draw: st.DrawFn) -> dict[str, Any]:
    mech: dict[str, Any] = {
        name: draw(_setting(name))
        for name in ("gamma", "lam", "mu", "sigma", "k", "eps_avg_max")
        if draw(st.booleans())
    }
    mech["mode"] = draw(st.sampled_from(["default", "strict"]))
    if draw(st.integers(0, 9)) == 0:
        mech["u"], mech["u_power"] = "power", draw(_setting("u_power"))
    return mech


@pytest.fixture(scope="module")
def fuzz_world(sqlite_template: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    import shutil
    import warnings

    from api.main import create_app
    from tests.api.conftest import fast_settings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*starlette\.testclient.*httpx2")
        from fastapi.testclient import TestClient

    target = tmp_path_factory.mktemp("fuzz") / "market.store.db"
    shutil.copyfile(sqlite_template, target)
    cfg = fast_settings(f"sqlite:///{target}")
    with TestClient(create_app(cfg)) as client:
        yield build_world(Api(client=client, settings=cfg))


def _fuzz_one(world: World, mechanism: dict[str, Any], gamma: float | None) -> None:
    c = world.api.client
    r = c.post(
        "/v1/markets",
        headers=world.admin,
        # A lifetime cap above the release overhead at the smallest λ (about 34), so
        # the market is usable and its orders run.
        json=market_body(
            name=f"fuzz{id(mechanism)}", mechanism=mechanism, lifetime_epsilon_cap=100.0
        ),
    )
    if r.status_code == 422:  # a domain refusal naming the field (e.g. the usable cap)
        assert r.json()["field"].startswith(("mechanism", "lifetime_epsilon_cap")), (
            r.text
        )
        return
    assert r.status_code == 201, r.text
    mid = int(r.json()["id"])
    for who, x in ((world.seller_a, [2.0, 0.5]), (world.seller_b, [8.0, -0.5])):
        body = offer_body(x=x, y=1 if x[0] < 5 else -1)
        r = c.post(f"/v1/markets/{mid}/offers", headers=who, json=body)
        assert r.status_code == 201, r.text
    with warnings.catch_warnings():
        # as in production: a learner that stops at its iteration limit warns (the
        # suite turns warnings into errors, which a worker would report as internal)
        warnings.simplefilter("default", ConvergenceWarning)
        order = _order(world, mid, {**ORDER, "gamma": gamma})
    assert order["status"] in ("succeeded", "failed"), order
    if order["status"] == "failed":
        assert order["error"], order
        assert "internal error" not in order["error"], (mechanism, order["error"])


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,  # the default run draws the same examples every time
    # Each example places and runs an order (seconds): report the first failure as
    # drawn instead of spending minutes shrinking it.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(mechanism=mechanisms_(), gamma=st.one_of(st.none(), _setting("gamma")))
def test_fuzz_accepted_settings_run_or_fail_with_a_domain_reason(
    fuzz_world: World, mechanism: dict[str, Any], gamma: float | None
) -> None:
    _fuzz_one(fuzz_world, mechanism, gamma)


@pytest.mark.slow
@settings(
    max_examples=100,
    deadline=None,
    # Each example places and runs an order (seconds): report the first failure as
    # drawn instead of spending minutes shrinking it.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(mechanism=mechanisms_(), gamma=st.one_of(st.none(), _setting("gamma")))
def test_fuzz_accepted_settings_many(
    fuzz_world: World, mechanism: dict[str, Any], gamma: float | None
) -> None:
    _fuzz_one(fuzz_world, mechanism, gamma)
