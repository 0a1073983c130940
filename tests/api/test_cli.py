"""The ``privmarket`` CLI: ``admin create-key`` prints only a working key, ``db
upgrade`` migrates, ``serve`` migrates then hands the app to uvicorn."""

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlmodel import Session
from typer.testing import CliRunner

from api import cli
from market.access import accounts
from market.config import get_settings
from market.store import make_engine

KEY = re.compile(r"^pm_[0-9a-f]{12}_[A-Za-z0-9_-]{43}$")


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("PRIVMARKET_DATABASE_URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


def test_admin_create_key_prints_only_a_working_admin_key(db_url: str) -> None:
    result = CliRunner().invoke(cli.app, ["admin", "create-key", "--name", "ops"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    assert KEY.match(lines[0])
    engine = make_engine(db_url)
    with Session(engine) as session:
        account = accounts.authenticate(session, lines[0], settings=get_settings())
        assert account is not None
        assert (account.role, account.name) == ("admin", "ops")
    engine.dispose()


def test_db_upgrade_creates_the_schema(db_url: str) -> None:
    result = CliRunner().invoke(cli.app, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    engine = make_engine(db_url)
    tables = set(sa.inspect(engine).get_table_names())
    engine.dispose()
    assert {
        "account",
        "market",
        "offer",
        "order",
        "ledger_entry",
        "alembic_version",
    } <= tables


def test_serve_upgrades_then_runs_uvicorn(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def fake_run(app: Any, *, host: str, port: int) -> None:
        engine = make_engine(db_url)
        seen["tables"] = set(sa.inspect(engine).get_table_names())
        engine.dispose()
        seen.update(app=app, host=host, port=port)

    monkeypatch.setattr("uvicorn.run", fake_run)
    result = CliRunner().invoke(
        cli.app, ["serve", "--host", "0.0.0.0", "--port", "8123"]
    )
    assert result.exit_code == 0, result.output
    assert (seen["host"], seen["port"]) == ("0.0.0.0", 8123)
    assert "order" in seen["tables"]
    assert seen["app"].state.settings.database_url == db_url
