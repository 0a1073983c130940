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
import ctypes
import dataclasses
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np
from numpy.typing import NDArray

import mechanisms as mech
from learners import LEARNERS, LearnerSpec, ParamError, ReleaseContext, align_by_key
from market.config import get_settings
from market.errors import InvalidInputError
from market.models import MINOR_UNITS
from mechanisms import money
from mechanisms.priors import check_usable as check_prior_usable

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
    partition: str = "horizontal",
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
    if spec.partition != partition:
        raise InvalidInputError(
            "learner",
            f"{name} trains {spec.partition} data; this market is {partition}",
        )
    if _has_missable(features) and not spec.missing_values:
        raise InvalidInputError(
            "learner",
            f"{name} cannot take missing values; this market has missable features",
        )
    try:
        checked = spec.check_params(params)
        spec.check_market(checked, features or ())
    except ParamError as exc:
        raise InvalidInputError(exc.field, exc.reason) from exc
    return checked


def records_per_seller_shortfall(name: str, counts: Sequence[int]) -> str | None:
    """Why sellers with ``counts`` records cannot feed learner ``name``, or None.

    A learner whose privacy unit is the seller with all its records
    (``min_records_per_seller > 1``) needs that many records from every seller; any
    other learner prices exactly one record per seller, except a vertical one, whose
    sellers are parties each offering a column block of many records.
    """
    spec = learner_spec(name)
    if spec.partition == "vertical":
        return None
    need = spec.min_records_per_seller
    short = sum(1 for n in counts if n < need)
    if short:
        return (
            f"{name} needs at least {need} records per seller; {short} of "
            f"{len(counts)} sellers have fewer"
        )
    if not spec.several_records_per_seller and any(n != 1 for n in counts):
        many = sum(1 for n in counts if n != 1)
        return (
            f"{name} prices exactly one record per seller; {many} of {len(counts)} "
            "sellers offer several"
        )
    return None


def default_learner(
    task: str,
    features: Sequence[Mapping[str, Any]] | None = None,
    partition: str = "horizontal",
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
        if task in s.tasks
        and (s.missing_values or not missable)
        and s.partition == partition
    ]
    if not names:
        raise InvalidInputError(
            "learner", f"no registered learner serves {task} markets"
        )
    return names[0]


def _release_context(
    config: Any, *, task: str, schema: Mapping[str, Any] | None
) -> ReleaseContext:
    return ReleaseContext(
        lam=float(config.lam),
        allocation_uses_data=config.mode != "strict",
        task=task,
        market=dict(schema or {}),
    )


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
    ctx = _release_context(config, task=task, schema=schema)
    return LEARNERS[name].for_order(params, context=ctx)


@dataclasses.dataclass(frozen=True, eq=False)
class LearnerRelease:
    """The ordered learner as the tuning code's ``release(X, y, allocation, rng)``.

    ``mechanisms.tuning`` scores a ``(λ, μ, σ, γ)`` grid point by the validation error
    of the model released at its allocation (spec ``mechanism.md`` §4.3). Left to its
    default it releases objective-perturbation logistic regression (or, for other
    losses, scores the noise-free ``w``), which is not what the buyer ordered. This
    adapter fits the registry learner instead, exactly as the order will: on the raw
    records ``X``/``y`` with ``groups`` (the priced rows the tuning code passes are
    ignored), each record spending its seller's allocated ``ε_i``, the learner bound
    to the grid point's ``λ``; its noise comes from the tuning code's ``rng``. The
    fitted learner's ``predict`` takes the market's scaled records, so the validation
    rows given with it are the scaled records, not the priced rows.
    """

    name: str
    params: Mapping[str, Any]
    context: ReleaseContext
    X: FloatArray
    y: FloatArray
    groups: NDArray[np.int64]

    def __call__(
        self, X: FloatArray, y: FloatArray, allocation: Any, rng: np.random.Generator, /
    ) -> Any:
        ctx = dataclasses.replace(self.context, lam=float(allocation.config.lam))
        learner = LEARNERS[self.name].for_order(self.params, context=ctx)
        learner.set_params(random_state=rng)  # type: ignore[attr-defined]
        eps = np.asarray(allocation.epsilon, dtype=float)[self.groups]
        return learner.fit(self.X, self.y, sample_epsilon=eps, groups=self.groups)


