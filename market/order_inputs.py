"""What an order runs on: the market's settings version, the active offers, and each
seller's privacy cap ``ε_i^max`` derived from the lifetime ledger.

Caps (spec ``api.md`` "Seller views"; ``mechanism.md`` §3): the release gives seller
``i`` the guarantee ``ε_i^total = a_i·η + Δ_i`` with ``Δ_i = 2 ln(1 + a_i/(4λ))`` and
``a_i ≤ k/m``. The allocation bounds ``a_i·η ≤ ε_i^max``, so with

    ε_i^max = min(max_epsilon_i, remaining_i) − Δ_upper(m),
    Δ_upper(m) = 2 ln(1 + min(k/m, 1)/(4λ)),

the debit ``ε_i^total`` never exceeds the remaining lifetime budget (nor the seller's own
``max_epsilon``). Sellers whose ``ε_i^max`` is not positive are left out; ``m`` then
shrinks and ``Δ_upper`` grows, so exclusion is iterated to its fixed point.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlmodel import Session

from market import engine, ledgers, offers, records
from market.models import Market, MarketParameters, Order

FloatArray = NDArray[np.float64]
EPS_MAX_FLOOR = 1e-6
"""Sellers whose ``ε_i^max`` is at most this are left out (nothing useful to buy)."""


@dataclass(frozen=True)
class OrderInputs:
    """Arrays and settings of one order run (only the sellers included)."""

    order_id: int
    market_id: int
    task: str
    budget_minor: int
    gamma: float | None
    values: dict[str, Any]
    parameters_version: int
    prior_spec: dict[str, Any]
    features: list[dict[str, Any]]
    fit_intercept: bool
    offer_ids: list[int]
    seller_ids: list[int]
    X: FloatArray
    y: FloatArray
    costs: FloatArray
    eps_max: FloatArray
    n_offers: int
    X_val: FloatArray | None
    y_val: FloatArray | None


def seller_caps(
    remaining: FloatArray, max_epsilon: FloatArray, *, k: float, lam: float
) -> tuple[NDArray[np.bool_], FloatArray]:
    """Return ``(included, eps_max)`` per the module docstring (fixed point over ``m``).

    ``eps_max`` is 0 for excluded sellers. ``max_epsilon`` uses ``inf`` for "no limit".
    """
    limit = np.minimum(remaining, max_epsilon)
    included = limit > EPS_MAX_FLOOR
    eps_max = np.zeros_like(limit)
    for _ in range(limit.size + 1):
        m = int(included.sum())
        if m == 0:
            break
        eps_max = np.where(included, limit - engine.delta_upper(k=k, m=m, lam=lam), 0.0)
        still = included & (eps_max > EPS_MAX_FLOOR)
        if np.array_equal(still, included):
            break
        included = still
    return included, np.where(included, eps_max, 0.0)


def _validation(market: Market) -> tuple[FloatArray | None, FloatArray | None]:
    if not market.validation:
        return None, None
    return records.scale_records(
        market.validation,
        features=market.features,
        task=market.task,
        target=market.target,
        out_of_bounds="clip",
        field="validation",
    )


def load(session: Session, order: Order) -> OrderInputs:
    """Read everything an order needs in one session (no writes).

    Raises
    ------
    ValueError
        The market has no active offers, or no seller has privacy budget left.
    """
    market = session.get(Market, order.market_id)
    params = session.get(MarketParameters, order.parameters_id)
    assert market is not None
    assert params is not None
    values = dict(params.values)
    active = offers.list_active_offers(session, market_id=market.id)  # type: ignore[arg-type]
    if not active:
        raise ValueError("the market has no active offers")
    remaining_by = ledgers.remaining_epsilon(
        session, market=market, seller_ids=[o.seller_id for o in active]
    )
    remaining = np.array([remaining_by[o.seller_id] for o in active])
    max_eps = np.array(
        [np.inf if o.max_epsilon is None else o.max_epsilon for o in active]
    )
    cfg = engine.mechanism_config(values, task=market.task)
    included, eps_max = seller_caps(remaining, max_eps, k=cfg.k, lam=cfg.lam)
    chosen = [o for o, keep in zip(active, included, strict=True) if keep]
    if not chosen:
        raise ValueError("no seller in this market has privacy budget left")
    if any(o.n_records != 1 for o in chosen):
        raise ValueError("the logistic mechanism prices exactly one record per seller")
    d = len(market.features)
    X, y = records.from_json([r for o in chosen for r in o.records_scaled], d=d)
    X_val, y_val = _validation(market)
    return OrderInputs(
        order_id=order.id,  # type: ignore[arg-type]
        market_id=market.id,  # type: ignore[arg-type]
        task=market.task,
        budget_minor=order.budget_minor,
        gamma=order.gamma,
        values=values,
        parameters_version=params.version,
        prior_spec=dict(market.cost_prior),
        features=list(market.features),
        fit_intercept=bool(order.params.get("fit_intercept", True)),
        offer_ids=[o.id for o in chosen],  # type: ignore[misc]
        seller_ids=[o.seller_id for o in chosen],
        X=X,
        y=y,
        costs=np.array([o.reported_cost for o in chosen], dtype=float),
        eps_max=eps_max[included],
        n_offers=len(active),
        X_val=X_val,
        y_val=y_val,
    )
