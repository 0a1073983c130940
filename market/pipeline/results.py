"""What a finished order stores: per-seller spends, the buyer's summary and model JSON.

Buyers see aggregates only (spec ``api.md``: min/median/max ``ε``, sellers used, total
paid); per-seller ``ε`` and payments go to the ledgers and the admin allocations view.
Coefficients are published in raw feature units: the market scales
``x̃_j = (2(x_j − low_j)/(high_j − low_j) − 1)/√d`` with *public* bounds, so

    w·x̃ + b = Σ_j (2 w_j / ((high_j − low_j)√d)) x_j
              + b − Σ_j w_j (2 low_j/(high_j − low_j) + 1)/√d,

a post-processing of the release that uses no private statistic. Regression and quantile
markets also scale the target, ``ỹ = 2(y − lo)/(hi − lo) − 1``, so a model of ``ỹ`` is
published for ``y = lo + (hi − lo)/2 · (w·x̃ + b + 1)``.
"""

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from market.ledgers import SellerSpend, to_major
from market.pipeline.instance import OrderInstance, OrderRun
from market.store import Order, RunStatus, utcnow

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Outcome:
    """The numerics' result for one order run."""

    gamma: float
    gamma_source: str
    eta: float
    epsilon_total: FloatArray
    payments_minor: list[int]
    model: dict[str, Any]
    guarantee: str
    stages: list[dict[str, Any]]
    validation_error: float | None
    timings: dict[str, float]
    certificates: list[dict[str, Any] | None] | None = None
    """Per-seller payment certificates (JSON), in the instance's seller order."""
    custody: str = "platform"
    """Who held the records when the randomizers ran: ``platform`` (the release ran
    on uploaded records) or ``seller`` (only randomized reports reached the platform)."""
    delivery: dict[str, int] | None = None
    """Seller custody: sellers allocated / delivered, reports expected / received."""
    gamma_note: str | None = None
    """Why a ``γ`` chosen for the budget leaves part of it unspent (else ``None``)."""
    allocation_status: str = "optimal"
    """The allocation's ``SolveStatus`` (only certified when ``"optimal"``)."""


def spends(inp: OrderInstance, out: Outcome) -> list[SellerSpend]:
    """Per-seller ledger spends of sellers the order used (``ε > 0`` or paid)."""
    certs = out.certificates or [None] * len(inp.seller_ids)
    return [
        SellerSpend(
            seller_id=seller,
            offer_id=offer,
            epsilon=float(eps),
            payment_minor=pay,
            certificate=cert,
        )
        for seller, offer, eps, pay, cert in zip(
            inp.seller_ids,
            inp.offer_ids,
            out.epsilon_total,
            out.payments_minor,
            certs,
            strict=True,
        )
        if eps > 0 or pay > 0
    ]


def raw_coefficients(
    coef: FloatArray,
    intercept: float,
    features: list[dict[str, Any]],
    target: dict[str, Any] | None = None,
) -> tuple[list[float], float]:
    """Coefficients and intercept in raw feature (and target) units (module docstring)."""
    low = np.array([float(f["low"]) for f in features])
    high = np.array([float(f["high"]) for f in features])
    root_d = math.sqrt(len(features))
    span = high - low
    w_raw = 2.0 * coef / (span * root_d)
    b_raw = intercept - float(np.sum(coef * (2.0 * low / span + 1.0))) / root_d
    if target is not None:
        lo, half = (
            float(target["low"]),
            (float(target["high"]) - float(target["low"])) / 2,
        )
        w_raw, b_raw = half * w_raw, lo + half * (b_raw + 1.0)
    return [float(v) for v in w_raw], float(b_raw)


def eps_stats(eps: FloatArray) -> dict[str, float]:
    """``{min, median, max}`` of the positive ``ε`` (zeros when nobody is used)."""
    used = eps[eps > 0]
    if used.size == 0:
        return {"min": 0.0, "median": 0.0, "max": 0.0}
    return {
        "min": float(used.min()),
        "median": float(np.median(used)),
        "max": float(used.max()),
    }


