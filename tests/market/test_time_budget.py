"""Bounded order work (issue 14, item 1): a per-order time budget that fails the order
cleanly, and workers that stop within seconds on request or SIGTERM, handing the
running order back to the queue (``market.pipeline.deadline``).

In-process tests run on SQLite and PostgreSQL; the process tests (``privmarket
worker`` and ``privmarket serve`` receiving SIGTERM) on SQLite only.
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np
import pytest
from sqlmodel import Session, select

from market import numerics
from market.numerics import executors
from market.runtime import worker
from market.store import ROOT, Allocation, LedgerEntry, Order, make_engine
from tests.market.pipeline_helpers import (
    CHUNK_MARK_ENV,
    fake_payments,
    stand_in_payments,
)
from tests.market.test_orders_run import Env, env
from tests.market.test_restart import _free_port, _wait

__all__ = ["env", "stand_in_payments"]


def _endless_payments(*args: Any, **kw: Any) -> Any:
    """Payments that never finish but call the numerics' checkpoint like a re-solve
    loop does (every 20 ms)."""
    checkpoint = kw["checkpoint"]
    assert checkpoint is not None
    while True:
        checkpoint()
        time.sleep(0.02)


def _order_row(env: Env, oid: int) -> Order:
    with Session(env.engine) as s:
        order = s.get(Order, oid)
        assert order is not None
        return order


def _nothing_written(env: Env, oid: int) -> bool:
    with Session(env.engine) as s:
        entries = s.exec(select(LedgerEntry).where(LedgerEntry.order_id == oid)).all()
        allocs = s.exec(select(Allocation).where(Allocation.order_id == oid)).all()
    return not entries and not allocs


def test_order_over_its_time_budget_fails_with_the_reason(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(numerics, "myerson_payments", _endless_payments)
    mid = env.market(n_sellers=12)
    oid = env.order(mid)
    w = worker.Worker(env.engine, lease_seconds=30, time_limit=1.0)
    t0 = time.monotonic()
    assert w.run_once()
    assert time.monotonic() - t0 < 30  # stopped, not stuck in the endless stage
    st = env.status(oid)
    assert st["status"] == "failed"
    # the stage where the budget ran out: payments, or earlier on a loaded machine
    assert re.fullmatch(
        r"the order exceeded its time budget of 1 s in stage "
        r"(loading|allocating|payments); nothing was charged",
        st["error"],
    ), st["error"]
    assert _nothing_written(env, oid)


def test_time_budget_comes_from_the_settings(database_url: str) -> None:
    from tests.api.conftest import fast_settings

    settings = fast_settings(database_url, order_time_limit_seconds=42.0)
    engine = make_engine(database_url)
    try:
        assert worker.Worker.from_settings(engine, settings).time_limit == 42.0
    finally:
        engine.dispose()


def test_stopping_worker_hands_the_order_back_within_seconds(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(numerics, "myerson_payments", _endless_payments)
    mid = env.market(n_sellers=12)
    oid = env.order(mid)
    w = worker.Worker(env.engine, lease_seconds=30)
    thread = threading.Thread(target=w.run_once)
    thread.start()
    _wait(lambda: _order_row(env, oid).progress_stage == "payments", 60, "payments")
    t0 = time.monotonic()
    w.stop()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert time.monotonic() - t0 < 5
    order = _order_row(env, oid)
    assert (order.status, order.lease_owner, order.attempts) == ("queued", None, 0)
    assert _nothing_written(env, oid)
    # Another worker resumes it (the stand-in payments now finish).
    monkeypatch.setattr(numerics, "myerson_payments", fake_payments)
    assert worker.Worker(env.engine, lease_seconds=30).run_once()
    assert env.status(oid)["status"] == "succeeded"


WORKER_LOOP = """
from market import numerics
from tests.market import pipeline_helpers as h
numerics.myerson_payments = h.fake_payments
from api.pipeline_cli import run_worker
from market.config import Settings
run_worker(Settings())
"""

SERVER = """
import sys
import uvicorn
from market import numerics
from tests.market import pipeline_helpers as h
numerics.myerson_payments = h.fake_payments
from api.main import create_app
from market.config import get_settings
# what `privmarket serve` runs, on the test's database (tables made without alembic)
uvicorn.run(create_app(get_settings()), host="127.0.0.1", port=int(sys.argv[1]))
"""


def _sigterm_mid_order(env: Env, database_url: str, code: list[str]) -> float:
    """Start ``code`` with the order held in the payments stage, send SIGTERM there;
    return the seconds until the process exited."""
    if not database_url.startswith("sqlite"):
        pytest.skip("one backend is enough for the process-level SIGTERM test")
    mid = env.market(n_sellers=12)
    oid = env.order(mid)
    proc = subprocess.Popen(
        [sys.executable, *code],
        cwd=ROOT,
        env={
            **os.environ,
            "PRIVMARKET_DATABASE_URL": database_url,
            "PRIVMARKET_WORKERS": "1",
            "PRIVMARKET_TEST_STAGE_SLEEP": "payments:600",
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait(
            lambda: _order_row(env, oid).progress_stage == "payments",
            120,
            "the order to reach payments",
        )
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
    order = _order_row(env, oid)
    assert (order.status, order.lease_owner) == ("queued", None)
    assert _nothing_written(env, oid)
    # the order is resumed by the next worker and settles once
    assert worker.Worker(env.engine, lease_seconds=30).run_once()
    assert env.status(oid)["status"] == "succeeded"
    return took


def test_sigterm_stops_a_worker_process_within_seconds(
    env: Env, database_url: str, stand_in_payments: Any
) -> None:
    assert _sigterm_mid_order(env, database_url, ["-c", WORKER_LOOP]) < 5


def test_sigterm_stops_the_server_and_its_worker_threads_within_seconds(
    env: Env, database_url: str, stand_in_payments: Any
) -> None:
    port = str(_free_port())
    code = ["-c", SERVER, port]
    assert _sigterm_mid_order(env, database_url, code) < 5


POOL_WORKER_LOOP = """
from market.numerics import executors
from mechanisms.payments import _payments
from tests.market import pipeline_helpers as h
executors.SERIAL_PAYMENTS_MAX = 0  # every order's payments in a process pool
_payments._chunk = h.endless_chunk  # chunks that run until they are stopped
from api.pipeline_cli import run_worker
from market.config import Settings
run_worker(Settings())
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("target", ["worker", "process_group"])
def test_sigterm_reaches_payment_processes(
    env: Env, database_url: str, stand_in_payments: Any, tmp_path: Any, target: str
) -> None:
    """Payments of more than ``SERIAL_PAYMENTS_MAX`` sellers run in a process pool.
    SIGTERM to the worker (or to its whole process group, as a service manager
    sends it) while those processes are mid-payments stops the worker within
    seconds, the payment processes exit, and the order is back in the queue."""
    if not database_url.startswith("sqlite"):
        pytest.skip("one backend is enough for the process-level SIGTERM test")
    mid = env.market(n_sellers=12)
    oid = env.order(mid)
    marks = tmp_path / "chunks"
    marks.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", POOL_WORKER_LOOP],
        cwd=ROOT,
        env={
            **os.environ,
            "PRIVMARKET_DATABASE_URL": database_url,
            CHUNK_MARK_ENV: str(marks),
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _wait(lambda: any(marks.iterdir()), 120, "payment processes to start")
        children = [int(p.name) for p in marks.iterdir()]
        assert all(_alive(pid) for pid in children)
        assert _order_row(env, oid).progress_stage == "payments"
        t0 = time.monotonic()
        if target == "worker":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        assert proc.stderr is not None
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
    assert took < 5, err[-2000:]
    assert proc.returncode == 0, err[-2000:]
    _wait(lambda: not any(_alive(pid) for pid in children), 10, "pool exit")
    order = _order_row(env, oid)
    assert (order.status, order.lease_owner, order.attempts) == ("queued", None, 0)
    assert _nothing_written(env, oid)
    # resumed by the next worker and settled once
    assert worker.Worker(env.engine, lease_seconds=30).run_once()
    assert env.status(oid)["status"] == "succeeded"


def test_pool_payments_equal_serial_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """The payments process pool (its processes set up to ignore SIGTERM and die with
    their fork server) pays what the in-process path pays."""
    import numpy as np

    from tests.conftest import SEED
    from tests.mechanisms.test_payments_instances import broad_instance

    ins = broad_instance(np.random.default_rng(SEED + 1), m=8)
    eps_max = np.full(ins.costs.size, np.inf)
    kw = {"prior": ins.prior, "config": ins.cfg, "eps_max": eps_max}
    serial = numerics.myerson_payments(ins.X, ins.y, ins.costs, **kw)
    monkeypatch.setattr(executors, "SERIAL_PAYMENTS_MAX", 0)
    pooled = numerics.myerson_payments(ins.X, ins.y, ins.costs, **kw)
    np.testing.assert_allclose(pooled.payments, serial.payments, rtol=1e-12, atol=0)


def test_a_pool_broken_by_a_stop_is_reported_as_the_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stop signal to the process group can end the payment processes before this
    process's handler has marked the stop: the broken pool must still be reported as
    the stop (the order goes back to the queue), not as a failure; a pool broken
    without a stop stays a failure."""
    from concurrent.futures.process import BrokenProcessPool

    from market.numerics import mechanism as nm
    from market.pipeline.deadline import WorkerStoppingError

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise BrokenProcessPool("a child process terminated abruptly")

    monkeypatch.setattr(nm.mech, "myerson_payments", broken)
    monkeypatch.setattr(nm.mech, "Instance", lambda *a: None)
    marked_at = time.monotonic() + 0.2  # the handler runs 0.2 s after the pool broke

    def checkpoint() -> None:
        if time.monotonic() >= marked_at:
            raise WorkerStoppingError("w")

    args = (np.zeros((3, 2)), np.ones(3), np.ones(3))
    kwargs = {"prior": None, "config": None, "eps_max": np.ones(3)}
    with pytest.raises(WorkerStoppingError):
        nm.myerson_payments(*args, **kwargs, checkpoint=checkpoint)
    t0 = time.monotonic()
    with pytest.raises(BrokenProcessPool):
        nm.myerson_payments(*args, **kwargs, checkpoint=lambda: None)
    assert time.monotonic() - t0 <= nm.STOP_GRACE_S + 0.5
