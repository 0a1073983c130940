"""The console in a real headless Chromium: what each role sees and can do.

Screenshots of every page go to the run's temporary directory (or to
``PRIVMARKET_CONSOLE_SHOTS``); ``docs/console/`` holds one committed copy of each.
"""

import re
from typing import Any

from tests.console.conftest import BUDGET, GAMMA, N_SELLERS, Live

XSS_NAME = '<script>window.__xss = 1</script><img src="x" onerror="window.__xss = 2">'


def sign_in(page: Any, live: Live, key: str, path: str = "/console/") -> None:
    """Open ``path`` and sign in with ``key`` through the form."""
    page.goto(live.base + path)
    page.fill("#api-key", key)
    page.click("#signin-button")
    page.wait_for_selector("#who:not(:empty)")


def shot(page: Any, live: Live, name: str) -> None:
    page.screenshot(path=str(live.shots / f"{name}.png"), full_page=True)


def test_wrong_key_shows_a_clear_message_not_a_blank_page(
    page: Any, live: Live
) -> None:
    page.goto(live.base + "/console/markets")
    page.fill("#api-key", "pm_not-a-real-key")
    page.click("#signin-button")
    message = page.locator("#message")
    message.wait_for()
    assert "was not accepted" in message.inner_text()
    assert page.locator("#content").is_hidden()
    shot(page, live, "sign-in-error")


def test_the_key_stays_out_of_urls_and_cookies(page: Any, live: Live) -> None:
    sign_in(page, live, live.admin_key, "/console/markets")
    page.wait_for_selector("#markets tbody tr")
    assert live.admin_key not in page.url
    assert page.context.cookies() == []
    stored = page.evaluate("sessionStorage.getItem('privmarket.key')")
    assert stored == live.admin_key
    # A new tab (a new session) starts signed out.
    other = page.context.browser.new_context().new_page()
    other.goto(live.base + "/console/markets")
    other.wait_for_selector("#signin:not([hidden])")
    other.context.close()


def test_admin_runs_a_tradeoff_job_and_sets_gamma_from_the_curve(
    page: Any, live: Live
) -> None:
    sign_in(page, live, live.admin_key, "/console/markets")
    link = page.locator(f"#markets a[href='/console/markets/{live.market_id}']")
    link.wait_for()
    shot(page, live, "markets")
    link.click()
    page.wait_for_selector("#settings dt")
    page.fill("#gammas", "0.01, 0.1, 1")
    page.click("#run-tradeoff")
    # Wait for the curve or a message, so that a failure says what the page said.
    page.locator("#curve circle.point, #message:not([hidden])").first.wait_for(
        timeout=120_000
    )
    assert page.locator("#message").is_hidden(), page.inner_text("#message")
    points = page.locator("#curve circle.point")
    assert points.count() == 3  # one point per γ
    # The chart says what it measures, in which units, for which learner.
    note = page.inner_text("#curve-note")
    assert "Prices the learner hetero_dp_logistic" in note
    assert "misclassifies (0 to 1)" in note
    assert "currency units" in page.inner_text("#curve")
    # Averaged over noise draws with a band: a shaded area and one whisker per γ.
    assert page.locator("#curve polygon.band").count() == 1
    assert page.locator("#curve line.band-whisker").count() == 3
    assert "standard error" in note
    assert page.locator(
        "#gamma-choice"
    ).is_hidden()  # "Set γ" only once a point is chosen
    assert "succeeded" in page.inner_text("#job-status")
    second = points.nth(1)
    second.hover()
    tip = page.locator("#tooltip")
    tip.wait_for()
    text = tip.inner_text()
    assert "γ = 0.1" in text
    assert "sellers used" in text
    assert re.search(r"± \S+ standard error over \d+ draws", text)
    assert re.search(r"ε min .* median .* max", text)
    second.click()
    page.click("#set-gamma")
    page.wait_for_selector("#gamma-result:not(:empty)")
    assert "γ is now 0.1" in page.inner_text("#gamma-result")
    second.hover()
    tip.wait_for()
    shot(page, live, "market-tradeoff")
    market = live.client.get(
        f"/v1/markets/{live.market_id}", headers=live.headers(live.admin_key)
    ).json()
    assert market["mechanism"]["gamma"] == 0.1
    # The job is in the address: a reload shows the same curve.
    assert re.search(r"\?job=\d+$", page.url)
    page.reload()
    page.wait_for_selector("#curve circle.point")
    assert page.locator("#curve circle.point").count() == 3
    # Put it back for the other tests' orders.
    live.client.patch(
        f"/v1/markets/{live.market_id}",
        headers=live.headers(live.admin_key),
        json={"mechanism": {"gamma": GAMMA}},
    )


