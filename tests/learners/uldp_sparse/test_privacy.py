"""V1 (spec §15): exact privacy of the one-bit randomizer, the Laplace reports' inputs and
scale, the per-user ledger after a full fit, and the randomizer/curator separation; plus
the broken twin D1 (the reference's re-drawn bits), which the empirical audit catches."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

from learners.uldp_sparse import (
    PrefixHashes,
    PrivacyLedger,
    ULDPSparseLinearRegression,
    bin_randomizer,
    frequency_oracle,
    hadamard_entry,
    hashed_heavy_hitter_randomizer,
    heavy_hitter_randomizer,
    independent_design,
    keep_probability,
    laplace_randomizer,
    locate_bins,
    one_bit_randomizer,
    uldp_mean,
    weighted_means,
)

GRID = 200_000


class CoinGrid:
    """A stand-in generator whose ``random(n)`` returns the midpoints of ``GRID`` equal
    cells of [0, 1): counting outputs over it integrates the coin exactly (to 1/GRID)."""

    def random(self, n: int) -> np.ndarray:
        assert n == GRID
        return (np.arange(GRID) + 0.5) / GRID


def _output_probabilities(
    v: int, *, level: int, row: int, eps: float
) -> dict[int, float]:
    n = GRID
    bits = heavy_hitter_randomizer(
        np.full(n, v), level=np.full(n, level), row=np.full(n, row),
        n_levels=level, epsilon=np.full(n, eps), rng=CoinGrid(),  # type: ignore[arg-type]
    )  # fmt: skip
    return {out: float(np.mean(bits == out)) for out in (-1, 1)}


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_one_bit_randomizer_is_exactly_eps_ldp_by_enumeration(eps: float) -> None:
    """V1(a): every pair of inputs (all 4 prefixes of a level-2 tree), every public row,
    both outputs: ``P(out|a)/P(out|b) ≤ e^ε``, with equality for some pair."""
    level = 2
    worst = 0.0
    for row in range(2**level):
        probs = [
            _output_probabilities(v, level=level, row=row, eps=eps)
            for v in range(2**level)
        ]
        for out in (-1, 1):
            p = np.array([pr[out] for pr in probs])
            assert p.min() > 0
            worst = max(worst, float(p.max() / p.min()))
    assert worst <= math.exp(eps) * (1 + 1e-4)
    assert worst >= math.exp(eps) * (1 - 1e-4)  # the bound is attained: not over-noised


class TiledCoinGrid:
    """:class:`CoinGrid` repeated: ``random(n)`` for ``n`` a multiple of ``GRID``."""

    def random(self, n: int) -> np.ndarray:
        assert n % GRID == 0
        return np.tile((np.arange(GRID) + 0.5) / GRID, n // GRID)


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_hashed_one_bit_randomizer_is_exactly_eps_ldp_by_enumeration(
    eps: float,
) -> None:
    """V1(a) for the hashed variant (spec §4.2): every input of a level-2 tree, every
    public hash index and row of a drawn hash family (t = 2, M = 4), both outputs:
    ``P(out|a)/P(out|b) ≤ e^ε``, attained."""
    level = 2
    hashes = PrefixHashes.draw(2, 4, np.random.default_rng(7))
    cell, row, v = (
        a.ravel() for a in np.meshgrid(np.arange(2), np.arange(4), np.arange(4))
    )

    def rep(a: np.ndarray) -> np.ndarray:  # one coin grid per combination
        return np.asarray(np.repeat(a, GRID))

    bits = hashed_heavy_hitter_randomizer(
        rep(v), level=rep(np.full(v.size, level)), cell=rep(cell), row=rep(row),
        n_levels=level, hashes=hashes, epsilon=np.full(v.size * GRID, eps),
        rng=TiledCoinGrid(),  # type: ignore[arg-type]
    ).reshape(v.size, GRID)  # fmt: skip
    worst = 0.0
    for j in range(2):
        for r in range(4):
            mine = (cell == j) & (row == r)
            for out in (-1, 1):
                p = np.mean(bits[mine] == out, axis=1)
                assert p.min() > 0
                worst = max(worst, float(p.max() / p.min()))
    assert worst <= math.exp(eps) * (1 + 1e-4)
    assert worst >= math.exp(eps) * (1 - 1e-4)


def test_laplace_reports_go_through_the_release_with_the_public_interval_and_budget(
    rng: np.random.Generator,
) -> None:
    """V1(b): the release receives the user's value, the broadcast interval and ``ε_i``
    (so the scale is ``Δ/ε_i``), and the default release projects out-of-range values
    into the interval (never drops them): a report at ``ε = ∞`` is ``Π(value)``."""
    seen: dict[str, np.ndarray] = {}

    def spy(value: np.ndarray, **kw: np.ndarray) -> np.ndarray:
        seen.update(
            value=value.copy(),
            **{k: np.asarray(v) for k, v in kw.items() if k != "rng"},
        )
        return value

    n = 1000
    low, high = np.full(n, -0.3), np.full(n, 0.45)
    values = rng.normal(0, 1, n)
    eps = rng.uniform(0.1, 8, n)
    z = laplace_randomizer(
        values, low=low, high=high, epsilon=eps, rng=rng, release=spy
    )
    assert z.shape == (n,)
    np.testing.assert_array_equal(seen["value"], values)
    np.testing.assert_array_equal(seen["low"], low)
    np.testing.assert_array_equal(seen["high"], high)
    np.testing.assert_array_equal(seen["epsilon"], eps)
    exact = laplace_randomizer(
        values, low=low, high=high, epsilon=np.full(n, np.inf), rng=rng
    )
    np.testing.assert_array_equal(exact, np.clip(values, -0.3, 0.45))


@pytest.mark.parametrize("algorithm", ["two_round", "multi_round"])
def test_ledger_after_a_full_fit(algorithm: str, rng: np.random.Generator) -> None:
    """V1(c): each user with ``ε_i > 0`` sent exactly one message and spent exactly its
    ``ε_i``; users with ``ε_i = 0`` sent nothing; the report carries it per record."""
    des = independent_design(300, 20, 32, rng=rng)
    eps_user = rng.uniform(0.5, 6.0, 300)
    eps_user[:10] = 0.0
    est = ULDPSparseLinearRegression(
        algorithm=algorithm, batch_size=40, small_batch_fallback=False, random_state=3
    ).fit(des.X, des.y, sample_epsilon=eps_user[des.groups], groups=des.groups)
    assert est.algorithm_ == algorithm
    led = est.ledger_
    assert led.within_budget()
    np.testing.assert_array_equal(led.messages, (eps_user > 0).astype(int))
    np.testing.assert_array_equal(led.spent, eps_user)
    rep = est.privacy_report_
    assert rep.guarantee == "user_level_local"
    np.testing.assert_array_equal(rep.sample_epsilon_total, eps_user[des.groups])
    per_record = np.sum([st.sample_epsilon for st in rep.stages], axis=0)
    np.testing.assert_allclose(per_record, eps_user[des.groups], rtol=1e-15)


def test_ledger_refuses_a_second_message_and_an_overspend() -> None:
    led = PrivacyLedger(np.array([1.0, 2.0]))
    led.charge(np.array([0]), np.array([1.0]), "a")
    with pytest.raises(RuntimeError, match="second message"):
        led.charge(np.array([0]), np.array([0.5]), "b")
    with pytest.raises(RuntimeError, match="more than its budget"):
        led.charge(np.array([1]), np.array([2.5]), "b")
    assert led.within_budget()


def test_randomizers_are_elementwise_in_the_users_data(
    rng: np.random.Generator,
) -> None:
    """V1(d): under the same coins, changing one user's data changes no other user's
    message (each randomizer reads only its own user's input)."""
    n = 500
    v = rng.integers(0, 64, n)
    level, row = rng.integers(1, 7, n), rng.integers(0, 64, n)
    eps = rng.uniform(0.5, 4, n)
    values = rng.normal(0, 1, n)
    other_v, other_values = v.copy(), values.copy()
    other_v[7], other_values[7] = (v[7] + 1) % 64, values[7] + 3.0

    def runs(vv: np.ndarray, vals: np.ndarray) -> list[np.ndarray]:
        g = np.random.default_rng(11)
        return [
            heavy_hitter_randomizer(vv, level=level, row=row, n_levels=6, epsilon=eps, rng=g),
            bin_randomizer(vals, bound=1.0, n_bins=8, row=row % 8, epsilon=eps, rng=g),
            laplace_randomizer(vals, low=np.full(n, -1.0), high=np.full(n, 1.0), epsilon=eps, rng=g),
        ]  # fmt: skip

    for a, b in zip(runs(v, values), runs(other_v, other_values), strict=True):
        keep = np.arange(n) != 7
        np.testing.assert_array_equal(a[keep], b[keep])


def test_curator_functions_receive_messages_and_public_values_only() -> None:
    """V1(d): the aggregators' inputs are message objects and public settings."""
    allowed = {
        "messages", "candidates", "n_total", "weighted", "n_groups", "n_bins",
        "delta", "v0",
    }  # fmt: skip
    for fn in (frequency_oracle, locate_bins, weighted_means):
        assert set(inspect.signature(fn).parameters) <= allowed, fn.__name__
    # and the protocol drivers hand the curator nothing but those
    assert "values" not in inspect.signature(locate_bins).parameters


def _redrawn_bits(
    v: np.ndarray,
    *,
    level: int,
    row: int,
    eps: float,
    copies: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """The broken twin (spec §14 D1): the reference code re-runs the randomized response
    of the same bit ``H[r_i, pre(v_i)]`` once per candidate prefix."""
    x = hadamard_entry(np.full(v.size, row), v >> 0)
    flips = rng.random((v.size, copies)) < keep_probability(eps)
    return np.where(flips, x[:, None], -x[:, None])


def _empirical_epsilon(a: np.ndarray, b: np.ndarray, *, min_count: int = 400) -> float:
    """Largest ``|log P̂(t|a)/P̂(t|b)|`` over transcripts ``t`` seen ``≥ min_count`` times
    under both inputs (rows of ``a``/``b`` are transcripts of ±1 bits)."""

    def codes(t: np.ndarray) -> np.ndarray:
        return (
            (t.reshape(t.shape[0], -1) > 0)
            * (1 << np.arange(t.reshape(t.shape[0], -1).shape[1]))
        ).sum(axis=1)

    ca, cb = codes(a), codes(b)
    size = int(max(ca.max(), cb.max())) + 1
    na, nb = np.bincount(ca, minlength=size), np.bincount(cb, minlength=size)
    ok = (na >= min_count) & (nb >= min_count)
    return float(np.max(np.abs(np.log(na[ok] / nb[ok]))))


def test_privacy_audit_passes_the_single_bit_and_catches_the_redrawn_twin(
    rng: np.random.Generator,
) -> None:
    """The audit of one user's transcript under two inputs with opposite Hadamard bits:
    the protocol's single bit measures ``≈ ε``; the twin's per-candidate copies leak
    ``copies·ε`` and the audit flags them."""
    eps, n, row = 1.0, 400_000, 5
    a, b = np.full(n, 0), np.full(n, 1)  # H[5, 0] = +1, H[5, 1] = −1
    assert hadamard_entry(row, 0) == -hadamard_entry(row, 1)
    one_a = heavy_hitter_randomizer(a, level=np.full(n, 1), row=np.full(n, row), n_levels=1, epsilon=np.full(n, eps), rng=rng)  # fmt: skip
    one_b = heavy_hitter_randomizer(b, level=np.full(n, 1), row=np.full(n, row), n_levels=1, epsilon=np.full(n, eps), rng=rng)  # fmt: skip
    measured = _empirical_epsilon(one_a[:, None], one_b[:, None])
    assert measured <= eps + 0.05
    twin_a = _redrawn_bits(a, level=1, row=row, eps=eps, copies=4, rng=rng)
    twin_b = _redrawn_bits(b, level=1, row=row, eps=eps, copies=4, rng=rng)
    leaked = _empirical_epsilon(twin_a, twin_b)
    assert leaked > 2.5 * eps  # the audit catches D1 (true worst ratio: 4ε)


def test_one_bit_randomizer_keeps_with_the_rr_probability(
    rng: np.random.Generator,
) -> None:
    x = np.ones(200_000, dtype=np.int8)
    out = one_bit_randomizer(x, np.full(x.size, 1.0), rng)
    p = math.e / (1 + math.e)
    assert abs(np.mean(out == 1) - p) < 4 * math.sqrt(p * (1 - p) / x.size)


def test_uldp_mean_charges_each_user_once() -> None:
    g = np.random.default_rng(0)
    n, s = 400, 3
    led = PrivacyLedger(np.full(n, 2.0))
    uldp_mean(
        g.normal(0, 0.1, (n, s)), np.full(n, 2.0), bound=1.0, n_bins=8,
        rng_public=g, rng_private=g, ledger=led,
    )  # fmt: skip
    assert (led.messages == 1).all()
    assert set(led.stages) == {
        "estimation: bin-localization bit",
        "estimation: Laplace mean report",
    }
