"""Domain errors of the market; ``code`` is stable and shown to clients.

HTTP status codes never appear here: ``api/errors.py`` maps classes to statuses.
"""

from typing import ClassVar


class MarketError(Exception):
    """Base of domain errors; ``code`` is stable and shown to clients."""

    code: ClassVar[str] = "market_error"


class NotFoundError(MarketError):
    """The object does not exist or is not visible to the caller."""

    code = "not_found"


class ConflictError(MarketError):
    """The request conflicts with the current state (duplicate, in use)."""

    code = "conflict"


class ForbiddenError(MarketError):
    """The caller's role may not perform this action."""

    code = "forbidden"


class InvalidInputError(MarketError):
    """Input failed a domain check; ``field`` is a path like ``records[3].x[1]``."""

    code = "invalid_input"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class PrivacyBudgetExhaustedError(MarketError):
    """A seller's lifetime privacy cap in a market would be exceeded."""

    code = "privacy_budget_exhausted"


class InvalidTransitionError(MarketError):
    """An illegal state-machine transition (e.g. a model of an unfinished order)."""

    code = "invalid_transition"


class PayloadTooLargeError(MarketError):
    """A request body or a collection exceeds the configured limit."""

    code = "payload_too_large"


class RateLimitedError(MarketError):
    """Too many requests in the current window; retry after ``retry_after`` seconds."""

    code = "rate_limited"

    def __init__(self, retry_after: int, limit: int) -> None:
        super().__init__(
            f"rate limit of {limit} requests per window exceeded;"
            f" retry after {retry_after} s"
        )
        self.retry_after = retry_after
        self.limit = limit
