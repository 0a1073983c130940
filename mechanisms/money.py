"""Money in ledger units: the one rounding rule, used by the numerics and the ledgers.

Payments and budgets are floats in the numerics; a ledger holds whole minor units.
**The rule**: an amount ``t`` becomes ``n = ⌊D(t) / unit⌋`` minor units, where ``D(t)``
is the float's shortest decimal form (``repr``), computed exactly in ``Decimal``.
Rounding is always **down** (spec §4.3: the total paid never exceeds the budget;
reliability T-MD-5: round per seller, then compare the sum in integer minor units).
The shortest decimal form makes a typed budget of ``0.29`` 29 cents, not 28 (the binary
``0.29`` is ``0.28999…``); it differs from the binary value by less than half an ulp, so
no amount is ever rounded up by more than that.
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, Decimal, InvalidOperation

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]


def to_minor_units(amounts: ArrayLike, unit: float | str) -> NDArray[np.int64]:
    """Floor each amount to whole ledger units (the module's rule):
    ``n_i = ⌊D(t_i) / unit⌋`` with ``D`` the shortest decimal form, computed exactly.
    """
    u = _unit(unit)
    p = np.asarray(amounts, dtype=float)
    if p.ndim > 1 or not np.isfinite(p).all() or (p < 0).any():
        raise ValueError("payments must be a finite, non-negative 1-D array")
    return np.array(
        [
            int((Decimal(repr(float(v))) / u).to_integral_value(ROUND_FLOOR))
            for v in p.ravel()
        ],
        dtype=np.int64,
    ).reshape(p.shape)


def round_down(payments: ArrayLike, unit: float | str) -> FloatArray:
    """Payments floored to the ledger ``unit`` (e.g. ``0.01``), never rounded up.

    The exact amounts are ``to_minor_units(payments, unit) × unit``; budget checks
    should compare integer minor units (:func:`fits_budget`).
    """
    n = to_minor_units(payments, unit)
    return np.array([float(int(k) * _unit(unit)) for k in n.ravel()]).reshape(n.shape)


def fits_budget(payments: ArrayLike, budget: float, unit: float | str) -> bool:
    """``Σ_i ⌊t_i/unit⌋ ≤ ⌊B/unit⌋`` in integer minor units (spec §6, T-MD-5)."""
    if not (isinstance(budget, int | float) and np.isfinite(budget) and budget >= 0):
        raise ValueError(f"budget must be a finite number >= 0, got {budget!r}")
    total = int(to_minor_units(payments, unit).sum())
    return total <= to_minor(budget, unit)


def to_minor(amount: float, unit: float | str) -> int:
    """One amount (e.g. a budget) in whole ledger units, by the module's rule.

    Raises
    ------
    ValueError
        ``amount`` is not finite or negative, or ``unit`` is not a positive number.
    """
    return int(to_minor_units(np.array([float(amount)]), unit)[0])


def _unit(unit: float | str) -> Decimal:
    try:
        u = Decimal(str(unit))
    except InvalidOperation:
        raise ValueError(f"unit must be a positive number, got {unit!r}") from None
    if not u.is_finite() or u <= 0:
        raise ValueError(f"unit must be a positive number, got {unit!r}")
    return u