def test_buyer_places_an_order_and_watches_it_succeed(page: Any, live: Live) -> None:
    sign_in(page, live, live.buyer_key, "/console/buy")
    page.wait_for_selector(
        "#learner option[value='hetero_dp_logistic']", state="attached"
    )
    # The params form comes from the learner's schema in GET /v1/learners.
    checkbox = page.locator("#param-fit_intercept")
    assert checkbox.get_attribute("type") == "checkbox"
    assert checkbox.is_checked()  # the schema's default
    page.fill("#budget", str(BUDGET))
    page.check("#gamma-fixed")
    page.fill("#gamma", str(GAMMA))
    shot(page, live, "buy")
    page.click("#place-order")
    page.wait_for_url(re.compile(r"/console/orders/\d+$"))
    live.orders["buyer"] = int(page.url.rsplit("/", 1)[1])
    page.wait_for_selector("#model:not([hidden])", timeout=120_000)
    assert page.inner_text("#order-status") == "succeeded"
    assert page.locator("#stages li").count() >= 2  # progress was seen by stage
    # new markets run the strict mode by default (issue 14)
    assert page.inner_text("#guarantee") == "end_to_end"
    assert "saw only costs and public data" in page.inner_text("#guarantee-text")
    rows = page.locator("#coefficients tbody tr")
    assert rows.count() == 31  # 30 Wisconsin features and the intercept
    assert "validation_error" in page.inner_text("#metrics")
    assert f"of {BUDGET:.2f}" in page.inner_text("#payments")
    shot(page, live, "order")


def test_the_estimate_follows_the_stages_progress_rate(page: Any, live: Live) -> None:
    """The rule by hand: fraction 0.2 first seen at t0, 0.6 ten seconds later leaves
    (1 − 0.6)·10/0.4 = 10 s; no estimate while the stage has not moved, within its
    first second, in the queue or while collecting the sellers' reports."""
    sign_in(page, live, live.buyer_key, "/console/buy")
    left = "(s, dt, f) => PM.stageSecondsLeft({stage: s, t0: 0, f0: 0.2}, dt, f)"
    assert page.evaluate(f"({left})('payments', 10000, 0.6)") == 10.0
    assert page.evaluate(f"({left})('releasing', 30000, 0.5)") == 50.0
    assert page.evaluate(f"({left})('payments', 10000, 0.2)") is None
    assert page.evaluate(f"({left})('payments', 500, 0.6)") is None
    assert page.evaluate(f"({left})('queued', 10000, 0.6)") is None
    assert page.evaluate(f"({left})('collecting', 10000, 0.6)") is None
    assert page.evaluate("PM.leftText(10.2)") == "about 10 s left in this stage"
    assert page.evaluate("PM.leftText(600)") == "about 10 min left in this stage"


def test_a_running_order_shows_about_how_long_its_stage_has_left(
    page: Any, live: Live
) -> None:
    """A running order whose payments stage advances 5 % per poll (the order is served
    by a stand-in route, so its pace is known): the page says "about N s left"."""
    polls = {"n": 0}

    def order(route: Any) -> None:
        polls["n"] += 1
        fraction = min(0.9, 0.05 * polls["n"])
        route.fulfill(
            json={
                "id": 987654,
                "market_id": live.market_id,
                "learner": "hetero_dp_logistic",
                "budget": BUDGET,
                "gamma": GAMMA,
                "status": "running",
                "created_at": "2026-01-01T00:00:00Z",
                "progress": {"stage": "payments", "fraction": fraction},
                "error": None,
            }
        )

    sign_in(page, live, live.buyer_key, "/console/buy")
    page.route(re.compile(r".*/v1/orders/987654$"), order)
    page.goto(live.base + "/console/orders/987654")
    page.locator("#order-left", has_text="left").wait_for(timeout=20_000)
    text = page.inner_text("#order-left")
    assert re.fullmatch(r"about \d+ s left in this stage", text), text
    assert "Computing the sellers' payments" in page.inner_text("#order-stage")


