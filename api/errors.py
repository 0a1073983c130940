"""Map domain errors to HTTP: ``{"detail": str, "code": str}`` bodies, never a 500."""

from typing import Any

from fastapi import FastAPI, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from market import errors

STATUS_BY_ERROR: dict[type[errors.MarketError], int] = {
    errors.NotFoundError: status.HTTP_404_NOT_FOUND,
    errors.ConflictError: status.HTTP_409_CONFLICT,
    errors.ForbiddenError: status.HTTP_403_FORBIDDEN,
    errors.InvalidInputError: status.HTTP_422_UNPROCESSABLE_CONTENT,
    errors.PrivacyBudgetExhaustedError: status.HTTP_409_CONFLICT,
    errors.InvalidTransitionError: status.HTTP_409_CONFLICT,
    errors.PayloadTooLargeError: status.HTTP_413_CONTENT_TOO_LARGE,
    errors.RateLimitedError: status.HTTP_429_TOO_MANY_REQUESTS,
}

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or invalid API key"},
    403: {"description": "Wrong role"},
    404: {"description": "Not found (or not yours)"},
    409: {"description": "Conflict with the current state"},
    413: {"description": "Request body too large"},
    422: {"description": "Invalid input; the detail names the field and index"},
    429: {
        "description": "Rate limit exceeded; retry after `Retry-After` seconds",
        "headers": {
            "Retry-After": {
                "description": "Whole seconds until the current window ends",
                "required": True,
                "schema": {"type": "integer", "minimum": 1},
            }
        },
    },
}


def status_for(exc: errors.MarketError) -> int:
    """Return the HTTP status of a domain error (most specific class wins)."""
    for cls in type(exc).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return status.HTTP_400_BAD_REQUEST


async def market_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.MarketError)
    body: dict[str, Any] = {"detail": str(exc), "code": exc.code}
    if isinstance(exc, errors.InvalidInputError):
        body["field"] = exc.field
    headers = None
    if isinstance(exc, errors.RateLimitedError):
        headers = {"Retry-After": str(exc.retry_after)}
    return JSONResponse(body, status_code=status_for(exc), headers=headers)


async def validation_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    """422 with field paths; the offending input is not echoed back (no data leaks)."""
    assert isinstance(exc, RequestValidationError)
    detail = [
        {k: v for k, v in err.items() if k in ("loc", "msg", "type")}
        for err in exc.errors()
    ]
    return JSONResponse(
        {"detail": jsonable_encoder(detail), "code": "invalid_input"},
        status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
    )


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(errors.MarketError, market_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
