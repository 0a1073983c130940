"""Party nodes of seller-custody vertical markets, and the fit sessions they join.

In a vertical market with ``custody: "seller"`` a party's offer carries its record
keys only; its feature values (and the label holder's labels) stay on the party's
own machine. The party runs a **node** (``api.client.PartyNode``) that registers here
where its MPyC party listens and which features it holds, then polls for **fit
sessions**: when an order runs, the worker opens one session with the public plan
(every party's key list, widths, settings, ε per party) and the addresses of all MPyC
parties; the nodes and the worker's compute party run the secure fit between
themselves, and the worker records how it ended.

Nothing here ever holds a feature value or a label.
"""

import ipaddress
import re
from datetime import timedelta
from typing import Any

from sqlmodel import Session, select

from market.errors import ForbiddenError, InvalidInputError, NotFoundError
from market.offers import vertical
from market.store import (
    Account,
    FitSession,
    Market,
    Offer,
    OfferStatus,
    PartyNode,
    utcnow,
)

NODE_STALE_SECONDS = 30.0
"""A node not heard from for this long counts as disconnected."""
SESSION_OPEN = "open"
SESSION_SUCCEEDED = "succeeded"
SESSION_FAILED = "failed"
_HOST = re.compile(r"^[A-Za-z0-9.\-]{1,253}$")


def seller_custody(market: Market) -> bool:
    """Whether the market keeps records with their sellers (``custody: "seller"``)."""
    return market.custody == "seller"


def _check_node_market(market: Market) -> None:
    if not vertical.is_vertical(market):
        raise InvalidInputError("partition", "party nodes serve vertical markets only")
    if not seller_custody(market):
        raise InvalidInputError(
            "custody",
            "party nodes serve markets with custody 'seller'; on this market the "
            "parties upload their blocks",
        )


def _party_offer(session: Session, market: Market, party: str) -> Offer | None:
    stmt = select(Offer).where(
        Offer.market_id == market.id,
        Offer.party == party,
        Offer.status == OfferStatus.ACTIVE,
    )
    return session.exec(stmt).first()


def _owned_party(session: Session, market: Market, seller: Account, party: str) -> None:
    """``party`` is one of the market's parties and ``seller`` holds its active offer.

    Raises
    ------
    InvalidInputError
        ``party`` unknown.
    ForbiddenError
        The caller holds no active offer for ``party``.
    """
    names = vertical.party_names(market)
    if party not in names:
        raise InvalidInputError("party", f"unknown party {party!r}; parties: {names}")
    offer = _party_offer(session, market, party)
    if offer is None or offer.seller_id != seller.id:
        raise ForbiddenError(
            f"party: your key holds no active offer for party {party!r} in this market"
        )


def check_host(host: str) -> str:
    """``host`` is an IP address or a DNS name (``InvalidInputError`` on ``host``)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if not _HOST.match(host) or host.startswith(("-", ".")):
        raise InvalidInputError("host", "an IP address or a DNS name")
    return host


def register_node(
    session: Session, *, market: Market, seller: Account, party: str, host: str,
    port: int, features: list[str],
) -> PartyNode:  # fmt: skip
    """Register (or move) the node of ``party``: its MPyC party's address and the
    features it declares, which must be the party's features in the market's order.

    Raises
    ------
    InvalidInputError
        Not a seller-custody vertical market (``partition``/``custody``), unknown
        ``party``, bad ``host`` or ``port``, ``features`` not the party's.
    ForbiddenError
        The caller's key holds no active offer for ``party``.
    """
    _check_node_market(market)
    _owned_party(session, market, seller, party)
    host = check_host(host)
    if not 1 <= port <= 65535:
        raise InvalidInputError("port", "a TCP port in 1..65535")
    declared = [str(f["name"]) for f in vertical.party_features(market, party)]
    if list(features) != declared:
        raise InvalidInputError(
            "features",
            f"party {party!r} holds {declared} (in this order); the node declares "
            f"{list(features)}",
        )
    stmt = select(PartyNode).where(
        PartyNode.market_id == market.id, PartyNode.party == party
    )
    node = session.exec(stmt).first()
    if node is None:
        node = PartyNode(
            market_id=market.id,  # type: ignore[arg-type]
            seller_id=seller.id,  # type: ignore[arg-type]
            party=party,
            host=host,
            port=port,
            features=list(features),
        )
    node.seller_id, node.host, node.port = seller.id, host, port  # type: ignore[assignment]
    node.features = list(features)
    node.last_seen_at = utcnow()
    session.add(node)
    session.commit()
    session.refresh(node)
    return node


def _aware(ts: Any) -> Any:
    now = utcnow()
    return ts.replace(tzinfo=now.tzinfo) if ts.tzinfo is None else ts


def node_public(node: PartyNode) -> dict[str, Any]:
    """What the node's owner sees: address, features, connection and last session."""
    seen = _aware(node.last_seen_at)
    connected = (utcnow() - seen).total_seconds() <= NODE_STALE_SECONDS
    return {
        "id": node.id,
        "market_id": node.market_id,
        "party": node.party,
        "host": node.host,
        "port": node.port,
        "features": list(node.features),
        "status": "connected" if connected else "disconnected",
        "last_seen_at": seen,
        "last_session_id": node.last_session_id,
        "last_session_status": node.last_session_status,
    }


