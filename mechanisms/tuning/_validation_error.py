"""Release the model at a chosen allocation, and score it on public validation data.

Spec ``mechanism.md`` §3 and §4.1 (Correction): the allocation ``(a, η)`` is chosen on the
noise-free objective ``G``; the model is then released by heterogeneous objective
perturbation with a **fresh** noise draw at that ``(a, η)``
(:class:`learners.HeteroDPLogisticRegression`, paper Algorithm 0).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from learners import HeteroDPLogisticRegression, make_loss
from mechanisms.result import Allocation

FloatArray = NDArray[np.float64]


def release_model(
    X: ArrayLike,
    y: ArrayLike,
    alloc: Allocation,
    *,
    random_state: int | np.random.Generator | None = None,
) -> HeteroDPLogisticRegression:
    """Fit the private logistic model at ``alloc``'s ``(a, η)`` with fresh noise.

    Only defined for the logistic loss (the objective-perturbation proof needs
    ``ℓ'' ≤ 1/4`` and ``|ℓ'| ≤ 1``); raises ``ValueError`` otherwise.
    """
    cfg = alloc.config
    if cfg.loss != "logistic":
        raise ValueError(
            f"release_model: the objective-perturbation release needs loss='logistic', "
            f"got {cfg.loss!r}"
        )
    guarantee = "end_to_end" if cfg.mode == "strict" else "conditional_on_allocation"
    model = HeteroDPLogisticRegression(
        lam=cfg.lam, eta=alloc.eta, guarantee=guarantee, random_state=random_state
    )
    return model.fit(np.asarray(X, dtype=float), y, weights=alloc.weights)


def released_validation_error(
    X: ArrayLike,
    y: ArrayLike,
    alloc: Allocation,
    X_val: ArrayLike,
    y_val: ArrayLike,
    *,
    n_draws: int = 15,
    random_state: int | np.random.Generator | None = None,
) -> float:
    """Validation error of the released model, averaged over ``n_draws`` noise draws.

    Logistic loss: misclassification rate of ``sign(x·ŵ)`` (paper §5, 15 draws).
    Other losses: the mean validation loss of the allocation's noise-free ``w`` (their
    private releases belong to their own learners).
    """
    if n_draws < 1:
        raise ValueError(f"n_draws must be >= 1, got {n_draws!r}")
    Xv = np.asarray(X_val, dtype=float)
    yv = np.asarray(y_val, dtype=float)
    cfg = alloc.config
    if cfg.loss != "logistic":
        loss = make_loss(
            cfg.loss, quantile=cfg.quantile, smoothing=cfg.pinball_smoothing
        )
        return float(np.mean(loss.value(Xv @ alloc.w, yv)))
    rng = np.random.default_rng(random_state)
    errors = [
        float(np.mean(release_model(X, y, alloc, random_state=rng).predict(Xv) != yv))
        for _ in range(n_draws)
    ]
    return float(np.mean(errors))
