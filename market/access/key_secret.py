"""The server secret that keys API-key hashes (HMAC-SHA-256), and where it comes from.

API keys are 256-bit random secrets, not passwords: nobody can guess them, so a slow
hash adds nothing but cost. What protects a leaked database is that the stored hashes
are keyed with a secret that is *not* in the database: without it, a stolen
``account.key_hash`` column cannot even be used to check a guess.

Where the secret comes from (:func:`resolve_key_secret`), first match wins:

1. ``PRIVMARKET_API_KEY_SECRET``: at least 32 characters (e.g.
   ``python -c "import secrets; print(secrets.token_hex(32))"``). **Required** for
   any database other than SQLite (production): the app refuses to start without it.
2. ``PRIVMARKET_API_KEY_SECRET_FILE``: a file holding the secret; created with 32
   random bytes (hex, mode ``0600``) if it does not exist.
3. The embedded default (a SQLite file database): the file ``<database>.key-secret``
   next to the database, created the same way on first use. Keep it with the
   database's backups *separately* from them if you can; losing it invalidates every
   API key (issue new ones with ``privmarket admin create-key``).
4. An in-memory SQLite database (tests): a random secret for the life of the process,
   which is also the life of the database.

Changing the secret invalidates every API key hashed with the old one.
"""

import os
import secrets
import threading
from pathlib import Path

import sqlalchemy as sa

from market.config import Settings

MIN_SECRET_CHARS = 32
SECRET_FILE_SUFFIX = ".key-secret"


class KeySecretError(RuntimeError):
    """The deployment has no usable API-key secret (a configuration error)."""


_process_secret = secrets.token_bytes(32)
_lock = threading.Lock()
_from_files: dict[Path, bytes] = {}


def _checked(value: str, source: str) -> bytes:
    if len(value) < MIN_SECRET_CHARS:
        raise KeySecretError(
            f"{source} must have at least {MIN_SECRET_CHARS} characters"
            f" (got {len(value)}); generate one with"
            ' python -c "import secrets; print(secrets.token_hex(32))"'
        )
    return value.encode("utf-8")


def _read_or_create(path: Path) -> bytes:
    with _lock:
        cached = _from_files.get(path)
        if cached is not None:
            return cached
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32) + "\n")
                f.flush()
                os.fsync(f.fileno())
        value = _checked(path.read_text().strip(), f"the secret file {path}")
        _from_files[path] = value
        return value


def default_secret_file(database_url: str) -> Path | None:
    """Return ``<database>.key-secret`` for a SQLite file database, else ``None``."""
    url = sa.engine.make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(f"{url.database}{SECRET_FILE_SUFFIX}")


def check_key_secret_configured(settings: Settings) -> None:
    """Refuse, at startup, a deployment whose secret cannot be resolved (file-backed
    secrets are read or created on first use, so a missing database directory does not
    stop the app from starting and reporting it on ``/readyz``).

    Raises
    ------
    KeySecretError
        As :func:`resolve_key_secret`, for a secret given directly or missing.
    """
    if settings.api_key_secret_file is None and (
        settings.api_key_secret is not None
        or default_secret_file(settings.database_url) is None
    ):
        resolve_key_secret(settings)


def resolve_key_secret(settings: Settings) -> bytes:
    """Return the HMAC key for API-key hashes (module docstring for the order).

    Raises
    ------
    KeySecretError
        No secret is configured for a non-SQLite database, or the secret is shorter
        than 32 characters.
    """
    if settings.api_key_secret is not None:
        return _checked(
            settings.api_key_secret.get_secret_value(), "PRIVMARKET_API_KEY_SECRET"
        )
    path = settings.api_key_secret_file or default_secret_file(settings.database_url)
    if path is not None:
        return _read_or_create(Path(path))
    url = sa.engine.make_url(settings.database_url)
    if url.get_backend_name() == "sqlite":  # in memory: lives as long as the process
        return _process_secret
    raise KeySecretError(
        "PRIVMARKET_API_KEY_SECRET (or PRIVMARKET_API_KEY_SECRET_FILE) is required"
        f" with a {url.get_backend_name()} database: API-key hashes are keyed with it"
    )
