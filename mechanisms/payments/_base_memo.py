"""Per-base memo for the payment sweeps: values that depend on the base allocation
and its problem only (not on the seller), computed once per process instead of once
per seller (each an O(m) pass; at ``m = 10⁵`` they cost more than a seller's whole
sweep). Keyed weakly by the base :class:`~mechanisms.result.Allocation`, and by the
identity of the problem object (or of each of a tuple of objects), which is kept alive
with the value."""

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
    value also depends on, compared by identity, or a tuple of such objects compared
    item by item; ``None`` for the base alone). A new owner replaces the value kept."""
    slot = _MEMO.setdefault(base, {})
    hit = slot.get(key)
    if hit is not None and _same(hit[0], owner):
        return hit[1]  # type: ignore[no-any-return]
    value = fn()
    slot[key] = (owner, value)
    return value


def _same(kept: Any, owner: Any) -> bool:
    """Whether ``owner`` is ``kept``: by identity, or item by item for tuples."""
    if kept is owner:
        return True
    if type(owner) is tuple and type(kept) is tuple:
        return len(kept) == len(owner) and all(
            a is b for a, b in zip(kept, owner, strict=True)
        )
    return False
