"""The learner catalogue: what a buyer can order (public: no key needed to browse)."""

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import MAX_ID, SessionDep
from api.errors import ERROR_RESPONSES
from market import markets, orders
from market.schemas import LearnersPublic

router = APIRouter(tags=["learners"], responses={k: ERROR_RESPONSES[k] for k in (404, 422)})


@router.get("/learners")
def list_learners(
    session: SessionDep,
    market_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> LearnersPublic:
    """List every orderable learner: tasks, privacy model, whether it can run with
    records kept by their sellers (``seller_custody``) and parameter schema. With
    ``market_id``: only the learners that market can take (its task, partition and
    custody: a seller-custody market takes only local learners)."""
    market = None
    if market_id is not None:
        market = markets.get_market_or_raise(session, market_id)
    return orders.list_learners(market)
