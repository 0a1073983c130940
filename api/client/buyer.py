"""The buyer's client: browse markets and learners, place an order, follow it, cancel
it, fetch the released model.

>>> from api.client import BuyerClient
>>> buyer = BuyerClient.register("http://127.0.0.1:8000", name="me")  # doctest: +SKIP
>>> order = buyer.place_order(1, "hetero_dp_logistic", budget=100, gamma=0.01)  # doctest: +SKIP
>>> buyer.wait(order, progress=True)  # doctest: +SKIP
>>> model = buyer.model(order)  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from api.client._http import ApiClient

FINISHED = frozenset({"succeeded", "failed", "cancelled"})
"""Statuses of orders and jobs that do not change any more."""

STAGE_NAMES = {
    "queued": "waiting in the queue",
    "loading": "loading the offers",
    "choosing_gamma": "choosing γ for the budget",
    "allocating": "choosing each seller's ε",
    "payments": "computing the sellers' payments",
    "payments_uncertified": (
        "computing the sellers' payments on an allocation not certified optimal"
    ),
    "collecting": "collecting the sellers' reports",
    "releasing": "training and releasing the model",
    "settling": "settling payments",
    "computing": "computing",
    "done": "done",
    "failed": "failed",
    "cancelled": "cancelled",
}
"""Plain words for the order stages a status shows (unknown stages are shown as sent)."""


def stage_words(stage: str) -> str:
    """The order stage ``stage`` in plain words."""
    return STAGE_NAMES.get(stage, stage.replace("_", " "))


class OrderFailed(RuntimeError):
    """An order the client waited for ended ``failed`` or ``cancelled``."""

    def __init__(self, order: Mapping[str, Any]) -> None:
        self.order = dict(order)
        super().__init__(
            f"order {order['id']} {order['status']}: {order.get('error') or 'no reason'}"
        )


Progress = Callable[[Mapping[str, Any]], None]
"""A progress callback: called with the order's status view each time it changes."""


def _register(
    base_url: str,
    role: str,
    name: str,
    transport: httpx.BaseTransport | None,
) -> str:
    """Create an account of ``role`` (open registration) and return its API key."""
    with httpx.Client(base_url=base_url.rstrip("/"), transport=transport) as http:
        r = http.post(f"/v1/{role}s", json={"name": name})
    if r.status_code >= 400:
        from api.client._http import ApiError

        raise ApiError(r.status_code, r.text, method="POST", path=f"/v1/{role}s")
    return str(r.json()["api_key"])


class _TqdmProgress:
    """A tqdm bar over the order's fraction, its stage in plain words as description."""

    def __init__(self, what: str = "order") -> None:
        from tqdm import tqdm  # type: ignore[import-untyped]

        self.what = what
        self.bar = tqdm(
            total=100, unit="%", bar_format="{desc} {bar} {n:.0f}% {elapsed}"
        )

    def __call__(self, order: Mapping[str, Any]) -> None:
        self.bar.set_description(
            f"{self.what} {order['id']}: {stage_words(order['progress']['stage'])}"
        )
        self.bar.n = round(100 * float(order["progress"]["fraction"]))
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


def poll_until_finished(
    fetch: Callable[[], dict[str, Any]],
    *,
    what: str,
    progress: Progress | bool | None,
    interval: float,
    timeout: float | None,
) -> dict[str, Any]:
    """Call ``fetch`` every ``interval`` seconds until the view it returns has a
    finished status (:data:`FINISHED`); report each change of status, stage or
    fraction to ``progress`` (a callback, or ``True`` for a tqdm bar).

    Raises
    ------
    TimeoutError
        When ``timeout`` seconds passed first (the work keeps running).
    """
    bar = _TqdmProgress(what=what.split()[0]) if progress is True else None
    report = bar if bar is not None else (progress or None)
    deadline = None if timeout is None else time.monotonic() + timeout
    last: tuple[str, str, float] | None = None
    try:
        while True:
            view = fetch()
            now = (view["status"], view["progress"]["stage"], view["progress"]["fraction"])
            if callable(report) and now != last:
                report(view)
            last = now
            if view["status"] in FINISHED:
                return view
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{what} still {view['status']}")
            time.sleep(interval)
    finally:
        if bar is not None:
            bar.close()


