"""The FastAPI application: ``create_app(settings)`` and the module-level ``app``."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline

from api import console, errors
from api.middleware import BodySizeLimitMiddleware
from api.rate_limit import rate_limit
from api.routes import api_router, health, intake_router
from market.access import RateLimiter, check_key_secret_configured
from market.config import Settings, get_settings
from market.offers.intake import MarketCache
from market.runtime.worker import app_hook as start_workers
from market.store import GroupCommitWriter, make_counter_engine, make_engine


def _operation_id(route: APIRoute) -> str:
    tag = route.tags[0] if route.tags else "default"
    return f"{tag}-{route.name}"


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Background execution (the order pipeline): in-process worker threads, started
    # here when settings.workers > 0, are registered as app.state.on_startup hooks.
    if app.state.writer.stopped:  # the app is started again after a shutdown
        app.state.writer = GroupCommitWriter(app.state.engine)
    hooks = getattr(app.state, "on_startup", [])
    stoppers = [hook(app) for hook in hooks]
    try:
        yield
    finally:
        for stop in reversed(stoppers):
            if callable(stop):
                stop()
        app.state.writer.stop()
        app.state.engine.dispose()
        if app.state.rate_limiter.engine is not None:
            app.state.rate_limiter.engine.dispose()


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app: ``/v1`` routers (rate-limited), probes, handlers, size limit, CORS."""
    settings = settings or get_settings()
    check_key_secret_configured(settings)  # no secret for PostgreSQL: refuse to start
    # Swagger UI (/docs) and ReDoc (/redoc) from assets shipped in a package, so the
    # API docs render on a machine without internet access.
    app = FastAPIOffline(
        title="privmarket",
        summary="A data market buying heterogeneous differential privacy.",
        version="0.1.0",
        lifespan=_lifespan,
        generate_unique_id_function=_operation_id,
        docs_url="/docs" if settings.docs_enabled else None,
        redoc_url="/redoc" if settings.docs_enabled else None,
        openapi_url="/openapi.json" if settings.docs_enabled else None,
    )
    app.state.settings = settings
    app.state.engine = make_engine(settings.database_url)
    app.state.writer = GroupCommitWriter(app.state.engine)  # single-offer intake
    app.state.market_cache = MarketCache(app.state.engine)
    app.state.on_startup = [start_workers]  # settings.workers threads (0: none)
    app.state.rate_limiter = RateLimiter.from_settings(
        settings, engine=make_counter_engine(settings.database_url)
    )
    errors.install(app)
    # Single-offer intake first (routes are matched in order: the hottest path should
    # not be tried against the console's and every other route), counted by its own
    # admission job (api.intake).
    app.include_router(
        intake_router, prefix="/v1", responses={429: errors.ERROR_RESPONSES[429]}
    )
    app.include_router(health.router)  # probes are never rate-limited
    console.install(app)  # /console: pages that read /v1 with the user's key

    @app.get("/", include_in_schema=False)
    def home() -> RedirectResponse:
        """The service's front door is the console."""
        return RedirectResponse("/console")

    app.include_router(
        api_router,
        prefix="/v1",
        dependencies=[Depends(rate_limit)],
        responses={429: errors.ERROR_RESPONSES[429]},
    )
    if settings.allowed_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.allowed_origins,
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key"],
        )
    # Outermost, so oversize bodies are refused before any other work.
    app.add_middleware(
        BodySizeLimitMiddleware,
        max_bytes=settings.max_request_bytes,
        bulk_max_bytes=settings.max_bulk_request_bytes,
    )
    return app
