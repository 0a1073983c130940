"""Run one claimed order: load → allocate (or choose ``γ``) → Myerson payments → release
→ settle, with progress persisted by stage.

Stages: ``loading``, ``allocating`` | ``choosing_gamma``, ``payments`` (fraction from
the payments' progress callback), ``releasing``, ``settling``, ``done``.

Money: payments are rounded down per seller to minor units; with a fixed ``γ`` (the
order's or, for ``gamma: null`` while ``mechanisms.choose_gamma`` is unavailable, the
market's) an order whose payments exceed its budget **fails** with the reason (``γ`` is
never changed behind the buyer's back). No Myerson payments available → the order fails
("payments unavailable"); the paper's ``Ψ·ε`` rule is never paid.

Settlement is one transaction (``db.write_session``: ``BEGIN IMMEDIATE`` on SQLite,
row locks on PostgreSQL): fence on the lease, lock the sellers, re-check the remaining
budgets against ``ε_total``; if another order used a seller's budget meanwhile the run
starts over from loading with the new caps (at most ``MAX_RUNS`` times), never
over-debiting. A released model that is not settled is discarded unseen.
"""

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine
from sqlmodel import select

from market import db, engine, leases, ledgers, order_inputs, order_results
from market.errors import PrivacyBudgetExhaustedError
from market.models import Market, Order, RunStatus, utcnow
from market.order_inputs import OrderInputs
from market.order_results import Outcome

log = logging.getLogger(__name__)
MAX_RUNS = 3
EPS_RTOL = 1e-9
STAGE_HOOKS: list[Callable[[int, str], None]] = []
"""Test hooks called as ``hook(order_id, stage)`` when a stage starts."""
SLEEP_ENV = "PRIVMARKET_TEST_STAGE_SLEEP"
"""Test hook for crash tests: ``"<stage>:<seconds>"`` sleeps when that stage starts."""


class OrderFailedError(Exception):
    """The order cannot succeed; the message is shown to the buyer."""


class LeaseLostError(Exception):
    """Another worker took the order over; stop without writing."""


class Reporter:
    """Persists progress (fenced by the lease) and runs the stage hooks."""

    def __init__(
        self, db_engine: Engine, order_id: int, *, owner: str, lease_seconds: float
    ) -> None:
        self.db_engine, self.order_id = db_engine, order_id
        self.owner, self.lease_seconds = owner, lease_seconds
        self.lost = threading.Event()
        self.timings: dict[str, float] = {}
        self._stage, self._t0, self._last = "loading", time.perf_counter(), 0.0

    def _write(self, stage: str, fraction: float) -> None:
        ok = leases.touch(
            self.db_engine,
            Order,
            self.order_id,
            owner=self.owner,
            lease_seconds=self.lease_seconds,
            progress_stage=stage,
            progress_fraction=float(min(max(fraction, 0.0), 1.0)),
        )
        if not ok:
            self.lost.set()

    def stage(self, name: str) -> None:
        """Enter stage ``name`` (fraction 0); raises ``LeaseLostError`` if taken over."""
        now = time.perf_counter()
        self.timings[self._stage] = round(now - self._t0, 4)
        self._stage, self._t0 = name, now
        self._write(name, 0.0)
        if self.lost.is_set():
            raise LeaseLostError(f"order {self.order_id}: lease lost")
        for hook in STAGE_HOOKS:
            hook(self.order_id, name)
        spec = os.environ.get(SLEEP_ENV, "")
        if spec.partition(":")[0] == name:
            time.sleep(float(spec.partition(":")[2]))

    def fraction(self, done: int, total: int) -> None:
        """Progress callback ``(done, total)``; writes at most twice a second."""
        now = time.monotonic()
        if now - self._last < 0.5 and done < total:
            return
        self._last = now
        try:
            self._write(self._stage, done / max(total, 1))
        except Exception:  # progress is best effort; the heartbeat keeps the lease
            log.warning("order %s: progress write failed", self.order_id)


