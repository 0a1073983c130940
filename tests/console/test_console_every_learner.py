"""A buyer orders every registered learner from the console with the form's defaults,
on a market that can take it, and gets the model; a cancelled order charges nothing;
the API docs render with the network cut off.

One market per kind of data: the live Wisconsin market (classification, one record per
seller), a quantile market, a regression market whose sellers hold several records each,
and a vertical market of three parties. Each market's ``γ`` is the form's default.
"""

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import onnx
import pytest

from api.demo import LocalServer
from api.main import create_app
from market.access import accounts
from market.store import Role, session_scope, upgrade_to_head
from tests.api.conftest import fast_settings
from tests.console.conftest import Live
from tests.console.test_console_browser import shot, sign_in

ORDER_BUDGET = 1000.0
PRIOR = {"family": "uniform", "params": {"low": 0.0, "high": 0.1}}
MECHANISM = {"gamma": 0.01, "eps_avg_max": 10.0}


def _bulk(live: Live, mid: int, rows: list[dict[str, Any]]) -> None:
    r = live.client.post(
        f"/v1/markets/{mid}/offers:bulk",
        headers=live.headers(live.admin_key),
        json={"offers": rows},
    )
    assert r.status_code == 201, r.text


def _create(live: Live, **body: Any) -> int:
    base = {"cost_prior": PRIOR, "mechanism": MECHANISM, "lifetime_epsilon_cap": 60.0}
    r = live.client.post(
        "/v1/markets", headers=live.headers(live.admin_key), json=base | body
    )
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _linear_market(
    live: Live, task: str, *, d: int, n_sellers: int, per_seller: int, seed: int
) -> int:
    rng = np.random.default_rng(seed)
    mid = _create(
        live,
        name=f"{task}-market",
        task=task,
        features=[{"name": f"x{j}", "low": -1.0, "high": 1.0} for j in range(d)],
        target={"low": -4.0, "high": 4.0},
        out_of_bounds="clip",
    )
    w = np.zeros(d)
    w[:2] = [1.5, -1.0]
    rows = []
    for s in range(n_sellers):
        X = rng.uniform(-1, 1, size=(per_seller, d))
        y = X @ w + 0.3 * rng.standard_normal(per_seller)
        rows.append(
            {
                "seller_name": f"{task}-seller-{s}",
                "records": [
                    {"x": x.tolist(), "y": float(t)} for x, t in zip(X, y, strict=True)
                ],
                "reported_cost": float(rng.uniform(0, 0.1)),
            }
        )
    _bulk(live, mid, rows)
    return mid


def _vertical_market(live: Live, *, n: int = 120, seed: int = 3) -> int:
    parties = [
        {"name": "clinic", "features": ["x1", "x2"]},
        {"name": "insurer", "features": ["x3", "x4"]},
        {"name": "registry", "features": ["x5", "x6"]},
    ]
    mid = _create(
        live,
        name="vertical-market",
        task="classification",
        features=[{"name": f"x{j}", "low": -4.0, "high": 4.0} for j in range(1, 7)],
        partition="vertical",
        record_key="person_id",
        parties=parties,
        mechanism={"gamma": 0.05},
    )
    rng = np.random.default_rng(seed)
    X = np.clip(rng.standard_normal((n, 6)), -4, 4)
    eta = X @ np.array([1.0, -1.0, 0.5, 0.5, -0.5, 0.25])
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-eta)), 1.0, -1.0)
    for k, party in enumerate(parties):
        records = []
        for i in range(n):
            rec: dict[str, Any] = {
                "key": f"p{i:04d}",
                "x": X[i, 2 * k : 2 * k + 2].tolist(),
            }
            if k == 0:
                rec["y"] = float(y[i])
            records.append(rec)
        key = live.client.post("/v1/sellers", json={"name": party["name"]}).json()
        r = live.client.post(
            f"/v1/markets/{mid}/offers",
            headers=live.headers(key["api_key"]),
            json={
                "party": party["name"],
                "records": records,
                "reported_cost": 0.03 * (k + 1),
            },
        )
        assert r.status_code == 201, r.text
    return mid


