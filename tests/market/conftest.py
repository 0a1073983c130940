"""Market test fixtures: an empty database per test on SQLite (and PostgreSQL)."""

from tests.market.dbfixtures import (
    database_url,
    engine,
    pg_schema,
    pg_tables_url,
    sqlite_template,
)

__all__ = ["database_url", "engine", "pg_schema", "pg_tables_url", "sqlite_template"]