def own_node(
    session: Session, *, market: Market, seller: Account, party: str
) -> PartyNode:
    """The caller's node for ``party`` (``NotFoundError`` when none; ``403`` when the
    party is not the caller's)."""
    _check_node_market(market)
    _owned_party(session, market, seller, party)
    stmt = select(PartyNode).where(
        PartyNode.market_id == market.id, PartyNode.party == party
    )
    node = session.exec(stmt).first()
    if node is None:
        raise NotFoundError(f"no node registered for party {party!r}")
    return node


def poll_sessions(
    session: Session, *, market: Market, seller: Account, party: str
) -> list[dict[str, Any]]:
    """The open fit sessions of the market for the caller's node of ``party`` (its
    heartbeat): each with the public plan, every MPyC party's address, this party's
    index and the deadline.

    Raises
    ------
    InvalidInputError, ForbiddenError, NotFoundError
        As :func:`own_node`.
    """
    node = own_node(session, market=market, seller=seller, party=party)
    node.last_seen_at = utcnow()
    session.add(node)
    session.commit()
    stmt = select(FitSession).where(
        FitSession.market_id == market.id, FitSession.status == SESSION_OPEN
    )
    out = []
    for fs in session.exec(stmt).all():
        parties = list(fs.plan.get("parties", []))
        if party not in parties:
            continue
        out.append(session_public(fs, index=parties.index(party)))
    return out


def session_public(fs: FitSession, *, index: int | None = None) -> dict[str, Any]:
    """A session as a node (or the order's buyer, without ``plan``) sees it."""
    body: dict[str, Any] = {
        "id": fs.id,
        "order_id": fs.order_id,
        "status": fs.status,
        "addresses": list(fs.addresses),
        "tls": bool(fs.tls),
        "deadline_at": _aware(fs.deadline_at),
        "error": fs.error,
    }
    if index is not None:
        body["index"] = index
        body["plan"] = fs.plan
    return body


def report_session(
    session: Session, *, market: Market, seller: Account, party: str, session_id: int,
    status: str, reason: str | None = None,
) -> PartyNode:  # fmt: skip
    """A node reports how its side of session ``session_id`` ended (shown to its
    owner as the node's last session; the worker records the session's own outcome).

    Raises
    ------
    InvalidInputError
        ``status`` not ``succeeded``/``failed``; the session does not include
        ``party``.
    NotFoundError
        No such session in this market.
    """
    if status not in (SESSION_SUCCEEDED, SESSION_FAILED):
        raise InvalidInputError("status", "'succeeded' or 'failed'")
    node = own_node(session, market=market, seller=seller, party=party)
    fs = session.get(FitSession, session_id)
    if fs is None or fs.market_id != market.id:
        raise NotFoundError(f"session {session_id} not found")
    if party not in fs.plan.get("parties", []):
        raise InvalidInputError("party", f"session {session_id} has no party {party!r}")
    node.last_session_id = session_id
    node.last_session_status = status
    node.last_seen_at = utcnow()
    session.add(node)
    session.commit()
    session.refresh(node)
    return node


def connected_nodes(
    session: Session, *, market: Market, parties: list[str]
) -> list[PartyNode]:
    """The nodes of ``parties`` in that order, each heard from recently.

    Raises
    ------
    ValueError
        A party has no node, or its node has not polled for
        :data:`NODE_STALE_SECONDS` (the message names the party).
    """
    out = []
    now = utcnow()
    for party in parties:
        stmt = select(PartyNode).where(
            PartyNode.market_id == market.id, PartyNode.party == party
        )
        node = session.exec(stmt).first()
        if node is None:
            raise ValueError(
                f"party {party!r} has no node registered; nothing was charged"
            )
        if (now - _aware(node.last_seen_at)) > timedelta(seconds=NODE_STALE_SECONDS):
            raise ValueError(
                f"party {party!r}'s node has not been seen for more than "
                f"{NODE_STALE_SECONDS:g} s; nothing was charged"
            )
        out.append(node)
    return out


def open_session(
    session: Session, *, order_id: int, market_id: int, plan: dict[str, Any],
    addresses: list[str], seconds: float, tls: bool = False,
) -> FitSession:  # fmt: skip
    """Open the fit session of an order run (the nodes see it when they poll)."""
    fs = FitSession(
        order_id=order_id,
        market_id=market_id,
        plan=plan,
        addresses=addresses,
        tls=tls,
        deadline_at=utcnow() + timedelta(seconds=seconds),
    )
    session.add(fs)
    session.commit()
    session.refresh(fs)
    return fs


def close_session(
    session: Session, session_id: int, *, status: str, error: str | None = None
) -> None:
    """Record how a session ended (``succeeded`` or ``failed`` with ``error``)."""
    fs = session.get(FitSession, session_id)
    if fs is None:
        return
    fs.status, fs.error, fs.finished_at = status, error, utcnow()
    session.add(fs)
    session.commit()
