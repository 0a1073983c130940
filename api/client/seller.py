"""A seller's client for seller-custody markets: answer report requests from records
that never leave this process.

The platform of a seller-custody market never receives a record. After an order is
allocated and priced it publishes, round by round, report requests to the sellers it
allocated ε; :meth:`SellerClient.answer_requests` fetches this seller's requests, runs
the named randomizer — :func:`learners.local_protocol.answer_request`, the very
function the library's fit uses — on the seller's own records with noise from OS
entropy, and posts only the randomized report. Every report sent and the ε it spent
are appended to a local JSON-lines log on the seller's machine.

This module imports no server code: only ``httpx`` (through :mod:`api.client._http`),
``numpy`` and the learners' randomizers.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from numpy.typing import ArrayLike

from api.client._http import ApiClient, ApiError
from learners.local_protocol import ReportRequest, answer_request

LOG_ENV = "PRIVMARKET_SELLER_LOG"
"""Environment variable naming the seller's local report log (JSON lines)."""
DEFAULT_LOG = Path.home() / ".privmarket" / "seller-reports.jsonl"
"""Where the report log goes when neither ``log_path`` nor the variable is given."""
POLL_SECONDS = 1.0


class SellerClient(ApiClient):
    """A seller answering report requests of seller-custody markets.

    Parameters
    ----------
    base_url, api_key : str
        The server and this seller's API key.
    log_path : str or Path, optional
        The local JSON-lines log of every report sent (default: ``$PRIVMARKET_SELLER_LOG``
        or ``~/.privmarket/seller-reports.jsonl``). One line per report: time, server,
        market, order, request, round, randomizer, ε spent and the report itself.
    random_state : int or numpy.random.Generator, optional
        Tests only: seed the randomizers. Left unset, every report draws its noise
        from OS entropy, as a seller's privacy requires.
    poll_seconds : float
        How often to look for new requests while waiting.
    timeout, transport
        As :class:`api.client.ApiClient`.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        log_path: str | Path | None = None,
        random_state: int | np.random.Generator | None = None,
        poll_seconds: float = POLL_SECONDS,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, timeout=timeout, transport=transport)
        chosen = log_path or os.environ.get(LOG_ENV) or DEFAULT_LOG
        self.log_path = Path(chosen)
        self.poll_seconds = float(poll_seconds)
        self._seeded = random_state is not None
        self._rng = (
            random_state
            if isinstance(random_state, np.random.Generator)
            else np.random.default_rng(random_state)
        )

    # --- reading -------------------------------------------------------------

    def market(self, market_id: int) -> dict[str, Any]:
        """The market's public settings (features in order, bounds, custody)."""
        return dict(self.get(f"/v1/markets/{int(market_id)}"))

    def open_requests(self, market_id: int | None = None) -> list[dict[str, Any]]:
        """This seller's open report requests (oldest first), optionally of one market."""
        params: dict[str, Any] = {"status": "open"}
        if market_id is not None:
            params["market_id"] = int(market_id)
        body = self.get("/v1/sellers/me/report-requests", params=params)
        return list(body["items"])

    # --- answering -------------------------------------------------------------

    def _generator(self) -> np.random.Generator:
        # OS entropy for every report unless a test seeded the client
        return self._rng if self._seeded else np.random.default_rng()

    def answer(
        self, request: dict[str, Any], X: ArrayLike, y: ArrayLike
    ) -> dict[str, Any]:
        """The randomized report of the records ``X``/``y`` for one request (computed
        here; nothing is sent)."""
        req = ReportRequest.from_json(request["request"])
        return answer_request(req, X, y, rng=self._generator())

    def send(self, request: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
        """Post one report and log it locally; returns the server's receipt."""
        receipt = dict(
            self.post(
                f"/v1/report-requests/{int(request['id'])}/report",
                json={"report": report},
            )
        )
        self._log(request, report)
        return receipt

    def _log(self, request: dict[str, Any], report: dict[str, Any]) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        line = {
            "time": datetime.now(UTC).isoformat(),
            "server": self.base_url,
            "market_id": request["market_id"],
            "order_id": request["order_id"],
            "request_id": request["id"],
            "round": request["round"],
            "randomizer": request["randomizer"],
            "epsilon": request["epsilon"],
            "report": report,
        }
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, sort_keys=True) + "\n")

    def epsilon_logged(self, market_id: int | None = None) -> float:
        """The ε of every report this machine's log records as sent (one market or all)."""
        if not self.log_path.exists():
            return 0.0
        total = 0.0
        for raw in self.log_path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(raw)
            if market_id is None or entry["market_id"] == market_id:
                total += float(entry["epsilon"])
        return total

    def answer_requests(
        self,
        market_id: int,
        X: ArrayLike,
        y: ArrayLike,
        wait: float = 120.0,
        *,
        on_sent: Callable[[dict[str, Any], dict[str, Any]], None] | None = None,
    ) -> int:
        """Answer every report request of this seller in ``market_id``, polling until
        none has been open for ``wait`` seconds; return the number answered.

        ``X``: ``(n_i, d)`` raw feature values in the market's feature order, ``np.nan``
        where missing; ``y``: ``(n_i,)`` raw targets or ±1 labels. The records never
        leave this process: each request is answered here with the randomizer it
        names, and only the report is posted. ``on_sent(request, report)`` is called
        after each report is accepted. A request that closed before its report arrived
        (``409``) is skipped.

        Raises
        ------
        ValueError
            The records do not fit a request (shape, record count, a value the
            randomizer refuses), named.
        ApiError
            The server refused a request other than with ``409``.
        """
        X_arr = np.asarray(X, dtype=float)
        y_arr = np.asarray(y, dtype=float).reshape(-1)
        answered = 0
        seen: set[int] = set()
        idle_since = time.monotonic()
        while True:
            pending = [r for r in self.open_requests(market_id) if r["id"] not in seen]
            for request in pending:
                seen.add(int(request["id"]))
                report = self.answer(request, X_arr, y_arr)
                try:
                    self.send(request, report)
                except ApiError as exc:
                    if exc.status == 409:  # closed or answered meanwhile
                        continue
                    raise
                answered += 1
                if on_sent is not None:
                    on_sent(request, report)
            if pending:
                idle_since = time.monotonic()
                continue
            if time.monotonic() - idle_since >= wait:
                return answered
            left = wait - (time.monotonic() - idle_since)
            time.sleep(
                max(min(self.poll_seconds, left), 0.0)
                if math.isfinite(left)
                else self.poll_seconds
            )
