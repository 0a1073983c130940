"""The one loader: what an order or a trade-off job runs on.

:func:`load_order` and :func:`load_tradeoff` both call :func:`load_instance`, so the
curve an admin tunes ``γ`` on is computed on exactly the rows, costs and caps an order on
the same market and settings would use.

Caps (spec ``api.md`` "Seller views"; ``mechanism.md`` §3): a release gives seller ``i``
the guarantee ``ε_i^total = a_i·η + Δ_i``, with ``Δ_i`` the learner's declared overhead
(``LearnerSpec.overhead_epsilon``; ``2 ln(1 + a_i/(4λ))`` for objective perturbation,
0 for local learners) and ``a_i ≤ k/m``. The allocation bounds ``a_i·η ≤ ε_i^max``, so with

    ε_i^max = min(max_epsilon_i, remaining_i) − Δ_upper(m),
    Δ_upper(m) = Δ at a_i = min(k/m, 1),

the debit ``ε_i^total`` never exceeds the remaining lifetime budget (nor the seller's own
``max_epsilon``). Sellers whose ``ε_i^max`` is not positive are left out; ``m`` then
shrinks and ``Δ_upper`` grows, so exclusion is iterated to its fixed point.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlmodel import Session

from market import ledgers, markets, offers, records
from market.models import Job, Market, MarketParameters, Order
from market.pipeline import numerics

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
EPS_MAX_FLOOR = 1e-6
"""Sellers whose ``ε_i^max`` is at most this are left out (nothing useful to buy)."""


@dataclass(frozen=True, eq=False)
class OrderInstance:
    """Records, costs, prior and caps of one run (only the sellers included).

    ``X`` holds the scaled records (``‖x‖ ≤ 1``), ``groups`` the seller index (into
    ``seller_ids``) of each record; ``costs`` and ``eps_max`` are per seller.
    """

    market_id: int
    task: str
    learner: str
    params: dict[str, Any]
    values: dict[str, Any]
    parameters_version: int
    prior: Any
    features: list[dict[str, Any]]
    target: dict[str, Any] | None
    offer_ids: list[int]
    seller_ids: list[int]
    X: FloatArray
    y: FloatArray
    groups: IntArray
    costs: FloatArray
    eps_max: FloatArray
    n_offers: int
    X_val: FloatArray | None
    y_val: FloatArray | None

    def schema(self) -> dict[str, Any]:
        """The market's public schema a learner may read (features with their public
        bounds, the target's public bounds, the task)."""
        return {"task": self.task, "features": self.features, "target": self.target}

    def config(self, *, gamma: float | None = None) -> Any:
        """The ``MechanismConfig`` of this run (the learner's loss, ``γ`` if given)."""
        return numerics.learner_config(self.values, learner=self.learner, gamma=gamma)


@dataclass(frozen=True, eq=False)
class OrderRun:
    """An order's instance with what the buyer asked for."""

    order_id: int
    budget_minor: int
    gamma: float | None
    instance: OrderInstance


def seller_caps(
    remaining: FloatArray,
    max_epsilon: FloatArray,
    *,
    k: float,
    lam: float,
    learner: str,
) -> tuple[NDArray[np.bool_], FloatArray]:
    """Return ``(included, eps_max)`` per the module docstring (fixed point over ``m``).

    ``eps_max`` is 0 for excluded sellers. ``max_epsilon`` uses ``inf`` for "no limit".
    """
    spec = numerics.learner_spec(learner)
    limit = np.minimum(remaining, max_epsilon)
    included = limit > EPS_MAX_FLOOR
    eps_max = np.zeros_like(limit)
    for _ in range(limit.size + 1):
        m = int(included.sum())
        if m == 0:
            break
        bound = spec.overhead_bound(k=k, n_sellers=m, lam=lam)
        eps_max = np.where(included, limit - bound, 0.0)
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