def _allocate_and_pay(
    inp: OrderInputs, X: Any, X_val: Any, rep: Reporter
) -> tuple[Any, Any, float, str]:
    cfg = engine.mechanism_config(inp.values, task=inp.task, gamma=inp.gamma)
    common = {"prior_spec": inp.prior_spec, "eps_max": inp.eps_max}
    if inp.gamma is None:
        if X_val is None:
            raise OrderFailedError(
                "choosing gamma for the budget needs the market's public validation "
                "set; give gamma in the order or ask an admin to add one"
            )
        rep.stage("choosing_gamma")
        choice = engine.choose_gamma(
            X,
            inp.y,
            inp.costs,
            config=cfg,
            budget=ledgers.to_major(inp.budget_minor),
            X_val=X_val,
            y_val=inp.y_val,
            progress=rep.fraction,
            **common,
        )
        if str(getattr(choice, "status", "ok")) != "ok":
            raise OrderFailedError(
                "no gamma on the search range fits the budget: the cheapest total "
                f"payment found was {float(choice.total_payment):.2f}"
            )
        return choice.allocation, choice.payments, float(choice.gamma), "chosen"
    source = "order" if inp.gamma is not None else "market"
    rep.stage("allocating")
    alloc = engine.allocate(X, inp.y, inp.costs, config=cfg, **common)
    if not alloc.success:
        raise OrderFailedError(f"the allocation did not solve ({alloc.status})")
    rep.stage("payments")
    pay = engine.myerson_payments(
        X,
        inp.y,
        inp.costs,
        config=cfg,
        allocation=alloc,
        progress=rep.fraction,
        **common,
    )
    return alloc, pay, float(cfg.gamma), source


def _check_epsilon(alloc: Any, pay: Any, learner_eps: np.ndarray) -> None:
    """``ε`` allocated = ``ε`` paid for = ``ε`` the learner enforces (T-MD-6)."""
    paid = getattr(pay, "epsilon", None)
    for name, eps in (("allocation", alloc.epsilon_total), ("payments", paid)):
        if eps is not None and not np.allclose(
            eps, learner_eps, rtol=EPS_RTOL, atol=EPS_RTOL
        ):
            raise OrderFailedError(f"internal inconsistency: {name} ε ≠ released ε")


def compute(inp: OrderInputs, rep: Reporter) -> Outcome:
    """Run the numerics for one order (no database writes except progress)."""
    X = engine.design(inp.X, fit_intercept=inp.fit_intercept)
    X_val = None
    if inp.X_val is not None:
        X_val = engine.design(inp.X_val, fit_intercept=inp.fit_intercept)
    alloc, pay, gamma, source = _allocate_and_pay(inp, X, X_val, rep)
    minor = order_results.payments_to_minor(getattr(pay, "payments", pay))
    if sum(minor) > inp.budget_minor:
        raise OrderFailedError(
            f"the payments at gamma={gamma:g} total {ledgers.to_major(sum(minor)):.2f},"
            f" over the budget {ledgers.to_major(inp.budget_minor):.2f}; place the"
            " order with gamma=null to choose gamma for the budget"
        )
    rep.stage("releasing")
    model = engine.release(X, inp.y, alloc)
    report = model.privacy_report_
    eps = np.asarray(report.sample_epsilon_total, dtype=float)
    _check_epsilon(alloc, pay, eps)
    w = np.asarray(model.coef_, dtype=float)
    coef, b = (w[:-1], float(w[-1])) if inp.fit_intercept else (w, 0.0)
    scale = np.sqrt(2.0) if inp.fit_intercept else 1.0
    err = None
    if X_val is not None and inp.y_val is not None:
        err = float(np.mean(model.predict(X_val) != inp.y_val))
    return Outcome(
        gamma=gamma,
        gamma_source=source,
        eta=float(alloc.eta),
        epsilon_total=eps,
        payments_minor=minor,
        coef_scaled=coef / scale,
        intercept_scaled=b / scale,
        guarantee=str(report.guarantee),
        validation_error=err,
        timings=dict(rep.timings),
    )


