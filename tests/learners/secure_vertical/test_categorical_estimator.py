"""``imputation="categorical_em"`` (spec §5.5, V8 at a small scale): the saturated
multinomial EM from pattern tables feeds the logistic fit through dummies with
conditional-expectation imputation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from learners.secure_vertical import SecureVerticalLogisticRegression
from tests.learners.secure_vertical._data import pooled_mle
from tests.learners.secure_vertical.test_dp import _spy_run

LEVELS = [[3, 4], [3, 2], [2, 3]]  # three parties; full table 432 cells
FLAT = [v for lv in LEVELS for v in lv]


def _data(
    rng: np.random.Generator, n: int = 900
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Codes with dependence between parties (a latent class), ``y`` logistic in
    the dummies, and the blocks."""
    z = rng.random(n) < 0.4
    W = np.column_stack([
        np.where(z, rng.integers(0, L, n), rng.integers(0, max(1, L // 2), n)) for L in FLAT
    ])  # fmt: skip
    D = _dummies(W.astype(float))
    beta = rng.normal(0, 0.7, D.shape[1])
    y = (rng.random(n) < 1 / (1 + np.exp(-(-0.3 + D @ beta)))).astype(float)
    edges = np.cumsum([0, *[len(lv) for lv in LEVELS]])
    blocks = [W[:, a:b].astype(float) for a, b in itertools.pairwise(edges)]
    return W, y, blocks


def _dummies(W: np.ndarray) -> np.ndarray:
    """One-hot without level 0, column by column (observed codes only)."""
    return np.hstack(
        [np.eye(L)[W[:, v].astype(int)][:, 1:] for v, L in enumerate(FLAT)]
    )


def _posterior_by_enumeration(q: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Expected dummies of one record: every full cell consistent with the observed
    codes, weighted by ``q`` (brute force, independent of the learner's code)."""
    total = 0.0
    acc = np.zeros(sum(L - 1 for L in FLAT))
    for cell in itertools.product(*[range(L) for L in FLAT]):
        if all(np.isnan(r) or int(r) == c for r, c in zip(row, cell, strict=True)):
            w = q[cell]
            total += w
            acc += w * _dummies(np.array([cell], dtype=float))[0]
    return acc / total


def test_complete_blocks_give_the_pooled_dummy_fit(rng: np.random.Generator) -> None:
    W, y, blocks = _data(rng)
    est = SecureVerticalLogisticRegression(
        imputation="categorical_em", categorical_levels=LEVELS
    ).fit(blocks, y)
    ref = pooled_mle(_dummies(W.astype(float)), y)
    np.testing.assert_allclose(np.r_[est.intercept_, est.coef_], ref, atol=1e-6)
    assert est.dummy_columns_ is not None
    assert len(est.dummy_columns_) == est.coef_.size
    assert est.dummy_columns_[0] == (0, 0, 1)
    assert est.dummy_columns_[-1] == (2, 1, 2)


def test_missing_blocks_are_imputed_by_conditional_expectation(
    rng: np.random.Generator,
) -> None:
    _W, y, blocks = _data(rng)
    n = y.size
    blocks[1][: n // 3] = np.nan  # pattern {A, C}
    blocks[2][n // 3 : n // 2] = np.nan  # pattern {A, B}
    blocks[1][n // 2 : 2 * n // 3] = np.nan
    blocks[2][n // 2 : 2 * n // 3] = np.nan  # pattern {A}
    est = SecureVerticalLogisticRegression(
        imputation="categorical_em", categorical_levels=LEVELS, em_max_iter=500
    ).fit(blocks, y)
    q = est.cell_probabilities_
    assert q is not None
    assert q.shape == tuple(FLAT)
    assert q.sum() == pytest.approx(1.0)
    assert q.min() >= 0
    X = np.hstack(blocks)
    D = np.vstack([
        _posterior_by_enumeration(q, X[i]) if np.isnan(X[i]).any() else _dummies(X[i : i + 1])[0]
        for i in range(n)
    ])  # fmt: skip
    ref = pooled_mle(D, y)
    np.testing.assert_allclose(np.r_[est.intercept_, est.coef_], ref, atol=1e-6)
    # only the pattern tables are opened (§6 row 13): nothing with a dimension of size n
    assert "pattern tables N_m" in est.ledger_.labels()
    assert not est.ledger_.opens_dimension(n)
    assert 13 in est.leakage_rows_


def test_saturated_em_fixes_q_on_complete_tables(rng: np.random.Generator) -> None:
    W, y, blocks = _data(rng, n=400)
    est = SecureVerticalLogisticRegression(
        imputation="categorical_em", categorical_levels=LEVELS, em_max_iter=3
    ).fit(blocks, y)
    counts = np.zeros(FLAT)
    np.add.at(counts, tuple(W.T), 1.0)
    np.testing.assert_allclose(est.cell_probabilities_, counts / 400, atol=1e-12)


def test_dp_categorical_fit_reports_both_stages(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    _W, y, blocks = _data(rng, n=600)
    blocks[2][:200] = np.nan
    seen = _spy_run(SecureVerticalLogisticRegression, monkeypatch)
    est = SecureVerticalLogisticRegression(
        imputation="categorical_em", categorical_levels=LEVELS, lam=0.05,
        random_state=3, em_max_iter=200,
    ).fit(blocks, y, party_epsilon=[2.0, 2.0, 2.0])  # fmt: skip
    rep = est.privacy_report_
    assert rep is not None
    assert rep.guarantee == "conditional_on_allocation"  # plain: a central label
    theta, total = rep.stages[0].sample_epsilon, rep.sample_epsilon_total
    assert theta[0] == pytest.approx(0.2 * 2.0)
    assert max(total) <= 2.0 + 1e-9
    assert "pattern tables N_m + DP noise" in est.ledger_.labels()
    design = np.hstack(seen["party_blocks"])  # what the secure fit received
    assert np.linalg.norm(design, axis=1).max() <= 1 + 1e-12


@pytest.mark.parametrize(
    ("kwargs", "mutate", "match"),
    [
        ({}, None, "categorical_levels: imputation='categorical_em' needs"),
        ({"categorical_levels": LEVELS[:2]}, None, "categorical_levels: 2 lists"),
        (
            {"categorical_levels": [[3], [3, 2], [2, 3]]},
            None,
            r"categorical_levels\[0\]",
        ),
        (
            {"categorical_levels": [[3, 4], [3, 1], [2, 3]]},
            None,
            r"categorical_levels\[1\]",
        ),
        ({"categorical_levels": LEVELS}, (1, 1, 2.0), r"blocks\[1\]"),
        ({"categorical_levels": LEVELS}, (2, 0, 0.5), r"blocks\[2\]"),
    ],
)
def test_bad_categorical_input_names_the_parameter(
    rng: np.random.Generator, kwargs: dict[str, object],
    mutate: tuple[int, int, float] | None, match: str,
) -> None:  # fmt: skip
    _, y, blocks = _data(rng, n=60)
    if mutate is not None:
        k, col, value = mutate
        blocks[k][0, col] = value
    est = SecureVerticalLogisticRegression(imputation="categorical_em", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=match):
        est.fit(blocks, y)
