"""Pure-ASGI body-size limit: 413 when a body exceeds ``max_bytes`` (``bulk_max_bytes``
for paths ending in ``:bulk``, the bulk-ingestion routes).

Checked twice: a ``Content-Length`` over the limit is refused before reading, and a
body without one (chunked) is buffered only up to the limit while streaming, so memory
stays below about ``max_bytes`` per request.
"""

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

BULK_SUFFIX = ":bulk"
BODY_STATE_KEY = "raw_body"
"""``request.state`` key of the buffered request body."""


class BodySizeLimitMiddleware:
    """Refuse request bodies larger than ``max_bytes`` with ``413``."""

    def __init__(
        self, app: ASGIApp, *, max_bytes: int, bulk_max_bytes: int | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.bulk_max_bytes = max_bytes if bulk_max_bytes is None else bulk_max_bytes

    def limit(self, path: str) -> int:
        """Return the body limit of a request path."""
        return self.bulk_max_bytes if path.endswith(BULK_SUFFIX) else self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.limit(scope.get("path", ""))
        length = _content_length(scope)
        if length is not None and length > max_bytes:
            await _too_large(send, max_bytes)
            return
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            total += len(body)
            if total > max_bytes:
                await _too_large(send, max_bytes)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        data = b"".join(chunks)
        # Kept for error reporting only (api.errors: which field held an integer too
        # long for the JSON parser); the request itself reads the replayed body.
        scope.setdefault("state", {})[BODY_STATE_KEY] = data
        await self.app(scope, _replay(data, receive), send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _too_large(send: Send, max_bytes: int) -> None:
    payload: dict[str, Any] = {
        "detail": f"request body exceeds the limit of {max_bytes} bytes",
        "code": "payload_too_large",
    }
    data = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
