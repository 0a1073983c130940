"""What an orderable learner declares about itself: :class:`LearnerSpec`.

The market never branches on a learner's name. Everything it needs to price, check and
run an order is declared here, once per learner, as public data:

- ``tasks``: the market tasks it can train (``classification``, ``regression``,
  ``quantile``);
- ``privacy_model``: who holds what when the noise is added (``central``, ``local``,
  ``user_level_local``, ``mpc``);
- ``min_records_per_seller``: more than 1 when the privacy unit is the seller with all
  its records (the fit then takes ``groups=``);
- ``mechanism_loss``: the per-record loss the mechanism prices it with (spec
  ``mechanism.md`` §7);
- ``overhead``: the release's per-seller term added to the allocated ``ε_i`` (spec §3:
  ``"objective_perturbation"`` is ``Δ_i = 2 ln(1 + a_i/(4λ))``; ``"none"`` for local
  learners, whose randomizers spend exactly the ``ε_i`` they are given);
- ``missing_values``: whether ``fit`` takes ``np.nan`` for a missing covariate (a
  market with ``missable`` features can only order such learners);
- ``partition``: ``horizontal`` (``fit(X, y)`` on whole records) or ``vertical``
  (``fit(blocks, y)`` on per-party column blocks keyed by record; markets declared
  ``partition: "vertical"`` take only such learners);
- ``params``: the buyer-settable parameters with types, defaults and bounds
  (:class:`ParamSpec`), validated by :func:`check_params` with the field named;
- ``priced_params``: which of those parameters the mechanism prices with, as
  ``(param, MechanismConfig field)`` pairs (a quantile learner's ``alpha`` is the
  pinball loss's ``quantile``, so the allocation values the model the buyer ordered);
- ``market_check``: a check of the params against the market's public feature schema
  (e.g. how many features a protocol can privatise), run when the order is placed so
  an order that cannot run is refused with ``422`` instead of failing later;
- ``local_protocol``: for ``local`` / ``user_level_local`` learners, the builder of
  the learner's rounds of report requests (:mod:`learners.local_protocol`), called as
  ``local_protocol(params, context=..., epsilon=..., n_records=..., random_state=None)``
  with the order's checked params, its :class:`~learners.registry.ReleaseContext`,
  each allocated seller's ``ε_i`` and how many records it holds (public). A learner
  with one supports seller custody (:attr:`LearnerSpec.seller_custody`): the market
  never receives its records, only randomized reports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from learners.privacy import curvature_slack

Task = Literal["classification", "regression", "quantile"]
PrivacyModel = Literal["central", "local", "user_level_local", "mpc"]
Overhead = Literal["objective_perturbation", "none"]
ParamKind = Literal["float", "int", "bool", "choice", "interval"]
MarketCheck = Callable[[Mapping[str, Any], Sequence[Mapping[str, Any]]], None]
ProtocolBuilder = Callable[..., Any]
"""``build(params, *, context, epsilon, n_records, random_state=None)`` → a
:class:`learners.local_protocol.LocalProtocol`."""
LOCAL_PRIVACY_MODELS: tuple[str, ...] = ("local", "user_level_local")
"""``check(params, features)``: raises :class:`ParamError` when the checked ``params``
cannot run on a market with these public ``features``."""

TASKS: tuple[str, ...] = ("classification", "regression", "quantile")
PRIVACY_MODELS: tuple[str, ...] = ("central", "local", "user_level_local", "mpc")
OVERHEADS: tuple[str, ...] = ("objective_perturbation", "none")


class ParamError(ValueError):
    """A buyer parameter is unknown or invalid; ``field`` names it (``params.<name>``)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.field = f"params.{name}"
        self.reason = message


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamSpec:
    """One buyer-settable learner parameter.

    Attributes
    ----------
    name : str
    kind : {"float", "int", "bool", "choice", "interval"}
        ``interval``: a list ``[low, high]`` of two finite numbers with ``low < high``
        (returned as a list of two floats).
    default : object
        Used when the order does not give the parameter.
    low, high : float or None
        Bounds of a numeric parameter (``None``: unbounded on that side); inclusive
        unless ``exclusive_low`` / ``exclusive_high``.
    exclusive_low, exclusive_high : bool
        Make the corresponding bound strict (e.g. a level in the open ``(0, 1)``).
    nullable : bool
        ``None`` (JSON ``null``) is a valid value, meaning what ``doc`` says.
    choices : tuple of str
        Allowed values of a ``choice`` parameter.
    doc : str
        One line shown to buyers by ``GET /v1/learners``.
    """

    name: str
    kind: ParamKind
    default: Any
    doc: str
    low: float | None = None
    high: float | None = None
    exclusive_low: bool = False
    exclusive_high: bool = False
    nullable: bool = False
    choices: tuple[str, ...] = ()

    def check(self, value: Any) -> Any:
        """Return ``value`` converted to the parameter's type, or raise :class:`ParamError`."""
        if value is None and self.nullable:
            return None
        if self.kind == "interval":
            return self._check_interval(value)
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ParamError(self.name, f"must be true or false, got {value!r}")
            return value
        if self.kind == "choice":
            if value not in self.choices:
                raise ParamError(self.name, f"must be one of {list(self.choices)}")
            return value
        return self._check_number(value)

    def _check_number(self, value: Any) -> float | int:
        ok_type = int if self.kind == "int" else (int, float)
        if isinstance(value, bool) or not isinstance(value, ok_type):
            raise ParamError(
                self.name,
                f"must be a{'n integer' if self.kind == 'int' else ' number'}, got {value!r}",
            )
        if not math.isfinite(float(value)):
            raise ParamError(self.name, f"must be finite, got {value!r}")
        if self.low is not None and (
            value <= self.low if self.exclusive_low else value < self.low
        ):
            op = ">" if self.exclusive_low else ">="
            raise ParamError(self.name, f"must be {op} {self.low:g}, got {value!r}")
        if self.high is not None and (
            value >= self.high if self.exclusive_high else value > self.high
        ):
            op = "<" if self.exclusive_high else "<="
            raise ParamError(self.name, f"must be {op} {self.high:g}, got {value!r}")
        return int(value) if self.kind == "int" else float(value)

    def _check_interval(self, value: Any) -> list[float]:
        ok = (
            isinstance(value, list | tuple)
            and len(value) == 2
            and all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in value
            )
        )
        if not ok:
            raise ParamError(
                self.name, f"must be a list [low, high] of two numbers, got {value!r}"
            )
        low, high = float(value[0]), float(value[1])
        if not (math.isfinite(low) and math.isfinite(high)):
            raise ParamError(self.name, f"must be finite, got {value!r}")
        if not low < high:
            raise ParamError(
                self.name,
                f"must be a non-empty interval with low < high, got {value!r}",
            )
        return [low, high]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe description (``GET /v1/learners``)."""
        out: dict[str, Any] = {
            "type": self.kind,
            "default": self.default,
            "doc": self.doc,
        }
        if self.low is not None:
            out["exclusiveMinimum" if self.exclusive_low else "minimum"] = self.low
        if self.high is not None:
            out["exclusiveMaximum" if self.exclusive_high else "maximum"] = self.high
        if self.nullable:
            out["nullable"] = True
        if self.choices:
            out["choices"] = list(self.choices)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class LearnerSpec:
    """The public declaration of an orderable learner (module docstring)."""

    name: str
    tasks: tuple[Task, ...]
    privacy_model: PrivacyModel
    mechanism_loss: Literal["logistic", "squared", "pinball"]
    overhead: Overhead = "none"
    min_records_per_seller: int = 1
    missing_values: bool = False
    partition: Literal["horizontal", "vertical"] = "horizontal"
    params: tuple[ParamSpec, ...] = field(default=())
    priced_params: tuple[tuple[str, str], ...] = field(default=())
    market_check: MarketCheck | None = None
    summary: str = ""
    local_protocol: ProtocolBuilder | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier():
            raise ValueError(f"name must be an identifier, got {self.name!r}")
        bad = [t for t in self.tasks if t not in TASKS]
        if not self.tasks or bad:
            raise ValueError(
                f"tasks must be a non-empty subset of {TASKS}, got {self.tasks!r}"
            )
        if self.privacy_model not in PRIVACY_MODELS:
            raise ValueError(
                f"privacy_model must be one of {PRIVACY_MODELS}, got {self.privacy_model!r}"
            )
        if self.overhead not in OVERHEADS:
            raise ValueError(
                f"overhead must be one of {OVERHEADS}, got {self.overhead!r}"
            )
        if self.partition not in ("horizontal", "vertical"):
            raise ValueError(
                f"partition must be horizontal or vertical, got {self.partition!r}"
            )
        if self.min_records_per_seller < 1:
            raise ValueError("min_records_per_seller must be >= 1")
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"params of {self.name!r} repeat a name: {names}")
        for p in self.params:
            p.check(p.default)
        unknown = [name for name, _ in self.priced_params if name not in names]
        if unknown:
            raise ValueError(f"priced_params of {self.name!r} name no param: {unknown}")

    @property
    def several_records_per_seller(self) -> bool:
        """Whether the privacy unit is a seller with all its records (``groups=``)."""
        return self.min_records_per_seller > 1

    def overhead_epsilon(
        self, weights: ArrayLike, *, lam: float
    ) -> NDArray[np.float64]:
        """Per-seller release term ``Δ_i`` added to ``ε_i = a_i η`` (spec §3).

        ``objective_perturbation``: ``Δ_i = 2 ln(1 + a_i/(4λ))``; ``none``: zeros.
        """
        a = np.asarray(weights, dtype=float)
        if self.overhead == "objective_perturbation":
            return curvature_slack(a, lam)
        return np.zeros_like(a)

    def overhead_bound(self, *, k: float, n_sellers: int, lam: float) -> float:
        """Largest ``Δ_i`` any seller can get with ``a_i ≤ min(k/m, 1)`` (for caps)."""
        a_max = min(k / n_sellers, 1.0)
        return float(self.overhead_epsilon(np.array([a_max]), lam=lam)[0])

    def check_params(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Return every parameter with defaults filled in.

        Raises
        ------
        ParamError
            An unknown parameter, or a value of the wrong type or out of bounds (the
            error's ``field`` is ``params.<name>``).
        """
        given = dict(params or {})
        known = {p.name: p for p in self.params}
        for name in given:
            if name not in known:
                allowed = ", ".join(sorted(known)) or "none"
                raise ParamError(
                    name, f"is not a parameter of {self.name!r} (allowed: {allowed})"
                )
        return {
            name: p.check(given[name]) if name in given else p.default
            for name, p in known.items()
        }

    def mechanism_options(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The ``MechanismConfig`` fields set by the checked ``params``
        (``priced_params``), e.g. ``{"quantile": 0.9}`` for ``alpha = 0.9``."""
        return {
            config_field: params[name]
            for name, config_field in self.priced_params
            if params.get(name) is not None
        }

    def check_market(
        self, params: Mapping[str, Any], features: Sequence[Mapping[str, Any]]
    ) -> None:
        """Run ``market_check`` on checked ``params`` and the market's ``features``.

        Raises
        ------
        ParamError
            The order cannot run on this market (``field`` names the parameter).
        """
        if self.market_check is not None:
            self.market_check(params, features)

    @property
    def seller_custody(self) -> bool:
        """True when the learner can run with records kept by their sellers: a
        ``local`` or ``user_level_local`` privacy model and a ``local_protocol``."""
        return (
            self.privacy_model in LOCAL_PRIVACY_MODELS
            and self.local_protocol is not None
        )

    def build_protocol(
        self,
        params: Mapping[str, Any],
        *,
        context: Any = None,
        epsilon: Sequence[float],
        n_records: Sequence[int],
        random_state: Any = None,
    ) -> Any:
        """The order's :class:`~learners.local_protocol.LocalProtocol` (seller custody).

        Raises
        ------
        ValueError
            The learner does not support seller custody (field ``learner``), or the
            inputs are invalid (named).
        """
        if not self.seller_custody or self.local_protocol is None:
            raise ValueError(
                f"learner: {self.name!r} (privacy model {self.privacy_model}) cannot "
                "run with records kept by their sellers"
            )
        return self.local_protocol(
            params,
            context=context,
            epsilon=epsilon,
            n_records=n_records,
            random_state=random_state,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe description (``GET /v1/learners`` items)."""
        return {
            "name": self.name,
            "seller_custody": self.seller_custody,
            "tasks": list(self.tasks),
            "privacy_model": self.privacy_model,
            "min_records_per_seller": self.min_records_per_seller,
            "mechanism_loss": self.mechanism_loss,
            "missing_values": self.missing_values,
            "partition": self.partition,
            "summary": self.summary,
            "params": {p.name: p.to_dict() for p in self.params},
        }
