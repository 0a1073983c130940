"""Stateful property-based API run (T-API-1, issue 14 item 4): schemathesis chains
calls along the OpenAPI links (``api/links.py``: create → read/change), as four
identities (admin, a seller, a buyer, nobody), and runs every response check on each
step. The run must reach markets, offers, orders and jobs through those links (a
``2xx`` on each create and on a read of what was created) with 0 failures.

Which identity makes a call is fixed by the step: mostly the role that owns the
operation, every fourth call one of the four identities in turn, so each operation is
also tried by the wrong role and by nobody (``ignored_auth``).

``positive_data_acceptance`` is excluded, as in the stateless run: the schema cannot
express cross-field rules (``low < high``, a record's length equal to the market's
feature count, labels in ``{-1, +1}``, a learner that serves the market's task), so
schema-valid bodies may get ``422``. ``use_after_free`` is excluded too:
``DELETE /v1/offers/{id}`` *withdraws* an offer (``api.md``): future orders stop using
it, and its owner can still read it with ``"status": "withdrawn"``
(``test_offers_api.py``), which that check reads as a deleted resource still served.

Those cross-field rules also make generated bodies rarely valid: a market needs
``low < high`` for every one of its features, an offer's records one value per feature
inside the bounds. So, as schemathesis's stateful guide suggests for realistic data,
every other market or offer body is made to fit (:func:`_fitting_market`: bounds
ordered, names distinct, the target the task needs, a generous cap;
:func:`_fitting_offer`: one record inside the target market's bounds, read through
the API), and every other order names a learner that serves the market's task
(:func:`_fitting_order`); the other half stays as generated.
"""

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from market import numerics
from tests.api.conftest import Api, build_world, offer_body, run_queued_orders
from tests.market.pipeline_helpers import fake_payments

OWNER = (
    ("/allocations", "admin"),
    ("offers", "seller"),
    ("/sellers/me", "seller"),
    ("orders", "buyer"),
    ("/v1/sellers", "nobody"),
    ("/v1/buyers", "nobody"),
)
"""The identity that owns an operation: the first entry whose text is in its path
(admin otherwise)."""
ROTATION = ("admin", "seller", "buyer", "nobody")
EXAMPLES = int(os.environ.get("PRIVMARKET_STATEFUL_EXAMPLES", "100"))
"""Scenarios (Hypothesis examples) of the run; the default is the recorded run. With
``PRIVMARKET_STATEFUL_REPORT=<path>`` the run writes its figures there as JSON."""


def _fitting_market(body: Any) -> Any:
    """The generated market body with its cross-field rules met (module docstring);
    the prior, mechanism settings and names stay as generated."""
    if not isinstance(body, dict) or not isinstance(body.get("features"), list):
        return body
    for i, f in enumerate(body["features"]):
        low, high = sorted((f["low"], f["high"]))
        f["low"], f["high"] = (low, high) if low < high else (-1.0, 1.0)
        f["name"] = f"{f['name'][:190]}-{i}"
    body["target"] = (
        None if body.get("task") == "classification" else {"low": -1.0, "high": 1.0}
    )
    body.pop("validation", None)
    body["lifetime_epsilon_cap"] = 1e6
    return body


def _fitting_offer(api: Api, market_id: str, headers: dict[str, str]) -> Any:
    """One record at the middle of the market's public bounds (label +1), or
    ``None`` when the market cannot be read."""
    r = api.client.get(f"/v1/markets/{market_id}", headers=headers)
    if r.status_code != 200:
        return None
    m = r.json()
    x = [(f["low"] + f["high"]) / 2 for f in m["features"]]
    target = m.get("target")
    y = 1.0 if target is None else (target["low"] + target["high"]) / 2
    prior = m["cost_prior"]["params"]
    cost = float(prior.get("low", 0.0) or 0.0)
    return {"records": [{"x": x, "y": y}], "reported_cost": cost}


def _fitting_order(api: Api, market_id: str, body: Any, headers: dict[str, str]) -> Any:
    """The generated order body with a learner that serves the market's task and its
    default parameters (``None`` when the market cannot be read; the generated learner
    when none serves the task)."""
    r = api.client.get(f"/v1/markets/{market_id}", headers=headers)
    if r.status_code != 200 or not isinstance(body, dict):
        return None
    task = r.json()["task"]
    learners = api.client.get("/v1/learners", headers=headers).json()["items"]
    name = next(
        (s["name"] for s in learners if task in s["tasks"]), body.get("learner")
    )
    return {**body, "learner": name, "params": {}}


