"""Deployment settings of the market service (pydantic-settings, ``PRIVMARKET_*`` env)."""

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

MIB = 1024 * 1024


class Settings(BaseSettings):
    """Settings read from the environment with the ``PRIVMARKET_`` prefix.

    Attributes
    ----------
    database_url : str
        SQLAlchemy URL; the embedded default is a SQLite file, production uses
        ``postgresql+psycopg://...``.
    max_request_bytes : int
        Largest accepted request body (413 above it), default 1 MiB.
    workers : int
        In-process worker threads that run orders and jobs (0 disables them, e.g. when
        separate ``privmarket worker`` processes run).
    allowed_origins : list of str
        CORS origins (empty: no cross-origin access).
    job_lease_seconds : float
        How long a worker's claim on an order or job lasts without a heartbeat.
    argon2_time_cost, argon2_memory_kib, argon2_parallelism : int
        Argon2id parameters for API-key hashes; defaults are the OWASP minimum
        (m = 19 MiB, t = 2, p = 1).
    docs_enabled : bool
        Serve ``/docs`` and ``/openapi.json``.
    rate_limit_window_seconds : int
        Length of the fixed rate-limit windows (default 60 s).
    rate_limit_writes : int
        ``POST``/``PUT``/``PATCH``/``DELETE`` requests per window to ``/v1`` per API key
        (per client IP without a valid key); 0 turns the limit off. Default 600.
    rate_limit_reads : int
        ``GET``/``HEAD`` requests per window to ``/v1``, counted the same way and
        separately from writes; 0 turns the limit off. Default 1200.
    dask_scheduler : str or None
        Address of a Dask scheduler (``tcp://host:8786``) on which the Myerson
        payments of large orders run (``PRIVMARKET_DASK_SCHEDULER``); unset: a local
        process pool. Needs the ``dask`` extra (``pip install privmarket[dask]``).
    """

    model_config = SettingsConfigDict(env_prefix="PRIVMARKET_", extra="ignore")

    database_url: str = "sqlite:///./privmarket.db"
    max_request_bytes: int = Field(default=MIB, gt=0)
    workers: int = Field(default=1, ge=0)
    allowed_origins: list[str] = Field(default_factory=list)
    job_lease_seconds: float = Field(default=60.0, gt=0)
    argon2_time_cost: int = Field(default=2, ge=1)
    argon2_memory_kib: int = Field(default=19 * 1024, ge=8)
    argon2_parallelism: int = Field(default=1, ge=1)
    docs_enabled: bool = True
    rate_limit_window_seconds: int = Field(default=60, gt=0)
    rate_limit_writes: int = Field(default=600, ge=0)
    rate_limit_reads: int = Field(default=1200, ge=0)
    dask_scheduler: str | None = None


@lru_cache
def get_settings() -> Settings:
    """Return the process-wide settings, read once from the environment."""
    return Settings()
