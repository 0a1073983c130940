"""The admin's client: create and tune markets, offer many sellers' records at once,
run the trade-off curve, read allocations, follow and cancel any order.

>>> from api.client import AdminClient
>>> admin = AdminClient("http://127.0.0.1:8000", "pm_...")  # doctest: +SKIP
>>> market = admin.create_market(
...     name="m", task="classification",
...     features=[{"name": "x0", "low": -1, "high": 1}],
...     cost_prior={"family": "uniform", "params": {"low": 0, "high": 1}},
... )  # doctest: +SKIP
>>> admin.add_offers(market["id"], [
...     {"seller_name": "s0", "records": [{"x": [0.5], "y": 1}], "reported_cost": 0.1},
... ])  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from api.client.buyer import OrdersClient, Progress, poll_until_finished


class JobFailed(RuntimeError):
    """A job the client waited for ended ``failed``."""

    def __init__(self, job: Mapping[str, Any]) -> None:
        self.job = dict(job)
        super().__init__(f"job {job['id']} failed: {job.get('error') or 'no reason'}")


class AdminClient(OrdersClient):
    """An admin's connection (an ``ApiClient`` with an admin's key).

    Every method returns the API's JSON as Python objects and raises
    :class:`~api.client.ApiError` (status and the API's message) on an error answer.
    """

    def create_market(self, **body: Any) -> dict[str, Any]:
        """Create a market from the fields of ``POST /v1/markets`` (``name``, ``task``,
        ``features``, ``cost_prior`` and optional ``mechanism``, ``validation``,
        ``target``, ...); return its public settings (with ``id``)."""
        return dict(self.post("/v1/markets", json=body))

    def market(self, market_id: int) -> dict[str, Any]:
        """A market's public settings."""
        return dict(self.get(f"/v1/markets/{market_id}"))

    def update_market(self, market_id: int, **changes: Any) -> dict[str, Any]:
        """Change ``name``, ``lifetime_epsilon_cap`` or ``mechanism`` fields (a partial
        mapping, e.g. ``mechanism={"gamma": 0.1}``); orders placed afterwards use them."""
        return dict(self.patch(f"/v1/markets/{market_id}", json=changes))

    def add_offers(
        self, market_id: int, offers: Iterable[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Offer many sellers' records at once, all rows or none. Each row is an offer
        (``records``, ``reported_cost``, optional ``max_epsilon``) plus ``seller_id``
        (an existing seller) or ``seller_name`` (a new seller, whose API key is in the
        answer's ``items[i].api_key``, shown once)."""
        rows = [dict(row) for row in offers]
        return dict(
            self.post(f"/v1/markets/{market_id}/offers:bulk", json={"offers": rows})
        )

    def allocations(
        self, order_id: int, *, limit: int = 1000, offset: int = 0
    ) -> dict[str, Any]:
        """One page of an order's per-seller ε and payment (``items``, by seller id,
        ``limit`` of them from ``offset``), with the order's ``total`` sellers,
        ``total_payment``, IR count and ε histogram."""
        return dict(
            self.get(
                f"/v1/orders/{order_id}/allocations",
                params={"limit": limit, "offset": offset},
            )
        )

    def allocation_items(
        self, order_id: int, *, page: int = 10_000
    ) -> list[dict[str, Any]]:
        """Every seller's item of an order's allocation, by seller id (read in pages
        of ``page``)."""
        items: list[dict[str, Any]] = []
        while True:
            view = self.allocations(order_id, limit=page, offset=len(items))
            items += view["items"]
            if not view["items"] or len(items) >= int(view["total"]):
                return items

    def start_tradeoff(
        self,
        market_id: int,
        *,
        gammas: Iterable[float] | None = None,
        learner: str | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> int:
        """Queue the validation-error vs total-payment curve over a γ grid; return the
        job's id (follow it with :meth:`wait_job`)."""
        body: dict[str, Any] = {}
        if gammas is not None:
            body["gammas"] = [float(g) for g in gammas]
        if learner is not None:
            body["learner"] = learner
        if params is not None:
            body["params"] = dict(params)
        return int(self.post(f"/v1/markets/{market_id}/tradeoff", json=body)["job_id"])

    def job(self, job_id: int) -> dict[str, Any]:
        """A job's status, progress and (when done) points and result."""
        return dict(self.get(f"/v1/jobs/{job_id}"))

    def wait_job(
        self,
        job_id: int,
        *,
        progress: Progress | bool | None = None,
        interval: float = 0.5,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Poll a job until it has finished; return its final view (as :meth:`wait`).

        Raises
        ------
        JobFailed
            When the job failed.
        TimeoutError
            When ``timeout`` seconds passed first.
        """
        view = poll_until_finished(
            lambda: self.job(job_id),
            what=f"job {job_id}",
            progress=progress,
            interval=interval,
            timeout=timeout,
        )
        if view["status"] == "failed":
            raise JobFailed(view)
        return view
