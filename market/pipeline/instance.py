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

from market import ledgers, markets, numerics, offers
from market.offers import nodes, records, vertical
from market.store import Job, Market, MarketParameters, Order

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
    party_sizes: list[int] | None = None
    """Vertical markets: the parties' block widths (``X`` holds the blocks side by
    side, rows aligned on the record key, NaN where a party lacks the record; ``y``
    NaN where the label holder does); ``None`` for horizontal markets."""
    custody: str = "platform"
    """``seller``: the market holds no records (``X``/``y``/``groups`` are empty) and
    ``n_records`` says how many each included seller keeps (public)."""
    n_records: list[int] | None = None
    party_keys: list[list[str]] | None = None
    """Vertical markets whose parties keep their blocks (custody ``seller``): each
    party's record keys, label holder first. ``X`` then holds no value: 0 where a
    party holds a record, NaN where not (the pattern the mechanism prices), and ``y``
    is NaN; the fit runs between the party nodes."""

    def schema(self) -> dict[str, Any]:
        """The market's public schema a learner may read (features with their public
        bounds, the target's public bounds, the task)."""
        return {"task": self.task, "features": self.features, "target": self.target}

    def config(self, *, gamma: float | None = None) -> Any:
        """The ``MechanismConfig`` of this run (the learner's loss, ``γ`` if given)."""
        return numerics.learner_config(
            self.values, learner=self.learner, gamma=gamma, params=self.params
        )


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


def too_few_sellers(
    limit: FloatArray,
    *,
    n_included: int,
    cap: float,
    k: float,
    lam: float,
    learner: str,
) -> str:
    """Why fewer than two sellers can be included (``limit``: each seller's
    ``min(remaining, max_epsilon)``): too few have budget left at all, or the release
    overhead of :func:`seller_caps` is larger than what they have left."""
    need = numerics.SMALLEST_ORDER
    n_left = int(np.sum(limit > EPS_MAX_FLOOR))
    if n_left < need:
        return (
            f"only {n_left} of the {limit.size} sellers with active offers "
            f"{'has' if n_left == 1 else 'have'} privacy budget left (the others "
            f"reached the market's lifetime cap of {cap:g} or their own max_epsilon); "
            f"an order needs at least {need}"
        )
    bound = numerics.learner_spec(learner).overhead_bound(
        k=k, n_sellers=n_left, lam=lam
    )
    return (
        f"{n_left} sellers have privacy budget left, but {learner}'s release alone "
        f"costs each included seller up to {bound:.2f} of ε with {n_left} sellers "
        f"(2·ln(1 + min(k/m, 1)/(4·lam)) with k = {k:g}, lam = {lam:g}, more with "
        f"fewer), so only {n_included} could be included and an order needs at least "
        f"{need}; the lifetime cap of {cap:g} is too small for these settings (an "
        "admin can raise it or mechanism.lam)"
    )


