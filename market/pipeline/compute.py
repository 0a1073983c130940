"""The numerics of one run, on a loaded instance: no database access.

An order: the learner from the registry says which rows the mechanism prices
(``design_matrix``) → allocate (or choose ``γ`` for the budget) → Myerson payments →
the learner fits with the allocated per-record ``ε`` → :class:`~market.pipeline.results.Outcome`.
A trade-off job: the same priced rows, caps and prior → the curve over a ``γ`` grid.

Money: payments are rounded up per seller to minor units (``numerics.payments_to_minor``,
the one rule); with a fixed ``γ`` an order whose payments exceed its budget **fails** with
the reason (``γ`` is never changed behind the buyer's back). The paper's ``Ψ·ε`` rule is
never paid.
"""

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from market import numerics
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


def _learner_args(inst: OrderInstance) -> dict[str, Any]:
    """What the registry needs to bind the instance's learner: its settings and schema."""
    return {
        "config": inst.config(),
        "task": inst.task,
        "schema": inst.schema(),
    }


def build_learner(inst: OrderInstance) -> Any:
    """The instance's learner from the registry, bound to its mechanism settings."""
    return numerics.build_learner(inst.learner, inst.params, **_learner_args(inst))


def tuning_release(inst: OrderInstance) -> Any:
    """The ordered learner as the release the tuning code scores (``choose_gamma``,
    trade-off curves): validation error of the model the buyer would get, fitted on
    public proxy rows drawn from the validation set with the order's shape
    (``groups``). It is given no record: tuning spends no privacy, so the final
    release is the only use of the records and its label holds end to end."""
    return numerics.learner_release(
        inst.learner, inst.params, **_learner_args(inst), groups=inst.groups
    )


@dataclass(frozen=True)
class PricedRows:
    """What the mechanism prices: one row ``X[i]`` and target ``y[i]`` per seller, and
    the public validation rows (per record)."""

    X: Any
    y: Any
    X_val: Any


