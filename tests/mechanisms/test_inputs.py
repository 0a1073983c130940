"""Bad input to ``allocate`` (issue 2, "Bad input"): a ``ValueError`` naming the
parameter and the offending index, before any solving; infeasible caps are a status."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms import (
    MechanismConfig,
    SolverError,
    SolveStatus,
    UniformPrior,
    allocate,
)

M, D = 8, 3
PRIOR = UniformPrior(0.0, 1.0)
CFG = MechanismConfig(gamma=0.1, lam=0.01, mu=1.0, sigma=1.0, k=2.0, n_grid=4)


def _data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.5, 0.5, (M, D))
    y = np.where(np.arange(M) % 2 == 0, 1.0, -1.0)
    c = np.linspace(0.1, 0.9, M)
    return X, y, c


def _with(arr: np.ndarray, idx: tuple[int, ...] | int, value: float) -> np.ndarray:
    out = arr.copy()
    out[idx] = value
    return out


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_X(bad: float):
    X, y, c = _data()
    with pytest.raises(ValueError, match=r"X .*row 5"):
        allocate(_with(X, (5, 1), bad), y, c, PRIOR, CFG)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_y(bad: float):
    X, y, c = _data()
    with pytest.raises(ValueError, match=r"y .*index 3"):
        allocate(X, _with(y, 3, bad), c, PRIOR, CFG)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_costs(bad: float):
    X, y, c = _data()
    with pytest.raises(ValueError, match=r"costs .*index 6"):
        allocate(X, y, _with(c, 6, bad), PRIOR, CFG)


def test_wrong_shapes():
    X, y, c = _data()
    with pytest.raises(ValueError, match=r"X must be 2-D"):
        allocate(X[:, 0], y, c, PRIOR, CFG)
    with pytest.raises(ValueError, match=r"y must have shape \(8,\)"):
        allocate(X, y[:-1], c, PRIOR, CFG)
    with pytest.raises(ValueError, match=r"y must have shape"):
        allocate(X, y[:, None], c, PRIOR, CFG)
    with pytest.raises(ValueError, match=r"costs must have shape \(8,\)"):
        allocate(X, y, c[:5], PRIOR, CFG)
    with pytest.raises(ValueError, match=r"eps_max must have shape \(8,\)"):
        allocate(X, y, c, PRIOR, CFG, eps_max=np.ones(3))


@pytest.mark.parametrize("label", [0.0, 2.0, 0.5])
def test_labels_outside_pm1_for_logistic(label: float):
    X, y, c = _data()
    with pytest.raises(ValueError, match=r"y\[4\]"):
        allocate(X, _with(y, 4, label), c, PRIOR, CFG)
    # other losses take real targets
    alloc = allocate(X, _with(y, 4, label), c, PRIOR, CFG.with_(loss="squared"))
    assert alloc.success


def test_negative_costs_and_costs_outside_the_support():
    X, y, c = _data()
    with pytest.raises(ValueError, match=r"costs\[2\]"):
        allocate(X, y, _with(c, 2, -0.1), PRIOR, CFG)
    with pytest.raises(ValueError, match=r"costs\[7\] = 1.5 is above"):
        allocate(X, y, _with(c, 7, 1.5), UniformPrior(0.0, 1.0), CFG)
    with pytest.raises(ValueError, match=r"costs\[0\] = 0.1 is below"):
        allocate(X, y, c, UniformPrior(0.2, 1.0), CFG)


def test_row_norm_above_one():
    X, y, c = _data()
    X[6] = [0.8, 0.6, 0.1]  # ‖x‖ ≈ 1.005
    with pytest.raises(ValueError, match=r"X row 6 has norm"):
        allocate(X, y, c, PRIOR, CFG)
    X[6] /= np.linalg.norm(X[6])  # exactly on the sphere is fine
    assert allocate(X, y, c, PRIOR, CFG).success


def test_fewer_than_two_sellers():
    X, y, c = _data()
    with pytest.raises(ValueError, match=r"at least 2 rows"):
        allocate(X[:1], y[:1], c[:1], PRIOR, CFG)


def test_k_below_one_is_refused_by_the_config():
    with pytest.raises(ValueError, match=r"^k must be >= 1"):
        MechanismConfig(k=0.5)


def test_all_eps_max_zero():
    X, y, c = _data()
    with pytest.raises(ValueError, match=r"eps_max"):
        allocate(X, y, c, PRIOR, CFG, eps_max=np.zeros(M))
    with pytest.raises(ValueError, match=r"eps_max\[3\]"):
        allocate(X, y, c, PRIOR, CFG, eps_max=_with(np.ones(M), 3, -1.0))
    with pytest.raises(ValueError, match=r"eps_max\[1\]"):
        allocate(X, y, c, PRIOR, CFG, eps_max=_with(np.ones(M), 1, np.nan))


def test_fewer_than_m_over_k_positive_caps_is_infeasible_status():
    X, y, c = _data()
    # k = 2: each a_i ≤ 1/4, so at least 4 sellers must be able to take weight.
    e = np.zeros(M)
    e[:3] = np.inf
    alloc = allocate(X, y, c, PRIOR, CFG, eps_max=e)
    assert alloc.status == SolveStatus.INFEASIBLE
    assert not alloc.success
    assert "eps_max" in alloc.message
    with pytest.raises(SolverError):
        alloc.raise_for_status()
    # four positive caps: feasible, and the weights respect them
    e[3] = 0.5
    alloc = allocate(X, y, c, PRIOR, CFG, eps_max=e)
    assert alloc.success
    assert np.all(alloc.epsilon <= e + 1e-9)
    assert np.all(alloc.weights[4:] == 0.0)


def test_bad_config_type():
    X, y, c = _data()
    with pytest.raises(ValueError, match=r"cfg must be a MechanismConfig"):
        allocate(X, y, c, PRIOR, {"gamma": 1.0})
