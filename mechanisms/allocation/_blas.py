"""One BLAS thread inside the allocation solvers.

The solvers' linear algebra is many small products (``d × d`` Gram blocks, ``d``-vectors):
a threaded BLAS spends more on waking and synchronising its threads than on the work,
and on a shared machine a waiting thread spins on a busy core. Measured at
``m = 10⁴, d = 20`` on 2 loaded cores: ``allocate`` 7–11 s with OpenBLAS's 2 threads,
1.0 s with one (``benchmarks/RESULTS.md``, "Scale"). Parallelism belongs one level up:
payments run sellers in parallel processes (:mod:`mechanisms.payments._executors`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, ParamSpec, TypeVar

from threadpoolctl import ThreadpoolController

P = ParamSpec("P")
R = TypeVar("R")
_controller: list[Any] = []  # one lazily built ThreadpoolController (0.1 ms a limit)


def one_blas_thread() -> AbstractContextManager[Any]:
    """Context manager limiting every loaded BLAS to one thread (restored on exit)."""
    if not _controller:
        _controller.append(ThreadpoolController())
    limit: AbstractContextManager[Any] = _controller[0].limit(limits=1, user_api="blas")
    return limit


def single_blas_thread(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator: run ``fn`` under :func:`one_blas_thread`."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with one_blas_thread():
            return fn(*args, **kwargs)

    return run