def run_stateful(api: Api, *, examples: int, steps: int = 20) -> Counter[str]:
    """Run the state machine; return counts of ``"<METHOD> <path> <status>"``."""
    world = build_world(api)
    # The seeded market gets two offers, so orders placed on it (reached through the
    # market list's links) can run.
    for who, x in ((world.seller_a, [2.0, 0.5]), (world.seller_b, [8.0, -0.5])):
        r = api.client.post(
            f"/v1/markets/{world.market_id}/offers",
            headers=who,
            json=offer_body(x=x, y=1 if x[0] < 5 else -1),
        )
        assert r.status_code == 201, r.text
    identities = {
        "admin": world.admin,
        "seller": world.seller_a,
        "buyer": world.buyer_a,
        "nobody": {},
    }
    schema = schemathesis.openapi.from_asgi("/openapi.json", api.client.app)
    # Positive data only (negative data is the stateless run's job); credentials come
    # from the identities, never generated.
    schema.config.generation.update(
        modes=[schemathesis.GenerationMode.POSITIVE], with_security_parameters=False
    )
    base = schema.as_state_machine()
    calls: Counter[str] = Counter()
    excluded = [
        schemathesis.checks.positive_data_acceptance,
        schemathesis.checks.use_after_free,
    ]

    class Machine(base):  # type: ignore[misc, valid-type]
        def setup(self) -> None:
            self.step_no = 0

        def _who(self, case: schemathesis.Case) -> str:
            self.step_no += 1
            if self.step_no % 4 == 0:
                return ROTATION[(self.step_no // 4) % 4]
            return next((who for text, who in OWNER if text in case.path), "admin")

        def before_call(self, case: schemathesis.Case) -> None:
            self.auth = identities[self._who(case)]
            post = case.method == "POST"
            if post and case.path == "/v1/markets" and self.step_no % 2 == 0:
                case.body = _fitting_market(case.body)
            if post and case.path.endswith("/offers") and self.step_no % 2 == 0:
                body = _fitting_offer(
                    api, str(case.path_parameters["market_id"]), world.admin
                )
                if body is not None:
                    case.body = body
            if post and case.path.endswith("/orders") and self.step_no % 2 == 0:
                body = _fitting_order(
                    api, str(case.path_parameters["market_id"]), case.body, world.admin
                )
                if body is not None:
                    case.body = body

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            return {"headers": self.auth}

        def after_call(self, response: Any, case: schemathesis.Case) -> None:
            super().after_call(response, case)
            calls[f"{case.method} {case.path} {response.status_code}"] += 1
            if case.path.endswith("/orders") and response.status_code == 202:
                # the payments are the pipeline tests' stand-in (fake_payments, set by
                # the test): this run is about the API, the real ones are tested elsewhere
                run_queued_orders(api)

        def validate_response(
            self,
            response: Any,
            case: schemathesis.Case,
            additional_checks: Any = None,
            **kwargs: Any,
        ) -> None:
            case.validate_response(
                response,
                additional_checks=additional_checks,
                excluded_checks=excluded,
                headers=self.auth,
                transport_kwargs=kwargs or None,
                recorder=self.recorder,
            )

    Machine.run(
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
    )
    return calls


def reached(calls: Counter[str], method: str, path: str) -> int:
    """Successful (``2xx``) calls of one operation."""
    return sum(
        n
        for key, n in calls.items()
        if key.startswith(f"{method} {path} ") and key.rsplit(" ", 1)[1][0] == "2"
    )


@pytest.mark.slow
def test_schemathesis_stateful_reaches_every_resource(
    make_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    api: Api = make_api(rate_limit_reads=0, rate_limit_writes=0)
    monkeypatch.setattr(numerics, "myerson_payments", fake_payments)
    calls = run_stateful(api, examples=EXAMPLES)
    figures: dict[str, Any] = {
        "requests": sum(calls.values()),
        "operations": len({k.rsplit(" ", 1)[0] for k in calls}),
        "server_errors": sum(n for k, n in calls.items() if k.endswith(" 500")),
        "reached": {
            "POST /v1/markets": reached(calls, "POST", "/v1/markets"),
            "GET /v1/markets/{market_id}": reached(
                calls, "GET", "/v1/markets/{market_id}"
            ),
            "POST /v1/markets/{market_id}/offers": reached(
                calls, "POST", "/v1/markets/{market_id}/offers"
            ),
            "GET /v1/offers/{offer_id}": reached(calls, "GET", "/v1/offers/{offer_id}"),
            "POST /v1/markets/{market_id}/orders": reached(
                calls, "POST", "/v1/markets/{market_id}/orders"
            ),
            "GET /v1/orders/{order_id}": reached(calls, "GET", "/v1/orders/{order_id}"),
            "GET /v1/orders/{order_id}/model": reached(
                calls, "GET", "/v1/orders/{order_id}/model"
            ),
            "GET /v1/orders/{order_id}/allocations": reached(
                calls, "GET", "/v1/orders/{order_id}/allocations"
            ),
            "POST /v1/markets/{market_id}/tradeoff": reached(
                calls, "POST", "/v1/markets/{market_id}/tradeoff"
            ),
            "GET /v1/jobs/{job_id}": reached(calls, "GET", "/v1/jobs/{job_id}"),
        },
    }
    report = os.environ.get("PRIVMARKET_STATEFUL_REPORT")
    if report:  # the figures recorded in benchmarks/RESULTS.md
        figures["calls"] = dict(sorted(calls.items()))
        Path(report).write_text(json.dumps(figures, indent=1))
    assert figures["server_errors"] == 0
    # markets, offers, orders and jobs: created and read through the links (the
    # order's model and allocations are reported, not required: an order on a market
    # with fewer than two usable offers fails, and its model read is then a 409)
    optional = {
        "GET /v1/orders/{order_id}/model",
        "GET /v1/orders/{order_id}/allocations",
    }
    required = {k: n for k, n in figures["reached"].items() if k not in optional}
    assert all(n > 0 for n in required.values()), figures
