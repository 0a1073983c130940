"""API test fixtures: an app per test on SQLite (and PostgreSQL when configured)."""

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from api.main import create_app
from market.access import accounts
from market.config import Settings
from market.runtime import leases, order_runner, worker
from market.store import Order, Role, session_scope
from tests.market.dbfixtures import (
    database_url,
    pg_schema,
    pg_tables_url,
    sqlite_template,
)

with warnings.catch_warnings():
    # Starlette deprecates its httpx-based TestClient in favour of httpx2, which is not
    # a dependency of this project; the client itself works unchanged.
    warnings.filterwarnings("ignore", message=r".*starlette\.testclient.*httpx2")
    from fastapi.testclient import TestClient

__all__ = ["database_url", "pg_schema", "pg_tables_url", "sqlite_template"]


TEST_KEY_SECRET = "test-only-api-key-secret-" + "0" * 16
"""The API-key HMAC secret of test apps (required on PostgreSQL, see market.access.key_secret)."""


def fast_settings(url: str, **overrides: object) -> Settings:
    """Settings for tests: a fixed API-key secret, no workers, no registration budget
    (tests register many accounts from one address; ``test_rate_limit`` sets it)."""
    values: dict[str, object] = {
        "database_url": url,
        "workers": 0,
        "api_key_secret": TEST_KEY_SECRET,
        "rate_limit_registrations": 0,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@dataclass
class Api:
    """A test client plus helpers to mint identities."""

    client: TestClient
    settings: Settings

    def register(self, role: str, name: str = "someone") -> dict[str, str]:
        r = self.client.post(f"/v1/{role}s", json={"name": name})
        assert r.status_code == 201, r.text
        return {"Authorization": f"Bearer {r.json()['api_key']}"}

    def admin(self, name: str = "root") -> dict[str, str]:
        engine = self.client.app.state.engine  # type: ignore[attr-defined]
        with session_scope(engine) as session:
            _, key = accounts.create_account(
                session, role=Role.ADMIN, name=name, settings=self.settings
            )
        return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def api(database_url: str) -> Iterator[Api]:
    """A fresh app and client on an empty database."""
    settings = fast_settings(database_url)
    with TestClient(create_app(settings)) as client:
        yield Api(client=client, settings=settings)


@pytest.fixture
def make_api(database_url: str) -> Iterator[Callable[..., Api]]:
    """Build apps with settings overrides on the same empty database."""
    clients: list[TestClient] = []

    def build(**overrides: object) -> Api:
        settings = fast_settings(database_url, **overrides)
        client = TestClient(create_app(settings))
        client.__enter__()
        clients.append(client)
        return Api(client=client, settings=settings)

    yield build
    for client in clients:
        client.__exit__(None, None, None)


def market_body(**overrides: object) -> dict[str, object]:
    """A small valid classification market: two features with public bounds."""
    body: dict[str, object] = {
        "name": "wdbc",
        "task": "classification",
        "features": [
            {"name": "radius", "low": 0.0, "high": 10.0},
            {"name": "texture", "low": -1.0, "high": 1.0},
        ],
        "cost_prior": {"family": "uniform", "params": {"low": 0.0, "high": 1.0}},
        "validation": [{"x": [1.0, 0.0], "y": 1}, {"x": [9.0, -0.5], "y": -1}],
        # λ = 1: hetero_dp_logistic's release overhead (2·ln(1.25) ≈ 0.45 at two
        # sellers) fits under the cap, so the market is usable by every learner.
        "mechanism": {"lam": 1.0},
        "lifetime_epsilon_cap": 3.0,
    }
    body.update(overrides)
    return body


def offer_body(
    x: list[float] | None = None, y: float = 1, cost: float = 0.3
) -> dict[str, object]:
    """A valid one-record offer for :func:`market_body` markets."""
    return {"records": [{"x": x or [5.0, 0.5], "y": y}], "reported_cost": cost}


@dataclass
class World:
    """An admin, two sellers, two buyers and one market (id ``market_id``)."""

    api: Api
    admin: dict[str, str]
    seller_a: dict[str, str]
    seller_b: dict[str, str]
    buyer_a: dict[str, str]
    buyer_b: dict[str, str]
    market_id: int


@pytest.fixture
def world(api: Api) -> World:
    return build_world(api)


def build_world(api: Api) -> World:
    """Seed ``api`` with an admin, two sellers, two buyers and one market."""
    admin = api.admin()
    r = api.client.post("/v1/markets", headers=admin, json=market_body())
    assert r.status_code == 201, r.text
    return World(
        api=api,
        admin=admin,
        seller_a=api.register("seller", "a"),
        seller_b=api.register("seller", "b"),
        buyer_a=api.register("buyer", "a"),
        buyer_b=api.register("buyer", "b"),
        market_id=r.json()["id"],
    )


def count_rows(api: Api, table: type) -> int:
    """Return the number of rows of a table model."""
    from sqlmodel import Session, func, select

    with Session(api.client.app.state.engine) as session:  # type: ignore[attr-defined]
        return int(session.exec(select(func.count()).select_from(table)).one())


def seed_offers(world: World) -> None:
    """Give the world's market two active offers (sellers A and B): the fewest an
    order can be placed on."""
    for i, seller in enumerate((world.seller_a, world.seller_b)):
        r = world.api.client.post(
            f"/v1/markets/{world.market_id}/offers",
            headers=seller,
            json=offer_body(x=[2.0 + 5 * i, 0.5 - i], y=1 - 2 * i),
        )
        assert r.status_code == 201, r.text


def run_queued_orders(
    api: Api, *, lease_seconds: float = 60, time_limit: float = 30.0
) -> None:
    """Run every queued order now, in this thread (the test app has no worker
    threads); an order over ``time_limit`` seconds fails with that reason."""
    engine = api.client.app.state.engine  # type: ignore[attr-defined]
    owner = leases.new_owner()
    while (
        oid := worker.claim(engine, Order, owner=owner, lease_seconds=lease_seconds)
    ) is not None:
        order_runner.run_order(
            engine, oid, owner=owner, lease_seconds=lease_seconds, time_limit=time_limit
        )