@pytest.fixture(scope="module")
def markets(live: Live) -> dict[str, int]:
    """A market for each kind of learner, by learner name."""
    quantile = _linear_market(live, "quantile", d=3, n_sellers=40, per_seller=1, seed=1)
    regression = _linear_market(
        live, "regression", d=10, n_sellers=30, per_seller=6, seed=2
    )
    vertical = _vertical_market(live)
    return {
        "hetero_dp_logistic": live.market_id,
        "ldp_missing_logistic": live.market_id,
        "onebit_quantile": quantile,
        "uldp_sparse_linear": regression,
        "secure_vertical_logistic": vertical,
    }


def test_every_registered_learner_has_a_market_here(
    live: Live, markets: dict[str, int]
) -> None:
    catalogue = live.client.get("/v1/learners").json()["items"]
    assert {item["name"] for item in catalogue} == set(markets)


@pytest.mark.parametrize(
    "learner",
    [
        "hetero_dp_logistic",
        "ldp_missing_logistic",
        "onebit_quantile",
        "uldp_sparse_linear",
        "secure_vertical_logistic",
    ],
)
def test_buyer_orders_each_learner_with_the_forms_defaults(
    page: Any, live: Live, markets: dict[str, int], learner: str
) -> None:
    mid = markets[learner]
    sign_in(page, live, live.buyer_key, f"/console/buy?market={mid}")
    page.wait_for_selector(f"#learner option[value='{learner}']", state="attached")
    # Only the learners this market can take are offered.
    offered = set(
        page.eval_on_selector_all("#learner option", "os => os.map(o => o.value)")
    )
    wanted = {
        item["name"]
        for item in live.client.get(f"/v1/learners?market_id={mid}").json()["items"]
    }
    assert offered == wanted
    page.select_option("#learner", learner)
    page.wait_for_selector("#params .param, #params p.hint")
    # Labels are words, the technical name a hint; no specification section numbers.
    params_text = page.inner_text("#params")
    assert "§" not in params_text
    assert "spec" not in params_text.lower()
    # The defaults make a valid form: no empty required box (a null default is an
    # optional empty field).
    assert page.evaluate("document.getElementById('order-form').checkValidity()")
    if learner == "onebit_quantile":
        assert page.input_value("#param-interval-low") == ""
        assert page.get_attribute("#param-interval-low", "required") is None
    if learner == "uldp_sparse_linear":
        assert page.input_value("#param-k_sel") == ""
        assert page.get_attribute("#param-k_sel", "required") is None
    page.fill("#budget", str(ORDER_BUDGET))
    shot(page, live, f"buy-{learner}")
    page.click("#place-order")
    page.wait_for_url(re.compile(r"/console/orders/\d+$"), timeout=30_000)
    oid = int(page.url.rsplit("/", 1)[1])
    # The order page says what was ordered, where and for how much.
    page.wait_for_selector("#order-facts dt")
    facts = page.inner_text("#order-facts")
    assert learner in facts
    assert f"{ORDER_BUDGET:.2f}" in facts
    page.locator("#model:not([hidden]), #order-error:not([hidden])").first.wait_for(
        timeout=240_000
    )
    assert page.locator("#order-error").is_hidden(), page.inner_text("#order-error")
    assert page.inner_text("#order-status") == "succeeded"
    assert "_" not in page.inner_text("#order-stage")  # stage in words, not its id
    with page.expect_download() as info:
        page.click("#download-model")
    path = info.value.path()
    model = json.loads(Path(path).read_text())
    api_model = live.client.get(
        f"/v1/orders/{oid}/model", headers=live.headers(live.buyer_key)
    ).json()
    assert model == api_model
    assert model["payments"]["total"] <= ORDER_BUDGET
    assert len(model["coefficients"]) >= 1
    # The same linear predictor as ONNX: a valid graph that scores like the JSON model.
    with page.expect_download() as info:
        page.click("#download-onnx")
    assert info.value.suggested_filename == f"privmarket-order-{oid}-model.onnx"
    graph = Path(info.value.path()).read_bytes()
    onnx.checker.check_model(onnx.load_from_string(graph), full_check=True)
    try:
        import onnxruntime as ort  # a dev dependency: compare when installed
    except ImportError:
        return
    X = np.random.default_rng(0).normal(size=(20, len(model["coefficients"])))
    want = X @ np.array(model["coefficients"]) + (model["intercept"] or 0.0)
    session = ort.InferenceSession(graph)
    (got,) = session.run([session.get_outputs()[0].name], {"X": X})
    assert got.ravel() == pytest.approx(want, rel=1e-9, abs=1e-12)


