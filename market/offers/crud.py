"""Offers (sellers): one active offer per seller per market, validated against the
market's schema and stored both as submitted and scaled with the public bounds.

Only the owner ever reads an offer's records. ``PUT`` replaces an offer (a new row,
the old one marked ``replaced``) unless a running order uses it; ``DELETE`` withdraws
it. Rows are never deleted, so finished orders keep the data they used.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import orjson
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, or_, select

from market import numerics
from market.errors import (
    ConflictError,
    InvalidInputError,
    InvalidTransitionError,
    NotFoundError,
)
from market.offers import records, vertical
from market.schemas import (
    MarketOfferSummary,
    OfferCreate,
    OfferPublic,
    OfferSummaries,
    OfferSummary,
    Page,
    RecordIn,
)
from market.store import Account, Market, Offer, OfferStatus, Order, RunStatus, utcnow

DUPLICATE = (
    "you already have an active offer in this market; PUT /v1/offers/{id} replaces it"
)


RECORDS_PER_SELLER = {"classification": 1}
"""Tasks whose mechanism takes exactly this many records per seller: the logistic
mechanism prices one record per seller, so ``ε_i`` is then the seller's whole loss."""


def validate_offer(
    market: Market,
    body: OfferCreate,
    *,
    check_cost: Callable[[float], None] | None = None,
    schema: records.FeatureSchema | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return an offer's records as submitted and as scaled (``records.scale_records``).

    ``check_cost`` and ``schema``: the market's ``numerics.cost_checker`` and
    ``records.feature_schema`` if the caller keeps them (else built for this call).

    Raises
    ------
    InvalidInputError
        A record or the reported cost does not fit the market (field and index named).
    """
    if market.custody == "seller" and vertical.is_vertical(market):
        keyed = vertical.validate_custody_offer(market, body)
        _check_cost(market, body.reported_cost, check_cost)
        return keyed, keyed
    if body.keys is not None:
        raise InvalidInputError(
            "keys", "only offers of seller-custody vertical markets list record keys"
        )
    if market.custody == "seller":
        _check_custody_offer(market, body)
        _check_cost(market, body.reported_cost, check_cost)
        return [], []
    if body.records is None:
        raise InvalidInputError(
            "records", "required: this market's sellers upload their records"
        )
    if body.n_records is not None:
        raise InvalidInputError(
            "n_records",
            "only seller-custody offers declare n_records; here it is the number of "
            "records uploaded",
        )
    if vertical.is_vertical(market):
        raw_v, scaled_v = vertical.validate_offer(market, body)
        _check_cost(market, body.reported_cost, check_cost)
        return raw_v, scaled_v
    if body.party is not None:
        raise InvalidInputError("party", "only vertical markets have parties")
    for i, rec in enumerate(body.records):
        if not isinstance(rec, RecordIn):
            raise InvalidInputError(
                f"records[{i}].key", "only vertical markets take record keys"
            )
    raw = [r.model_dump() for r in body.records]
    per_seller = RECORDS_PER_SELLER.get(market.task)
    if per_seller is not None and len(raw) != per_seller:
        raise InvalidInputError(
            "records",
            f"a {market.task} market takes exactly {per_seller} record per seller",
        )
    X, y = records.scale_records(
        raw,
        features=market.features,
        task=market.task,
        target=market.target,
        out_of_bounds=market.out_of_bounds,
        schema=schema,
    )
    _check_cost(market, body.reported_cost, check_cost)
    return raw, records.to_json(X, y)


CUSTODY_NO_RECORDS = (
    "this market's records stay with their sellers: an offer carries reported_cost, "
    "max_epsilon and n_records only, and the seller answers report requests from its "
    "own machine"
)


def _check_custody_offer(market: Market, body: OfferCreate) -> None:
    """A seller-custody offer: no records, a public ``n_records``.

    Raises
    ------
    InvalidInputError
        Field ``records`` (records given), ``n_records`` (missing, or not what the
        task takes per seller) or ``party``.
    """
    if body.records is not None:
        raise InvalidInputError("records", CUSTODY_NO_RECORDS)
    if body.n_records is None:
        raise InvalidInputError(
            "n_records", "required: how many records you hold (public)"
        )
    if body.party is not None and not vertical.is_vertical(market):
        raise InvalidInputError("party", "only vertical markets have parties")
    per_seller = RECORDS_PER_SELLER.get(market.task)
    if per_seller is not None and body.n_records != per_seller:
        raise InvalidInputError(
            "n_records",
            f"a {market.task} market takes exactly {per_seller} record per seller",
        )


def offer_size(market: Market, body: OfferCreate, raw: list[dict[str, Any]]) -> int:
    """The offer's ``n_records``: declared (seller custody) or counted (uploaded)."""
    if market.custody == "seller" and vertical.is_vertical(market):
        return len(raw)
    if market.custody == "seller" and body.n_records is not None:
        return body.n_records
    return len(raw)


def _check_cost(
    market: Market, cost: float, check_cost: Callable[[float], None] | None
) -> None:
    if check_cost is None:
        numerics.check_reported_cost(market.cost_prior, cost)
    else:
        check_cost(cost)


def _new_offer(
    market: Market,
    seller: Account,
    body: OfferCreate,
    *,
    replaces_id: int | None = None,
) -> Offer:
    raw, scaled = validate_offer(market, body)
    return Offer(
        market_id=market.id,  # type: ignore[arg-type]
        seller_id=seller.id,  # type: ignore[arg-type]
        records=raw,
        records_scaled=scaled,
        n_records=offer_size(market, body, raw),
        reported_cost=body.reported_cost,
        max_epsilon=body.max_epsilon,
        replaces_id=replaces_id,
        party=body.party,
    )


def active_offer(session: Session, *, market_id: int, seller_id: int) -> Offer | None:
    """Return the seller's active offer in a market, if any."""
    stmt = select(Offer).where(
        Offer.market_id == market_id,
        Offer.seller_id == seller_id,
        Offer.status == OfferStatus.ACTIVE,
    )
    return session.exec(stmt).first()


def create_offer(
    session: Session, *, market: Market, seller: Account, body: OfferCreate
) -> Offer:
    """Validate, scale and store a seller's offer.

    Raises
    ------
    InvalidInputError
        A record or the reported cost does not fit the market (field and index named).
    ConflictError
        The seller already has an active offer in this market.
    """
    offer = _new_offer(market, seller, body)
    if (
        active_offer(session, market_id=offer.market_id, seller_id=offer.seller_id)
        is not None
    ):
        raise ConflictError(DUPLICATE)
    _require_party_free(session, offer)
    session.add(offer)
    try:
        session.commit()
    except IntegrityError as exc:  # a concurrent POST won the unique index
        session.rollback()
        raise ConflictError(DUPLICATE) from exc
    return offer  # id and defaults are set at flush: no refresh (another transaction)


def _require_party_free(
    session: Session, offer: Offer, *, replacing: int | None = None
) -> None:
    """One active offer per party of a vertical market (each party is one seller)."""
    if offer.party is None:
        return
    stmt = select(Offer).where(
        Offer.market_id == offer.market_id,
        Offer.party == offer.party,
        Offer.status == OfferStatus.ACTIVE,
    )
    other = session.exec(stmt).first()
    if other is not None and other.id != replacing:
        raise ConflictError(
            f"party {offer.party!r} already has an active offer in this market"
        )


def get_own_offer_or_raise(
    session: Session, *, offer_id: int, seller: Account
) -> Offer:
    """Return the offer if ``seller`` owns it; ``NotFoundError`` otherwise (no leak)."""
    offer = session.get(Offer, offer_id)
    if offer is None or offer.seller_id != seller.id:
        raise NotFoundError(f"offer {offer_id} not found")
    return offer


def offers_in_use(session: Session, *, market_id: int) -> set[int] | None:
    """Return ids of offers used by running (or collecting) orders; ``None`` means
    "possibly all".

    A running order that has not yet recorded its ``offer_ids`` snapshot may use any
    active offer of the market.
    """
    stmt = select(Order.offer_ids).where(
        Order.market_id == market_id,
        or_(
            Order.status == RunStatus.RUNNING,
            # a seller-custody order collecting reports (queued between its polls)
            col(Order.progress_stage) == "collecting",
        ),
    )
    used: set[int] = set()
    for snapshot in session.exec(stmt).all():
        if snapshot is None:
            return None
        used.update(int(i) for i in snapshot)
    return used


def _require_replaceable(session: Session, offer: Offer) -> None:
    if offer.status != OfferStatus.ACTIVE:
        raise InvalidTransitionError(f"offer {offer.id} is {offer.status}, not active")
    used = offers_in_use(session, market_id=offer.market_id)
    if used is None or offer.id in used:
        raise ConflictError(
            f"offer {offer.id} is used by a running order; retry when it finishes"
        )


def replace_offer(
    session: Session, *, offer_id: int, seller: Account, body: OfferCreate
) -> Offer:
    """Replace an active offer by a new one (returned, with ``replaces_id`` set).

    Raises
    ------
    NotFoundError, InvalidInputError
    InvalidTransitionError
        The offer is withdrawn or already replaced.
    ConflictError
        A running order uses the offer.
    """
    old = get_own_offer_or_raise(session, offer_id=offer_id, seller=seller)
    market = session.get(Market, old.market_id)
    assert market is not None
    new = _new_offer(market, seller, body, replaces_id=old.id)
    _require_replaceable(session, old)
    _require_party_free(session, new, replacing=old.id)
    old.status = OfferStatus.REPLACED
    old.updated_at = utcnow()
    session.add(old)
    session.flush()  # free the unique "active" slot before inserting the new offer
    session.add(new)
    try:
        session.commit()
    except IntegrityError as exc:
        session.rollback()
        raise ConflictError("the offer was changed concurrently; retry") from exc
    session.refresh(new)
    return new


def withdraw_offer(session: Session, *, offer_id: int, seller: Account) -> Offer:
    """Withdraw an active offer; future orders no longer use it.

    Raises
    ------
    NotFoundError
    InvalidTransitionError
        The offer is not active.
    """
    offer = get_own_offer_or_raise(session, offer_id=offer_id, seller=seller)
    if offer.status != OfferStatus.ACTIVE:
        raise InvalidTransitionError(f"offer {offer.id} is {offer.status}, not active")
    offer.status = OfferStatus.WITHDRAWN
    offer.updated_at = utcnow()
    session.add(offer)
    session.commit()
    session.refresh(offer)
    return offer


class ActiveOffer(NamedTuple):
    """An active offer as an order reads it: its scaled records (empty when not
    asked for), never the raw ones."""

    id: int
    seller_id: int
    n_records: int
    reported_cost: float
    max_epsilon: float | None
    party: str | None
    records_scaled: list[dict[str, Any]]


def list_active_offers(
    session: Session, *, market_id: int, with_records: bool = True
) -> list[ActiveOffer]:
    """Return the market's active offers in id order (the pipeline's input), with
    their scaled records when ``with_records``.

    One Core query of the columns an order reads, the scaled records read as JSON
    text and parsed with orjson (ORM entities also parsed the raw records and built a
    model object per offer: most of an order's loading at 10⁵ sellers).
    """
    columns: list[Any] = [
        Offer.id, Offer.seller_id, Offer.n_records, Offer.reported_cost,
        Offer.max_epsilon, Offer.party,
    ]  # fmt: skip
    if with_records:
        columns.append(sa.cast(Offer.records_scaled, sa.Text))
    stmt = (
        sa.select(*columns)
        .where(Offer.market_id == market_id, Offer.status == OfferStatus.ACTIVE)  # type: ignore[arg-type]
        .order_by(col(Offer.id))
    )
    rows = session.connection().execute(stmt).all()
    if not with_records:
        return [ActiveOffer(*row, []) for row in rows]
    loads = orjson.loads
    return [ActiveOffer(*row[:6], loads(row[6])) for row in rows]


def list_own_offers(session: Session, *, seller_id: int) -> OfferSummaries:
    """Return every offer of a seller (any status), newest first, without records."""
    stmt = (
        select(Offer).where(Offer.seller_id == seller_id).order_by(col(Offer.id).desc())
    )
    return OfferSummaries(
        items=[
            OfferSummary.model_validate(o, from_attributes=True)
            for o in session.exec(stmt).all()
        ]
    )


def list_market_offers(
    session: Session,
    *,
    market_id: int,
    status: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> Page[MarketOfferSummary]:
    """Return a market's offers with their sellers (admins), newest first, without
    records; ``status`` keeps only offers in that status."""
    where = [Offer.market_id == market_id]
    if status is not None:
        where.append(Offer.status == status)
    total = session.exec(select(sa.func.count()).select_from(Offer).where(*where)).one()
    rows = session.exec(
        select(Offer, Account.name)
        .join(Account, col(Account.id) == col(Offer.seller_id))
        .where(*where)
        .order_by(col(Offer.id).desc())
        .limit(limit)
        .offset(offset)
    ).all()
    items = [
        MarketOfferSummary(
            id=o.id,  # type: ignore[arg-type]
            market_id=o.market_id,
            status=o.status,
            reported_cost=o.reported_cost,
            max_epsilon=o.max_epsilon,
            n_records=o.n_records,
            created_at=o.created_at,
            seller_id=o.seller_id,
            seller_name=name,
        )
        for o, name in rows
    ]
    return Page(items=items, total=int(total), limit=limit, offset=offset)


def to_public(offer: Offer) -> OfferPublic:
    """Return the owner's view of an offer (with the records as submitted)."""
    return OfferPublic(
        id=offer.id,  # type: ignore[arg-type]
        market_id=offer.market_id,
        seller_id=offer.seller_id,
        status=offer.status,
        reported_cost=offer.reported_cost,
        max_epsilon=offer.max_epsilon,
        n_records=offer.n_records,
        records=offer.records,
        replaces_id=offer.replaces_id,
        party=offer.party,
        created_at=offer.created_at,
    )
