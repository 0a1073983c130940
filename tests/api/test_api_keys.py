"""API-key hashes (issue 16, issue 14 item 7): HMAC-SHA-256 under a server secret,
bad keys rejected without any Argon2 work, legacy Argon2id hashes verified once on
first use and migrated, and the secret's configuration story."""

import os
import stat
from pathlib import Path

import argon2
import pytest
from sqlmodel import Session

from api.main import create_app
from market.access import KeySecretError, accounts, resolve_key_secret
from market.config import Settings
from market.store import Account, Role
from tests.api.conftest import Api, World, offer_body

LEGACY = argon2.PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
"""Argon2id with cheap parameters: the shape of hashes stored before the HMAC scheme."""


class ArgonSpy:
    """Counts ``argon2.PasswordHasher.verify`` calls (any instance) and delegates."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = argon2.PasswordHasher.verify

        def verify(hasher: argon2.PasswordHasher, stored: str, key: str) -> bool:
            self.calls += 1
            return real(hasher, stored, key)

        monkeypatch.setattr(argon2.PasswordHasher, "verify", verify)


@pytest.fixture
def argon_spy(monkeypatch: pytest.MonkeyPatch) -> ArgonSpy:
    return ArgonSpy(monkeypatch)


def _legacy_account(api: Api, role: Role = Role.SELLER) -> tuple[int, str]:
    """Insert an account whose key is stored the old way (Argon2id); return id, key."""
    key, prefix = accounts.new_api_key()
    with Session(api.client.app.state.engine) as session:  # type: ignore[attr-defined]
        account = Account(
            role=role.value, name="old", key_prefix=prefix, key_hash=LEGACY.hash(key)
        )
        session.add(account)
        session.commit()
        assert account.id is not None
        return account.id, key


def _stored_hash(api: Api, account_id: int) -> str:
    with Session(api.client.app.state.engine) as session:  # type: ignore[attr-defined]
        account = session.get(Account, account_id)
        assert account is not None
        return account.key_hash


def _me(api: Api, key: str) -> int:
    r = api.client.get("/v1/me", headers={"Authorization": f"Bearer {key}"})
    return r.status_code


def test_legacy_argon2_key_works_and_is_rehashed_on_first_use(
    api: Api, argon_spy: ArgonSpy
) -> None:
    account_id, key = _legacy_account(api)
    assert _stored_hash(api, account_id).startswith("$argon2id$")
    assert _me(api, key) == 200
    assert argon_spy.calls == 1
    migrated = _stored_hash(api, account_id)
    assert migrated == accounts.hash_key(key, resolve_key_secret(api.settings))
    # Later uses go through the HMAC only: no Argon2 verification any more.
    assert [_me(api, key) for _ in range(3)] == [200] * 3
    assert argon_spy.calls == 1


def test_wrong_secret_for_a_legacy_account_is_401_and_keeps_the_old_hash(
    api: Api, argon_spy: ArgonSpy
) -> None:
    account_id, key = _legacy_account(api)
    old = _stored_hash(api, account_id)
    wrong = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    assert _me(api, wrong) == 401
    assert _stored_hash(api, account_id) == old
    assert _me(api, key) == 200  # the right key still migrates afterwards


def test_legacy_key_migrates_on_a_write_request_too(world: World) -> None:
    """The rehash must not wait for the request's own write transaction (SQLite)."""
    api = world.api
    account_id, key = _legacy_account(api)
    r = api.client.post(
        f"/v1/markets/{world.market_id}/offers",
        headers={"Authorization": f"Bearer {key}"},
        json=offer_body(),
    )
    assert r.status_code == 201, r.text
    assert _stored_hash(api, account_id).startswith("hmac-sha256$")


@pytest.mark.parametrize(
    "bad",
    [
        "pm_000000000000_" + "A" * 43,  # unknown prefix
        "pm_zz_zz",  # malformed
        "garbage",
        "pm_000000000000_",
    ],
)
def test_bad_keys_are_rejected_without_argon2(
    api: Api, argon_spy: ArgonSpy, bad: str
) -> None:
    assert _me(api, bad) == 401
    assert argon_spy.calls == 0


