"""The hashed heavy-hitter variant (spec §4.2–§4.3, the reference's TreeHist oracle):
constants, the per-cell estimate's unbiasedness, recovery, and a full fit."""

from __future__ import annotations

import math

import numpy as np

from learners.uldp_sparse import (
    BitMessages,
    PrefixHashes,
    ULDPSparseLinearRegression,
    debias_factor,
    hash_constants,
    hashed_frequency_oracle,
    hashed_heavy_hitter_randomizer,
    heavy_hitters,
    independent_design,
    prefix_key,
)


def test_reference_constants() -> None:
    """``t = ⌊log2(n1/β)⌋``, ``M`` the largest power of 2 ``≤ ⌊√(n1/log2(n1/β))⌋``,
    β = 0.05: the spec's n1 = 200 example (t = 11, M = 4); n1 = 20,000:
    log2(400,000) = 18.61 → t = 18, √(20,000/18.61) = 32.8 → M = 32."""
    assert hash_constants(200) == (11, 4)
    assert hash_constants(20_000) == (18, 32)
    assert hash_constants(1) == (4, 1)


def test_keys_are_unique_per_length_and_prefix() -> None:
    keys = [int(prefix_key(u, lv)) for lv in range(1, 9) for u in range(2**lv)]
    assert len(set(keys)) == len(keys)


def test_hashes_are_public_functions_into_m_buckets_with_balanced_signs() -> None:
    h = PrefixHashes.draw(5, 8, np.random.default_rng(0))
    keys = np.arange(1, 4097)
    for j in range(5):
        b = h.bucket(j, keys)
        assert b.min() >= 0
        assert b.max() < 8
        np.testing.assert_array_equal(b, h.bucket(np.full(keys.size, j), keys))
        counts = np.bincount(b, minlength=8)
        assert counts.min() > 0.8 * keys.size / 8
        assert abs(float(h.sign(j, keys).mean())) < 0.06


def test_one_hash_cell_is_unbiased_over_the_public_hashes(
    rng: np.random.Generator,
) -> None:
    """One level (ℓ = 4, 16 prefixes), 4,000 users with known counts, one hash pair into
    M = 4 buckets (so every key collides with others), ε = 1; 400 repetitions redrawing
    the hashes, rows and coins: the mean estimate of every count is within 4 standard
    errors of the truth (collisions add ``± count`` with a random sign)."""
    n, reps, eps, level = 4000, 400, 1.0, 4
    counts = rng.multinomial(n, rng.dirichlet(np.ones(16)))
    prefixes = np.repeat(np.arange(16), counts)
    cand = np.arange(16)
    e, lv, cell = np.full(n, eps), np.full(n, level), np.zeros(n, dtype=np.int64)
    est = np.empty((reps, 16))
    for r in range(reps):
        hashes = PrefixHashes.draw(1, 4, rng)
        row = rng.integers(0, 4, n)
        bits = hashed_heavy_hitter_randomizer(
            prefixes, level=lv, cell=cell, row=row, n_levels=level, hashes=hashes,
            epsilon=e, rng=rng,
        )  # fmt: skip
        msgs = BitMessages(lv, row, bits, e, cell=cell)
        est[r] = hashed_frequency_oracle(
            msgs, cand, level=level, hashes=hashes, n_total=n
        )
    se = est.std(axis=0, ddof=1) / math.sqrt(reps)
    assert np.all(np.abs(est.mean(axis=0) - counts) <= 4 * se)
    # the spread is at least the direct oracle's (√(N c² − count)): hashing adds noise
    c = float(debias_factor(eps))
    assert np.all(est.std(axis=0, ddof=1) >= 0.9 * np.sqrt(n * c**2 - counts))


def test_hashed_heavy_hitters_recover_random_heavy_indices(
    rng: np.random.Generator,
) -> None:
    """V3's setting (d = 256, n1 = 20,000, 8 random heavy indices with 10 % of the votes
    each, ε = 4, k = 8, top-k) with the hashed oracle: t = 18 cells of ≈ 139 users per
    level, per-cell sd ≈ n1·c_ε/√139 ≈ 1,760 counts, median over 18 cells ≈ 520, against
    2,000 votes per heavy index: mean recall over 10 runs ≥ 0.8."""
    recall = []
    for _ in range(10):
        heavy = rng.choice(256, 8, replace=False)
        v = np.concatenate([np.repeat(heavy, 2000), rng.integers(0, 256, 4000)])
        res = heavy_hitters(
            rng.permutation(v), np.full(v.size, 4.0), d=256, k=8, rng_public=rng,
            rng_private=rng, oracle="hashed",
        )  # fmt: skip
        assert res.hashes is not None
        assert res.hashes.n_hashes == 18
        recall.append(len(set(res.support.tolist()) & set(heavy.tolist())) / 8)
    assert np.mean(recall) >= 0.8


def test_a_fit_with_the_hashed_oracle_sends_one_message_per_user(
    rng: np.random.Generator,
) -> None:
    des = independent_design(300, 20, 64, rng=rng)
    eps_user = rng.uniform(0.5, 6.0, 300)
    est = ULDPSparseLinearRegression(hh_oracle="hashed", sparsity=4, random_state=2)
    est.fit(des.X, des.y, sample_epsilon=eps_user[des.groups], groups=des.groups)
    assert est.selection_.hashes is not None
    assert 1 <= est.support_.size <= 4
    np.testing.assert_array_equal(est.ledger_.messages, np.ones(300, dtype=int))
    np.testing.assert_array_equal(est.ledger_.spent, eps_user)
    direct = ULDPSparseLinearRegression(sparsity=4, random_state=2).fit(
        des.X, des.y, sample_epsilon=eps_user[des.groups], groups=des.groups
    )
    assert direct.selection_.hashes is None
