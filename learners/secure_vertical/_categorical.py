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

from collections.abc import Sequence

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
    cell ``values`` of ``vars_`` (the expected one-hot imputation, public given ``q``).

    An observed cell with no mass under ``q`` (possible when ``q`` comes from noisy
    DP tables whose negative counts were set to 0) falls back to the unconditional
    marginals of ``q``."""
    index: list[slice | int] = [slice(None)] * q.ndim
    for v, x in zip(vars_, values, strict=True):
        index[v] = x
    cond = q[tuple(index)]
    total = float(cond.sum())
    if not total > 0:
        cond = q.sum(axis=tuple(vars_)) if vars_ else q
        total = float(cond.sum())
    free = [v for v in range(q.ndim) if v not in vars_]
    out = {}
    for axis, v in enumerate(free):
        others = tuple(a for a in range(len(free)) if a != axis)
        out[v] = np.asarray(cond.sum(axis=others), dtype=float) / total
    return out


MAX_CELLS = 1_000_000


def check_levels(
    blocks: list[FloatArray], levels: Sequence[Sequence[int]] | None
) -> tuple[tuple[int, ...], IntArray]:
    """All variables' level counts and the codes ``W`` (``−1`` = missing) of
    categorical blocks (codes ``0..L−1``, NaN rows for records a party lacks).

    Raises
    ------
    ValueError
        Naming ``categorical_levels`` (absent, wrong shape, a count < 2, too many
        cells) or ``blocks[k]`` (a code that is not an integer in range).
    """
    if levels is None:
        raise ValueError(
            "categorical_levels: imputation='categorical_em' needs the level count of "
            "every column, one list per party"
        )
    if len(levels) != len(blocks):
        raise ValueError(
            f"categorical_levels: {len(levels)} lists for {len(blocks)} parties"
        )
    flat: list[int] = []
    for k, (b, lv) in enumerate(zip(blocks, levels, strict=True)):
        if len(lv) != b.shape[1]:
            raise ValueError(
                f"categorical_levels[{k}]: {len(lv)} counts for {b.shape[1]} columns"
            )
        if any(int(v) != v or v < 2 for v in lv):
            raise ValueError(f"categorical_levels[{k}]: counts must be integers >= 2")
        flat.extend(int(v) for v in lv)
    if float(np.prod(np.array(flat, dtype=float))) > MAX_CELLS:
        raise ValueError(
            f"categorical_levels: the full table has more than {MAX_CELLS} cells"
        )
    X = np.hstack(blocks)
    codes = np.where(np.isnan(X), -1.0, X)
    top = np.array(flat)
    bad = (codes != np.round(codes)) | (codes < -1) | (codes >= top[None, :])
    if bad.any():
        col = int(np.flatnonzero(bad.any(axis=0))[0])
        k = int(
            np.searchsorted(np.cumsum([b.shape[1] for b in blocks]), col, side="right")
        )
        raise ValueError(
            f"blocks[{k}]: categorical codes must be integers in [0, level count)"
        )
    return tuple(flat), codes.astype(np.int64)


def noisy_tables(
    tables: list[Table], eps_theta: float, rng: np.random.Generator
) -> list[Table]:
    """DP release of the pattern tables (spec §5.5, §7.3): replacing one record moves
    one count within its (public) pattern's table, ``L1`` sensitivity 2, so each cell
    gets discrete Laplace noise of scale ``2/ε_θ`` (integer grid); negative counts are
    set to 0 (post-processing)."""
    from learners.secure_vertical._dp import discrete_laplace

    out: list[Table] = []
    for vars_, counts in tables:
        noise = np.round(discrete_laplace(2.0 / eps_theta, counts.shape, rng))
        out.append((vars_, np.maximum(counts + noise, 0.0)))
    return out


def dummy_design(
    W: IntArray, levels: tuple[int, ...], q: FloatArray, sizes: list[int]
) -> tuple[list[FloatArray], list[tuple[int, int, int]]]:
    """Per-party dummy blocks (reference level 0 dropped) with missing variables
    replaced by their posterior level probabilities given the record's observed cell
    (:func:`impute_dummies`; one computation per distinct observed cell), and the
    column labels ``(party, variable within the party, level)``."""
    n, p = W.shape
    owner = np.repeat(np.arange(len(sizes)), sizes)
    local = np.concatenate([np.arange(s) for s in sizes])
    probs = [np.zeros((n, levels[v])) for v in range(p)]
    obs = W >= 0
    for v in range(p):
        probs[v][obs[:, v], W[obs[:, v], v]] = 1.0
    partial = ~obs.all(axis=1)
    if partial.any():
        key = np.where(obs, W, -1)[partial]
        uniq, inverse = np.unique(key, axis=0, return_inverse=True)
        rows = np.flatnonzero(partial)
        for u, cell in enumerate(uniq):
            vars_ = tuple(int(v) for v in np.flatnonzero(cell >= 0))
            post = impute_dummies(q, vars_, tuple(int(cell[v]) for v in vars_))
            sel = rows[inverse.reshape(-1) == u]
            for v, pr in post.items():
                probs[v][sel] = pr
    blocks: list[FloatArray] = []
    labels: list[tuple[int, int, int]] = []
    for k in range(len(sizes)):
        cols = [probs[v][:, 1:] for v in range(p) if owner[v] == k]
        labels.extend(
            (k, int(local[v]), lvl)
            for v in range(p)
            if owner[v] == k
            for lvl in range(1, levels[v])
        )
        blocks.append(np.hstack(cols))
    return blocks, labels