@pytest.fixture(scope="module")
def idle(tmp_path_factory: pytest.TempPathFactory, live: Live) -> Iterator[Live]:
    """A second service with no worker, so an order stays queued until cancelled."""
    tmp = tmp_path_factory.mktemp("idle")
    url = f"sqlite:///{tmp / 'idle.db'}"
    upgrade_to_head(url)
    settings = fast_settings(url, workers=0)
    app = create_app(settings)
    with session_scope(app.state.engine, write=True) as s:
        _, admin_key = accounts.create_account(
            s, role=Role.ADMIN, name="idle-admin", settings=settings
        )
    with LocalServer(app) as base, httpx.Client(base_url=base, timeout=30) as c:
        buyer = c.post("/v1/buyers", json={"name": "idle-buyer"}).json()
        idle = Live(
            base=base,
            client=c,
            admin_key=admin_key,
            buyer_key=buyer["api_key"],
            seller_keys=[],
            market_id=0,
            shots=live.shots,
        )
        idle.market_id = _linear_market(
            idle, "quantile", d=2, n_sellers=5, per_seller=1, seed=4
        )
        yield idle


def test_a_cancelled_order_charges_nothing(page: Any, idle: Live) -> None:
    sign_in(page, idle, idle.buyer_key, f"/console/buy?market={idle.market_id}")
    page.wait_for_selector("#learner option[value='onebit_quantile']", state="attached")
    page.click("#place-order")
    page.wait_for_url(re.compile(r"/console/orders/\d+$"))
    oid = int(page.url.rsplit("/", 1)[1])
    button = page.locator("#cancel-order")
    button.wait_for()
    assert "Waiting in the queue" in page.inner_text("#order-stage")
    shot(page, idle, "order-queued")
    button.click()
    error = page.locator("#order-error")
    error.wait_for()
    assert "nothing was charged" in error.inner_text()
    assert page.inner_text("#order-status") == "cancelled"
    assert button.is_hidden()
    admin = idle.headers(idle.admin_key)
    order = idle.client.get(f"/v1/orders/{oid}", headers=admin).json()
    assert order["status"] == "cancelled"
    allocations = idle.client.get(f"/v1/orders/{oid}/allocations", headers=admin).json()
    assert allocations["total_payment"] == 0
    assert allocations["items"] == []


@pytest.mark.parametrize(
    ("path", "ready"), [("/docs", ".swagger-ui .info .title"), ("/redoc", "h1")]
)
def test_api_docs_render_with_the_network_cut_off(
    browser: Any, live: Live, path: str, ready: str
) -> None:
    context = browser.new_context()
    outside: list[tuple[str, str]] = []

    def only_same_origin(route: Any) -> None:
        if route.request.url.startswith(live.base):
            route.continue_()
        else:
            outside.append((route.request.resource_type, route.request.url))
            route.abort()

    context.route("**/*", only_same_origin)
    page = context.new_page()
    try:
        page.goto(live.base + path)
        page.wait_for_selector(ready, timeout=20_000)
        assert "privmarket" in page.inner_text(ready).lower()
    finally:
        context.close()
    # Scripts, styles and fonts all come from this service. ReDoc's bundle still asks
    # for its "powered by" logo image from its CDN; the page renders without it.
    needed = [(kind, url) for kind, url in outside if kind != "image"]
    assert needed == [], f"{path} asked other origins for {needed}"
    if path == "/docs":
        assert outside == [], f"/docs asked other origins for {outside}"
