"""The HTTP base every role's client shares: one ``httpx.Client``, the API key, and
errors raised as :class:`ApiError` with the API's own message."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

import httpx


class ApiError(RuntimeError):
    """An HTTP error answer of the API: ``status`` and the API's ``detail``."""

    def __init__(self, status: int, detail: Any, *, method: str, path: str) -> None:
        self.status = status
        self.detail = detail
        super().__init__(f"{method} {path} -> {status}: {detail}")


class ApiClient:
    """A connection to one privmarket server with one API key.

    Parameters
    ----------
    base_url : str
        The server's address, e.g. ``"http://127.0.0.1:8000"``.
    api_key : str
        The caller's API key (``pm_...``), sent as ``Authorization: Bearer``.
    timeout : float
        Seconds before one HTTP request is abandoned.
    transport : httpx.BaseTransport, optional
        For tests: an in-process transport instead of the network.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
            transport=transport,
        )

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send one request; return the decoded JSON body (``None`` when empty).

        Raises
        ------
        ApiError
            When the server answers with a status of 400 or more.
        """
        r = self._http.request(method, path, **kwargs)
        if r.status_code >= 400:
            try:
                detail: Any = r.json().get("detail", r.text)
            except ValueError:
                detail = r.text
            raise ApiError(r.status_code, detail, method=method, path=path)
        if not r.content:
            return None
        if r.headers.get("content-type", "").startswith("application/json"):
            return r.json()
        return r.content

    def get(self, path: str, **kwargs: Any) -> Any:
        """``GET path``."""
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Any:
        """``POST path``."""
        return self.request("POST", path, **kwargs)

    def patch(self, path: str, **kwargs: Any) -> Any:
        """``PATCH path``."""
        return self.request("PATCH", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Any:
        """``DELETE path``."""
        return self.request("DELETE", path, **kwargs)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
