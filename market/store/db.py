"""Engines, sessions and write transactions for SQLite (embedded) and PostgreSQL.

SQLite runs in WAL mode with ``synchronous=FULL`` (no acknowledged write lost on power
loss), ``foreign_keys=ON`` and ``busy_timeout=5000`` ms. Transactions are begun
explicitly so that :func:`write_session` can take the database write lock up front
(``BEGIN IMMEDIATE``); on PostgreSQL :func:`lock_rows` takes ``SELECT ... FOR UPDATE``
row locks instead. Both are used when debiting privacy budget.
"""

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool
from sqlmodel import Session, col, func, select

from market.schemas import Page
from market.store import models

BUSY_TIMEOUT_MS = 5000
_BEGIN_OPTION = "privmarket_sqlite_begin"
ROOT = Path(__file__).resolve().parents[2]


def is_sqlite(engine_or_url: Engine | str) -> bool:
    """Return whether an engine or URL targets SQLite."""
    url = engine_or_url.url if isinstance(engine_or_url, Engine) else engine_or_url
    return sa.engine.make_url(url).get_backend_name() == "sqlite"


def make_engine(url: str, *, echo: bool = False) -> Engine:
    """Create an engine for ``url`` with the durability settings of the module docstring."""
    if not is_sqlite(url):
        return sa.create_engine(url, echo=echo, pool_pre_ping=True)
    parsed = sa.engine.make_url(url)
    in_memory = parsed.database in (None, "", ":memory:")
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False}}
    if in_memory:
        kwargs["poolclass"] = StaticPool
    engine = sa.create_engine(url, echo=echo, **kwargs)
    _install_sqlite_events(engine)
    return engine


def _install_sqlite_events(engine: Engine) -> None:
    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Autocommit at the driver level; SQLAlchemy then emits BEGIN itself (below),
        # which is the documented way to get BEGIN IMMEDIATE with pysqlite.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        mode = conn.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


def make_counter_engine(url: str) -> Engine:
    """Create an engine for best-effort counters (rate limits) whose commits skip the
    flush to disk: SQLite ``synchronous=NORMAL`` (in WAL mode: no fsync per commit;
    the next ``FULL`` commit or checkpoint syncs its frames), PostgreSQL
    ``synchronous_commit=off``. A power loss may forget the last few counts, never
    corrupt the database; every other write keeps ``synchronous=FULL``.
    """
    engine = make_engine(url)
    sqlite = is_sqlite(url)

    @sa.event.listens_for(engine, "connect")
    def _relaxed(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        if sqlite:
            cur.execute("PRAGMA synchronous=NORMAL")
        else:
            cur.execute("SET synchronous_commit TO OFF")
            dbapi_conn.commit()
        cur.close()

    return engine


def writer_bind(engine: Engine) -> Engine:
    """Return ``engine`` set up so each transaction takes the write lock at ``BEGIN``.

    On SQLite a deferred transaction that reads and then writes fails at once with
    "database is locked" (``SQLITE_BUSY_SNAPSHOT``, not retried by ``busy_timeout``)
    when another writer committed in between; ``BEGIN IMMEDIATE`` waits for the lock
    instead. Any session that may write must use this bind. PostgreSQL: unchanged.
    """
    if is_sqlite(engine):
        return engine.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})
    return engine


@contextmanager
def session_scope(engine: Engine, *, write: bool = False) -> Iterator[Session]:
    """Yield a session that is closed afterwards (commits are the caller's).

    ``write=True`` for sessions that may write (see :func:`writer_bind`).
    """
    bind = writer_bind(engine) if write else engine
    with Session(bind, expire_on_commit=False) as session:
        yield session


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """Yield a session whose transaction holds the write lock from its first statement.

    On SQLite the transaction starts with ``BEGIN IMMEDIATE`` so read-then-write
    sequences (remaining budget → debit) cannot interleave with another writer. On
    PostgreSQL combine it with :func:`lock_rows`. Commits on success, rolls back on error.
    """
    with session_scope(engine, write=True) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


IN_CHUNK = 5_000
"""Values per ``IN (...)`` list: one bound parameter each, and PostgreSQL takes at
most 65,535 parameters a statement (SQLite 32,766), so a list of every seller of a
large order is sent in chunks of this many."""

C = TypeVar("C")


def in_chunks(values: Sequence[C], size: int | None = None) -> Iterator[Sequence[C]]:
    """``values`` in consecutive chunks of at most ``size`` (default
    :data:`IN_CHUNK`), for ``IN`` lists."""
    size = IN_CHUNK if size is None else size
    for start in range(0, len(values), size):
        yield values[start : start + size]