def learner_release(
    name: str,
    params: Mapping[str, Any],
    *,
    config: Any,
    task: str,
    schema: Mapping[str, Any] | None,
    X: FloatArray,
    y: FloatArray,
    groups: NDArray[np.int64],
) -> LearnerRelease:
    """:class:`LearnerRelease` for an order's learner on its raw records."""
    ctx = _release_context(config, task=task, schema=schema)
    return LearnerRelease(name, dict(params), ctx, X, y, groups)


def release_vertical(
    learner: Any, blocks: list[FloatArray], y: FloatArray, *, party_epsilon: FloatArray
) -> Any:
    """Fit a vertical learner on the parties' aligned blocks, each party's ``ε``
    applying to all its records (noise from OS entropy)."""
    return learner.fit(blocks, y, party_epsilon=party_epsilon)


def align_blocks(
    keys: Sequence[Sequence[str]], values: Sequence[FloatArray]
) -> tuple[list[str], list[FloatArray]]:
    """Align per-party blocks on the record key (``learners.secure_vertical.align_by_key``).

    Raises
    ------
    ValueError
        A duplicate or malformed key (``keys[k]`` named).
    """
    return align_by_key(keys, values)


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


def check_prior(spec: Mapping[str, Any]) -> None:
    """Check that the prior ``{"family", "params"}`` builds and is numerically usable
    (``mechanisms.priors.check_usable``: finite ``f > 0``, ``Ψ``, ``Ψ'`` on its
    central quantiles).

    Raises
    ------
    InvalidInputError
        Field ``cost_prior.params``, with the reason.
    """
    prior = build_prior(spec)
    try:
        check_prior_usable(prior)
    except _NUMERIC_ERRORS as exc:
        raise InvalidInputError("cost_prior.params", str(exc)) from exc


SMALLEST_ORDER = 2
"""Sellers in the smallest order the mechanism can run (it needs two rows)."""


