"""Fixed-window rate limits counted in the application's database (a shared store).

Every request of an identity (an account, or a client address without a valid key) to a
route group (``"read"`` or ``"write"``) increments one counter row keyed by
``(identity, route_group, window_start)`` with a single atomic upsert,
``INSERT ... ON CONFLICT DO UPDATE SET hits = hits + 1 RETURNING hits``, committed at
once. On SQLite the statement runs in a write transaction (the database lock serialises
it); on PostgreSQL the conflict clause makes concurrent increments of one row wait for
each other. Either way all processes sharing the database share the counts, so the
limit holds with any number of workers. Rows of ended windows are deleted
opportunistically, in their own transaction, whenever a new window row is created.
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, delete

from market.config import Settings
from market.errors import RateLimitedError
from market.store.db import DriverStatement
from market.store.models import RateLimitWindow

MAX_IDENTITY_LENGTH = 128
"""Longest identity stored (the column's width); longer ones are truncated."""


class RouteGroup(StrEnum):
    """Route groups with separate budgets."""

    READ = "read"
    WRITE = "write"
    REGISTER = "register"
    """Open registrations, per client address, on top of the write budget."""


@dataclass(frozen=True, slots=True)
class Rule:
    """``limit`` requests per ``window_seconds``; ``limit == 0`` means unlimited."""

    limit: int
    window_seconds: int

    @property
    def enabled(self) -> bool:
        """Whether the rule limits anything."""
        return self.limit > 0


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one counted request.

    Attributes
    ----------
    allowed : bool
        Whether the request is within the limit.
    hits : int
        Requests counted in the window so far, this one included.
    limit : int
        The rule's limit.
    retry_after : int
        Whole seconds until the window ends (at least 1).
    """

    allowed: bool
    hits: int
    limit: int
    retry_after: int


def window_start(now: float, window_seconds: int) -> int:
    """Return the start (Unix seconds) of the fixed window containing ``now``."""
    return int(now // window_seconds) * window_seconds


def seconds_left(now: float, start: int, window_seconds: int) -> int:
    """Return the whole seconds (rounded up, at least 1) until the window ends."""
    return max(1, math.ceil(start + window_seconds - now))


def _insert(dialect: str) -> Callable[..., sa.Insert]:
    if dialect == "postgresql":
        return postgresql.insert  # type: ignore[return-value]
    if dialect == "sqlite":
        return sqlite.insert  # type: ignore[return-value]
    raise NotImplementedError(f"rate limits need SQLite or PostgreSQL, not {dialect}")


def _increment_statement(
    dialect: str, *, identity: str, group: str, start: int, expires_at: int
) -> sa.Executable:
    table = RateLimitWindow.__table__  # type: ignore[attr-defined]
    stmt = _insert(dialect)(table).values(
        identity=identity,
        route_group=group,
        window_start=start,
        hits=1,
        expires_at=expires_at,
    )
    return stmt.on_conflict_do_update(  # type: ignore[attr-defined, no-any-return]
        index_elements=["identity", "route_group", "window_start"],
        set_={"hits": table.c.hits + 1},
    ).returning(table.c.hits)


def increment(
    session: Session, *, identity: str, group: str, start: int, expires_at: int
) -> int:
    """Count one request atomically, commit, and return the window's count.

    The session's current transaction (if any) is committed first, so the increment is
    the first statement of its own short transaction (on SQLite it then waits for the
    write lock instead of failing on a stale read snapshot).
    """
    session.commit()
    dialect = session.get_bind().dialect.name
    stmt = _increment_statement(
        dialect,
        identity=identity[:MAX_IDENTITY_LENGTH],
        group=group,
        start=start,
        expires_at=expires_at,
    )
    try:
        hits = int(session.execute(stmt).scalar_one())
        session.commit()
    except BaseException:
        session.rollback()
        raise
    return hits


_INCREMENTS: dict[str, DriverStatement] = {}


def _bound_increment(dialect: str) -> DriverStatement:
    """The increment upsert with bound parameters, built once per dialect."""
    stmt = _INCREMENTS.get(dialect)
    if stmt is None:
        table = RateLimitWindow.__table__  # type: ignore[attr-defined]
        names = ("identity", "route_group", "window_start", "expires_at")
        insert = _insert(dialect)(table).values(
            {**{name: sa.bindparam(name) for name in names}, "hits": 1}
        )
        upsert = insert.on_conflict_do_update(  # type: ignore[attr-defined]
            index_elements=["identity", "route_group", "window_start"],
            set_={"hits": table.c.hits + 1},
        ).returning(table.c.hits)
        stmt = _INCREMENTS[dialect] = DriverStatement(upsert)
    return stmt


def count_in(
    conn: sa.Connection,
    *,
    identity: str,
    group: str,
    rule: Rule,
    now: float,
    purge: bool,
) -> Decision:
    """Count one request inside the caller's transaction (no commit): the group-commit
    writer's form of :func:`hit`, same upsert and same decision. With ``purge``, a
    request that opens its identity's window also deletes ended windows."""
    if not rule.enabled:
        return Decision(allowed=True, hits=0, limit=0, retry_after=0)
    start = window_start(now, rule.window_seconds)
    params = {
        "identity": identity[:MAX_IDENTITY_LENGTH],
        "route_group": group,
        "window_start": start,
        "expires_at": start + rule.window_seconds,
    }
    row = _bound_increment(conn.dialect.name).execute(conn, params).fetchone()
    hits = int(row[0])
    if hits == 1 and purge:
        conn.execute(
            delete(RateLimitWindow).where(col(RateLimitWindow.expires_at) <= int(now))
        )
    return Decision(
        allowed=hits <= rule.limit,
        hits=hits,
        limit=rule.limit,
        retry_after=seconds_left(now, start, rule.window_seconds),
    )


def purge_expired(session: Session, *, now: float) -> int:
    """Delete the counters of windows that ended before ``now``; return how many.

    Best effort: a database error (e.g. a lock timeout) is rolled back and ignored, as
    a later call deletes the rows instead.
    """
    stmt = delete(RateLimitWindow).where(col(RateLimitWindow.expires_at) <= int(now))
    try:
        result = session.execute(stmt)
        session.commit()
    except sa.exc.DBAPIError:
        session.rollback()
        return 0
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def hit(
    session: Session,
    *,
    identity: str,
    group: str,
    rule: Rule,
    now: float,
    purge: bool = True,
) -> Decision:
    """Count a request of ``identity`` to ``group`` at time ``now`` against ``rule``.

    A disabled rule (``limit == 0``) counts nothing and always allows. With ``purge``,
    a request that opens its identity's window also deletes ended windows.
    """
    if not rule.enabled:
        return Decision(allowed=True, hits=0, limit=0, retry_after=0)
    start = window_start(now, rule.window_seconds)
    hits = increment(
        session,
        identity=identity,
        group=group,
        start=start,
        expires_at=start + rule.window_seconds,
    )
    if hits == 1 and purge:
        purge_expired(session, now=now)
    return Decision(
        allowed=hits <= rule.limit,
        hits=hits,
        limit=rule.limit,
        retry_after=seconds_left(now, start, rule.window_seconds),
    )


@dataclass(slots=True)
class RateLimiter:
    """The rules of one deployment plus a clock (replaceable in tests).

    Attributes
    ----------
    rules : dict of RouteGroup to Rule
        The rule of each route group.
    clock : callable
        Returns the current Unix time in seconds (``time.time``).
    engine : Engine or None
        Where the counters are written (``market.store.db.make_counter_engine``: commits
        without a flush to disk); ``None``: in the caller's session.
    purged_at : float
        When this limiter last deleted ended windows: at most once per window length
        (a purge on every identity's first request cost a ``DELETE`` per request when
        many identities each send one request, e.g. sellers uploading their offer).
    """

    rules: dict[RouteGroup, Rule]
    clock: Callable[[], float] = field(default=time.time)
    engine: Engine | None = None
    purged_at: float = -math.inf

    @classmethod
    def from_settings(
        cls, settings: Settings, *, engine: Engine | None = None
    ) -> "RateLimiter":
        """Build the limiter of the ``rate_limit_*`` settings."""
        window = settings.rate_limit_window_seconds
        return cls(
            engine=engine,
            rules={
                RouteGroup.READ: Rule(settings.rate_limit_reads, window),
                RouteGroup.WRITE: Rule(settings.rate_limit_writes, window),
                RouteGroup.REGISTER: Rule(settings.rate_limit_registrations, window),
            },
        )

    def check(self, session: Session, *, identity: str, group: RouteGroup) -> Decision:
        """Count a request and return the decision; raise if it is over the limit.

        Raises
        ------
        RateLimitedError
            If the identity has used up its budget for ``group`` in this window.
        """
        session.commit()  # end the caller's transaction: it may hold a SQLite lock
        if self.engine is None:
            decision = self._hit(session, identity, group)
        else:
            with Session(self.engine) as counter:
                decision = self._hit(counter, identity, group)
        if not decision.allowed:
            raise RateLimitedError(decision.retry_after, decision.limit)
        return decision

    def count_in(
        self, conn: sa.Connection, *, identity: str, group: RouteGroup, now: float
    ) -> Decision:
        """Count a request inside ``conn``'s transaction (the group-commit writer's
        form of :meth:`check`); return the decision without raising."""
        rule = self.rules[group]
        purge = now - self.purged_at >= rule.window_seconds
        decision = count_in(
            conn, identity=identity, group=group.value, rule=rule, now=now, purge=purge
        )
        if purge and decision.hits == 1:
            self.purged_at = now
        return decision

    def _hit(self, session: Session, identity: str, group: RouteGroup) -> Decision:
        rule, now = self.rules[group], self.clock()
        purge = now - self.purged_at >= rule.window_seconds
        decision = hit(
            session,
            identity=identity,
            group=group.value,
            rule=rule,
            now=now,
            purge=purge,
        )
        if purge and decision.hits == 1:
            self.purged_at = now
        return decision
