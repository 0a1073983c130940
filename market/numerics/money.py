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


def privacy_costs(
    cost: Sequence[float] | FloatArray,
    epsilon: Sequence[float] | FloatArray,
    *,
    u: str,
    u_power: float,
) -> FloatArray:
    """``c·u(ε)`` per seller: the reported cost of the privacy each gave (the IR
    line), for arrays of reported costs and ``ε``."""
    c = np.asarray(cost, dtype=float)
    eps = np.asarray(epsilon, dtype=float)
    return c * (eps if u == "linear" else eps**u_power)  # type: ignore[no-any-return]


def individually_rational_all(
    payment_minor: Sequence[int] | NDArray[np.int64],
    cost: Sequence[float] | FloatArray,
    epsilon: Sequence[float] | FloatArray,
    *,
    u: str,
    u_power: float,
) -> NDArray[np.bool_]:
    """IR per seller in the unit it is paid in, without slack: ``n_i·unit ≥ c_i·u(ε_i)``
    (``n_i·unit`` the exact decimal amount's nearest float, as
    :func:`mechanisms.money.from_units`)."""
    paid = money.from_units(np.asarray(payment_minor, dtype=np.int64), MONEY_UNIT)
    return paid >= privacy_costs(cost, epsilon, u=u, u_power=u_power)  # type: ignore[no-any-return]


def privacy_cost(cost: float, epsilon: float, *, u: str, u_power: float) -> float:
    """``c·u(ε)``: a seller's reported cost of the privacy it gave (the IR line)."""
    return float(privacy_costs([cost], [epsilon], u=u, u_power=u_power)[0])


def individually_rational(
    payment_minor: int, cost: float, epsilon: float, *, u: str, u_power: float
) -> bool:
    """IR in the unit the seller is paid in, without slack: ``n·unit ≥ c·u(ε)``."""
    return bool(
        individually_rational_all(
            [payment_minor], [cost], [epsilon], u=u, u_power=u_power
        )[0]
    )
