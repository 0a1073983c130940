"""Checks and alignment of per-party column blocks (spec §1.1–§1.3).

A vertical data set is a list of blocks ``X_k`` (``n × p_k``), rows aligned on the
public record key; a row of NaN means party ``k`` does not hold the record. Within its
own records a party has no missing cells (§1.1), so a row is either all finite or all
NaN. The first party is the label holder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]


def check_blocks(blocks: Any) -> tuple[list[FloatArray], NDArray[np.bool_]]:
    """Validated float blocks and the pattern table ``held[i, k] = i ∈ R_k``.

    Raises
    ------
    ValueError
        Naming ``blocks`` or ``blocks[k]``: not a non-empty list of 2-D arrays with the
        same number of rows, a party holding no feature, inf, a partly missing row,
        or a record no party holds.
    """
    if not isinstance(blocks, list | tuple) or not blocks:
        raise ValueError("blocks must be a non-empty list of per-party 2-D arrays")
    out: list[FloatArray] = []
    for k, b in enumerate(blocks):
        arr = np.asarray(b, dtype=float)
        if arr.ndim != 2:
            raise ValueError(
                f"blocks[{k}] must be 2-D (records × features), got shape {arr.shape}"
            )
        if arr.shape[1] == 0:
            raise ValueError(f"blocks[{k}]: the party holds no feature")
        if out and arr.shape[0] != out[0].shape[0]:
            raise ValueError(
                f"blocks[{k}] has {arr.shape[0]} rows, blocks[0] has {out[0].shape[0]}: "
                "rows must be aligned on the record key"
            )
        if np.isinf(arr).any():
            raise ValueError(
                f"blocks[{k}] must be finite (NaN only for a record the party does not hold)"
            )
        nan = np.isnan(arr)
        partial = nan.any(axis=1) & ~nan.all(axis=1)
        if partial.any():  # never which row: missingness is part of the records
            raise ValueError(
                f"blocks[{k}]: some row is partly missing; a party holds a record's "
                "whole block or none of it"
            )
        out.append(arr)
    if out[0].shape[0] == 0:
        raise ValueError("blocks must have at least one record")
    held = np.column_stack([~np.isnan(b[:, 0]) for b in out])
    nobody = ~held.any(axis=1)
    if nobody.any():
        raise ValueError("blocks: some record is held by no party")
    return out, held


def check_labels(
    y: Any, held_by_label_holder: NDArray[np.bool_]
) -> tuple[FloatArray, NDArray[np.bool_], bool]:
    """``(y01, labelled, pm)``: labels in ``{0, 1}`` (``−1`` maps to 0), which records
    carry one (NaN = none), and whether the input used ``{−1, +1}``.

    Raises
    ------
    ValueError
        Naming ``y``: wrong length, a label outside ``{0, 1}``/``{−1, +1}``, mixed
        conventions, or a label on a record the label holder (blocks[0]) does not hold.
    """
    arr = np.asarray(y, dtype=float).reshape(-1)
    if arr.size != held_by_label_holder.size:
        raise ValueError(
            f"y has {arr.size} labels for {held_by_label_holder.size} records"
        )
    labelled = ~np.isnan(arr)
    vals = set(np.unique(arr[labelled]).tolist())
    if not vals <= {0.0, 1.0} and not vals <= {-1.0, 1.0}:
        raise ValueError(  # never the offending values: they are records
            "y must hold labels in {0, 1} or {-1, +1} (one convention)"
        )
    if not labelled.any():
        raise ValueError("y: no record is labelled")
    orphan = labelled & ~held_by_label_holder
    if orphan.any():
        raise ValueError(
            "y: some record has a label but the label holder (blocks[0]) does not hold it"
        )
    pm = -1.0 in vals
    y01 = np.where(arr == -1.0, 0.0, arr)
    return y01, labelled, pm


def align_by_key(
    keys: Sequence[Sequence[str]], values: Sequence[ArrayLike]
) -> tuple[list[str], list[FloatArray]]:
    """Align per-party blocks on the public record key (the union of the keys, sorted).

    ``keys[k]`` lists party ``k``'s record keys (pseudonymous strings), ``values[k]``
    its rows in the same order. Returns the key universe and the aligned blocks (NaN
    rows where a party does not hold a key). The key lists are what the parties learn
    about each other (§6 row 1).

    Raises
    ------
    ValueError
        Naming ``keys[k]``: a duplicate key within a party, a non-string key, or a
        length that does not match ``values[k]``.
    """
    if len(keys) != len(values):
        raise ValueError("keys and values must list the same parties")
    for k, ks in enumerate(keys):
        if len(ks) != len(np.asarray(values[k])):
            raise ValueError(
                f"keys[{k}] has {len(ks)} keys for {len(np.asarray(values[k]))} rows"
            )
        if not all(isinstance(s, str) and s for s in ks):
            raise ValueError(f"keys[{k}] must be non-empty strings")
        seen: set[str] = set()
        for s in ks:
            if s in seen:
                raise ValueError(f"keys[{k}]: duplicate record key {s!r}")
            seen.add(s)
    universe = sorted(set().union(*[set(ks) for ks in keys]))
    index = {s: i for i, s in enumerate(universe)}
    out = []
    for ks, v in zip(keys, values, strict=True):
        arr = np.asarray(v, dtype=float)
        block = np.full((len(universe), arr.shape[1]), np.nan)
        block[[index[s] for s in ks]] = arr
        out.append(block)
    return universe, out
