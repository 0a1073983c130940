"""All ``/v1`` routers in one ``api_router``."""

from fastapi import APIRouter

from api.routes import accounts

api_router = APIRouter()
api_router.include_router(accounts.router)
