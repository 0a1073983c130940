"""Crash tests with real processes and SIGKILL (T-DUR-1, small size).

1. A worker process is killed in the middle of an order (held in the ``payments`` stage
   by the ``PRIVMARKET_TEST_STAGE_SLEEP`` hook); a new worker's recovery sweep sees the
   dead owner, re-runs the order, and it ends ``succeeded`` with exactly one settlement.
2. A server process is killed while sellers upload offers; after a restart every
   acknowledged (2xx) offer is still there.

Worker subprocesses use the stand-in payments of ``pipeline_helpers`` (fast); the
service, database and worker code are the real ones.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from sqlmodel import Session, func, select

from market.store import (
    ROOT,
    Allocation,
    LedgerEntry,
    LedgerKind,
    Offer,
    Order,
    make_engine,
)
from tests.market.pipeline_helpers import stand_in_payments
from tests.market.test_orders_run import Env, env

__all__ = ["env", "stand_in_payments"]

WORKER = """
import sys
from market import numerics
from tests.market import pipeline_helpers as h
numerics.myerson_payments = h.fake_payments
from api.pipeline_cli import run_worker
from market.config import Settings
run_worker(Settings(), once=True)
"""


def _spawn(code: list[str], env_extra: dict[str, str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, **env_extra}
    return subprocess.Popen(
        [sys.executable, *code],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()


def _wait(predicate: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_worker_killed_mid_order_resumes_and_settles_once(
    env: Env, database_url: str, stand_in_payments: Any
) -> None:
    if not database_url.startswith("sqlite"):
        pytest.skip("one backend is enough for the process-level crash test")
    mid = env.market(n_sellers=12)
    oid = env.order(mid)
    db_env = {
        "PRIVMARKET_DATABASE_URL": database_url,
        "PRIVMARKET_JOB_LEASE_SECONDS": "30",
    }
    engine = make_engine(database_url)

    def stage() -> str:
        with Session(engine) as s:
            o = s.get(Order, oid)
            assert o is not None
            return o.progress_stage

    first = _spawn(
        ["-c", WORKER], {**db_env, "PRIVMARKET_TEST_STAGE_SLEEP": "payments:600"}
    )
    try:
        _wait(lambda: stage() == "payments", 60, "the order to reach payments")
    finally:
        _kill(first)
    with Session(engine) as s:
        o = s.get(Order, oid)
        assert o is not None
        assert o.status == "running"  # abandoned mid-order
        n_offers = s.exec(select(func.count()).select_from(Offer)).one()
    second = _spawn(["-c", WORKER], db_env)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err.decode()
    with Session(engine) as s:
        o = s.get(Order, oid)
        assert o is not None
        assert o.status == "succeeded", o.error
        assert o.attempts == 2
        assert s.exec(select(func.count()).select_from(Offer)).one() == n_offers
        allocs = s.exec(select(Allocation).where(Allocation.order_id == oid)).all()
        eps = s.exec(
            select(LedgerEntry).where(
                LedgerEntry.order_id == oid, LedgerEntry.kind == LedgerKind.EPSILON
            )
        ).all()
        assert len(allocs) == len(eps) > 0  # settled exactly once
    engine.dispose()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(db_env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc = _spawn(
        ["-c", "from api.cli import app; app()", "serve", "--port", str(port)], db_env
    )
    url = f"http://127.0.0.1:{port}/healthz"

    def up() -> bool:
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    _wait(up, 60, "the server")
    return proc


def test_server_killed_during_uploads_loses_no_acknowledged_offer(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    from tests.market.pipeline_helpers import market_body, wisconsin_raw

    db_env = {
        "PRIVMARKET_DATABASE_URL": f"sqlite:///{tmp_path / 'crash.db'}",
        "PRIVMARKET_WORKERS": "0",
    }
    key = subprocess.run(
        [sys.executable, "-c", "from api.cli import app; app()", "admin", "create-key"],
        cwd=ROOT, env={**os.environ, **db_env}, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = _serve(db_env, port)
    X, y = wisconsin_raw()
    acked: list[tuple[int, dict[str, str]]] = []
    with httpx.Client(base_url=base, timeout=60) as c:
        admin = {"Authorization": f"Bearer {key}"}
        mid = c.post("/v1/markets", headers=admin, json=market_body(rng=rng)).json()[
            "id"
        ]
        sellers = []
        for j in range(20):
            k = c.post("/v1/sellers", json={"name": f"s{j}"}).json()["api_key"]
            sellers.append({"Authorization": f"Bearer {k}"})

        def upload() -> None:
            for j, h in enumerate(sellers):
                body = {
                    "records": [{"x": X[j].tolist(), "y": int(y[j])}],
                    "reported_cost": 0.5,
                }
                try:
                    r = c.post(f"/v1/markets/{mid}/offers", headers=h, json=body)
                except httpx.HTTPError:
                    return
                if r.status_code == 201:
                    acked.append((r.json()["id"], h))

        t = threading.Thread(target=upload)
        t.start()
        _wait(lambda: len(acked) >= 5, 60, "some acknowledged offers")
        _kill(server)
        t.join()
    assert 5 <= len(acked) <= 20
    server = _serve(db_env, port)
    try:
        with httpx.Client(base_url=base, timeout=60) as c:
            for offer_id, h in acked:
                assert c.get(f"/v1/offers/{offer_id}", headers=h).status_code == 200
    finally:
        _kill(server)
