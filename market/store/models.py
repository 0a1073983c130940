"""SQLModel tables of the market (tables only; API shapes live in ``market.schemas``).

Money is stored in integer minor units (``MINOR_UNITS`` per currency unit); privacy
loss ``ε`` as floats. Ledger rows are append-only: balances are sums of entries.
"""

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

MINOR_UNITS = 100
"""Minor units per currency unit (cents): ``amount_minor = floor(amount · 100)``."""

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
SQLModel.metadata.naming_convention = NAMING_CONVENTION


def utcnow() -> datetime:
    """Return the current time, timezone-aware UTC."""
    return datetime.now(UTC)


def _ts(*, nullable: bool = False) -> Any:
    return Field(
        default_factory=utcnow if not nullable else None,
        sa_type=sa.DateTime(timezone=True),
        nullable=nullable,
    )


def _json(*, nullable: bool = False) -> Any:
    return Field(default=None, sa_type=sa.JSON, nullable=nullable)


class Role(StrEnum):
    ADMIN = "admin"
    SELLER = "seller"
    BUYER = "buyer"


class OfferStatus(StrEnum):
    ACTIVE = "active"
    WITHDRAWN = "withdrawn"
    REPLACED = "replaced"


class RunStatus(StrEnum):
    """Status of orders and jobs: ``queued → running → succeeded | failed``; an order
    can also end ``cancelled`` (by its buyer or an admin, before it settled)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class LedgerKind(StrEnum):
    MONEY = "money"
    EPSILON = "epsilon"


class Account(SQLModel, table=True):
    """An admin, seller or buyer; only a keyed hash of its API key is stored
    (HMAC-SHA-256, ``market.access.accounts``; legacy Argon2id until first use)."""

    __table_args__ = (
        sa.CheckConstraint("role IN ('admin', 'seller', 'buyer')", name="role"),
    )

    id: int | None = Field(default=None, primary_key=True)
    role: str = Field(max_length=16)
    name: str = Field(max_length=200)
    key_prefix: str = Field(max_length=32, unique=True, index=True)
    key_hash: str = Field(max_length=255)
    created_at: datetime = _ts()


class Market(SQLModel, table=True):
    """One data schema: public feature bounds, cost prior, privacy cap, validation set."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200)
    task: str = Field(max_length=32)
    features: list[dict[str, Any]] = _json()
    target: dict[str, Any] | None = _json(nullable=True)
    out_of_bounds: str = Field(default="reject", max_length=16)
    cost_prior: dict[str, Any] = _json()
    lifetime_epsilon_cap: float
    validation: list[dict[str, Any]] | None = _json(nullable=True)
    partition: str = Field(
        default="horizontal",
        max_length=16,
        sa_column_kwargs={"server_default": "horizontal"},
    )
    """``horizontal`` (each seller offers whole records) or ``vertical`` (each seller is
    a party offering its column block keyed by ``record_key``)."""
    record_key: str | None = Field(default=None, max_length=200)
    parties: list[dict[str, Any]] | None = _json(nullable=True)
    """Vertical markets: ``[{"name", "features": [...]}]``; the first holds the label."""
    custody: str = Field(
        default="platform",
        max_length=16,
        sa_column_kwargs={"server_default": "platform"},
    )
    """``platform`` (sellers upload records) or ``seller`` (records stay with their
    sellers; offers hold no records, orders collect randomized reports)."""
    created_by: int = Field(foreign_key="account.id")
    created_at: datetime = _ts()


class MarketParameters(SQLModel, table=True):
    """Append-only, versioned mechanism settings of a market (γ and friends)."""

    __tablename__ = "market_parameters"
    __table_args__ = (sa.UniqueConstraint("market_id", "version"),)

    id: int | None = Field(default=None, primary_key=True)
    market_id: int = Field(foreign_key="market.id", index=True)
    version: int
    values: dict[str, Any] = _json()
    created_by: int = Field(foreign_key="account.id")
    created_at: datetime = _ts()


