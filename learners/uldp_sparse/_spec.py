"""The registry entry of ``uldp_sparse_linear`` and how an order's params become a learner."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from learners.registry import ReleaseContext
from learners.spec import LearnerSpec, ParamSpec

MIN_RECORDS_PER_SELLER = 5
"""Records a seller needs: each seller fits a local selector and a local estimator on
its own records (spec §3, §5); the default is kept at most 10."""


def _build_protocol(params: Mapping[str, Any], **kwargs: Any) -> Any:
    """The seller-custody protocol (``learners.uldp_sparse._protocol``)."""
    from learners.uldp_sparse._protocol import build_protocol

    return build_protocol(params, **kwargs)


ULDP_SPARSE_SPEC = LearnerSpec(
    name="uldp_sparse_linear",
    tasks=("regression",),
    privacy_model="user_level_local",
    mechanism_loss="squared",
    overhead="none",
    min_records_per_seller=MIN_RECORDS_PER_SELLER,
    params=(
        ParamSpec(
            name="algorithm",
            kind="choice",
            default="two_round",
            choices=("two_round", "multi_round"),
            doc="two_round: local OLS averaged by a two-round user-level mean (2-SLR); "
            "multi_round: private accelerated mini-batch gradient descent (M-SLR)",
        ),
        ParamSpec(
            name="sparsity",
            kind="int",
            default=8,
            low=1,
            high=64,
            doc="k: target size of the selected support",
        ),
        ParamSpec(
            name="selector",
            kind="choice",
            default="screening",
            choices=("screening", "post_lasso"),
            doc="each seller's local variable selector",
        ),
        ParamSpec(
            name="k_sel",
            kind="int",
            default=None,
            nullable=True,
            low=1,
            high=64,
            doc="size of each seller's local set; null: ceil(sparsity / 2)",
        ),
        ParamSpec(
            name="n_bins",
            kind="int",
            default=None,
            nullable=True,
            low=2,
            high=64,
            doc="N_b: histogram bins of the localization round; null: 4 below 100 "
            "sellers per coordinate, else 8 (default rule)",
        ),
        ParamSpec(
            name="bound",
            kind="float",
            default=None,
            nullable=True,
            low=0.0,
            high=100.0,
            exclusive_low=True,
            doc="B: public range [-B, B] of a coefficient (features scaled to [-1, 1] "
            "by their public bounds, target to [-1, 1]); null: min(B_max, "
            "eps*sqrt(u)/56) with u sellers per coordinate, B_max = 0.5 below u = 100, "
            "else 1 (default rule)",
        ),
        ParamSpec(
            name="hh_alpha",
            kind="float",
            default=None,
            nullable=True,
            low=0.0,
            high=1.0,
            exclusive_high=True,
            doc="heavy-hitter pruning share; 0: keep the top k per level (spec "
            "default), > 0: the reference rule; null: 0 when the selection half is "
            "large enough to follow single features, else 0.1 (default rule)",
        ),
        ParamSpec(
            name="batch_size",
            kind="int",
            default=40,
            low=2,
            high=100_000,
            doc="multi_round: sellers per gradient step b; below 16·K (K = 2^ceil(log2 "
            "s), s = selected features + intercept) the fit falls back to two_round "
            "(spec §7), reported as algorithm_run",
        ),
        ParamSpec(
            name="gradient_bound",
            kind="float",
            default=3.0,
            low=0.0,
            high=100.0,
            exclusive_low=True,
            doc="multi_round: public range [-B, B] of a rotated gradient coordinate",
        ),
        ParamSpec(
            name="fit_intercept",
            kind="bool",
            default=True,
            doc="estimate an intercept (a public constant column, never selected)",
        ),
    ),
    local_protocol=_build_protocol,
    summary="user-level LDP sparse linear regression (2-SLR / M-SLR): each seller, "
    "with all its records, sends one randomized message at its own ε_i",
)


def for_order_kwargs(
    params: Mapping[str, Any], *, context: ReleaseContext
) -> dict[str, Any]:
    """Constructor arguments for an order.

    The market scales each feature to ``[−1/√d, 1/√d]`` with its public bounds; the
    learner multiplies by the public ``√d`` (``x_scale``) so that ``bound`` is in units
    of features on ``[−1, 1]``. Without a market schema ``x_scale`` is 1.
    """
    checked = ULDP_SPARSE_SPEC.check_params(params)
    features = context.market.get("features") or []
    kwargs = dict(checked)
    kwargs["x_scale"] = math.sqrt(len(features)) if features else 1.0
    return kwargs
