"""A data party's node in a seller-custody vertical market.

The node keeps the party's block (its record keys, its features and, at the label
holder, the labels) on the party's machine. It registers where its MPyC party listens
and which features it holds, polls the platform for fit sessions, and takes part in
each as its party, from its own process, over TCP to the other parties (TLS with
certificates): only secret shares of its values ever leave it.

Uses only HTTP (``httpx``) and the library's numerics (``learners.secure_vertical``):
no server code.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from api.client._http import ApiClient, ApiError


def seconds_left(deadline_at: str) -> float:
    """Seconds until an ISO-8601 deadline (UTC when no offset is given)."""
    when = datetime.fromisoformat(deadline_at.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - datetime.now(UTC)).total_seconds()


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class PartyNode(ApiClient):
    """One party's node.

    Parameters
    ----------
    base_url, api_key : str
        The platform and the party's seller key (the key holding the party's offer).
    market_id : int
    party : str
        The party's name in the market.
    keys : sequence of str
        The party's record keys (those of its offer), one per row of ``X_block``.
    X_block : array of shape (len(keys), p)
        The party's feature values, columns in ``features`` order.
    y : array of shape (len(keys),) or None
        The labels (``−1``/``+1``), at the label holder only.
    features : sequence of str or None
        The names of ``X_block``'s columns (declared to the platform, which checks them
        against the market's party); None: ``x0, x1, …`` (refused unless they match).
    host : str
        Address the other parties reach this node's MPyC party at.
    port : int or None
        Its TCP port (None: a free one).
    listen_host : str or None
        Interface to listen on (default ``host``).
    tls : learners.secure_vertical.TLSFiles, (cert, key, ca) paths, or None
        Certificate, key and CA for MPyC's TLS (all parties or none).
    poll_interval : float
        Seconds between polls for sessions.

    Raises
    ------
    ValueError
        ``X_block`` not finite or not one row per key and one column per feature;
        ``keys`` repeated; ``y`` not one per key.
    """

    def __init__(
        self, base_url: str, api_key: str, market_id: int, party: str,
        keys: Sequence[str], X_block: ArrayLike, y: ArrayLike | None = None, *,
        features: Sequence[str] | None = None, host: str = "127.0.0.1",
        port: int | None = None, listen_host: str | None = None, tls: Any = None,
        poll_interval: float = 0.5, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(base_url, api_key, **kwargs)
        X = np.asarray(X_block, dtype=float)
        self.keys = [str(k) for k in keys]
        if X.ndim != 2 or X.shape[0] != len(self.keys) or not np.isfinite(X).all():
            raise ValueError(
                f"X_block must be finite with one row per key ({len(self.keys)}), "
                f"got shape {X.shape}"
            )
        if len(set(self.keys)) != len(self.keys):
            raise ValueError("keys: a record key is repeated")
        self.features = (
            [f"x{j}" for j in range(X.shape[1])] if features is None else list(features)
        )
        if len(self.features) != X.shape[1]:
            raise ValueError(
                f"X_block has {X.shape[1]} columns for {len(self.features)} features"
            )
        self.y = None if y is None else np.asarray(y, dtype=float).reshape(-1)
        if self.y is not None and self.y.size != len(self.keys):
            raise ValueError(f"y must hold one label per key ({len(self.keys)})")
        self.X = X
        self.market_id = int(market_id)
        self.party = party
        self.host = host
        self.port = port if port is not None else _free_port(listen_host or host)
        self.listen_host = listen_host or host
        if isinstance(tls, tuple):
            from learners.secure_vertical import TLSFiles

            tls = TLSFiles(*tls)
        self.tls = tls
        self.poll_interval = poll_interval
        self.handled: dict[int, dict[str, Any]] = {}
        self._scaled: np.ndarray | None = None

    @classmethod
    def from_csv(
        cls, base_url: str, api_key: str, market_id: int, party: str, path: str,
        **kwargs: Any,
    ) -> PartyNode:  # fmt: skip
        """A node from the party's CSV: a ``key`` column, its features (their names
        are declared) and, at the label holder only, ``y``.

        Raises
        ------
        ValueError
            Naming the column (``learners.secure_vertical.read_party_csv``).
        """
        import csv

        from learners.secure_vertical import read_party_csv

        with open(path, newline="", encoding="utf-8") as fh:
            labelled = "y" in (next(csv.reader(fh), None) or [])
        keys, names, X, y = read_party_csv(path, label_holder=labelled)
        return cls(base_url, api_key, market_id, party, keys, X, y, features=names,
                   **kwargs)  # fmt: skip

    def scaled_block(self) -> np.ndarray:
        """The block on the market's public scale, as the platform scales uploaded
        blocks: each feature mapped with its public bounds to ``[−1, 1]`` and divided
        by ``√d`` (``d``: the market's number of features), so a record's whole row
        has ``‖x‖₂ ≤ 1``. Values outside the bounds are refused, or clipped when the
        market says ``out_of_bounds: "clip"``.

        Raises
        ------
        ValueError
            ``features`` not features of the market; a value outside its bounds
            (the column and row named).
        """
        market = self.get(f"/v1/markets/{self.market_id}")
        bounds = {str(f["name"]): (float(f["low"]), float(f["high"]))
                  for f in market["features"]}  # fmt: skip
        missing = [f for f in self.features if f not in bounds]
        if missing:
            raise ValueError(
                f"features: {missing} are not features of market {self.market_id}"
            )
        low = np.array([bounds[f][0] for f in self.features])
        high = np.array([bounds[f][1] for f in self.features])
        X = self.X
        if market.get("out_of_bounds") == "clip":
            X = np.clip(X, low, high)
        else:
            bad = np.argwhere(np.less(X, low) | np.greater(X, high))
            if bad.size:
                i, j = (int(v) for v in bad[0])
                raise ValueError(f"{self.features[j]}: row {i} is outside the public "
                                 f"bounds [{low[j]:g}, {high[j]:g}]")  # fmt: skip
        d = len(market["features"])
        return np.asarray(
            (2.0 * (X - low) / (high - low) - 1.0) / np.sqrt(d), dtype=float
        )

    def register(self) -> dict[str, Any]:
        """Register (or move) this node; the platform's view of it."""
        body = {"party": self.party, "host": self.host, "port": self.port,
                "features": self.features}  # fmt: skip
        out: dict[str, Any] = self.post(
            f"/v1/markets/{self.market_id}/nodes", json=body
        )
        return out

    def status(self) -> dict[str, Any]:
        """This node as the platform sees it (connected, last session)."""
        out: dict[str, Any] = self.get(
            f"/v1/markets/{self.market_id}/nodes/{self.party}"
        )
        return out

    def poll(self) -> list[dict[str, Any]]:
        """The open sessions this node takes part in (also its heartbeat)."""
        out = self.get(f"/v1/markets/{self.market_id}/sessions",
                       params={"party": self.party})  # fmt: skip
        return list(out["items"])

    def run_session(self, session: dict[str, Any]) -> dict[str, Any]:
        """Take part in one session as this party; report how it ended. Returns
        ``{"session": id, "status", "reason"?, "beta"?}``."""
        from learners.secure_vertical import (
            SessionFailed,
            SessionPlan,
            party_inputs,
            run_party,
        )

        sid = int(session["id"])
        result: dict[str, Any] = {"session": sid}
        try:
            if bool(session.get("tls")) != (self.tls is not None):
                raise ValueError(
                    "tls: the session runs "
                    + ("over TLS and this node has no certificate"
                       if session.get("tls") else "without TLS and this node has one")
                )  # fmt: skip
            plan = SessionPlan.from_json(session["plan"])
            if self._scaled is None:
                self._scaled = self.scaled_block()
            inputs = party_inputs(
                plan, int(session["index"]), self.keys, self._scaled, self.y
            )
            deadline = seconds_left(str(session["deadline_at"]))
            out = run_party(
                plan, int(session["index"]), session["addresses"], inputs,
                tls=self.tls, listen_host=self.listen_host, timeout=max(deadline, 1.0),
            )  # fmt: skip
            result.update(status="succeeded", beta=out["beta"])
        except (SessionFailed, ValueError) as exc:
            result.update(status="failed", reason=str(exc))
        with contextlib.suppress(ApiError):  # the worker records the session's outcome
            self.post(f"/v1/markets/{self.market_id}/sessions/{sid}/report",
                      json={"party": self.party, "status": result["status"],
                            "reason": result.get("reason")})  # fmt: skip
        self.handled[sid] = result
        return result

    def serve(
        self, until_idle: float | None = None, *, max_sessions: int | None = None
    ) -> list[dict[str, Any]]:
        """Register, then take part in every new session until ``until_idle`` seconds
        pass without one (None: forever) or ``max_sessions`` ran; the results."""
        self._scaled = self.scaled_block()  # refuse a bad block before registering
        self.register()
        ran: list[dict[str, Any]] = []
        idle_since = time.monotonic()
        while True:
            fresh = [s for s in self.poll() if int(s["id"]) not in self.handled]
            for s in fresh:
                ran.append(self.run_session(s))
                idle_since = time.monotonic()
                if max_sessions is not None and len(ran) >= max_sessions:
                    return ran
            if until_idle is not None and time.monotonic() - idle_since > until_idle:
                return ran
            time.sleep(self.poll_interval)
