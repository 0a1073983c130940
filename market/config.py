"""Deployment settings of the market service (pydantic-settings, ``PRIVMARKET_*`` env)."""

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
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
    node_compute_host : str
        Address the worker's compute party listens on in fits between party nodes
        (seller-custody vertical markets); the nodes must reach it (default
        127.0.0.1: nodes on the same host only).
    node_tls_cert, node_tls_key, node_tls_ca : path or None
        The compute party's TLS certificate (common name ``MPyC party K`` for ``K``
        data parties), its key and the CA every party trusts; when set, every fit
        between party nodes runs over mutually authenticated TLS and the nodes must
        have their own certificates (``docs/secure-vertical.md``).
    order_time_limit_seconds : float
        Time budget of one run of an order (default 900 s): over it the order fails
        with that reason, nothing charged; also how long an order keeps retrying a
        settlement that loses races against other orders.
    api_key_secret : SecretStr or None
        Server secret (≥ 32 characters) keying the HMAC-SHA-256 hashes of API keys;
        required unless the database is SQLite (``market.access.key_secret`` says where the
        embedded default keeps a generated one).
    api_key_secret_file : Path or None
        File holding that secret instead (created with a random one if missing).
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
    rate_limit_registrations : int
        Open registrations (``POST /v1/sellers``, ``POST /v1/buyers``) per window per
        client IP, on top of the write budget; 0 turns the limit off. Default 30.
    max_bulk_request_bytes : int
        Body limit of ``POST /v1/markets/{id}/offers:bulk`` (default 64 MiB); every
        other route has ``max_request_bytes``.
    custody_round_seconds : float
        Seller-custody markets: how long sellers have to answer one round's report
        requests (default 600 s); a seller that misses the deadline is not paid and
        gets no further request of that order.
    custody_poll_seconds : float
        How often a collecting order is looked at again (default 1 s); a round whose
        last report arrives wakes it at once.
    custody_protocol_seed : int or None
        Tests only: seeds the *public* generator of seller-custody protocols as the
        library's seeded fit does, for equivalence tests. It seeds no seller's noise
        (sellers randomize on their own machines). Leave unset in production.
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
    order_time_limit_seconds: float = Field(default=900.0, gt=0, allow_inf_nan=False)
    api_key_secret: SecretStr | None = None
    api_key_secret_file: Path | None = None
    docs_enabled: bool = True
    rate_limit_window_seconds: int = Field(default=60, gt=0)
    rate_limit_writes: int = Field(default=600, ge=0)
    rate_limit_reads: int = Field(default=1200, ge=0)
    rate_limit_registrations: int = Field(default=30, ge=0)
    max_bulk_request_bytes: int = Field(default=64 * MIB, gt=0)
    dask_scheduler: str | None = None
    custody_round_seconds: float = Field(default=600.0, gt=0, allow_inf_nan=False)
    custody_poll_seconds: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    custody_protocol_seed: int | None = None
    node_compute_host: str = "127.0.0.1"
    node_tls_cert: Path | None = None
    node_tls_key: Path | None = None
    node_tls_ca: Path | None = None


@lru_cache
def get_settings() -> Settings:
    """Return the process-wide settings, read once from the environment."""
    return Settings()