def test_wrong_secret_with_a_known_prefix_is_rejected_without_argon2(
    api: Api, argon_spy: ArgonSpy
) -> None:
    good = api.register("seller")["Authorization"].removeprefix("Bearer ")
    prefix = good.split("_")[1]
    for wrong in (
        f"pm_{prefix}_{'A' * 43}",
        good[:-1] + ("B" if good[-1] != "B" else "C"),
    ):
        assert _me(api, wrong) == 401
    assert _me(api, good) == 200
    assert argon_spy.calls == 0


def test_registration_hashes_without_argon2(api: Api, argon_spy: ArgonSpy) -> None:
    hashed: list[str] = []
    real = argon2.PasswordHasher.hash

    def spy_hash(
        hasher: argon2.PasswordHasher, secret: str | bytes, **kw: object
    ) -> str:
        hashed.append("x")
        return real(hasher, secret)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(argon2.PasswordHasher, "hash", spy_hash)
        headers = api.register("buyer")
        assert api.client.get("/v1/me", headers=headers).status_code == 200
    assert hashed == []
    assert argon_spy.calls == 0


def test_a_key_hashed_under_another_secret_does_not_authenticate(
    make_api,  # type: ignore[no-untyped-def]
) -> None:
    first = make_api()
    headers = first.register("seller")
    assert first.client.get("/v1/me", headers=headers).status_code == 200
    other = make_api(api_key_secret="another-secret-" + "1" * 32)
    assert other.client.get("/v1/me", headers=headers).status_code == 401


# -- where the secret comes from ------------------------------------------------------

PG = "postgresql+psycopg://nobody@127.0.0.1:1/none"


def test_non_sqlite_database_without_a_secret_is_refused_at_startup() -> None:
    with pytest.raises(KeySecretError, match="PRIVMARKET_API_KEY_SECRET"):
        create_app(Settings(database_url=PG, workers=0))


def test_short_secret_is_refused() -> None:
    with pytest.raises(KeySecretError, match="at least 32"):
        create_app(Settings(database_url=PG, workers=0, api_key_secret="short"))


def test_configured_secret_is_used_as_given() -> None:
    value = "s" * 40
    settings = Settings(database_url=PG, api_key_secret=value)
    assert resolve_key_secret(settings) == value.encode()
    assert value not in repr(settings)  # a SecretStr: never printed


def test_embedded_default_generates_and_persists_a_private_secret(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'market.store.db'}"
    first = resolve_key_secret(Settings(database_url=url))
    path = tmp_path / "market.store.db.key-secret"
    assert path.exists()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert len(first) >= 32
    assert path.read_text().strip().encode() == first
    # Another process (simulated: a fresh cache) reads the same secret.
    from market.access import key_secret

    key_secret._from_files.clear()
    assert resolve_key_secret(Settings(database_url=url)) == first
    other = resolve_key_secret(Settings(database_url=f"sqlite:///{tmp_path / 'b.db'}"))
    assert other != first


def test_secret_file_setting_wins_over_the_default_location(tmp_path: Path) -> None:
    secret_file = tmp_path / "elsewhere" / "secret"
    secret_file.parent.mkdir()
    secret_file.write_text("f" * 64 + "\n")
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'm.db'}", api_key_secret_file=secret_file
    )
    assert resolve_key_secret(settings) == b"f" * 64
    assert not (tmp_path / "m.db.key-secret").exists()


def test_in_memory_sqlite_uses_a_process_secret() -> None:
    a = resolve_key_secret(Settings(database_url="sqlite://"))
    assert a == resolve_key_secret(Settings(database_url="sqlite:///:memory:"))
    assert len(a) == 32


def test_known_and_unknown_key_ids_cost_the_same_work(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Timing does not reveal whether a key id exists (T-API-6): a wrong secret for a
    real id and an unknown id each cost one indexed lookup and exactly one HMAC."""
    calls: list[str] = []
    real = accounts.hash_key

    def counting(key: str, secret: bytes) -> str:
        calls.append(key)
        return real(key, secret)

    headers = api.register("seller")
    monkeypatch.setattr(accounts, "hash_key", counting)
    prefix = headers["Authorization"].split("_")[1]
    for key in (f"pm_{prefix}_{'A' * 43}", f"pm_{'0' * 12}_{'A' * 43}"):
        calls.clear()
        assert _me(api, key) == 401
        assert calls == [key]