def test_a_failed_order_shows_its_error(page: Any, live: Live) -> None:
    oid = live.place_order(budget=0.01)  # γ fixed: the payments exceed the budget
    sign_in(page, live, live.buyer_key, f"/console/orders/{oid}")
    error = page.locator("#order-error")
    error.wait_for()
    assert "over the budget" in error.inner_text()
    assert page.inner_text("#order-status") == "failed"


def _finished_order(live: Live) -> int:
    if "api" not in live.orders:
        live.orders["api"] = live.place_order()
    return live.orders["api"]


def test_admin_sees_the_allocation_histogram_and_ir_scatter(
    page: Any, live: Live
) -> None:
    oid = _finished_order(live)
    sign_in(page, live, live.admin_key, f"/console/markets/{live.market_id}")
    page.click(f"#orders a[href='/console/orders/{oid}']")
    page.wait_for_selector("#summary dt")
    assert "sellers used" in page.inner_text("#summary")
    assert "eligible" not in page.inner_text("#summary")  # not a buyer-visible figure
    assert page.locator("#model").is_hidden()  # the model is the buyer's alone
    page.click(f"#admin-links a[href='/console/orders/{oid}/allocations']")
    page.wait_for_selector("#scatter circle.dot")
    assert page.locator("#scatter circle.dot").count() == N_SELLERS
    assert page.locator("#histogram rect.bar").count() == 12
    assert page.locator("#scatter line.reference").count() == 1
    assert "payment = cost · u(ε)" in page.inner_text("#scatter")
    assert page.inner_text("#ir-summary") == (
        f"IR holds for {N_SELLERS} of {N_SELLERS} sellers."
    )
    shot(page, live, "allocations")


def test_seller_sees_its_earnings_privacy_and_offers(page: Any, live: Live) -> None:
    oid = _finished_order(live)
    key = live.seller_keys[0]
    earnings = live.client.get(
        "/v1/sellers/me/earnings", headers=live.headers(key)
    ).json()
    sign_in(page, live, key, "/console/seller")
    page.wait_for_selector("#earnings tbody tr")
    assert page.inner_text("#total-earned") == f"{earnings['total_payment']:.2f}"
    table = page.inner_text("#earnings")
    assert f"#{oid}" in table
    assert page.locator("#privacy rect.meter-fill").count() == 1
    assert "of 60" in page.inner_text("#privacy")  # the demo's lifetime cap
    assert page.locator("#offers tbody tr").count() == 1
    shot(page, live, "seller")
    page.click("#offers a")
    page.wait_for_selector("#records tbody tr")
    assert page.locator("#records tbody tr").count() == 1  # its one record
    assert "active" in page.inner_text("#offer")
    shot(page, live, "offer")


def test_a_sellers_key_cannot_open_another_sellers_data(page: Any, live: Live) -> None:
    mine, theirs = live.seller_keys[1], live.seller_keys[2]
    own = live.client.get("/v1/sellers/me/offers", headers=live.headers(theirs))
    other_offer = own.json()["items"][0]["id"]
    sign_in(page, live, mine, f"/console/offers/{other_offer}")
    message = page.locator("#message")
    message.wait_for()
    assert "Not found" in message.inner_text()
    assert page.locator("#records tbody tr").count() == 0
    assert page.locator("#offer dt").count() == 0
    # Admin pages refuse the seller before any data is drawn.
    oid = _finished_order(live)
    page.goto(f"{live.base}/console/orders/{oid}/allocations")
    message.wait_for()
    assert "for admins" in message.inner_text()
    assert page.locator("#scatter circle").count() == 0
    # And the API itself refuses, whatever the page does.
    r = live.client.get(f"/v1/offers/{other_offer}", headers=live.headers(mine))
    assert r.status_code == 404
    r = live.client.get(f"/v1/orders/{oid}/allocations", headers=live.headers(mine))
    assert r.status_code == 403


