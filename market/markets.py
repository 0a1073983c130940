"""Markets (admin): create, list, read, patch; each mechanism change is a new
append-only ``market_parameters`` version, and orders record the version they use.

Defaults (documented in ``market.schemas.MechanismSettings``): ``gamma=1``,
``eps_avg_max=5``, ``k=4``, ``u="linear"``, ``lam=0.01``, ``mu=0.1``, ``sigma=1``,
``lifetime_epsilon_cap=10``, ``out_of_bounds="reject"``.
"""

from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from market import db, records, vertical
from market.errors import ConflictError, InvalidInputError, NotFoundError
from market.models import Account, Market, MarketParameters
from market.pipeline import numerics
from market.schemas import (
    MarketCreate,
    MarketPublic,
    MarketUpdate,
    MechanismSettings,
    Page,
)

GRID_KEYS = ("gamma", "lam", "mu", "sigma")


def _check_features(body: MarketCreate) -> None:
    seen: set[str] = set()
    for i, f in enumerate(body.features):
        if not f.low < f.high:
            raise InvalidInputError(f"features[{i}].high", "must be greater than low")
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
    if body.target is not None and not body.target.low < body.target.high:
        raise InvalidInputError("target.high", "must be greater than low")


def _check_mechanism(values: dict[str, Any], *, task: str) -> None:
    for key in values.get("grids", {}):
        if key not in GRID_KEYS:
            raise InvalidInputError(
                f"mechanism.grids.{key}", f"must be one of {GRID_KEYS}"
            )
    numerics.check_settings(values, task=task)


def create_market(session: Session, *, body: MarketCreate, admin: Account) -> Market:
    """Create a market and its parameters version 1.

    Raises
    ------
    InvalidInputError
        Bad bounds, prior, mechanism settings or validation records (field named).
    """
    _check_features(body)
    vertical.check_market(body)
    numerics.build_prior(body.cost_prior.model_dump())
    values = body.mechanism.model_dump()
    if body.partition == "vertical":
        if "k" in body.mechanism.model_fields_set and values["k"] != 1.0:
            raise InvalidInputError("mechanism.k", vertical.K_RULE)
        values["k"] = 1.0
    _check_mechanism(values, task=body.task)
    features = [f.model_dump() for f in body.features]
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
        cost_prior=body.cost_prior.model_dump(),
        lifetime_epsilon_cap=body.lifetime_epsilon_cap,
        validation=validation,
        partition=body.partition,
        record_key=body.record_key,
        parties=[p.model_dump() for p in body.parties] if body.parties else None,
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
    if body.name is not None:
        market.name = body.name
    if body.lifetime_epsilon_cap is not None:
        market.lifetime_epsilon_cap = body.lifetime_epsilon_cap
    if body.mechanism is not None:
        current = current_parameters(session, market_id)
        changes = body.mechanism.model_dump(exclude_none=True)
        values = MechanismSettings.model_validate(
            {**current.values, **changes}
        ).model_dump()
        if vertical.is_vertical(market) and values["k"] != 1.0:
            raise InvalidInputError("mechanism.k", vertical.K_RULE)
        _check_mechanism(values, task=market.task)
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
    return db.paginate(
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
        created_at=market.created_at,
    )
