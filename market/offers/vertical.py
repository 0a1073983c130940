"""Vertical markets: parties hold column blocks of the same records.

A market declared ``partition: "vertical"`` names a public ``record_key`` and its
``parties``, each with the features it holds (every feature in exactly one party; the
first party holds the label). Each seller offers one party's block: records
``{"key", "x", "y"?}`` keyed by pseudonymous strings, ``y`` from the label holder only.
The key lists are the only thing the parties learn about each other (spec
``secure-multiparty-logistic.md`` §6 row 1).

Scaling: party ``k``'s values are mapped with the public bounds to ``[-1, 1]`` and
divided by ``√d`` with ``d`` the market's total number of features, so the
concatenated row of a record has ``‖x‖₂ ≤ 1`` whatever parties hold it.

Pricing rule (``docs/mathematics.md`` §7, "Other losses"): each party is one seller whose ε applies to
all its records; the mechanism prices one public row per party (its coverage of the
record universe, from the key lists only) with the weight cap ``k = 1`` (so every party,
being needed for the fit, gets weight ``1/K``: without the cap the allocation puts all
weight on the cheapest party, a corner solution), chooses ``η`` and pays each party its
Myerson threshold payment; record ``i`` is protected at ``min_k ε_k`` over the parties
holding it.
"""

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from market.errors import InvalidInputError
from market.offers import records
from market.schemas import KeyedRecordIn, MarketCreate, OfferCreate
from market.store import Market

FloatArray = NDArray[np.float64]
K_RULE = (
    "vertical markets need k = 1: every party is needed for the fit, so each gets the "
    "weight 1/K and the mechanism chooses the common ε and the payments"
)


def check_market(body: MarketCreate) -> None:
    """Validate the partition fields of a new market (field named on error).

    Raises
    ------
    InvalidInputError
        ``record_key``/``parties`` on a horizontal market; on a vertical one: a task
        other than classification, no record key, fewer than two parties, a repeated
        party name, a party holding no declared feature, an unknown or twice-held
        feature, a feature no party holds, a missable feature, a validation set.
    """
    if body.partition == "horizontal":
        for name in ("record_key", "parties"):
            if getattr(body, name) is not None:
                raise InvalidInputError(name, "only vertical markets have one")
        return
    if body.task != "classification":
        raise InvalidInputError("task", "vertical markets train classification only")
    if body.record_key is None:
        raise InvalidInputError(
            "record_key", "a vertical market needs a public record key"
        )
    parties = body.parties or []
    if len(parties) < 2:
        raise InvalidInputError(
            "parties", "a vertical market needs at least two parties"
        )
    if body.validation is not None:
        raise InvalidInputError("validation", "vertical markets take no validation set")
    names = {f.name: j for j, f in enumerate(body.features)}
    owner: dict[str, int] = {}
    seen_party: set[str] = set()
    for i, party in enumerate(parties):
        if party.name in seen_party:
            raise InvalidInputError(
                f"parties[{i}].name", f"duplicate party {party.name!r}"
            )
        seen_party.add(party.name)
        if not party.features:
            raise InvalidInputError(
                f"parties[{i}].features",
                "a party must hold at least one declared feature",
            )
        for j, feat in enumerate(party.features):
            if feat not in names:
                raise InvalidInputError(
                    f"parties[{i}].features[{j}]", f"unknown feature {feat!r}"
                )
            if feat in owner:
                raise InvalidInputError(
                    f"parties[{i}].features[{j}]",
                    f"feature {feat!r} is already held by party {parties[owner[feat]].name!r}",
                )
            owner[feat] = i
    for j, f in enumerate(body.features):
        if f.name not in owner:
            raise InvalidInputError(
                f"features[{j}]", f"feature {f.name!r} is held by no party"
            )
        if f.missable:
            raise InvalidInputError(
                f"features[{j}].missable",
                "vertical markets miss whole blocks (a party not holding a record), not cells",
            )


def is_vertical(market: Market) -> bool:
    """Whether the market is vertically partitioned."""
    return market.partition == "vertical"


def party_features(market: Market, party: str) -> list[dict[str, Any]]:
    """The feature specs party ``party`` holds, in its declared order."""
    by_name = {str(f["name"]): f for f in market.features}
    for p in market.parties or []:
        if p["name"] == party:
            return [by_name[name] for name in p["features"]]
    raise KeyError(party)


def ordered_features(market: Market) -> list[dict[str, Any]]:
    """All features in party order (the order of the fitted coefficients)."""
    return [f for p in market.parties or [] for f in party_features(market, p["name"])]


