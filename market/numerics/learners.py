"""The learner registry's adapter: learner specs, order checks, building a learner
for an order and fitting it (the release).

Learners are reached only through the registry (``learners.LEARNERS``): the market never
branches on a learner's name.
"""

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from learners import (
    LEARNERS,
    LearnerSpec,
    ParamError,
    ReleaseContext,
    SessionPlan,
    TLSFiles,
    align_by_key,
    finish_session,
    plan_session,
    run_party,
)
from market.errors import InvalidInputError

FloatArray = NDArray[np.float64]


def learner_spec(name: str) -> LearnerSpec:
    """The registered learner's spec; ``InvalidInputError`` on ``learner`` otherwise."""
    if name not in LEARNERS:
        raise InvalidInputError(
            "learner", f"unknown learner {name!r}; known: {sorted(LEARNERS)}"
        )
    return LEARNERS.spec(name)


def list_learners() -> list[dict[str, Any]]:
    """Every registered learner's public description (``GET /v1/learners``)."""
    return [spec.to_dict() for spec in LEARNERS.specs()]


def has_missable(features: Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether any of the market's ``features`` is declared ``missable``."""
    return any(bool(f.get("missable", False)) for f in features or ())


def market_refusal(
    name: str,
    *,
    task: str,
    partition: str = "horizontal",
    features: Sequence[Mapping[str, Any]] | None = None,
) -> str | None:
    """Why a market (its ``task``, ``partition`` and ``features``) cannot take learner
    ``name`` before any parameter is looked at, or None when it can: the same rules
    :func:`check_order_learner` enforces on an order's ``learner``."""
    spec = learner_spec(name)
    if task not in spec.tasks:
        return f"{name} cannot train a {task} market (it serves {list(spec.tasks)})"
    if spec.partition != partition:
        return f"{name} trains {spec.partition} data; this market is {partition}"
    if has_missable(features) and not spec.missing_values:
        return f"{name} cannot take missing values; this market has missable features"
    return None


def check_order_learner(
    name: str,
    params: Mapping[str, Any],
    *,
    task: str,
    features: Sequence[Mapping[str, Any]] | None = None,
    partition: str = "horizontal",
) -> dict[str, Any]:
    """Validate an order's ``learner`` against the registry, the market's task and
    ``features`` (a market with ``missable`` ones needs a learner that takes missing
    values), and its ``params`` against the learner's schema; return the params with
    defaults.

    Raises
    ------
    InvalidInputError
        Field ``learner`` or ``params.<name>``.
    """
    spec = learner_spec(name)
    if task not in spec.tasks:
        raise InvalidInputError(
            "learner",
            f"{name} cannot train a {task} market (it serves {list(spec.tasks)})",
        )
    if spec.partition != partition:
        raise InvalidInputError(
            "learner",
            f"{name} trains {spec.partition} data; this market is {partition}",
        )
    if has_missable(features) and not spec.missing_values:
        raise InvalidInputError(
            "learner",
            f"{name} cannot take missing values; this market has missable features",
        )
    try:
        checked = spec.check_params(params)
        spec.check_market(checked, features or ())
    except ParamError as exc:
        raise InvalidInputError(exc.field, exc.reason) from exc
    return checked


def records_per_seller_shortfall(name: str, counts: Sequence[int]) -> str | None:
    """Why sellers with ``counts`` records cannot feed learner ``name``, or None.

    A learner whose privacy unit is the seller with all its records
    (``min_records_per_seller > 1``) needs that many records from every seller; any
    other learner prices exactly one record per seller, except a vertical one, whose
    sellers are parties each offering a column block of many records.
    """
    spec = learner_spec(name)
    if spec.partition == "vertical":
        return None
    need = spec.min_records_per_seller
    short = sum(1 for n in counts if n < need)
    if short:
        return (
            f"{name} needs at least {need} records per seller; {short} of "
            f"{len(counts)} sellers have fewer"
        )
    if not spec.several_records_per_seller and any(n != 1 for n in counts):
        many = sum(1 for n in counts if n != 1)
        return (
            f"{name} prices exactly one record per seller; {many} of {len(counts)} "
            "sellers offer several"
        )
    return None


def default_learner(
    task: str,
    features: Sequence[Mapping[str, Any]] | None = None,
    partition: str = "horizontal",
) -> str:
    """The registered learner a trade-off job uses for ``task`` (first by name; one
    that takes missing values when ``features`` has a missable one).

    Raises
    ------
    InvalidInputError
        No registered learner serves ``task``.
    """
    missable = has_missable(features)
    names = [
        s.name
        for s in LEARNERS.specs()
        if task in s.tasks
        and (s.missing_values or not missable)
        and s.partition == partition
    ]
    if not names:
        raise InvalidInputError(
            "learner", f"no registered learner serves {task} markets"
        )
    return names[0]


def _release_context(
    config: Any, *, task: str, schema: Mapping[str, Any] | None
) -> ReleaseContext:
    return ReleaseContext(
        lam=float(config.lam),
        allocation_uses_data=config.mode != "strict",
        task=task,
        market=dict(schema or {}),
    )


def build_learner(
    name: str,
    params: Mapping[str, Any],
    *,
    config: Any,
    task: str,
    schema: Mapping[str, Any] | None = None,
) -> Any:
    """The learner of an order, bound to the mechanism's ``λ`` and mode and told the
    market's public ``schema``."""
    ctx = _release_context(config, task=task, schema=schema)
    return LEARNERS[name].for_order(params, context=ctx)


@dataclasses.dataclass(frozen=True, eq=False)
class LearnerRelease:
    """The ordered learner as the tuning code's ``release(X, y, allocation, rng)``.

    ``mechanisms.tuning`` scores a ``(λ, μ, σ, γ)`` grid point by the validation error
    of the model released at its allocation (spec ``mechanism.md`` §4.3) on a **public
    proxy** of the sellers' records: rows drawn from the market's public validation
    set (``mechanisms.tuning.public_validation_error``). Left to its default it
    releases objective-perturbation logistic regression, which is not what the buyer
    ordered. This adapter fits the registry learner instead, as the order will, on the
    proxy rows it is given: proxy record ``j`` belongs to seller ``groups[j]`` and
    spends that seller's allocated ``ε``, the learner bound to the grid point's ``λ``;
    its noise comes from the tuning code's ``rng``. It holds no record: ``groups``
    (how many records each seller offers) is the order's public shape, the one a
    seller-custody protocol publishes. The fitted learner's ``predict`` takes the
    market's scaled records, so the validation rows given with it are the scaled
    records, not the priced rows.
    """

    name: str
    params: Mapping[str, Any]
    context: ReleaseContext
    groups: NDArray[np.int64]

    @property
    def n_rows(self) -> int:
        """Proxy rows per release: one per record of the order."""
        return int(self.groups.size)

    def __call__(
        self, X: FloatArray, y: FloatArray, allocation: Any, rng: np.random.Generator, /
    ) -> Any:
        if np.asarray(X).shape[0] != self.groups.size:
            raise ValueError(
                f"X: the release takes {self.groups.size} proxy rows (one per record), "
                f"got {np.asarray(X).shape[0]}"
            )
        ctx = dataclasses.replace(self.context, lam=float(allocation.config.lam))
        learner = LEARNERS[self.name].for_order(self.params, context=ctx)
        learner.set_params(random_state=rng)  # type: ignore[attr-defined]
        eps = np.asarray(allocation.epsilon, dtype=float)[self.groups]
        return learner.fit(X, y, sample_epsilon=eps, groups=self.groups)


def learner_release(
    name: str,
    params: Mapping[str, Any],
    *,
    config: Any,
    task: str,
    schema: Mapping[str, Any] | None,
    groups: NDArray[np.int64],
) -> LearnerRelease:
    """:class:`LearnerRelease` for an order's learner and the order's seller shape
    (``groups[j]``: the seller of record ``j``); it is given public proxy rows only."""
    ctx = _release_context(config, task=task, schema=schema)
    return LearnerRelease(name, dict(params), ctx, np.asarray(groups, dtype=np.int64))


def release_vertical(
    learner: Any, blocks: list[FloatArray], y: FloatArray, *, party_epsilon: FloatArray
) -> Any:
    """Fit a vertical learner on the parties' aligned blocks, each party's ``ε``
    applying to all its records (noise from OS entropy)."""
    return learner.fit(blocks, y, party_epsilon=party_epsilon)


SESSION_PARAMS = (
    "lam", "reveal", "max_iter", "dp_iterations", "imputation", "n_components",
    "covariance", "em_max_iter", "em_reveal",
)  # fmt: skip


def vertical_session_plan(
    learner: Any,
    *,
    parties: Sequence[str],
    keys: Sequence[Sequence[str]],
    widths: Sequence[int],
    party_epsilon: Sequence[float] | None,
) -> dict[str, Any]:
    """The public plan of a fit between party nodes
    (``learners.secure_vertical.plan_session``), from the order's built learner and
    the parties' key lists; ``party_epsilon`` None releases without DP (tests only).

    Raises
    ------
    ValueError
        ``params.backend``: the learner does not run in MPC (the parties' blocks never
        reach the platform, so only ``"mpc"`` can fit them); a plan the learner refuses
        (the message names the parameter).
    """
    if getattr(learner, "backend", None) != "mpc":
        raise ValueError(
            "params.backend: a market whose parties keep their blocks fits with "
            "backend 'mpc' between the party nodes"
        )
    params = {k: getattr(learner, k) for k in SESSION_PARAMS}
    params["tol"] = float(learner.tol) if learner.tol is not None else 1e-6
    plan = plan_session(parties, keys, widths, params=params,
                        party_epsilon=party_epsilon, labels="pm")  # fmt: skip
    plan.derive()  # refuse now what every party would refuse
    return plan.to_json()


def vertical_session_processes(plan: Mapping[str, Any]) -> int:
    """MPyC parties of a plan: the ``K`` data parties and the platform's compute party
    (the last index)."""
    return len(plan["parties"]) + 1


def run_compute_party(
    plan: Mapping[str, Any], index: int, addresses: Sequence[str], *,
    connect_timeout: float, timeout: float, tls: Sequence[str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Run the platform's compute party (no data) of a session; its opened outputs.

    Raises
    ------
    RuntimeError
        ``learners.secure_vertical.SessionFailed``: a node dropped out or never
        connected, or the deadline passed (the message names the party).
    """
    sp = SessionPlan.from_json(plan)
    listen = addresses[index].rsplit(":", 1)[0]
    files = None if tls is None else TLSFiles(*[str(f) for f in tls])
    return run_party(sp, index, list(addresses), None, listen_host=listen, tls=files,
                     connect_timeout=connect_timeout, timeout=timeout)  # fmt: skip


def replace_report(report: Any, **changes: Any) -> Any:
    """``report`` (a ``PrivacyReport``, or None) with ``changes`` (e.g. ``custody``)."""
    return None if report is None else dataclasses.replace(report, **changes)


def finish_vertical_session(plan: Mapping[str, Any], output: Mapping[str, Any]) -> Any:
    """The fitted learner of a session from its opened outputs only."""
    return finish_session(SessionPlan.from_json(plan), output)


def align_blocks(
    keys: Sequence[Sequence[str]], values: Sequence[FloatArray]
) -> tuple[list[str], list[FloatArray]]:
    """Align per-party blocks on the record key (``learners.secure_vertical.align_by_key``).

    Raises
    ------
    ValueError
        A duplicate or malformed key (``keys[k]`` named).
    """
    return align_by_key(keys, values)


def release(
    learner: Any,
    X: FloatArray,
    y: FloatArray,
    *,
    sample_epsilon: FloatArray,
    groups: Any,
) -> Any:
    """Fit ``learner`` spending the allocated per-record ``ε`` (its noise from OS
    entropy: the market never passes a ``random_state``); returns the fitted learner."""
    return learner.fit(X, y, sample_epsilon=sample_epsilon, groups=groups)