class Offer(SQLModel, table=True):
    """A seller's records in one market, as submitted and as scaled to ``‖x‖ ≤ 1``
    (both empty in a seller-custody market, where ``n_records`` is the seller's public
    count of the records it keeps)."""

    __table_args__ = (
        # One active offer per seller per market, enforced by the database.
        sa.Index(
            "uq_offer_active_seller_market",
            "market_id",
            "seller_id",
            unique=True,
            sqlite_where=sa.text("status = 'active'"),
            postgresql_where=sa.text("status = 'active'"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    market_id: int = Field(foreign_key="market.id", index=True)
    seller_id: int = Field(foreign_key="account.id", index=True)
    records: list[dict[str, Any]] = _json()
    records_scaled: list[dict[str, Any]] = _json()
    n_records: int
    reported_cost: float
    max_epsilon: float | None = None
    status: str = Field(default=OfferStatus.ACTIVE, max_length=16)
    replaces_id: int | None = Field(default=None, foreign_key="offer.id")
    party: str | None = Field(default=None, max_length=200)
    """The party (column block) a vertical market's offer is for; None otherwise."""
    created_at: datetime = _ts()
    updated_at: datetime = _ts()


class Order(SQLModel, table=True):
    """A buyer's request for a model under a money budget; runs in the background.

    ``offer_ids`` is the snapshot of offers an order uses, set when it starts running;
    ``parameters_id`` the market settings version it runs with.
    """

    __table_args__ = (sa.UniqueConstraint("buyer_id", "idempotency_key"),)

    id: int | None = Field(default=None, primary_key=True)
    market_id: int = Field(foreign_key="market.id", index=True)
    buyer_id: int = Field(foreign_key="account.id", index=True)
    learner: str = Field(max_length=64)
    budget_minor: int = Field(sa_type=sa.BigInteger)
    gamma: float | None = None
    params: dict[str, Any] = _json()
    parameters_id: int = Field(foreign_key="market_parameters.id")
    status: str = Field(default=RunStatus.QUEUED, max_length=16, index=True)
    progress_stage: str = Field(default="queued", max_length=64)
    progress_fraction: float = 0.0
    error: str | None = Field(default=None, sa_type=sa.Text)
    summary: dict[str, Any] | None = _json(nullable=True)
    model: dict[str, Any] | None = _json(nullable=True)
    offer_ids: list[int] | None = _json(nullable=True)
    idempotency_key: str | None = Field(default=None, max_length=255)
    request_hash: str | None = Field(default=None, max_length=64)
    attempts: int = 0
    lease_owner: str | None = Field(default=None, max_length=128)
    lease_expires_at: datetime | None = _ts(nullable=True)
    heartbeat_at: datetime | None = _ts(nullable=True)
    started_at: datetime | None = _ts(nullable=True)
    finished_at: datetime | None = _ts(nullable=True)
    cancel_requested_at: datetime | None = _ts(nullable=True)
    created_at: datetime = _ts()


class Job(SQLModel, table=True):
    """A generic background job (e.g. ``kind="tradeoff"``), durable like orders."""

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=32)
    market_id: int | None = Field(default=None, foreign_key="market.id", index=True)
    created_by: int = Field(foreign_key="account.id")
    status: str = Field(default=RunStatus.QUEUED, max_length=16, index=True)
    progress_stage: str = Field(default="queued", max_length=64)
    progress_fraction: float = 0.0
    params: dict[str, Any] = _json()
    result: dict[str, Any] | None = _json(nullable=True)
    error: str | None = Field(default=None, sa_type=sa.Text)
    attempts: int = 0
    lease_owner: str | None = Field(default=None, max_length=128)
    lease_expires_at: datetime | None = _ts(nullable=True)
    heartbeat_at: datetime | None = _ts(nullable=True)
    started_at: datetime | None = _ts(nullable=True)
    finished_at: datetime | None = _ts(nullable=True)
    created_at: datetime = _ts()


class Allocation(SQLModel, table=True):
    """One seller's privacy loss and payment in one finished order."""

    __table_args__ = (sa.UniqueConstraint("order_id", "seller_id"),)

    id: int | None = Field(default=None, primary_key=True)
    order_id: int = Field(foreign_key="order.id", index=True)
    seller_id: int = Field(foreign_key="account.id", index=True)
    offer_id: int = Field(foreign_key="offer.id")
    epsilon: float
    payment_minor: int = Field(sa_type=sa.BigInteger)
    certificate: dict[str, Any] | None = _json(nullable=True)
    """How the seller's payment was certified (``mechanisms`` payment certificate:
    method, KKT and global-range checks); admins read it with the allocations."""


class LedgerEntry(SQLModel, table=True):
    """Append-only money (integer minor units) or privacy (``ε``) entry."""

    __tablename__ = "ledger_entry"
    __table_args__ = (
        sa.CheckConstraint(
            "(kind = 'money' AND amount_minor IS NOT NULL AND epsilon IS NULL)"
            " OR (kind = 'epsilon' AND epsilon IS NOT NULL AND amount_minor IS NULL)",
            name="amount_matches_kind",
        ),
        sa.Index(
            "ix_ledger_entry_account_market_kind", "account_id", "market_id", "kind"
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    account_id: int = Field(foreign_key="account.id")
    market_id: int | None = Field(default=None, foreign_key="market.id")
    order_id: int | None = Field(default=None, foreign_key="order.id", index=True)
    kind: str = Field(max_length=16)
    amount_minor: int | None = Field(default=None, sa_type=sa.BigInteger)
    epsilon: float | None = None
    created_at: datetime = _ts()


class RateLimitWindow(SQLModel, table=True):
    """Requests of one identity to one route group in one fixed window (rate limits).

    ``window_start`` and ``expires_at`` are Unix seconds; rows whose window has ended
    are deleted opportunistically (``market.access.rate_limits``).
    """

    __tablename__ = "rate_limit_window"

    identity: str = Field(primary_key=True, max_length=128)
    route_group: str = Field(primary_key=True, max_length=16)
    window_start: int = Field(primary_key=True, sa_type=sa.BigInteger)
    hits: int = 0
    expires_at: int = Field(sa_type=sa.BigInteger, index=True)


class CollectionStatus(StrEnum):
    """Status of a seller-custody order's collection: ``collecting → done | failed``."""

    COLLECTING = "collecting"
    DONE = "done"
    FAILED = "failed"


class RequestStatus(StrEnum):
    """Status of one report request: ``open → answered | missed``."""

    OPEN = "open"
    ANSWERED = "answered"
    MISSED = "missed"


class CustodyRun(SQLModel, table=True):
    """A seller-custody order after allocation and pricing: the learner's local
    protocol state between rounds (JSON, so the order survives a worker restart), the
    current round and its deadline, and the mechanism's outcome kept for settlement."""

    __tablename__ = "custody_run"

    order_id: int = Field(foreign_key="order.id", primary_key=True)
    market_id: int = Field(foreign_key="market.id", index=True)
    status: str = Field(default=CollectionStatus.COLLECTING, max_length=16, index=True)
    state: dict[str, Any] = _json()
    round: int = 0
    round_deadline: datetime | None = _ts(nullable=True)
    round_seconds: float
    gamma: float
    gamma_source: str = Field(max_length=16)
    eta: float
    created_at: datetime = _ts()
    updated_at: datetime = _ts()


class CustodySeller(SQLModel, table=True):
    """One allocated seller of a seller-custody order: its allocated ``ε_i`` and
    payment (computed at allocation), and what it delivered (``delivered`` is set when
    the collection ends; ``epsilon_spent`` is the ε of the reports it sent)."""

    __tablename__ = "custody_seller"
    __table_args__ = (sa.UniqueConstraint("order_id", "seller_id"),)

    id: int | None = Field(default=None, primary_key=True)
    order_id: int = Field(foreign_key="order.id", index=True)
    market_id: int = Field(foreign_key="market.id")
    seller_id: int = Field(foreign_key="account.id", index=True)
    offer_id: int = Field(foreign_key="offer.id")
    seller_index: int
    n_records: int
    epsilon: float
    payment_minor: int = Field(sa_type=sa.BigInteger)
    certificate: dict[str, Any] | None = _json(nullable=True)
    rounds_answered: int = 0
    epsilon_spent: float = 0.0
    delivered: bool | None = None


class ReportRequest(SQLModel, table=True):
    """One round's request to one seller and, once answered, its randomized report
    (the only thing a seller-custody market ever stores of a seller's data)."""

    __tablename__ = "report_request"
    __table_args__ = (sa.UniqueConstraint("order_id", "seller_id", "round"),)

    id: int | None = Field(default=None, primary_key=True)
    order_id: int = Field(foreign_key="order.id", index=True)
    market_id: int = Field(foreign_key="market.id")
    seller_id: int = Field(foreign_key="account.id", index=True)
    round: int
    randomizer: str = Field(max_length=128)
    epsilon: float
    request: dict[str, Any] = _json()
    """The request as the learner's protocol published it (``ReportRequest.to_json``)."""
    deadline: datetime = _ts()
    status: str = Field(default=RequestStatus.OPEN, max_length=16, index=True)
    report: dict[str, Any] | None = _json(nullable=True)
    answered_at: datetime | None = _ts(nullable=True)
    created_at: datetime = _ts()


class PartyNode(SQLModel, table=True):
    """A data party's node in a seller-custody vertical market: where its MPyC party
    listens and the features it declares (no data). One row per market and party;
    a new registration by the party's seller replaces the address."""

    __tablename__ = "party_node"
    __table_args__ = (sa.UniqueConstraint("market_id", "party"),)

    id: int | None = Field(default=None, primary_key=True)
    market_id: int = Field(foreign_key="market.id", index=True)
    seller_id: int = Field(foreign_key="account.id", index=True)
    party: str = Field(max_length=200)
    host: str = Field(max_length=255)
    port: int
    features: list[str] = _json()
    last_seen_at: datetime = _ts()
    last_session_id: int | None = None
    last_session_status: str | None = Field(default=None, max_length=16)
    created_at: datetime = _ts()


class FitSession(SQLModel, table=True):
    """One secure fit between the party nodes and the platform's compute party.

    ``plan`` holds the public parameters every party receives (party names, key
    lists, widths, settings, ε per party); ``addresses`` the ``host:port`` of every
    MPyC party in index order. ``status``: ``open`` (nodes join) → ``succeeded`` |
    ``failed`` (``error`` says why)."""

    __tablename__ = "fit_session"

    id: int | None = Field(default=None, primary_key=True)
    order_id: int = Field(foreign_key="order.id", index=True)
    market_id: int = Field(foreign_key="market.id", index=True)
    status: str = Field(default="open", max_length=16, index=True)
    plan: dict[str, Any] = _json()
    addresses: list[str] = _json()
    tls: bool = False
    """Whether the parties connect over TLS (every party needs its certificate)."""
    deadline_at: datetime = _ts()
    error: str | None = Field(default=None, sa_type=sa.Text)
    created_at: datetime = _ts()
    finished_at: datetime | None = _ts(nullable=True)
