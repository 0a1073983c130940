"""Markets (admin): create, list, read, patch; each mechanism change is a new
append-only ``market_parameters`` version, and orders record the version they use.

Defaults (documented in ``market.schemas.MechanismSettings``): ``gamma=1``,
``eps_avg_max=5``, ``k=4``, ``u="linear"``, ``lam=0.01``, ``mu=0.1``, ``sigma=1``,
``lifetime_epsilon_cap=10``, ``out_of_bounds="reject"``.
"""

import math
from typing import Any

from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from market import numerics, store
from market.errors import ConflictError, InvalidInputError, NotFoundError
from market.offers import records, vertical
from market.schemas import (
    MarketCreate,
    MarketPublic,
    MarketUpdate,
    MechanismSettings,
    Page,
)
from market.store import Account, Market, MarketParameters

CAP_MARGIN = 1e-3
"""ε a cap must leave above the release overhead to count as usable (far above the
pipeline's ``EPS_MAX_FLOOR``); the smallest usable cap is rounded up to cents of ε."""


def _check_span(low: float, high: float, field: str) -> None:
    if not low < high:
        raise InvalidInputError(f"{field}.high", "must be greater than low")
    if not math.isfinite(high - low):
        raise InvalidInputError(f"{field}.high", "high − low must be finite")


def _check_features(body: MarketCreate) -> None:
    seen: set[str] = set()
    for i, f in enumerate(body.features):
        _check_span(f.low, f.high, f"features[{i}]")
        if f.name in seen:
            raise InvalidInputError(f"features[{i}].name", f"duplicate name {f.name!r}")
        seen.add(f.name)
    needs_target = body.task in ("regression", "quantile")
    if needs_target and body.target is None:
        raise InvalidInputError(
            "target", f"public target bounds are required for {body.task}"
        )
    if not needs_target and body.target is not None:
        raise InvalidInputError(
            "target", "only regression and quantile markets have targets"
        )
    if body.target is not None:
        _check_span(body.target.low, body.target.high, "target")


def smallest_usable_cap(
    values: dict[str, Any], *, task: str, features: list[dict[str, Any]]
) -> tuple[float, float, str | None]:
    """``(cap, overhead, learner)``: the smallest lifetime cap with which a seller who
    has spent nothing is never left out of an order for the release overhead alone,
    the overhead itself (``numerics.release_overhead_floor``) and the learner charging
    it (``None`` and cap 0 when no learner serving the market charges one)."""
    overhead, learner = numerics.release_overhead_floor(
        values, task=task, features=features
    )
    if learner is None:
        return 0.0, 0.0, None
    return math.ceil((overhead + CAP_MARGIN) * 100) / 100, overhead, learner


def _check_cap(
    cap: float, values: dict[str, Any], *, task: str, features: list[dict[str, Any]]
) -> None:
    """Refuse a lifetime cap at or below the mechanism's release overhead.

    Raises
    ------
    InvalidInputError
        Field ``lifetime_epsilon_cap``, stating the smallest usable cap.
    """
    smallest, overhead, learner = smallest_usable_cap(
        values, task=task, features=features
    )
    if cap >= smallest:
        return
    raise InvalidInputError(
        "lifetime_epsilon_cap",
        f"{cap:g} is below the smallest usable cap {smallest:.2f}: with k = "
        f"{values['k']:g} and lam = {values['lam']:g}, an order of {learner} spends up "
        f"to {overhead:.4f} of each seller's ε on its release alone (2·ln(1 + "
        f"min(k/m, 1)/(4·lam)) at m = {numerics.SMALLEST_ORDER} sellers), so sellers "
        "under this cap could be left out of an order although they spent nothing; "
        "raise lifetime_epsilon_cap or mechanism.lam",
    )


