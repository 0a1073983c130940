"""Money in ledger units: the one rounding rule, used by the numerics and the ledgers.

Payments and budgets are floats in the numerics; a ledger holds whole minor units.
Every amount is first read as its shortest decimal form ``D(t)`` (``repr``), computed
exactly in ``Decimal`` (so a typed ``0.29`` is 29 cents, not 28: the binary ``0.29`` is
``0.28999…``, and ``D`` differs from the binary value by less than half an ulp).

**The rule** (one rule, two directions, by what the amount is):

* an amount **owed** to a seller rounds **up**: seller ``i`` is paid
  ``n_i = max(⌈D(t_i)/unit⌉, ⌈D(k_i)/unit⌉, [ε_i > 0])`` units, where ``t_i`` is the
  Myerson payment, ``k_i = c_i·u(ε_i)`` the seller's reported cost of the privacy it
  gives and ``[ε_i > 0]`` one unit for any seller that gives privacy
  (:func:`payment_units`). So individual rationality holds in the units the seller is
  paid in: ``n_i·unit ≥ c_i·u(ε_i)`` exactly (spec ``mechanism.md`` §5, §6 IR).
  (``t_i ≥ k_i`` holds for the exact Myerson payment; the ``k_i`` term only absorbs
  the quadrature's and floating point's error below it.)
* a **cap** (a budget) rounds **down**: ``N = ⌊D(B)/unit⌋`` (:func:`to_minor`).

A budget check compares integers: ``Σ_i n_i ≤ N`` (:func:`fits_budget`; reliability
T-MD-5: round per seller, then compare the sum). Since payments round up, the rounded
total can exceed the real-number total by up to ``m`` units; the mechanism itself is
not budget-constrained (spec §4.3: ``γ`` is admin-set or chosen for the budget), so
every budget decision — the order's check at a fixed ``γ``, the affordability of each
candidate ``γ`` in :func:`mechanisms.choose_gamma` — is taken on the rounded-up units.
``Σ paid ≤ B`` then holds exactly in whole units.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]


MAX_UNITS = int(np.iinfo(np.int64).max)
"""The most ledger units one amount can hold (a 64-bit count)."""


def _counts(p: FloatArray, u: Decimal, rounding: str) -> list[int]:
    """Each amount in whole units, as exact (unbounded) integers."""
    return [
        int((Decimal(repr(float(v))) / u).to_integral_value(rounding))
        for v in p.ravel()
    ]


def _units(p: FloatArray, u: Decimal, rounding: str) -> NDArray[np.int64]:
    n = _counts(p, u, rounding)
    big = [k for k, v in enumerate(n) if abs(v) > MAX_UNITS]
    if big:
        # e.g. a tiny γ on a wide prior: the critical cost lies far up the support
        raise ValueError(
            f"amount {float(p.ravel()[big[0]]):.3g} at index {big[0]} is beyond what "
            f"the ledger can count in units of {u} ({MAX_UNITS} units)"
        )
    return np.array(n, dtype=np.int64).reshape(p.shape)


def _amounts(amounts: ArrayLike, name: str) -> FloatArray:
    p = np.asarray(amounts, dtype=float)
    if p.ndim > 1 or not np.isfinite(p).all() or (p < 0).any():
        raise ValueError(f"{name} must be a finite, non-negative 1-D array")
    return p


def to_minor_units(amounts: ArrayLike, unit: float | str) -> NDArray[np.int64]:
    """Each amount owed, rounded **up** to whole ledger units:
    ``n_i = ⌈D(t_i) / unit⌉`` with ``D`` the shortest decimal form, computed exactly.
    (:func:`payment_units` adds the IR and one-unit floors of a payment.)
    """
    return _units(_amounts(amounts, "payments"), _unit(unit), ROUND_CEILING)


def payment_units(
    payments: ArrayLike,
    unit: float | str,
    *,
    privacy_costs: ArrayLike | None = None,
    epsilon: ArrayLike | None = None,
) -> NDArray[np.int64]:
    """The units each seller is paid (the module's rule for an amount owed):
    ``n_i = max(⌈D(t_i)/unit⌉, ⌈D(k_i)/unit⌉, [ε_i > 0])``.

    Parameters
    ----------
    payments : array-like of shape (m,)
        Myerson payments ``t_i ≥ 0``.
    unit : float or str
        The ledger unit (e.g. ``"0.01"``).
    privacy_costs : array-like of shape (m,), optional
        ``k_i = c_i·u(ε_i^total)``, the reported cost of the privacy given (IR floor).
    epsilon : array-like of shape (m,), optional
        ``ε_i``; a seller with ``ε_i > 0`` is paid at least one unit.
    """
    n = _payment_counts(payments, unit, privacy_costs, epsilon)
    big = [i for i, v in enumerate(n) if v > MAX_UNITS]
    if big:
        raise ValueError(
            f"amount {float(n[big[0]] * _unit(unit)):.3g} at index {big[0]} is beyond "
            f"what the ledger can count in units of {_unit(unit)} ({MAX_UNITS} units)"
        )
    return np.array(n, dtype=np.int64).reshape(np.shape(payments))


def _payment_counts(
    payments: ArrayLike,
    unit: float | str,
    privacy_costs: ArrayLike | None,
    epsilon: ArrayLike | None,
) -> list[int]:
    """The rule of :func:`payment_units` in exact (unbounded) integers."""
    u = _unit(unit)
    t = _amounts(payments, "payments")
    n = _counts(t, u, ROUND_CEILING)
    if privacy_costs is not None:
        k = _amounts(np.maximum(np.asarray(privacy_costs, dtype=float), 0.0), "costs")
        if k.shape != t.shape:
            raise ValueError(f"privacy_costs must have shape {t.shape}, got {k.shape}")
        n = [max(a, b) for a, b in zip(n, _counts(k, u, ROUND_CEILING), strict=True)]
    if epsilon is not None:
        e = np.asarray(epsilon, dtype=float)
        if e.shape != t.shape:
            raise ValueError(f"epsilon must have shape {t.shape}, got {e.shape}")
        n = [max(a, 1) if v > 0 else a for a, v in zip(n, e.ravel(), strict=True)]
    return n


def from_units(n: ArrayLike, unit: float | str) -> FloatArray:
    """Whole units back to currency amounts: ``float(n_i × unit)`` (exact decimal
    product, then the nearest float, so ``D`` of the result is ``n_i × unit``)."""
    u = _unit(unit)
    k = np.asarray(n, dtype=np.int64)
    return np.array([float(int(v) * u) for v in k.ravel()]).reshape(k.shape)


def round_up(
    payments: ArrayLike,
    unit: float | str,
    *,
    privacy_costs: ArrayLike | None = None,
    epsilon: ArrayLike | None = None,
) -> FloatArray:
    """Payments as paid: :func:`payment_units` × ``unit`` (never below ``t_i``, never
    below ``c_i·u(ε_i)``, at least one unit for ``ε_i > 0``)."""
    n = payment_units(payments, unit, privacy_costs=privacy_costs, epsilon=epsilon)
    return from_units(n, unit)


def total_units(
    payments: ArrayLike,
    unit: float | str,
    *,
    privacy_costs: ArrayLike | None = None,
    epsilon: ArrayLike | None = None,
) -> int:
    """``Σ_i n_i`` of :func:`payment_units`, exact: no ledger range applies to the sum
    or its terms, so an amount beyond :data:`MAX_UNITS` counts as what it is."""
    return sum(_payment_counts(payments, unit, privacy_costs, epsilon))


def beyond_ledger(amounts: ArrayLike, unit: float | str) -> bool:
    """Whether some amount rounds up to more than :data:`MAX_UNITS` units."""
    a = _amounts(np.maximum(np.asarray(amounts, dtype=float), 0.0), "amounts")
    if a.size == 0:
        return False
    return max(_counts(a, _unit(unit), ROUND_CEILING)) > MAX_UNITS


def fits_budget(
    payments: ArrayLike,
    budget: float,
    unit: float | str,
    *,
    privacy_costs: ArrayLike | None = None,
    epsilon: ArrayLike | None = None,
) -> bool:
    """``Σ_i n_i ≤ ⌊D(B)/unit⌋`` in integer units, ``n_i`` the rounded-up payments of
    :func:`payment_units` (spec §6, T-MD-5), summed exactly: an amount beyond what
    the ledger counts (:data:`MAX_UNITS`) does not fit any budget the ledger holds."""
    if not (isinstance(budget, int | float) and np.isfinite(budget) and budget >= 0):
        raise ValueError(f"budget must be a finite number >= 0, got {budget!r}")
    total = total_units(payments, unit, privacy_costs=privacy_costs, epsilon=epsilon)
    return total <= to_minor(budget, unit)


def to_minor(amount: float, unit: float | str) -> int:
    """A cap (a budget) in whole ledger units, rounded **down**: ``⌊D(B)/unit⌋``.

    Raises
    ------
    ValueError
        ``amount`` is not finite or negative, or ``unit`` is not a positive number.
    """
    p = _amounts(np.array([float(amount)]), "amount")
    return int(_units(p, _unit(unit), ROUND_FLOOR)[0])


def _unit(unit: float | str) -> Decimal:
    try:
        u = Decimal(str(unit))
    except InvalidOperation:
        raise ValueError(f"unit must be a positive number, got {unit!r}") from None
    if not u.is_finite() or u <= 0:
        raise ValueError(f"unit must be a positive number, got {unit!r}")
    return u
