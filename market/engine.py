"""The one adapter between the market and the numerics (``mechanisms``, ``learners``).

Every call into the numerics goes through here, so a signature change upstream is fixed
in one place. Numerics raise ``ValueError`` for bad input; the helpers that validate
client input turn that into :class:`market.errors.InvalidInputError` naming the field.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

import mechanisms as mech
from market.errors import InvalidInputError

FloatArray = NDArray[np.float64]
_NUMERIC_ERRORS = (ValueError, TypeError, ArithmeticError, KeyError)

LEARNER_TASKS: dict[str, tuple[str, ...]] = {"hetero_dp_logistic": ("classification",)}
"""Which market tasks each learner can train."""

LOSS_BY_TASK = {
    "classification": "logistic",
    "regression": "squared",
    "quantile": "pinball",
}
"""Per-record loss ``ℓ_i`` of the allocation objective for each task (spec §7)."""

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
)
"""Stored mechanism settings passed through to ``MechanismConfig``."""


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
    values: Mapping[str, Any], *, task: str, gamma: float | None = None
) -> Any:
    """Return the ``MechanismConfig`` for stored settings, the task's loss and ``γ``.

    Raises
    ------
    InvalidInputError
        The settings are rejected by ``MechanismConfig`` (field ``mechanism.<name>``).
    """
    kwargs = {k: values[k] for k in CONFIG_KEYS if k in values}
    if gamma is not None:
        kwargs["gamma"] = gamma
    kwargs["loss"] = LOSS_BY_TASK[task]
    try:
        return mech.MechanismConfig(**kwargs)
    except _NUMERIC_ERRORS as exc:
        name = str(exc).split(" ", 1)[0]
        field = f"mechanism.{name}" if name in CONFIG_KEYS else "mechanism"
        raise InvalidInputError(field, str(exc)) from exc


def allocate(
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray,
    *,
    prior_spec: Mapping[str, Any],
    config: Any,
    eps_max: FloatArray | None = None,
) -> Any:
    """Solve the allocation (spec §4.1) with ``mechanisms.allocate``; returns ``Allocation``."""
    return mech.allocate(X, y, costs, build_prior(prior_spec), config, eps_max)


def tradeoff(
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray,
    *,
    prior_spec: Mapping[str, Any],
    values: Mapping[str, Any],
    task: str,
    gammas: Sequence[float],
    X_val: FloatArray,
    y_val: FloatArray,
    eps_max: FloatArray | None = None,
) -> list[dict[str, float | None]]:
    """Return ``[{"gamma", "validation_error", "total_payment", ...}]`` over a ``γ``
    grid (``mechanisms.tradeoff_curve``, Myerson totals).

    The admin's ``(λ, μ, σ)`` grids when the market declares them, else its own
    settings only: each grid point costs one allocation plus Myerson payments.
    """
    prior = build_prior(prior_spec)
    cfg = mechanism_config(values, task=task)
    grids = values.get("grids", {})
    grid = {
        key: [float(v) for v in grids[key]]
        if grids.get(key)
        else [float(getattr(cfg, key))]
        for key in ("lam", "mu", "sigma")
    }
    points = mech.tradeoff_curve(
        X,
        y,
        costs,
        prior,
        cfg,
        gammas=list(gammas),
        X_val=X_val,
        y_val=y_val,
        grid=grid,
        select_on_total=True,
        eps_max=eps_max,
    )
    return [dict(p) for p in points]


# ---- running an order (the order pipeline) ----


def delta_upper(*, k: float, m: int, lam: float) -> float:
    """Largest release term ``Δ_i = 2 ln(1 + a_i/(4λ))`` with ``a_i ≤ min(k/m, 1)``.

    The learner's per-seller guarantee is ``ε_i^total = a_i·η + Δ_i`` (spec §3), so a
    seller with remaining budget ``r_i`` may get ``ε_i^max = r_i − Δ_upper``.
    """
    return 2.0 * float(np.log1p(min(k / m, 1.0) / (4.0 * lam)))


def design(X: FloatArray, *, fit_intercept: bool) -> FloatArray:
    """Rows ``x`` or ``[x, 1]/√2`` (keeps ``‖x̃‖ ≤ 1``; allocation and release share it)."""
    if not fit_intercept:
        return X
    return np.hstack([X, np.ones((X.shape[0], 1))]) / np.sqrt(2.0)


SERIAL_PAYMENTS_MAX = 64
"""Up to this many sellers, payments run in the calling thread's process (one
thread); above it in a ``forkserver`` process pool (never ``fork``: the service
process has threads)."""


def payments_executor(m: int) -> Any:
    """Return an executor (a context manager) for per-seller payment re-solves."""
    import concurrent.futures as cf
    import multiprocessing
    import os

    if m <= SERIAL_PAYMENTS_MAX:
        return cf.ThreadPoolExecutor(max_workers=1)
    workers = max(1, len(os.sched_getaffinity(0)))
    ctx = multiprocessing.get_context("forkserver")
    return cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx)


def _on_payments_pool(
    fn: Any,
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray,
    *,
    prior_spec: Mapping[str, Any],
    config: Any,
    **kwargs: Any,
) -> Any:
    """``fn(X, y, costs, prior, config, executor=pool, **kwargs)`` for a numerics call
    that pays sellers, on :func:`payments_executor` (shut down on return)."""
    prior = build_prior(prior_spec)
    with payments_executor(len(costs)) as pool:
        return fn(X, y, costs, prior, config, executor=pool, **kwargs)


def myerson_payments(
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray,
    *,
    prior_spec: Mapping[str, Any],
    config: Any,
    eps_max: FloatArray,
    allocation: Any = None,
    progress: Any = None,
) -> Any:
    """Myerson payments (spec §5) via ``mechanisms.myerson_payments`` (``.payments``,
    ``.epsilon``); an order never falls back to the paper's non-IC ``Ψ·ε`` rule."""
    return _on_payments_pool(
        mech.myerson_payments,
        X,
        y,
        costs,
        prior_spec=prior_spec,
        config=config,
        eps_max=eps_max,
        base=allocation,
        progress=progress,
    )


def choose_gamma(
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray,
    *,
    prior_spec: Mapping[str, Any],
    config: Any,
    budget: float,
    X_val: FloatArray,
    y_val: FloatArray,
    eps_max: FloatArray,
    progress: Any = None,
) -> Any:
    """Most accurate affordable ``γ`` (spec §4.3) via ``mechanisms.choose_gamma``."""
    return _on_payments_pool(
        mech.choose_gamma,
        X,
        y,
        costs,
        prior_spec=prior_spec,
        config=config,
        budget=budget,
        X_val=X_val,
        y_val=y_val,
        eps_max=eps_max,
        progress=progress,
    )


def release(X: FloatArray, y: FloatArray, alloc: Any) -> Any:
    """Release the model at ``alloc`` with fresh OS-entropy noise (no ``random_state``)."""
    from mechanisms.tuning._validation_error import release_model

    return release_model(X, y, alloc, random_state=None)


def audit_incentives(
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray,
    *,
    prior_spec: Mapping[str, Any],
    config: Any,
    budget: float | None = None,
    sellers: Any = None,
    eps_max: FloatArray | None = None,
) -> Any:
    """IC regret / IR / budget self-audit (spec §6) via ``mechanisms.audit_incentives``."""
    prior = build_prior(prior_spec)
    return mech.audit_incentives(
        X,
        y,
        costs,
        prior,
        config,
        budget=budget,
        sellers=sellers,
        eps_max=eps_max,
    )
