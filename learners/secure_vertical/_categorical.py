"""Categorical covariates: the saturated multinomial model with missing data (spec §5.5).

**Correction (identifiability)**: a mixture of single-trial multinomials over the full
table is one multinomial ``q_c = Σ_j π_j p_jc``; only ``q`` is estimable. EM for ``q``
needs only, per missing-data pattern ``m``, the contingency table ``N_m(o)`` of the
pattern's observed variables (computed securely once; never the per-record consistent
cell sets ``S_i``, which disclose every observed value, §6 row 13):

- E-step: spread ``N_m(o)`` over the full cells ``c ∈ S(o)`` in proportion to ``q_c``;
- M-step: ``q_c`` = total allocated to ``c`` divided by ``n``.

Imputation (**Correction**): conditional on the observed cell, not from the marginal;
the deterministic expected one-hot imputation is ``T_m · onehot(o)`` with ``T_m`` the
public posterior level probabilities (:func:`impute_dummies`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
Table = tuple[tuple[int, ...], FloatArray]


def pattern_tables(W: IntArray, levels: tuple[int, ...]) -> list[Table]:
    """``[(observed variables, N_m)]`` per pattern; ``W[i, v] = −1`` marks missing.

    Raises
    ------
    ValueError
        A level outside ``[0, levels[v])`` (``W`` named), or a record with nothing observed.
    """
    W = np.asarray(W)
    if W.ndim != 2 or W.shape[1] != len(levels):
        raise ValueError(f"W must have {len(levels)} columns")
    lv = np.asarray(levels)
    if np.any((lv <= W) | (W < -1)):
        raise ValueError("W: a level is out of range")
    obs = W >= 0
    if not obs.any(axis=1).all():
        raise ValueError("W: a record has no observed variable")
    out: list[Table] = []
    for key in np.unique(obs, axis=0):
        rows = np.all(obs == key, axis=1)
        vars_ = tuple(int(v) for v in np.flatnonzero(key))
        counts = np.zeros(tuple(levels[v] for v in vars_))
        np.add.at(counts, tuple(W[rows][:, v] for v in vars_), 1.0)
        out.append((vars_, counts))
    return out


def _margin(q: FloatArray, vars_: tuple[int, ...]) -> FloatArray:
    drop = tuple(v for v in range(q.ndim) if v not in vars_)
    return np.asarray(q.sum(axis=drop), dtype=float)


def _expand(table: FloatArray, vars_: tuple[int, ...], ndim: int) -> FloatArray:
    shape = [1] * ndim
    for axis, v in enumerate(vars_):
        shape[v] = table.shape[axis]
    return table.reshape(shape)


def saturated_em(
    levels: tuple[int, ...],
    tables: list[Table],
    *,
    n_iter: int = 200,
    q0: FloatArray | None = None,
) -> FloatArray:
    """EM for the full-table cell probabilities ``q`` from the pattern tables
    (module docstring), ``n_iter`` iterations from ``q0`` (uniform by default)."""
    q = (
        np.full(levels, 1.0 / np.prod(levels))
        if q0 is None
        else np.array(q0, dtype=float)
    )
    n = sum(float(t.sum()) for _, t in tables)
    for _ in range(n_iter):
        alloc = np.zeros(levels)
        for vars_, counts in tables:
            marg = _margin(q, vars_)
            ratio = np.divide(counts, marg, out=np.zeros_like(counts), where=marg > 0)
            alloc += q * _expand(ratio, vars_, len(levels))
        q = alloc / n
    return q


def impute_dummies(
    q: FloatArray, vars_: tuple[int, ...], values: tuple[int, ...]
) -> dict[int, FloatArray]:
    """Posterior level probabilities of every unobserved variable given the observed
    cell ``values`` of ``vars_`` (the expected one-hot imputation, public given ``q``)."""
    index: list[slice | int] = [slice(None)] * q.ndim
    for v, x in zip(vars_, values, strict=True):
        index[v] = x
    cond = q[tuple(index)]
    total = float(cond.sum())
    free = [v for v in range(q.ndim) if v not in vars_]
    out = {}
    for axis, v in enumerate(free):
        others = tuple(a for a in range(len(free)) if a != axis)
        out[v] = np.asarray(cond.sum(axis=others), dtype=float) / total
    return out
