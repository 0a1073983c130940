"""Party nodes of seller-custody vertical markets: register, poll for fit sessions,
report how a session ended (the owner of a party's active offer only)."""

from typing import Annotated, Any

from fastapi import APIRouter, Query, status

from api.deps import EngineDep, MarketId, SellerAccount, SessionDep
from api.errors import ERROR_RESPONSES
from market import markets
from market.offers import nodes
from market.schemas import (
    NodePublic,
    NodeRegister,
    SessionList,
    SessionPublic,
    SessionReport,
)
from market.store import session_scope

router = APIRouter(
    tags=["party nodes"],
    responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 422)},
)
PartyQuery = Annotated[
    str, Query(min_length=1, max_length=200, description="your party")
]


def _public(node: Any) -> NodePublic:
    return NodePublic(**nodes.node_public(node))


@router.post("/markets/{market_id}/nodes", status_code=status.HTTP_201_CREATED)
def register_node(
    session: SessionDep, seller: SellerAccount, market_id: MarketId, body: NodeRegister
) -> NodePublic:
    """Register your party's node: the address and port its MPyC party listens on
    and the features its block holds (the party's, in the market's order). A new
    registration moves the node."""
    market = markets.get_market_or_raise(session, market_id)
    node = nodes.register_node(
        session, market=market, seller=seller, party=body.party, host=body.host,
        port=body.port, features=list(body.features),
    )  # fmt: skip
    return _public(node)


@router.get("/markets/{market_id}/nodes/{party}")
def get_node(
    session: SessionDep, seller: SellerAccount, market_id: MarketId, party: str
) -> NodePublic:
    """Your party's node: connected or not, its last session and how it ended."""
    market = markets.get_market_or_raise(session, market_id)
    return _public(nodes.own_node(session, market=market, seller=seller, party=party))


@router.get("/markets/{market_id}/sessions")
def poll_sessions(
    engine: EngineDep, seller: SellerAccount, market_id: MarketId, party: PartyQuery
) -> SessionList:
    """The open fit sessions your node takes part in (also its heartbeat): the
    public plan, every MPyC party's address, your index and the deadline."""
    with session_scope(engine, write=True) as session:  # the heartbeat writes
        market = markets.get_market_or_raise(session, market_id)
        items = nodes.poll_sessions(session, market=market, seller=seller, party=party)
    return SessionList(items=[SessionPublic(**i) for i in items])


@router.post("/markets/{market_id}/sessions/{session_id}/report")
def report_session(
    session: SessionDep, seller: SellerAccount, market_id: MarketId, session_id: int,
    body: SessionReport,
) -> NodePublic:  # fmt: skip
    """Report how your node's side of a session ended (shown as its last session)."""
    market = markets.get_market_or_raise(session, market_id)
    node = nodes.report_session(
        session, market=market, seller=seller, party=body.party,
        session_id=session_id, status=body.status, reason=body.reason,
    )  # fmt: skip
    return _public(node)
