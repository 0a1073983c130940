"""The numerics of one run, on a loaded instance: no database access.

An order: the learner from the registry says which rows the mechanism prices
(``design_matrix``) → allocate (or choose ``γ`` for the budget) → Myerson payments →
the learner fits with the allocated per-record ``ε`` → :class:`~market.pipeline.results.Outcome`.
A trade-off job: the same priced rows, caps and prior → the curve over a ``γ`` grid.

Money: payments are rounded down per seller to minor units (``numerics.payments_to_minor``,
the one rule); with a fixed ``γ`` an order whose payments exceed its budget **fails** with
the reason (``γ`` is never changed behind the buyer's back). The paper's ``Ψ·ε`` rule is
never paid.
"""

import itertools
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from market.pipeline import numerics
from market.pipeline.instance import OrderInstance, OrderRun
from market.pipeline.results import Outcome, eps_stats

EPS_RTOL = 1e-9


class OrderFailedError(Exception):
    """The order cannot succeed; the message is shown to the buyer."""


class Progress(Protocol):
    """Where a run reports its stage and its fraction within the stage."""

    def stage(self, name: str) -> None:
        """Enter stage ``name``."""

    def fraction(self, done: int, total: int) -> None:
        """``done`` of ``total`` units of the current stage are finished."""


def build_learner(inst: OrderInstance) -> Any:
    """The instance's learner from the registry, bound to its mechanism settings."""
    return numerics.build_learner(
        inst.learner,
        inst.params,
        config=inst.config(),
        task=inst.task,
        schema=inst.schema(),
    )


def tuning_release(inst: OrderInstance) -> Any:
    """The ordered learner as the release the tuning code scores (``choose_gamma``,
    trade-off curves): validation error of the model the buyer would get."""
    return numerics.learner_release(
        inst.learner,
        inst.params,
        config=inst.config(),
        task=inst.task,
        schema=inst.schema(),
        X=inst.X,
        y=inst.y,
        groups=inst.groups,
    )


def priced_rows(inst: OrderInstance, learner: Any) -> tuple[Any, Any]:
    """The rows the mechanism prices (training and validation), by the learner's rule.

    Raises
    ------
    OrderFailedError
        The learner's privacy unit is a seller with several records: the allocation
        prices one row per seller.
    """
    if inst.groups.size != len(inst.seller_ids):
        raise OrderFailedError(
            f"{inst.learner} takes several records per seller; the allocation prices "
            "one row per seller"
        )
    X = learner.design_matrix(inst.X)
    X_val = None if inst.X_val is None else learner.design_matrix(inst.X_val)
    return X, X_val


def _allocate_and_pay(
    run: OrderRun,
    X: Any,
    X_val: Any,
    rep: Progress,
    checkpoint: Callable[[], None] | None = None,
    y: Any = None,
) -> tuple[Any, Any, float, str]:
    inst = run.instance
    y = inst.y if y is None else y
    cfg = inst.config(gamma=run.gamma)
    common = {"prior": inst.prior, "eps_max": inst.eps_max}
    if run.gamma is None:
        if X_val is None:
            raise OrderFailedError(
                "choosing gamma for the budget needs the market's public validation "
                "set; give gamma in the order or ask an admin to add one"
            )
        rep.stage("choosing_gamma")
        choice = numerics.choose_gamma(
            X,
            y,
            inst.costs,
            config=cfg,
            budget_minor=run.budget_minor,
            X_val=inst.X_val,
            y_val=inst.y_val,
            progress=rep.fraction,
            release=tuning_release(inst),
            **common,
        )
        if str(getattr(choice, "status", "ok")) != "ok":
            raise OrderFailedError(
                "no gamma on the search range fits the budget: the cheapest total "
                f"payment found was {float(choice.total_payment):.2f}"
            )
        return choice.allocation, choice.payments, float(choice.gamma), "chosen"
    rep.stage("allocating")
    alloc = numerics.allocate(X, y, inst.costs, config=cfg, **common)
    if not alloc.success:
        raise OrderFailedError(f"the allocation did not solve ({alloc.status})")
    rep.stage("payments")
    pay = numerics.myerson_payments(
        X,
        y,
        inst.costs,
        config=cfg,
        allocation=alloc,
        progress=rep.fraction,
        checkpoint=checkpoint,
        **common,
    )
    return alloc, pay, float(cfg.gamma), "order"


def _check_epsilon(alloc: Any, pay: Any, released: np.ndarray) -> None:
    """``ε`` allocated = ``ε`` paid for = ``ε`` the learner spent (T-MD-6)."""
    paid = getattr(pay, "epsilon", None)
    for name, eps in (("allocation", alloc.epsilon_total), ("payments", paid)):
        if eps is not None and not np.allclose(
            eps, released, rtol=EPS_RTOL, atol=EPS_RTOL
        ):
            raise OrderFailedError(f"internal inconsistency: {name} ε ≠ released ε")


def _seller_totals(inst: OrderInstance, per_record: Sequence[float]) -> np.ndarray:
    """Each seller's ε: the largest over its records (one record per seller here)."""
    out = np.zeros(len(inst.seller_ids))
    np.maximum.at(out, inst.groups, np.asarray(per_record, dtype=float))
    return out


def _validation_error(learner: Any, X_val: Any, y_val: Any, task: str) -> float | None:
    if X_val is None or y_val is None:
        return None
    pred = np.asarray(learner.predict(X_val), dtype=float)
    if task == "classification":
        return float(np.mean(pred != y_val))
    return float(np.mean((pred - y_val) ** 2))


