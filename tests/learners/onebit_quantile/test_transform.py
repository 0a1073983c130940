"""The exact posterior transform (spec §3.4, V-B5) and grouped budgets (§6, V-B11 c)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from learners.onebit_quantile import (
    CornerPrior,
    PrivateXLikelihood,
    QuantileWorkingModel,
    corner_signs,
    posterior_transform,
    posterior_weights,
    randomize_private_x,
    report_index,
)

K = 4


def _setup(
    rng: np.random.Generator,
) -> tuple[CornerPrior, QuantileWorkingModel, np.ndarray]:
    low = rng.uniform(-5, 0, K)
    high = low + rng.uniform(0.5, 4, K)
    prior = CornerPrior(
        center=(low + high) / 2, half_width=(high - low) / 2, rho=np.ones(K)
    )
    model = QuantileWorkingModel(alpha=0.3, sigma=1.0, low=-3.0, high=4.0)
    return prior, model, rng.normal(0, 0.5, K)


def test_transform_equals_the_explicit_sum_and_the_papers_form(
    rng: np.random.Generator,
) -> None:
    """V-B5: for ``k = 4``, random intervals and ``β``, ``ε = 5`` (``ε' = 1`` per bit),
    ``Φ`` by the transform equals the sum over corners and the paper's exponential
    form to 1e-12, and ``p̂(r) = 2^{−k}`` sums to 1."""
    prior, model, beta = _setup(rng)
    eps_bit = 5.0 / (K + 1)
    corners = prior.corners()
    psi = model.psi(corners @ beta, epsilon=eps_bit)
    fast = posterior_transform(psi, np.full((1, K), math.tanh(eps_bit / 2)))[0]
    signs = corner_signs(K)
    pi = math.exp(eps_bit) / (math.exp(eps_bit) + 1)
    explicit = np.zeros(2**K)
    paper = np.zeros(2**K)
    p_hat = np.zeros(2**K)
    for r, z in enumerate(signs):
        for s_idx, s in enumerate(signs):
            agree = z == s
            post = np.prod(np.where(agree, pi, 1 - pi))
            explicit[r] += post * psi[s_idx]
            paper[r] += (
                psi[s_idx]
                * math.exp(eps_bit * agree.sum())
                / (2.0**-K * (math.exp(eps_bit) + 1) ** K * 2**K)
            )
            # the channel's probability of report r from corner s, prior mass 2^{-k}
            p_hat[r] += 2.0**-K * np.prod(np.where(agree, pi, 1 - pi))
    np.testing.assert_allclose(fast, explicit, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast, paper, rtol=0, atol=1e-12)
    np.testing.assert_allclose(p_hat, 2.0**-K, rtol=0, atol=1e-15)
    assert p_hat.sum() == pytest.approx(1.0, abs=1e-14)


def test_corner_and_report_indexing_agree() -> None:
    signs = corner_signs(K)
    np.testing.assert_array_equal(report_index(signs), np.arange(2**K))
    assert list(map(tuple, signs[:3])) == [
        (-1, -1, -1, -1),
        (-1, -1, -1, 1),
        (-1, -1, 1, -1),
    ]
    assert {tuple(s) for s in signs} == set(itertools.product([-1.0, 1.0], repeat=K))


def _reports(
    rng: np.random.Generator,
    prior: CornerPrior,
    eps: np.ndarray,
    n: int,
    public: np.ndarray,
) -> object:
    X = prior.center + prior.half_width * rng.uniform(-1, 1, (n, K))
    return randomize_private_x(
        X,
        public,
        rng.normal(0, 2, n),
        epsilon=eps,
        low=-3.0,
        high=4.0,
        bounds=(prior.center - prior.half_width, prior.center + prior.half_width),
        split=None,
        rng=rng,
    )


def _brute_force(
    lik: PrivateXLikelihood, rep: object, model: QuantileWorkingModel, beta: np.ndarray
) -> tuple[float, np.ndarray]:
    """Per-user ``Φ_i = Σ_s P̂(s | z_i) Ψ_{ε_{i0}}(βᵀx(s) + public part)``, by loops over
    users: the test oracle, ``O(n·k·2^k)``."""
    priv, pub = lik.priv, lik.pub
    tau = lik.prior.tau(rep.bit_epsilon[:, 1:])
    W = posterior_weights(rep.z_x, tau)
    ll = 0.0
    for i in range(rep.z_y.size):
        theta = lik.corners @ beta[priv] + rep.X_public[i] @ beta[pub]
        phi = float(W[i] @ model.psi(theta, epsilon=rep.bit_epsilon[i, 0]))
        ll += math.log(phi) if rep.z_y[i] else math.log1p(-phi)
    return ll / rep.z_y.size, W


def test_grouped_transform_equals_the_per_user_brute_force(
    rng: np.random.Generator,
) -> None:
    """V-B11 (c): private X with two budget levels (users at ε = 2 and ε = 6): the
    grouped transform's likelihood equals the per-user brute force."""
    prior, model, beta = _setup(rng)
    n = 300
    eps = np.where(rng.random(n) < 0.5, 2.0, 6.0)
    rep = _reports(rng, prior, eps, n, np.ones((n, 1)))
    lik = PrivateXLikelihood(
        rep, model, prior=prior, private_index=list(range(K)), public_index=[K]
    )
    assert not lik.per_user
    full = np.append(beta, 0.4)
    value, _ = lik.value_grad(full)
    brute, _ = _brute_force(lik, rep, model, full)
    assert -value == pytest.approx(brute, abs=1e-12)


def test_per_user_path_with_public_features_equals_the_brute_force(
    rng: np.random.Generator,
) -> None:
    """Features declared public vary across users: the per-user path is exact too."""
    prior, model, beta = _setup(rng)
    n = 200
    eps = rng.uniform(1.0, 6.0, n)  # continuous heterogeneous budgets
    public = np.column_stack([rng.uniform(-1, 1, n), np.ones(n)])
    rep = _reports(rng, prior, eps, n, public)
    lik = PrivateXLikelihood(
        rep, model, prior=prior, private_index=[0, 2, 3, 5], public_index=[1, 4]
    )
    assert lik.per_user
    full = np.array([beta[0], 0.7, beta[1], beta[2], 0.3, beta[3]])
    value, _ = lik.value_grad(full)
    brute, _ = _brute_force(lik, rep, model, full)
    assert -value == pytest.approx(brute, abs=1e-12)


@pytest.mark.parametrize("public_varies", [False, True])
def test_analytic_gradient_and_hessian_match_finite_differences(
    public_varies: bool, rng: np.random.Generator
) -> None:
    """V-B5: ``Φ'`` (through the score) matches central differences to 1e-8, and the
    Hessian of the sandwich matches differences of the score."""
    prior, model, beta = _setup(rng)
    n = 400
    eps = np.where(rng.random(n) < 0.5, 5.0, 3.0)
    col = rng.uniform(-1, 1, n) if public_varies else np.ones(n)
    rep = _reports(rng, prior, eps, n, col[:, None])
    lik = PrivateXLikelihood(
        rep, model, prior=prior, private_index=list(range(K)), public_index=[K]
    )
    full = np.append(beta, 0.2)
    _, grad = lik.value_grad(full)
    h = 1e-6
    fd = np.array(
        [
            (lik.value_grad(full + h * e)[0] - lik.value_grad(full - h * e)[0])
            / (2 * h)
            for e in np.eye(full.size)
        ]
    )
    np.testing.assert_allclose(grad, fd, rtol=0, atol=1e-8)
    A, _ = lik.sandwich_parts(full)
    fd_h = np.array(
        [
            (lik.value_grad(full + h * e)[1] - lik.value_grad(full - h * e)[1])
            / (2 * h)
            for e in np.eye(full.size)
        ]
    )
    np.testing.assert_allclose(-A, fd_h, rtol=0, atol=1e-7)
