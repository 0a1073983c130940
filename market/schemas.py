"""Non-table shapes: request bodies (``*Create``/``*Update``, ``extra="forbid"`` so
server-owned fields are rejected) and responses (``*Public``), per ``api.md``.
"""

from datetime import UTC, datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from market.numerics import list_learners
from market.numerics.pricing import SETTING_RANGES
from market.prior_schemas import CostPriorSpec


def _as_utc(value: datetime) -> datetime:
    # SQLite returns naive datetimes; everything is stored in UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_as_utc)]


NO_NUL = r"^[^\x00]*$"
"""PostgreSQL text cannot hold NUL: names refuse it (in the published schema too)."""
BOUND_MAX = 1e150
"""Largest ``|low|``, ``|high|`` of a public bound: spans ``high − low`` and scaled
values ``2(x − low)/(high − low) − 1`` stay finite."""
GAMMA_MAX = SETTING_RANGES["gamma"][1]
"""Largest trade-off weight ``γ``: far beyond any useful weight of the payment term
(an 8-seller allocation with payments at ``γ = 10⁶`` solves in seconds; at
``γ = 10³⁰⁸`` it did not finish in two minutes, and a trade-off job failed)."""
SETTING_MAX = 1e6
"""Largest value of the other positive mechanism settings (``λ``, ``μ``, ``σ``, ``k``,
``eps_avg_max``)."""


def _setting(name: str, *, open_low: bool = False) -> Any:
    """The accepted range of mechanism setting ``name`` (``numerics.SETTING_RANGES``,
    decided by ``MechanismConfig``; ``docs/money-and-settings.md``)."""
    low, high = SETTING_RANGES[name]
    if open_low:
        return Annotated[float, Field(gt=low, le=high, allow_inf_nan=False)]
    return Annotated[float, Field(ge=low, le=high, allow_inf_nan=False)]


Lam = _setting("lam")
EpsAvgMax = _setting("eps_avg_max")
KCap = _setting("k")
UPower = _setting("u_power")
Weight = _setting("mu")

Bound = Annotated[float, Field(ge=-BOUND_MAX, le=BOUND_MAX, allow_inf_nan=False)]
Gamma = Annotated[float, Field(ge=0, le=GAMMA_MAX, allow_inf_nan=False)]
GridGamma = Annotated[float, Field(gt=0, le=GAMMA_MAX, allow_inf_nan=False)]
Name = Annotated[str, Field(min_length=1, max_length=200, pattern=NO_NUL)]
Task = Literal["classification", "regression", "quantile"]
Custody = Literal["platform", "seller"]
"""Who holds a market's records: the platform (sellers upload them) or each seller
(the platform receives only randomized reports, ``docs/custody.md``)."""
LearnerName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        json_schema_extra={"enum": [spec["name"] for spec in list_learners()]},
        description="a registered learner (GET /v1/learners) serving the market's task",
    ),
]
"""A registered learner's name; the published schema lists them (checked against the
registry and the market by ``numerics.check_order_learner``)."""


T = TypeVar("T")


