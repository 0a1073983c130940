"""Each role acts from the console: a seller offers records, changes its reported cost,
replaces its records and withdraws; an admin creates a market from the form generated
from the API's schema, edits its settings, and sees a market's sellers and offers."""

import re
from typing import Any

from tests.console.conftest import N_SELLERS, Live
from tests.console.test_console_browser import shot, sign_in


def _small_market(live: Live, name: str) -> int:
    r = live.client.post(
        "/v1/markets",
        headers=live.headers(live.admin_key),
        json={
            "name": name,
            "task": "classification",
            "features": [
                {"name": "age", "low": 0, "high": 1},
                {"name": "dose", "low": 0, "high": 1},
            ],
            "cost_prior": {"family": "uniform", "params": {"low": 0.0, "high": 0.1}},
        },
    )
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def test_seller_offers_reprices_replaces_and_withdraws(page: Any, live: Live) -> None:
    mid = _small_market(live, "seller-actions")
    seller = live.client.post("/v1/sellers", json={"name": "console-seller"}).json()
    key = seller["api_key"]
    sign_in(page, live, key, "/console/seller")
    page.wait_for_selector(f"#offer-market option[value='{mid}']", state="attached")
    page.select_option("#offer-market", str(mid))
    assert "age [0, 1], dose [0, 1]" in page.inner_text("#offer-format")
    page.fill("#offer-records", "0.5, 0.25, 1")
    page.fill("#offer-cost", "0.05")
    page.click("#create-offer")
    page.wait_for_url(re.compile(r"/console/offers/\d+$"))
    first = int(page.url.rsplit("/", 1)[1])
    page.wait_for_selector("#offer-actions:not([hidden])")
    assert "active" in page.inner_text("#offer")
    assert page.input_value("#new-records") == "0.5, 0.25, 1"
    shot(page, live, "offer")
    # Change the reported cost: a new offer replaces the old one, same records.
    page.fill("#new-cost", "0.07")
    page.click("#change-cost")
    page.wait_for_url(re.compile(rf"/console/offers/(?!{first}$)\d+$"))
    second = int(page.url.rsplit("/", 1)[1])
    page.wait_for_selector("#offer dt")
    assert "0.07" in page.inner_text("#offer")
    assert f"#{first}" in page.inner_text("#offer")  # replaces
    # Replace the records.
    page.wait_for_selector("#offer-actions:not([hidden])")
    page.fill("#new-records", "0.125, 0.75, -1")
    page.click("#replace-records")
    page.wait_for_url(re.compile(rf"/console/offers/(?!{second}$)\d+$"))
    third = int(page.url.rsplit("/", 1)[1])
    page.wait_for_selector("#records tbody tr")
    assert "0.125, 0.75" in page.inner_text("#records")
    # A bad line is refused in the page, naming the line.
    page.wait_for_selector("#offer-actions:not([hidden])")
    page.fill("#new-records", "0.1, abc, 1")
    page.click("#replace-records")
    page.locator("#message").wait_for()
    assert "line 1" in page.inner_text("#message")
    # Withdraw (two clicks).
    page.click("#withdraw")
    page.click("#withdraw-confirm")
    page.wait_for_selector("#offer dt")
    page.locator("#offer dd", has_text="withdrawn").wait_for()  # after the reload
    assert page.locator("#offer-actions").is_hidden()
    offers = live.client.get("/v1/sellers/me/offers", headers=live.headers(key)).json()
    assert [(o["id"], o["status"]) for o in offers["items"]] == [
        (third, "withdrawn"),
        (second, "replaced"),
        (first, "replaced"),
    ]
    got = live.client.get(f"/v1/offers/{third}", headers=live.headers(key)).json()
    assert got["reported_cost"] == 0.07
    assert got["records"] == [{"x": [0.125, 0.75], "y": -1}]


