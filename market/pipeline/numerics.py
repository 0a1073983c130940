"""The one adapter between the market and the numerics (``mechanisms``, ``learners``).

Every call into the numerics goes through here, so a signature change upstream is fixed
in one place, and no other market module imports ``mechanisms`` or ``learners``.
Learners are reached only through the registry (``learners.LEARNERS``): the market never
branches on a learner's name. Numerics raise ``ValueError`` for bad input; the helpers
that validate client input turn that into :class:`market.errors.InvalidInputError`
naming the field.

Money follows one rule, :mod:`mechanisms.money` (floor the shortest decimal form to minor
units): budgets, settled payments and ``choose_gamma``'s budget check all use it.
"""

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

import mechanisms as mech
from learners import LEARNERS, LearnerSpec, ParamError, ReleaseContext
from market.config import get_settings
from market.errors import InvalidInputError
from market.models import MINOR_UNITS
from mechanisms import money

FloatArray = NDArray[np.float64]
_NUMERIC_ERRORS = (ValueError, TypeError, ArithmeticError, KeyError)
MONEY_UNIT = str(1 / MINOR_UNITS)
"""One ledger unit in currency units (``"0.01"``)."""

LOSS_BY_TASK = {
    "classification": "logistic",
    "regression": "squared",
    "quantile": "pinball",
}
"""The task's loss, used only to validate settings before any learner is chosen."""

CONFIG_KEYS = (
    "gamma",
    "eps_avg_max",
    "k",
    "u",
    "u_power",
    "lam",
    "mu",
    "sigma",
    "mode",
    "certify",
)
"""Stored mechanism settings passed through to ``MechanismConfig``."""


# ---- money ----


def to_minor(amount: float) -> int:
    """``amount`` in minor units, rounded down (:mod:`mechanisms.money`'s rule)."""
    return money.to_minor(amount, MONEY_UNIT)


def to_major(amount_minor: int) -> float:
    """Minor units back to currency units (for display)."""
    return amount_minor / MINOR_UNITS


def payments_to_minor(payments: Sequence[float] | FloatArray) -> list[int]:
    """Each payment in minor units, rounded down, so ``Σ`` never exceeds the budget.

    Raises
    ------
    ValueError
        A payment is negative beyond rounding noise, or not finite.
    """
    arr = np.asarray(payments, dtype=float)
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < -1e-9))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"payments[{i}] = {arr[i]!r} is not a valid payment")
    return [int(n) for n in money.to_minor_units(np.maximum(arr, 0.0), MONEY_UNIT)]


# ---- learners (the registry) ----


def learner_spec(name: str) -> LearnerSpec:
    """The registered learner's spec; ``InvalidInputError`` on ``learner`` otherwise."""
    if name not in LEARNERS:
        raise InvalidInputError(
            "learner", f"unknown learner {name!r}; known: {sorted(LEARNERS)}"
        )
    return LEARNERS.spec(name)


def list_learners() -> list[dict[str, Any]]:
    """Every registered learner's public description (``GET /v1/learners``)."""
    return [spec.to_dict() for spec in LEARNERS.specs()]


def _has_missable(features: Sequence[Mapping[str, Any]] | None) -> bool:
    return any(bool(f.get("missable", False)) for f in features or ())


