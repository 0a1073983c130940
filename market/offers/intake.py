"""Single-offer intake through the group-commit writer (``POST /v1/markets/{id}/offers``).

The session path (:func:`market.offers.create_offer` behind the API's dependencies)
spends four transactions per offer: the key lookup, the rate-limit count, and the
offer's own write, which first waits for SQLite's write lock (``BEGIN IMMEDIATE``,
retried with ``busy_timeout``'s back-off sleeps under contention) and then flushes one
``fsync`` per offer. This module does the same steps, with the same outcomes in the
same order, in **one** job of a :class:`market.store.group_commit.GroupCommitWriter` per
offer, answered after its commit:

1. In the caller (the event loop): the market, from :class:`MarketCache`, and the
   records' validation and scaling (:func:`prepare`, i.e.
   :func:`market.offers.validate_offer`).
2. :func:`intake_job` in the writer: the key's account
   (:func:`market.access.accounts.check_key`, one indexed ``SELECT`` in the writer's
   transaction, so a revoked key is refused at once), one rate-limit count under the
   account, or under the client address when the key is missing or wrong
   (:meth:`market.access.rate_limits.RateLimiter.count_in`), and, if that admits a seller,
   the vertical-market party check and one ``INSERT``. The one-active-offer rule is the
   unique partial index ``uq_offer_active_seller_market``: a second active offer fails
   its insert alone and is answered with ``ConflictError`` (the session path's
   message), whether the first offer is older or in the same batch.

A request that fails before its job (unknown market, invalid records, or FastAPI's
body validation) still runs :func:`admission_job` first, so that it is counted and a
missing key, a wrong role or a used-up budget wins over the validation error, as with
the dependencies.
"""

import sqlite3
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

from market import access, numerics, offers
from market.access import Decision, RateLimiter, RouteGroup
from market.errors import ConflictError
from market.offers import records
from market.schemas import OfferCreate, OfferPublic
from market.store import (
    DriverStatement,
    Job,
    Market,
    Offer,
    OfferStatus,
    Role,
    session_scope,
    utcnow,
)

JSON_COLUMNS = ("records", "records_scaled")
COLUMNS = (
    "market_id",
    "seller_id",
    "records",
    "records_scaled",
    "n_records",
    "reported_cost",
    "max_epsilon",
    "status",
    "replaces_id",
    "party",
    "created_at",
    "updated_at",
)
"""The columns an intake insert sets (every other one has a default)."""


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


