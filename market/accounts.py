"""Accounts and API keys.

A key looks like ``pm_<prefix>_<secret>``: the 12-hex-digit prefix is stored in clear
for lookup, the whole key only as an Argon2id hash compared in constant time
(``argon2.PasswordHasher.verify``). Unknown prefixes still pay one verification
against a dummy hash so timing does not reveal which prefixes exist. Verified keys are
remembered in-process by their SHA-256 digest, so a request costs one slow hash per
key and process, not one per request; the database never holds anything reversible.
"""

import hashlib
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass

import argon2
from sqlmodel import Session, select

from market.config import Settings, get_settings
from market.errors import InvalidInputError
from market.models import Account, Role

KEY_PREFIX_BYTES = 6
KEY_SECRET_BYTES = 32
_CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class _CacheEntry:
    account_id: int
    key_hash: str


class _VerifiedKeys:
    """A small thread-safe LRU map ``sha256(key) → (account id, stored hash)``."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[bytes, _CacheEntry] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: bytes) -> _CacheEntry | None:
        with self._lock:
            entry = self._items.get(digest)
            if entry is not None:
                self._items.move_to_end(digest)
            return entry

    def put(self, digest: bytes, entry: _CacheEntry) -> None:
        with self._lock:
            self._items[digest] = entry
            self._items.move_to_end(digest)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


_verified = _VerifiedKeys(_CACHE_SIZE)
_hashers: dict[tuple[int, int, int], argon2.PasswordHasher] = {}


def password_hasher(settings: Settings | None = None) -> argon2.PasswordHasher:
    """Return the Argon2id hasher configured by ``settings``."""
    s = settings or get_settings()
    params = (s.argon2_time_cost, s.argon2_memory_kib, s.argon2_parallelism)
    hasher = _hashers.get(params)
    if hasher is None:
        hasher = argon2.PasswordHasher(
            time_cost=params[0],
            memory_cost=params[1],
            parallelism=params[2],
            type=argon2.Type.ID,
        )
        _hashers[params] = hasher
    return hasher


def _dummy_hash(hasher: argon2.PasswordHasher) -> str:
    return hasher.hash("pm_000000000000_dummy")


_dummy_hashes: dict[int, str] = {}


def new_api_key() -> tuple[str, str]:
    """Return ``(key, prefix)`` for a fresh random API key."""
    prefix = secrets.token_hex(KEY_PREFIX_BYTES)
    return f"pm_{prefix}_{secrets.token_urlsafe(KEY_SECRET_BYTES)}", prefix


def create_account(
    session: Session, *, role: Role, name: str, settings: Settings | None = None
) -> tuple[Account, str]:
    """Create an account and return it with its API key (shown once, never stored).

    Raises
    ------
    InvalidInputError
        If ``name`` is blank or longer than 200 characters.
    """
    clean = name.strip()
    if not clean or len(clean) > 200:
        raise InvalidInputError("name", "must have 1 to 200 non-blank characters")
    key, prefix = new_api_key()
    key_hash = password_hasher(settings).hash(key)
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


def authenticate(
    session: Session, key: str, *, settings: Settings | None = None
) -> Account | None:
    """Return the account owning ``key``, or ``None`` for an unknown or wrong key."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    cached = _verified.get(digest)
    if cached is not None:
        account = session.get(Account, cached.account_id)
        if account is not None and secrets.compare_digest(
            account.key_hash, cached.key_hash
        ):
            return account
    hasher = password_hasher(settings)
    prefix = _parse(key)
    account = None
    if prefix is not None:
        account = session.exec(
            select(Account).where(Account.key_prefix == prefix)
        ).first()
    stored = account.key_hash if account is not None else _dummy_for(hasher)
    try:
        hasher.verify(stored, key)
    except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError):
        return None
    if account is None or account.id is None:
        return None
    _verified.put(digest, _CacheEntry(account.id, account.key_hash))
    return account


def _dummy_for(hasher: argon2.PasswordHasher) -> str:
    key = id(hasher)
    if key not in _dummy_hashes:
        _dummy_hashes[key] = _dummy_hash(hasher)
    return _dummy_hashes[key]
