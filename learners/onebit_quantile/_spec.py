"""The registry entry of ``onebit_quantile`` and how an order's params become a learner."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from learners.onebit_quantile._units import MarketUnits
from learners.registry import ReleaseContext
from learners.spec import LearnerSpec, ParamError, ParamSpec

MAX_PRIVATE_FEATURES = 20
"""The exact transform is ``O(k·2^k)``; beyond ``k ≈ 20`` it is out of reach (spec §3.4)."""


def check_private_features(
    params: Mapping[str, Any], features: Sequence[Mapping[str, Any]]
) -> None:
    """Refuse ``private_x`` on a market with more private features than the exact
    transform handles (the market's features not declared ``"public": true``).

    Raises
    ------
    ParamError
        Field ``params.private_x``.
    """
    if not params.get("private_x"):
        return
    k = sum(1 for f in features if not bool(f.get("public", False)))
    if k > MAX_PRIVATE_FEATURES:
        raise ParamError(
            "private_x",
            f"this market has {k} private features; the private-X protocol handles "
            f"at most {MAX_PRIVATE_FEATURES} (declare features public, or order "
            "with private_x false)",
        )


def _build_protocol(params: Mapping[str, Any], **kwargs: Any) -> Any:
    """The seller-custody protocol (``learners.onebit_quantile._protocol``)."""
    from learners.onebit_quantile._protocol import build_protocol

    return build_protocol(params, **kwargs)


ONEBIT_QUANTILE_SPEC = LearnerSpec(
    name="onebit_quantile",
    tasks=("quantile",),
    privacy_model="local",
    mechanism_loss="pinball",
    overhead="none",
    params=(
        ParamSpec(
            name="alpha",
            kind="float",
            default=0.5,
            low=0.0,
            high=1.0,
            exclusive_low=True,
            exclusive_high=True,
            doc="quantile level α in (0, 1)",
        ),
        ParamSpec(
            name="interval",
            kind="interval",
            default=None,
            nullable=True,
            doc="public response interval [c_l, c_u] in raw target units (the "
            "randomizer truncates to it); null: the market's target bounds",
        ),
        ParamSpec(
            name="scale",
            kind="float",
            default=1.0,
            low=0.0,
            exclusive_low=True,
            doc="working scale σ > 0 of the asymmetric-Laplace model, raw target units",
        ),
        ParamSpec(
            name="private_x",
            kind="bool",
            default=False,
            doc="also privatize the features (k + 1 bits sharing ε_i); false: the "
            "features are public and only the response is protected",
        ),
        ParamSpec(
            name="fit_intercept",
            kind="bool",
            default=True,
            doc="fit a public intercept (never privatized, costs no budget)",
        ),
    ),
    priced_params=(("alpha", "quantile"),),
    market_check=check_private_features,
    local_protocol=_build_protocol,
    summary="quantile regression from one-bit LDP reports (quasi-MLE with sandwich "
    "standard errors; each seller randomizes with its own ε_i)",
)


def for_order_kwargs(
    params: Mapping[str, Any], *, context: ReleaseContext
) -> dict[str, Any]:
    """Constructor arguments for an order (``OneBitQuantileRegression.for_order``).

    The market fits on records scaled with its public schema (``context.market``):
    the buyer's raw ``interval`` and ``scale`` are mapped to the scaled target, the
    scaled features' public bounds ``[−1/√d, 1/√d]`` are the ``bounds_X`` of
    ``private_x``, features declared ``"public": true`` are never privatized, and
    the schema is kept for the export's raw-unit standard errors. Without a schema
    (no market), the values are used as given and the interval defaults to
    ``[−1, 1]``.
    """
    checked = ONEBIT_QUANTILE_SPEC.check_params(params)
    units = MarketUnits.from_schema(context.market)
    interval = checked["interval"]
    scale = float(checked["scale"])
    kwargs: dict[str, Any] = {
        "alpha": float(checked["alpha"]),
        "private_x": bool(checked["private_x"]),
        "fit_intercept": bool(checked["fit_intercept"]),
    }
    if units is None:
        kwargs["interval"] = [-1.0, 1.0] if interval is None else list(interval)
        kwargs["scale"] = scale
        return kwargs
    # null: the target's public bounds, which the market scales to [−1, 1]
    kwargs["interval"] = (
        [-1.0, 1.0] if interval is None else units.scale_response(list(interval))
    )
    kwargs["scale"] = units.scale_width(scale)
    low, high = units.feature_bounds()
    kwargs["bounds_X"] = (low.tolist(), high.tolist())
    features = context.market.get("features") or []
    public = [j for j, f in enumerate(features) if bool(f.get("public", False))]
    kwargs["public_features"] = public or None
    kwargs["report_units"] = units.to_dict()
    return kwargs
