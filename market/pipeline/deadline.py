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
pickles into payment process pools (more than ``numerics.SERIAL_PAYMENTS_MAX``
sellers). A stop request reaches those processes too: :func:`request_stop` also
creates a flag file named after the lease owner (:func:`stop_flag`, in the system's
temporary directory, so on this host), which :func:`check` looks for — so the pool's
processes stop at their next re-solve and the order is handed back within seconds
(a Dask cluster on other hosts sees only the time budget). The pool's processes
ignore SIGTERM themselves (``numerics.payments_executor``): a service manager that
signals the whole process group stops them through the worker's flag, not mid-write.
"""

import functools
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_STOPPING: set[str] = set()
_LOCK = threading.Lock()
FLAG_DIR = "privmarket-stop"
"""Directory (under the system's temporary directory) of the stop flag files."""


def stop_flag(owner: str) -> Path:
    """The flag file that tells other processes on this host to stop ``owner``'s runs."""
    name = owner.replace(os.sep, "_").replace("\0", "_")
    return Path(tempfile.gettempdir()) / FLAG_DIR / name


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
    """Ask every run of lease owner ``owner`` to stop at its next check: in this
    process, and in its payment processes on this host (the flag file)."""
    with _LOCK:
        _STOPPING.add(owner)
    flag = stop_flag(owner)
    try:
        flag.parent.mkdir(mode=0o700, exist_ok=True)
        flag.touch()
    except OSError:  # pragma: no cover - read-only temp: the time budget still applies
        pass


def clear_stop(owner: str) -> None:
    """Forget a stop request (a worker object that is reused after stopping)."""
    with _LOCK:
        _STOPPING.discard(owner)
    stop_flag(owner).unlink(missing_ok=True)


def stop_requested(owner: str) -> bool:
    """Whether :func:`request_stop` was called for ``owner`` in this process."""
    return owner in _STOPPING


def check(owner: str, at: float, seconds: float) -> None:
    """Raise :class:`WorkerStoppingError` or :class:`TimeBudgetExceededError` when due.

    ``at`` is the wall-clock (``time.time()``) end of the budget, comparable across
    processes on one host.
    """
    if owner in _STOPPING or stop_flag(owner).exists():
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
