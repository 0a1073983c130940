"""The public :func:`myerson_payments`: an :class:`~mechanisms.Instance` or the
positional arrays.

Both forms run the same payment code (``_payments``, spec ``mechanism.md`` §5); the
positional form ``myerson_payments(X, y, costs, prior, cfg, eps_max=None, ...)`` is
kept for the callers written before :class:`~mechanisms.Instance` existed.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, Literal, overload

from numpy.typing import ArrayLike

from mechanisms.config import MechanismConfig
from mechanisms.instance import Instance, dispatch
from mechanisms.payments import _payments
from mechanisms.payments._executors import Progress
from mechanisms.payments._payments import PaymentResult
from mechanisms.priors import CostPrior
from mechanisms.result import Allocation

__all__ = ["myerson_payments"]


@overload
def myerson_payments(
    instance: Instance,
    cfg: MechanismConfig,
    *,
    sellers: ArrayLike | None = None,
    executor: Executor | None = None,
    base: Allocation | None = None,
    progress: Progress | None = None,
    chunk_size: int | None = None,
    verify: Literal["sample", "all"] = "sample",
    checkpoint: Callable[[], None] | None = None,
) -> PaymentResult: ...


@overload
def myerson_payments(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: CostPrior,
    cfg: MechanismConfig,
    eps_max: ArrayLike | None = None,
    sellers: ArrayLike | None = None,
    executor: Executor | None = None,
    *,
    base: Allocation | None = None,
    progress: Progress | None = None,
    chunk_size: int | None = None,
    verify: str = "sample",
    checkpoint: Callable[[], None] | None = None,
) -> PaymentResult: ...


def myerson_payments(*args: Any, **kwargs: Any) -> PaymentResult:
    """Myerson payments ``t_i`` of spec §5 for the allocation of the reported costs.

    Called as ``myerson_payments(instance, cfg, *, sellers=None, executor=None, ...)``
    or, positionally, as ``myerson_payments(X, y, costs, prior, cfg, eps_max=None,
    sellers=None, executor=None, *, ...)``.

    Parameters
    ----------
    instance : Instance
        Records, labels, reported costs, public prior and optional caps, validated.
    cfg : MechanismConfig
        ``cfg.mode`` must not be ``"paper"``.
    sellers : array-like of int, optional
        Indices to compute (default all); the others get payment 0 and
        ``computed = False``.
    executor : Executor, optional
        Where sellers run (in chunks); default a process pool.
    base : Allocation, optional
        The allocation of these reports if already solved (it fixes the warm starts).
    progress : callable, optional
        ``progress(done, total)`` in sellers.
    chunk_size : int, optional
        Sellers per executor task.
    verify : {"sample", "all"}
        Which winners' shortcut re-solves are checked against cold full re-solves
        (see ``mechanisms.payments._payments.myerson_payments``).
    checkpoint : callable, optional
        Called before every re-solve; what it raises stops the payments
        (cooperative cancellation: time budgets, shutdown).
    X, y, costs, prior, eps_max
        The positional form's arrays, as the fields of :class:`~mechanisms.Instance`.

    Returns
    -------
    PaymentResult

    Raises
    ------
    ValueError
        For malformed inputs (naming the parameter and the offending index).
    """
    return dispatch(_payments.myerson_payments, args, kwargs)
