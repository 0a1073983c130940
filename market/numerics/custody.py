"""The local-protocol adapter of seller custody: which learners a seller-custody
market can take, the order's protocol (built, advanced, saved and restored as JSON)
and the check that a seller's report lies in its randomizer's output space.

Everything here calls :mod:`learners.local_protocol` (the learner side of the
report-round interface); the rest of the market handles requests and reports as JSON.
"""

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from learners import LEARNERS
from learners.local_protocol import LocalProtocol, ReportRequest, seller_generators
from learners.local_protocol import answer_request as _answer_request
from learners.local_protocol import validate_report as _validate_report
from market.errors import InvalidInputError
from market.numerics.learners import _release_context, learner_spec

CUSTODY_PRIVACY_MODELS: tuple[str, ...] = ("local", "user_level_local")
"""Privacy models whose learners a seller-custody market can take: every record (or
every seller's records) is randomized by its owner, so the curator needs no record."""


def takes_custody(name: str, custody: str, partition: str = "horizontal") -> bool:
    """Whether learner ``name`` can be ordered on a market of ``custody``: any learner
    on a platform-custody market; on a seller-custody one only a learner whose privacy
    model is local (``local``, ``user_level_local``) and that runs as a local protocol,
    or, on a vertical market, a vertical learner computed in MPC between the parties'
    own nodes (``privacy_model="mpc"``: the platform holds no block)."""
    if custody != "seller":
        return True
    spec = learner_spec(name)
    if partition == "vertical":
        return spec.partition == "vertical" and spec.privacy_model == "mpc"
    return spec.privacy_model in CUSTODY_PRIVACY_MODELS and spec.seller_custody


def check_custody_learner(
    name: str, custody: str, partition: str = "horizontal"
) -> None:
    """Refuse a learner a market of ``custody`` cannot take.

    Raises
    ------
    InvalidInputError
        Field ``learner``, naming the learner's privacy model.
    """
    if takes_custody(name, custody, partition):
        return
    spec = learner_spec(name)
    able = sorted(
        s.name for s in LEARNERS.specs() if takes_custody(s.name, custody, partition)
    )
    raise InvalidInputError(
        "learner",
        f"{name} (privacy model {spec.privacy_model}) needs the records on the "
        "platform; this market's records stay with their sellers, so it takes only "
        f"learners that randomize on the seller's side: {able}",
    )


def build_protocol(
    name: str,
    params: Mapping[str, Any],
    *,
    config: Any,
    task: str,
    schema: Mapping[str, Any] | None,
    epsilon: Sequence[float],
    n_records: Sequence[int],
    seed: int | None = None,
) -> LocalProtocol:
    """The order's local protocol: one seller per entry of ``epsilon``/``n_records``
    (allocated ``ε_i``, public record count), the learner bound to the mechanism's
    settings and told the market's public schema.

    ``seed``: tests only. It seeds the protocol's *public* generator exactly as the
    library's seeded ``fit`` does (``seller_generators``), never a seller's noise;
    production passes None (OS entropy).

    Raises
    ------
    InvalidInputError
        Field ``learner`` when the learner cannot run as a local protocol, or the
        parameter the learner names.
    """
    ctx = _release_context(config, task=task, schema=schema)
    random_state = None
    if seed is not None:
        random_state, _ = seller_generators(seed, len(epsilon))
    try:
        return learner_spec(name).build_protocol(  # type: ignore[no-any-return]
            params,
            context=ctx,
            epsilon=np.asarray(epsilon, dtype=float),
            n_records=np.asarray(n_records, dtype=np.int64),
            random_state=random_state,
        )
    except ValueError as exc:
        field, reason = _split(str(exc), default="learner")
        raise InvalidInputError(field, reason) from exc


def protocol_state(protocol: LocalProtocol) -> dict[str, Any]:
    """The protocol's JSON state (stored between rounds)."""
    return protocol.to_state()


def restore_protocol(state: Mapping[str, Any]) -> LocalProtocol:
    """The protocol stored as ``state`` (``LocalProtocol.from_state``)."""
    return LocalProtocol.from_state(state)


def next_round(protocol: LocalProtocol) -> dict[int, dict[str, Any]] | None:
    """Seller index → the current round's request as JSON; None when the protocol is
    done (idempotent until :func:`submit`)."""
    reqs = protocol.next_round()
    if reqs is None:
        return None
    return {int(i): r.to_json() for i, r in reqs.items()}


def submit(protocol: LocalProtocol, reports: Mapping[int, Mapping[str, Any]]) -> None:
    """Hand the current round's validated reports to the protocol (sellers absent
    did not deliver)."""
    protocol.submit(reports)


def delivered(protocol: LocalProtocol) -> set[int]:
    """Sellers that answered every request sent to them."""
    return protocol.delivered()


