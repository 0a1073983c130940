"""Per-base memo for the payment sweeps: values that depend on the base allocation
and its problem only (not on the seller), computed once per process instead of once
per seller (each an O(m) pass; at ``m = 10⁵`` they cost more than a seller's whole
sweep). Keyed weakly by the base :class:`~mechanisms.result.Allocation`, and by the
identity of the problem object, which is kept alive with the value."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from mechanisms.result import Allocation

T = TypeVar("T")
_MEMO: weakref.WeakKeyDictionary[Allocation, dict[str, tuple[Any, Any]]] = (
    weakref.WeakKeyDictionary()
)


def base_memo(base: Allocation, key: str, owner: Any, fn: Callable[[], T]) -> T:
    """``fn()``, computed once per ``(base, key, owner)`` (``owner``: the object the
    value also depends on, compared by identity; ``None`` for the base alone)."""
    slot = _MEMO.setdefault(base, {})
    hit = slot.get(key)
    if hit is not None and hit[0] is owner:
        return hit[1]  # type: ignore[no-any-return]
    value = fn()
    slot[key] = (owner, value)
    return value