SUMMARY_FIELDS = {
    "sellers_used": "sellers whose ε > 0 (allocation)",
    "epsilon": "min / median / max of the sellers' ε > 0 (allocation)",
    "total_paid": "what the buyer is charged, Σ of the per-seller payments",
    "total_paid_minor": "the same in minor units (cents)",
    "budget": "the order's budget (the buyer's own input)",
    "validation_error": "the released model's error on the public validation set",
    "gamma": "the γ the order ran with (fixed or chosen for the budget)",
    "gamma_source": '"order" (the buyer gave γ) or "chosen" (chosen for the budget)',
    "gamma_note": "why a γ chosen for the budget leaves part of it unspent (caps, "
    "the ε average cap, too few sellers, no accuracy gain), else null",
    "parameters_version": "the market settings version the order ran with",
    "guarantee": "the guarantee label of the release (privacy mode)",
    "learner": "the learner of the order",
    "custody": '"platform" (the randomizers ran on uploaded records) or "seller" '
    "(the records never left their sellers; only randomized reports were received)",
    "delivery": "seller custody: sellers allocated and delivered, reports expected "
    "and received (null on platform-custody markets)",
    "allocation_status": '"optimal" (certified global optimum), "uncertified" or '
    '"local" (paid, but without that certificate); an "optimal_inaccurate" '
    "allocation is never paid",
    "payments_certified": "whether every re-solve the payments rest on is a certified "
    "optimum; each seller's certificate is in the admin allocations view",
}
"""Every field of the buyer's order summary (documented in ``docs/buyer.md``, "What a buyer
sees of an order"). Deliberately absent: how many sellers offered or were eligible (eligibility
depends on sellers' remaining budgets, hence on earlier orders' data-dependent
allocations), per-stage timings (a timing side channel on the records), settlement
retries (other orders' activity)."""


def summary(run: OrderRun, out: Outcome) -> dict[str, Any]:
    """The buyer-visible summary: aggregates only, the fields of :data:`SUMMARY_FIELDS`.

    The allocation-derived fields (``sellers_used``, ``epsilon``, ``total_paid``)
    depend only on reported costs and public settings in ``strict`` mode; in
    ``default`` mode they also depend on the records, and the release's guarantee
    (``conditional_on_allocation``) holds given them, not for them.
    """
    inp = run.instance
    total = sum(out.payments_minor)
    return {
        "sellers_used": int(np.sum(out.epsilon_total > 0)),
        "epsilon": eps_stats(out.epsilon_total),
        "total_paid": to_major(total),
        "total_paid_minor": total,
        "budget": to_major(run.budget_minor),
        "validation_error": out.validation_error,
        "gamma": out.gamma,
        "gamma_source": out.gamma_source,
        "gamma_note": out.gamma_note,
        "parameters_version": inp.parameters_version,
        "guarantee": out.guarantee,
        "learner": inp.learner,
        "custody": out.custody,
        "delivery": out.delivery,
        "allocation_status": out.allocation_status,
        "payments_certified": all(
            bool(c.get("rule_certified", False)) for c in (out.certificates or []) if c
        ),
    }


def model_json(run: OrderRun, out: Outcome) -> dict[str, Any]:
    """The buyer's model (spec ``api.md`` ``GET /v1/orders/{id}/model``); no records.

    The learner's own fields (``export_model``) with ``coef``/``intercept`` mapped to
    raw feature units (module docstring), the guarantee label and the per-stage ε
    summary (aggregates only).
    """
    inp = run.instance
    fields = dict(out.model)
    coef_scaled = np.asarray(fields.pop("coef"), dtype=float)
    intercept_scaled = fields.pop("intercept", None)
    coef, intercept = raw_coefficients(
        coef_scaled, float(intercept_scaled or 0.0), inp.features, inp.target
    )
    total = sum(out.payments_minor)
    return {
        "learner": inp.learner,
        "params": dict(inp.params),
        "coefficients": coef,
        "intercept": intercept if intercept_scaled is not None else None,
        "feature_names": [str(f["name"]) for f in inp.features],
        "input": "raw feature values clipped to the market's public bounds",
        **fields,
        "metrics": {
            "validation_error": out.validation_error,
            "n_validation": 0 if inp.y_val is None else len(inp.y_val),
        },
        "privacy": {
            "guarantee": out.guarantee,
            "custody": out.custody,
            "epsilon": eps_stats(out.epsilon_total),
            "stages": out.stages,
            "sellers_used": int(np.sum(out.epsilon_total > 0)),
            "unit": (
                "record: ε_i = the minimum over the parties (sellers) holding it"
                if inp.party_sizes is not None
                else "seller"
            ),
        },
        "payments": {"total": to_major(total), "budget": to_major(run.budget_minor)},
    }


def record_success(order: Order, run: OrderRun, out: "Outcome") -> None:
    """Write a settled order's summary and model, mark it ``succeeded`` and release
    its lease (inside the settlement's transaction)."""
    order.summary = summary(run, out)
    order.model = model_json(run, out)
    order.status, order.error = RunStatus.SUCCEEDED, None
    order.progress_stage, order.progress_fraction = "done", 1.0
    order.finished_at, order.lease_owner, order.lease_expires_at = utcnow(), None, None
