"""Run independent per-seller jobs through any :class:`concurrent.futures.Executor`.

The payments of different sellers are independent (spec ``mechanism.md`` §5), so they
are chunked and mapped over an executor: a process pool by default, a thread pool,
:class:`SerialExecutor` (in-process, for tests and debugging), or a Dask cluster
(:class:`DaskExecutor`, or ``distributed.Client(...).get_executor()``).

The chunks are sized by the executor's actual worker count (:func:`worker_count`:
about four chunks per worker, for progress and load balance). On a process pool the
shared object is pickled once per call, its bytes travel with every chunk and are
unpickled once per worker process (:class:`_Shared`: each chunk of a call gets the
same object, so caches keyed by it, such as the payments' per-base memos, are built
once per process); on Dask it is
scattered to the workers **once** (``Client.scatter(..., broadcast=True)``) and every
chunk receives a reference to it.
"""

from __future__ import annotations

import functools
import os
import pickle
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")
Progress = Callable[[int, int], None]


class SerialExecutor(Executor):
    """An :class:`~concurrent.futures.Executor` that runs each call at submission."""

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        fut: Future[R] = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            fut.set_exception(exc)
        return fut


def chunked(items: Sequence[T], n_chunks: int) -> list[list[T]]:
    """Split ``items`` into at most ``n_chunks`` contiguous, near-equal, non-empty lists."""
    if n_chunks < 1:
        raise ValueError(f"n_chunks must be >= 1, got {n_chunks!r}")
    n = len(items)
    k = min(n_chunks, n)
    if k == 0:
        return []
    bounds = [round(j * n / k) for j in range(k + 1)]
    return [list(items[bounds[j] : bounds[j + 1]]) for j in range(k)]


class DaskExecutor(Executor):
    """A :class:`~concurrent.futures.Executor` on a ``distributed.Client``.

    ``submit`` goes through the client's own executor (futures are
    :class:`concurrent.futures.Future`); :func:`map_chunks` additionally uses
    :meth:`scatter` to ship the shared job once and :attr:`n_workers` (the cluster's
    threads) to size the chunks. The client is not closed by this wrapper.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self._executor: Executor = client.get_executor()

    @property
    def n_workers(self) -> int:
        """Threads over all of the cluster's workers (at least 1)."""
        return worker_count(self)

    def scatter(self, obj: Any) -> Any:
        """``obj`` on every worker; the returned future stands for it in ``submit``."""
        return self.scatter_with(self.client, obj)

    @staticmethod
    def scatter_with(client: Any, obj: Any) -> Any:
        """``client.scatter(obj)`` to every worker (a future for ``submit``)."""
        return client.scatter(obj, broadcast=True, hash=False)

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        return self._executor.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        # ClientExecutor.shutdown takes no cancel_futures: it cancels unfinished
        # futures itself when wait is False.
        self._executor.shutdown(wait=wait and not cancel_futures)


def _dask_client(executor: Executor) -> Any:
    """The ``distributed.Client`` behind a Dask executor, else ``None``."""
    if isinstance(executor, DaskExecutor):
        return executor.client
    # ``Client.get_executor()`` returns a distributed.cfexecutor.ClientExecutor,
    # which keeps its client in ``_client`` (no public accessor).
    client = getattr(executor, "_client", None)
    return client if hasattr(client, "scatter") else None


def worker_count(executor: Executor | None) -> int:
    """How many tasks ``executor`` runs at once: the default pool's
    :func:`default_workers`, a pool's ``max_workers``, a Dask cluster's threads, 1
    for :class:`SerialExecutor`; an unknown executor counts as
    :func:`default_workers`."""
    if executor is None:
        return default_workers()
    if isinstance(executor, SerialExecutor):
        return 1
    client = _dask_client(executor)
    if client is not None:
        return max(1, int(sum(client.nthreads().values())))
    n = getattr(executor, "_max_workers", None)  # Process/ThreadPoolExecutor
    return int(n) if isinstance(n, int) and n > 0 else default_workers()


