"""Seller custody: a local learner run as rounds of report requests.

Interface notes (additions to the shared report-round interface, nothing removed):

- the learner's builder is ``LearnerSpec.build_protocol(params, *, context, epsilon,
  n_records, random_state=None)`` (``LearnerSpec.local_protocol`` holds it;
  ``LearnerSpec.seller_custody`` says whether a learner has one): ``context`` is the
  order's :class:`~learners.registry.ReleaseContext`, whose ``market`` schema gives the
  feature count, the public bounds (sent to the sellers as ``public["scaling"]``) and
  the public features; ``random_state`` seeds only the protocol's public generator;
- :meth:`LocalProtocol.submit` takes ``check=False`` for answers computed in process;
  :meth:`LocalProtocol.finish_into` fills a given estimator (:meth:`result` a new one);
- :func:`seller_generators`, :func:`run_in_process`, :func:`run_vectorized`,
  :func:`market_scaling`, :func:`scale_records` are helpers for in-process runs and
  tests; ``PrivacyReport.custody`` is ``"platform"`` or ``"seller"``;
- :meth:`LocalProtocol.delivered` counts sellers that were sent at least one request
  and answered every one (a seller whose only message comes in a later round is not in
  it yet).

A local learner (privacy model ``local`` or ``user_level_local``) never needs a raw
record: every record (or every user, with all its records) is randomized on its
owner's side, and the curator computes from the randomized reports alone. This module
turns that into a protocol the platform can run without ever holding a record:

- the platform's :class:`LocalProtocol` publishes, round by round, one
  :class:`ReportRequest` per seller that has a message in that round
  (:meth:`LocalProtocol.next_round`): the round, the name and version of the
  randomizer, the seller's ε share for the round, and the round's public parameters
  (bounds, current iterate, selected support, ...);
- the seller answers with :func:`answer_request` on its own machine: it runs the named
  randomizer — the very function the library's ``fit`` calls — on its raw records and
  returns a JSON-able report;
- the platform checks with :func:`validate_report` that the report lies in the
  randomizer's output space (shape, finiteness, norm, alphabet) and hands the round's
  reports to :meth:`LocalProtocol.submit`; a seller absent from the submitted reports
  did not deliver and gets no further requests;
- after the last round :meth:`LocalProtocol.result` is the fitted learner, with a
  privacy report whose per-record ε is exactly what the randomizers were called with
  (sequential composition over the rounds a seller answered) and ``custody`` set.

The library's ``fit`` of each local learner runs the same protocol in process. With an
integer ``random_state`` it answers with one generator per seller spawned from it
(:func:`seller_generators`), so the seller-custody result equals the library fit on
the same reports bit for bit (tests); with a Generator or None, ``onebit_quantile`` and
``ldp_missing_logistic`` draw a round's answers at once from that one stream
(:func:`run_vectorized`; same randomizer functions, same law, much faster). Protocols are JSON-able between rounds
(:meth:`LocalProtocol.to_state` / :meth:`LocalProtocol.from_state`).

Units. Learners fit in the market's scaled units (``market/records.py``: feature
``x̃_j = (2(x_j − low_j)/(high_j − low_j) − 1)/√d``, a non-classification target
``ỹ = 2(y − lo)/(hi − lo) − 1``). A request built for a market carries that public
scaling (``public["scaling"]``); :func:`answer_request` clips the seller's raw values
to the public bounds and scales them before randomizing (public constants only; a
missing cell stays missing). Without ``scaling`` the records are used as given.

Randomizers are registered by ``"<learner>.<randomizer>@<version>"``
(:data:`RANDOMIZERS`); a version changes whenever the report format or the
distribution of a report changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
Custody = Literal["platform", "seller"]
CUSTODIES: tuple[str, ...] = ("platform", "seller")

__all__ = [
    "CUSTODIES",
    "RANDOMIZERS",
    "LocalProtocol",
    "Randomizer",
    "ReportRequest",
    "answer_request",
    "market_scaling",
    "register_protocol",
    "register_randomizer",
    "run_in_process",
    "run_vectorized",
    "seller_generators",
    "validate_report",
]


# ---------------------------------------------------------------------------
# requests


@dataclass(frozen=True, slots=True)
class ReportRequest:
    """One seller's request of one round.

    Attributes
    ----------
    round : int
        0-based round index of the protocol.
    randomizer : str
        ``"<learner>.<randomizer>@<version>"``, e.g. ``"onebit_quantile.bits@1"``.
    epsilon : float
        This seller's ε for this round (the shares of a seller add up to its ``ε_i``).
    public : dict
        JSON-able public parameters of the round (bounds, current iterate, which of
        the seller's records to answer for, the market's scaling, ...).
    """

    round: int
    randomizer: str
    epsilon: float
    public: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form (plain ints, floats, strings, lists and dicts)."""
        return {
            "round": int(self.round),
            "randomizer": self.randomizer,
            "epsilon": float(self.epsilon),
            "public": _jsonable(self.public),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ReportRequest:
        """Inverse of :meth:`to_json`; ``ValueError`` naming the bad field."""
        if not isinstance(d, Mapping):
            raise ValueError("request must be an object")
        for name in ("round", "randomizer", "epsilon", "public"):
            if name not in d:
                raise ValueError(f"request.{name}: missing")
        rnd = d["round"]
        if isinstance(rnd, bool) or not isinstance(rnd, int) or rnd < 0:
            raise ValueError(f"request.round: must be an integer >= 0, got {rnd!r}")
        if not isinstance(d["randomizer"], str) or d["randomizer"] not in RANDOMIZERS:
            raise ValueError(
                f"request.randomizer: unknown randomizer {d['randomizer']!r}; "
                f"known: {sorted(RANDOMIZERS)}"
            )
        eps = d["epsilon"]
        if (
            isinstance(eps, bool)
            or not isinstance(eps, int | float)
            or not math.isfinite(float(eps))
            or float(eps) <= 0
        ):
            raise ValueError(f"request.epsilon: must be finite and > 0, got {eps!r}")
        if not isinstance(d["public"], Mapping):
            raise ValueError("request.public: must be an object")
        return cls(int(rnd), d["randomizer"], float(eps), dict(d["public"]))


def _jsonable(value: Any) -> Any:
    """Plain JSON types (numpy scalars and arrays converted)."""
    if isinstance(value, np.ndarray):
        return value.tolist()  # plain Python ints, floats and bools already
    if isinstance(value, dict | Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if value and all(type(v) in (int, float) for v in value):
            return list(value)
        return [_jsonable(v) for v in value]
    if isinstance(value, np.bool_ | bool):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


# ---------------------------------------------------------------------------
# randomizers

AnswerFn = Callable[
    [ReportRequest, FloatArray, FloatArray, np.random.Generator], dict[str, Any]
]
AnswerManyFn = Callable[
    [ReportRequest, FloatArray, FloatArray, FloatArray, np.random.Generator],
    dict[str, Any],
]
ValidateFn = Callable[[ReportRequest, Mapping[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Randomizer:
    """A registered randomizer: how a seller answers and how the platform checks.

    ``answer(request, X, y, rng)`` receives the seller's records already in the
    learner's units (:func:`answer_request` applies the public scaling) and calls the
    learner's own randomizer function; ``validate(request, report)`` raises
    ``ValueError`` naming the report field unless the report lies in the output space.
    ``answer_many(request, X, y, epsilon, rng)`` (optional): the answers of many
    sellers of one round at once, records stacked and ``epsilon`` per record, every
    report array with one leading row per record (the unseeded library fit).
    """

    name: str
    answer: AnswerFn
    validate: ValidateFn
    doc: str = ""
    answer_many: AnswerManyFn | None = None


RANDOMIZERS: dict[str, Randomizer] = {}
"""``"<learner>.<randomizer>@<version>"`` → :class:`Randomizer`."""


def register_randomizer(r: Randomizer) -> Randomizer:
    """Add ``r`` under its name (a name is registered once)."""
    if "@" not in r.name or "." not in r.name.split("@")[0]:
        raise ValueError(
            f"randomizer name must be '<learner>.<name>@<version>': {r.name!r}"
        )
    other = RANDOMIZERS.get(r.name)
    if other is not None and other is not r:
        raise ValueError(f"randomizer {r.name!r} is registered already")
    RANDOMIZERS[r.name] = r
    return r


def _lookup(request: ReportRequest) -> Randomizer:
    _ensure_learners_loaded()
    r = RANDOMIZERS.get(request.randomizer)
    if r is None:
        raise ValueError(
            f"randomizer: unknown {request.randomizer!r}; known: {sorted(RANDOMIZERS)}"
        )
    return r


def _ensure_learners_loaded() -> None:
    """The learners register their randomizers when imported."""
    import learners  # noqa: F401  (import for its registrations)


def scale_records(
    X: FloatArray, y: FloatArray, scaling: Mapping[str, Any] | None
) -> tuple[FloatArray, FloatArray]:
    """Raw market values → the learner's units with the market's public scaling.

    ``scaling``: ``{"features": [{"low", "high"}, ...], "target": {"low", "high"} or
    None}`` (the market's public schema). Values are clipped to the public bounds first
    (public constants only); ``NaN`` (a missing cell) stays ``NaN``. ``None``: the
    records are used as given.
    """
    if not scaling:
        return X, y
    feats = scaling.get("features") or []
    d = len(feats)
    if X.shape[1] != d:
        raise ValueError(
            f"X: the market has {d} features, the records have {X.shape[1]} columns"
        )
    low = np.array([float(f["low"]) for f in feats])
    high = np.array([float(f["high"]) for f in feats])
    with np.errstate(invalid="ignore"):
        Xc = np.clip(X, low, high)
    Xs = (2.0 * (Xc - low) / (high - low) - 1.0) / math.sqrt(d)
    target = scaling.get("target")
    if target:
        lo, hi = float(target["low"]), float(target["high"])
        y = 2.0 * (np.clip(y, lo, hi) - lo) / (hi - lo) - 1.0
    return np.asarray(Xs, dtype=float), np.asarray(y, dtype=float)


def market_scaling(context: Any) -> dict[str, Any] | None:
    """The public scaling a request carries for a market (``context``: a
    :class:`~learners.registry.ReleaseContext` whose ``market`` is the public schema);
    None without a schema (records used as given). A classification target is not
    scaled (labels are ``±1``)."""
    market = getattr(context, "market", None) or {}
    feats = market.get("features") or []
    if not feats:
        return None
    target = market.get("target")
    scaled: dict[str, float] | None = None
    if target and getattr(context, "task", "") != "classification":
        scaled = {"low": float(target["low"]), "high": float(target["high"])}
    return {
        "features": [{"low": float(f["low"]), "high": float(f["high"])} for f in feats],
        "target": scaled,
    }


def answer_request(
    request: ReportRequest,
    X: ArrayLike,
    y: ArrayLike,
    *,
    rng: np.random.Generator | int | None = None,
) -> dict[str, Any]:
    """Seller side: the randomized report of this seller's records for ``request``.

    Runs the named randomizer (the very function the library fit uses) on the seller's
    raw records ``X`` (``(n_i, d)``, ``np.nan`` = missing) and ``y`` (``(n_i,)``),
    after the request's public scaling. ``rng``: the seller's generator (a seed for
    tests; None draws from OS entropy, as a seller's client does in production).

    Returns
    -------
    dict
        JSON-able report (the only thing that leaves the seller).

    Raises
    ------
    ValueError
        ``X``/``y`` of the wrong shape, fewer records than the request addresses, an
        unknown randomizer, or a value the randomizer refuses (named).
    """
    rand = _lookup(request)
    X_arr = np.asarray(X, dtype=float)
    y_arr = np.asarray(y, dtype=float).reshape(-1)
    if X_arr.ndim != 2:
        raise ValueError(
            f"X must have shape (n_records, n_features), got {X_arr.shape}"
        )
    if y_arr.shape[0] != X_arr.shape[0]:
        raise ValueError(
            f"y must have one entry per row of X ({X_arr.shape[0]}), got {y_arr.shape[0]}"
        )
    need = request.public.get("n_records")
    if need is not None and X_arr.shape[0] != int(need):
        raise ValueError(
            f"X: the request is for {int(need)} records, the seller gave {X_arr.shape[0]}"
        )
    Xs, ys = scale_records(X_arr, y_arr, request.public.get("scaling"))
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return _jsonable(rand.answer(request, Xs, ys, gen))  # type: ignore[no-any-return]


def validate_report(request: ReportRequest, report: Mapping[str, Any]) -> None:
    """Platform side: ``ValueError`` naming the field unless ``report`` lies in the
    randomizer's output space (shape, finiteness, norm, alphabet). Reveals nothing
    else about the seller's data.
    """
    if not isinstance(report, Mapping):
        raise ValueError("report: must be an object")
    _lookup(request).validate(request, report)


# --- helpers the learners' validators share -------------------------------


def report_array(
    report: Mapping[str, Any],
    name: str,
    *,
    shape: tuple[int, ...],
    alphabet: Sequence[float] | None = None,
) -> FloatArray:
    """``report[name]`` as a float array of exactly ``shape``; ``ValueError`` naming
    ``name`` if missing, of another shape, not numeric, not finite, or (``alphabet``)
    holding a value outside it."""
    if name not in report:
        raise ValueError(f"{name}: missing from the report")
    raw = report[name]
    if isinstance(raw, str | bytes | Mapping) or raw is None:
        raise ValueError(f"{name}: must be {'a number' if not shape else 'a list'}")
    try:
        arr = np.asarray(raw, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must hold numbers only") from None
    if _holds_bool(raw):
        raise ValueError(f"{name}: must hold numbers, not true/false")
    if arr.shape != shape:
        raise ValueError(
            f"{name}: must have shape {list(shape)}, got {list(arr.shape)}"
        )
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: must be finite")
    if alphabet is not None and arr.size:
        ok = np.isin(arr, np.asarray(alphabet, dtype=float))
        if not ok.all():
            bad = arr.reshape(-1)[int(np.flatnonzero(~ok.reshape(-1))[0])]
            raise ValueError(
                f"{name}: entries must be in {list(alphabet)}, got {float(bad)!r}"
            )
    return arr


def _holds_bool(raw: Any) -> bool:
    if isinstance(raw, bool | np.bool_):
        return True
    if isinstance(raw, list | tuple):
        return any(_holds_bool(v) for v in raw)
    return False


def check_report_keys(report: Mapping[str, Any], allowed: Sequence[str]) -> None:
    """``ValueError`` naming the first key that the output space does not have (a
    report carries the randomizer's output and nothing else)."""
    extra = [k for k in report if k not in allowed]
    if extra:
        raise ValueError(
            f"{extra[0]}: not a field of this report (allowed: {list(allowed)})"
        )


# ---------------------------------------------------------------------------
# generators


def seller_generators(
    random_state: int | np.random.Generator | None, n_sellers: int
) -> tuple[np.random.Generator, list[np.random.Generator]]:
    """The protocol's public generator and one independent generator per seller,
    spawned from ``random_state`` (None: OS entropy).

    The library fit and the seeded seller-custody tests use the same spawn, so
    seller ``i`` draws the same coins in both.
    """
    root = np.random.default_rng(random_state)
    kids = root.spawn(n_sellers + 1)
    return kids[0], kids[1:]


def _rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """JSON-able state of a generator (big integers as decimal strings)."""

    def enc(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: enc(x) for k, x in v.items()}
        if isinstance(v, int) and not isinstance(v, bool):
            return {"int": str(v)}
        return v

    return enc(dict(rng.bit_generator.state))  # type: ignore[no-any-return]


def _rng_from_state(state: Mapping[str, Any]) -> np.random.Generator:
    def dec(v: Any) -> Any:
        if isinstance(v, Mapping):
            if set(v) == {"int"}:
                return int(v["int"])
            return {k: dec(x) for k, x in v.items()}
        return v

    st = dec(state)
    bitgen = getattr(np.random, st["bit_generator"])()
    bitgen.state = st
    return np.random.Generator(bitgen)


# ---------------------------------------------------------------------------
# the protocol

PROTOCOLS: dict[str, type[LocalProtocol]] = {}
"""``kind`` → protocol class (for :meth:`LocalProtocol.from_state`)."""


def register_protocol(cls: type[LocalProtocol]) -> type[LocalProtocol]:
    """Class decorator: make ``cls`` restorable by :meth:`LocalProtocol.from_state`."""
    if not cls.kind:
        raise ValueError(f"{cls.__name__} has no kind")
    PROTOCOLS[cls.kind] = cls
    return cls


STATE_VERSION = 1


class LocalProtocol:
    """One order's rounds of report requests (module docstring).

    Subclasses (one per local learner) implement ``_plan`` (the next round's requests,
    or None when done), ``_absorb`` (a round's validated reports), ``_finish`` (the
    fitted estimator from the public state) and ``_dump``/``_load`` (their JSON state).

    Sellers are ``0..n_sellers−1`` in the order of ``epsilon``/``n_records``. A seller
    that is sent a request and is absent from the reports submitted for that round did
    not deliver: it gets no further requests and is not in :meth:`delivered`. Reports it
    sent in earlier rounds stay in the estimate (they are already folded into the
    public state of later rounds), and the privacy report states the ε of exactly the
    reports that were received.
    """

    kind: ClassVar[str] = ""
    learner: ClassVar[str] = ""

    def __init__(
        self,
        *,
        params: Mapping[str, Any],
        epsilon: ArrayLike,
        n_records: ArrayLike,
        scaling: Mapping[str, Any] | None = None,
        random_state: int | np.random.Generator | None = None,
        custody: Custody = "seller",
    ) -> None:
        eps = np.asarray(epsilon, dtype=float).reshape(-1)
        bad = np.flatnonzero(~np.isfinite(eps) | (eps < 0))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"epsilon must be finite and >= 0; epsilon[{i}] = {eps[i]!r}"
            )
        n_rec = np.asarray(n_records)
        if n_rec.shape != eps.shape:
            raise ValueError(
                f"n_records must have one entry per seller ({eps.size}), got shape "
                f"{n_rec.shape}"
            )
        if n_rec.size and (
            not np.issubdtype(n_rec.dtype, np.integer) or (n_rec < 1).any()
        ):
            raise ValueError("n_records must hold integers >= 1 (records per seller)")
        if custody not in CUSTODIES:
            raise ValueError(f"custody must be one of {CUSTODIES}, got {custody!r}")
        self.params: dict[str, Any] = dict(params)
        self.epsilon = eps
        self.n_records = n_rec.astype(np.int64)
        self.scaling: dict[str, Any] | None = None if not scaling else dict(scaling)
        self.custody: Custody = custody
        self.rng = np.random.default_rng(random_state)
        self.round = 0
        self.pending: dict[int, ReportRequest] | None = None
        self.asked = np.zeros(eps.size, dtype=bool)
        self.failed = np.zeros(eps.size, dtype=bool)
        self.spent = np.zeros(eps.size)
        self.done = False

    # --- the interface -----------------------------------------------------

    @property
    def n_sellers(self) -> int:
        return int(self.epsilon.size)

    def next_round(self) -> dict[int, ReportRequest] | None:
        """Seller index → request of the current round; None when the protocol is done.

        Idempotent until :meth:`submit`. Rounds in which no seller has a message
        (every seller addressed has dropped out) are skipped.
        """
        if self.pending is not None:
            return dict(self.pending)
        while not self.done:
            planned = self._plan()
            if planned is None:
                self.done = True
                break
            reqs = {int(i): r for i, r in planned.items() if not self.failed[int(i)]}
            if not reqs:
                self._absorb({}, {})
                self.round += 1
                continue
            self.pending = reqs
            return dict(reqs)
        return None

    def submit(
        self, reports: Mapping[int, Mapping[str, Any]], *, check: bool = True
    ) -> None:
        """The current round's reports (seller index → report).

        Each report is checked with :func:`validate_report` (``check=False`` only for
        answers computed in process by the randomizers themselves); a seller with a
        request and no report did not deliver.

        Raises
        ------
        ValueError
            No round is open, a report from a seller without a request in this round,
            or a report outside the output space (``reports[i].<field>`` named).
            Nothing is recorded then.
        """
        if self.pending is None:
            raise ValueError("reports: no round is open (call next_round first)")
        got: dict[int, Mapping[str, Any]] = {}
        for key, rep in reports.items():
            i = int(key)
            req = self.pending.get(i)
            if req is None:
                raise ValueError(
                    f"reports[{i}]: seller {i} has no request in round {self.round}"
                )
            if check:
                try:
                    validate_report(req, rep)
                except ValueError as exc:
                    raise ValueError(f"reports[{i}].{exc}") from None
            got[i] = rep
        requests = self.pending
        for i, req in requests.items():
            self.asked[i] = True
            if i in got:
                self.spent[i] += req.epsilon
            else:
                self.failed[i] = True
        self._absorb(got, requests)
        self.pending = None
        self.round += 1

    def delivered(self) -> set[int]:
        """Sellers that were sent at least one request and answered every one so far."""
        return {int(i) for i in np.flatnonzero(self.asked & ~self.failed)}

    def result(self) -> Any:
        """The fitted learner, its ``privacy_report_`` carrying ``custody``.

        Raises
        ------
        ValueError
            Rounds are left, or too few sellers delivered to fit (reason stated).
        """
        return self.finish_into(self._new_estimator())

    def finish_into(self, est: Any) -> Any:
        """Fill ``est`` (an unfitted estimator of the learner) from the reports; what
        :meth:`result` does with a fresh one (the library fit passes itself)."""
        if not self.done and self.next_round() is not None:
            raise ValueError(f"the protocol is in round {self.round}: rounds are left")
        self._finish(est)
        est.privacy_report_ = replace(est.privacy_report_, custody=self.custody)
        return est

    def record_epsilon(self) -> FloatArray:
        """Per record (sellers in order, each seller's records in order): the ε its
        seller's randomizers were called with, summed over the reports received."""
        return np.asarray(np.repeat(self.spent, self.n_records), dtype=float)

    # --- state ---------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        """JSON-able state (an order survives a restart)."""
        return _jsonable(  # type: ignore[no-any-return]
            {
                "kind": self.kind,
                "version": STATE_VERSION,
                "params": self.params,
                "epsilon": self.epsilon,
                "n_records": self.n_records,
                "scaling": self.scaling,
                "custody": self.custody,
                "rng": _rng_state(self.rng),
                "round": self.round,
                "pending": None
                if self.pending is None
                else {str(i): r.to_json() for i, r in self.pending.items()},
                "asked": np.flatnonzero(self.asked),
                "failed": np.flatnonzero(self.failed),
                "spent": self.spent,
                "done": self.done,
                "data": self._dump(),
            }
        )

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> LocalProtocol:
        """Inverse of :meth:`to_state` (any registered protocol kind)."""
        _ensure_learners_loaded()
        kind = state.get("kind")
        target = PROTOCOLS.get(str(kind))
        if target is None:
            raise ValueError(f"state.kind: unknown protocol {kind!r}")
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"state.version: unsupported {state.get('version')!r}")
        obj = target.__new__(target)
        obj.params = dict(state["params"])
        obj.epsilon = np.asarray(state["epsilon"], dtype=float)
        obj.n_records = np.asarray(state["n_records"], dtype=np.int64)
        obj.scaling = state["scaling"]
        obj.custody = state["custody"]
        obj.rng = _rng_from_state(state["rng"])
        obj.round = int(state["round"])
        pending = state["pending"]
        obj.pending = (
            None
            if pending is None
            else {int(i): ReportRequest.from_json(r) for i, r in pending.items()}
        )
        n = obj.epsilon.size
        obj.asked = np.zeros(n, dtype=bool)
        obj.asked[np.asarray(state["asked"], dtype=np.int64)] = True
        obj.failed = np.zeros(n, dtype=bool)
        obj.failed[np.asarray(state["failed"], dtype=np.int64)] = True
        obj.spent = np.asarray(state["spent"], dtype=float)
        obj.done = bool(state["done"])
        obj._load(state["data"])
        return obj

    # --- for subclasses ------------------------------------------------------

    def _new_estimator(self) -> Any:
        """A fresh estimator with the protocol's params (``_finish`` fills it)."""
        raise NotImplementedError

    def _plan(self) -> dict[int, ReportRequest] | None:
        raise NotImplementedError

    def _absorb(
        self,
        reports: Mapping[int, Mapping[str, Any]],
        requests: Mapping[int, ReportRequest],
    ) -> None:
        raise NotImplementedError

    def _finish(self, est: Any) -> None:
        raise NotImplementedError

    def _dump(self) -> dict[str, Any]:
        raise NotImplementedError

    def _load(self, data: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def _public(self, **extra: Any) -> dict[str, Any]:
        """Public parameters every request carries (the scaling when set)."""
        out = dict(extra)
        if self.scaling:
            out["scaling"] = self.scaling
        return out

    def _check_enough(self, n_reports: int, minimum: int, what: str) -> None:
        if n_reports < minimum:
            raise ValueError(
                f"too few sellers delivered: {n_reports} {what} received, the fit "
                f"needs at least {minimum}"
            )


def run_in_process(
    protocol: LocalProtocol,
    X: FloatArray,
    y: FloatArray,
    rngs: Sequence[np.random.Generator],
) -> LocalProtocol:
    """Run ``protocol`` to the end, each seller answering on its own records with its
    own generator ``rngs[i]`` (the library fit; also the seeded seller-custody tests).

    ``X``/``y``: every seller's records in seller order (``protocol.n_records[i]`` rows
    each), in the learner's units. The answers are what :func:`answer_request` returns,
    kept as arrays (no JSON round trip: JSON keeps floats exactly, so the estimate is
    the same) and not re-validated (they come from the randomizers themselves).
    Returns ``protocol``.
    """
    starts = np.concatenate([[0], np.cumsum(protocol.n_records)])
    while (reqs := protocol.next_round()) is not None:
        reports = {}
        for i, req in reqs.items():
            rows = slice(int(starts[i]), int(starts[i + 1]))
            Xs, ys = scale_records(X[rows], y[rows], req.public.get("scaling"))
            reports[i] = _lookup(req).answer(req, Xs, ys, rngs[i])
        protocol.submit(reports, check=False)
    return protocol


def run_vectorized(
    protocol: LocalProtocol,
    X: FloatArray,
    y: FloatArray,
    rng: np.random.Generator,
) -> LocalProtocol:
    """Run ``protocol`` to the end answering each round's requests in one call of the
    randomizer's ``answer_many`` with one generator (records stacked, ``ε`` per
    record). Every report has the law of :func:`run_in_process`'s, independently
    across records; only the coins differ (one stream instead of one per seller). For
    unseeded library fits, where no one can tell the streams apart.
    """
    starts = np.concatenate([[0], np.cumsum(protocol.n_records)])
    while (reqs := protocol.next_round()) is not None:
        sellers = list(reqs)
        first = reqs[sellers[0]]
        many = _lookup(first).answer_many
        if many is None:
            raise ValueError(f"randomizer {first.randomizer!r} has no answer_many")
        rows = np.concatenate(
            [np.arange(starts[i], starts[i + 1], dtype=np.int64) for i in sellers]
        )
        eps = np.concatenate(
            [np.full(int(protocol.n_records[i]), reqs[i].epsilon) for i in sellers]
        )
        out = many(first, X[rows], y[rows], eps, rng)
        cuts = np.cumsum([int(protocol.n_records[i]) for i in sellers])[:-1]
        parts = {key: np.split(np.asarray(val), cuts) for key, val in out.items()}
        reports = {
            i: {key: parts[key][j] for key in parts} for j, i in enumerate(sellers)
        }
        protocol.submit(reports, check=False)
    return protocol


def owners(n_records: ArrayLike) -> NDArray[np.int64]:
    """Seller index of each record (sellers in order, ``n_records[i]`` rows each)."""
    n_rec = np.asarray(n_records, dtype=np.int64)
    return np.repeat(np.arange(n_rec.size, dtype=np.int64), n_rec)
