"""Money in the ledger's minor units (:mod:`mechanisms.money`'s rule: the shortest
decimal form of an amount, floored to the unit)."""

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from market.store.models import MINOR_UNITS
from mechanisms import money

FloatArray = NDArray[np.float64]

MONEY_UNIT = str(1 / MINOR_UNITS)
"""One ledger unit in currency units (``"0.01"``)."""


def to_minor(amount: float) -> int:
    """``amount`` in minor units, rounded down (:mod:`mechanisms.money`'s rule)."""
    return money.to_minor(amount, MONEY_UNIT)


def to_major(amount_minor: int) -> float:
    """Minor units back to currency units (for display)."""
    return amount_minor / MINOR_UNITS


def payments_to_minor(payments: Sequence[float] | FloatArray) -> list[int]:
    """Each payment in minor units, rounded down, so ``Σ`` never exceeds the budget.

    Raises
    ------
    ValueError
        A payment is negative beyond rounding noise, or not finite.
    """
    arr = np.asarray(payments, dtype=float)
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < -1e-9))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"payments[{i}] = {arr[i]!r} is not a valid payment")
    return [int(n) for n in money.to_minor_units(np.maximum(arr, 0.0), MONEY_UNIT)]
