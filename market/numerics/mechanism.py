"""Calls into the mechanism: allocation, Myerson payments, ``γ`` for a budget, the
trade-off curve and the incentive audits, with payments on
:func:`market.numerics.executors.payments_executor`."""

import concurrent.futures as cf
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np
from numpy.typing import NDArray

import mechanisms as mech
from market.numerics import executors
from market.numerics.money import MONEY_UNIT, payments_to_minor
from market.store.models import MINOR_UNITS

FloatArray = NDArray[np.float64]

SolverError = mech.SolverError
"""An allocation solve that returned no usable point (``Allocation.raise_for_status``,
a failed conic ``a``-step)."""


def allocate(
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray,
    *,
    prior: Any,
    config: Any,
    eps_max: FloatArray | None = None,
) -> Any:
    """Solve the allocation (spec §4.1) with ``mechanisms.allocate``; returns ``Allocation``."""
    return mech.allocate(mech.Instance(X, y, costs, prior, eps_max), config)


def _on_payments_pool(
    fn: Any,
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray,
    *,
    prior: Any,
    config: Any,
    **kwargs: Any,
) -> Any:
    """``fn(X, y, costs, prior, config, executor=pool, **kwargs)`` for a numerics call
    that pays sellers, on :func:`~market.numerics.executors.payments_executor` (shut down on return)."""
    with executors.payments_executor(len(costs)) as pool:
        return fn(X, y, costs, prior, config, executor=pool, **kwargs)


def myerson_payments(
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray,
    *,
    prior: Any,
    config: Any,
    eps_max: FloatArray,
    allocation: Any = None,
    progress: Any = None,
    checkpoint: Callable[[], None] | None = None,
) -> Any:
    """Myerson payments (spec §5) via ``mechanisms.myerson_payments`` (``.payments``,
    ``.epsilon``); an order never falls back to the paper's non-IC ``Ψ·ε`` rule.
    ``checkpoint()`` runs before every re-solve (cooperative stop)."""
    instance = mech.Instance(X, y, costs, prior, eps_max)
    try:
        with executors.payments_executor(len(costs)) as pool:
            return mech.myerson_payments(
                instance,
                config,
                executor=pool,
                base=allocation,
                progress=progress,
                checkpoint=checkpoint,
            )
    except BrokenProcessPool:
        if checkpoint is not None:
            # A pool broken by a stop or a deadline: say so. A stop signal sent to the
            # process group reaches the payment processes and this one at once, and
            # their exit can be seen here before this process's handler has marked
            # the stop: look again for a moment before calling the pool broken.
            until = time.monotonic() + STOP_GRACE_S
            while True:
                checkpoint()
                if time.monotonic() >= until:
                    break
                time.sleep(0.02)
        raise


STOP_GRACE_S = 1.0
"""How long a broken payments pool waits for a stop request before it is reported as
a failure (:func:`myerson_payments`)."""


def payment_certificates(pay: Any) -> list[dict[str, Any] | None] | None:
    """Each seller's payment certificate as JSON (``None`` for a seller without one),
    in seller order, when the payments carry them (``PaymentResult.certificates``)."""
    certs = getattr(pay, "certificates", None)
    if certs is None:
        return None
    n = len(np.asarray(pay.payments))
    return [
        None if certs.get(i) is None else dict(certs[i].to_dict()) for i in range(n)
    ]


def choose_gamma(
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray,
    *,
    prior: Any,
    config: Any,
    budget_minor: int,
    X_val: FloatArray,
    y_val: FloatArray,
    eps_max: FloatArray,
    progress: Any = None,
    release: Any = None,
    checkpoint: Callable[[], None] | None = None,
) -> Any:
    """Most accurate affordable ``γ`` (spec §4.3) via ``mechanisms.choose_gamma``, with
    every payment turned into minor units by the market's money rule
    (:func:`~market.numerics.money.payments_to_minor`, the one that settles the
    ledger) and compared with ``budget_minor``; ``release`` (a
    :class:`LearnerRelease`) scores each candidate by the ordered learner's model
    fitted on public proxy rows drawn from ``X_val, y_val`` (the rows its ``predict``
    takes). No private record reaches a release. ``checkpoint()`` runs before every
    payment re-solve."""
    n_rows = getattr(release, "n_rows", None)
    return _on_payments_pool(
        mech.choose_gamma,
        X,
        y,
        costs,
        prior=prior,
        config=config,
        budget=budget_minor / MINOR_UNITS,
        unit=MONEY_UNIT,
        minor_units=payments_to_minor,
        X_val=X_val,
        y_val=y_val,
        eps_max=eps_max,
        progress=progress,
        checkpoint=checkpoint,
        release=release,
        n_rows=n_rows,
    )


