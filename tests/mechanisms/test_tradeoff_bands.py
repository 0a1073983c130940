"""The trade-off curve's error bands: each ``γ`` point's validation error is a mean over
public-data release draws, reported with ``mean ± one standard error`` (spec §4.3)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from market.datasets import make_synthetic
from mechanisms import MechanismConfig, UniformPrior
from mechanisms.allocation import allocate
from mechanisms.tuning import (
    public_validation_draws,
    public_validation_error,
    tradeoff_curve,
)

PRIOR = UniformPrior(0.1, 0.5)
CFG = MechanismConfig(gamma=0.05, lam=1e-2, mu=1.0, sigma=300.0, k=4, eps_avg_max=20)


def _instance(seed: int = 3) -> tuple[Any, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    train = make_synthetic(40, 3, cost_low=0.1, cost_high=0.5, random_state=rng)
    val = make_synthetic(200, 3, random_state=rng)
    y_val = np.where(val.X @ train.w_true >= 0, 1.0, -1.0)
    return train, val.X, y_val


class _Wrong:
    """Predicts ``-1`` on the first ``k`` rows it is given and ``+1`` on the rest."""

    def __init__(self, k: int) -> None:
        self.k = k

    def predict(self, X: Any) -> np.ndarray:
        out = np.ones(np.asarray(X).shape[0])
        out[: self.k] = -1.0
        return out


def _scripted_release(ks: list[int]) -> Any:
    """A release whose ``d``-th model is wrong on exactly ``ks[d % len(ks)]`` rows of an
    all-``+1`` validation set: draw ``d``'s error is that count over the scored half."""
    calls = {"n": 0}

    def release(X: Any, y: Any, alloc: Any, rng: np.random.Generator, /) -> _Wrong:
        k = ks[calls["n"] % len(ks)]
        calls["n"] += 1
        return _Wrong(k)

    return release


def test_band_is_mean_plus_minus_the_standard_error_of_known_draws() -> None:
    tr, Xv, _ = _instance()
    yv = np.ones(Xv.shape[0])  # 200 rows: each half scores 100
    ks = [10, 30, 20, 40]
    pts = tradeoff_curve(
        tr.X, tr.y, tr.costs, PRIOR, CFG, gammas=[0.05], X_val=Xv, y_val=yv,
        grid={}, n_draws=4, random_state=0, myerson=False,
        release=_scripted_release(ks),
    )  # fmt: skip
    p = pts[0]
    errors = np.array(ks) / 100.0  # by hand: 0.1, 0.3, 0.2, 0.4
    mean = 0.25
    se = math.sqrt(np.sum((errors - mean) ** 2) / 3) / 2.0  # s / sqrt(4)
    assert p.validation_error == pytest.approx(mean, abs=1e-12)
    assert p.validation_error_se == pytest.approx(se, rel=1e-12)
    lo, hi = p["validation_error_band"]
    assert lo < p.validation_error < hi
    assert (lo, hi) == pytest.approx((mean - se, mean + se), rel=1e-12)
    assert p["n_draws"] == 4
    assert dict(p)["validation_error_band"] == [lo, hi]  # JSON-ready list


def test_more_draws_narrow_the_band() -> None:
    tr, Xv, _ = _instance()
    yv = np.ones(Xv.shape[0])
    ks = [10, 30, 20, 40]
    widths = {}
    for n in (4, 64):
        (p,) = tradeoff_curve(
            tr.X, tr.y, tr.costs, PRIOR, CFG, gammas=[0.05], X_val=Xv, y_val=yv,
            grid={}, n_draws=n, random_state=0, myerson=False,
            release=_scripted_release(ks),
        )  # fmt: skip
        lo, hi = p.validation_error_band
        assert lo <= p.validation_error <= hi
        widths[n] = hi - lo
    # the same four errors repeated 16 times: s barely changes, √D grows 4×
    assert widths[64] < widths[4] / 3.5


def test_real_release_band_contains_the_mean_and_narrows() -> None:
    """The default logistic release on public proxy rows: the mean equals
    :func:`public_validation_error` with the same seed, and 8 → 128 draws narrow the
    band (the standard error falls as 1/√D: a 4× narrowing expected; < 2× fails only
    if the 8-draw spread is far below the 128-draw one)."""
    tr, Xv, yv = _instance()
    widths = {}
    for n in (8, 128):
        (p,) = tradeoff_curve(
            tr.X, tr.y, tr.costs, PRIOR, CFG, gammas=[0.5], X_val=Xv, y_val=yv,
            grid={}, n_draws=n, random_state=7, myerson=False,
        )  # fmt: skip
        alloc = allocate(tr.X, tr.y, tr.costs, PRIOR, CFG.with_(gamma=0.5))
        ref = public_validation_error(alloc, Xv, yv, n_draws=n, random_state=7)
        assert p.validation_error == pytest.approx(ref, rel=1e-12)
        lo, hi = p.validation_error_band
        assert lo < p.validation_error < hi
        widths[n] = hi - lo
    assert widths[128] < widths[8] / 2


def test_single_draw_has_no_band() -> None:
    tr, Xv, yv = _instance()
    alloc = allocate(tr.X, tr.y, tr.costs, PRIOR, CFG)
    draws = public_validation_draws(alloc, Xv, yv, n_draws=1, random_state=1)
    assert draws.standard_error is None
    assert draws.band() is None
    assert draws.mean == pytest.approx(
        public_validation_error(alloc, Xv, yv, n_draws=1, random_state=1)
    )