def party_names(market: Market) -> list[str]:
    """Party names, label holder first."""
    return [str(p["name"]) for p in market.parties or []]


def validate_offer(
    market: Market, body: OfferCreate
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Validate a vertical offer and return its raw and scaled records.

    Raises
    ------
    InvalidInputError
        ``party`` missing or unknown; ``records[i].key`` missing or duplicated;
        ``records[i].x`` of the wrong length, non-finite or out of bounds;
        ``records[i].y`` missing from the label holder, given by another party, or
        not ±1.
    """
    if body.party is None:
        raise InvalidInputError("party", "a vertical market's offer names its party")
    names = party_names(market)
    if body.party not in names:
        raise InvalidInputError(
            "party", f"unknown party {body.party!r}; parties: {names}"
        )
    labelled = body.party == names[0]
    keys: set[str] = set()
    raw: list[dict[str, Any]] = []
    for i, rec in enumerate(body.records or ()):
        if not isinstance(rec, KeyedRecordIn):
            raise InvalidInputError(
                f"records[{i}].key", "vertical records need the record key"
            )
        if rec.key in keys:
            raise InvalidInputError(
                f"records[{i}].key", f"duplicate record key {rec.key!r}"
            )
        keys.add(rec.key)
        if labelled and rec.y is None:
            raise InvalidInputError(
                f"records[{i}].y", f"the label holder {names[0]!r} gives every label"
            )
        if not labelled and rec.y is not None:
            raise InvalidInputError(
                f"records[{i}].y", f"only the label holder {names[0]!r} gives labels"
            )
        raw.append(rec.model_dump())
    feats = party_features(market, body.party)
    rows = [{"x": r["x"], "y": r["y"] if labelled else 1.0} for r in raw]
    X, y = records.scale_records(
        rows, features=feats, task="classification", out_of_bounds=market.out_of_bounds
    )
    X *= math.sqrt(len(feats) / len(market.features))
    scaled = [
        {"key": r["key"], "x": row.tolist(), "y": float(label) if labelled else None}
        for r, row, label in zip(raw, X, y, strict=True)
    ]
    return raw, scaled


def validate_custody_offer(market: Market, body: OfferCreate) -> list[dict[str, str]]:
    """A seller-custody vertical offer: ``party`` and its record ``keys``, no records
    (the values and labels stay on the party's node); returns ``[{"key": k}]``.

    Raises
    ------
    InvalidInputError
        ``records`` given; ``party`` missing or unknown; ``keys`` missing or a key
        repeated; ``n_records`` not the number of keys.
    """
    if body.records is not None:
        raise InvalidInputError(
            "records",
            "this market's parties keep their blocks: an offer carries party, keys, "
            "reported_cost and max_epsilon; the values stay on the party's node",
        )
    if body.party is None:
        raise InvalidInputError("party", "a vertical market's offer names its party")
    names = party_names(market)
    if body.party not in names:
        raise InvalidInputError(
            "party", f"unknown party {body.party!r}; parties: {names}"
        )
    if body.keys is None:
        raise InvalidInputError("keys", "required: the party's record keys")
    seen: set[str] = set()
    for i, k in enumerate(body.keys):
        if k in seen:
            raise InvalidInputError(f"keys[{i}]", f"duplicate record key {k!r}")
        seen.add(k)
    if body.n_records is not None and body.n_records != len(body.keys):
        raise InvalidInputError(
            "n_records", f"{body.n_records} declared, {len(body.keys)} keys listed"
        )
    return [{"key": k} for k in body.keys]


def blocks_of(
    market: Market, offers_by_party: Mapping[str, Any]
) -> tuple[list[list[str]], list[FloatArray], list[str], FloatArray]:
    """``(keys, values, label_keys, labels)`` per party from the parties' offers."""
    keys, values = [], []
    for name in party_names(market):
        offer = offers_by_party[name]
        keys.append([r["key"] for r in offer.records_scaled])
        values.append(np.array([r["x"] for r in offer.records_scaled], dtype=float))
    label_offer = offers_by_party[party_names(market)[0]]
    label_keys = [r["key"] for r in label_offer.records_scaled]
    labels = np.array([r["y"] for r in label_offer.records_scaled], dtype=float)
    return keys, values, label_keys, labels


def aligned_labels(
    universe: Sequence[str], label_keys: Sequence[str], labels: FloatArray
) -> FloatArray:
    """Labels on the record universe (NaN where the label holder has no record)."""
    index = {k: i for i, k in enumerate(universe)}
    out = np.full(len(universe), np.nan)
    out[[index[k] for k in label_keys]] = labels
    return out
