"""The worker's side of a fit between party nodes (seller-custody vertical markets).

When an order of such a market reaches its release, :class:`NodeSessions`:

1. checks that every party's node is registered and has polled recently (otherwise
   the order fails naming the party; nothing is paid or charged);
2. builds the public plan (``market.numerics.vertical_session_plan``: every party's
   key list, widths, the order's settings, the allocated ``ε`` per party) and opens a
   :class:`~market.store.FitSession` with the addresses of all MPyC parties — the
   nodes' registered ``host:port`` and the worker's compute party on a free port;
3. runs the compute party (no data) until the fit ends: the nodes see the session
   when they poll, connect to each other and to the worker, and the worker receives
   only the opened outputs (the released DP model);
4. records the session as ``succeeded``, or ``failed`` with the reason (a node that
   dropped out or never connected, the deadline) and fails the order with it; the
   order's settlement never happens then, so no ledger changes.
"""

import os
import socket
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine

from market import numerics
from market.offers import nodes, vertical
from market.pipeline.compute import OrderFailedError
from market.pipeline.instance import OrderRun
from market.store import Market, db

NO_DP_ENV = "PRIVMARKET_TEST_VERTICAL_NO_DP"
"""Test hook only: ``"1"`` fits without DP noise so a test can compare the model with
the plain fit; the privacy report then says so in its mechanism text."""
TEST_ONLY_MECHANISM = "TEST ONLY: released without DP noise"


def free_port(host: str) -> int:
    """A free TCP port on ``host`` (chosen at run time)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class NodeSessions:
    """:class:`~market.pipeline.compute.SecureSession` backed by the database.

    Parameters
    ----------
    db_engine : Engine
    compute_host : str
        Address the worker's compute party listens on and the nodes connect to.
    connect_timeout : float
        Seconds for every node to connect (they poll for sessions every second).
    timeout : float
        Seconds for the whole fit.
    tls : (cert, key, ca) or None
        The compute party's TLS files: the session then runs over TLS.
    """

    def __init__(
        self, db_engine: Engine, *, compute_host: str = "127.0.0.1",
        connect_timeout: float = 60.0, timeout: float = 900.0,
        tls: tuple[str, str, str] | None = None,
    ) -> None:  # fmt: skip
        self.db_engine = db_engine
        self.tls = tls
        self.compute_host = compute_host
        self.connect_timeout = connect_timeout
        self.timeout = timeout

    def __call__(self, run: OrderRun, learner: Any, party_epsilon: np.ndarray) -> Any:
        inst = run.instance
        assert inst.party_keys is not None
        assert inst.party_sizes is not None
        with db.session_scope(self.db_engine) as session:
            market = session.get(Market, inst.market_id)
            assert market is not None
            names = vertical.party_names(market)
            try:
                found = nodes.connected_nodes(session, market=market, parties=names)
            except ValueError as exc:
                raise OrderFailedError(str(exc)) from exc
            addresses = [f"{n.host}:{n.port}" for n in found]
        no_dp = os.environ.get(NO_DP_ENV) == "1"
        eps = [float(e) for e in party_epsilon]
        try:
            plan = numerics.vertical_session_plan(
                learner, parties=names, keys=inst.party_keys, widths=inst.party_sizes,
                party_epsilon=None if no_dp else eps,
            )  # fmt: skip
        except ValueError as exc:
            raise OrderFailedError(f"{exc}; nothing was charged") from exc
        m = numerics.vertical_session_processes(plan)
        addresses.append(f"{self.compute_host}:{free_port(self.compute_host)}")
        assert len(addresses) == m
        with db.session_scope(self.db_engine, write=True) as session:
            fs = nodes.open_session(
                session, order_id=run.order_id, market_id=inst.market_id, plan=plan,
                addresses=addresses, seconds=self.timeout, tls=self.tls is not None,
            )  # fmt: skip
            sid = int(fs.id)  # type: ignore[arg-type]
        try:
            out = numerics.run_compute_party(
                plan, m - 1, addresses, connect_timeout=self.connect_timeout,
                timeout=self.timeout, tls=self.tls,
            )  # fmt: skip
        except RuntimeError as exc:
            reason = str(exc)
            with db.session_scope(self.db_engine, write=True) as session:
                nodes.close_session(
                    session, sid, status=nodes.SESSION_FAILED, error=reason
                )
            raise OrderFailedError(
                f"the secure fit between the party nodes failed: {reason}; nothing was "
                "paid or charged"
            ) from exc
        with db.session_scope(self.db_engine, write=True) as session:
            nodes.close_session(session, sid, status=nodes.SESSION_SUCCEEDED)
        fitted = numerics.finish_vertical_session(plan, out)
        # the platform never held a block: the guarantee holds with seller custody
        fitted.privacy_report_ = numerics.replace_report(
            fitted.privacy_report_, custody="seller"
        )
        if no_dp:
            # accounting as the DP order would have spent it; the text says what ran
            dp_plan = numerics.vertical_session_plan(
                learner, parties=names, keys=inst.party_keys, widths=inst.party_sizes,
                party_epsilon=eps,
            )  # fmt: skip
            report = numerics.finish_vertical_session(dp_plan, out).privacy_report_
            fitted.privacy_report_ = numerics.replace_report(
                report,
                mechanism=f"{TEST_ONLY_MECHANISM}; {report.mechanism}",
                custody="seller",
            )
        return fitted