def test_admin_creates_and_edits_a_market_from_schema_forms(
    page: Any, live: Live
) -> None:
    sign_in(page, live, live.admin_key, "/console/markets")
    page.wait_for_selector("#create-market:not([hidden])")
    page.click("#create-market-details summary")
    page.wait_for_selector("[data-path='name']")
    # Every field of POST /v1/markets has a control, labelled in words.
    for path in ("task", "features.0.low", "cost_prior.params.high", "mechanism.gamma"):
        assert page.locator(f"[data-path='{path}']").count() == 1, path
    page.fill("[data-path='name']", "from-the-form")
    page.fill("[data-path='features.0.name']", "age")
    page.fill("[data-path='features.0.low']", "0")
    page.fill("[data-path='features.0.high']", "120")
    page.click("[data-add='features']")
    page.fill("[data-path='features.1.name']", "bmi")
    page.fill("[data-path='features.1.low']", "10")
    page.fill("[data-path='features.1.high']", "60")
    page.fill("[data-path='cost_prior.params.high']", "0.2")
    page.click("details[data-part='mechanism'] > summary")  # optional: folded
    page.fill("[data-path='mechanism.gamma']", "0.02")
    shot(page, live, "markets")
    page.click("#create-market-button")
    page.wait_for_url(re.compile(r"/console/markets/\d+$"))
    mid = int(page.url.rsplit("/", 1)[1])
    market = live.client.get(
        f"/v1/markets/{mid}", headers=live.headers(live.admin_key)
    ).json()
    assert market["name"] == "from-the-form"
    assert [(f["name"], f["low"], f["high"]) for f in market["features"]] == [
        ("age", 0, 120),
        ("bmi", 10, 60),
    ]
    assert market["cost_prior"] == {
        "family": "uniform",
        "params": {"low": 0, "high": 0.2},
    }
    assert market["mechanism"]["gamma"] == 0.02
    # Edit: only what changed is sent; the rest of the mechanism stays.
    page.wait_for_selector("#settings dt")
    page.click("details:has(#edit-market-form) summary")
    page.fill("#edit-market-form [data-path='mechanism.eps_avg_max']", "7")
    page.fill("#edit-market-form [data-path='name']", "renamed")
    page.click("#save-market")
    page.wait_for_selector("#edit-result:not(:empty)")
    assert "mechanism" in page.inner_text("#edit-result")
    after = live.client.get(
        f"/v1/markets/{mid}", headers=live.headers(live.admin_key)
    ).json()
    assert after["name"] == "renamed"
    assert after["mechanism"]["eps_avg_max"] == 7
    assert {k: v for k, v in after["mechanism"].items() if k != "eps_avg_max"} == {
        k: v for k, v in market["mechanism"].items() if k != "eps_avg_max"
    }
    assert page.inner_text("#market-name") == "renamed"
    # A refused value is explained with the field's name.
    page.fill("#edit-market-form [data-path='lifetime_epsilon_cap']", "-1")
    page.click("#save-market")
    page.locator("#message").wait_for()
    assert "lifetime_epsilon_cap" in page.inner_text("#message")


def test_admin_sees_a_markets_sellers_and_offers(page: Any, live: Live) -> None:
    sign_in(page, live, live.admin_key, f"/console/markets/{live.market_id}")
    page.wait_for_selector("#market-offers tbody tr td:not(.empty)")
    assert "active offers" in page.inner_text("#offers-summary")
    rows = page.locator("#market-offers tbody tr")
    assert rows.count() >= N_SELLERS
    assert "seller-0" in page.inner_text("#market-offers")
    assert page.locator("#gamma-choice").is_hidden()  # no curve, no "Set γ"
    shot(page, live, "market")


def test_home_page_is_titled_by_state(page: Any, live: Live) -> None:
    page.goto(live.base + "/console/")
    page.wait_for_selector("#signin:not([hidden])")
    assert page.inner_text("main h1") == "Sign in"
    sign_in(page, live, live.admin_key, "/console/")
    page.wait_for_selector("#welcome:not(:empty)")
    assert page.inner_text("main h1") == "Welcome, console-admin"
    assert page.inner_text("#welcome") == "You are signed in as an admin."
    shot(page, live, "home")
