"""Issue 14, item 1: consecutive orders on a market whose sellers approach their
lifetime cap must not blow up (reported: payments 2.8 s, 1.2 s, then 66.9 s).

The issue's scenario through the real pipeline and real Myerson payments: a Wisconsin
market with lifetime cap 6 and the default mechanism settings, 14 one-record sellers,
three orders ``budget 20, gamma 1.0``. Work is measured in allocation re-solves (the
payments' unit of work; wall time on a shared machine is not a test figure): the third
order may use at most 3× the first order's re-solves. Every order also runs under a
time budget (``test_time_budget.py``), which bounds any case this does not catch.
"""

from typing import Any

import numpy as np
import pytest

from market.pipeline import numerics
from tests.market.pipeline_helpers import add_sellers, market_body
from tests.market.test_orders_run import Env, env

__all__ = ["env"]


@pytest.mark.slow
def test_third_near_cap_order_costs_at_most_three_times_the_first(
    env: Env, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not database_url.startswith("sqlite"):
        pytest.skip("the numerics do not depend on the backend")
    solves: list[int] = []
    real = numerics.myerson_payments

    def counted(*args: Any, **kwargs: Any) -> Any:
        pay = real(*args, **kwargs)
        solves.append(int(sum(s.n_solves for s in pay.sellers)))
        return pay

    monkeypatch.setattr(numerics, "myerson_payments", counted)
    body = market_body(rng=np.random.default_rng(0), cap=6.0)
    body["mechanism"] = {"mode": "default"}  # the market: default settings
    r = env.client.post("/v1/markets", headers=env.admin, json=body)
    assert r.status_code == 201, r.text
    mid = int(r.json()["id"])
    add_sellers(env.client, mid, 14, rng=np.random.default_rng(0))
    ids = [env.order(mid, budget=20.0, gamma=1.0) for _ in range(3)]
    env.drain()
    statuses = [env.status(i) for i in ids]
    assert [s["status"] for s in statuses] == ["succeeded"] * 3, statuses
    assert len(solves) == 3
    assert solves[2] <= 3 * solves[0], solves
