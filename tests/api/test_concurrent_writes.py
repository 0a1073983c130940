"""Concurrent writers through the API (T-DUR-3, small size): no "database is
locked" reaches a client, and every acknowledged write is stored."""

import threading

from market.store import Account, Offer
from tests.api.conftest import World, count_rows, offer_body


def test_parallel_writers_all_succeed(world: World) -> None:
    c, mid = world.api.client, world.market_id
    n_threads, per_thread = 4, 5
    statuses: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(n_threads)

    def writer(i: int) -> None:
        barrier.wait()
        for j in range(per_thread):
            r = c.post("/v1/sellers", json={"name": f"s{i}-{j}"})
            key = r.json().get("api_key", "") if r.status_code == 201 else ""
            o = c.post(
                f"/v1/markets/{mid}/offers",
                headers={"Authorization": f"Bearer {key}"},
                json=offer_body(x=[float(j), 0.0]),
            )
            with lock:
                statuses.extend([r.status_code, o.status_code])

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [201] * (2 * n_threads * per_thread)
    assert count_rows(world.api, Offer) == n_threads * per_thread
    assert count_rows(world.api, Account) == 5 + n_threads * per_thread
