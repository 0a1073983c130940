"""Single-offer intake through the group-commit writer (``POST /v1/markets/{id}/offers``).

The session path (:func:`market.offers.create_offer` behind the API's dependencies)
spends four transactions per offer: the key lookup, the rate-limit count, and the
offer's own write, which first waits for SQLite's write lock (``BEGIN IMMEDIATE``,
retried with ``busy_timeout``'s back-off sleeps under contention) and then flushes one
``fsync`` per offer. This module does the same steps, with the same outcomes in the
same order, as two jobs of a :class:`market.group_commit.GroupCommitWriter`:

1. :func:`admission_job` (answered at once, committed with the batch): the key's
   account (:func:`market.accounts.check_key`, one indexed ``SELECT``) and one
   rate-limit count under the account, or under the client address when the key is
   missing or wrong (:meth:`market.rate_limits.RateLimiter.count_in`).
2. The market, from :class:`MarketCache`, and the records' validation and scaling
   (:func:`market.offers.validate_offer`) in the caller's thread.
3. :func:`insert_job` (answered only after its commit): the vertical-market party
   check and one ``INSERT``. The one-active-offer-per-seller rule is the unique partial
   index ``uq_offer_active_seller_market``: a second active offer fails the insert in
   its own savepoint and is answered with ``ConflictError`` (the message of the
   session path), whether the first offer is older or in the same batch.
"""

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from market import accounts, offers
from market.db import session_scope
from market.errors import ConflictError
from market.group_commit import Job
from market.models import Market, Offer, OfferStatus, utcnow
from market.pipeline import numerics
from market.rate_limits import Decision, RateLimiter, RouteGroup
from market.schemas import OfferCreate, OfferPublic

JSON_COLUMNS = ("records", "records_scaled")


@dataclass(frozen=True, slots=True)
class Admission:
    """Who sent a request and whether its rate limit admits it.

    ``account_id``/``role`` are ``None`` for a missing or wrong key; ``legacy`` means
    the key's stored hash is a legacy Argon2 one (not verified here); ``decision`` is
    ``None`` when the route group is not limited.
    """

    account_id: int | None = None
    role: str | None = None
    decision: Decision | None = None
    legacy: bool = False


def admission_job(
    limiter: RateLimiter,
    *,
    key: str | None,
    secret: bytes,
    identity: Callable[[int | None], str],
    group: RouteGroup,
    now: float,
    verified: tuple[int, str] | None = None,
) -> Job:
    """Return the writer job that authenticates ``key`` and counts the request.

    ``identity(account_id)`` names the rate-limit identity (the account, else the
    client address). ``verified``: ``(account_id, role)`` of an account whose legacy
    key the caller has just verified (:func:`market.accounts.authenticate`).
    """

    def job(conn: sa.Connection) -> Admission:
        if verified is not None:
            account_id, role = verified
        elif key:
            check = accounts.check_key(conn, key, secret)
            if check.legacy:
                return Admission(legacy=True)
            account_id, role = check.account_id, check.role  # type: ignore[assignment]
        else:
            account_id, role = None, None  # type: ignore[assignment]
        decision = None
        if limiter.rules[group].enabled:
            decision = limiter.count_in(
                conn, identity=identity(account_id), group=group, now=now
            )
        return Admission(account_id=account_id, role=role, decision=decision)

    return job


@dataclass(frozen=True, slots=True)
class MarketRules:
    """A market (detached, read-only) and its reported-cost check, prior built once."""

    market: Market
    check_cost: Callable[[float], None]


class MarketCache:
    """Markets by id (as :class:`MarketRules`), read once per process.

    Safe to cache because everything the intake reads from a market (task, features,
    target, bounds policy, partition, parties, cost prior) is fixed when it is created:
    :func:`market.markets.update_market` changes only its name, lifetime cap and
    (versioned, separate) mechanism parameters, and markets are never deleted. A missing
    market is not cached (it may be created later).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._markets: dict[int, MarketRules] = {}
        self._lock = threading.Lock()

    def get(self, market_id: int) -> MarketRules | None:
        """Return the market's rules or ``None``; blocking (a read) on a miss."""
        rules = self._markets.get(market_id)
        if rules is not None:
            return rules
        with session_scope(self.engine) as session:
            market = session.get(Market, market_id)
            if market is None:
                return None
            session.expunge(market)
        rules = MarketRules(market, numerics.cost_checker(market.cost_prior))
        with self._lock:
            return self._markets.setdefault(market_id, rules)

    def cached(self, market_id: int) -> MarketRules | None:
        """Return the market if it is cached (never blocks)."""
        return self._markets.get(market_id)


