"""Group commit (``market.store.group_commit``): concurrent jobs share a transaction, nothing
is answered before its commit, one job's failure fails only that job, and a failed
commit loses nothing (each job is run again alone). SQLite and PostgreSQL."""

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from market.store import GroupCommitWriter, RateLimitWindow, WriterStoppedError
from tests.market.dbfixtures import engine
from tests.market.group_commit_helpers import hold

__all__ = ["engine"]

TABLE: sa.Table = RateLimitWindow.__table__  # type: ignore[attr-defined]
"""A table without foreign keys; ``(identity, route_group, window_start)`` is unique."""


def insert(identity: str) -> Any:
    """A job inserting one row keyed by ``identity`` (a duplicate violates the key)."""

    def job(conn: sa.Connection) -> str:
        conn.execute(
            sa.insert(TABLE).values(
                identity=identity,
                route_group="write",
                window_start=0,
                hits=1,
                expires_at=1,
            )
        )
        return identity

    return job


def stored(engine: Engine) -> list[str]:
    """Identities committed so far, read on a separate connection."""
    with engine.connect() as conn:
        return sorted(conn.execute(sa.select(TABLE.c.identity)).scalars())


class Answers:
    """Collects ``(result, exception)`` per job and what another connection saw of
    the job's row at the moment its answer arrived."""

    def __init__(self, engine: Engine, n: int) -> None:
        self.engine = engine
        self.results: dict[int, tuple[Any, BaseException | None]] = {}
        self.visible: dict[int, bool] = {}
        self.done = threading.Semaphore(0)
        self.n = n

    def callback(self, i: int, identity: str) -> Any:
        def done(result: Any, exc: BaseException | None) -> None:
            self.visible[i] = identity in stored(self.engine)
            self.results[i] = (result, exc)
            self.done.release()

        return done

    def wait(self) -> None:
        for _ in range(self.n):
            assert self.done.acquire(timeout=30)


@pytest.fixture
def writer(engine: Engine) -> Iterator[GroupCommitWriter]:
    w = GroupCommitWriter(engine)
    yield w
    w.stop()


def test_concurrent_jobs_share_one_commit_and_all_are_stored(
    engine: Engine, writer: GroupCommitWriter
) -> None:
    n = 20
    answers = Answers(engine, n)
    release = hold(writer)
    for i in range(n):
        writer.submit(insert(f"id{i}"), answers.callback(i, f"id{i}"))
    batches_before = writer.batches
    release.set()
    answers.wait()
    assert {i: r for i, (r, _) in answers.results.items()} == {
        i: f"id{i}" for i in range(n)
    }
    assert stored(engine) == sorted(f"id{i}" for i in range(n))
    # the gate's batch, then all n jobs in one transaction
    assert writer.batches - batches_before <= 2


def test_no_job_is_answered_before_its_row_is_committed(
    engine: Engine, writer: GroupCommitWriter
) -> None:
    """At the moment each answer arrives, a separate connection already sees the row
    (it would not before the COMMIT: WAL readers and PostgreSQL's read committed see
    committed rows only)."""
    n = 12
    answers = Answers(engine, n)
    release = hold(writer)
    for i in range(n):
        writer.submit(insert(f"id{i}"), answers.callback(i, f"id{i}"))
    release.set()
    answers.wait()
    assert answers.visible == dict.fromkeys(range(n), True)


def test_threads_submitting_at_once_all_get_their_own_answer(
    engine: Engine, writer: GroupCommitWriter
) -> None:
    n_threads, per_thread = 8, 10
    barrier = threading.Barrier(n_threads)
    got: list[str] = []
    lock = threading.Lock()

    def client(t: int) -> None:
        barrier.wait()
        for j in range(per_thread):
            result = writer.run(insert(f"t{t}-{j}"), timeout=30)
            with lock:
                got.append(result)

    threads = [threading.Thread(target=client, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = sorted(f"t{t}-{j}" for t in range(n_threads) for j in range(per_thread))
    assert sorted(got) == expected
    assert stored(engine) == expected


def test_a_failing_job_fails_alone_in_its_batch(
    engine: Engine, writer: GroupCommitWriter
) -> None:
    writer.run(insert("taken"))
    n = 10
    bad = {3, 7}  # 3: duplicate key (a database error), 7: raises before writing
    answers = Answers(engine, n)
    release = hold(writer)
    for i in range(n):
        if i == 7:

            def raising(conn: sa.Connection) -> None:
                raise ValueError("bad input")

            writer.submit(raising, answers.callback(i, "never"))
        else:
            identity = "taken" if i == 3 else f"id{i}"
            writer.submit(insert(identity), answers.callback(i, identity))
    batches_before = writer.batches
    release.set()
    answers.wait()
    assert isinstance(answers.results[3][1], sa.exc.IntegrityError)
    assert isinstance(answers.results[7][1], ValueError)
    for i in set(range(n)) - bad:
        assert answers.results[i] == (f"id{i}", None)
    assert stored(engine) == sorted(
        ["taken", *(f"id{i}" for i in range(n) if i not in bad)]
    )
    assert writer.batches - batches_before <= 2  # the failures did not split the batch


def test_a_failed_commit_runs_each_job_again_alone(
    engine: Engine, writer: GroupCommitWriter
) -> None:
    """The batch's COMMIT fails once: nothing of it is stored, then every job is run
    in its own transaction and answered with its own outcome (no loss, no double)."""
    failures = [1]

    @sa.event.listens_for(engine, "commit")
    def fail_once(conn: sa.Connection) -> None:
        if failures and failures.pop():
            raise sa.exc.OperationalError("COMMIT", {}, Exception("disk I/O error"))

    try:
        n = 6
        answers = Answers(engine, n)
        release = hold(writer)
        for i in range(n):
            identity = "id0" if i == 5 else f"id{i}"  # job 5 duplicates job 0
            writer.submit(insert(identity), answers.callback(i, identity))
        release.set()
        answers.wait()
    finally:
        sa.event.remove(engine, "commit", fail_once)
    for i in range(5):
        assert answers.results[i] == (f"id{i}", None)
        assert answers.visible[i]
    assert isinstance(answers.results[5][1], sa.exc.IntegrityError)
    assert stored(engine) == [f"id{i}" for i in range(5)]


def test_non_durable_jobs_are_answered_before_the_commit(
    engine: Engine, writer: GroupCommitWriter
) -> None:
    answers = Answers(engine, 1)
    writer.submit(insert("counter"), answers.callback(0, "counter"), durable=False)
    answers.wait()
    assert answers.results[0] == ("counter", None)
    assert answers.visible == {0: False}  # answered inside the open transaction
    writer.run(lambda conn: None)  # the next batch: the first one has committed
    assert stored(engine) == ["counter"]


def test_a_stopped_writer_refuses_jobs(engine: Engine) -> None:
    w = GroupCommitWriter(engine)
    assert w.run(insert("a")) == "a"
    w.stop()
    with pytest.raises(WriterStoppedError):
        w.run(insert("b"))
    assert stored(engine) == ["a"]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_callers_are_answered_if_the_writer_thread_dies(engine: Engine) -> None:
    """A job that kills the thread (not an ``Exception``) fails its batch and every
    later job with ``WriterStoppedError`` instead of leaving callers waiting."""
    w = GroupCommitWriter(engine)

    def fatal(conn: sa.Connection) -> None:
        raise SystemExit

    with pytest.raises(WriterStoppedError):
        w.run(fatal, timeout=30)
    with pytest.raises(WriterStoppedError):
        w.run(insert("after"), timeout=30)
    w.stop()
    assert stored(engine) == []