def default_workers() -> int:
    """Worker processes for the default pool: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def map_chunks(
    fn: Callable[[Any, list[T]], list[R]],
    shared: Any,
    items: Sequence[T],
    *,
    executor: Executor | None = None,
    chunk_size: int | None = None,
    progress: Progress | None = None,
) -> list[R]:
    """``[r for chunk in chunks for r in fn(shared, chunk)]`` in input order.

    Parameters
    ----------
    fn : callable
        A picklable (module-level) function of ``(shared, chunk)`` returning one result
        per chunk item.
    shared : object
        Picklable data every chunk needs (sent once per chunk; once in all on Dask).
    items : sequence
        The work items (e.g. seller indices).
    executor : Executor, optional
        Where to run; ``None`` creates a :class:`ProcessPoolExecutor` with
        :func:`default_workers` processes (shut down on return).
    chunk_size : int, optional
        Items per chunk; default about four chunks per worker of ``executor``
        (:func:`worker_count`; for progress and load balance) and at least one item.
    progress : callable, optional
        ``progress(done, total)`` after each finished chunk (``done`` counts items).
    """
    items = list(items)
    total = len(items)
    if total == 0:
        return []
    own = executor is None
    n_workers = worker_count(executor)
    if chunk_size is None:
        chunk_size = max(1, -(-total // (4 * n_workers)))
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size!r}")
    chunks = chunked(items, -(-total // chunk_size))
    pool = ProcessPoolExecutor(max_workers=n_workers) if own else executor
    assert pool is not None
    client = _dask_client(pool)
    if client is not None:
        shared = DaskExecutor.scatter_with(client, shared)
    else:  # one object per worker process for all of this call's chunks
        shared = _Shared(uuid.uuid4().hex, shared)
        fn = functools.partial(_unwrapped, fn)
    try:
        return _run(pool, fn, shared, chunks, total, progress)
    finally:
        if own:
            pool.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True, eq=False)
class _Shared:
    """The shared object of one :func:`map_chunks` call as chunks carry it, named by
    a token for that call. Pickled (:meth:`__reduce__`), it carries the object's
    own pickle, made once per call (:attr:`payload`) rather than once per chunk; a
    worker process unpickles that only for the first chunk of the call it runs and
    returns the object it restored then for the others (:func:`_restore_shared`),
    so every chunk of the call that runs there works on one object, and what is
    cached by that object's identity (the payment sweeps' per-base memos:
    re-solvers, the base's losses, renewal arrays) is built once per process instead
    of once per chunk. (A Wisconsin payment job pickles to about 0.3 MB: 0.8 ms to
    pickle and 0.5 ms to unpickle, per chunk before, on the two cores the workers
    use.)"""

    token: str
    obj: Any

    @functools.cached_property
    def payload(self) -> bytes:
        """``pickle.dumps(obj)`` (computed at the first chunk's pickling)."""
        return pickle.dumps(self.obj, protocol=pickle.HIGHEST_PROTOCOL)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_shared, (self.token, self.payload))


_RESTORED: OrderedDict[str, _Shared] = OrderedDict()
_RESTORED_LOCK = threading.Lock()
RESTORED_SHARED = 1
"""How many restored shared objects a process keeps (the most recently used). A pool
worker serves one call's chunks in a row; two calls interleaved on one worker restore
theirs per chunk, as without this cache. One, because a kept object (a payment job:
its records and the re-solvers' caches, tens of MB at ``m = 10⁵``) stays in memory
until the next call replaces it."""


def _restore_shared(token: str, payload: bytes) -> _Shared:
    """The :class:`_Shared` of ``token`` this process already restored, else the
    object unpickled from ``payload`` under that token (kept for the chunks that
    follow)."""
    with _RESTORED_LOCK:
        hit = _RESTORED.get(token)
        if hit is not None:
            _RESTORED.move_to_end(token)
            return hit
        out = _RESTORED[token] = _Shared(token, pickle.loads(payload))
        while len(_RESTORED) > RESTORED_SHARED:
            _RESTORED.popitem(last=False)
        return out


def _unwrapped(
    fn: Callable[[Any, list[T]], list[R]], shared: _Shared, chunk: list[T]
) -> list[R]:
    """``fn`` on the object a :class:`_Shared` carries."""
    return fn(shared.obj, chunk)


def _run(
    pool: Executor,
    fn: Callable[[Any, list[T]], list[R]],
    shared: Any,
    chunks: Iterable[list[T]],
    total: int,
    progress: Progress | None,
) -> list[R]:
    futures = {pool.submit(fn, shared, chunk): j for j, chunk in enumerate(chunks)}
    results: dict[int, list[R]] = {}
    done = 0
    if progress is not None:
        progress(0, total)
    for fut in as_completed(futures):
        j = futures[fut]
        results[j] = fut.result()
        done += len(results[j])
        if progress is not None:
            progress(done, total)
    return [r for j in sorted(results) for r in results[j]]