def spent(protocol: LocalProtocol) -> list[float]:
    """Per seller: the ε of the reports received from it (the sum of its round shares
    it answered)."""
    return [float(v) for v in protocol.spent]


def result(protocol: LocalProtocol) -> Any:
    """The fitted learner (``privacy_report_.custody`` set by the protocol).

    Raises
    ------
    ValueError
        Too few sellers delivered to fit (the reason says how many), or rounds are left.
    """
    return protocol.result()


_FIELD = re.compile(r"^([A-Za-z_][\w\[\]\.]*): (.*)$", re.S)


def _split(message: str, *, default: str) -> tuple[str, str]:
    """``"name: reason"`` → ``(name, reason)``; else ``(default, message)``."""
    m = _FIELD.match(message)
    if m is None:
        return default, message
    return m.group(1), m.group(2)


def validate_report(request: Mapping[str, Any], report: Any) -> None:
    """Check a seller's report against its request's randomizer output space (shape,
    finiteness, norm, alphabet); reveals nothing else.

    Raises
    ------
    InvalidInputError
        Field ``report.<name>`` (or ``report``) with the randomizer's reason.
    """
    if not isinstance(report, Mapping):
        raise InvalidInputError("report", "must be an object")
    try:
        _validate_report(ReportRequest.from_json(request), report)
    except ValueError as exc:
        name, reason = _split(str(exc), default="")
        field = "report" if not name or name == "report" else f"report.{name}"
        raise InvalidInputError(field, reason) from None


PROBE_FRACTIONS = (0.3141592653, 0.2718281828, 0.1618033988, 0.5772156649)
"""Where in its public range each feature of the probe record lies (cycled)."""


def _numbers(value: Any) -> list[float]:
    if isinstance(value, Mapping):
        return [v for item in value.values() for v in _numbers(item)]
    if isinstance(value, list | tuple):
        return [v for item in value for v in _numbers(item)]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return []
    return [float(value)]


def clear_features(
    name: str,
    params: Mapping[str, Any],
    *,
    config: Any,
    task: str,
    schema: Mapping[str, Any],
) -> list[str]:
    """The market's non-public features that the learner's first round would send in
    the clear with these ``params`` (a learner whose model treats features as known to
    the curator sends them with its reports, e.g. one-bit quantile regression with
    public X).

    Found by a probe: two sellers holding one record each whose feature ``j`` lies at
    a distinctive point of its public range answer the first round's requests with the
    learner's own randomizer; a feature whose value (raw or scaled) appears in a report
    is sent in the clear. Only public constants enter the probe.
    """
    features = list(schema.get("features") or [])
    private = [j for j, f in enumerate(features) if not f.get("public", False)]
    if not private:
        return []
    d = len(features)
    spec = learner_spec(name)
    per = max(int(spec.min_records_per_seller), 1)
    fr = np.array([PROBE_FRACTIONS[j % len(PROBE_FRACTIONS)] for j in range(d)])
    low = np.array([float(f["low"]) for f in features])
    high = np.array([float(f["high"]) for f in features])
    raw = low + fr * (high - low)
    scaled = (2.0 * fr - 1.0) / np.sqrt(d)
    X = np.tile(raw, (per, 1))
    target = schema.get("target")
    y_val = 1.0
    if target and task != "classification":
        y_val = float(target["low"]) + 0.5 * (
            float(target["high"]) - float(target["low"])
        )
    y = np.full(per, y_val)
    protocol = build_protocol(
        name,
        params,
        config=config,
        task=task,
        schema=schema,
        epsilon=[1.0, 1.0],
        n_records=[per, per],
        seed=0,
    )
    requests = protocol.next_round() or {}
    sent: list[float] = []
    for req in requests.values():
        report = _answer_request(req, X, y, rng=np.random.default_rng(0))
        sent += _numbers(report)
    values = np.asarray(sent, dtype=float)
    out = []
    for j in private:
        hit = np.isclose(values, raw[j], rtol=0, atol=1e-12) | np.isclose(
            values, scaled[j], rtol=0, atol=1e-12
        )
        if hit.any():
            out.append(str(features[j]["name"]))
    return out


def check_clear_features(
    name: str,
    params: Mapping[str, Any],
    *,
    config: Any,
    task: str,
    schema: Mapping[str, Any],
) -> None:
    """Refuse an order whose learner would send a feature the market does not declare
    ``public`` in the clear (:func:`clear_features`).

    Raises
    ------
    InvalidInputError
        Field ``params``, naming the features.
    """
    named = clear_features(name, params, config=config, task=task, schema=schema)
    if named:
        raise InvalidInputError(
            "params",
            f"with these params {name} sends features {named} in the clear with its "
            "reports (its model treats them as known to the curator), but this market "
            "does not declare them public; on a seller-custody market only features "
            'declared "public": true may leave a seller unrandomized (choose '
            "params under which the learner randomizes them)",
        )
