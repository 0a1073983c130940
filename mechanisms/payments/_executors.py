"""Run independent per-seller jobs through any :class:`concurrent.futures.Executor`.

The payments of different sellers are independent (spec ``mechanism.md`` §5), so they
are chunked and mapped over an executor: a process pool by default, a thread pool,
:class:`SerialExecutor` (in-process, for tests and debugging), or a Dask cluster
(:class:`DaskExecutor`, or ``distributed.Client(...).get_executor()``).

The chunks are sized by the executor's actual worker count (:func:`worker_count`,
:func:`shrinking_chunks`: about four chunks per worker at first, then smaller ones,
for progress and load balance). On a process pool the
shared object is pickled once per call, its bytes travel with the first chunk a worker
runs and are unpickled once per worker process, the other chunks carrying only the
call's token (:class:`_Shared`: each chunk of a call gets the same object, so caches
keyed by it, such as the payments' per-base memos, are built once per process); on
Dask it is scattered to the workers **once** (``Client.scatter(..., broadcast=True)``)
and every chunk receives a reference to it.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import pickle
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    ProcessPoolExecutor,
    wait,
)
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


def shrinking_chunks(items: Sequence[T], n_workers: int) -> list[list[T]]:
    """``items`` in contiguous chunks for ``n_workers`` workers that take them in
    order: each chunk a ``1/(2·n_workers)`` share of the items still left, at most
    ``⌈n/(4·n_workers)⌉`` items (about four chunks per worker while much is left, as
    the progress reports come) and at least a sixteenth of that.

    Equal chunks end unevenly: the last chunk a worker takes may start when the others
    are nearly done, and they then wait for it. Measured on the payments of all 10⁴
    sellers of a market (eight chunks on two workers) the two workers finished
    0.1–0.36 s apart in 5 s; on Wisconsin (380 sellers, a cross-checked seller costing
    about ten times another) 0.04–0.14 s apart in 0.45 s. Shrinking chunks leave the
    end to the smallest (guided self-scheduling, with the share halved)."""
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers!r}")
    n = len(items)
    top = max(1, -(-n // (4 * n_workers)))
    least = max(1, -(-top // 16))
    out: list[list[T]] = []
    pos = 0
    while pos < n:
        size = min(top, max(least, -(-(n - pos) // (2 * n_workers))))
        out.append(list(items[pos : pos + size]))
        pos += size
    return out


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
        Picklable data every chunk needs: on a process pool its pickle goes with the
        first chunk a worker runs (and with a chunk sent again to a process that does
        not hold it), the other chunks carry a token; on Dask it is scattered once.
    items : sequence
        The work items (e.g. seller indices).
    executor : Executor, optional
        Where to run; ``None`` creates a :class:`ProcessPoolExecutor` with
        :func:`default_workers` processes (shut down on return).
    chunk_size : int, optional
        Items per chunk; default :func:`shrinking_chunks` for the worker count of
        ``executor`` (:func:`worker_count`): about four chunks per worker at first,
        smaller ones towards the end (for progress and load balance).
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
        chunks = shrinking_chunks(items, n_workers)
    elif chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size!r}")
    else:
        chunks = chunked(items, -(-total // chunk_size))
    pool = ProcessPoolExecutor(max_workers=n_workers) if own else executor
    assert pool is not None
    client = _dask_client(pool)
    task: Callable[..., Any] = fn
    if client is not None:
        scattered = DaskExecutor.scatter_with(client, shared)
        carriers = (scattered, scattered)
    else:  # one object per worker process for all of this call's chunks
        full = _Shared(uuid.uuid4().hex, shared)
        carriers = (full, full.by_token())
        task = functools.partial(_unwrapped, fn)
    try:
        with _older_objects_frozen():
            return _run(pool, task, carriers, n_workers, chunks, total, progress)
    finally:
        if own:
            pool.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True, eq=False)
class _Shared:
    """The shared object of one :func:`map_chunks` call as chunks carry it, named by
    a token for that call.

    Pickled (:meth:`__reduce__`), a carrier with ``carry=True`` holds the object's
    own pickle, made once per call (:attr:`payload`); a worker process unpickles that
    only the first time it meets the call and keeps the object it restored under the
    token (:func:`_restore_shared`), so every chunk of the call that runs there works
    on one object, and what is cached by that object's identity (the payment sweeps'
    per-base memos: re-solvers, the base's losses, renewal arrays) is built once per
    process. The other chunks travel with a carrier of the token alone
    (:meth:`by_token`, ``carry=False``): a worker that already holds the object
    takes it from there (:func:`_lookup_shared`), and one that does not answers
    :class:`_NeedsPayload`, upon which :func:`_run` sends that chunk again with the
    payload. A chunk with the payload goes through the pool's pipe while both
    workers run, and the parent's feeding thread writes it in 64 KiB pieces, each
    waiting for a core: with a 6 MB payment job (``m = 10⁴``) in every chunk a worker
    waited 30–60 ms between its chunks on two busy cores (a 0.1 MB payload, 1–2 ms).
    In-process executors (threads, serial) never pickle a carrier and use ``obj`` as
    it is."""

    token: str
    obj: Any
    carry: bool = True

    @functools.cached_property
    def payload(self) -> bytes:
        """``pickle.dumps(obj)`` (computed at the first chunk's pickling)."""
        return pickle.dumps(self.obj, protocol=pickle.HIGHEST_PROTOCOL)

    def by_token(self) -> _Shared:
        """The carrier of the same object that pickles to its token alone."""
        return _Shared(self.token, self.obj, carry=False)

    def __reduce__(self) -> tuple[Any, ...]:
        if self.carry:
            return (_restore_shared, (self.token, self.payload))
        return (_lookup_shared, (self.token,))


@dataclass(frozen=True)
class _NeedsPayload:
    """A worker's answer to a chunk whose shared object it does not hold."""

    token: str


_MISSING = object()
""":attr:`_Shared.obj` of a carrier whose token this process does not hold."""

_RESTORED: OrderedDict[str, _Shared] = OrderedDict()
_RESTORED_LOCK = threading.Lock()
RESTORED_SHARED = 1
"""How many restored shared objects a process keeps (the most recently used). A pool
worker serves one call's chunks in a row; two calls interleaved on one worker restore
theirs again each time they alternate (their chunks by token are sent again with the
payload). One, because a kept object (a payment job: its records and the re-solvers'
caches, tens of MB at ``m = 10⁵``) stays in memory until the next call replaces it."""


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


def _lookup_shared(token: str) -> _Shared:
    """The :class:`_Shared` of ``token`` this process restored, else a carrier whose
    ``obj`` is :data:`_MISSING`."""
    with _RESTORED_LOCK:
        hit = _RESTORED.get(token)
        if hit is not None:
            _RESTORED.move_to_end(token)
            return hit
    return _Shared(token, _MISSING, carry=False)


def _unwrapped(
    fn: Callable[[Any, list[T]], list[R]], shared: _Shared, chunk: list[T]
) -> list[R] | _NeedsPayload:
    """``fn`` on the object a :class:`_Shared` carries (:class:`_NeedsPayload` where
    this process does not hold it)."""
    if shared.obj is _MISSING:
        return _NeedsPayload(shared.token)
    return fn(shared.obj, chunk)


@contextlib.contextmanager
def _older_objects_frozen() -> Iterator[None]:
    """The collector's oldest generation left alone while a call's chunks run: the
    objects alive at its start (the interpreter's modules, the caller's data) are
    moved to the permanent generation (:func:`gc.freeze`) and back at its end
    (:func:`gc.unfreeze`: nothing is lost, a cycle among them is collected later as
    before). The parent process feeds the pool and unpickles each chunk's results
    while both cores run workers; a full collection there (150–220 ms measured with a
    payment benchmark's heap, triggered by the results' objects) held the pool's
    feeding thread, and a worker waited that long for its next chunk. Skipped where
    the collector is disabled or something is already frozen (a pre-forking server's
    own freeze is not undone)."""
    if not gc.isenabled() or gc.get_freeze_count() > 0:
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _run(
    pool: Executor,
    fn: Callable[..., Any],
    carriers: tuple[Any, Any],
    n_full: int,
    chunks: Sequence[list[T]],
    total: int,
    progress: Progress | None,
) -> list[R]:
    """Submit every chunk, the first ``n_full`` (one a worker) with ``carriers[0]``
    and the others with ``carriers[1]`` (:class:`_Shared`), and collect the results
    in chunk order; a chunk answered :class:`_NeedsPayload` is sent again with
    ``carriers[0]``."""
    full, light = carriers
    pending = {
        pool.submit(fn, full if j < n_full else light, chunk): j
        for j, chunk in enumerate(chunks)
    }
    results: dict[int, list[R]] = {}
    done = 0
    if progress is not None:
        progress(0, total)
    while pending:
        finished, _ = wait(pending, return_when=FIRST_COMPLETED)
        for fut in finished:
            j = pending.pop(fut)
            out = fut.result()
            if isinstance(out, _NeedsPayload):
                pending[pool.submit(fn, full, chunks[j])] = j
                continue
            results[j] = out
            done += len(out)
            if progress is not None:
                progress(done, total)
    return [r for j in sorted(results) for r in results[j]]