def seller_summary_rows(
    Z: np.ndarray, y: np.ndarray, groups: np.ndarray, n_sellers: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each seller's mean priced row and mean target (``docs/mathematics.md`` §7,
    "Other losses": user-level learners).

    ``Z`` holds the learner's priced rows of the records, already scaled with the
    market's public bounds and clipped to ``‖z‖₂ ≤ 1``; ``y`` the targets scaled with
    the public target bounds. An average of rows in the unit ball stays in it (and an
    average of targets in ``[−1, 1]`` stays there), so the summary needs no further
    scaling or clipping, and none computed from the data.
    """
    counts = np.bincount(groups, minlength=n_sellers).astype(float)
    sums = np.zeros((n_sellers, Z.shape[1]))
    np.add.at(sums, groups, Z)
    X = sums / counts[:, None]
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)  # rounding only
    return X, np.bincount(groups, weights=y, minlength=n_sellers) / counts


def priced_rows(inst: OrderInstance, learner: Any) -> PricedRows:
    """The rows the mechanism prices, by the learner's rule: one row per seller.

    With one record per seller, the learner's ``design_matrix`` of that record. For a
    learner whose privacy unit is the seller with all its records
    (``min_records_per_seller > 1``), the seller's :func:`seller_summary_rows`: the
    per-seller ``ε_i`` then covers all of that seller's records.

    Raises
    ------
    OrderFailedError
        Sellers with several records and a learner whose unit is one record.
    """
    n_sellers = len(inst.seller_ids)
    Z = learner.design_matrix(inst.X)
    X_val = None if inst.X_val is None else learner.design_matrix(inst.X_val)
    if inst.groups.size == n_sellers:
        return PricedRows(X=Z, y=inst.y, X_val=X_val)
    if not numerics.learner_spec(inst.learner).several_records_per_seller:
        raise OrderFailedError(
            f"{inst.learner} prices one record per seller; sellers here offer several"
        )
    X, y = seller_summary_rows(
        np.asarray(Z, dtype=float), inst.y, inst.groups, n_sellers
    )
    return PricedRows(X=X, y=y, X_val=X_val)


@dataclass(frozen=True)
class Priced:
    """An allocation, its payments and the ``γ`` they are for (``source``: ``"order"``
    or ``"chosen"``); ``note`` says why a chosen ``γ`` leaves budget unspent."""

    alloc: Any
    pay: Any
    gamma: float
    source: str
    note: str | None = None


def _allocate_and_pay(
    run: OrderRun,
    rows: PricedRows,
    rep: Progress,
    checkpoint: Callable[[], None] | None = None,
) -> Priced:
    """Allocate (or choose ``γ``) and pay; a solver that returns no point, or inputs
    the mechanism refuses (its ``ValueError`` names the parameter, e.g. ``γ = 0`` on
    an unbounded prior, whose payments would be infinite), is the order's failure with
    its reason (never an internal error)."""
    try:
        return _solve_and_pay(run, rows, rep, checkpoint)
    except numerics.SolverError as exc:
        raise OrderFailedError(
            f"the allocation did not solve at these settings: {exc}; nothing was paid"
        ) from exc
    except ValueError as exc:
        raise OrderFailedError(
            f"the mechanism cannot run at these settings: {exc}; nothing was paid"
        ) from exc


def _solve_and_pay(
    run: OrderRun,
    rows: PricedRows,
    rep: Progress,
    checkpoint: Callable[[], None] | None = None,
) -> Priced:
    inst = run.instance
    X, y, X_val = rows.X, rows.y, rows.X_val
    cfg = inst.config(gamma=run.gamma)
    common = {"prior": inst.prior, "eps_max": inst.eps_max}
    if run.gamma is None:
        reason = numerics.gamma_choice_refusal(
            partition="horizontal", has_validation=X_val is not None
        )
        if reason is not None:
            raise OrderFailedError(reason)
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
            checkpoint=checkpoint,
            **common,
        )
        note = getattr(choice, "note", None)
        if str(getattr(choice, "status", "ok")) != "ok":
            raise OrderFailedError(
                "no gamma on the search range fits the budget: the cheapest total "
                f"payment found was {float(choice.total_payment):.2f}"
                + (f" ({note})" if note else "")
            )
        pay = getattr(choice, "payment_result", None)
        check_certified(choice.allocation, pay)
        return Priced(
            choice.allocation,
            choice.payments if pay is None else pay,
            float(choice.gamma),
            "chosen",
            note,
        )
    rep.stage("allocating")
    alloc = numerics.allocate(X, y, inst.costs, config=cfg, **common)
    if not alloc.success:
        raise OrderFailedError(f"the allocation did not solve ({alloc.status})")
    check_certified(alloc, None)
    # An allocation that is not certified optimal is said so before any payment is
    # computed: the order's stage names it while it runs, its summary afterwards.
    certified = str(getattr(alloc, "status", "optimal")) == "optimal"
    rep.stage("payments" if certified else "payments_uncertified")
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
    check_certified(alloc, pay)
    return Priced(alloc, pay, float(cfg.gamma), "order")


PAYABLE_KKT = 1e-4
"""The largest relative block KKT residual an order pays on (``KKT_TOL = 10⁻⁶`` is the
allocation's own tolerance: between the two the order pays and says
``optimal_inaccurate``)."""


def check_certified(alloc: Any, pay: Any) -> int:
    """How many sellers' payment sweeps rest on some uncertified re-solve.

    An allocation that is not ``optimal`` (certified) and not far from its KKT
    conditions is paid, and the order says so before any payment is computed: its stage
    is ``payments_uncertified`` while the payments run, and its summary carries
    ``allocation_status`` (``local``, ``uncertified`` or ``optimal_inaccurate``) and
    ``payments_certified``. On random instances over the accepted ranges these are
    rare (``docs/money-and-settings.md``, "Certificates"); the power utility's
    allocations are never certified. Each seller's certificate (``rule_certified``,
    ``n_uncertified``, the worst KKT residual) is stored with its allocation.

    Raises
    ------
    OrderFailedError
        Before payment, when the allocation misses its KKT conditions by more than
        :data:`PAYABLE_KKT` (relative): far from a first-order point, the payments
        could not be truthful.
    """
    if str(getattr(alloc, "status", "optimal")) == "optimal_inaccurate":
        kkt = getattr(alloc, "kkt", None)
        worst = float(kkt.max()) if kkt is not None else math.inf
        if not worst <= PAYABLE_KKT:  # NaN included
            raise OrderFailedError(
                f"the allocation at these settings missed its KKT conditions by "
                f"{worst:.2g} (status {alloc.status}: {alloc.message}); its payments "
                "would not be truthful, so nothing was paid"
            )
    if pay is None or getattr(pay, "rule_certified", True):
        return 0
    return sum(
        1
        for s in pay.sellers
        if s.certificate is None or not s.certificate.rule_certified
    )


def _check_epsilon(alloc: Any, pay: Any, released: np.ndarray) -> None:
    """``ε`` allocated = ``ε`` paid for = ``ε`` the learner spent (T-MD-6)."""
    paid = getattr(pay, "epsilon", None)
    for name, eps in (("allocation", alloc.epsilon_total), ("payments", paid)):
        if eps is not None and not np.allclose(
            eps, released, rtol=EPS_RTOL, atol=EPS_RTOL
        ):
            raise OrderFailedError(f"internal inconsistency: {name} ε ≠ released ε")


def _seller_totals(inst: OrderInstance, per_record: Sequence[float]) -> np.ndarray:
    """Each seller's ε: the largest over its records (a user-level learner reports its
    seller's ε on every record)."""
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
    try:
        minor = numerics.payments_to_minor(pay)
    except ValueError as exc:  # an amount beyond what the ledger counts
        raise OrderFailedError(
            f"the payments at gamma={gamma:g} cannot be paid: {exc}; nothing was paid"
        ) from exc
    if sum(minor) > run.budget_minor:
        raise OrderFailedError(
            f"the payments at gamma={gamma:g} total "
            f"{numerics.to_major(sum(minor)):.2f}, over the budget "
            f"{numerics.to_major(run.budget_minor):.2f}; place the order with "
            "gamma=null to choose gamma for the budget"
        )
    return minor


