"""The learner catalogue: what a buyer can order (public: no key needed to browse)."""

from fastapi import APIRouter

from market import orders
from market.schemas import LearnersPublic

router = APIRouter(tags=["learners"])


@router.get("/learners")
def list_learners() -> LearnersPublic:
    """List every orderable learner: tasks, privacy model and parameter schema."""
    return orders.list_learners()
