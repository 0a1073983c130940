"""Pricing checks: cost priors, reported costs, release overheads and the mechanism's
settings (``MechanismConfig``), each turned into an :class:`InvalidInputError` naming the
field."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import mechanisms as mech
from learners import LEARNERS
from market.errors import InvalidInputError
from market.numerics.learners import has_missable, learner_spec
from mechanisms.priors import check_usable as check_prior_usable

_NUMERIC_ERRORS = (ValueError, TypeError, ArithmeticError, KeyError)

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

SETTING_RANGES: dict[str, tuple[float, float]] = dict(mech.config.SETTING_RANGES)
"""``[low, high]`` of each numeric mechanism setting (``MechanismConfig``'s, the one
place the ranges are decided; ``market.schemas`` publishes them)."""


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


def gamma_choice_refusal(*, partition: str, has_validation: bool) -> str | None:
    """Why ``γ`` cannot be chosen for the budget on a market, or None: the choice
    scores candidates on the market's public validation set, which vertical markets
    never have and a horizontal market may lack (checked at placement and again when
    the order runs)."""
    if partition == "vertical":
        return (
            "vertical markets have no public validation set to choose gamma on; "
            "give gamma in the order"
        )
    if not has_validation:
        return (
            "choosing gamma for the budget needs the market's public validation set; "
            "give gamma in the order or ask an admin to add one"
        )
    return None


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
    missable = has_missable(features)
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
