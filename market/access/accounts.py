"""Accounts and API keys.

A key looks like ``pm_<prefix>_<secret>``: the 12-hex-digit prefix (the key id) is
stored in clear for lookup, the whole key only as ``hmac-sha256$<hex>``, an
HMAC-SHA-256 of the key under the server secret (:mod:`market.access.key_secret`), compared
in constant time (``hmac.compare_digest``). The secret part has 256 bits of entropy, so
a fast keyed hash is as safe as a slow one (nothing to brute-force) and a request costs
microseconds, not an Argon2 verification: a bad key (unknown prefix, wrong secret) is
rejected after one indexed lookup and one HMAC, whatever it is.

Keys issued before this scheme are stored as Argon2id hashes. On the first request
that presents such a key, it is verified once with Argon2 and its stored hash replaced
by the HMAC (a compare-and-set ``UPDATE``), so each old key costs one slow hash in its
lifetime. Argon2 is used for nothing else.
"""

import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass

import argon2
import sqlalchemy as sa
from sqlmodel import Session, col, select, update

from market.access.key_secret import resolve_key_secret
from market.config import Settings, get_settings
from market.errors import InvalidInputError
from market.store.db import DriverStatement, session_scope
from market.store.models import Account, Role

KEY_PREFIX_BYTES = 6
KEY_SECRET_BYTES = 32
HMAC_SCHEME = "hmac-sha256$"
LEGACY_SCHEME = "$argon2"

_log = logging.getLogger(__name__)
_legacy_verifier = argon2.PasswordHasher()
"""Verifies legacy Argon2id key hashes (the parameters are read from each hash)."""


def new_api_key() -> tuple[str, str]:
    """Return ``(key, prefix)`` for a fresh random API key."""
    prefix = secrets.token_hex(KEY_PREFIX_BYTES)
    return f"pm_{prefix}_{secrets.token_urlsafe(KEY_SECRET_BYTES)}", prefix


def hash_key(key: str, secret: bytes) -> str:
    """Return the stored form of ``key``: ``hmac-sha256$`` + HMAC-SHA-256(secret, key)."""
    mac = hmac.digest(secret, key.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return HMAC_SCHEME + mac.hex()


def issue_key(secret: bytes) -> tuple[str, str, str]:
    """Return ``(key, prefix, stored hash)`` of a fresh API key."""
    key, prefix = new_api_key()
    return key, prefix, hash_key(key, secret)


def clean_name(name: str, field: str = "name") -> str:
    """Return ``name`` stripped; ``InvalidInputError`` if blank or over 200 characters."""
    clean = name.strip()
    if not clean or len(clean) > 200:
        raise InvalidInputError(field, "must have 1 to 200 non-blank characters")
    return clean


def create_account(
    session: Session, *, role: Role, name: str, settings: Settings | None = None
) -> tuple[Account, str]:
    """Create an account and return it with its API key (shown once, never stored).

    Raises
    ------
    InvalidInputError
        If ``name`` is blank or longer than 200 characters.
    """
    clean = clean_name(name)
    key, prefix, key_hash = issue_key(resolve_key_secret(settings or get_settings()))
    account = Account(
        role=Role(role).value, name=clean, key_prefix=prefix, key_hash=key_hash
    )
    session.add(account)
    session.commit()
    session.refresh(account)
    return account, key


def _parse(key: str) -> str | None:
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != "pm" or len(parts[1]) != 2 * KEY_PREFIX_BYTES:
        return None
    return parts[1]


def _verify_legacy(stored: str, key: str) -> bool:
    try:
        return _legacy_verifier.verify(stored, key)
    except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError):
        return False


def _rehash(session: Session, account: Account, new_hash: str) -> None:
    """Replace a legacy hash by ``new_hash`` in its own short write transaction.

    Compare-and-set on the old hash, so concurrent first uses write once. Best effort:
    a database error leaves the legacy hash (verified again on the next use). The
    caller's transaction is committed first (authentication runs before a request
    writes anything), so it holds no lock the update would wait for.
    """
    session.commit()
    engine = session.get_bind()
    assert isinstance(engine, sa.Engine)
    stmt = (
        update(Account)
        .where(col(Account.id) == account.id, col(Account.key_hash) == account.key_hash)
        .values(key_hash=new_hash)
    )
    try:
        with session_scope(engine, write=True) as writer:
            writer.execute(stmt)
            writer.commit()
    except sa.exc.DBAPIError:
        _log.warning("could not rehash the API key of account %s", account.id)
        return
    account.key_hash = new_hash


_BY_PREFIX = DriverStatement(
    sa.select(col(Account.id), col(Account.role), col(Account.key_hash)).where(
        col(Account.key_prefix) == sa.bindparam("prefix")
    )
)


@dataclass(frozen=True, slots=True)
class KeyCheck:
    """The outcome of :func:`check_key`: the account (``None``: unknown or wrong key),
    or ``legacy``: the prefix's hash is a legacy Argon2 one (verify with
    :func:`authenticate`, which also migrates it)."""

    account_id: int | None = None
    role: str | None = None
    legacy: bool = False


def check_key(conn: sa.Connection, key: str, secret: bytes) -> KeyCheck:
    """Look a key up with one indexed core ``SELECT`` and one HMAC, in the caller's
    transaction (the group-commit writer's; it reads the committed state, so a revoked
    or changed key is refused at once). Same decision as :func:`authenticate` for HMAC
    hashes; legacy hashes are reported, not verified (Argon2 has no place in a writer
    that serves other requests)."""
    prefix = _parse(key)
    computed = hash_key(key, secret)
    if prefix is None:
        return KeyCheck()
    row = _BY_PREFIX.execute(conn, {"prefix": prefix}).fetchone()
    if row is None:
        return KeyCheck()
    account_id, role, stored = row
    if stored.startswith(HMAC_SCHEME):
        if hmac.compare_digest(stored, computed):
            return KeyCheck(account_id=int(account_id), role=str(role))
        return KeyCheck()
    return KeyCheck(legacy=stored.startswith(LEGACY_SCHEME))


def authenticate(
    session: Session, key: str, *, settings: Settings | None = None
) -> Account | None:
    """Return the account owning ``key``, or ``None`` for an unknown or wrong key.

    One indexed lookup by prefix and one HMAC whatever the key; a legacy Argon2 hash
    is verified (once) only when its own prefix is presented, then migrated.
    """
    computed = hash_key(key, resolve_key_secret(settings or get_settings()))
    prefix = _parse(key)
    account = None
    if prefix is not None:
        account = session.exec(
            select(Account).where(Account.key_prefix == prefix)
        ).first()
    if account is None:
        return None
    stored = account.key_hash
    if stored.startswith(HMAC_SCHEME):
        return account if hmac.compare_digest(stored, computed) else None
    if not stored.startswith(LEGACY_SCHEME) or not _verify_legacy(stored, key):
        return None
    _rehash(session, account, computed)
    return account
