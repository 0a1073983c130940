"""Spec §10 V1 (reference mode), V3, V4 and the §4.2 attack of V9."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from learners.secure_vertical import SecureVerticalLogisticRegression
from learners.secure_vertical._reference import (
    MessageLog,
    Transcript,
    decode,
    encode,
    fair_g,
    leak_uses,
    orthogonal_z,
    recover_block,
    reference_newton,
    ring_sum,
    share_sum,
    z_matrix_product,
    z_recovery,
)
from tests.learners.secure_vertical._data import SPLITS, pooled_mle, split, v1_data


@pytest.mark.parametrize("k", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_v1_reference_equals_pooled_mle(rng: np.random.Generator, k: int) -> None:
    X, y = v1_data(rng)
    ref = pooled_mle(X, y)
    est = SecureVerticalLogisticRegression(backend="reference", random_state=1).fit(
        split(X, SPLITS[k]), y
    )
    assert est.n_iter_ <= 8
    np.testing.assert_allclose(np.r_[est.intercept_, est.coef_], ref, atol=1e-8)
    assert {3, 4, 5, 6}.issubset(est.leakage_rows_)
    assert est.ledger_.opens_dimension(X.shape[0])  # η per record: row 3


def test_v3_sums_exact_and_fixed_point_error(rng: np.random.Generator) -> None:
    K = 5
    vals = [rng.uniform(-100, 100, 50) for _ in range(K)]
    enc = [encode(v) for v in vals]
    exact = sum(enc[1:], start=enc[0].copy())
    for proto in (ring_sum, share_sum):
        out = proto(enc, rng)
        np.testing.assert_array_equal(out, exact)  # the exact modular sum
        assert np.max(np.abs(decode(out) - sum(vals))) <= K * 2.0**-32
    with pytest.raises(ValueError, match="K: ring"):
        ring_sum(enc[:2], rng)


def test_v3_ring_messages_uniform(rng: np.random.Generator) -> None:
    # each message position separately (the messages of one run are dependent)
    top: list[list[int]] = [[], [], []]
    for _ in range(10_000):
        log = MessageLog()
        ring_sum([encode(1.0), encode(2.0), encode(-3.5)], rng, log)
        ring = [m for m in log.messages if m.label == "ring running total"]
        for pos, m in enumerate(ring):
            top[pos].append(int(m.payload) >> 56)
    for pos in range(3):
        counts = np.bincount(top[pos], minlength=256)
        assert chisquare(counts).pvalue > 1e-4


def test_v4_z_matrix_product(rng: np.random.Generator) -> None:
    n, a, b = 200, 3, 2
    XA, XB = rng.standard_normal((n, a)), rng.standard_normal((n, b))
    g = fair_g(n, a, b)
    assert g == round(b * n / (a + b))
    assert abs(a * g - b * (n - g)) <= (a + b) / 2
    Z = orthogonal_z(XA, g, rng)
    assert np.max(np.abs(Z.T @ XA)) < 1e-12
    np.testing.assert_allclose(Z.T @ Z, np.eye(g), atol=1e-12)
    log = MessageLog()
    prod = z_matrix_product(XA, XB, rng, log)
    scale = np.abs(XA).max() * np.abs(XB).max() * n
    assert np.max(np.abs(prod - XA.T @ XB)) < 1e-10 * scale
    assert [m.label for m in log.messages] == ["Z", "W"]
    with pytest.raises(ValueError, match="n > a \\+ b"):
        z_matrix_product(XA[:4], XB[:4], rng)


def test_v4_repeated_use_determines_xb(rng: np.random.Generator) -> None:
    n, a, b = 60, 3, 2
    XA, XB = rng.standard_normal((n, a)), rng.standard_normal((n, b))
    uses = leak_uses(a, b)
    assert uses == 2
    rank1, _ = z_recovery(XA, XB, 1, rng)
    assert rank1 < n
    rank, est = z_recovery(XA, XB, uses, rng)
    assert rank == n
    assert np.max(np.abs(est - XB)) < 1e-8


def test_v9_reference_attack_recovers_other_block(rng: np.random.Generator) -> None:
    X, y = v1_data(rng, n=400)
    blocks = split(X, [3, 3])
    blocks[0] = np.hstack([np.ones((X.shape[0], 1)), blocks[0]])
    tr = Transcript()
    reference_newton(blocks, y, random_state=2, transcript=tr)
    # party A1, from the η and β every party saw (the first iteration has β = 0)
    V = recover_block(tr, blocks[0], slice(0, 4), slice(4, 7))
    assert len(tr.etas) <= 8
    # exact up to the 2^-32 encoding of η, amplified by the conditioning of the β_2
    assert np.max(np.abs(V - blocks[1])) < 1e-5
    with pytest.raises(ValueError, match="do not span"):
        recover_block(
            Transcript(betas=tr.betas[:2], etas=tr.etas[:2]),
            blocks[0],
            slice(0, 4),
            slice(4, 7),
        )


def test_v9_mpc_mode_leaves_nothing_to_attack(rng: np.random.Generator) -> None:
    X, y = v1_data(rng)
    est = SecureVerticalLogisticRegression(reveal="R2").fit(split(X, [3, 3]), y)
    per_record = [o for o in est.ledger_.openings if X.shape[0] in o.shape]
    assert per_record == []
    assert not {3, 4, 5}.intersection(est.leakage_rows_)
