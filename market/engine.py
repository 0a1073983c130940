"""The one adapter between the market and the numerics (``mechanisms``, ``learners``).

Every call into the numerics goes through here, so a signature change upstream is fixed
in one place. Numerics raise ``ValueError`` for bad input; the helpers that validate
client input turn that into :class:`market.errors.InvalidInputError` naming the field.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

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

_FALLBACK_MODULES = {
    "prior_from_dict": "mechanisms.priors",
    "MechanismConfig": "mechanisms.config",
    "allocate": "mechanisms.allocation",
}


def _mech(name: str) -> Any:
    """Return ``mechanisms.<name>`` from the facade, else from its defining module.

    Returns ``None`` when neither provides it (a numerics piece not written yet).
    """
    import importlib

    import mechanisms

    found = getattr(mechanisms, name, None)
    if found is None and name in _FALLBACK_MODULES:
        found = getattr(importlib.import_module(_FALLBACK_MODULES[name]), name, None)
    return found


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
        return _mech("prior_from_dict")(dict(spec))
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
        return _mech("MechanismConfig")(**kwargs)
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
    return _mech("allocate")(X, y, costs, build_prior(prior_spec), config, eps_max)


def validation_error(
    w: FloatArray, X_val: FloatArray, y_val: FloatArray, *, task: str
) -> float:
    """Return the error of the linear model ``w`` on the public validation set.

    Misclassification rate of ``sign(Xw)`` for classification, mean squared error for
    regression, mean pinball loss at ``τ = 0.5`` (half the absolute error) for quantile.
    """
    pred = X_val @ w
    if task == "classification":
        return float(np.mean(np.where(pred >= 0, 1.0, -1.0) != y_val))
    if task == "regression":
        return float(np.mean((pred - y_val) ** 2))
    return float(np.mean(0.5 * np.abs(pred - y_val)))


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
    """Return ``[{"gamma", "validation_error", "total_payment"}]`` over a ``γ`` grid.

    Uses ``mechanisms.tradeoff_curve`` when the numerics provide it; otherwise one
    allocation per ``γ`` (error of the allocation's noise-free model on the public
    validation set) and ``mechanisms.myerson_payments`` for the total payment.
    """
    prior = build_prior(prior_spec)
    curve = _mech("tradeoff_curve")
    if curve is not None:
        cfg = mechanism_config(values, task=task)
        points = curve(
            X,
            y,
            costs,
            prior,
            cfg,
            gammas=list(gammas),
            X_val=X_val,
            y_val=y_val,
            eps_max=eps_max,
        )
        return [dict(p) for p in points]
    pay = _mech("myerson_payments")
    if pay is None:
        raise NotImplementedError("mechanisms.myerson_payments is not available yet")
    out: list[dict[str, float | None]] = []
    for g in gammas:
        cfg = mechanism_config(values, task=task, gamma=float(g))
        alloc = _mech("allocate")(X, y, costs, prior, cfg, eps_max)
        if not alloc.success:
            out.append(
                {"gamma": float(g), "validation_error": None, "total_payment": None}
            )
            continue
        payments = pay(X, y, costs, prior, cfg, eps_max=eps_max, allocation=alloc)
        total = float(np.sum(getattr(payments, "payments", payments)))
        err = validation_error(np.asarray(alloc.w), X_val, y_val, task=task)
        out.append({"gamma": float(g), "validation_error": err, "total_payment": total})
    return out
