"""One order with many sellers end to end through the API, on PostgreSQL, with the
payments on a Dask cluster of separate processes on loopback; each stage timed.

Per size ``m``: a private PostgreSQL schema (dropped afterwards), ``dask scheduler``
and ``dask worker`` processes, ``privmarket serve`` with one in-process order worker
(``PRIVMARKET_DASK_SCHEDULER`` set), a Wisconsin market (public validation set;
``mode: "default"``, the candidate-range rule whose payments reuse the base search),
``m`` one-record offers through ``POST /v1/markets/{id}/offers:bulk`` (records drawn
from Wisconsin with replacement, costs U[0, 1]), one order (``gamma`` fixed), then the
order's progress stages as the server reports them (polled), and the result reads:
``GET /v1/orders/{id}/model`` and the admin's ``/allocations`` page. Prints the time
of every stage and the log-log slope of each over the sizes run.

Run: ``python benchmarks/e2e_order.py --sizes 1000 10000
--postgres postgresql+psycopg://postgres@127.0.0.1:5432/test``
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from market.datasets import WBC_FEATURE_BOUNDS  # noqa: E402


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(*args: str, env: dict[str, str], **kw: Any) -> subprocess.Popen[str]:
    code = "from api.cli import app; app()"
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], cwd=ROOT, env=env, text=True, **kw
    )


def _wait(url: str, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


def run(m: int, base_url: str, *, order_timeout: float, batch: int) -> dict[str, float]:
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    X, y = data.data, np.where(data.target == 1, 1, -1)
    rng = np.random.default_rng(m)
    schema = f"pm_e2e_{uuid.uuid4().hex[:10]}"
    admin_eng = sa.create_engine(base_url)
    with admin_eng.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    url = (
        sa.engine.make_url(base_url)
        .update_query_dict({"options": f"-csearch_path={schema}"})
        .render_as_string(hide_password=False)
    )
    tmp = tempfile.mkdtemp(prefix="pm-e2e-")
    dport, hport = _port(), _port()
    sched = subprocess.Popen(
        ["dask", "scheduler", "--host", "127.0.0.1", "--port", str(dport),
         "--dashboard-address", "127.0.0.1:0", "--no-show"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp,
    )  # fmt: skip
    worker = subprocess.Popen(
        ["dask", "worker", f"tcp://127.0.0.1:{dport}", "--nworkers", "2",
         "--nthreads", "1", "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0",
         "--local-directory", tmp],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PRIVMARKET_DATABASE_URL": url,
        "PRIVMARKET_WORKERS": "1",
        "PRIVMARKET_DASK_SCHEDULER": f"tcp://127.0.0.1:{dport}",
        "PRIVMARKET_RATE_LIMIT_REGISTRATIONS": "1000000",
        "PRIVMARKET_RATE_LIMIT_WRITES": "1000000",
        # a throwaway key-hashing secret for this run's throwaway schema
        "PRIVMARKET_API_KEY_SECRET": uuid.uuid4().hex + uuid.uuid4().hex,
    }
    server = None
    out: dict[str, float] = {}
    try:
        init = _cli("db", "upgrade", env=env, stdout=subprocess.DEVNULL)
        init.wait()
        key = _cli("admin", "create-key", env=env, stdout=subprocess.PIPE)
        admin = {"Authorization": f"Bearer {key.communicate()[0].strip()}"}
        server = _cli("serve", "--port", str(hport), env=env,
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        base = f"http://127.0.0.1:{hport}"
        _wait(f"{base}/healthz")
        c = httpx.Client(base_url=base, timeout=3600)
        val = rng.choice(len(y), size=80, replace=False)
        body = {
            "name": "e2e", "task": "classification",
            "features": [{"name": str(n), "low": lo, "high": hi}
                         for n, (lo, hi) in zip(data.feature_names, WBC_FEATURE_BOUNDS,
                                                strict=True)],
            "cost_prior": {"family": "uniform", "params": {"low": 0.0, "high": 1.0}},
            "mechanism": {"gamma": 1.0, "lam": 0.01, "mu": 1.0, "sigma": 1.0,
                          "mode": "default"},
            "validation": [{"x": X[i].tolist(), "y": int(y[i])} for i in val],
            "out_of_bounds": "clip", "lifetime_epsilon_cap": 10.0,
        }  # fmt: skip
        r = c.post("/v1/markets", headers=admin, json=body)
        r.raise_for_status()
        mid = r.json()["id"]
        t0 = time.perf_counter()
        idx = rng.integers(0, len(y), size=m)
        costs = rng.uniform(0.0, 1.0, size=m)
        for start in range(0, m, batch):
            rows = [
                {"seller_name": f"s{i}",
                 "records": [{"x": X[idx[i]].tolist(), "y": int(y[idx[i]])}],
                 "reported_cost": float(costs[i])}
                for i in range(start, min(start + batch, m))
            ]  # fmt: skip
            r = c.post(f"/v1/markets/{mid}/offers:bulk", headers=admin,
                       json={"offers": rows})  # fmt: skip
            r.raise_for_status()
        out["ingest"] = time.perf_counter() - t0
        buyer = c.post("/v1/buyers", json={"name": "b"}).json()["api_key"]
        bh = {"Authorization": f"Bearer {buyer}", "Idempotency-Key": "e2e"}
        t0 = time.perf_counter()
        r = c.post(f"/v1/markets/{mid}/orders", headers=bh,
                   json={"learner": "hetero_dp_logistic", "budget": 1e6, "gamma": 1.0})  # fmt: skip
        r.raise_for_status()
        oid = r.json()["id"]
        out["place"] = time.perf_counter() - t0
        stage, since = "queued", time.perf_counter()
        end = time.monotonic() + order_timeout
        st: dict[str, Any] = {}
        while time.monotonic() < end:
            st = c.get(f"/v1/orders/{oid}", headers=bh).json()
            now = time.perf_counter()
            cur = st["progress"]["stage"]
            if cur != stage:
                out[f"stage:{stage}"] = out.get(f"stage:{stage}", 0.0) + now - since
                stage, since = cur, now
            if st["status"] in ("succeeded", "failed"):
                break
            time.sleep(0.2)
        out[f"stage:{stage}"] = (
            out.get(f"stage:{stage}", 0.0) + time.perf_counter() - since
        )
        if st.get("status") != "succeeded":
            raise RuntimeError(
                f"order {oid} ended {st.get('status')}: {json.dumps(st)[:800]}"
            )
        out["order_total"] = time.perf_counter() - t0 - out["place"]
        t0 = time.perf_counter()
        c.get(f"/v1/orders/{oid}/model", headers=bh).raise_for_status()
        out["model_endpoint"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        c.get(f"/v1/orders/{oid}/allocations", headers=admin).raise_for_status()
        out["allocations_page"] = time.perf_counter() - t0
        c.close()
        return out
    finally:
        for p in (server, worker, sched):
            if p is not None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
        with admin_eng.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin_eng.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000])
    ap.add_argument("--postgres", required=True)
    ap.add_argument("--order-timeout", type=float, default=1800.0)
    ap.add_argument("--batch", type=int, default=10_000)
    args = ap.parse_args()
    rows = []
    for m in args.sizes:
        row = run(m, args.postgres, order_timeout=args.order_timeout, batch=args.batch)
        print(m, json.dumps(row), flush=True)
        rows.append(row)
    if len(rows) > 1:
        keys = [k for k in rows[0] if all(k in r for r in rows)]
        lm = np.log(args.sizes[: len(rows)])
        for k in keys:
            ts = np.array([r[k] for r in rows])
            if np.all(ts > 0):
                print(f"{k}: slope {np.polyfit(lm, np.log(ts), 1)[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
