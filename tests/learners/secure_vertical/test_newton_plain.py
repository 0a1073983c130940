"""Spec §10 V1 and V2 on the plain backend; bad input; the ledger at R1/R2 (V9)."""

from __future__ import annotations

import numpy as np
import pytest

from learners import LEARNERS
from learners.secure_vertical import (
    PlainBackend,
    SecureVerticalLogisticRegression,
    assemble,
    cholesky_solve,
    information_blocks,
    schur_solve,
    secure_newton,
)
from tests.learners.secure_vertical._data import SPLITS, pooled_mle, split, v1_data


def test_registered_under_contract_name() -> None:
    assert LEARNERS["secure_vertical_logistic"] is SecureVerticalLogisticRegression
    est = SecureVerticalLogisticRegression()
    assert (est.backend, est.imputation, est.lam, est.random_state) == (
        "plain",
        "em",
        0.0,
        None,
    )


@pytest.mark.parametrize("k", [2, 3, 5])
def test_v1_plain_equals_pooled_mle(rng: np.random.Generator, k: int) -> None:
    X, y = v1_data(rng)
    ref = pooled_mle(X, y)
    est = SecureVerticalLogisticRegression().fit(split(X, SPLITS[k]), y)
    assert est.n_iter_ <= 8
    np.testing.assert_allclose(est.intercept_, ref[0], atol=1e-8)
    np.testing.assert_allclose(est.coef_, ref[1:], atol=1e-8)


def test_v1_r2_same_estimate_and_opens_nothing_per_record(
    rng: np.random.Generator,
) -> None:
    X, y = v1_data(rng)
    r1 = SecureVerticalLogisticRegression(reveal="R1").fit(split(X, SPLITS[3]), y)
    r2 = SecureVerticalLogisticRegression(reveal="R2").fit(split(X, SPLITS[3]), y)
    np.testing.assert_allclose(r2.coef_, r1.coef_, atol=1e-10)
    # V9: R1 opens g, I and β per iteration (rows 2, 6); R2 only the bit and β̂ (row 7)
    assert r1.ledger_.labels() == {"g", "I", "beta_t"}
    assert r1.leakage_rows_ == {1, 2, 6}
    assert r2.ledger_.labels() == {"converged", "beta"}
    assert r2.leakage_rows_ == {1, 7}
    for est in (r1, r2):
        assert not est.ledger_.opens_dimension(X.shape[0])


def test_v2_block_structure(rng: np.random.Generator) -> None:
    X, _ = v1_data(rng, n=300)
    Z = np.hstack([np.ones((300, 1)), X])
    blocks = split(Z, [3, 2, 2])
    w = rng.random(300) * 0.25
    parts = information_blocks(blocks, w)
    for (k, l), B in parts.items():  # noqa: E741
        assert B.shape == (blocks[k].shape[1], blocks[l].shape[1])
        np.testing.assert_allclose(B, parts[(l, k)].T, atol=1e-12)
    info = assemble(parts, [3, 2, 2])
    np.testing.assert_allclose(info, (Z.T * w) @ Z, atol=1e-12)
    g = rng.standard_normal(7)
    np.testing.assert_allclose(
        schur_solve(info, g, 3), cholesky_solve(info, g), atol=1e-10
    )
    # the paper's eq. (7) orientation (V Dᵀ U in the (1,2) slot) does not even fit
    U, V = blocks[0], blocks[1]
    with pytest.raises(ValueError, match="could not broadcast"):
        assemble({(0, 1): (V.T * w) @ U}, [3, 2])


def test_secure_newton_rejects_unknown_reveal() -> None:
    ops = PlainBackend()
    with pytest.raises(ValueError, match="reveal"):
        secure_newton(ops, np.ones((3, 1)), np.ones(3), d=1, reveal="R3")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("blocks", "match"),
    [
        ([], "non-empty"),
        ([np.ones((3, 1)), np.ones((4, 1))], r"blocks\[1\] has 4 rows"),
        (
            [np.ones((3, 1)), np.ones((3, 0))],
            r"blocks\[1\]: the party holds no feature",
        ),
        ([np.ones((3, 1)), np.array([[1.0, np.nan]] * 3)], "partly missing"),
        ([np.ones((3, 1)), np.full((3, 1), np.inf)], "finite"),
        (
            [np.array([[1.0], [np.nan], [1.0]]), np.array([[1.0], [np.nan], [2.0]])],
            "held by no party",
        ),
    ],
)
def test_bad_blocks_name_the_parameter(blocks: list[np.ndarray], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SecureVerticalLogisticRegression().fit(blocks, np.ones(3))


def test_bad_labels() -> None:
    b = [np.ones((3, 1)), np.ones((3, 1))]
    with pytest.raises(ValueError, match="y must hold labels"):
        SecureVerticalLogisticRegression().fit(b, [0, 1, 2])
    orphan = [np.array([[1.0], [np.nan], [1.0]]), np.ones((3, 1))]
    with pytest.raises(ValueError, match="label holder"):
        SecureVerticalLogisticRegression().fit(orphan, [0, 1, 1])


def test_dp_needs_positive_lam_and_one_budget(rng: np.random.Generator) -> None:
    X, y = v1_data(rng, n=50)
    b = split(X / 10, SPLITS[2])
    with pytest.raises(ValueError, match="lam must be > 0"):
        SecureVerticalLogisticRegression().fit(b, y, party_epsilon=[1.0, 1.0])
    with pytest.raises(ValueError, match="not both"):
        SecureVerticalLogisticRegression(lam=0.1).fit(
            b, y, party_epsilon=[1.0, 1.0], sample_epsilon=np.ones(50)
        )
    with pytest.raises(ValueError, match="one ε per party"):
        SecureVerticalLogisticRegression(lam=0.1).fit(b, y, party_epsilon=[1.0])


def test_pm_labels_and_predict(rng: np.random.Generator) -> None:
    X, y = v1_data(rng, n=400)
    est = SecureVerticalLogisticRegression().fit(split(X, SPLITS[2]), 2 * y - 1)
    ref = SecureVerticalLogisticRegression().fit(split(X, SPLITS[2]), y)
    np.testing.assert_allclose(est.coef_, ref.coef_)
    assert set(np.unique(est.predict(X))) <= {-1, 1}
    assert np.mean(est.predict(X) == 2 * y - 1) > 0.6
