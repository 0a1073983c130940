"""The dict codec of the cost priors used by the REST API (spec ``mechanism.md`` §2).

A prior travels as ``{"family": <name>, "params": {...}}``, written by each prior's
``to_dict`` and read by :func:`prior_from_dict`. The tables below name each family's
required and optional params; an infinite ``high`` is written as ``None``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mechanisms.priors._closed_form import ExponentialPrior, UniformPrior
from mechanisms.priors._cost_prior import CostPrior
from mechanisms.priors._empirical import EmpiricalPrior
from mechanisms.priors._gaussian_mixture import GaussianMixturePrior
from mechanisms.priors._ironing import IronedPrior
from mechanisms.priors._parametric import (
    BetaPrior,
    LogNormalPrior,
    TruncatedNormalPrior,
)

__all__ = ["prior_from_dict"]

_REQUIRED: dict[str, tuple[str, ...]] = {
    "uniform": ("low", "high"),
    "exponential": ("rate",),
    "truncated_normal": ("mean", "std"),
    "beta": ("alpha", "beta"),
    "lognormal": ("mean_log", "sigma_log"),
    "empirical": ("bids",),
    "gaussian_mixture": ("weights", "means", "stds"),
    "ironed": ("base",),
}
_OPTIONAL: dict[str, tuple[str, ...]] = {
    "truncated_normal": ("low", "high"),
    "beta": ("low", "high"),
    "empirical": ("bandwidth", "low", "high"),
    "gaussian_mixture": ("low", "high"),
    "ironed": ("n_points",),
}


def prior_from_dict(d: Mapping[str, Any]) -> CostPrior:
    """Build a prior from ``{"family": ..., "params": {...}}`` (REST API form).

    Families and params (``[...]`` optional): ``uniform`` {low, high};
    ``exponential`` {rate}; ``truncated_normal`` {mean, std, [low=0], [high=None→inf]};
    ``beta`` {alpha, beta, [low=0], [high=1]}; ``lognormal`` {mean_log, sigma_log};
    ``empirical`` {bids, [bandwidth], [low], [high]} (see
    :meth:`EmpiricalPrior.from_bids`); ``gaussian_mixture`` {weights, means, stds,
    [low=0], [high=None→inf]}; ``ironed`` {base: <prior dict>, [n_points]}.
    ``to_dict`` writes an infinite ``high`` as ``None``. Unknown families, missing or
    unknown params raise ``ValueError`` naming them.
    """
    if not isinstance(d, Mapping):
        raise ValueError(f"prior must be a mapping, got {type(d).__name__}")
    family, params = d.get("family"), d.get("params", {})
    if not isinstance(family, str) or family not in _REQUIRED:
        raise ValueError(f"family must be one of {sorted(_REQUIRED)}, got {family!r}")
    if not isinstance(params, Mapping):
        raise ValueError(f"params must be a mapping, got {type(params).__name__}")
    required, optional = _REQUIRED[family], _OPTIONAL.get(family, ())
    for name in required:
        if name not in params:
            raise ValueError(f"missing parameter {name!r} for family {family!r}")
    for name in params:
        if name not in required + optional:
            raise ValueError(f"unknown parameter {name!r} for family {family!r}")
    p = dict(params)
    if family in ("truncated_normal", "gaussian_mixture") and p.get("high") is None:
        p["high"] = math.inf
    if family == "empirical":
        return EmpiricalPrior.from_bids(p.pop("bids"), **p)
    if family == "ironed":
        if not isinstance(p["base"], Mapping):
            raise ValueError("base must be a prior dict {'family': ..., 'params': ...}")
        return IronedPrior(prior_from_dict(p.pop("base")), **p)
    return _CLASSES[family](**p)


_CLASSES: dict[str, type[CostPrior]] = {
    "uniform": UniformPrior,
    "exponential": ExponentialPrior,
    "truncated_normal": TruncatedNormalPrior,
    "beta": BetaPrior,
    "lognormal": LogNormalPrior,
    "gaussian_mixture": GaussianMixturePrior,
}
