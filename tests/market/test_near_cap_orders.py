"""Issue 14, item 1: consecutive orders on a market whose sellers approach their
lifetime cap must not blow up (reported: payments 2.8 s, 1.2 s, then 66.9 s).

The issue's scenario through the real pipeline and real Myerson payments: a Wisconsin
market with lifetime cap 6 and the default mechanism settings of the time (mode
``default``, ``k = 4``, ``lam = 0.01``), 14 one-record sellers, three orders
``budget 20, gamma 1.0``. Sellers and costs from seed 1, with which the third order's
payments took 281 s (against 1.5 s for the first) before the fix.

The cause: by the third order every remaining seller's ``ε_i^max`` binds, the caps
``min(k/m, ε_i^max/η)`` move with ``η``, and the candidate-range branch-and-bound only had
a first-order cell bound there; the base allocation and each of the ~170 payment
re-solves ran to ``MAX_EVALS`` a-steps without certifying (status ``uncertified``).
The same number of re-solves, each ~100× the work: counting re-solves alone (the first
version of this test) does not see it. So the test asserts what failed — every
allocation solve of the payments closes its certificate before ``MAX_EVALS`` — and
the issue's figure on CPU time (``time.process_time``, not wall clock: other processes
on a shared machine do not count) of the payments: the third order within 3× the
first (measured after the fix: 1.7–2×; before: ~190×).

Cap 6 is below what the door now accepts for these settings (6.52, issue 14 item 3),
so the market is created through the API with that cap and then set to 6 in the
database, as a market stored before that rule would be.
"""

import time
from typing import Any

import numpy as np
import pytest
from sqlmodel import Session

from market import numerics
from market.store import Market
from mechanisms.allocation import _eta_search
from mechanisms.allocation._range import _candidate_range
from mechanisms.payments._resolve import _range_resolve
from tests.market.pipeline_helpers import add_sellers, market_body
from tests.market.test_orders_run import Env, env

__all__ = ["env"]


@pytest.mark.slow
def test_third_near_cap_order_costs_at_most_three_times_the_first(
    env: Env, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not database_url.startswith("sqlite"):
        pytest.skip("the numerics do not depend on the backend")
    orders: list[dict[str, Any]] = []
    solves: list[tuple[int, bool]] = []  # (a-steps, closed) of every range search
    real_search = _eta_search.solve_in_range
    real_lean = _range_resolve.resolve_one_seller  # payment re-solves (lean path)
    real_pay = numerics.myerson_payments

    def counted_search(*args: Any, **kwargs: Any) -> Any:
        out = real_search(*args, **kwargs)
        solves.append((out[0].n_evals, out[0].closed))
        return out

    def counted_lean(*args: Any, **kwargs: Any) -> Any:
        out = real_lean(*args, **kwargs)
        solves.append((out.n_evals, out.closed))
        return out

    def counted_payments(*args: Any, **kwargs: Any) -> Any:
        solves.clear()
        t0 = time.process_time()
        pay = real_pay(*args, **kwargs)
        orders.append(
            {
                "cpu": time.process_time() - t0,
                "re_solves": int(sum(s.n_solves for s in pay.sellers)),
                "searches": list(solves),
                "sellers": len(pay.sellers),
                "base": str(pay.allocation.status),
            }
        )
        return pay

    monkeypatch.setattr(_eta_search, "solve_in_range", counted_search)
    monkeypatch.setattr(_range_resolve, "resolve_one_seller", counted_lean)
    monkeypatch.setattr(numerics, "myerson_payments", counted_payments)
    assert numerics.SERIAL_PAYMENTS_MAX >= 14  # payments in this process (counted)
    body = market_body(rng=np.random.default_rng(1), cap=6.52)
    body["mechanism"] = {"mode": "default", "lam": 0.01, "k": 4.0}
    r = env.client.post("/v1/markets", headers=env.admin, json=body)
    assert r.status_code == 201, r.text
    mid = int(r.json()["id"])
    with Session(env.engine) as s:  # the cap, stored before the door rule
        market = s.get(Market, mid)
        assert market is not None
        market.lifetime_epsilon_cap = 6.0
        s.add(market)
        s.commit()
    add_sellers(env.client, mid, 14, rng=np.random.default_rng(1))
    ids = [env.order(mid, budget=20.0, gamma=1.0) for _ in range(3)]
    env.drain()
    statuses = [env.status(i) for i in ids]
    assert [s["status"] for s in statuses] == ["succeeded"] * 3, statuses
    assert len(orders) == 3
    # Near the cap: fewer sellers are left each time (14, then 9, then 6 here).
    assert orders[0]["sellers"] == 14, orders
    assert orders[2]["sellers"] < 10, orders
    for o in orders:
        assert o["base"] == "optimal", o["base"]
        assert o["searches"], "payments re-solved nothing"
        worst = max(n for n, _ in o["searches"])
        assert all(closed for _, closed in o["searches"]), worst
        assert worst < _candidate_range.MAX_EVALS
    assert orders[2]["cpu"] <= 3.0 * orders[0]["cpu"], [o["cpu"] for o in orders]
