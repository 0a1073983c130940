"""The web console under ``/console``: server-rendered page shells (Jinja2) whose small
scripts read the ``/v1`` API with the user's key (kept in ``sessionStorage``)."""

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api.console.router import STATIC_DIR, router

__all__ = ["install", "router"]


def install(app: FastAPI) -> None:
    """Serve the console pages and their static files on ``app``."""
    app.include_router(router)
    app.mount(
        "/console/static", StaticFiles(directory=STATIC_DIR), name="console-static"
    )
