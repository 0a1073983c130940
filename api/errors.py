"""Map errors to HTTP: ``{"detail", "code"}`` bodies (plus ``"field"`` on ``422``),
never a 500 for bad input.

- Domain errors (:mod:`market.errors`) by class (:data:`STATUS_BY_ERROR`).
- Request validation: ``422`` with the pydantic details and ``field``, the first bad
  field as a path like ``records[3].x[1]`` (the same form as domain errors).
- A body that cannot be decoded (invalid UTF-8, JSON nested deeper than the parser's
  recursion limit): ``422`` with ``field = "body"``, not Starlette's bare ``400``.
- An integer literal longer than the parser's limit (``sys.get_int_max_str_digits``):
  ``422`` naming the field that holds it (``records[0].x[0]``).
- ``405``: the ``Allow`` header lists every method the path serves.
"""

import json
import sys
from typing import Any

from fastapi import FastAPI, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from api.middleware import BODY_STATE_KEY
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


def field_path(loc: tuple[Any, ...] | list[Any], body: Any = None) -> str:
    """``("body", "records", 3, "x", 1)`` → ``"records[3].x[1]"``: the location's
    first element (``body``/``query``/``path``) dropped unless it is all there is, and
    the tags pydantic inserts for a discriminated union (``cost_prior.uniform.params``)
    left out where ``body`` shows they are not keys of the request."""
    parts = list(loc[1:]) if len(loc) > 1 else list(loc)
    node, out = body, ""
    for part in parts:
        if _is_tag(node, part):
            continue
        node = _child(node, part)
        out += (
            f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
        )
    return out


def _is_tag(node: Any, part: Any) -> bool:
    """``part`` is the tag of the union member ``node`` was read as: not a key of
    ``node`` but one of its values (``{"family": "uniform", ...}`` and ``"uniform"``)."""
    return (
        isinstance(node, dict)
        and isinstance(part, str)
        and part not in node
        and part in [v for v in node.values() if isinstance(v, str)]
    )


def _child(node: Any, part: Any) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return None


async def validation_error_handler(request: Request, exc: Exception) -> Any:
    """422 with field paths; the offending input is not echoed back (no data leaks).

    A route that checks its key and rate limit after validation (single-offer intake,
    ``api.intake``) leaves a ``before_validation_error`` hook on ``request.state``: it
    is run first, and its refusal (``429``, ``401``, ``403``) wins over the ``422``.
    """
    assert isinstance(exc, RequestValidationError)
    hook = getattr(request.state, "before_validation_error", None)
    if hook is not None:
        refusal = await hook()
        if isinstance(refusal, errors.MarketError):
            return await market_error_handler(request, refusal)
        if isinstance(refusal, StarletteHTTPException):
            return await http_error_handler(request, refusal)
    detail = [
        {k: v for k, v in err.items() if k in ("loc", "msg", "type")}
        for err in exc.errors()
    ]
    body: dict[str, Any] = {"detail": jsonable_encoder(detail), "code": "invalid_input"}
    if detail:
        request_body = exc.body if isinstance(exc.body, dict | list) else None
        body["field"] = field_path(detail[0]["loc"], request_body)
    return JSONResponse(body, status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)


UNDECODABLE = (UnicodeDecodeError, RecursionError)
"""Why FastAPI fails to parse a JSON body (other than a ``JSONDecodeError``, which it
already reports as ``422``): bytes that are not UTF-8, nesting beyond the recursion
limit."""


async def http_error_handler(request: Request, exc: Exception) -> Any:
    """Starlette's HTTP errors, with an undecodable body as ``422`` and a complete
    ``Allow`` header on ``405``; everything else as FastAPI renders it."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == status.HTTP_400_BAD_REQUEST and _int_too_long(exc.__cause__):
        raw = getattr(request.state, BODY_STATE_KEY, b"")
        where = huge_integer_path(raw) or "body"
        return JSONResponse(
            {
                "detail": [
                    {
                        "loc": ["body", where],
                        "msg": "integer with more digits than a number can have here "
                        f"(at most {sys.get_int_max_str_digits()})",
                        "type": "json_invalid",
                    }
                ],
                "code": "invalid_input",
                "field": where,
            },
            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        )
    if exc.status_code == status.HTTP_400_BAD_REQUEST and isinstance(
        exc.__cause__, UNDECODABLE
    ):
        why = (
            "JSON nested too deeply"
            if isinstance(exc.__cause__, RecursionError)
            else "not valid UTF-8 JSON"
        )
        return JSONResponse(
            {
                "detail": [{"loc": ["body"], "msg": why, "type": "json_invalid"}],
                "code": "invalid_input",
                "field": "body",
            },
            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        )
    if exc.status_code == status.HTTP_405_METHOD_NOT_ALLOWED:
        exc.headers = {**(exc.headers or {}), "Allow": allowed_methods(request)}
    return await http_exception_handler(request, exc)


def _int_too_long(cause: BaseException | None) -> bool:
    """The JSON parser refused an integer literal longer than Python's conversion
    limit (``sys.get_int_max_str_digits``)."""
    return isinstance(cause, ValueError) and "integer string conversion" in str(cause)


class _LongInt(str):
    """An integer literal the parser kept as text."""


def huge_integer_path(raw: bytes) -> str | None:
    """The field path (``records[0].x[0]``) of the first integer literal in ``raw``
    longer than the conversion limit, or ``None``."""
    limit = sys.get_int_max_str_digits()

    def parse_int(text: str) -> Any:
        digits = len(text.lstrip("-"))
        return _LongInt(text) if limit and digits > limit else int(text)

    try:
        doc = json.loads(raw, parse_int=parse_int)
    except (ValueError, RecursionError):
        return None

    def walk(node: Any, path: str) -> str | None:
        if isinstance(node, _LongInt):
            return path or "body"
        items: Any = (
            node.items()
            if isinstance(node, dict)
            else enumerate(node)
            if isinstance(node, list)
            else ()
        )
        for key, child in items:
            sub = (
                f"{path}[{key}]"
                if isinstance(key, int)
                else (f"{path}.{key}" if path else str(key))
            )
            found = walk(child, sub)
            if found is not None:
                return found
        return None

    return walk(doc, "")


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> str:
    """Every method some route serves at the request's path, comma-separated
    (Starlette names only the first matching route's)."""
    routes = request.app.router.routes
    allowed = [
        method
        for method in METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL
            for route in routes
        )
    ]
    return ", ".join(allowed)


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(errors.MarketError, market_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(StarletteHTTPException, http_error_handler)
