"""The console's pages without a browser: served, locked down by headers, data-free.

The pages are shells: they carry no account's data (that comes from ``/v1`` with the
user's key), so they need no key themselves and are the same for every role.
"""

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api import cli, demo
from api.console.router import STATIC_DIR
from tests.api.conftest import (
    Api,
    api,
    database_url,
    pg_schema,
    pg_tables_url,
    sqlite_template,
)

__all__ = ["api", "database_url", "pg_schema", "pg_tables_url", "sqlite_template"]

PAGES = [
    "/console/",
    "/console/markets",
    "/console/markets/1",
    "/console/buy",
    "/console/orders/1",
    "/console/orders/1/allocations",
    "/console/seller",
    "/console/offers/1",
]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_is_served_with_a_strict_csp(api: Api, path: str) -> None:
    r = api.client.get(path)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "default-src 'none'" in csp
    assert "unsafe-inline" not in csp
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["referrer-policy"] == "no-referrer"
    assert "set-cookie" not in r.headers
    # No inline script or style anywhere: everything is a 'self' file.
    assert not re.search(r"<script(?![^>]*\bsrc=)", r.text)
    assert "style=" not in r.text
    assert "<style" not in r.text


def test_pages_carry_no_data_and_ids_are_validated(api: Api) -> None:
    admin = api.admin()
    market = api.client.post(
        "/v1/markets",
        headers=admin,
        json={
            "name": "secret-market-name",
            "task": "classification",
            "features": [{"name": "f", "low": 0, "high": 1}],
            "cost_prior": {"family": "uniform", "params": {"low": 0, "high": 1}},
        },
    )
    assert market.status_code == 201
    page = api.client.get(f"/console/markets/{market.json()['id']}")
    assert "secret-market-name" not in page.text
    assert 'data-market-id="1"' in page.text
    assert api.client.get("/console/markets/not-a-number").status_code == 422
    assert api.client.get("/console/orders/0").status_code == 422


def test_static_files_are_served_and_never_write_html_from_data(api: Api) -> None:
    names = sorted(p.name for p in Path(STATIC_DIR).glob("*.js"))
    assert "schemaform.js" in names
    for name in names:
        r = api.client.get(f"/console/static/{name}")
        assert r.status_code == 200, name
        # Values reach the page through textContent/setAttribute only.
        assert "innerHTML" not in r.text
        assert "outerHTML" not in r.text
        assert "insertAdjacentHTML" not in r.text
        assert "document.write" not in r.text
    assert api.client.get("/console/static/console.css").status_code == 200
    assert api.client.get("/console/static/../router.py").status_code == 404


def test_the_key_is_kept_in_session_storage_only() -> None:
    script = (Path(STATIC_DIR) / "console.js").read_text()
    assert "sessionStorage" in script
    assert "localStorage" not in script
    assert "document.cookie" not in script
    assert 'credentials: "omit"' in script


def test_console_pages_are_not_in_the_openapi_schema(api: Api) -> None:
    paths = api.client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/console")]


def test_demo_serves_by_default_and_no_serve_keeps_the_old_behaviour(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[dict[str, object]] = []
    monkeypatch.setattr(demo, "run_demo", lambda **kw: calls.append(kw))
    runner = CliRunner()
    assert runner.invoke(cli.app, ["demo"]).exit_code == 0
    assert runner.invoke(cli.app, ["demo", "--no-serve"]).exit_code == 0
    assert [c["serve"] for c in calls] == [True, False]


def test_serving_the_console_prints_its_url_and_key_and_stops_on_ctrl_c(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupt(_seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(demo.time, "sleep", interrupt)
    demo._serve_console("http://127.0.0.1:1234", "pm_demo-key")
    out = capsys.readouterr().out
    assert "http://127.0.0.1:1234/console/" in out
    assert "pm_demo-key" in out
    assert "/console/?" not in out  # the key is never part of a URL
    assert "stopped" in out


@pytest.mark.parametrize("path", PAGES)
def test_page_content_is_inside_main_not_in_the_head(api: Api, path: str) -> None:
    html = api.client.get(path).text
    head = html[html.index("<head>") : html.index("</head>")]
    assert not re.search(r"<(section|form|table|h2)\b", head), head
    main = html[html.index("<main>") : html.index("</main>")]
    assert html.count("<section") == main.count("<section")
