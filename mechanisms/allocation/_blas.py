"""One BLAS thread inside the allocation solvers.

The solvers' linear algebra is many small products (``d × d`` Gram blocks, ``d``-vectors):
a threaded BLAS spends more on waking and synchronising its threads than on the work,
and on a shared machine a waiting thread spins on a busy core. Measured at
``m = 10⁴, d = 20`` on 2 loaded cores: ``allocate`` 7–11 s with OpenBLAS's 2 threads,
1.0 s with one (``benchmarks/RESULTS.md``, "Scale"). Parallelism belongs one level up:
payments run sellers in parallel processes (:mod:`mechanisms.payments._executors`).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

from threadpoolctl import ThreadpoolController

P = ParamSpec("P")
R = TypeVar("R")
_controller: list[Any] = []  # one lazily built ThreadpoolController (0.1 ms a limit)


_depth = threading.local()  # per thread: how many one_blas_thread blocks are open


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Context manager limiting every loaded BLAS to one thread (restored on exit).

    Inside another such block of the same thread it does nothing: the limit already
    holds, and a payment chunk (one limit) runs thousands of re-solves that each ask
    again (0.1 ms a limit, ~7 % of a re-solve at m = 10⁴)."""
    depth = getattr(_depth, "n", 0)
    if depth:
        _depth.n = depth + 1
        try:
            yield
        finally:
            _depth.n = depth
        return
    if not _controller:
        _controller.append(ThreadpoolController())
    with _controller[0].limit(limits=1, user_api="blas"):
        _depth.n = 1
        try:
            yield
        finally:
            _depth.n = 0


def single_blas_thread(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator: run ``fn`` under :func:`one_blas_thread`."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if getattr(_depth, "n", 0):  # the limit holds: no context manager (~1 µs)
            return fn(*args, **kwargs)
        with one_blas_thread():
            return fn(*args, **kwargs)

    return run
