"""Money in the ledger's minor units (:mod:`mechanisms.money`'s rule: the shortest
decimal form of an amount; an amount owed to a seller rounds up, a cap rounds down)."""

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from market.store.models import MINOR_UNITS
from mechanisms import money

FloatArray = NDArray[np.float64]

MONEY_UNIT = str(1 / MINOR_UNITS)
"""One ledger unit in currency units (``"0.01"``)."""


def to_minor(amount: float) -> int:
    """A cap (a budget, a deposit) in minor units, rounded down
    (:func:`mechanisms.money.to_minor`)."""
    return money.to_minor(amount, MONEY_UNIT)


def to_major(amount_minor: int) -> float:
    """Minor units back to currency units (for display)."""
    return amount_minor / MINOR_UNITS


def payments_to_minor(
    payments: Sequence[float] | FloatArray | Any,
    *,
    privacy_costs: Sequence[float] | FloatArray | None = None,
    epsilon: Sequence[float] | FloatArray | None = None,
) -> list[int]:
    """Each payment in minor units, rounded **up** (:func:`mechanisms.money.payment_units`:
    never below ``t_i`` nor ``c_i·u(ε_i)``, at least one unit when ``ε_i > 0``).

    ``payments`` is an array of ``t_i`` or a payment result (``.payments``, and its
    ``.privacy_costs`` and ``.epsilon`` when the keywords are not given).

    Raises
    ------
    ValueError
        A payment is negative beyond rounding noise, or not finite.
    """
    if hasattr(payments, "payments"):
        if privacy_costs is None:
            privacy_costs = getattr(payments, "privacy_costs", None)
        if epsilon is None:
            epsilon = getattr(payments, "epsilon", None)
        payments = payments.payments
    arr = np.asarray(payments, dtype=float)
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < -1e-9))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"payments[{i}] = {arr[i]!r} is not a valid payment")
    n = money.payment_units(
        np.maximum(arr, 0.0), MONEY_UNIT, privacy_costs=privacy_costs, epsilon=epsilon
    )
    return [int(k) for k in n]


def privacy_cost(cost: float, epsilon: float, *, u: str, u_power: float) -> float:
    """``c·u(ε)``: a seller's reported cost of the privacy it gave (the IR line)."""
    return float(cost) * (
        float(epsilon) if u == "linear" else float(epsilon) ** u_power
    )


def individually_rational(
    payment_minor: int, cost: float, epsilon: float, *, u: str, u_power: float
) -> bool:
    """IR in the unit the seller is paid in, without slack: ``n·unit ≥ c·u(ε)``."""
    paid = float(money.from_units([payment_minor], MONEY_UNIT)[0])
    return paid >= privacy_cost(cost, epsilon, u=u, u_power=u_power)
