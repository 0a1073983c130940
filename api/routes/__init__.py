"""All ``/v1`` routers in one ``api_router``."""

from fastapi import APIRouter

from api.routes import (
    accounts,
    custody,
    jobs,
    learners,
    markets,
    nodes,
    offers,
    orders,
    sellers,
)

api_router = APIRouter()
for _module in (
    accounts,
    sellers,
    markets,
    offers,
    nodes,
    orders,
    jobs,
    learners,
    custody,
):
    api_router.include_router(_module.router)

intake_router = APIRouter()
"""Routes that count their own rate limit (``api.intake``): single-offer intake."""
intake_router.include_router(offers.intake_router)
