"""The learner catalogue: what a buyer can order."""

from fastapi import APIRouter

from api.deps import CurrentAccount
from api.errors import ERROR_RESPONSES
from market import orders
from market.schemas import LearnersPublic

router = APIRouter(tags=["learners"], responses={401: ERROR_RESPONSES[401]})


@router.get("/learners")
def list_learners(_account: CurrentAccount) -> LearnersPublic:
    """List every orderable learner: tasks, privacy model and parameter schema."""
    return orders.list_learners()