def test_a_buyers_key_cannot_open_another_buyers_order(page: Any, live: Live) -> None:
    oid = _finished_order(live)  # placed by live.buyer_key
    other = live.client.post("/v1/buyers", json={"name": "other-buyer"}).json()
    sign_in(page, live, other["api_key"], f"/console/orders/{oid}")
    message = page.locator("#message")
    message.wait_for()
    assert "Not found" in message.inner_text()
    assert page.inner_text("#order-status") == ""
    assert page.locator("#coefficients tbody tr").count() == 0


def test_a_script_market_name_renders_as_text(page: Any, live: Live) -> None:
    r = live.client.post(
        "/v1/markets",
        headers=live.headers(live.admin_key),
        json={
            "name": XSS_NAME,
            "task": "classification",
            "features": [{"name": "<b>f</b>", "low": 0, "high": 1}],
            "cost_prior": {"family": "uniform", "params": {"low": 0, "high": 1}},
        },
    )
    r.raise_for_status()
    mid = r.json()["id"]
    sign_in(page, live, live.admin_key, "/console/markets")
    cell = page.locator(f"#markets a[href='/console/markets/{mid}']")
    cell.wait_for()
    assert cell.inner_text() == XSS_NAME
    page.goto(f"{live.base}/console/markets/{mid}")
    page.wait_for_selector("#market-name:not(:empty)")
    assert page.inner_text("#market-name") == XSS_NAME
    assert page.evaluate("window.__xss") is None
    assert page.locator("main script, main img").count() == 0
    # This market has no validation set: the trade-off job is refused, with the reason.
    page.click("#run-tradeoff")
    message = page.locator("#message")
    message.wait_for()
    assert "no public validation set" in message.inner_text()


def test_a_party_sees_its_node_status_and_its_keys_only_offer(
    page: Any, live: Live
) -> None:
    """A seller-custody vertical market: the party's console shows its node (connected,
    no fit yet) and its offer's keys (no values: the block stays on its node)."""
    from tests.api.test_party_nodes_api import custody_vertical_market

    admin = live.headers(live.admin_key)
    r = live.client.post("/v1/markets", headers=admin,
                         json=custody_vertical_market(name="nodes"))  # fmt: skip
    assert r.status_code == 201, r.text
    mid = r.json()["id"]
    r = live.client.post("/v1/sellers", json={"name": "party A"})
    assert r.status_code == 201, r.text
    key = r.json()["api_key"]
    r = live.client.post(f"/v1/markets/{mid}/offers", headers=live.headers(key),
                         json={"party": "A", "keys": ["p1", "p2"], "reported_cost": 0.1})  # fmt: skip
    assert r.status_code == 201, r.text
    offer_id = r.json()["id"]
    sign_in(page, live, key, "/console/seller")
    page.wait_for_selector("#nodes tbody tr")
    assert "not registered" in page.inner_text("#nodes")
    node = {
        "party": "A",
        "host": "127.0.0.1",
        "port": 7001,
        "features": ["x1", "x2", "x3"],
    }
    r = live.client.post(
        f"/v1/markets/{mid}/nodes", headers=live.headers(key), json=node
    )
    assert r.status_code == 201, r.text
    page.reload()
    page.wait_for_selector("#nodes tbody tr")
    cells = page.locator("#nodes tbody tr td")
    assert cells.nth(1).inner_text() == "A"
    assert cells.nth(2).inner_text() == "connected"
    assert cells.nth(4).inner_text() == "none yet"
    shot(page, live, "seller-nodes")
    page.goto(f"{live.base}/console/offers/{offer_id}")
    page.wait_for_selector("#records tbody tr")
    assert page.locator("#records tbody tr").count() == 2
    assert "key p1" in page.inner_text("#records")
