"""The stages of one order outside the payments' numerics, at sizes where the real
payments would take too long to wait for: everything real except each seller's
payment, which is a synthetic number.

The deployment is the one of ``benchmarks/e2e_order.py`` (a private PostgreSQL schema,
``dask scheduler`` + ``dask worker`` processes on loopback, ``privmarket serve``), the
market a ``strict`` Wisconsin market by default, the ``m`` sellers ingested through
``POST /v1/markets/{id}/offers:bulk`` and the order placed through the API. The order
is then run by the worker's own code (``market.runtime.worker.Worker.run_once``:
claim, heartbeat, loading, the real allocation, payments, the learner's release,
settlement, progress writes) in this process, with one substitution:
``market.numerics.myerson_payments`` builds the real payment job
(``mechanisms.payments.payment_job``: validation, the base's stale nodes), maps the
sellers over the Dask cluster with ``mechanisms.payments._executors.map_chunks`` as the
real payments do (the job scattered to the workers, chunks back as per-seller
``SellerPayment`` objects with certificates), but each seller's payment there is
``ε_i·(c_i + (c̄ − c_i)/2)`` instead of the Myerson integral, and assembles them with
the real ``collect``. What follows (money rounding, budget check, release, settlement
of ``m`` allocation and ``2m`` ledger rows, the summary and model) is the real code.
Then the reads of ``e2e_order.py``: the model endpoint, the first allocation page,
every page, the console's allocation page.

Prints one JSON line per size (seconds; ``payments`` is the synthetic stage, split
into ``pay:job``, ``pay:dask`` and ``pay:collect``; ``pay:result_bytes`` is the pickled
size of the per-seller results) and the log-log slopes.

Run: ``python benchmarks/e2e_stages.py --sizes 1000 10000 100000
--postgres postgresql+psycopg://postgres@127.0.0.1:5432/test``
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import e2e_order

PAY: dict[str, float] = {}
"""Sub-timings of the last synthetic payments."""


def _synthetic_chunk(job: Any, sellers: list[int]) -> list[Any]:
    """Per-seller results shaped as the real ones, with a synthetic payment."""
    from mechanisms.payments import SellerPayment
    from mechanisms.payments._seller_certificate import SellerCertificate

    eps = np.asarray(job.base.epsilon_total, dtype=float)
    high = float(job.prior.high) if np.isfinite(float(job.prior.high)) else 1.0
    out = []
    for i in sellers:
        c, e = float(job.reports[i]), float(eps[i])
        cert = SellerCertificate(
            method="shortcut_certified", allocation_status="optimal",
            rule_certified=True, n_evaluations=40, n_shortcut=36, n_full=4,
            n_uncertified=0, max_kkt_residual=3e-8, max_range_gap=1e-9,
            shortcut_checked=i % 300 == 0, shortcut_mismatch=0.0,
            monotonicity_violation=0.0, quad_error=1e-7 * e,
        )  # fmt: skip
        out.append(SellerPayment(
            index=i, report=c, epsilon=e, payment=e * (c + (high - c) / 2),
            integral=e * (high - c) / 2, critical_cost=high, quad_error=1e-7 * e,
            converged=True, n_solves=40, monotonicity_violation=0.0, seconds=0.01,
            n_fast=36, verified=i % 300 == 0, certificate=cert,
        ))  # fmt: skip
    return out


def synthetic_payments(
    X: Any,
    y: Any,
    costs: Any,
    *,
    prior: Any,
    config: Any,
    eps_max: Any,
    allocation: Any = None,
    progress: Any = None,
    checkpoint: Any = None,
) -> Any:
    """``market.numerics.myerson_payments`` with synthetic per-seller payments."""
    from market.numerics import executors
    from mechanisms.payments._executors import map_chunks
    from mechanisms.payments._payments import collect, payment_job

    t0 = time.perf_counter()
    job = payment_job(X, y, costs, prior, config, eps_max, base=allocation)
    t1 = time.perf_counter()
    with executors.payments_executor(len(costs)) as pool:
        done = map_chunks(_synthetic_chunk, job, list(range(len(costs))),
                          executor=pool, progress=progress)  # fmt: skip
    t2 = time.perf_counter()
    result = collect(job, done, {"base": t1 - t0, "sellers": t2 - t1})
    t3 = time.perf_counter()
    PAY.update({"pay:job": t1 - t0, "pay:dask": t2 - t1, "pay:collect": t3 - t2,
                "pay:result_bytes": float(len(pickle.dumps(done)))})  # fmt: skip
    return result


class _StageLog(logging.Handler):
    """Keeps the stage seconds the order runner logs."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seconds: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if "stage seconds" in str(record.msg):
            self.seconds = {k: float(v) for k, v in dict(record.args[1]).items()}  # type: ignore[index]


def run_order_here(dep: e2e_order.Deployment) -> dict[str, float]:
    """Claim and run the queued order with the worker's code in this process."""
    os.environ.update({k: dep.env[k] for k in dep.env if k.startswith("PRIVMARKET_")})
    from market import numerics
    from market.config import get_settings
    from market.runtime.worker import Worker
    from market.store import make_engine

    get_settings.cache_clear()
    numerics.myerson_payments = synthetic_payments  # type: ignore[assignment]
    logger = logging.getLogger("market.runtime.order_runner")
    handler = _StageLog()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    engine = make_engine(dep.env["PRIVMARKET_DATABASE_URL"])
    try:
        t0 = time.perf_counter()
        assert Worker(engine, lease_seconds=120.0, time_limit=36000.0).run_once()
        total = time.perf_counter() - t0
    finally:
        logger.removeHandler(handler)
        engine.dispose()
    return {**handler.seconds, **PAY, "order_total": total}


def run(m: int, base_url: str, *, mode: str, batch: int) -> dict[str, float]:
    rng = np.random.default_rng(m)
    with e2e_order.deployment(base_url, worker=False) as dep:
        mid = e2e_order.create_market(dep, mode=mode, rng=rng)
        out = {"ingest": e2e_order.ingest(dep, mid, m, rng=rng, batch=batch)}
        oid, bh, out["place"] = e2e_order.place(dep, mid)
        out.update(run_order_here(dep))
        status = dep.client.get(f"/v1/orders/{oid}", headers=bh).json()
        if status["status"] != "succeeded":
            raise RuntimeError(f"order {oid}: {json.dumps(status)[:800]}")
        out.update(e2e_order.reads(dep, oid, bh))
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000, 100000])
    ap.add_argument("--postgres", required=True)
    ap.add_argument("--mode", choices=("strict", "default"), default="strict")
    ap.add_argument("--batch", type=int, default=10_000)
    args = ap.parse_args()
    rows = []
    for m in args.sizes:
        row = run(m, args.postgres, mode=args.mode, batch=args.batch)
        print(m, json.dumps({k: round(v, 4) for k, v in row.items()}), flush=True)
        rows.append(row)
    e2e_order.print_slopes(args.sizes, rows)


if __name__ == "__main__":
    main()
