"""Registration, API keys, probes, body limits and CORS over HTTP."""

import pytest

from tests.api.conftest import Api

JSON = {"content-type": "application/json"}


def test_healthz_and_readyz(api: Api) -> None:
    assert api.client.get("/healthz").json() == {"status": "ok"}
    assert api.client.get("/readyz").json() == {"status": "ok"}


@pytest.mark.parametrize("role", ["seller", "buyer"])
def test_registration_returns_key_once_and_it_authenticates(
    api: Api, role: str
) -> None:
    r = api.client.post(f"/v1/{role}s", json={"name": "ada"})
    assert r.status_code == 201
    body = r.json()
    assert set(body) == {"id", "name", "role", "api_key"}
    assert body["role"] == role
    me = api.client.get(
        "/v1/me", headers={"Authorization": f"Bearer {body['api_key']}"}
    )
    assert me.status_code == 200
    assert me.json() == {"id": body["id"], "name": "ada", "role": role}


def test_stored_key_is_a_keyed_hmac_not_the_key(api: Api) -> None:
    import hashlib
    import hmac

    from sqlmodel import Session, select

    from market.store import Account
    from tests.api.conftest import TEST_KEY_SECRET

    key = api.client.post("/v1/sellers", json={"name": "x"}).json()["api_key"]
    with Session(api.client.app.state.engine) as session:  # type: ignore[attr-defined]
        (account,) = session.exec(select(Account)).all()
    expected = hmac.new(TEST_KEY_SECRET.encode(), key.encode(), hashlib.sha256)
    assert account.key_hash == "hmac-sha256$" + expected.hexdigest()
    assert key not in account.key_hash
    # The secret is everything after the second "_" (token_urlsafe may contain "_"
    # itself; splitting on every "_" gave a 1–3 character fragment that could occur
    # in the hash by chance).
    secret = key.split("_", 2)[2]
    assert len(secret) >= 16
    assert secret not in account.key_hash


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer ",
        "Bearer pm_000000000000_nope",
        "Bearer garbage",
        "Basic abc",
        "Bearer pm_zz_zz",
    ],
)
def test_missing_or_invalid_key_is_401(api: Api, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    r = api.client.get("/v1/me", headers=headers)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"


def test_tampered_secret_with_valid_prefix_is_401(api: Api) -> None:
    headers = api.register("seller")
    good = headers["Authorization"]
    assert api.client.get("/v1/me", headers=headers).status_code == 200
    bad = good[:-2] + ("AA" if not good.endswith("AA") else "BB")
    assert api.client.get("/v1/me", headers={"Authorization": bad}).status_code == 401


def test_registration_rejects_server_owned_fields(api: Api) -> None:
    for extra in ({"role": "admin"}, {"id": 7}, {"api_key": "pm_x_y"}):
        r = api.client.post("/v1/sellers", json={"name": "eve", **extra})
        assert r.status_code == 422
        assert r.json()["detail"][0]["loc"] == ["body", next(iter(extra))]
    # Nothing was stored: the next account gets id 1.
    assert api.client.post("/v1/buyers", json={"name": "ok"}).json()["id"] == 1


@pytest.mark.parametrize("name", ["", "   ", "x" * 201])
def test_registration_rejects_bad_names(api: Api, name: str) -> None:
    assert api.client.post("/v1/sellers", json={"name": name}).status_code == 422


def test_body_over_limit_is_413_with_and_without_content_length(make_api) -> None:  # type: ignore[no-untyped-def]
    small = make_api(max_request_bytes=100)
    ok = b'{"name": "' + b"a" * 50 + b'"}'
    assert small.client.post("/v1/sellers", content=ok, headers=JSON).status_code == 201
    big = b'{"name": "' + b"a" * 120 + b'"}'
    assert (
        small.client.post("/v1/sellers", content=big, headers=JSON).status_code == 413
    )

    def chunks():  # a generator body is sent chunked, without Content-Length
        for _ in range(20):
            yield b"a" * 10

    r = small.client.post("/v1/sellers", content=chunks(), headers=JSON)
    assert r.status_code == 413

    def small_chunks():
        yield b'{"name": '
        yield b'"chunky"}'

    r = small.client.post("/v1/sellers", content=small_chunks(), headers=JSON)
    assert r.status_code == 201


def test_limit_plus_one_byte_is_413_and_limit_is_accepted(make_api) -> None:  # type: ignore[no-untyped-def]
    small = make_api(max_request_bytes=64)
    body = b'{"name": "' + b"a" * (64 - 12) + b'"}'
    assert len(body) == 64
    assert (
        small.client.post("/v1/sellers", content=body, headers=JSON).status_code == 201
    )
    assert (
        small.client.post("/v1/sellers", content=body + b" ", headers=JSON).status_code
        == 413
    )


def test_cors_allows_only_configured_origins(make_api) -> None:  # type: ignore[no-untyped-def]
    app = make_api(allowed_origins=["https://good.example"])
    pre = {"Access-Control-Request-Method": "GET"}
    ok = app.client.options(
        "/healthz", headers={"Origin": "https://good.example", **pre}
    )
    assert ok.headers.get("access-control-allow-origin") == "https://good.example"
    bad = app.client.options(
        "/healthz", headers={"Origin": "https://evil.example", **pre}
    )
    assert "access-control-allow-origin" not in bad.headers


def test_sqlite_pragmas_are_set(api: Api) -> None:
    engine = api.client.app.state.engine  # type: ignore[attr-defined]
    if engine.dialect.name != "sqlite":
        pytest.skip("SQLite-only check")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000


def test_readyz_is_503_when_the_database_is_unreachable(make_api, tmp_path) -> None:  # type: ignore[no-untyped-def]
    broken = make_api(database_url=f"sqlite:///{tmp_path}/missing/dir/x.db")
    assert broken.client.get("/healthz").status_code == 200
    r = broken.client.get("/readyz")
    assert r.status_code == 503
