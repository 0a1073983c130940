"""The vertical market's pricing rule (``docs/mathematics.md`` §7), audited with
``audit_incentives``: each party is one seller priced on its public coverage row with
``k = 1``; truthful reporting is a dominant strategy (IC regret ≈ 0), no party loses
(IR), payments fit the budget, and every party gets the same ε."""

from __future__ import annotations

import numpy as np
import pytest

import mechanisms as mech
from learners import SecureVerticalLogisticRegression
from market import numerics
from market.schemas import MechanismSettings


@pytest.mark.parametrize("costs", [[0.1, 0.2, 0.3], [0.5, 0.05, 0.25, 0.4]])
def test_vertical_rule_is_incentive_compatible(
    rng: np.random.Generator, costs: list[float]
) -> None:
    K = len(costs)
    n = 200
    held = rng.random((n, K)) < 0.8
    held[:, 0] = True
    blocks = [
        np.where(held[:, [k]], rng.standard_normal((n, 2)) / 4, np.nan)
        for k in range(K)
    ]
    X = SecureVerticalLogisticRegression().design_matrix(blocks)
    np.testing.assert_allclose(
        np.diag(X) ** 2, held.mean(axis=0)
    )  # public coverage only
    prior = mech.prior_from_dict(
        {"family": "uniform", "params": {"low": 0.0, "high": 1.0}}
    )
    values = MechanismSettings(k=1.0).model_dump()
    cfg = numerics.learner_config(values, learner="secure_vertical_logistic", gamma=0.5)
    c = np.array(costs)
    alloc = numerics.allocate(
        X, np.ones(K), c, prior=prior, config=cfg, eps_max=np.full(K, 9.0)
    )
    np.testing.assert_allclose(alloc.epsilon, alloc.epsilon[0], rtol=1e-6)  # a_k = 1/K
    report = numerics.audit_incentives(X, np.ones(K), c, prior=prior, config=cfg, budget=1e6,
                                       eps_max=np.full(K, 9.0))  # fmt: skip
    assert report.ic_ok()
    assert report.ir_violations == []
    assert report.budget_ok