class _In(BaseModel):
    """A request body: unknown fields refused, numbers strict (``true`` is not 1)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Page(BaseModel, Generic[T]):
    """One page of a list: ``items`` plus ``total``, ``limit`` and ``offset``."""

    items: list[T]
    total: int
    limit: int
    offset: int


# --- accounts -------------------------------------------------------------------


class AccountCreate(_In):
    name: Name


class AccountCreated(BaseModel):
    id: int
    name: str
    role: str
    api_key: str


# --- markets --------------------------------------------------------------------


class FeatureSpec(_In):
    """A feature and its public bounds ``[low, high]`` used to scale records;
    ``missable`` features may be ``null`` in a record (a missing covariate).

    ``public``: the feature's values are not sensitive (the curator may know them);
    learners that randomize features locally leave it as is. Part of the public schema
    a learner reads (``ReleaseContext.market``); default false.
    """

    name: Name
    low: Bound
    high: Bound
    missable: bool = False
    public: bool = False


class TargetSpec(_In):
    """Public bounds of a regression/quantile target, used to scale ``y`` to [-1, 1]."""

    low: Bound
    high: Bound


Positive = Annotated[float, Field(gt=0, le=SETTING_MAX, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, le=SETTING_MAX, allow_inf_nan=False)]
GridList = Annotated[list[Lam], Field(min_length=1, max_length=100)]


class MechanismGrids(_In):
    """Optional hyperparameter grids: ``gamma`` for the trade-off job, ``lam``, ``mu``,
    ``sigma`` for its model selection (finite; ``gamma`` and ``lam`` positive)."""

    gamma: Annotated[list[GridGamma], Field(min_length=1, max_length=100)] | None = None
    lam: GridList | None = None
    mu: Annotated[list[Weight], Field(min_length=1, max_length=100)] | None = None
    sigma: Annotated[list[Weight], Field(min_length=1, max_length=100)] | None = None

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Stored and shown as before: only the grids that were given.
        return {k: v for k, v in handler(self).items() if v is not None}


class MechanismSettings(_In):
    """Mechanism settings; omitted fields take these documented defaults.

    ``gamma`` weights the expected payment in the allocation objective (spec
    ``mechanism.md`` §4.1), ``eps_avg_max`` is the largest average privacy loss ``L``,
    ``k`` caps weights at ``k/m``, ``u`` is the seller disutility ``ε`` or ``ε^p``;
    ``lam``, ``mu``, ``sigma`` are the ridge, spread and noise weights. Each numeric
    setting's accepted range is what the numerics can run (``SETTING_RANGES``,
    ``docs/money-and-settings.md``). ``grids`` holds
    optional hyperparameter grids (e.g. ``{"gamma": [...]}`` for the trade-off job).
    ``mode`` defaults to ``"strict"``: the allocation sees only costs and
    public data, so the released model's guarantee is end to end; measured on
    Wisconsin at the demo's settings it costs +0.0003 test error against
    ``"default"`` (95 % CI ± 0.0027; ``benchmarks/privacy_mode_cost.py``).
    """

    gamma: Gamma = 1.0
    eps_avg_max: EpsAvgMax = 5.0
    k: KCap = 4.0
    u: Literal["linear", "power"] = "linear"
    u_power: UPower = 2.0
    lam: Lam = 1e-2
    mu: Weight = 0.1
    sigma: Weight = 1.0
    mode: Literal["default", "strict"] = "strict"
    grids: MechanismGrids = Field(default_factory=MechanismGrids)


class MechanismUpdate(_In):
    """Partial mechanism settings for ``PATCH``; given fields replace current ones."""

    gamma: Gamma | None = None
    eps_avg_max: EpsAvgMax | None = None
    k: KCap | None = None
    u: Literal["linear", "power"] | None = None
    u_power: UPower | None = None
    lam: Lam | None = None
    mu: Weight | None = None
    sigma: Weight | None = None
    mode: Literal["default", "strict"] | None = None
    grids: MechanismGrids | None = None


class RecordIn(_In):
    """One record: JSON numbers only (``true``/``false`` and strings are refused, not
    read as 1/0); finiteness, length and bounds are checked against the market, naming
    the record and index (``null`` only for a feature the market declares
    ``missable``)."""

    x: Annotated[list[float | None], Field(max_length=10_000)]
    y: float


class KeyedRecordIn(_In):
    """One record of a vertical market's offer: the public record ``key`` (a
    pseudonymous string), the party's own feature values ``x`` and, from the label
    holder (the market's first party) only, the label ``y``."""

    key: Name
    x: Annotated[list[float | None], Field(max_length=10_000)]
    y: float | None = None


class PartySpec(_In):
    """A party of a vertical market and the features (by name) it holds."""

    name: Name
    features: Annotated[list[Name], Field(max_length=1000)]


class MarketCreate(_In):
    """``partition: "vertical"`` declares a market whose sellers are parties holding
    column blocks of the same records, linked by the public ``record_key``; ``parties``
    lists each party's features (every feature in exactly one party; the first party
    holds the label)."""

    name: Name
    task: Task
    features: Annotated[list[FeatureSpec], Field(min_length=1, max_length=1000)]
    cost_prior: CostPriorSpec
    mechanism: MechanismSettings = Field(default_factory=MechanismSettings)
    validation: Annotated[list[RecordIn], Field(max_length=100_000)] | None = None
    lifetime_epsilon_cap: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 10.0
    target: TargetSpec | None = None
    out_of_bounds: Literal["reject", "clip"] = "reject"
    partition: Literal["horizontal", "vertical"] = "horizontal"
    record_key: Name | None = None
    parties: Annotated[list[PartySpec], Field(max_length=100)] | None = None
    custody: Custody = "platform"
    """``"seller"``: the records never leave their sellers; offers carry only
    ``reported_cost``, ``max_epsilon`` and ``n_records``, the mechanism must run in
    ``mode: "strict"``, and orders take only learners that run as a local protocol."""


class MarketUpdate(_In):
    name: Name | None = None
    mechanism: MechanismUpdate | None = None
    lifetime_epsilon_cap: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = (
        None
    )


class MarketPublic(BaseModel):
    id: int
    name: str
    task: str
    features: list[dict[str, Any]]
    target: dict[str, Any] | None
    out_of_bounds: str
    cost_prior: dict[str, Any]
    mechanism: dict[str, Any]
    parameters_version: int
    lifetime_epsilon_cap: float
    validation_size: int
    partition: str = "horizontal"
    record_key: str | None = None
    parties: list[dict[str, Any]] | None = None
    custody: str = "platform"
    created_at: UtcDatetime


# --- offers ---------------------------------------------------------------------


RECORDS_MAX = 100_000
"""Most records in one offer (and the largest ``n_records`` a seller may declare)."""


class OfferCreate(_In):
    """``party`` and keyed records (``{"key", "x", "y"?}``) in vertical markets only.

    A seller-custody market's offer carries no ``records``: only ``n_records``, the
    public count of records its seller holds (and answers report requests for);
    a platform-custody offer carries ``records`` and no ``n_records``.
    """

    records: (
        Annotated[
            list[RecordIn | KeyedRecordIn], Field(min_length=1, max_length=RECORDS_MAX)
        ]
        | None
    ) = None
    n_records: Annotated[int, Field(ge=1, le=RECORDS_MAX)] | None = None
    keys: Annotated[list[Name], Field(min_length=1, max_length=RECORDS_MAX)] | None = (
        None
    )
    """Seller-custody vertical markets: the party's pseudonymous record keys (the one
    thing parties learn about each other); its values stay on its node."""
    party: Name | None = None
    reported_cost: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    max_epsilon: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None


class OfferPublic(BaseModel):
    """An offer as its owner sees it (the only response that carries records)."""

    id: int
    market_id: int
    seller_id: int
    status: str
    reported_cost: float
    max_epsilon: float | None
    n_records: int
    records: list[dict[str, Any]]
    replaces_id: int | None
    party: str | None = None
    created_at: UtcDatetime


class OfferSummary(BaseModel):
    """An offer in its owner's list (``GET /v1/sellers/me/offers``): no records."""

    id: int
    market_id: int
    status: str
    reported_cost: float
    max_epsilon: float | None
    n_records: int
    created_at: UtcDatetime


class OfferSummaries(BaseModel):
    items: list[OfferSummary]


class MarketOfferSummary(OfferSummary):
    """An offer in a market's list for admins (``GET /v1/markets/{id}/offers``): its
    seller, no records."""

    seller_id: int
    seller_name: str


# --- orders and jobs ------------------------------------------------------------


class OrderCreate(_In):
    learner: LearnerName
    budget: Annotated[float, Field(gt=0, allow_inf_nan=False, le=1e12)]
    gamma: Gamma | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class LearnerPublic(BaseModel):
    name: str
    tasks: list[str]
    partition: str = "horizontal"
    privacy_model: str
    seller_custody: bool = False
    """Whether the learner runs as a local protocol, so a seller-custody market (whose
    records stay with their sellers) can take it."""
    min_records_per_seller: int
    missing_values: bool = False
    mechanism_loss: str
    summary: str
    params: dict[str, dict[str, Any]]


class LearnersPublic(BaseModel):
    items: list[LearnerPublic]


class Progress(BaseModel):
    stage: str
    fraction: float


class OrderPublic(BaseModel):
    id: int
    market_id: int
    status: str
    learner: str
    budget: float
    gamma: float | None
    parameters_version: int
    progress: Progress
    error: str | None
    summary: dict[str, Any] | None
    created_at: UtcDatetime


class OrderAccepted(BaseModel):
    id: int
    status: str


class AllocationPublic(BaseModel):
    seller_id: int
    offer_id: int
    reported_cost: float
    epsilon: float
    payment: float
    payment_minor: int
    privacy_cost: float
    """``c·u(ε)``: the reported cost of the privacy given (the IR line)."""
    individually_rational: bool
    """``payment ≥ c·u(ε)`` in the whole minor units paid, without slack."""
    certificate: dict[str, Any] | None = None


class EpsilonHistogram(BaseModel):
    """``ε`` of every seller in an order's allocation in equal-width bins from the
    smallest (``low``) to the largest (``high``); ``counts[j]`` sellers fall in bin
    ``j`` (the largest ``ε`` in the last bin)."""

    low: float
    high: float
    counts: list[int]


class AllocationsPublic(BaseModel):
    """One page of an order's per-seller allocation (``items``, by seller id), with
    figures over the whole allocation: ``total`` sellers, ``sellers_used`` with
    ``ε > 0``, ``total_payment``, ``individually_rational`` and the ``ε`` histogram."""

    order_id: int
    items: list[AllocationPublic]
    total_payment: float
    individually_rational: int = 0
    """How many of the order's sellers IR holds for (``items[*].individually_rational``
    over every page)."""
    total: int = 0
    """Sellers in the order's allocation (every page)."""
    limit: int = 0
    offset: int = 0
    sellers_used: int = 0
    """Sellers given ``ε > 0`` (every page)."""
    epsilon_histogram: EpsilonHistogram | None = None
    """``None`` when the allocation is empty."""


class TradeoffRequest(_In):
    """Optional ``γ`` grid for the trade-off job (default: ``mechanism.grids["gamma"]``
    or 8 points log-spaced over ``[10⁻², 10²]``), and the learner whose pricing the
    curve uses (default: the first registered learner of the market's task)."""

    gammas: Annotated[list[GridGamma], Field(min_length=1, max_length=50)] | None = None
    learner: LearnerName | None = None
    params: dict[str, Any] | None = None


class JobAccepted(BaseModel):
    job_id: int


class JobPublic(BaseModel):
    id: int
    kind: str
    market_id: int | None
    status: str
    progress: Progress
    error: str | None
    points: list[dict[str, Any]] | None = None
    result: dict[str, Any] | None = None


# --- seller views ---------------------------------------------------------------


class EarningsItem(BaseModel):
    order_id: int
    market_id: int
    epsilon: float
    payment: float


class EarningsPublic(BaseModel):
    items: list[EarningsItem]
    total_payment: float


class PrivacyItem(BaseModel):
    market_id: int
    epsilon_spent: float
    lifetime_epsilon_cap: float
    remaining: float


class PrivacyPublic(BaseModel):
    items: list[PrivacyItem]


# --- bulk ingestion (admin) -------------------------------------------------------

BULK_MAX_OFFERS = 100_000
"""Most offers in one ``POST /v1/markets/{id}/offers:bulk`` request."""


class BulkOfferIn(OfferCreate):
    """One row of a bulk upload: a seller's offer, validated by exactly the rules of
    ``OfferCreate`` (it *is* one), plus whose it is: ``seller_id`` of an existing
    seller account, or ``seller_name`` to create the seller account with the offer
    (its API key is returned once, in the response)."""

    seller_id: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    seller_name: Name | None = None

    @model_validator(mode="after")
    def _one_seller(self) -> "BulkOfferIn":
        if (self.seller_id is None) == (self.seller_name is None):
            raise ValueError("give exactly one of seller_id and seller_name")
        return self


class BulkOffersCreate(_In):
    offers: Annotated[
        list[BulkOfferIn], Field(min_length=1, max_length=BULK_MAX_OFFERS)
    ]


class BulkOfferCreated(BaseModel):
    """One stored row: its index in the request, the new offer and its seller; the
    seller's API key only for sellers created by this request (shown once)."""

    index: int
    offer_id: int
    seller_id: int
    api_key: str | None = None


class BulkOffersCreated(BaseModel):
    market_id: int
    created: int
    sellers_created: int
    items: list[BulkOfferCreated]


# --- seller custody: report rounds ------------------------------------------------


class ReportRequestPublic(BaseModel):
    """One report request as its seller sees it: the order and round, the randomizer
    (``"<learner>.<randomizer>@<version>"``), this seller's ε share for the round, the
    round's public parameters, the deadline and whether it was answered."""

    id: int
    order_id: int
    market_id: int
    round: int
    randomizer: str
    epsilon: float
    public: dict[str, Any]
    request: dict[str, Any]
    """The request exactly as the learner's protocol published it (what the seller's
    client passes to ``learners.local_protocol.answer_request``)."""
    deadline: UtcDatetime
    status: str
    answered_at: UtcDatetime | None = None


class ReportRequestsPublic(BaseModel):
    items: list[ReportRequestPublic]


class ReportIn(_In):
    """A seller's randomized report for one request: the randomizer's output only
    (checked against its output space: fields, shape, finiteness, alphabet)."""

    report: dict[str, Any]


class ReportAccepted(BaseModel):
    request_id: int
    order_id: int
    round: int
    status: str


class CollectionSeller(BaseModel):
    """Admin view: one allocated seller of a seller-custody order and what it sent."""

    seller_id: int
    offer_id: int
    epsilon_allocated: float
    epsilon_spent: float
    payment_at_allocation: float
    rounds_answered: int
    delivered: bool | None


class CollectionPublic(BaseModel):
    """A seller-custody order's collecting stage: the current round, its deadline,
    reports received / expected in it and in total; admins also see each seller."""

    order_id: int
    status: str
    round: int
    deadline: UtcDatetime | None
    round_reports_expected: int
    round_reports_received: int
    reports_expected: int
    reports_received: int
    sellers: list[CollectionSeller] | None = None


# --- party nodes (seller-custody vertical markets) -------------------------------


class NodeRegister(_In):
    """Where a party's node listens for the other MPyC parties and which features its
    block holds (no values)."""

    party: Name
    host: Annotated[str, Field(min_length=1, max_length=253)]
    port: int
    features: Annotated[list[Name], Field(min_length=1, max_length=10_000)]


class NodePublic(BaseModel):
    """A party's node as its owner sees it."""

    id: int
    market_id: int
    party: str
    host: str
    port: int
    features: list[str]
    status: str
    last_seen_at: UtcDatetime
    last_session_id: int | None = None
    last_session_status: str | None = None


class SessionPublic(BaseModel):
    """An open fit session as a node sees it: the public plan, every MPyC party's
    ``host:port`` (index order), this node's ``index`` and the deadline."""

    id: int
    order_id: int
    status: str
    addresses: list[str]
    tls: bool = False
    deadline_at: UtcDatetime
    error: str | None = None
    index: int | None = None
    plan: dict[str, Any] | None = None


class SessionList(BaseModel):
    items: list[SessionPublic]


class SessionReport(_In):
    """How a node's side of a session ended."""

    party: Name
    status: Literal["succeeded", "failed"]
    reason: Annotated[str, Field(max_length=2000)] | None = None
