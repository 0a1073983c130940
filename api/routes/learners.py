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
            "partition (horizontal or vertical) and, on a market with missable "
            "features, learners that take missing values.",
        ),
    ] = None,
) -> LearnersPublic:
    """List every orderable learner: tasks, privacy model and parameter schema; with
    ``market_id``, only those that market can take (``404`` if there is no such
    market)."""
    market = None
    if market_id is not None:
        market = markets.get_market_or_raise(session, market_id)
    return orders.list_learners(market)