def _settle(
    db_engine: Engine, inp: OrderInputs, out: Outcome, *, owner: str, attempts: int
) -> None:
    """Write allocations, ledgers and the result in ONE transaction (module docstring).

    Raises
    ------
    LeaseLostError
        The order is no longer ours (nothing written).
    PrivacyBudgetExhaustedError
        A seller's remaining budget shrank meanwhile (nothing written).
    """
    with db.write_session(db_engine) as session:
        stmt = select(Order).where(Order.id == inp.order_id).with_for_update()
        order = session.exec(stmt).one()
        if order.status != RunStatus.RUNNING or order.lease_owner != owner:
            raise LeaseLostError(f"order {inp.order_id}: lease lost before settlement")
        market = session.get(Market, inp.market_id)
        assert market is not None
        items = order_results.spends(inp, out)
        ledgers.settle_order(session, order=order, market=market, spends=items)
        order.summary = order_results.summary(inp, out, attempts=attempts)
        order.model = order_results.model_json(inp, out)
        order.status, order.error = RunStatus.SUCCEEDED, None
        order.progress_stage, order.progress_fraction = "done", 1.0
        order.finished_at, order.lease_owner, order.lease_expires_at = (
            utcnow(),
            None,
            None,
        )
        session.add(order)


def _load(db_engine: Engine, order_id: int, *, owner: str) -> OrderInputs:
    with db.session_scope(db_engine) as session:
        order = session.get(Order, order_id)
        if order is None or order.lease_owner != owner:
            raise LeaseLostError(f"order {order_id}: not ours")
        try:
            return order_inputs.load(session, order)
        except ValueError as exc:
            raise OrderFailedError(str(exc)) from exc


def fail(db_engine: Engine, order_id: int, *, owner: str, reason: str) -> bool:
    """Mark our running order ``failed`` with ``reason``; ``False`` if not ours."""
    return leases.touch(
        db_engine,
        Order,
        order_id,
        owner=owner,
        lease_seconds=0.0,
        status=RunStatus.FAILED,
        error=reason,
        finished_at=utcnow(),
        lease_owner=None,
    )


def _record_snapshot(rep: Reporter, inp: OrderInputs) -> None:
    """Record the offers the run uses (``PUT`` of those offers waits for the order)."""
    leases.touch(
        rep.db_engine,
        Order,
        rep.order_id,
        owner=rep.owner,
        lease_seconds=rep.lease_seconds,
        offer_ids=list(inp.offer_ids),
    )


def run_order(
    db_engine: Engine, order_id: int, *, owner: str, lease_seconds: float
) -> str:
    """Run a claimed order to ``succeeded`` or ``failed``; return the final status
    (``"lost"`` when another worker took it over).

    Failures are recorded with a buyer-safe reason; unexpected errors are logged with
    their details and recorded as an internal error of the stage.
    """
    rep = Reporter(db_engine, order_id, owner=owner, lease_seconds=lease_seconds)
    try:
        for attempt in range(1, MAX_RUNS + 1):
            rep.stage("loading")
            inp = _load(db_engine, order_id, owner=owner)
            _record_snapshot(rep, inp)
            out = compute(inp, rep)
            rep.stage("settling")
            try:
                _settle(db_engine, inp, out, owner=owner, attempts=attempt)
            except PrivacyBudgetExhaustedError:
                log.info(
                    "order %s: budgets changed, re-running (%d)", order_id, attempt
                )
                continue
            return RunStatus.SUCCEEDED
        raise OrderFailedError(
            f"sellers' privacy budgets changed during {MAX_RUNS} runs (other orders "
            "settled first); place the order again"
        )
    except LeaseLostError:
        return "lost"
    except OrderFailedError as exc:
        reason = str(exc)
    except Exception as exc:  # recorded on the order, details only in the log
        log.exception("order %s failed in stage %s", order_id, rep._stage)
        reason = f"internal error in stage {rep._stage} ({type(exc).__name__})"
    fail(db_engine, order_id, owner=owner, reason=reason)
    return RunStatus.FAILED
