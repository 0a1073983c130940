"""Three orders in a row on a near-cap market, through the API.

The near-cap market: Wisconsin, lifetime cap 6, the default settings of the time
(mode ``default``, ``k = 4``, ``lam = 0.01``, ``mu = 0.1``, ``sigma = 1``), 14
one-record sellers (costs ~ U[0.05, 0.95]), three orders ``budget 20, gamma 1.0``, run
by a worker with the real Myerson payments (in this process: ≤ 64 sellers). Cap 6 is
below the smallest cap the door now accepts for these settings (6.52), so the market
is created with 20 and set to 6 in the database, as one stored before that rule.

Per order it prints the payments' wall and CPU seconds, the re-solves, the a-steps of
the candidate-range searches (base allocation excluded) and whether every search closed
its certificate.

Usage: ``python benchmarks/near_cap_orders.py --seeds 1 2 4 [--cap 6]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

import numpy as np
from sqlmodel import Session

from api.main import create_app
from market import numerics
from market.access import accounts
from market.runtime import worker
from market.store import Market, Role, create_all, make_engine, session_scope
from mechanisms.allocation import _eta_search
from tests.api.conftest import TestClient, fast_settings
from tests.market.pipeline_helpers import add_sellers, market_body


def run(seed: int, cap: float) -> list[dict[str, Any]]:
    """The three orders of the module docstring; one row per order's payments."""
    url = f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    engine = make_engine(url)
    create_all(engine)
    engine.dispose()
    settings = fast_settings(url)
    rows: list[dict[str, Any]] = []
    searches: list[tuple[int, bool]] = []
    real_search, real_pay = _eta_search.solve_in_range, numerics.myerson_payments

    def counted_search(*args: Any, **kwargs: Any) -> Any:
        out = real_search(*args, **kwargs)
        searches.append((out[0].n_evals, out[0].closed))
        return out

    def counted_payments(*args: Any, **kwargs: Any) -> Any:
        searches.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        pay = real_pay(*args, **kwargs)
        rows.append(
            {
                "seed": seed,
                "sellers": len(pay.sellers),
                "eps_max": float(kwargs["eps_max"][0]),
                "wall_s": time.perf_counter() - t0,
                "cpu_s": time.process_time() - c0,
                "re_solves": int(sum(s.n_solves for s in pay.sellers)),
                "a_steps": sum(n for n, _ in searches),
                "all_closed": all(ok for _, ok in searches),
                "base": str(pay.allocation.status),
            }
        )
        return pay

    _eta_search.solve_in_range = counted_search  # type: ignore[assignment]
    numerics.myerson_payments = counted_payments  # type: ignore[assignment]
    try:
        with TestClient(create_app(settings)) as client:
            app_engine = client.app.state.engine  # type: ignore[attr-defined]
            with session_scope(app_engine, write=True) as s:
                _, key = accounts.create_account(
                    s, role=Role.ADMIN, name="root", settings=settings
                )
            admin = {"Authorization": f"Bearer {key}"}
            body = market_body(rng=np.random.default_rng(seed), cap=20.0)
            body["mechanism"] = {"mode": "default", "lam": 0.01, "k": 4.0}
            r = client.post("/v1/markets", headers=admin, json=body)
            assert r.status_code == 201, r.text
            mid = int(r.json()["id"])
            with Session(app_engine) as s:
                market = s.get(Market, mid)
                assert market is not None
                market.lifetime_epsilon_cap = cap
                s.add(market)
                s.commit()
            add_sellers(client, mid, 14, rng=np.random.default_rng(seed))
            buyer = {
                "Authorization": "Bearer "
                + client.post("/v1/buyers", json={"name": "b"}).json()["api_key"]
            }
            order = {"learner": "hetero_dp_logistic", "budget": 20.0, "gamma": 1.0}
            for _ in range(3):
                r = client.post(f"/v1/markets/{mid}/orders", headers=buyer, json=order)
                assert r.status_code == 202, r.text
            w = worker.Worker(app_engine, lease_seconds=3600)
            while w.run_once():
                pass
    finally:
        _eta_search.solve_in_range = real_search  # type: ignore[assignment]
        numerics.myerson_payments = real_pay  # type: ignore[assignment]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--cap", type=float, default=6.0)
    args = parser.parse_args()
    print("| seed | order | sellers | ε_max | payments wall s | CPU s | re-solves "
          "| a-steps | all closed | base status |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        for k, row in enumerate(run(seed, args.cap), start=1):
            print(
                f"| {seed} | {k} | {row['sellers']} | {row['eps_max']:.4g} "
                f"| {row['wall_s']:.2f} | {row['cpu_s']:.2f} | {row['re_solves']} "
                f"| {row['a_steps']} | {row['all_closed']} | {row['base']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