def _outcome(
    priced: Priced,
    minor: list[int],
    spent: np.ndarray,
    learner: Any,
    validation_error: float | None,
) -> Outcome:
    """The run's :class:`Outcome` from the fitted learner (its privacy report)."""
    report = learner.privacy_report_
    alloc, pay = priced.alloc, priced.pay
    return Outcome(
        gamma=priced.gamma,
        gamma_source=priced.source,
        gamma_note=priced.note,
        eta=float(alloc.eta),
        epsilon_total=spent,
        payments_minor=minor,
        model=learner.export_model(),
        guarantee=str(report.guarantee),
        stages=report.stage_summary(),
        validation_error=validation_error,
        timings={},
        certificates=numerics.payment_certificates(pay),
        custody=str(getattr(report, "custody", "platform")),
        allocation_status=str(getattr(alloc, "status", "optimal")),
    )


class SecureSession(Protocol):
    """Runs the fit between the party nodes of a seller-custody vertical market (the
    runtime's, with database access): returns the fitted learner, or raises
    :class:`OrderFailedError` with the reason (e.g. a node that dropped out)."""

    def __call__(self, run: OrderRun, learner: Any, party_epsilon: np.ndarray) -> Any:
        """Fit with ``party_epsilon`` per party; the learner built for the order."""


