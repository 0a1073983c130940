"""Cooperative stopping of an order's numerics: its time budget and a worker's shutdown.

An order runs under a :class:`Deadline`: ``Settings.order_time_limit_seconds`` from the
moment a worker starts it. The deadline is checked when a stage starts, at every
progress report, and before every allocation re-solve of the Myerson payments (the
``checkpoint`` hook of ``mechanisms.myerson_payments``), so a run that exceeds it stops
within one re-solve instead of holding the worker.

* :class:`TimeBudgetExceeded`: the order fails with that reason (nothing settled, no
  ledger entry).
* :class:`WorkerStopping`: the worker is shutting down (SIGTERM, app shutdown,
  :func:`request_stop` of its lease owner); the order is handed back to the queue and
  resumed by another (or the restarted) worker.

The checkpoint is a ``functools.partial`` of the module-level :func:`check`, so it
pickles into payment process pools; there only the time budget applies (a stop
request is seen by the calling thread at its next progress report).
"""

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

_STOPPING: set[str] = set()
_LOCK = threading.Lock()


class OrderInterruptedError(Exception):
    """The run was stopped cooperatively (see the subclasses)."""


class TimeBudgetExceededError(OrderInterruptedError):
    """The order ran longer than its time budget (``args[0]``: the budget in s)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.seconds = float(seconds)

    def __str__(self) -> str:
        return f"time budget of {self.seconds:g} s exceeded"


class WorkerStoppingError(OrderInterruptedError):
    """The worker that runs the order is shutting down (``args[0]``: its owner id)."""


def request_stop(owner: str) -> None:
    """Ask every run of lease owner ``owner`` in this process to stop at its next check."""
    with _LOCK:
        _STOPPING.add(owner)


def clear_stop(owner: str) -> None:
    """Forget a stop request (a worker object that is reused after stopping)."""
    with _LOCK:
        _STOPPING.discard(owner)


def stop_requested(owner: str) -> bool:
    """Whether :func:`request_stop` was called for ``owner`` in this process."""
    return owner in _STOPPING


def check(owner: str, at: float, seconds: float) -> None:
    """Raise :class:`WorkerStoppingError` or :class:`TimeBudgetExceededError` when due.

    ``at`` is the wall-clock (``time.time()``) end of the budget, comparable across
    processes on one host.
    """
    if owner in _STOPPING:
        raise WorkerStoppingError(owner)
    if time.time() > at:
        raise TimeBudgetExceededError(seconds)


@dataclass(frozen=True)
class Deadline:
    """An order run's time budget and its worker's stop flag."""

    owner: str
    at: float
    seconds: float

    @classmethod
    def start(cls, owner: str, seconds: float) -> "Deadline":
        """A budget of ``seconds`` from now (``inf``: only stop requests apply)."""
        return cls(owner=owner, at=time.time() + float(seconds), seconds=float(seconds))

    def check(self) -> None:
        """Raise when the run must stop (:func:`check`)."""
        check(self.owner, self.at, self.seconds)

    def checkpoint(self) -> Callable[[], None]:
        """A picklable ``checkpoint()`` for the numerics (``mechanisms`` hooks)."""
        return functools.partial(check, self.owner, self.at, self.seconds)