def check_order_learner(
    name: str,
    params: Mapping[str, Any],
    *,
    task: str,
    features: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Validate an order's ``learner`` against the registry, the market's task and
    ``features`` (a market with ``missable`` ones needs a learner that takes missing
    values), and its ``params`` against the learner's schema; return the params with
    defaults.

    Raises
    ------
    InvalidInputError
        Field ``learner`` or ``params.<name>``.
    """
    spec = learner_spec(name)
    if task not in spec.tasks:
        raise InvalidInputError(
            "learner",
            f"{name} cannot train a {task} market (it serves {list(spec.tasks)})",
        )
    if _has_missable(features) and not spec.missing_values:
        raise InvalidInputError(
            "learner",
            f"{name} cannot take missing values; this market has missable features",
        )
    try:
        return spec.check_params(params)
    except ParamError as exc:
        raise InvalidInputError(exc.field, exc.reason) from exc


def default_learner(
    task: str, features: Sequence[Mapping[str, Any]] | None = None
) -> str:
    """The registered learner a trade-off job uses for ``task`` (first by name; one
    that takes missing values when ``features`` has a missable one).

    Raises
    ------
    InvalidInputError
        No registered learner serves ``task``.
    """
    missable = _has_missable(features)
    names = [
        s.name
        for s in LEARNERS.specs()
        if task in s.tasks and (s.missing_values or not missable)
    ]
    if not names:
        raise InvalidInputError(
            "learner", f"no registered learner serves {task} markets"
        )
    return names[0]


def build_learner(
    name: str,
    params: Mapping[str, Any],
    *,
    config: Any,
    task: str,
    schema: Mapping[str, Any] | None = None,
) -> Any:
    """The learner of an order, bound to the mechanism's ``λ`` and mode and told the
    market's public ``schema``."""
    ctx = ReleaseContext(
        lam=float(config.lam),
        allocation_uses_data=config.mode != "strict",
        task=task,
        market=dict(schema or {}),
    )
    return LEARNERS[name].for_order(params, context=ctx)


def release(
    learner: Any,
    X: FloatArray,
    y: FloatArray,
    *,
    sample_epsilon: FloatArray,
    groups: Any,
) -> Any:
    """Fit ``learner`` spending the allocated per-record ``ε`` (its noise from OS
    entropy: the market never passes a ``random_state``); returns the fitted learner."""
    return learner.fit(X, y, sample_epsilon=sample_epsilon, groups=groups)


# ---- priors and settings ----


def build_prior(spec: Mapping[str, Any]) -> Any:
    """Return the ``CostPrior`` of ``{"family", "params"}`` (``mechanisms.prior_from_dict``).

    Raises
    ------
    InvalidInputError
        ``cost_prior`` is unknown, incomplete or invalid.
    """
    try:
        return mech.prior_from_dict(dict(spec))
    except _NUMERIC_ERRORS as exc:
        raise InvalidInputError("cost_prior", str(exc)) from exc


def check_reported_cost(prior_spec: Mapping[str, Any], cost: float) -> None:
    """Check that ``cost`` lies in the support of the market's prior.

    Raises
    ------
    InvalidInputError
        ``reported_cost`` is outside the prior's support.
    """
    prior = build_prior(prior_spec)
    try:
        prior.validate_costs(np.array([cost], dtype=float), name="reported_cost")
    except _NUMERIC_ERRORS as exc:
        raise InvalidInputError("reported_cost", str(exc)) from exc


def mechanism_config(
    values: Mapping[str, Any],
    *,
    loss: str,
    overhead: str = "auto",
    gamma: float | None = None,
) -> Any:
    """Return the ``MechanismConfig`` for stored settings, the learner's loss and
    release overhead (its ``LearnerSpec``), and ``γ``.

    Raises
    ------
    InvalidInputError
        The settings are rejected by ``MechanismConfig`` (field ``mechanism.<name>``).
    """
    kwargs = {k: values[k] for k in CONFIG_KEYS if k in values}
    if gamma is not None:
        kwargs["gamma"] = gamma
    kwargs["loss"] = loss
    kwargs["release_overhead"] = overhead
    try:
        return mech.MechanismConfig(**kwargs)
    except _NUMERIC_ERRORS as exc:
        name = str(exc).split(" ", 1)[0]
        field = f"mechanism.{name}" if name in CONFIG_KEYS else "mechanism"
        raise InvalidInputError(field, str(exc)) from exc


def learner_config(
    values: Mapping[str, Any], *, learner: str, gamma: float | None = None
) -> Any:
    """The ``MechanismConfig`` that prices ``learner`` (its loss and overhead)."""
    spec = learner_spec(learner)
    return mechanism_config(
        values, loss=spec.mechanism_loss, overhead=spec.overhead, gamma=gamma
    )


def check_settings(values: Mapping[str, Any], *, task: str) -> None:
    """Validate stored mechanism settings for a market of ``task`` (field named)."""
    mechanism_config(values, loss=LOSS_BY_TASK[task])


# ---- the mechanism ----


SERIAL_PAYMENTS_MAX = 64
"""Up to this many sellers, payments run in the calling thread's process (one
thread); above it in a ``forkserver`` process pool (never ``fork``: the service
process has threads)."""


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
    return cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx)


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
    that pays sellers, on :func:`payments_executor` (shut down on return)."""
    with payments_executor(len(costs)) as pool:
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
) -> Any:
    """Myerson payments (spec §5) via ``mechanisms.myerson_payments`` (``.payments``,
    ``.epsilon``); an order never falls back to the paper's non-IC ``Ψ·ε`` rule."""
    instance = mech.Instance(X, y, costs, prior, eps_max)
    with payments_executor(len(costs)) as pool:
        return mech.myerson_payments(
            instance, config, executor=pool, base=allocation, progress=progress
        )


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
) -> Any:
    """Most accurate affordable ``γ`` (spec §4.3) via ``mechanisms.choose_gamma``, with
    the budget checked in minor units by the market's money rule."""
    return _on_payments_pool(
        mech.choose_gamma,
        X,
        y,
        costs,
        prior=prior,
        config=config,
        budget=budget_minor / MINOR_UNITS,
        unit=MONEY_UNIT,
        X_val=X_val,
        y_val=y_val,
        eps_max=eps_max,
        progress=progress,
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
) -> list[dict[str, Any]]:
    """``[{"gamma", "validation_error", "total_payment", ...}]`` over a ``γ`` grid
    (``mechanisms.tradeoff_curve``, Myerson totals; ``progress(done, total)``).

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
    )
    return [dict(p) | {"epsilon_total": p.epsilon_total} for p in points]


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
    """IC regret / IR / budget self-audit (spec §6) via ``mechanisms.audit_incentives``."""
    return mech.audit_incentives(
        X, y, costs, prior, config, budget=budget, sellers=sellers, eps_max=eps_max
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


def load_wisconsin() -> tuple[FloatArray, FloatArray]:
    """Wisconsin breast cancer scaled with its published public bounds."""
    from market.datasets import load_wisconsin as _load

    return _load(intercept=True)
