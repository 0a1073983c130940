"""Rate limits (T-API-4): request N+1 in a window gets ``429`` with ``Retry-After``,
a new window resets the budget, identities and route groups have separate budgets,
every ``/v1`` route is limited (the probes never are), and the limit holds across two
apps on one database (SQLite file and, when configured, PostgreSQL) and across two real
uvicorn processes sharing one database (slow). Limit observed = limit configured.
"""

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from market.access import RouteGroup, Rule, rate_limits
from market.store import RateLimitWindow
from tests.api.conftest import TEST_KEY_SECRET, Api, count_rows, market_body
from tests.market.dbfixtures import engine

__all__ = ["engine"]

WINDOW = 60
T0 = 1_000_000 * WINDOW + 10.0
"""A fixed clock 10 s into a window: ``Retry-After`` is then exactly 50."""


class Clock:
    """A settable clock shared by several apps."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def limited_api(
    make_api: Callable[..., Api],
    clock: Clock,
    *,
    writes: int = 3,
    reads: int = 5,
    registrations: int = 0,
) -> Api:
    """An app with tight limits whose limiter reads ``clock`` (the registration budget
    is off unless given, so the write budget is what the other tests observe)."""
    api = make_api(
        rate_limit_writes=writes,
        rate_limit_reads=reads,
        rate_limit_registrations=registrations,
        rate_limit_window_seconds=WINDOW,
    )
    api.client.app.state.rate_limiter.clock = clock  # type: ignore[attr-defined]
    return api


def register(api: Api, role: str = "seller") -> int:
    """POST a registration; return the status code."""
    return api.client.post(f"/v1/{role}s", json={"name": "x"}).status_code


def assert_rate_limited(response: httpx.Response, retry_after: int) -> None:
    """A 429 with the documented header and body."""
    assert response.status_code == 429, response.text
    assert response.headers["Retry-After"] == str(retry_after)
    body = response.json()
    assert body["code"] == "rate_limited"
    assert "rate limit" in body["detail"]


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_n_writes_pass_and_write_n_plus_1_gets_429(
    make_api: Callable[..., Api], clock: Clock
) -> None:
    api = limited_api(make_api, clock, writes=3)
    assert [register(api) for _ in range(3)] == [201, 201, 201]
    r = api.client.post("/v1/sellers", json={"name": "x"})
    assert_rate_limited(r, retry_after=WINDOW - 10)


def test_n_reads_pass_and_read_n_plus_1_gets_429(
    make_api: Callable[..., Api], clock: Clock
) -> None:
    api = limited_api(make_api, clock, writes=3, reads=4)
    key = api.register("buyer")
    assert [api.client.get("/v1/me", headers=key).status_code for _ in range(4)] == [
        200
    ] * 4
    assert_rate_limited(api.client.get("/v1/me", headers=key), WINDOW - 10)
    clock.now += 29.5
    assert_rate_limited(api.client.get("/v1/me", headers=key), retry_after=21)


def test_a_new_window_resets_the_budget(
    make_api: Callable[..., Api], clock: Clock
) -> None:
    api = limited_api(make_api, clock, writes=2)
    assert [register(api) for _ in range(3)] == [201, 201, 429]
    clock.now += WINDOW - 10 - 0.001  # still the same window
    assert register(api) == 429
    clock.now += 0.001  # the next window starts
    assert [register(api) for _ in range(3)] == [201, 201, 429]


def test_ended_windows_are_deleted_when_a_new_one_starts(
    make_api: Callable[..., Api], clock: Clock
) -> None:
    api = limited_api(make_api, clock, writes=2)
    register(api)
    assert count_rows(api, RateLimitWindow) == 1
    clock.now += WINDOW
    register(api)
    assert count_rows(api, RateLimitWindow) == 1


def test_ended_windows_are_purged_at_most_once_per_window_length(
    make_api: Callable[..., Api], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many identities each opening a window cost one purge per window, not one each."""
    api = limited_api(make_api, clock, writes=100, reads=100)
    keys = [api.register("seller", f"s{i}") for i in range(5)]
    purges: list[float] = []
    real = rate_limits.purge_expired

    def counting(session: Session, *, now: float) -> int:
        purges.append(now)
        return real(session, now=now)

    monkeypatch.setattr(rate_limits, "purge_expired", counting)
    clock.now += WINDOW
    for key in keys:
        assert api.client.get("/v1/me", headers=key).status_code == 200
    assert purges == [clock.now]
    assert count_rows(api, RateLimitWindow) == len(keys)  # the old window is gone


