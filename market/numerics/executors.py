"""Executors for the per-seller payment re-solves: the calling thread for small
orders, a ``forkserver`` process pool (with its signal handling) or a Dask cluster."""

import concurrent.futures as cf
import contextlib
import ctypes
import multiprocessing
import os
import signal
from collections.abc import Iterator
from typing import Any

import mechanisms as mech
from market.config import get_settings

SERIAL_PAYMENTS_MAX = 512
"""Up to this many sellers, payments run in the calling thread's process (one
thread); above it in a ``forkserver`` process pool (never ``fork``: the service
process has threads). Each pool worker first imports the numerics and loads the
compiled kernels (about 3 s of CPU, measured on the 2-core development machine),
while a seller's payment costs 10–20 ms of CPU at m = 300 (Wisconsin demo, strict
and default mode; ``benchmarks/RESULTS.md``, section "Demo and payments under the
default rule"): below a few hundred sellers the pool costs more than it saves."""


def payments_executor(m: int) -> Any:
    """Return an executor (a context manager) for per-seller payment re-solves.

    Above ``SERIAL_PAYMENTS_MAX`` sellers: on the Dask scheduler of the setting
    ``PRIVMARKET_DASK_SCHEDULER`` when set (:func:`dask_executor`), else a local
    process pool.
    """
    if m <= SERIAL_PAYMENTS_MAX:
        return cf.ThreadPoolExecutor(max_workers=1)
    address = get_settings().dask_scheduler
    if address:
        return dask_executor(address)
    workers = max(1, len(os.sched_getaffinity(0)))
    ctx = multiprocessing.get_context("forkserver")
    return _process_pool(workers, ctx)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _payment_process_init() -> None:
    """Set up a payment process: it leaves SIGTERM to its worker, which stops it
    through the stop flag (``deadline.request_stop``) and hands the order back (a
    process killed by a signal sent to the whole group would break the pool); and it
    is killed when its parent (the pool's fork server, which exits with the worker)
    dies, so no payment process outlives a worker that exited or was killed (Linux)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with contextlib.suppress(Exception):  # not Linux: the time budget still bounds it
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


@contextlib.contextmanager
def _process_pool(workers: int, ctx: Any) -> Iterator[cf.ProcessPoolExecutor]:
    """A payments process pool; on an error (a stop, a time budget) the chunks not
    yet started are cancelled instead of run."""
    pool = cf.ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_payment_process_init
    )
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


@contextlib.contextmanager
def dask_executor(address: str) -> Iterator[Any]:
    """A ``mechanisms.DaskExecutor`` on a client connected to ``address`` (closed on
    exit). The payment job is scattered to the cluster's workers once per order."""
    try:
        import distributed
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise RuntimeError(
            "PRIVMARKET_DASK_SCHEDULER is set but dask.distributed is not installed "
            "(pip install 'privmarket[dask]')"
        ) from exc
    with distributed.Client(address, set_as_default=False) as client:
        pool = mech.payments.DaskExecutor(client)
        try:
            yield pool
        finally:
            pool.shutdown(wait=True)
