"""Claiming, leases and the recovery sweep (T-DUR-1/T-DUR-4 in small sizes)."""

import threading
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from market import markets
from market.orders import jobs
from market.runtime import job_runner, leases, order_runner, worker
from market.store import Account, Job, Order, Role, RunStatus, db, utcnow
from tests.market.dbfixtures import add_market_and_buyer


def _orders(engine: Engine, n: int) -> list[int]:
    with Session(engine, expire_on_commit=False) as s:
        market, buyer = add_market_and_buyer(s)
        params = markets.current_parameters(s, market.id)  # type: ignore[arg-type]
        rows = [
            Order(
                market_id=market.id,  # type: ignore[arg-type]
                buyer_id=buyer.id,  # type: ignore[arg-type]
                learner="hetero_dp_logistic",
                budget_minor=100,
                params={},
                parameters_id=params.id,  # type: ignore[arg-type]
            )
            for _ in range(n)
        ]
        s.add_all(rows)
        s.commit()
        return [int(r.id) for r in rows]  # type: ignore[arg-type]


def _get(engine: Engine, order_id: int) -> Order:
    with Session(engine) as s:
        order = s.get(Order, order_id)
        assert order is not None
        return order


def test_claim_marks_running_with_a_lease_once(engine: Engine) -> None:
    (oid,) = _orders(engine, 1)
    got = worker.claim(engine, Order, owner="w1", lease_seconds=30)
    assert got == oid
    o = _get(engine, oid)
    assert (o.status, o.lease_owner, o.attempts) == (RunStatus.RUNNING, "w1", 1)
    assert o.lease_expires_at is not None
    assert worker.claim(engine, Order, owner="w2", lease_seconds=30) is None


def test_expired_lease_is_reclaimed_then_given_up(engine: Engine) -> None:
    (oid,) = _orders(engine, 1)
    for attempt in range(1, worker.MAX_ATTEMPTS + 1):
        assert worker.claim(engine, Order, owner=f"w{attempt}", lease_seconds=0) == oid
        assert _get(engine, oid).attempts == attempt
    assert worker.claim(engine, Order, owner="last", lease_seconds=0) is None
    o = _get(engine, oid)
    assert o.status == RunStatus.FAILED
    assert "abandoned" in (o.error or "")


def test_fenced_writes_stop_after_takeover(engine: Engine) -> None:
    (oid,) = _orders(engine, 1)
    worker.claim(engine, Order, owner="old", lease_seconds=0)
    assert worker.claim(engine, Order, owner="new", lease_seconds=30) == oid
    assert not leases.touch(engine, Order, oid, owner="old", lease_seconds=30)
    assert not order_runner.fail(engine, oid, owner="old", reason="x")
    assert order_runner.run_order(engine, oid, owner="old", lease_seconds=30) == "lost"
    o = _get(engine, oid)
    assert (o.status, o.lease_owner, o.error) == (RunStatus.RUNNING, "new", None)


def test_recovery_sweep_requeues_only_abandoned_rows(engine: Engine) -> None:
    expired, live_pid1, live = _orders(engine, 3)
    host = leases.new_owner().split(":")[0]
    with db.write_session(engine) as s:
        now = utcnow()
        for oid, owner, delta in (
            (expired, "elsewhere:1:x", -5),
            (live_pid1, f"{host}:1:x", 60),  # pid 1 is alive: lease honoured
            (live, "elsewhere:2:y", 60),
        ):
            o = s.get(Order, oid)
            assert o is not None
            o.status, o.lease_owner, o.attempts = RunStatus.RUNNING, owner, 1
            o.lease_expires_at = now + timedelta(seconds=delta)
            s.add(o)
    assert worker.recover(engine) == [("order", expired, "requeued")]
    assert _get(engine, expired).status == RunStatus.QUEUED
    assert _get(engine, expired).progress_stage == "queued"
    assert _get(engine, live).status == RunStatus.RUNNING
    assert _get(engine, live_pid1).status == RunStatus.RUNNING


def test_dead_local_owner_is_recovered_at_once(engine: Engine) -> None:
    import subprocess
    import sys

    (oid,) = _orders(engine, 1)
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    host = leases.new_owner().split(":")[0]
    owner = f"{host}:{int(proc.stdout)}:dead"
    assert leases.owner_is_dead(owner)
    worker.claim(engine, Order, owner=owner, lease_seconds=3600)
    assert worker.recover(engine) == [("order", oid, "requeued")]


def test_concurrent_claimers_never_double_claim(engine: Engine) -> None:
    ids = _orders(engine, 40)
    claimed: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def claimer(name: str) -> None:
        try:
            barrier.wait()
            while (
                got := worker.claim(engine, Order, owner=name, lease_seconds=60)
            ) is not None:
                with lock:
                    claimed.append(got)
        except BaseException as exc:  # asserted below
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(claimed) == sorted(ids)  # each once: no double claims, none missed
    with Session(engine) as s:
        rows = s.exec(select(Order)).all()
    assert all(r.attempts == 1 and r.status == RunStatus.RUNNING for r in rows)


def test_worker_runs_tradeoff_jobs(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _orders(engine, 0)
    with Session(engine) as s:
        admin = s.exec(select(Account).where(Account.role == Role.ADMIN)).one()
        job = Job(kind=jobs.TRADEOFF, market_id=1, created_by=admin.id, params={})  # type: ignore[arg-type]
        s.add(job)
        s.commit()
        job_id = job.id
    monkeypatch.setattr(
        job_runner, "_compute", lambda e, j, progress: {"points": [{"gamma": 1.0}]}
    )
    assert worker.Worker(engine).run_once()
    with Session(engine) as s:
        done = s.get(Job, job_id)
    assert done is not None
    assert (done.status, done.result) == (
        RunStatus.SUCCEEDED,
        {"points": [{"gamma": 1.0}]},
    )
    assert not worker.Worker(engine).run_once()
