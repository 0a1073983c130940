"""Request shapes of the cost prior: one model per family, a discriminated union on
``family`` (``{"family": "uniform", "params": {"low", "high"}}``, ...), so the
published schema says which parameters each family takes and in which range.

Ranges are the numerically safe ones (the mechanism's virtual costs, their integrals
and the Myerson payments stay finite and well scaled): costs live on
``[0, COST_MAX]``, scale parameters (``std``, ``1/rate``, ``bandwidth``) on
``[SCALE_MIN, COST_MAX]``, shape parameters of ``beta`` on ``[SHAPE_MIN, SHAPE_MAX]``
and the log-normal's on ``[-LOG_MAX, LOG_MAX]`` × ``[SIGMA_LOG_MIN, SIGMA_LOG_MAX]``.
Cross-parameter rules (``low < high``, equal list lengths) and a numerical probe of
the built prior run at the door too (``market.markets``), with the field named.
"""

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

COST_MAX = 1e6
"""Largest cost (and support bound) a prior may describe, in currency units."""
SCALE_MIN = 1e-6
"""Smallest scale: a standard deviation, bandwidth or mean cost ``1/rate``."""
SHAPE_MIN, SHAPE_MAX = 1e-2, 1e3
"""Range of the beta prior's ``alpha`` and ``beta``."""
LOG_MAX = 13.8
"""``|mean_log|`` bound of the log-normal prior (``e^13.8 ≈ COST_MAX``)."""
SIGMA_LOG_MIN, SIGMA_LOG_MAX = 1e-3, 5.0
"""Range of the log-normal prior's ``sigma_log``."""
MIXTURE_MAX = 20
"""Most components of a Gaussian mixture prior."""
BIDS_MAX = 10_000
"""Most past bids of an empirical prior."""

Cost = Annotated[float, Field(ge=0, le=COST_MAX, allow_inf_nan=False)]
Scale = Annotated[float, Field(ge=SCALE_MIN, le=COST_MAX, allow_inf_nan=False)]
Location = Annotated[float, Field(ge=-COST_MAX, le=COST_MAX, allow_inf_nan=False)]
Shape = Annotated[float, Field(ge=SHAPE_MIN, le=SHAPE_MAX, allow_inf_nan=False)]


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class UniformParams(_Params):
    """Costs uniform on ``[low, high]`` (``low < high``)."""

    low: Cost
    high: Cost


class ExponentialParams(_Params):
    """Costs exponential with rate ``rate`` (mean ``1/rate``) on ``[0, ∞)``."""

    rate: Annotated[
        float, Field(ge=1 / COST_MAX, le=1 / SCALE_MIN, allow_inf_nan=False)
    ]


class TruncatedNormalParams(_Params):
    """A normal ``(mean, std)`` truncated to ``[low, high]`` (``high`` null: ``∞``)."""

    mean: Location
    std: Scale
    low: Cost = 0.0
    high: Cost | None = None


class BetaParams(_Params):
    """A beta ``(alpha, beta)`` law stretched to ``[low, high]``."""

    alpha: Shape
    beta: Shape
    low: Cost = 0.0
    high: Cost = 1.0


class LogNormalParams(_Params):
    """Costs ``exp(N(mean_log, sigma_log²))``."""

    mean_log: Annotated[float, Field(ge=-LOG_MAX, le=LOG_MAX, allow_inf_nan=False)]
    sigma_log: Annotated[
        float, Field(ge=SIGMA_LOG_MIN, le=SIGMA_LOG_MAX, allow_inf_nan=False)
    ]


class EmpiricalParams(_Params):
    """A kernel estimate from public past ``bids`` (defaults: ``low`` 0, ``high``
    ``1.1·max(bids)``, Silverman's bandwidth)."""

    bids: Annotated[list[Cost], Field(min_length=1, max_length=BIDS_MAX)]
    bandwidth: Scale | None = None
    low: Cost | None = None
    high: Cost | None = None


class GaussianMixtureParams(_Params):
    """A mixture of normals (equal-length ``weights``, ``means``, ``stds``) truncated
    to ``[low, high]`` (``high`` null: ``∞``)."""

    weights: Annotated[
        list[Annotated[float, Field(gt=0, le=COST_MAX, allow_inf_nan=False)]],
        Field(min_length=1, max_length=MIXTURE_MAX),
    ]
    means: Annotated[list[Location], Field(min_length=1, max_length=MIXTURE_MAX)]
    stds: Annotated[list[Scale], Field(min_length=1, max_length=MIXTURE_MAX)]
    low: Cost = 0.0
    high: Cost | None = None


class UniformPrior(_Params):
    family: Literal["uniform"]
    params: UniformParams


class ExponentialPrior(_Params):
    family: Literal["exponential"]
    params: ExponentialParams


class TruncatedNormalPrior(_Params):
    family: Literal["truncated_normal"]
    params: TruncatedNormalParams


class BetaPrior(_Params):
    family: Literal["beta"]
    params: BetaParams


class LogNormalPrior(_Params):
    family: Literal["lognormal"]
    params: LogNormalParams


class EmpiricalPrior(_Params):
    family: Literal["empirical"]
    params: EmpiricalParams


class GaussianMixturePrior(_Params):
    family: Literal["gaussian_mixture"]
    params: GaussianMixtureParams


BasePrior = Annotated[
    UniformPrior
    | ExponentialPrior
    | TruncatedNormalPrior
    | BetaPrior
    | LogNormalPrior
    | EmpiricalPrior
    | GaussianMixturePrior,
    Field(discriminator="family"),
]
"""A prior family that is not ``ironed``."""


class IronedParams(_Params):
    """The ironed (Myerson-regularised) version of a ``base`` prior."""

    base: BasePrior
    n_points: Annotated[int, Field(ge=16, le=100_000)] | None = None


class IronedPrior(_Params):
    family: Literal["ironed"]
    params: IronedParams


CostPriorSpec = Annotated[
    UniformPrior
    | ExponentialPrior
    | TruncatedNormalPrior
    | BetaPrior
    | LogNormalPrior
    | EmpiricalPrior
    | GaussianMixturePrior
    | IronedPrior,
    Field(discriminator="family"),
]
"""``{"family": <name>, "params": {...}}``, the parameters checked per family."""
