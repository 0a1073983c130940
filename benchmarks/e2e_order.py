"""One order with many sellers end to end through the API, on PostgreSQL, with the
payments on a Dask cluster of separate processes on loopback; each stage timed.

Per size ``m``: a private PostgreSQL schema (dropped afterwards), ``dask scheduler``
and ``dask worker`` processes, ``privmarket serve`` (no in-process worker) and one
``privmarket worker`` process (``PRIVMARKET_DASK_SCHEDULER`` set), a Wisconsin market
(public validation set; ``--mode strict``, the schema's default, or ``default``, the
candidate-range rule whose payments reuse the base search), ``m`` one-record offers
through ``POST /v1/markets/{id}/offers:bulk`` (records drawn from Wisconsin with
replacement, costs U[0, 1]), one order (``gamma`` fixed), then the order's stages and
the result reads: ``GET /v1/orders/{id}/model``, the first page of the admin's
``/allocations``, every page of it, and the console's allocation page (its HTML and
the API reads its script makes).

Stage times: the worker logs each stage's seconds as it measures them (``loading``,
``allocating``, ``payments``, ``releasing``, ``settling``); ``queued`` is the time
from placement to the first progress the API reports (polled every 0.2 s), and
``order total`` placement to ``succeeded`` as the poll sees it. Prints one JSON line per
size and the log-log slope of each stage over the sizes run.

Run: ``python benchmarks/e2e_order.py --sizes 1000 10000 100000
--postgres postgresql+psycopg://postgres@127.0.0.1:5432/test`` (add ``--mode default``
for the candidate-range rule).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from market.datasets import WBC_FEATURE_BOUNDS  # noqa: E402

STAGES = ("loading", "allocating", "choosing_gamma", "payments",
          "payments_uncertified", "releasing", "settling")  # fmt: skip
"""The worker's stages in the order they run (``market.runtime.order_runner``)."""
CONSOLE_PAGE_LIMIT = 1000
"""Rows of the allocation the console's page reads at once (``admin.js``)."""


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


@dataclass
class Deployment:
    """A running deployment on a private schema: the database URL (with its
    ``search_path``), the environment its processes run with, the API's client and an
    admin's headers, the Dask scheduler's address and the worker's log file."""

    url: str
    env: dict[str, str]
    client: httpx.Client
    admin: dict[str, str]
    dask: str
    worker_log: Path | None
    procs: list[subprocess.Popen[Any]] = field(default_factory=list)