def _merged_settings(stored: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """The stored settings with ``changes`` applied, validated as a whole (settings
    stored before a rule was tightened must meet it once they are changed)."""
    try:
        return MechanismSettings.model_validate({**stored, **changes}).model_dump()
    except ValidationError as exc:
        err = exc.errors()[0]
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        raise InvalidInputError(f"mechanism{path}", err["msg"]) from exc


def _check_mechanism(values: dict[str, Any], *, task: str) -> None:
    numerics.check_settings(values, task=task)


STRICT_RULE = (
    'a seller-custody market must run the mechanism in mode "strict": the '
    "allocation sees only reported costs and public data, never records it does not hold"
)


def is_seller_custody(market: Market) -> bool:
    """Whether the market's records stay with their sellers (``custody: "seller"``)."""
    return market.custody == "seller"


def _check_custody(
    custody: str, values: dict[str, Any], *, explicit_mode: bool
) -> None:
    """A seller-custody market runs in strict mode (the allocation never needs records).

    Raises
    ------
    InvalidInputError
        Field ``mechanism.mode`` when the mode was given, else ``custody``.
    """
    if custody == "seller" and values.get("mode") != "strict":
        raise InvalidInputError(
            "mechanism.mode" if explicit_mode else "custody", STRICT_RULE
        )


def create_market(session: Session, *, body: MarketCreate, admin: Account) -> Market:
    """Create a market and its parameters version 1.

    Raises
    ------
    InvalidInputError
        Bad bounds, prior, mechanism settings or validation records (field named).
    """
    _check_features(body)
    vertical.check_market(body)
    cost_prior = body.cost_prior.model_dump(exclude_none=True)
    numerics.check_prior(cost_prior)
    values = body.mechanism.model_dump()
    if body.partition == "vertical":
        if "k" in body.mechanism.model_fields_set and values["k"] != 1.0:
            raise InvalidInputError("mechanism.k", vertical.K_RULE)
        values["k"] = 1.0
    _check_mechanism(values, task=body.task)
    _check_custody(
        body.custody, values, explicit_mode="mode" in body.mechanism.model_fields_set
    )
    features = [f.model_dump() for f in body.features]
    _check_cap(body.lifetime_epsilon_cap, values, task=body.task, features=features)
    target = body.target.model_dump() if body.target else None
    validation = None
    if body.validation is not None:
        raw = [r.model_dump() for r in body.validation]
        records.scale_records(
            raw,
            features=features,
            task=body.task,
            target=target,
            out_of_bounds=body.out_of_bounds,
            field="validation",
        )
        validation = raw
    market = Market(
        name=body.name,
        task=body.task,
        features=features,
        target=target,
        out_of_bounds=body.out_of_bounds,
        cost_prior=cost_prior,
        lifetime_epsilon_cap=body.lifetime_epsilon_cap,
        validation=validation,
        partition=body.partition,
        record_key=body.record_key,
        parties=[p.model_dump() for p in body.parties] if body.parties else None,
        custody=body.custody,
        created_by=admin.id,  # type: ignore[arg-type]
    )
    session.add(market)
    session.flush()
    session.add(_parameters(market, version=1, values=values, admin=admin))
    session.commit()
    session.refresh(market)
    return market


def _parameters(
    market: Market, *, version: int, values: dict[str, Any], admin: Account
) -> MarketParameters:
    return MarketParameters(
        market_id=market.id,  # type: ignore[arg-type]
        version=version,
        values=values,
        created_by=admin.id,  # type: ignore[arg-type]
    )


def get_market_or_raise(session: Session, market_id: int) -> Market:
    """Return the market. Raises ``NotFoundError``."""
    market = session.get(Market, market_id)
    if market is None:
        raise NotFoundError(f"market {market_id} not found")
    return market


def current_parameters(session: Session, market_id: int) -> MarketParameters:
    """Return the newest parameters version of a market."""
    stmt = (
        select(MarketParameters)
        .where(MarketParameters.market_id == market_id)
        .order_by(col(MarketParameters.version).desc())
        .limit(1)
    )
    params = session.exec(stmt).first()
    if params is None:
        raise NotFoundError(f"market {market_id} has no parameters")
    return params


def update_market(
    session: Session, *, market_id: int, body: MarketUpdate, admin: Account
) -> Market:
    """Apply a patch; a mechanism change appends a new parameters version.

    Raises
    ------
    NotFoundError, InvalidInputError
    ConflictError
        Another update created the same version concurrently (retry).
    """
    market = get_market_or_raise(session, market_id)
    current = current_parameters(session, market_id)
    values = current.values
    if body.mechanism is not None:
        changes = body.mechanism.model_dump(exclude_none=True)
        values = _merged_settings(current.values, changes)
        if vertical.is_vertical(market) and values["k"] != 1.0:
            raise InvalidInputError("mechanism.k", vertical.K_RULE)
        _check_mechanism(values, task=market.task)
        _check_custody(market.custody, values, explicit_mode=True)
    if body.mechanism is not None or body.lifetime_epsilon_cap is not None:
        cap = body.lifetime_epsilon_cap or market.lifetime_epsilon_cap
        _check_cap(cap, values, task=market.task, features=market.features)
    if body.name is not None:
        market.name = body.name
    if body.lifetime_epsilon_cap is not None:
        market.lifetime_epsilon_cap = body.lifetime_epsilon_cap
    if body.mechanism is not None:
        session.add(
            _parameters(market, version=current.version + 1, values=values, admin=admin)
        )
    session.add(market)
    try:
        session.commit()
    except IntegrityError as exc:
        session.rollback()
        raise ConflictError("the market was changed concurrently; retry") from exc
    session.refresh(market)
    return market


def list_markets(session: Session, *, limit: int, offset: int) -> Page[MarketPublic]:
    """Return a page of markets, oldest first."""
    return store.paginate(
        session,
        select(Market).order_by(col(Market.id)),
        limit=limit,
        offset=offset,
        convert=lambda market: to_public(session, market),
    )


def to_public(session: Session, market: Market) -> MarketPublic:
    """Return the public view of a market (no validation records, only their count)."""
    params = current_parameters(session, market.id)  # type: ignore[arg-type]
    return MarketPublic(
        id=market.id,  # type: ignore[arg-type]
        name=market.name,
        task=market.task,
        features=market.features,
        target=market.target,
        out_of_bounds=market.out_of_bounds,
        cost_prior=market.cost_prior,
        mechanism=params.values,
        parameters_version=params.version,
        lifetime_epsilon_cap=market.lifetime_epsilon_cap,
        validation_size=len(market.validation or []),
        partition=market.partition,
        record_key=market.record_key,
        parties=market.parties,
        custody=market.custody,
        created_at=market.created_at,
    )