def test_keys_addresses_and_route_groups_have_separate_budgets(
    make_api: Callable[..., Api], clock: Clock
) -> None:
    api = limited_api(make_api, clock, writes=2, reads=2)
    a, b = api.register("seller", "a"), api.register("seller", "b")
    assert register(api) == 429  # the address's write budget is used up
    for key in (a, b):
        codes = [api.client.get("/v1/me", headers=key).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
    c = api.client
    writes = [c.post("/v1/sellers", headers=a, json={"name": "y"}) for _ in range(3)]
    assert [r.status_code for r in writes] == [201, 201, 429]  # a's own write budget
    # An invalid key is counted against the address, whose budget is used up.
    r = c.get("/v1/me", headers={"Authorization": "Bearer pm_000000000000_nope"})
    assert r.status_code == 401  # the address's read budget is still unused
    assert c.get("/v1/me").status_code == 401
    assert_rate_limited(c.get("/v1/me"), WINDOW - 10)


def test_registration_has_its_own_per_address_budget(
    make_api: Callable[..., Api], clock: Clock
) -> None:
    """Issue 14 item 7: N registrations per window per address, then 429, while other
    writes (own write budget, generous here) still pass; a new window resets it."""
    api = limited_api(make_api, clock, writes=100, reads=100, registrations=3)
    codes = [register(api, role) for role in ("seller", "buyer", "seller")]
    assert codes == [201, 201, 201]
    assert_rate_limited(api.client.post("/v1/buyers", json={"name": "x"}), WINDOW - 10)
    assert register(api, "seller") == 429
    # Other writes are not blocked: an admin creates a market.
    admin = api.admin()
    created = api.client.post("/v1/markets", headers=admin, json=market_body())
    assert created.status_code == 201
    clock.now += WINDOW
    assert register(api) == 201


def test_registration_budget_is_shared_by_two_apps(
    make_api: Callable[..., Api], clock: Clock
) -> None:
    apis = [limited_api(make_api, clock, writes=100, registrations=4) for _ in range(2)]
    codes = [register(apis[i % 2]) for i in range(6)]
    assert codes == [201] * 4 + [429] * 2


def test_registration_budget_default_is_on_and_documented() -> None:
    from market.config import Settings

    assert 0 < Settings().rate_limit_registrations < Settings().rate_limit_writes


def test_zero_turns_a_limit_off(make_api: Callable[..., Api], clock: Clock) -> None:
    api = limited_api(make_api, clock, writes=0, reads=1)
    assert {register(api) for _ in range(10)} == {201}
    assert count_rows(api, RateLimitWindow) == 0


def _limited_routes(api: Api) -> list[tuple[str, str]]:
    """``(method, path)`` of every documented ``/v1`` operation, ids set to 1."""
    spec = api.client.get("/openapi.json").json()
    return sorted(
        (method.upper(), re.sub(r"\{[^}]+\}", "1", path))
        for path, item in spec["paths"].items()
        if path.startswith("/v1/")
        for method in item
    )


def test_every_v1_route_is_limited_and_the_probes_are_not(
    make_api: Callable[..., Api], clock: Clock
) -> None:
    limit = 2
    api = limited_api(make_api, clock, writes=limit, reads=limit)
    admin = api.admin()
    routes = _limited_routes(api)
    assert len(routes) >= 15
    for method, path in routes:
        clock.now += WINDOW  # a fresh window per route
        codes = [
            api.client.request(method, path, headers=admin, json={}).status_code
            for _ in range(limit + 1)
        ]
        assert all(c < 500 and c != 429 for c in codes[:limit]), (method, path, codes)
        assert codes[limit] == 429, (method, path, codes)
    for path in ("/healthz", "/readyz"):
        assert {api.client.get(path).status_code for _ in range(5)} == {200}


def test_openapi_documents_429_with_retry_after(make_api: Callable[..., Api]) -> None:
    spec = make_api().client.get("/openapi.json").json()
    for path, item in spec["paths"].items():
        for operation in item.values():
            if path.startswith("/v1/"):
                response = operation["responses"]["429"]
                assert response["headers"]["Retry-After"]["required"] is True
            else:
                assert "429" not in operation["responses"], path


def test_two_apps_on_one_database_share_the_limit(
    make_api: Callable[..., Api], clock: Clock
) -> None:
    """Two workers (two apps, two engines) on one database: the limit still holds."""
    apis = [limited_api(make_api, clock, writes=5) for _ in range(2)]
    codes = [register(apis[i % 2]) for i in range(8)]
    assert codes == [201] * 5 + [429] * 3


def test_concurrent_requests_to_two_apps_admit_exactly_the_limit(
    make_api: Callable[..., Api], clock: Clock
) -> None:
    limit, n_threads, per_thread = 7, 4, 4
    apis = [limited_api(make_api, clock, writes=1, reads=limit) for _ in range(2)]
    key = apis[0].register("buyer")
    codes: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(n_threads)

    def reader(i: int) -> None:
        client = apis[i % 2].client
        barrier.wait()
        for _ in range(per_thread):
            code = client.get("/v1/me", headers=key).status_code
            with lock:
                codes.append(code)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200] * limit + [429] * (n_threads * per_thread - limit)