def validation_set(market: Market) -> tuple[FloatArray | None, FloatArray | None]:
    """The market's public validation records, scaled (None, None without any)."""
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
        Fewer than two active offers, fewer than two sellers that can be included
        (no budget left, or less left than the release overhead:
        :func:`too_few_sellers` says which), or records per seller that the learner
        cannot take.
    """
    active = offers.list_active_offers(session, market_id=market.id)  # type: ignore[arg-type]
    if len(active) < numerics.SMALLEST_ORDER:
        raise ValueError(
            f"an order needs active offers from at least {numerics.SMALLEST_ORDER} "
            f"sellers; the market has {len(active)}"
        )
    remaining_by = ledgers.remaining_epsilon(
        session, market=market, seller_ids=[o.seller_id for o in active]
    )  # net of the ε reserved by seller-custody orders still collecting
    remaining = np.array([remaining_by[o.seller_id] for o in active])
    max_eps = np.array(
        [np.inf if o.max_epsilon is None else o.max_epsilon for o in active]
    )
    cfg = numerics.learner_config(values, learner=learner, params=params)
    included, eps_max = seller_caps(
        remaining, max_eps, k=cfg.k, lam=cfg.lam, learner=learner
    )
    chosen = [o for o, keep in zip(active, included, strict=True) if keep]
    if len(chosen) < numerics.SMALLEST_ORDER:
        raise ValueError(
            too_few_sellers(
                np.minimum(remaining, max_eps),
                n_included=len(chosen),
                cap=market.lifetime_epsilon_cap,
                k=cfg.k,
                lam=cfg.lam,
                learner=learner,
            )
        )
    if vertical.is_vertical(market):
        return _vertical_instance(
            market,
            chosen,
            eps_max=eps_max[included],
            values=values,
            parameters_version=parameters_version,
            learner=learner,
            params=params,
            n_offers=len(active),
        )
    _check_records_per_seller(learner, [o.n_records for o in chosen])
    if market.custody == "seller":
        d = len(market.features)
        X_val, y_val = validation_set(market)
        return OrderInstance(
            **_shared_fields(
                market, chosen, values, parameters_version, learner, params
            ),
            features=list(market.features),
            target=dict(market.target) if market.target else None,
            X=np.zeros((0, d)),
            y=np.zeros(0),
            groups=np.zeros(0, dtype=np.int64),
            eps_max=eps_max[included],
            n_offers=len(active),
            X_val=X_val,
            y_val=y_val,
            custody="seller",
            n_records=[int(o.n_records) for o in chosen],
        )
    X, y = records.from_json(
        [r for o in chosen for r in o.records_scaled], d=len(market.features)
    )
    groups = np.repeat(np.arange(len(chosen)), [o.n_records for o in chosen])
    X_val, y_val = validation_set(market)
    return OrderInstance(
        **_shared_fields(market, chosen, values, parameters_version, learner, params),
        features=list(market.features),
        target=dict(market.target) if market.target else None,
        X=X,
        y=y,
        groups=groups.astype(np.int64),
        eps_max=eps_max[included],
        n_offers=len(active),
        X_val=X_val,
        y_val=y_val,
    )


def _shared_fields(
    market: Market,
    chosen: list[Any],
    values: dict[str, Any],
    parameters_version: int,
    learner: str,
    params: dict[str, Any],
) -> dict[str, Any]:
    """The fields every instance takes from its market, settings version, learner and
    chosen offers (one per priced seller, in pricing order)."""
    return {
        "market_id": market.id,
        "task": market.task,
        "learner": learner,
        "params": params,
        "values": values,
        "parameters_version": parameters_version,
        "prior": numerics.build_prior(market.cost_prior),
        "offer_ids": [o.id for o in chosen],
        "seller_ids": [o.seller_id for o in chosen],
        "costs": np.array([o.reported_cost for o in chosen], dtype=float),
    }


def _vertical_instance(
    market: Market,
    chosen: list[Any],
    *,
    eps_max: FloatArray,
    values: dict[str, Any],
    parameters_version: int,
    learner: str,
    params: dict[str, Any],
    n_offers: int,
) -> OrderInstance:
    """The instance of a vertical market: one seller per party (label holder first),
    blocks aligned on the record key (:mod:`market.offers.vertical`).

    Raises
    ------
    ValueError
        A party has no active offer with privacy budget left.
    """
    by_party = {o.party: (o, cap) for o, cap in zip(chosen, eps_max, strict=True)}
    names = vertical.party_names(market)
    missing = [p for p in names if p not in by_party]
    if missing:
        raise ValueError(
            f"parties {missing} have no active offer with privacy budget left; a "
            "vertical fit needs every party"
        )
    ordered = [by_party[p][0] for p in names]
    party_keys: list[list[str]] | None = None
    if nodes.seller_custody(market):
        # keys only: the values stay with the parties (the pattern is all we price)
        party_keys = [[str(r["key"]) for r in o.records_scaled] for o in ordered]
        widths = [len(vertical.party_features(market, p)) for p in names]
        zeros = [np.zeros((len(k), w)) for k, w in zip(party_keys, widths, strict=True)]
        universe, blocks = numerics.align_blocks(party_keys, zeros)
        y = np.full(len(universe), np.nan)
    else:
        keys, blocks_raw, label_keys, labels = vertical.blocks_of(
            market, {p: by_party[p][0] for p in names}
        )
        universe, blocks = numerics.align_blocks(keys, blocks_raw)
        y = vertical.aligned_labels(universe, label_keys, labels)
    return OrderInstance(
        **_shared_fields(market, ordered, values, parameters_version, learner, params),
        features=vertical.ordered_features(market),
        target=None,
        X=np.hstack(blocks),
        y=y,
        groups=np.arange(len(names), dtype=np.int64),
        eps_max=np.array([by_party[p][1] for p in names], dtype=float),
        n_offers=n_offers,
        X_val=None,
        y_val=None,
        party_sizes=[b.shape[1] for b in blocks],
        party_keys=party_keys,
    )


def load_order(session: Session, order: Order) -> OrderRun:
    """The instance an order runs on (its market's settings version, its learner)."""
    market = session.get(Market, order.market_id)
    params = session.get(MarketParameters, order.parameters_id)
    assert market is not None
    assert params is not None
    checked = numerics.check_order_learner(
        order.learner,
        order.params,
        task=market.task,
        features=market.features,
        partition=market.partition,
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
        learner,
        params,
        task=market.task,
        features=market.features,
        partition=market.partition,
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
        market.task, market.features, market.partition
    )
    return load_current(
        session,
        market_id=market.id,  # type: ignore[arg-type]
        learner=learner,
        params=job.params.get("params") or {},
    )
