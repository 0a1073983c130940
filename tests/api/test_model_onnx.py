"""``GET /v1/orders/{id}/model.onnx``: the JSON model's linear predictor as ONNX."""

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest

from market.orders.onnx_model import model_to_onnx
from tests.api.conftest import Api
from tests.api.test_flow import _poll
from tests.market.pipeline_helpers import add_sellers, market_body, stand_in_payments

__all__ = ["stand_in_payments"]

ort = pytest.importorskip("onnxruntime")


def _run(data: bytes, X: np.ndarray) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(data)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {"X": X}), strict=True))


def test_classification_graph_scores_like_the_json_model() -> None:
    model = {"learner": "hetero_dp_logistic", "coefficients": [0.5, -2.0, 1e-3],
             "intercept": 0.25, "classes": [-1, 1], "feature_names": ["a", "b", "c"]}  # fmt: skip
    data = model_to_onnx(model, name="t")
    proto = onnx.load_from_string(data)
    onnx.checker.check_model(proto, full_check=True)
    meta = {p.key: p.value for p in proto.metadata_props}
    assert meta["feature_names"] == "a,b,c"
    X = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [2.0, 0.5, 1000.0]])
    out = _run(data, X)
    # by hand: 0.5·x₁ − 2·x₂ + 1e-3·x₃ + 0.25
    score = np.array([0.75, -1.75, 1.0 - 1.0 + 1.0 + 0.25])
    assert out["score"].ravel() == pytest.approx(score, rel=1e-12)
    assert out["probability"].ravel() == pytest.approx(1 / (1 + np.exp(-score)))
    assert out["label"].ravel().tolist() == [1.0, -1.0, 1.0]


def test_regression_graph_predicts_without_an_intercept() -> None:
    model = {"learner": "uldp_sparse_linear", "coefficients": [3.0, 0.0],
             "intercept": None}  # fmt: skip
    out = _run(model_to_onnx(model, name="t"), np.array([[1.0, 7.0], [-2.0, 1.0]]))
    assert list(out) == ["prediction"]
    assert out["prediction"].ravel().tolist() == [3.0, -6.0]


def test_a_model_without_a_flat_linear_predictor_is_refused() -> None:
    with pytest.raises(ValueError, match="coefficients"):
        model_to_onnx({"coefficients": [[0.1, 0.2]]}, name="t")
    with pytest.raises(ValueError, match="coefficients"):
        model_to_onnx({"intercept": 1.0}, name="t")


def test_the_buyer_downloads_an_onnx_model_that_predicts_like_the_json_one(
    make_api: Callable[..., Api], rng: np.random.Generator, stand_in_payments: Any
) -> None:
    api = make_api(workers=1, job_lease_seconds=10)
    admin = api.admin()
    mid = api.client.post(
        "/v1/markets", headers=admin, json=market_body(rng=rng, cap=10.0)
    ).json()["id"]
    add_sellers(api.client, mid, 20, rng=rng)
    buyer = api.register("buyer", "b")
    other = api.register("buyer", "c")
    r = api.client.post(
        f"/v1/markets/{mid}/orders",
        headers=buyer,
        json={"learner": "hetero_dp_logistic", "budget": 40.0, "gamma": 1.0},
    )
    oid = r.json()["id"]
    st, _ = _poll(api, oid, buyer, 60)
    assert st["status"] == "succeeded", st
    r = api.client.get(f"/v1/orders/{oid}/model.onnx", headers=buyer)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/octet-stream"
    assert f"order-{oid}-model.onnx" in r.headers["content-disposition"]
    onnx.checker.check_model(onnx.load_from_string(r.content), full_check=True)
    model = api.client.get(f"/v1/orders/{oid}/model", headers=buyer).json()
    X = rng.normal(size=(50, len(model["coefficients"])))
    want = X @ np.array(model["coefficients"]) + model["intercept"]
    out = _run(r.content, X)
    assert out["score"].ravel() == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert out["label"].ravel().tolist() == np.where(want >= 0, 1.0, -1.0).tolist()
    # its buyer only: another buyer gets 404, a seller or admin 403
    assert (
        api.client.get(f"/v1/orders/{oid}/model.onnx", headers=other).status_code == 404
    )
    assert (
        api.client.get(f"/v1/orders/{oid}/model.onnx", headers=admin).status_code == 403
    )
