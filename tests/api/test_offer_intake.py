"""Single-offer intake through the group-commit writer (``api.intake``,
``market.offers.intake``): concurrent offers are all stored and each ``201`` arrives
only after its row is committed; a failing offer (duplicate, bad record) in the same
batch fails alone; a changed key is refused at once; the market cache never hides a
market created later. SQLite and PostgreSQL."""

import threading
from collections.abc import Callable
from typing import Any

import httpx
import sqlalchemy as sa

from market.access import RouteGroup, Rule
from market.store import Account, Offer
from tests.api.conftest import Api, World, count_rows, offer_body
from tests.market.group_commit_helpers import hold


def hold_writer(api: Api) -> threading.Event:
    """Occupy the app's writer until the returned event is set (requests queue up)."""
    return hold(api.client.app.state.writer)  # type: ignore[attr-defined]


def committed_offer(api: Api, offer_id: int) -> bool:
    """Whether a separate connection sees the offer (committed rows only)."""
    engine = api.client.app.state.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        stmt = sa.select(sa.func.count()).where(sa.column("id") == offer_id)
        return bool(conn.execute(stmt.select_from(sa.table("offer"))).scalar_one())


def concurrently(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run the calls in one thread each, started together; return their results."""
    results: list[Any] = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def run(i: int) -> None:
        barrier.wait()
        results[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_n_concurrent_offers_give_n_rows_each_committed_before_its_201(
    world: World,
) -> None:
    api, mid = world.api, world.market_id
    n = 16
    sellers = [api.register("seller", f"s{i}") for i in range(n)]

    def post(i: int) -> Callable[[], tuple[int, Any, bool]]:
        def call() -> tuple[int, Any, bool]:
            r = api.client.post(
                f"/v1/markets/{mid}/offers",
                headers=sellers[i],
                json=offer_body(x=[float(i % 10), 0.0]),
            )
            seen = r.status_code == 201 and committed_offer(api, r.json()["id"])
            return r.status_code, r.json(), seen

        return call

    results = concurrently([post(i) for i in range(n)])
    assert [status for status, _, _ in results] == [201] * n
    assert all(seen for _, _, seen in results)  # stored when the 201 arrived
    assert len({body["id"] for _, body, _ in results}) == n
    assert count_rows(api, Offer) == n
    # the response is the stored offer: the owner reads back the same thing
    for i, (_, body, _) in enumerate(results):
        got = api.client.get(f"/v1/offers/{body['id']}", headers=sellers[i])
        assert got.json() == body


def test_a_failing_offer_in_a_batch_fails_alone(world: World) -> None:
    """Hold the writer so the offers queue into shared batches; a seller who already
    has an active offer gets 409, a bad record 422 naming it; every other offer is
    stored."""
    api, mid = world.api, world.market_id
    first = api.client.post(
        f"/v1/markets/{mid}/offers", headers=world.seller_a, json=offer_body()
    )
    assert first.status_code == 201
    n = 10
    sellers = [api.register("seller", f"s{i}") for i in range(n)]
    bodies = [offer_body(x=[float(i % 10), 0.0]) for i in range(n)]
    bodies[4] = offer_body(x=[50.0, 0.0])  # outside the public bounds [0, 10]
    headers = [*sellers, world.seller_a]  # the last one is a duplicate
    bodies.append(offer_body())

    def post(i: int) -> Callable[[], httpx.Response]:
        return lambda: api.client.post(
            f"/v1/markets/{mid}/offers", headers=headers[i], json=bodies[i]
        )

    release = hold_writer(api)
    timer = threading.Timer(0.5, release.set)  # let the requests queue first
    timer.start()
    responses = concurrently([post(i) for i in range(n + 1)])
    timer.join()
    codes = [r.status_code for r in responses]
    assert codes == [201] * 4 + [422] + [201] * 5 + [409], codes
    assert responses[4].json()["field"] == "records[0].x[0]"
    assert "active offer" in responses[n].json()["detail"]
    assert count_rows(api, Offer) == 1 + n - 1


def test_two_concurrent_offers_of_one_seller_store_exactly_one(world: World) -> None:
    api, mid = world.api, world.market_id

    def post() -> int:
        return api.client.post(
            f"/v1/markets/{mid}/offers", headers=world.seller_b, json=offer_body()
        ).status_code

    release = hold_writer(api)
    timer = threading.Timer(0.3, release.set)
    timer.start()
    codes = concurrently([post, post, post])
    timer.join()
    assert sorted(codes) == [201, 409, 409]
    assert count_rows(api, Offer) == 1


def test_a_changed_key_is_refused_at_once(world: World) -> None:
    """The key is looked up in the writer's transaction on every request (no cache):
    after its stored hash changes (a revocation), the very next offer is 401."""
    api, mid = world.api, world.market_id
    engine = api.client.app.state.engine  # type: ignore[attr-defined]
    me = api.client.get("/v1/me", headers=world.seller_b).json()["id"]
    with engine.begin() as conn:
        conn.execute(
            sa.update(Account.__table__)  # type: ignore[attr-defined]
            .where(sa.column("id") == me)
            .values(key_hash="hmac-sha256$" + "0" * 64)
        )
    r = api.client.post(
        f"/v1/markets/{mid}/offers", headers=world.seller_b, json=offer_body()
    )
    assert r.status_code == 401
    assert count_rows(api, Offer) == 0


def test_unknown_market_is_404_and_a_market_created_later_is_found(
    world: World,
) -> None:
    from tests.api.conftest import market_body

    api = world.api
    missing = world.market_id + 1
    r = api.client.post(
        f"/v1/markets/{missing}/offers", headers=world.seller_a, json=offer_body()
    )
    assert r.status_code == 404
    created = api.client.post("/v1/markets", headers=world.admin, json=market_body())
    assert created.json()["id"] == missing
    r = api.client.post(
        f"/v1/markets/{missing}/offers", headers=world.seller_a, json=offer_body()
    )
    assert r.status_code == 201, r.text


def test_errors_keep_the_session_paths_order(world: World) -> None:
    """401 and 403 come before body validation (422), as with the dependencies."""
    api, mid = world.api, world.market_id
    url = f"/v1/markets/{mid}/offers"
    assert api.client.post(url, json={"records": "no"}).status_code == 401
    bad_key = {"Authorization": "Bearer pm_000000000000_" + "A" * 43}
    assert api.client.post(url, headers=bad_key, json={}).status_code == 401
    assert api.client.post(url, headers=world.buyer_a, json={}).status_code == 403
    r = api.client.post(url, headers=world.seller_a, json={"records": []})
    assert r.status_code == 422
    assert r.json()["field"] == "records"


def test_invalid_offers_are_counted_and_429_wins_over_422(
    make_api: Callable[..., Api],
) -> None:
    """Requests that fail validation (FastAPI's or the market's) still draw on the
    write budget, and once it is used up the answer is 429, not 422."""
    from tests.api.conftest import build_world

    api = make_api(rate_limit_writes=1000)
    world = build_world(api)
    limiter = api.client.app.state.rate_limiter  # type: ignore[attr-defined]
    limiter.rules[RouteGroup.WRITE] = Rule(3, 60)
    limiter.clock = lambda: 1_000_000 * 60 + 10.0  # a fresh window
    url = f"/v1/markets/{world.market_id}/offers"
    bodies = [{"records": []}, offer_body(x=[50.0, 0.0]), {}, offer_body()]
    codes = [
        api.client.post(url, headers=world.seller_a, json=b).status_code for b in bodies
    ]
    assert codes == [422, 422, 422, 429]
    assert count_rows(api, Offer) == 0


def test_cached_cost_check_agrees_with_the_priors_own_check() -> None:
    """The intake's per-market cost check (a scalar shortcut inside the support) takes
    and refuses exactly the costs the prior's full check does, with its message."""
    from market import numerics
    from market.errors import InvalidInputError

    priors = [
        {"family": "uniform", "params": {"low": 0.0, "high": 1.0}},
        {"family": "uniform", "params": {"low": 0.25, "high": 3.0}},
        {"family": "exponential", "params": {"rate": 2.0}},
    ]
    costs = [0.0, 1e-300, 0.25, 0.25 - 1e-14, 0.2, 0.5, 1.0, 1.0 + 1e-13, 1.0 + 1e-9]
    costs += [3.0, 3.0 + 1e-12, 3.5, 1e308, -0.0, -1e-300, -1.0, float("inf")]
    for spec in priors:
        check = numerics.cost_checker(spec)
        for cost in costs:
            try:
                numerics.check_reported_cost(spec, cost)
                expected = None
            except InvalidInputError as exc:
                expected = str(exc)
            try:
                check(cost)
                got = None
            except InvalidInputError as exc:
                got = str(exc)
            assert got == expected, (spec, cost)


def test_intake_row_matches_the_session_paths_row(world: World) -> None:
    """The intake writes offers through the driver (``market.store.db.DriverStatement``):
    the stored row equals, column by column, the one the ORM session path writes for
    the same body (types and timestamps included)."""
    from sqlmodel import Session

    from market import offers
    from market.schemas import OfferCreate
    from market.store import Market

    api, mid = world.api, world.market_id
    body = offer_body(x=[2.5, -0.25], cost=0.4)
    r = api.client.post(f"/v1/markets/{mid}/offers", headers=world.seller_a, json=body)
    assert r.status_code == 201
    engine = api.client.app.state.engine  # type: ignore[attr-defined]
    seller_b = api.client.get("/v1/me", headers=world.seller_b).json()["id"]
    with Session(engine, expire_on_commit=False) as session:
        market = session.get(Market, mid)
        seller = session.get(Account, seller_b)
        assert market is not None
        assert seller is not None
        orm = offers.create_offer(
            session, market=market, seller=seller, body=OfferCreate(**body)
        )
    table = Offer.__table__  # type: ignore[attr-defined]
    with engine.connect() as conn:
        rows = {
            row.id: row._asdict()
            for row in conn.execute(sa.select(table).order_by(table.c.id))
        }
    intake_row, orm_row = rows[r.json()["id"]], rows[orm.id]
    for name in ("id", "seller_id", "created_at", "updated_at"):
        assert type(intake_row.pop(name)) is type(orm_row.pop(name)), name
    assert intake_row == orm_row
    got = api.client.get(f"/v1/offers/{r.json()['id']}", headers=world.seller_a)
    assert got.json()["created_at"] == r.json()["created_at"]