def _admit(
    conn: sa.Connection,
    limiter: RateLimiter,
    *,
    key: str | None,
    secret: bytes,
    identity: Callable[[int | None], str],
    group: RouteGroup,
    now: float,
    verified: tuple[int, str] | None,
) -> Admission:
    if verified is not None:
        account_id, role = verified
    elif key:
        check = access.check_key(conn, key, secret)
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
    key the caller has just verified (:func:`market.access.accounts.authenticate`).
    """

    def job(conn: sa.Connection) -> Admission:
        return _admit(
            conn,
            limiter,
            key=key,
            secret=secret,
            identity=identity,
            group=group,
            now=now,
            verified=verified,
        )

    return job


@dataclass(frozen=True, slots=True)
class MarketRules:
    """A market (detached, read-only), its reported-cost check (prior built once) and
    its features as arrays (``records.feature_schema``)."""

    market: Market
    check_cost: Callable[[float], None]
    schema: records.FeatureSchema


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
        rules = MarketRules(
            market,
            numerics.cost_checker(market.cost_prior),
            records.feature_schema(market.features),
        )
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
    rules: MarketRules, body: OfferCreate, *, now: datetime | None = None
) -> PreparedOffer:
    """Validate and scale ``body`` against the market and build the row to insert
    (its ``seller_id`` is set by :func:`intake_job` once the key is checked).

    Raises
    ------
    InvalidInputError
        As :func:`market.offers.validate_offer` (field and index named).
    """
    market = rules.market
    raw, scaled = offers.validate_offer(
        market, body, check_cost=rules.check_cost, schema=rules.schema
    )
    now = now or utcnow()
    values = {
        "market_id": market.id,
        "seller_id": None,
        "records": orjson.dumps(raw).decode(),
        "records_scaled": orjson.dumps(scaled).decode(),
        "n_records": offers.offer_size(market, body, raw),
        "reported_cost": body.reported_cost,
        "max_epsilon": body.max_epsilon,
        "status": OfferStatus.ACTIVE.value,
        "replaces_id": None,
        "party": body.party,
        "created_at": now,
        "updated_at": now,
    }
    return PreparedOffer(values=values, records=raw)


_INSERTS: dict[str, DriverStatement] = {}


def _insert_statement(dialect: str) -> DriverStatement:
    """``INSERT INTO offer`` with the JSON columns bound as text (already serialised
    with orjson; cast to ``json`` on PostgreSQL), built once per dialect."""
    stmt = _INSERTS.get(dialect)
    if stmt is None:
        table: sa.Table = Offer.__table__  # type: ignore[attr-defined]
        cast = dialect == "postgresql"
        binds: dict[str, Any] = {
            name: sa.bindparam(name, type_=table.c[name].type) for name in COLUMNS
        }
        for name in JSON_COLUMNS:
            text = sa.bindparam(name, type_=sa.Text)
            binds[name] = sa.cast(text, table.c[name].type) if cast else text
        insert = sa.insert(table).values(binds)
        stmt = _INSERTS[dialect] = DriverStatement(insert)
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


def _insert(conn: sa.Connection, values: dict[str, Any]) -> int:
    """Insert one offer; ``ConflictError`` if the seller or party has an active one.

    On PostgreSQL the insert runs in its own savepoint, so that its failure leaves the
    job's rate-limit count in place (SQLite undoes just the failed statement).
    """
    party = values["party"]
    if party is not None and _party_taken(conn, values["market_id"], party):
        raise ConflictError(
            f"party {party!r} already has an active offer in this market"
        )
    stmt = _insert_statement(conn.dialect.name)
    try:
        if conn.dialect.name == "sqlite":
            return int(stmt.execute(conn, values).lastrowid)
        with conn.begin_nested():
            result = conn.execute(stmt.stmt, values)
    except (IntegrityError, sqlite3.IntegrityError) as exc:
        raise ConflictError(offers.DUPLICATE) from exc
    return int(result.inserted_primary_key[0])


@dataclass(frozen=True, slots=True)
class Intake:
    """The outcome of :func:`intake_job`: the admission, and either the stored offer
    (``values`` as inserted, ``offer_id``) or the conflict that prevented it. Neither
    when the admission refused the request (or found a legacy key)."""

    admission: Admission
    values: dict[str, Any] | None = None
    offer_id: int | None = None
    conflict: ConflictError | None = None


def admitted(admission: Admission) -> bool:
    """Whether an admission lets a seller's request through (within its rate limit,
    a valid key, the seller role)."""
    decision = admission.decision
    return (
        (decision is None or decision.allowed)
        and admission.account_id is not None
        and admission.role == Role.SELLER.value
    )


def intake_job(
    limiter: RateLimiter,
    prepared: PreparedOffer,
    *,
    key: str | None,
    secret: bytes,
    identity: Callable[[int | None], str],
    group: RouteGroup,
    now: float,
    verified: tuple[int, str] | None = None,
) -> Job:
    """Return the one writer job of a valid offer: the admission (as
    :func:`admission_job`), then, if it admits a seller, the insert of ``prepared``
    as that seller's. The rate-limit count is kept whatever the outcome (the insert's
    failure is undone alone, :func:`_insert`); answer only after the commit."""

    admit = admission_job(
        limiter,
        key=key,
        secret=secret,
        identity=identity,
        group=group,
        now=now,
        verified=verified,
    )

    def job(conn: sa.Connection) -> Intake:
        admission: Admission = admit(conn)
        if admission.legacy or not admitted(admission):
            return Intake(admission)
        values = {**prepared.values, "seller_id": admission.account_id}
        try:
            offer_id = _insert(conn, values)
        except ConflictError as exc:
            return Intake(admission, conflict=exc)
        return Intake(admission, values=values, offer_id=offer_id)

    return job


def to_public(prepared: PreparedOffer, intake: Intake) -> OfferPublic:
    """Return the owner's view of the stored offer (as :func:`market.offers.to_public`)."""
    v = intake.values
    assert v is not None
    assert intake.offer_id is not None
    return OfferPublic(
        id=intake.offer_id,
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
