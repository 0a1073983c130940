"""Browser fixtures: Debian's Chromium driven by Playwright, and a live service.

The browser is the system one (``/usr/bin/chromium`` or ``PRIVMARKET_CHROMIUM``): these
machines cannot download Playwright's own build. Without it (or without Playwright),
every browser test skips with the reason. The service is uvicorn in a thread on a port
chosen at run time on 127.0.0.1, on a fresh SQLite file, with one worker thread.
"""

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from api.demo import LocalServer, seed_market
from api.main import create_app
from market.access import accounts
from market.store import Role, session_scope, upgrade_to_head
from tests.api.conftest import fast_settings

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
N_SELLERS = 30
GAMMA = 0.01
BUDGET = 400.0


def chromium_path() -> str | None:
    """The system Chromium, if there is one."""
    explicit = os.environ.get("PRIVMARKET_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the session (skips with the reason if unavailable)."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright for Python is not installed"
    )
    path = chromium_path()
    if path is None:
        pytest.skip(
            "no Chromium on this machine (apt-get install chromium chromium-driver, "
            "or set PRIVMARKET_CHROMIUM)"
        )
    with sync_api.sync_playwright() as p:
        try:
            chromium = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        except Exception as exc:  # a broken install: skip, the rest of CI still runs
            pytest.skip(f"Chromium at {path} did not start: {exc}")
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Live:
    """The running service and the accounts seeded on it."""

    base: str
    client: httpx.Client
    admin_key: str
    buyer_key: str
    seller_keys: list[str]
    market_id: int
    shots: Path
    orders: dict[str, int] = field(default_factory=dict)

    def headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def place_order(self, **body: Any) -> int:
        """Place an order as the buyer over HTTP and wait until it has finished."""
        order = {"learner": "hetero_dp_logistic", "budget": BUDGET, "gamma": GAMMA}
        r = self.client.post(
            f"/v1/markets/{self.market_id}/orders",
            headers=self.headers(self.buyer_key),
            json=order | body,
        )
        r.raise_for_status()
        oid = int(r.json()["id"])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            st = self.client.get(
                f"/v1/orders/{oid}", headers=self.headers(self.buyer_key)
            ).json()
            if st["status"] in ("succeeded", "failed"):
                return oid
            time.sleep(0.2)
        raise AssertionError(f"order {oid} did not finish in 120 s")


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Live]:
    """The service with a small Wisconsin market (the demo's, 30 sellers), an admin and
    a buyer. Needs the browser first, so nothing is started when the tests skip."""
    tmp = tmp_path_factory.mktemp("console")
    url = f"sqlite:///{tmp / 'console.db'}"
    upgrade_to_head(url)
    settings = fast_settings(url, workers=1, job_lease_seconds=60)
    app = create_app(settings)
    with session_scope(app.state.engine, write=True) as s:
        _, admin_key = accounts.create_account(
            s, role=Role.ADMIN, name="console-admin", settings=settings
        )
    shots = Path(os.environ.get("PRIVMARKET_CONSOLE_SHOTS") or tmp / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    with LocalServer(app) as base, httpx.Client(base_url=base, timeout=30) as c:
        admin = {"Authorization": f"Bearer {admin_key}"}
        mid, _, _, seller_keys = seed_market(
            c,
            admin,
            n_sellers=N_SELLERS,
            rng=np.random.default_rng(0),
            name="wisconsin-breast-cancer",
        )
        buyer = c.post("/v1/buyers", json={"name": "console-buyer"}).json()
        yield Live(
            base=base,
            client=c,
            admin_key=admin_key,
            buyer_key=buyer["api_key"],
            seller_keys=seller_keys,
            market_id=mid,
            shots=shots,
        )


@pytest.fixture
def page(browser: Any, live: Live) -> Iterator[Any]:
    """A fresh browser context (empty sessionStorage, no cookies) and page."""
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    context.set_default_timeout(20_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    # The CSP must not block the console's own files (a violation is logged, not thrown).
    pg.on(
        "console",
        lambda msg: (
            errors.append(msg.text) if "Content Security Policy" in msg.text else None
        ),
    )
    try:
        yield pg
    finally:
        context.close()
    assert not errors, f"JavaScript errors or CSP violations on the page: {errors}"
