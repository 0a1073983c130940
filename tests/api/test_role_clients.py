"""``BuyerClient`` and ``AdminClient`` against a live service (uvicorn in a thread, one
worker thread, fresh SQLite): the README's quick start in Python, a cancelled order that
charges nothing, and the API's refusals surfacing as ``ApiError`` with its message."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from api.client import AdminClient, ApiError, BuyerClient
from api.client.buyer import OrderFailed, stage_words
from api.demo import LocalServer
from api.main import create_app
from market.access import accounts
from market.store import Role, session_scope, upgrade_to_head
from tests.api.conftest import fast_settings


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tmp: Path = tmp_path_factory.mktemp("clients")
    url = f"sqlite:///{tmp / 'clients.db'}"
    upgrade_to_head(url)
    settings = fast_settings(url, workers=1, job_lease_seconds=60)
    app = create_app(settings)
    with session_scope(app.state.engine, write=True) as s:
        _, admin_key = accounts.create_account(
            s, role=Role.ADMIN, name="admin", settings=settings
        )
    with LocalServer(app) as base:
        yield base, admin_key


def _rows(n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    w = np.array([1.5, -1.0])
    rows = []
    for j in range(n):
        x = rng.uniform(-1, 1, size=2)
        y = 1 if x @ w + 0.1 * rng.normal() > 0 else -1
        rows.append(
            {
                "seller_name": f"s{j}",
                "records": [{"x": x.tolist(), "y": y}],
                "reported_cost": float(rng.uniform(0, 0.1)),
            }
        )
    return rows


def _market(admin: AdminClient, n: int = 40) -> int:
    market = admin.create_market(
        name="clients",
        task="classification",
        features=[
            {"name": "a", "low": -1, "high": 1},
            {"name": "b", "low": -1, "high": 1},
        ],
        cost_prior={"family": "uniform", "params": {"low": 0.0, "high": 0.1}},
        mechanism={"gamma": 0.01, "eps_avg_max": 10.0},
    )
    added = admin.add_offers(market["id"], _rows(n, np.random.default_rng(1)))
    assert added["created"] == n
    assert all(item["api_key"].startswith("pm_") for item in added["items"])
    return int(market["id"])


def test_order_to_model_in_a_few_lines(server: tuple[str, str]) -> None:
    base, admin_key = server
    with AdminClient(base, admin_key) as admin:
        mid = _market(admin)
        assert admin.market(mid)["name"] == "clients"
        changed = admin.update_market(mid, mechanism={"gamma": 0.02})
        assert changed["mechanism"]["gamma"] == 0.02
    seen: list[dict[str, Any]] = []
    with BuyerClient.register(base, name="buyer") as buyer:
        assert buyer.api_key is not None
        assert buyer.api_key.startswith("pm_")
        names = {item["name"] for item in buyer.learners(mid)}
        assert "hetero_dp_logistic" in names
        assert "secure_vertical_logistic" not in names
        oid = buyer.place_order(mid, "hetero_dp_logistic", budget=50, gamma=0.01)
        done = buyer.wait(oid, progress=seen.append, interval=0.1, timeout=120)
        assert done["status"] == "succeeded"
        model = buyer.model(oid)
        assert buyer.orders()[0]["id"] == oid
        raw = httpx.get(
            f"{base}/v1/orders/{oid}/model",
            headers={"Authorization": f"Bearer {buyer.api_key}"},
        )
    # the client hands back exactly the API's model (its values are DP-noisy: with
    # 40 sellers even their signs are not guaranteed, so none are asserted)
    assert raw.status_code == 200
    assert model == raw.json()
    assert len(model["coefficients"]) == 2
    assert all(np.isfinite(model["coefficients"]))
    assert model["payments"]["total"] <= 50 + 1e-9
    assert seen, "the progress callback was never called"
    assert seen[-1]["status"] == "succeeded"
    assert len(
        {(v["progress"]["stage"], v["progress"]["fraction"]) for v in seen}
    ) == len(seen)


def test_cancelled_order_charges_nothing(server: tuple[str, str]) -> None:
    base, admin_key = server
    with (
        AdminClient(base, admin_key) as admin,
        BuyerClient.register(base, name="b2") as buyer,
    ):
        mid = _market(admin, n=30)
        # A queued order behind a long one would be cancelled at once; here the worker
        # may already have claimed it, so both outcomes are accepted, never a charge.
        oid = buyer.place_order(mid, "hetero_dp_logistic", budget=50, gamma=0.01)
        view = buyer.cancel(oid)
        assert view["status"] in ("cancelled", "queued", "running")
        with pytest.raises(OrderFailed) as failed:
            buyer.wait(oid, interval=0.1, timeout=120)
        assert failed.value.order["status"] == "cancelled"
        assert admin.allocations(oid)["total_payment"] == 0
        with pytest.raises(ApiError) as refused:
            buyer.model(oid)
        assert refused.value.status == 409


def test_refusals_are_api_errors_naming_the_field(server: tuple[str, str]) -> None:
    base, admin_key = server
    with (
        AdminClient(base, admin_key) as admin,
        BuyerClient.register(base, name="b3") as buyer,
    ):
        mid = _market(admin, n=5)
        with pytest.raises(ApiError) as err:
            buyer.place_order(mid, "secure_vertical_logistic", budget=10, gamma=0.01)
        assert err.value.status == 422
        assert "learner" in str(err.value.detail)
        with pytest.raises(ApiError) as err:
            admin.create_market(name="x", task="classification")
        assert err.value.status == 422
        assert "features" in str(err.value.detail)


def test_stage_words() -> None:
    assert stage_words("choosing_gamma") == "choosing γ for the budget"
    assert stage_words("some_new_stage") == "some new stage"


def test_the_progress_bar_shows_the_stage_in_words_and_the_percentage() -> None:
    from api.client.buyer import _TqdmProgress

    bar = _TqdmProgress()
    bar(
        {
            "id": 7,
            "status": "running",
            "progress": {"stage": "payments", "fraction": 0.5},
        }
    )
    assert bar.bar.n == 50
    assert bar.bar.desc.startswith("order 7: computing the sellers' payments")
    bar.close()
