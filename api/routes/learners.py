"""The learner catalogue: what a buyer can order (public: no key needed to browse)."""

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import MAX_ID, SessionDep
from api.errors import ERROR_RESPONSES
from market import markets, orders
from market.schemas import LearnersPublic

router = APIRouter(
    tags=["learners"], responses={k: ERROR_RESPONSES[k] for k in (404, 422)}
)


@router.get("/learners")
def list_learners(
    session: SessionDep,
    market_id: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_ID,
            description="Only the learners this market can take: its task, its "
            "partition (horizontal or vertical), on a market with missable features "
            "learners that take missing values, and on a seller-custody market "
            "learners with a local protocol.",
        ),
    ] = None,
) -> LearnersPublic:
    """List every orderable learner: tasks, privacy model, whether it can run with
    records kept by their sellers (``seller_custody``) and parameter schema. With
    ``market_id``: only the learners that market can take (``404`` if there is no
    such market)."""
    market = None
    if market_id is not None:
        market = markets.get_market_or_raise(session, market_id)
    return orders.list_learners(market)