def _check_records_per_seller(learner: str, counts: list[int]) -> None:
    reason = numerics.records_per_seller_shortfall(learner, counts)
    if reason is not None:
        raise ValueError(reason)


def load_instance(
    session: Session,
    *,
    market: Market,
    values: dict[str, Any],
    parameters_version: int,
    learner: str,
    params: dict[str, Any],
) -> OrderInstance:
    """Read the active offers, the lifetime ledger's caps and the validation set.

    Raises
    ------
    ValueError
        No active offers, no seller with privacy budget left, or records per seller
        that the learner cannot take (the reason says which).
    """
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
    cfg = numerics.learner_config(values, learner=learner)
    included, eps_max = seller_caps(
        remaining, max_eps, k=cfg.k, lam=cfg.lam, learner=learner
    )
    chosen = [o for o, keep in zip(active, included, strict=True) if keep]
    if not chosen:
        raise ValueError("no seller in this market has privacy budget left")
    _check_records_per_seller(learner, [o.n_records for o in chosen])
    X, y = records.from_json(
        [r for o in chosen for r in o.records_scaled], d=len(market.features)
    )
    groups = np.repeat(np.arange(len(chosen)), [o.n_records for o in chosen])
    X_val, y_val = _validation(market)
    return OrderInstance(
        market_id=market.id,  # type: ignore[arg-type]
        task=market.task,
        learner=learner,
        params=params,
        values=values,
        parameters_version=parameters_version,
        prior=numerics.build_prior(market.cost_prior),
        features=list(market.features),
        target=dict(market.target) if market.target else None,
        offer_ids=[o.id for o in chosen],  # type: ignore[misc]
        seller_ids=[o.seller_id for o in chosen],
        X=X,
        y=y,
        groups=groups.astype(np.int64),
        costs=np.array([o.reported_cost for o in chosen], dtype=float),
        eps_max=eps_max[included],
        n_offers=len(active),
        X_val=X_val,
        y_val=y_val,
    )


def load_order(session: Session, order: Order) -> OrderRun:
    """The instance an order runs on (its market's settings version, its learner)."""
    market = session.get(Market, order.market_id)
    params = session.get(MarketParameters, order.parameters_id)
    assert market is not None
    assert params is not None
    checked = numerics.check_order_learner(
        order.learner, order.params, task=market.task, features=market.features
    )
    inst = load_instance(
        session,
        market=market,
        values=dict(params.values),
        parameters_version=params.version,
        learner=order.learner,
        params=checked,
    )
    return OrderRun(
        order_id=order.id,  # type: ignore[arg-type]
        budget_minor=order.budget_minor,
        gamma=order.gamma,
        instance=inst,
    )


def load_current(
    session: Session, *, market_id: int, learner: str, params: dict[str, Any]
) -> OrderInstance:
    """The instance an order placed now would run on: the market's current settings
    and ledger, ``learner`` with ``params`` (validated against its schema and the
    market's features).

    Raises
    ------
    NotFoundError, InvalidInputError
    ValueError
        As :func:`load_instance`.
    """
    market = markets.get_market_or_raise(session, market_id)
    current = markets.current_parameters(session, market_id)
    checked = numerics.check_order_learner(
        learner, params, task=market.task, features=market.features
    )
    return load_instance(
        session,
        market=market,
        values=dict(current.values),
        parameters_version=current.version,
        learner=learner,
        params=checked,
    )


def load_tradeoff(session: Session, job: Job) -> OrderInstance:
    """The instance of a trade-off job: :func:`load_current` with the job's learner
    (default: the first registered learner of the market's task)."""
    market = markets.get_market_or_raise(session, job.market_id)  # type: ignore[arg-type]
    learner = job.params.get("learner") or numerics.default_learner(
        market.task, market.features
    )
    return load_current(
        session,
        market_id=market.id,  # type: ignore[arg-type]
        learner=learner,
        params=job.params.get("params") or {},
    )
