"""Group commit: one writer thread runs the small write jobs of concurrent requests in
one transaction, so many requests share one commit (one ``fsync`` of the SQLite WAL
under ``synchronous=FULL``; one WAL flush on PostgreSQL).

A request hands the writer a *job*, a function of a SQLAlchemy ``Connection`` that
reads and writes a few rows, and a callback. The writer takes every job waiting in its
queue (at most ``max_batch``), begins one transaction (``BEGIN IMMEDIATE`` on SQLite,
:func:`market.store.db.writer_bind`), runs the jobs in submission order and commits once.
A job's failure is undone alone: on PostgreSQL each job runs in its own ``SAVEPOINT``
(an error there aborts the whole transaction otherwise); on SQLite a failed statement
is undone by SQLite itself and the transaction goes on, so a job there must make its
writes with one statement that can fail (the intake's jobs do: one upsert, one
insert), which saves two statements per job; if SQLite instead rolls the whole
transaction back (I/O error, full disk), the batch counts as failed (below). Batches form by themselves: the jobs that arrive while a commit is being flushed
to disk make up the next batch, so under load a commit serves many requests and when
idle a request waits for nothing but its own commit.

Guarantees (``tests/market/test_group_commit.py``):

- **Durable before answered.** A ``durable`` job's callback runs only after the
  ``COMMIT`` of the transaction that holds its writes has returned. Non-durable jobs
  (best-effort writes such as rate-limit counters, whose loss on a crash is harmless)
  are answered as soon as they have run; their writes are committed with the batch.
- **Failures stay with their job.** A job that raises is undone (above) and answered
  with its exception; the other jobs of the batch are unaffected. If the
  transaction itself fails (``BEGIN`` or ``COMMIT``: a lock timeout, a full disk),
  nothing of the batch is stored, and each durable job not yet answered is run again
  alone, in its own transaction, and answered with its own outcome. (Non-durable jobs
  already answered are not repeated: their writes are lost, which they allow.)
- **No caller waits forever.** If the thread itself dies (a job raising a
  ``BaseException``), the jobs of its batch, those queued and all later ones are
  answered with :class:`WriterStoppedError`.
- **Ordering.** Jobs run in submission order; each sees the writes of the jobs before
  it in the same batch.

The writer holds one connection of the engine for its lifetime, so it does not contend
with itself for SQLite's write lock; other processes and the other sessions of this one
still do, through ``busy_timeout``, exactly as before.
"""

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from market.store.db import writer_bind

_log = logging.getLogger(__name__)

Job = Callable[[sa.Connection], Any]
"""A unit of work run inside the batch's transaction (in its own savepoint)."""

Done = Callable[[Any, BaseException | None], None]
"""Called once per job with ``(result, None)`` or ``(None, exception)``."""

MAX_BATCH = 256
"""Most jobs in one transaction (bounds how long the write lock is held)."""


class WriterStoppedError(RuntimeError):
    """The writer was stopped before it could run the job."""


@dataclass(slots=True)
class _Item:
    job: Job
    done: Done
    durable: bool
    answered: bool = False
    result: Any = None

    def answer(self, result: Any, exc: BaseException | None) -> None:
        if self.answered:
            return
        self.answered = True
        try:
            self.done(result, exc)
        except Exception:  # a callback must not kill the writer
            _log.exception("group-commit callback failed")


_STOP = object()


class _TransactionLost(Exception):
    """SQLite rolled the whole transaction back after a job's error."""


def _sqlite_in_transaction(conn: sa.Connection) -> bool:
    dbapi = conn.connection.dbapi_connection
    return bool(getattr(dbapi, "in_transaction", True))


@dataclass
class GroupCommitWriter:
    """A writer thread that commits the jobs of concurrent callers together.

    Parameters
    ----------
    engine : Engine
        The database; the writer keeps one of its connections.
    max_batch : int
        Most jobs per transaction.
    """

    engine: Engine
    max_batch: int = MAX_BATCH
    _queue: "queue.SimpleQueue[Any]" = field(default_factory=queue.SimpleQueue)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped: bool = False
    _conn: sa.Connection | None = None
    _current: list[_Item] = field(default_factory=list)
    batches: int = 0
    """Transactions committed so far (for tests and benchmarks)."""

    def submit(self, job: Job, done: Done, *, durable: bool = True) -> None:
        """Queue ``job``; ``done`` is called from the writer thread (module docstring).

        Raises
        ------
        WriterStoppedError
            If :meth:`stop` was called.
        """
        with self._lock:
            if self._stopped:
                raise WriterStoppedError("the group-commit writer is stopped")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="group-commit", daemon=True
                )
                self._thread.start()
            self._queue.put(_Item(job, done, durable))

    def run(
        self, job: Job, *, durable: bool = True, timeout: float | None = None
    ) -> Any:
        """Submit ``job`` and wait for its answer (blocking callers, tests)."""
        finished = threading.Event()
        box: list[Any] = []

        def done(result: Any, exc: BaseException | None) -> None:
            box.extend((result, exc))
            finished.set()

        self.submit(job, done, durable=durable)
        if not finished.wait(timeout):
            raise TimeoutError("the group-commit writer did not answer in time")
        result, exc = box
        if exc is not None:
            raise exc
        return result

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopped

    def stop(self) -> None:
        """Run what is queued, then end the thread and close its connection."""
        with self._lock:
            self._stopped = True
            thread = self._thread
        if thread is not None:
            self._queue.put(_STOP)
            thread.join()
        self._close()

    # --- the writer thread ---------------------------------------------------------

    def _loop(self) -> None:
        try:
            self._serve()
        finally:  # also if the thread dies: no caller may wait forever
            with self._lock:
                self._stopped = True
            for item in self._current:
                item.answer(None, WriterStoppedError("the writer stopped"))
            self._drain_stopped()
            self._close()

    def _serve(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                self._drain_stopped()
                return
            items = [first]
            stop = False
            while len(items) < self.max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                items.append(nxt)
            self._current = items
            self._run_batch(items)
            self._current = []
            if stop:
                self._drain_stopped()
                return

    def _drain_stopped(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not _STOP:
                item.answer(None, WriterStoppedError("the writer is stopped"))

    def _connection(self) -> sa.Connection:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._close()
            self._conn = writer_bind(self.engine).connect()
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                _log.exception("closing the group-commit connection failed")
            self._conn = None

    def _run_batch(self, items: list[_Item]) -> None:
        try:
            conn = self._connection()
            with conn.begin():
                for item in items:
                    self._run_one(conn, item)
        except Exception as exc:  # BEGIN or COMMIT failed: nothing of it is stored
            self._close()
            pending = [i for i in items if not i.answered]
            if len(items) == 1 or not pending:
                for item in pending:
                    item.answer(None, exc)
                return
            _log.warning(
                "group commit of %d jobs failed (%s); one by one", len(items), exc
            )
            for item in pending:
                self._run_batch([item])
            return
        self.batches += 1
        for item in items:
            item.answer(item.result, None)

    def _run_one(self, conn: sa.Connection, item: _Item) -> None:
        sqlite = conn.dialect.name == "sqlite"
        savepoint = None if sqlite else conn.begin_nested()
        try:
            result = item.job(conn)
        except Exception as exc:
            if savepoint is not None:
                savepoint.rollback()
            item.answer(None, exc)
            if sqlite and not _sqlite_in_transaction(conn):
                raise _TransactionLost from exc
            return
        if savepoint is not None:
            savepoint.commit()
        if item.durable:
            item.result = result
        else:
            item.answer(result, None)
