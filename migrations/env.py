"""Alembic environment: target ``SQLModel.metadata`` with ``compare_type=True``.

URL precedence: ``config.attributes["database_url"]`` (set by
``market.store.db.alembic_config``), then ``alembic -x url=...``, then the settings
(``PRIVMARKET_DATABASE_URL``). SQLite runs in batch mode so ALTERs work.
"""

from alembic import context
from sqlmodel import SQLModel

from market.config import get_settings
from market.store import (
    is_sqlite,
    make_engine,
    models,  # noqa: F401  (registers the tables)
)

config = context.config


def _url() -> str:
    url = config.attributes.get("database_url")
    if url:
        return str(url)
    x_url = context.get_x_argument(as_dictionary=True).get("url")
    return x_url or get_settings().database_url


def _configure(**kwargs: object) -> None:
    url = _url()
    context.configure(
        target_metadata=SQLModel.metadata,
        compare_type=True,
        render_as_batch=is_sqlite(url),
        **kwargs,  # type: ignore[arg-type]
    )


def run_offline() -> None:
    _configure(url=_url(), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    engine = make_engine(_url())
    try:
        with engine.connect() as connection:
            _configure(connection=connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