class OrdersClient(ApiClient):
    """What buyers and admins share: read, follow and cancel orders, list markets."""

    def markets(self, *, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
        """The markets' public settings (one page)."""
        page = self.get("/v1/markets", params={"limit": limit, "offset": offset})
        return list(page["items"])

    def order(self, order_id: int) -> dict[str, Any]:
        """The order's status, progress and (when finished) summary."""
        return dict(self.get(f"/v1/orders/{order_id}"))

    def orders(
        self, *, market_id: int | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Orders, newest first: a buyer's own, or every order for an admin."""
        params: dict[str, Any] = {"limit": limit}
        if market_id is not None:
            params["market_id"] = market_id
        return list(self.get("/v1/orders", params=params)["items"])

    def wait(
        self,
        order_id: int,
        *,
        progress: Progress | bool | None = None,
        interval: float = 0.5,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Poll the order until it has finished; return its final status view.

        ``progress``: a callback called with the status view whenever the stage or the
        fraction changes, or ``True`` for a tqdm bar.

        Raises
        ------
        OrderFailed
            When the order ended ``failed`` or ``cancelled`` (``.order`` holds its view).
        TimeoutError
            When ``timeout`` seconds passed first (the order keeps running).
        """
        view = poll_until_finished(
            lambda: self.order(order_id),
            what=f"order {order_id}",
            progress=progress,
            interval=interval,
            timeout=timeout,
        )
        if view["status"] != "succeeded":
            raise OrderFailed(view)
        return view

    def cancel(self, order_id: int) -> dict[str, Any]:
        """Cancel the order: a queued one at once, a running one at its next stage
        boundary; nothing is charged. Returns its status view (``409`` if finished)."""
        return dict(self.post(f"/v1/orders/{order_id}:cancel"))


class BuyerClient(OrdersClient):
    """A buyer's connection (an ``ApiClient`` with a buyer's key).

    Every method returns the API's JSON as Python objects and raises
    :class:`~api.client.ApiError` (status and the API's message) on an error answer.
    """

    @classmethod
    def register(
        cls,
        base_url: str,
        *,
        name: str,
        transport: httpx.BaseTransport | None = None,
        **kwargs: Any,
    ) -> BuyerClient:
        """Create a buyer account and return its client; the key is ``client.api_key``
        (shown once by the server: keep it)."""
        key = _register(base_url, "buyer", name, transport)
        client = cls(base_url, key, transport=transport, **kwargs)
        client.api_key = key
        return client

    api_key: str | None = None

    def learners(self, market_id: int | None = None) -> list[dict[str, Any]]:
        """The learner catalogue; with ``market_id``, only learners that market takes."""
        params = {} if market_id is None else {"market_id": market_id}
        return list(self.get("/v1/learners", params=params)["items"])

    def place_order(
        self,
        market_id: int,
        learner: str,
        *,
        budget: float,
        gamma: float | None = None,
        params: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> int:
        """Place an order; return its id. ``gamma=None`` lets the service choose γ for
        the budget (the market needs a validation set). An ``idempotency_key`` makes a
        retried placement return the same order."""
        body = {
            "learner": learner,
            "budget": budget,
            "gamma": gamma,
            "params": dict(params or {}),
        }
        headers = (
            {} if idempotency_key is None else {"Idempotency-Key": idempotency_key}
        )
        placed = self.post(
            f"/v1/markets/{market_id}/orders", json=body, headers=headers
        )
        return int(placed["id"])

    def model(self, order_id: int) -> dict[str, Any]:
        """The released model of a succeeded order (coefficients, metrics, privacy)."""
        return dict(self.get(f"/v1/orders/{order_id}/model"))