@contextlib.contextmanager
def deployment(
    base_url: str, *, worker: bool = True, dask_workers: int = 2
) -> Iterator[Deployment]:
    """Schema, ``dask scheduler`` + ``dask worker``, ``privmarket serve`` and (with
    ``worker``) one ``privmarket worker`` process; all stopped, the schema dropped, on
    exit."""
    schema = f"pm_e2e_{uuid.uuid4().hex[:10]}"
    admin_eng = sa.create_engine(base_url)
    with admin_eng.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    url = (
        sa.engine.make_url(base_url)
        .update_query_dict({"options": f"-csearch_path={schema}"})
        .render_as_string(hide_password=False)
    )
    tmp = Path(tempfile.mkdtemp(prefix="pm-e2e-"))
    dport, hport = _port(), _port()
    procs: list[subprocess.Popen[Any]] = []
    try:
        procs.append(subprocess.Popen(
            ["dask", "scheduler", "--host", "127.0.0.1", "--port", str(dport),
             "--dashboard-address", "127.0.0.1:0", "--no-show"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp,
        ))  # fmt: skip
        procs.append(subprocess.Popen(
            ["dask", "worker", f"tcp://127.0.0.1:{dport}", "--nworkers",
             str(dask_workers), "--nthreads", "1", "--host", "127.0.0.1",
             "--dashboard-address", "127.0.0.1:0", "--local-directory", str(tmp)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        ))  # fmt: skip
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PRIVMARKET_DATABASE_URL": url,
            "PRIVMARKET_WORKERS": "0",
            "PRIVMARKET_DASK_SCHEDULER": f"tcp://127.0.0.1:{dport}",
            "PRIVMARKET_RATE_LIMIT_REGISTRATIONS": "1000000",
            "PRIVMARKET_RATE_LIMIT_WRITES": "1000000",
            "PRIVMARKET_RATE_LIMIT_READS": "1000000",
            "PRIVMARKET_ORDER_TIME_LIMIT_SECONDS": "36000",
            # a throwaway key-hashing secret for this run's throwaway schema
            "PRIVMARKET_API_KEY_SECRET": uuid.uuid4().hex + uuid.uuid4().hex,
        }
        _cli("db", "upgrade", env=env, stdout=subprocess.DEVNULL).wait()
        key = _cli("admin", "create-key", env=env, stdout=subprocess.PIPE)
        admin = {"Authorization": f"Bearer {key.communicate()[0].strip()}"}
        procs.append(_cli("serve", "--port", str(hport), env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        log = None
        if worker:
            log = tmp / "worker.log"
            with log.open("w") as fh:
                procs.append(_cli("worker", env=env, stdout=fh, stderr=fh))
        base = f"http://127.0.0.1:{hport}"
        _wait(f"{base}/healthz")
        with httpx.Client(base_url=base, timeout=3600) as client:
            yield Deployment(url, env, client, admin, f"tcp://127.0.0.1:{dport}",
                             log, procs)  # fmt: skip
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        with admin_eng.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin_eng.dispose()


def _wisconsin() -> tuple[Any, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    return data, data.data, np.where(data.target == 1, 1, -1)


def create_market(dep: Deployment, *, mode: str, rng: np.random.Generator) -> int:
    """A Wisconsin market in ``mode`` with 80 public validation rows; its id."""
    data, X, y = _wisconsin()
    val = rng.choice(len(y), size=80, replace=False)
    body = {
        "name": "e2e", "task": "classification",
        "features": [{"name": str(n), "low": lo, "high": hi}
                     for n, (lo, hi) in zip(data.feature_names, WBC_FEATURE_BOUNDS,
                                            strict=True)],
        "cost_prior": {"family": "uniform", "params": {"low": 0.0, "high": 1.0}},
        "mechanism": {"gamma": 1.0, "lam": 0.01, "mu": 1.0, "sigma": 1.0,
                      "mode": mode},
        "validation": [{"x": X[i].tolist(), "y": int(y[i])} for i in val],
        "out_of_bounds": "clip", "lifetime_epsilon_cap": 10.0,
    }  # fmt: skip
    r = dep.client.post("/v1/markets", headers=dep.admin, json=body)
    r.raise_for_status()
    return int(r.json()["id"])


def ingest(
    dep: Deployment, mid: int, m: int, *, rng: np.random.Generator, batch: int
) -> float:
    """``m`` one-record sellers through ``offers:bulk`` in batches; wall seconds."""
    _, X, y = _wisconsin()
    idx = rng.integers(0, len(y), size=m)
    costs = rng.uniform(0.0, 1.0, size=m)
    t0 = time.perf_counter()
    for start in range(0, m, batch):
        rows = [
            {"seller_name": f"s{i}",
             "records": [{"x": X[idx[i]].tolist(), "y": int(y[idx[i]])}],
             "reported_cost": float(costs[i])}
            for i in range(start, min(start + batch, m))
        ]  # fmt: skip
        r = dep.client.post(f"/v1/markets/{mid}/offers:bulk", headers=dep.admin,
                            json={"offers": rows})  # fmt: skip
        r.raise_for_status()
    return time.perf_counter() - t0


def place(dep: Deployment, mid: int) -> tuple[int, dict[str, str], float]:
    """A buyer and its order (``γ = 1``, budget 10⁶); ``(order id, headers, s)``."""
    buyer = dep.client.post("/v1/buyers", json={"name": "b"}).json()["api_key"]
    bh = {"Authorization": f"Bearer {buyer}", "Idempotency-Key": "e2e"}
    t0 = time.perf_counter()
    r = dep.client.post(
        f"/v1/markets/{mid}/orders", headers=bh,
        json={"learner": "hetero_dp_logistic", "budget": 1e6, "gamma": 1.0},
    )  # fmt: skip
    r.raise_for_status()
    return int(r.json()["id"]), bh, time.perf_counter() - t0


def follow(
    dep: Deployment, oid: int, bh: dict[str, str], *, timeout: float
) -> dict[str, float]:
    """Poll the order to its end: ``queued`` (until the first other stage is seen),
    ``order_total``, and ``poll:<stage>`` for every stage seen (0.2 s resolution)."""
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    stage, since = "queued", t0
    end = time.monotonic() + timeout
    st: dict[str, Any] = {}
    while time.monotonic() < end:
        st = dep.client.get(f"/v1/orders/{oid}", headers=bh).json()
        now = time.perf_counter()
        cur = st["progress"]["stage"]
        if cur != stage:
            out[f"poll:{stage}"] = out.get(f"poll:{stage}", 0.0) + now - since
            stage, since = cur, now
        if st["status"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.2)
    if st.get("status") != "succeeded":
        raise RuntimeError(
            f"order {oid} ended {st.get('status')}: {json.dumps(st)[:800]}"
        )
    out["order_total"] = time.perf_counter() - t0
    out["queued"] = out.pop("poll:queued", 0.0)
    return out


def worker_stage_seconds(log: Path, oid: int) -> dict[str, float]:
    """The stage seconds the worker logged for order ``oid``."""
    pat = re.compile(rf"order {oid}: stage seconds (\{{.*\}})")
    for line in log.read_text().splitlines():
        if found := pat.search(line):
            return {k: float(v) for k, v in ast.literal_eval(found.group(1)).items()}
    raise RuntimeError(f"no stage seconds for order {oid} in {log}")


def all_allocation_pages(
    client: httpx.Client, oid: int, headers: dict[str, str], *, limit: int
) -> list[dict[str, Any]]:
    """Every page of ``/v1/orders/{oid}/allocations`` (``limit`` rows a page)."""
    pages, offset = [], 0
    while True:
        r = client.get(f"/v1/orders/{oid}/allocations", headers=headers,
                       params={"limit": limit, "offset": offset})  # fmt: skip
        r.raise_for_status()
        pages.append(r.json())
        offset += limit
        # (a server without paging answers every row at once, without "total")
        if offset >= int(pages[-1].get("total", len(pages[-1]["items"]))):
            return pages


def reads(dep: Deployment, oid: int, bh: dict[str, str]) -> dict[str, float]:
    """Wall seconds of the result reads (module docstring)."""
    c, out = dep.client, {}
    t0 = time.perf_counter()
    c.get(f"/v1/orders/{oid}/model", headers=bh).raise_for_status()
    out["model_endpoint"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    c.get(f"/v1/orders/{oid}/allocations", headers=dep.admin).raise_for_status()
    out["allocations_page"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    all_allocation_pages(c, oid, dep.admin, limit=10_000)
    out["allocations_all_pages"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    c.get(f"/console/orders/{oid}/allocations").raise_for_status()
    c.get(f"/v1/orders/{oid}/allocations", headers=dep.admin,
          params={"limit": CONSOLE_PAGE_LIMIT}).raise_for_status()  # fmt: skip
    out["console_allocation_page"] = time.perf_counter() - t0
    return out


def run(
    m: int, base_url: str, *, mode: str, order_timeout: float, batch: int
) -> dict[str, float]:
    rng = np.random.default_rng(m)
    with deployment(base_url) as dep:
        mid = create_market(dep, mode=mode, rng=rng)
        out = {"ingest": ingest(dep, mid, m, rng=rng, batch=batch)}
        oid, bh, out["place"] = place(dep, mid)
        polled = follow(dep, oid, bh, timeout=order_timeout)
        out["queued"] = polled.pop("queued")
        assert dep.worker_log is not None
        out.update(worker_stage_seconds(dep.worker_log, oid))
        out["order_total"] = polled.pop("order_total")
        out.update(reads(dep, oid, bh))
        out.update(polled)
        return out


def print_slopes(sizes: list[int], rows: list[dict[str, float]]) -> None:
    """The log-log slope of every stage all rows have (positive times only)."""
    if len(rows) < 2:
        return
    keys = [k for k in rows[0] if all(k in r for r in rows)]
    lm = np.log(sizes[: len(rows)])
    for k in keys:
        ts = np.array([r[k] for r in rows])
        if np.all(ts > 0):
            print(f"{k}: slope {np.polyfit(lm, np.log(ts), 1)[0]:.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000])
    ap.add_argument("--postgres", required=True)
    ap.add_argument("--mode", choices=("strict", "default"), default="strict",
                    help="the market's allocation rule (default: strict, the "
                    "schema's default)")  # fmt: skip
    ap.add_argument("--order-timeout", type=float, default=36000.0)
    ap.add_argument("--batch", type=int, default=10_000)
    args = ap.parse_args()
    rows = []
    for m in args.sizes:
        row = run(m, args.postgres, mode=args.mode,
                  order_timeout=args.order_timeout, batch=args.batch)  # fmt: skip
        print(m, json.dumps({k: round(v, 4) for k, v in row.items()}), flush=True)
        rows.append(row)
    print_slopes(args.sizes, rows)


if __name__ == "__main__":
    main()
