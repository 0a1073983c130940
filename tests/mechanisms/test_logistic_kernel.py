"""The vectorised logistic loss pass against the C library's ``exp`` and ``log1p``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms.allocation._logistic_kernel import BLOCK, logistic_pass


def _reference(z: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(ℓ, ℓ', ℓ'')`` record by record with ``math.exp`` and ``math.log1p``."""
    val, d1, d2 = (np.empty(z.size) for _ in range(3))
    for i, (zi, yi) in enumerate(zip(z.tolist(), y.tolist(), strict=True)):
        t = -yi * zi
        e = math.exp(-abs(t)) if not math.isnan(t) else math.nan
        val[i] = max(t, 0.0) + math.log1p(e) if not math.isnan(t) else math.nan
        sig = 1.0 / (1.0 + e) if t >= 0.0 else e / (1.0 + e)
        d1[i] = -yi * sig if not math.isnan(t) else math.nan
        d2[i] = e / ((1.0 + e) * (1.0 + e))
    return val, d1, d2


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in units of the last place of ``want`` (absolute below 1e-300)."""
    scale = np.where(np.abs(want) > 1e-300, np.spacing(np.abs(want)), 1e-300)
    return np.abs(got - want) / scale


def _margins(rng: np.random.Generator, m: int) -> np.ndarray:
    parts = [
        rng.normal(size=m) * 4.0,
        rng.uniform(-800.0, 800.0, m),
        10.0 ** rng.uniform(-300, 3, m) * rng.choice([-1.0, 1.0], m),
    ]
    return np.concatenate(parts)


def test_logistic_pass_is_within_a_few_units_in_the_last_place() -> None:
    rng = np.random.default_rng(7)
    z = _margins(rng, 20_000)
    y = rng.choice([-1.0, 1.0], z.size)
    psi = rng.uniform(0.0, 5.0, z.size)
    val, d1, d2, r = logistic_pass(z, y, 0.37, psi)
    ref_val, ref_d1, ref_d2 = _reference(z, y)
    assert _ulps(val, ref_val).max() <= 4
    assert _ulps(d1, ref_d1).max() <= 4
    assert _ulps(d2, ref_d2).max() <= 4
    # r is formed as NumPy forms ℓ + qΨ (a caller re-forms it from kept losses)
    np.testing.assert_array_equal(r, val + 0.37 * psi)
    # the curvature keeps its digits where σ is near 1 (σ(1 − σ) lost them all)
    far = np.abs(z) > 40.0
    assert np.all(d2[far & (np.abs(z) < 700.0)] > 0.0)


@pytest.mark.parametrize("m", [1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 7])
def test_logistic_pass_at_block_boundaries(m: int) -> None:
    """Every record is computed, whatever the block split: the same values as the
    records computed one block at a time."""
    rng = np.random.default_rng(m)
    z = rng.normal(size=m) * 6.0
    y = rng.choice([-1.0, 1.0], m)
    psi = rng.random(m)
    whole = logistic_pass(z, y, 1.5, psi)
    single = [
        logistic_pass(z[i : i + 1], y[i : i + 1], 1.5, psi[i : i + 1]) for i in range(m)
    ]
    for k in range(4):
        np.testing.assert_array_equal(whole[k], np.concatenate([s[k] for s in single]))
    ref_val, ref_d1, _ = _reference(z, y)
    assert _ulps(whole[0], ref_val).max() <= 4
    assert _ulps(whole[1], ref_d1).max() <= 4


def test_logistic_pass_special_values() -> None:
    z = np.array([np.nan, np.inf, -np.inf, 0.0, 745.2, -745.2, 800.0, -1e300])
    y = np.ones(z.size)
    val, d1, d2, r = logistic_pass(z, y, 0.0, np.zeros(z.size))
    assert np.isnan(val[0])
    assert np.isnan(d1[0])
    assert np.isnan(r[0])
    # z = +∞: no loss, no slope; z = −∞: an infinite loss, slope −1
    np.testing.assert_array_equal(val[1:3], [0.0, np.inf])
    np.testing.assert_array_equal(d1[1:3], [-0.0, -1.0])
    assert val[3] == pytest.approx(math.log(2.0), rel=4e-16)
    np.testing.assert_array_equal(d1[3], -0.5)
    assert d2[3] == 0.25
    np.testing.assert_array_equal(val[4:7], [0.0, 745.2, 0.0])
    assert val[7] == 1e300
    assert np.all(d2[[1, 2, 4, 6, 7]] == 0.0)