def _payments_within_budget(run: OrderRun, pay: Any, gamma: float) -> list[int]:
    minor = numerics.payments_to_minor(getattr(pay, "payments", pay))
    if sum(minor) > run.budget_minor:
        raise OrderFailedError(
            f"the payments at gamma={gamma:g} total "
            f"{numerics.to_major(sum(minor)):.2f}, over the budget "
            f"{numerics.to_major(run.budget_minor):.2f}; place the order with "
            "gamma=null to choose gamma for the budget"
        )
    return minor


def compute_vertical_order(
    run: OrderRun, rep: Progress, *, checkpoint: Callable[[], None] | None = None
) -> Outcome:
    """A vertical market's order (README "Vertical markets"): each party is one seller.

    The mechanism prices one public row per party (``learner.design_matrix`` of the
    blocks), allocates each party an ``ε_k`` and pays its Myerson threshold payment;
    the learner fits with ``ε_k`` applying to all of party ``k``'s records (record
    ``i`` at ``min_k ε_k`` over its holders); each party's ledger is charged the
    largest ε any of its records spent (never more than ``ε_k``).
    """
    inst = run.instance
    assert inst.party_sizes is not None
    if run.gamma is None:
        raise OrderFailedError(
            "vertical markets have no public validation set to choose gamma on; "
            "give gamma in the order"
        )
    learner = build_learner(inst)
    edges = np.cumsum([0, *inst.party_sizes])
    blocks = [inst.X[:, a:b] for a, b in itertools.pairwise(edges)]
    X = learner.design_matrix(blocks)
    alloc, pay, gamma, source = _allocate_and_pay(
        run, X, None, rep, checkpoint, y=np.ones(len(blocks))
    )
    minor = _payments_within_budget(run, pay, gamma)
    eps = np.asarray(alloc.epsilon, dtype=float)
    if np.any(eps <= 0):
        raise OrderFailedError(
            "the mechanism allocated no privacy to some party; a vertical fit needs "
            "every party (raise the budget or gamma)"
        )
    rep.stage("releasing")
    numerics.release_vertical(learner, blocks, inst.y, party_epsilon=eps)
    report = learner.privacy_report_
    held = ~np.isnan(inst.X[:, edges[:-1]])
    per_record = np.asarray(report.sample_epsilon_total, dtype=float)
    spent = np.array([per_record[held[:, k]].max() for k in range(len(blocks))])
    allocated = np.asarray(alloc.epsilon_total, dtype=float)
    if np.any(spent > allocated * (1 + EPS_RTOL) + EPS_RTOL):
        raise OrderFailedError(
            "internal inconsistency: a party spent more ε than allocated"
        )
    return Outcome(
        gamma=gamma,
        gamma_source=source,
        eta=float(alloc.eta),
        epsilon_total=spent,
        payments_minor=minor,
        model=learner.export_model(),
        guarantee=str(report.guarantee),
        stages=report.stage_summary(),
        validation_error=None,
        timings={},
        certificates=numerics.payment_certificates(pay),
    )


def compute_order(
    run: OrderRun, rep: Progress, *, checkpoint: Callable[[], None] | None = None
) -> Outcome:
    """Run the numerics for one order (no database writes except progress).

    ``checkpoint`` is called before every payment re-solve; what it raises stops the
    run (``market.pipeline.deadline``: the order's time budget, a worker's shutdown).
    """
    inst = run.instance
    if inst.party_sizes is not None:
        return compute_vertical_order(run, rep, checkpoint=checkpoint)
    learner = build_learner(inst)
    X, X_val = priced_rows(inst, learner)
    alloc, pay, gamma, source = _allocate_and_pay(run, X, X_val, rep, checkpoint)
    minor = _payments_within_budget(run, pay, gamma)
    rep.stage("releasing")
    eps = np.asarray(alloc.epsilon, dtype=float)[inst.groups]
    numerics.release(learner, inst.X, inst.y, sample_epsilon=eps, groups=inst.groups)
    report = learner.privacy_report_
    spent = _seller_totals(inst, report.sample_epsilon_total)
    _check_epsilon(alloc, pay, spent)
    return Outcome(
        gamma=gamma,
        gamma_source=source,
        eta=float(alloc.eta),
        epsilon_total=spent,
        payments_minor=minor,
        model=learner.export_model(),
        guarantee=str(report.guarantee),
        stages=report.stage_summary(),
        validation_error=_validation_error(learner, inst.X_val, inst.y_val, inst.task),
        timings={},
        certificates=numerics.payment_certificates(pay),
    )


def compute_tradeoff(
    inst: OrderInstance,
    *,
    gammas: Sequence[float],
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """``{"points": [{"gamma", "validation_error", "total_payment", ...}], "learner"}``
    on the same priced rows, costs and caps as an order on this instance.

    Raises
    ------
    OrderFailedError
        The market has no public validation set.
    """
    learner = build_learner(inst)
    X, X_val = priced_rows(inst, learner)
    if X_val is None:
        raise OrderFailedError("the market has no public validation set")
    points = numerics.tradeoff(
        X,
        inst.y,
        inst.costs,
        prior=inst.prior,
        config=inst.config(),
        grids=inst.values.get("grids", {}),
        gammas=gammas,
        X_val=inst.X_val,
        y_val=inst.y_val,
        eps_max=inst.eps_max,
        progress=progress,
        release=tuning_release(inst),
    )
    for point in points:
        # What the admin sees per γ (api.md: admins see all): sellers used and the
        # min/median/max ε of the allocation the point stands for.
        eps = point.pop("epsilon_total", None)
        if eps is not None:
            eps = np.asarray(eps, dtype=float)
            point["sellers_used"] = int(np.sum(eps > 0))
            point["epsilon"] = eps_stats(eps)
    return {"points": points, "learner": inst.learner, "sellers": len(inst.seller_ids)}
