"""Self-audits of the mechanism (spec ``mechanism.md`` §6), run by the CLI and the demo.

Both go through the order pipeline's loader and adapter: :func:`audit_market` audits the
rule an order placed now on a market would run (its rows, costs, prior and lifetime caps,
the learner's priced rows); :func:`audit_dataset` audits the rule on a data set given
directly (Wisconsin with its public bounds, or a CSV of scaled rows).
"""

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy.engine import Engine

from market import numerics
from market.pipeline.compute import build_learner, priced_rows
from market.pipeline.instance import load_current
from market.store import session_scope

FloatArray = NDArray[np.float64]


def audit_market(
    db_engine: Engine,
    *,
    market_id: int,
    learner: str,
    params: Mapping[str, Any] | None = None,
    gamma: float | None = None,
    budget: float | None = None,
    sellers: Any = None,
) -> dict[str, Any]:
    """IC regret, IR, budget and monotonicity of the market's rule at ``γ`` (JSON)."""
    with session_scope(db_engine) as session:
        inst = load_current(
            session, market_id=market_id, learner=learner, params=dict(params or {})
        )
    cfg = inst.config(gamma=gamma)
    rows = priced_rows(inst, build_learner(inst))
    report = numerics.audit_incentives(
        rows.X,
        rows.y,
        inst.costs,
        prior=inst.prior,
        config=cfg,
        budget=budget,
        sellers=sellers,
        eps_max=inst.eps_max,
    )
    return dict(report.to_dict())


def eligible_sellers(db_engine: Engine, *, market_id: int, learner: str) -> int:
    """How many sellers an order on the market placed now would price (an admin's
    figure: the buyer's summary does not show it)."""
    with session_scope(db_engine) as session:
        inst = load_current(session, market_id=market_id, learner=learner, params={})
    return len(inst.seller_ids)


def sample_costs(
    prior_spec: Mapping[str, Any], n: int, *, rng: np.random.Generator
) -> FloatArray:
    """``n`` costs drawn from a market's prior (simulated sellers)."""
    prior = numerics.build_prior(prior_spec)
    return np.asarray(prior.sample(n, rng=rng), dtype=float)


def wisconsin_instance(
    m: int, *, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """``m`` Wisconsin records scaled with the published public bounds (``‖x‖ ≤ 1``,
    intercept column included)."""
    X, y = numerics.load_wisconsin()
    idx = rng.permutation(X.shape[0])[: min(m, X.shape[0])]
    return X[idx], y[idx]


def audit_dataset(
    X: FloatArray,
    y: FloatArray,
    costs: FloatArray | None,
    *,
    prior_spec: Mapping[str, Any],
    settings: Mapping[str, Any],
    budget: float | None,
    n_sellers: int,
    workers: int,
    seed: int,
    mono_points: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Audit the logistic rule on ``(X, y, costs)``; costs drawn from the prior if None.

    Raises
    ------
    ValueError
        Bad data or settings (the message names the parameter).
    """
    rng = np.random.default_rng(seed)
    prior = numerics.build_prior(prior_spec)
    if costs is None:
        costs = np.asarray(prior.sample(X.shape[0], rng=rng), dtype=float)
    cfg = numerics.learner_config(settings, learner="hetero_dp_logistic")
    report, mono = numerics.audit_on_pool(
        X,
        y,
        costs,
        prior=prior,
        config=cfg,
        budget=budget,
        n_sellers=n_sellers,
        workers=workers,
        progress=progress,
        random_state=seed,
        mono_points=mono_points,
    )
    result: dict[str, Any] = dict(report.to_dict())
    result["ic_ok"] = bool(report.ic_ok())
    result["monotonicity"] = None if mono is None else mono.to_dict()
    return result
