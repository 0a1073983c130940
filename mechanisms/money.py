"""Money in ledger units: floor payments to the unit, check a budget exactly.

Payments are floats in the numerics; a ledger holds whole minor units. Rounding is
always **down** (spec §4.3: the total paid never exceeds the budget; reliability
T-MD-5: round per seller, then compare the sum in integer minor units).
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, Decimal, InvalidOperation

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]


def to_minor_units(amounts: ArrayLike, unit: float | str) -> NDArray[np.int64]:
    """Floor each amount to whole ledger units: ``n_i = ⌊t_i / unit⌋`` computed exactly
    (``Decimal`` of the binary float over ``Decimal(str(unit))``), so it never rounds up.
    """
    u = _unit(unit)
    p = np.asarray(amounts, dtype=float)
    if p.ndim > 1 or not np.isfinite(p).all() or (p < 0).any():
        raise ValueError("payments must be a finite, non-negative 1-D array")
    return np.array(
        [
            int((Decimal(float(v)) / u).to_integral_value(ROUND_FLOOR))
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
    cap = int((Decimal(float(budget)) / _unit(unit)).to_integral_value(ROUND_FLOOR))
    return total <= cap


def _unit(unit: float | str) -> Decimal:
    try:
        u = Decimal(str(unit))
    except InvalidOperation:
        raise ValueError(f"unit must be a positive number, got {unit!r}") from None
    if not u.is_finite() or u <= 0:
        raise ValueError(f"unit must be a positive number, got {unit!r}")
    return u