def id_in(
    session: Session, column: Any, ids: Sequence[int]
) -> Iterator[sa.ColumnElement[bool]]:
    """Filters that together select the rows whose integer ``column`` is in ``ids``:
    on PostgreSQL one ``column = ANY(:ids)`` (a single array parameter however many
    ids: every seller of a large order), on SQLite ``IN`` lists of at most
    :data:`IN_CHUNK` ids. Run the statement once per filter."""
    if session.get_bind().dialect.name == "postgresql":
        yield column == sa.any_(
            sa.bindparam(None, list(ids), type_=ARRAY(sa.BigInteger))
        )
        return
    for chunk in in_chunks(ids):
        yield column.in_(chunk)


def lock_rows(session: Session, *, account_ids: Sequence[int]) -> None:
    """Lock the accounts' rows (``FOR UPDATE``, id order so lockers never deadlock),
    in one statement.

    A no-op on SQLite, where :func:`write_session` already holds the database lock.
    """
    ids = sorted(set(account_ids))
    if not ids or session.get_bind().dialect.name == "sqlite":
        return
    for where in id_in(session, col(models.Account.id), ids):
        stmt = (
            select(models.Account.id)
            .where(where)
            .order_by(models.Account.id)
            .with_for_update()
        )
        session.exec(stmt).all()


T = TypeVar("T")


class DriverStatement:
    """A Core statement compiled once and run directly on the DBAPI connection when the
    connection is SQLite's (``sqlite3``), else through ``Connection.execute``.

    On SQLite ``Connection.execute`` of even a cached statement costs about 90 µs of
    Python per call (measured; the driver's own ``execute`` about 12 µs), which the
    group-commit writer's few statements per request would pay on its one thread. The
    SQL text, the parameter order, the literal parameters' values and each parameter's
    bind processor (e.g. SQLite's ``DATETIME`` strings) are those SQLAlchemy compiled,
    so the row written is the one ``Connection.execute`` would write.
    """

    def __init__(self, stmt: Any) -> None:
        self.stmt = stmt
        self._sqlite: tuple[str, list[tuple[str, Any, Any]]] | None = None

    def _compiled(self, dialect: sa.Dialect) -> tuple[str, list[tuple[str, Any, Any]]]:
        if self._sqlite is None:
            compiled = self.stmt.compile(dialect=dialect)
            order = []
            for name in compiled.positiontup or ():
                bind = compiled.binds[name]
                impl = bind.type.dialect_impl(dialect)
                order.append((name, bind.value, impl.bind_processor(dialect)))
            self._sqlite = (str(compiled), order)
        return self._sqlite

    def execute(self, conn: sa.Connection, params: dict[str, Any]) -> Any:
        """Execute with ``params``; return a DBAPI cursor (SQLite) or a ``Result``:
        both have ``fetchone()``."""
        if conn.dialect.name != "sqlite":
            return conn.execute(self.stmt, params)
        sql, order = self._compiled(conn.dialect)
        values = []
        for name, default, process in order:
            value = params.get(name, default)
            values.append(process(value) if process is not None else value)
        driver = conn.connection.driver_connection
        assert driver is not None
        return driver.execute(sql, values)


def paginate(
    session: Session,
    stmt: Any,
    *,
    limit: int,
    offset: int,
    convert: Callable[[Any], T],
) -> Page[T]:
    """Return one page of ``stmt``'s rows (in its order), converted, with the total."""
    count = select(func.count()).select_from(stmt.order_by(None).subquery())
    rows = session.exec(stmt.limit(limit).offset(offset)).all()
    return Page(
        items=[convert(row) for row in rows],
        total=session.exec(count).one(),
        limit=limit,
        offset=offset,
    )


def create_all(engine: Engine) -> None:
    """Create all tables directly (tests); deployments use :func:`upgrade_to_head`."""
    models.SQLModel.metadata.create_all(engine)


def alembic_config(url: str) -> Any:
    """Return an Alembic ``Config`` for the repository's migrations and ``url``."""
    from alembic.config import Config

    # stdout is passed explicitly: Config's default is bound when alembic is imported.
    cfg = Config(str(ROOT / "alembic.ini"), stdout=sys.stdout)
    cfg.set_main_option("script_location", str(ROOT / "migrations"))
    cfg.attributes["database_url"] = url
    return cfg


def upgrade_to_head(url: str) -> None:
    """Bring the database at ``url`` to the newest Alembic revision."""
    from alembic import command

    command.upgrade(alembic_config(url), "head")