def test_hit_counts_per_identity_group_and_window(engine: Engine) -> None:
    """The domain counter without HTTP: budgets, windows and the disabled rule."""
    rule = Rule(limit=2, window_seconds=10)

    def hit(identity: str, group: str, now: float) -> rate_limits.Decision:
        with Session(engine) as session:
            return rate_limits.hit(
                session, identity=identity, group=group, rule=rule, now=now
            )

    assert [hit("a", "write", 100.0).allowed for _ in range(3)] == [True, True, False]
    assert hit("a", "read", 100.0).hits == 1
    assert hit("b", "write", 109.0).retry_after == 1
    assert hit("a", "write", 110.0).hits == 1
    assert hit("a", "write", 113.2).retry_after == 7
    with Session(engine) as session:
        off = rate_limits.hit(
            session, identity="a", group="write", rule=Rule(0, 10), now=100.0
        )
    assert off.allowed
    assert off.hits == 0


# -- two real processes --------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(base: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise TimeoutError(base)


@pytest.fixture
def two_servers(database_url: str) -> Iterator[list[str]]:
    """Two uvicorn processes serving one database, writes limited to 5 per window."""
    env = {
        **os.environ,
        "PRIVMARKET_DATABASE_URL": database_url,
        "PRIVMARKET_WORKERS": "0",
        "PRIVMARKET_RATE_LIMIT_WRITES": "5",
        # A window so long that the test never straddles two of them.
        "PRIVMARKET_RATE_LIMIT_WINDOW_SECONDS": str(10**9),
        "PRIVMARKET_API_KEY_SECRET": TEST_KEY_SECRET,
    }
    ports = [_free_port(), _free_port()]
    command = [sys.executable, "-m", "uvicorn", "--factory", "api.main:create_app"]
    procs = [
        subprocess.Popen(
            [
                *command,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "error",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for port in ports
    ]
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for base, proc in zip(bases, procs, strict=True):
            _wait_ready(base, proc, timeout=60)
        yield bases
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
            if proc.stderr is not None:
                proc.stderr.close()


@pytest.mark.slow  # about 12 s on two cores, mostly the two processes' imports
def test_two_uvicorn_processes_share_the_limit(two_servers: list[str]) -> None:
    codes = []
    for i in range(8):
        r = httpx.post(f"{two_servers[i % 2]}/v1/sellers", json={"name": "x"})
        codes.append(r.status_code)
        if r.status_code == 429:
            assert int(r.headers["Retry-After"]) >= 1
            assert r.json()["code"] == "rate_limited"
    assert codes == [201] * 5 + [429] * 3


def test_route_groups_follow_the_method() -> None:
    from api.rate_limit import route_group

    assert route_group("GET") is route_group("head") is RouteGroup.READ
    assert {route_group(m) for m in ("POST", "PUT", "PATCH", "DELETE")} == {
        RouteGroup.WRITE
    }