@dataclass(frozen=True, slots=True)
class PreparedOffer:
    """A validated offer ready to insert, and the public view to answer with."""

    values: dict[str, Any]
    records: list[dict[str, Any]]


def prepare(
    rules: MarketRules,
    seller_id: int,
    body: OfferCreate,
    *,
    now: datetime | None = None,
) -> PreparedOffer:
    """Validate and scale ``body`` against the market and build the row to insert.

    Raises
    ------
    InvalidInputError
        As :func:`market.offers.validate_offer` (field and index named).
    """
    market = rules.market
    raw, scaled = offers.validate_offer(market, body, check_cost=rules.check_cost)
    now = now or utcnow()
    values = {
        "market_id": market.id,
        "seller_id": seller_id,
        "records": orjson.dumps(raw).decode(),
        "records_scaled": orjson.dumps(scaled).decode(),
        "n_records": len(raw),
        "reported_cost": body.reported_cost,
        "max_epsilon": body.max_epsilon,
        "status": OfferStatus.ACTIVE.value,
        "replaces_id": None,
        "party": body.party,
        "created_at": now,
        "updated_at": now,
    }
    return PreparedOffer(values=values, records=raw)


_INSERTS: dict[str, sa.Insert] = {}


def _insert_statement(dialect: str) -> sa.Insert:
    """``INSERT INTO offer`` with the JSON columns bound as text (already serialised
    with orjson; cast to ``json`` on PostgreSQL), built once per dialect."""
    stmt = _INSERTS.get(dialect)
    if stmt is None:
        table: sa.Table = Offer.__table__  # type: ignore[attr-defined]
        cast = dialect == "postgresql"
        stmt = _INSERTS[dialect] = sa.insert(table).values(
            {
                name: sa.cast(sa.bindparam(name, type_=sa.Text), table.c[name].type)
                if cast
                else sa.bindparam(name, type_=sa.Text)
                for name in JSON_COLUMNS
            }
        )
    return stmt


def _party_taken(conn: sa.Connection, market_id: int, party: str) -> bool:
    stmt = (
        sa.select(col(Offer.id))
        .where(
            col(Offer.market_id) == market_id,
            col(Offer.party) == party,
            col(Offer.status) == OfferStatus.ACTIVE.value,
        )
        .limit(1)
    )
    return conn.execute(stmt).first() is not None


def insert_job(prepared: PreparedOffer) -> Job:
    """Return the writer job that stores a prepared offer and returns its id.

    Raises (in the job)
    -------------------
    ConflictError
        The seller already has an active offer in the market, or (vertical markets)
        the party has one.
    """
    values = prepared.values

    def job(conn: sa.Connection) -> int:
        party = values["party"]
        if party is not None and _party_taken(conn, values["market_id"], party):
            raise ConflictError(
                f"party {party!r} already has an active offer in this market"
            )
        try:
            result = conn.execute(_insert_statement(conn.dialect.name), values)
        except IntegrityError as exc:
            raise ConflictError(offers.DUPLICATE) from exc
        return int(result.inserted_primary_key[0])

    return job


def to_public(prepared: PreparedOffer, offer_id: int) -> OfferPublic:
    """Return the owner's view of the stored offer (as :func:`market.offers.to_public`)."""
    v = prepared.values
    return OfferPublic(
        id=offer_id,
        market_id=v["market_id"],
        seller_id=v["seller_id"],
        status=v["status"],
        reported_cost=v["reported_cost"],
        max_epsilon=v["max_epsilon"],
        n_records=v["n_records"],
        records=prepared.records,
        replaces_id=None,
        party=v["party"],
        created_at=v["created_at"],
    )
