"""Validate records against a market's schema and scale them with its public bounds.

Scaling (never with statistics of the data): each feature is mapped affinely from its
public bounds ``[low_j, high_j]`` to ``[-1, 1]`` and the vector divided by ``√d``, so
``‖x‖₂ ≤ 1`` as the mechanism requires (spec ``mechanism.md`` §3). Regression and
quantile targets are mapped from the public target bounds to ``[-1, 1]``; labels of
classification markets must be ``-1`` or ``+1``. Out-of-bounds values are rejected or
clipped to the bounds, as the market declares.

Missing values: a feature declared ``"missable": true`` may be ``null`` in a record; the
entry stays missing through scaling (``NaN`` in arrays, ``null`` in stored JSON) and the
learner receives ``np.nan``. ``null`` in any other feature is refused, naming the record
and the feature.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from market.errors import InvalidInputError

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class FeatureSchema:
    """A market's features as arrays: public bounds, which may be ``null``, names.

    :func:`scale_records` builds it from ``features`` on every call unless given one
    (single-offer intake keeps one per market: for a one-record offer building it was
    a sixth of the validation's time).
    """

    low: FloatArray
    high: FloatArray
    missable: NDArray[np.bool_]
    names: list[str]


def feature_schema(features: Sequence[Mapping[str, Any]]) -> FeatureSchema:
    """Return the :class:`FeatureSchema` of a market's ``features``."""
    return FeatureSchema(
        low=np.array([float(f["low"]) for f in features]),
        high=np.array([float(f["high"]) for f in features]),
        missable=np.array([bool(f.get("missable", False)) for f in features]),
        names=[str(f["name"]) for f in features],
    )


def _matrix(
    records: Sequence[Mapping[str, Any]],
    *,
    schema: FeatureSchema,
    field: str,
) -> FloatArray:
    d = len(schema.names)
    X = np.empty((len(records), d))
    null = np.zeros((len(records), d), dtype=bool)
    for i, rec in enumerate(records):
        x = rec["x"]
        if len(x) != d:
            raise InvalidInputError(
                f"{field}[{i}].x", f"has {len(x)} values, the market has {d} features"
            )
        null[i] = [v is None for v in x]
        X[i] = x  # None becomes NaN
    refused = null & ~schema.missable
    if refused.any():
        i, j = np.argwhere(refused)[0]
        raise InvalidInputError(
            f"{field}[{i}].x[{j}]",
            f"must be a number: feature {schema.names[j]!r} is not missable",
        )
    bad = ~np.isfinite(X) & ~null
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InvalidInputError(f"{field}[{i}].x[{j}]", "must be a finite number")
    return X


def _check_bounds(
    values: FloatArray,
    low: FloatArray,
    high: FloatArray,
    *,
    field: str,
    names: Sequence[str],
) -> None:
    outside = (values < low) | (values > high)
    if outside.any():
        i, j = np.argwhere(outside)[0]
        raise InvalidInputError(
            f"{field}[{i}].x[{j}]",
            f"is outside the public bounds [{low[j]:g}, {high[j]:g}] of feature"
            f" {names[j]!r}",
        )


def _labels(
    records: Sequence[Mapping[str, Any]],
    *,
    task: str,
    target: Mapping[str, Any] | None,
    clip: bool,
    field: str,
) -> FloatArray:
    y = np.array([float(rec["y"]) for rec in records])
    bad = ~np.isfinite(y)
    if bad.any():
        raise InvalidInputError(
            f"{field}[{int(np.argmax(bad))}].y", "must be a finite number"
        )
    if task == "classification":
        bad = (y != 1.0) & (y != -1.0)
        if bad.any():
            raise InvalidInputError(
                f"{field}[{int(np.argmax(bad))}].y",
                "must be -1 or +1 for classification",
            )
        return y
    assert target is not None
    lo, hi = float(target["low"]), float(target["high"])
    if clip:
        y = np.clip(y, lo, hi)
    bad = (y < lo) | (y > hi)
    if bad.any():
        raise InvalidInputError(
            f"{field}[{int(np.argmax(bad))}].y",
            f"is outside the public target bounds [{lo:g}, {hi:g}]",
        )
    return 2.0 * (y - lo) / (hi - lo) - 1.0


def scale_records(
    records: Sequence[Mapping[str, Any]],
    *,
    features: Sequence[Mapping[str, Any]],
    task: str,
    target: Mapping[str, Any] | None = None,
    out_of_bounds: str = "reject",
    field: str = "records",
    schema: FeatureSchema | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Validate ``records`` and return ``(X, y)`` scaled so that ``‖x_i‖₂ ≤ 1``.

    ``schema``: ``feature_schema(features)`` if the caller keeps it (else built here).

    Raises
    ------
    InvalidInputError
        Naming the first bad field, e.g. ``records[3].x[1]``: wrong length, NaN or
        infinity, ``null`` in a feature that is not missable, a value outside the public bounds (``out_of_bounds="reject"``), or a
        label that is not ``±1`` in a classification market.
    """
    d = len(features)
    schema = schema or feature_schema(features)
    low, high = schema.low, schema.high
    X = _matrix(records, schema=schema, field=field)
    clip = out_of_bounds == "clip"
    if clip:
        X = np.clip(X, low, high)
    else:
        _check_bounds(X, low, high, field=field, names=schema.names)
    y = _labels(records, task=task, target=target, clip=clip, field=field)
    Xs = (2.0 * (X - low) / (high - low) - 1.0) / math.sqrt(d)
    return Xs, y


def to_json(X: FloatArray, y: FloatArray) -> list[dict[str, Any]]:
    """Return scaled records as ``[{"x": [...], "y": ...}]`` for storage (a missing
    entry is ``null``)."""
    return [
        {"x": [None if math.isnan(v) else v for v in row.tolist()], "y": float(label)}
        for row, label in zip(X, y, strict=True)
    ]


def from_json(
    records: Sequence[Mapping[str, Any]], *, d: int
) -> tuple[FloatArray, FloatArray]:
    """Return stored scaled records as arrays ``X`` of shape (n, d) (``null`` → ``NaN``)
    and ``y`` of shape (n,)."""
    X = np.array([r["x"] for r in records], dtype=float).reshape(len(records), d)
    y = np.array([r["y"] for r in records], dtype=float)
    return X, y
