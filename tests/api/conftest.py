"""API test fixtures: an app per test on SQLite (and PostgreSQL when configured)."""

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from api.main import create_app
from market import accounts
from market.config import Settings
from market.db import session_scope
from market.models import Role
from tests.market.dbfixtures import database_url, pg_schema, pg_tables_url

with warnings.catch_warnings():
    # Starlette deprecates its httpx-based TestClient in favour of httpx2, which is not
    # a dependency of this project; the client itself works unchanged.
    warnings.filterwarnings("ignore", message=r".*starlette\.testclient.*httpx2")
    from fastapi.testclient import TestClient

__all__ = ["database_url", "pg_schema", "pg_tables_url"]


def fast_settings(url: str, **overrides: object) -> Settings:
    """Settings for tests: cheap Argon2 (hashing cost is tested separately), no workers."""
    values: dict[str, object] = {
        "database_url": url,
        "workers": 0,
        "argon2_time_cost": 1,
        "argon2_memory_kib": 64,
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