def release_overhead_floor(
    values: Mapping[str, Any],
    *,
    task: str,
    features: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[float, str | None]:
    """The largest release overhead ``Δ`` one seller can be charged in an order on a
    market of ``task`` with these mechanism ``values``, and the learner charging it.

    Over the registered learners that can serve the market (its task; missing values
    when a feature is ``missable``), ``LearnerSpec.overhead_bound`` at
    ``m = SMALLEST_ORDER`` sellers: ``2 ln(1 + min(k/2, 1)/(4λ))`` for objective
    perturbation, 0 for local learners (spec ``mechanism.md`` §3). A seller is
    included in an order only while its remaining budget exceeds ``Δ``
    (``market.pipeline.instance.seller_caps``), so a lifetime cap at or below this
    floor lets an order with few sellers leave out sellers that spent nothing.
    Returns ``(0.0, None)`` when no learner charges an overhead.
    """
    missable = _has_missable(features)
    worst, by = 0.0, None
    for spec in LEARNERS.specs():
        if task not in spec.tasks or (missable and not spec.missing_values):
            continue
        bound = spec.overhead_bound(
            k=float(values["k"]), n_sellers=SMALLEST_ORDER, lam=float(values["lam"])
        )
        if bound > worst:
            worst, by = bound, spec.name
    return worst, by


def check_reported_cost(prior_spec: Mapping[str, Any], cost: float) -> None:
    """Check that ``cost`` lies in the support of the market's prior.

    Raises
    ------
    InvalidInputError
        ``reported_cost`` is outside the prior's support.
    """
    check_reported_costs(prior_spec, [cost])


def cost_checker(prior_spec: Mapping[str, Any]) -> Callable[[float], None]:
    """Return :func:`check_reported_cost` for one market with its prior built once
    (single-offer intake caches it per market: building the prior cost as much as the
    check).

    Raises
    ------
    InvalidInputError
        ``cost_prior`` is unknown, incomplete or invalid (when building the checker);
        the checker raises as :func:`check_reported_cost`.
    """
    prior = build_prior(prior_spec)

    def check(cost: float) -> None:
        # A cost inside the support passes the prior's own check; anything else is
        # decided, and its error worded, by that check.
        if prior.contains(cost):
            return
        try:
            prior.validate_costs(np.asarray([cost], dtype=float), name="reported_cost")
        except _NUMERIC_ERRORS as exc:
            raise InvalidInputError("reported_cost", str(exc)) from exc

    return check


def check_reported_costs(prior_spec: Mapping[str, Any], costs: Sequence[float]) -> None:
    """Check that every cost lies in the support of the market's prior (one
    vectorised check: bulk ingestion; the error does not say which cost failed).

    Raises
    ------
    InvalidInputError
        Some ``reported_cost`` is outside the prior's support.
    """
    prior = build_prior(prior_spec)
    try:
        prior.validate_costs(np.asarray(costs, dtype=float), name="reported_cost")
    except _NUMERIC_ERRORS as exc:
        raise InvalidInputError("reported_cost", str(exc)) from exc


def mechanism_config(
    values: Mapping[str, Any],
    *,
    loss: str,
    overhead: str = "auto",
    gamma: float | None = None,
    options: Mapping[str, Any] | None = None,
) -> Any:
    """Return the ``MechanismConfig`` for stored settings, the learner's loss and
    release overhead (its ``LearnerSpec``), its priced params (``options``, e.g. the
    pinball loss's ``quantile``) and ``γ``.

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
    kwargs.update(options or {})
    try:
        return mech.MechanismConfig(**kwargs)
    except _NUMERIC_ERRORS as exc:
        name = str(exc).split(" ", 1)[0]
        field = f"mechanism.{name}" if name in CONFIG_KEYS else "mechanism"
        raise InvalidInputError(field, str(exc)) from exc


def learner_config(
    values: Mapping[str, Any],
    *,
    learner: str,
    gamma: float | None = None,
    params: Mapping[str, Any] | None = None,
) -> Any:
    """The ``MechanismConfig`` that prices ``learner`` ordered with checked
    ``params`` (its loss, overhead and ``priced_params``)."""
    spec = learner_spec(learner)
    return mechanism_config(
        values,
        loss=spec.mechanism_loss,
        overhead=spec.overhead,
        gamma=gamma,
        options=spec.mechanism_options(params or {}),
    )


def check_settings(values: Mapping[str, Any], *, task: str) -> None:
    """Validate stored mechanism settings for a market of ``task`` (field named)."""
    mechanism_config(values, loss=LOSS_BY_TASK[task])


# ---- the mechanism ----


SERIAL_PAYMENTS_MAX = 512
"""Up to this many sellers, payments run in the calling thread's process (one
thread); above it in a ``forkserver`` process pool (never ``fork``: the service
process has threads). Each pool worker first imports the numerics and loads the
compiled kernels (about 3 s of CPU, measured on the 2-core development machine),
while a seller's payment costs 10–20 ms of CPU at m = 300 (Wisconsin demo, strict
and default mode; ``benchmarks/RESULTS.md``, issue 16 demo section): below a few
hundred sellers the pool costs more than it saves."""


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
    checkpoint: Callable[[], None] | None = None,
) -> Any:
    """Myerson payments (spec §5) via ``mechanisms.myerson_payments`` (``.payments``,
    ``.epsilon``); an order never falls back to the paper's non-IC ``Ψ·ε`` rule.
    ``checkpoint()`` runs before every re-solve (cooperative stop)."""
    instance = mech.Instance(X, y, costs, prior, eps_max)
    try:
        with payments_executor(len(costs)) as pool:
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
            checkpoint()  # a pool broken by a stop or a deadline: say so
        raise


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
) -> Any:
    """Most accurate affordable ``γ`` (spec §4.3) via ``mechanisms.choose_gamma``, with
    the budget checked in minor units by the market's money rule; ``release`` (a
    :class:`LearnerRelease`) scores each candidate by the ordered learner's model,
    then ``X_val`` holds the rows its ``predict`` takes."""
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
        release=release,
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
    by ``release`` as in :func:`choose_gamma`.

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
    """IC regret / IR / budget self-audit (spec §6) via ``mechanisms.audit_incentives``,
    on one :func:`payments_executor` for both of its passes (truthful payments of every
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


def load_wisconsin() -> tuple[FloatArray, FloatArray]:
    """Wisconsin breast cancer scaled with its published public bounds."""
    from market.datasets import load_wisconsin as _load

    return _load(intercept=True)