def tradeoff(
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray,
    *,
    prior: Any,
    config: Any,
    grids: Mapping[str, Sequence[float]],
    gammas: Sequence[float],
    X_val: FloatArray,
    y_val: FloatArray,
    eps_max: FloatArray | None = None,
    progress: Callable[[int, int], None] | None = None,
    release: Any = None,
) -> list[dict[str, Any]]:
    """``[{"gamma", "validation_error", "total_payment", ...}]`` over a ``γ`` grid
    (``mechanisms.tradeoff_curve``, Myerson totals; ``progress(done, total)``), scored
    by ``release`` on public proxy rows as in :func:`choose_gamma` (no privacy spent).
    ``total_payment`` is what an order at that point would charge: every seller's
    payment rounded up to the ledger unit (:func:`payments_to_minor`), summed.

    The admin's ``(λ, μ, σ)`` grids where the market declares them, else its own
    settings only: each grid point costs one allocation plus Myerson payments.
    """
    grid = {
        key: [float(v) for v in grids[key]]
        if grids.get(key)
        else [float(getattr(config, key))]
        for key in ("lam", "mu", "sigma")
    }
    points = mech.tradeoff_curve(
        X,
        y,
        costs,
        prior,
        config,
        gammas=list(gammas),
        X_val=X_val,
        y_val=y_val,
        grid=grid,
        select_on_total=True,
        eps_max=eps_max,
        progress=progress,
        release=release,
        n_rows=getattr(release, "n_rows", None),
        payment_fn=_charged_total(eps_max),
    )
    return [dict(p) | {"epsilon_total": p.epsilon_total} for p in points]


def _charged_total(eps_max: FloatArray | None) -> Callable[..., float]:
    """A trade-off ``payment_fn``: the Myerson payments of an allocation, each rounded
    up to the ledger unit, summed exactly in currency units (what the buyer is
    charged; an amount beyond what the ledger counts is counted as it is)."""

    def total(X: Any, y: Any, costs: Any, prior: Any, cfg: Any, alloc: Any) -> float:
        pay = mech.myerson_payments(X, y, costs, prior, cfg, eps_max, base=alloc)
        units = mech.money.total_units(
            pay.payments,
            MONEY_UNIT,
            privacy_costs=pay.privacy_costs,
            epsilon=pay.epsilon,
        )
        return units / MINOR_UNITS

    return total


def audit_incentives(
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray,
    *,
    prior: Any,
    config: Any,
    budget: float | None = None,
    sellers: Any = None,
    eps_max: FloatArray | None = None,
) -> Any:
    """IC regret / IR / budget self-audit (spec §6) via ``mechanisms.audit_incentives``,
    on one :func:`~market.numerics.executors.payments_executor` for both of its passes (truthful payments of every
    seller, then the misreports), as an order's payments run."""
    return _on_payments_pool(
        mech.audit_incentives,
        X,
        y,
        costs,
        prior=prior,
        config=config,
        budget=budget,
        sellers=sellers,
        eps_max=eps_max,
    )


def audit_on_pool(
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray,
    *,
    prior: Any,
    config: Any,
    budget: float | None,
    n_sellers: int,
    workers: int,
    progress: Any = None,
    random_state: int | None = None,
    mono_points: int = 0,
) -> tuple[Any, Any]:
    """The incentive audit over ``n_sellers`` sampled sellers and, with
    ``mono_points ≥ 2``, the monotonicity sweep of the first ``n_sellers`` sellers
    (cold re-solves), on a process pool of ``workers`` processes (0: one per CPU)."""
    n_proc = workers or max(1, len(os.sched_getaffinity(0)))
    with cf.ProcessPoolExecutor(n_proc) as pool:
        report = mech.audit_incentives(
            X, y, costs, prior, config, budget=budget, n_sellers=n_sellers,
            executor=pool, progress=progress, random_state=random_state,
        )  # fmt: skip
        mono = None
        if mono_points >= 2 and n_sellers > 0:
            mono = mech.audit_monotonicity(
                X, y, costs, prior, config,
                sellers=range(min(n_sellers, X.shape[0])),
                n_points=mono_points, executor=pool,
            )  # fmt: skip
    return report, mono


FIRST_RUN_NOTE = (
    "first run: the numerical kernels compile once for this installation (about 30 s "
    "on the first order; later runs reuse the compiled code)"
)
"""What ``serve`` and ``demo`` print when :func:`kernels_compiled` is false."""


def kernels_compiled() -> bool:
    """Whether numba's on-disk cache already holds the allocation's weight kernels,
    which every order runs (``cache=True``: compiled once per installation, about
    30 s). Looks for the cache's index files under ``NUMBA_CACHE_DIR`` when it is set,
    else next to the module; reads nothing else, compiles nothing."""
    from pathlib import Path

    pattern = "_weights_kernel.*.nbi"
    custom = os.environ.get("NUMBA_CACHE_DIR")
    if custom:
        return any(Path(custom).rglob(pattern))
    root = Path(mech.__file__).resolve().parent / "allocation" / "__pycache__"
    return any(root.glob(pattern))