def compute_vertical_order(
    run: OrderRun, rep: Progress, *, checkpoint: Callable[[], None] | None = None,
    secure_session: SecureSession | None = None,
) -> Outcome:  # fmt: skip
    """A vertical market's order (``docs/mathematics.md`` §7): each party is one seller.

    The mechanism prices one public row per party (``learner.design_matrix`` of the
    blocks), allocates each party an ``ε_k`` and pays its Myerson threshold payment;
    the learner fits with ``ε_k`` applying to all of party ``k``'s records (record
    ``i`` at ``min_k ε_k`` over its holders); each party's ledger is charged the
    largest ε any of its records spent (never more than ``ε_k``). When the parties
    keep their blocks (``inst.party_keys``), ``secure_session`` runs the fit between
    their nodes and the platform receives only the opened outputs.
    """
    inst = run.instance
    assert inst.party_sizes is not None
    if run.gamma is None:
        reason = numerics.gamma_choice_refusal(partition="vertical", has_validation=False)
        raise OrderFailedError(str(reason))
    learner = build_learner(inst)
    edges = np.cumsum([0, *inst.party_sizes])
    blocks = [inst.X[:, a:b] for a, b in itertools.pairwise(edges)]
    rows = PricedRows(
        X=learner.design_matrix(blocks), y=np.ones(len(blocks)), X_val=None
    )
    priced = _allocate_and_pay(run, rows, rep, checkpoint)
    alloc = priced.alloc
    minor = _payments_within_budget(run, priced.pay, priced.gamma)
    eps = np.asarray(alloc.epsilon, dtype=float)
    if np.any(eps <= 0):
        raise OrderFailedError(
            "the mechanism allocated no privacy to some party; a vertical fit needs "
            "every party (raise the budget or gamma)"
        )
    rep.stage("releasing")
    if inst.party_keys is not None:
        if secure_session is None:
            raise OrderFailedError("this worker cannot run fits between party nodes")
        learner = secure_session(run, learner, eps)
    else:
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
    return _outcome(priced, minor, spent, learner, None)


def compute_order(
    run: OrderRun, rep: Progress, *, checkpoint: Callable[[], None] | None = None,
    secure_session: SecureSession | None = None,
) -> Outcome:  # fmt: skip
    """Run the numerics for one order (no database writes except progress).

    ``checkpoint`` is called before every payment re-solve; what it raises stops the
    run (``market.pipeline.deadline``: the order's time budget, a worker's shutdown).
    """
    inst = run.instance
    if inst.party_sizes is not None:
        return compute_vertical_order(
            run, rep, checkpoint=checkpoint, secure_session=secure_session
        )
    learner = build_learner(inst)
    rows = priced_rows(inst, learner)
    priced = _allocate_and_pay(run, rows, rep, checkpoint)
    alloc, pay = priced.alloc, priced.pay
    minor = _payments_within_budget(run, pay, priced.gamma)
    rep.stage("releasing")
    eps = np.asarray(alloc.epsilon, dtype=float)[inst.groups]
    numerics.release(learner, inst.X, inst.y, sample_epsilon=eps, groups=inst.groups)
    report = learner.privacy_report_
    spent = _seller_totals(inst, report.sample_epsilon_total)
    _check_epsilon(alloc, pay, spent)
    error = _validation_error(learner, inst.X_val, inst.y_val, inst.task)
    return _outcome(priced, minor, spent, learner, error)


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
    rows = priced_rows(inst, learner)
    if rows.X_val is None:
        raise OrderFailedError("the market has no public validation set")
    try:
        points = _tradeoff_points(inst, rows, gammas, progress)
    except numerics.SolverError as exc:
        raise OrderFailedError(
            f"the allocation did not solve at these settings: {exc}"
        ) from exc
    for point in points:
        # What the admin sees per γ (api.md: admins see all): sellers used and the
        # min/median/max ε of the allocation the point stands for.
        eps = point.pop("epsilon_total", None)
        if eps is not None:
            eps = np.asarray(eps, dtype=float)
            point["sellers_used"] = int(np.sum(eps > 0))
            point["epsilon"] = eps_stats(eps)
    return {"points": points, "learner": inst.learner, "sellers": len(inst.seller_ids)}


def _tradeoff_points(
    inst: OrderInstance,
    rows: PricedRows,
    gammas: Sequence[float],
    progress: Callable[[int, int], None] | None,
) -> list[dict[str, Any]]:
    return numerics.tradeoff(  # type: ignore[no-any-return]
        rows.X,
        rows.y,
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
