"""Score an allocation by the validation error of the model released at it.

Spec ``mechanism.md`` §3 and §4.1 (Correction): the allocation ``(a, η)`` is chosen on the
noise-free objective ``G``; the model is then released with a **fresh** noise draw at
that ``(a, η)``. The tuning code (§4.3) scores an allocation by the released model's
error on the public validation set. The release is a parameter: any
``release(X, y, allocation, rng)`` returning a fitted model with ``predict``; the default
is heterogeneous objective perturbation (:class:`learners.HeteroDPLogisticRegression`,
paper Algorithm 0) for the logistic loss.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from learners import HeteroDPLogisticRegression, make_loss
from mechanisms.result import Allocation

FloatArray = NDArray[np.float64]

__all__ = [
    "Predictor",
    "Release",
    "logistic_release",
    "release_model",
    "released_validation_error",
]


class Predictor(Protocol):
    """A fitted model: what a :class:`Release` returns."""

    def predict(self, X: ArrayLike) -> NDArray[Any]: ...


class Release(Protocol):
    """``release(X, y, allocation, rng)``: fit the private model at ``allocation``'s
    ``(a, η)`` with noise drawn from ``rng``, and return it."""

    def __call__(
        self,
        X: FloatArray,
        y: FloatArray,
        allocation: Allocation,
        rng: np.random.Generator,
        /,
    ) -> Predictor: ...


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
    fitted: HeteroDPLogisticRegression = model.fit(
        np.asarray(X, dtype=float), y, weights=alloc.weights
    )
    return fitted


def logistic_release(
    X: FloatArray, y: FloatArray, allocation: Allocation, rng: np.random.Generator, /
) -> HeteroDPLogisticRegression:
    """The default :class:`Release`: :func:`release_model` with noise from ``rng``."""
    return release_model(X, y, allocation, random_state=rng)


def released_validation_error(
    X: ArrayLike,
    y: ArrayLike,
    alloc: Allocation,
    X_val: ArrayLike,
    y_val: ArrayLike,
    *,
    n_draws: int = 15,
    random_state: int | np.random.Generator | None = None,
    release: Release | None = None,
) -> float:
    """Validation error of the released model, averaged over ``n_draws`` noise draws.

    Parameters
    ----------
    X, y : array-like
        The sellers' records and labels the model is released on.
    alloc : Allocation
        The allocation ``(a, η)`` to release at.
    X_val, y_val : array-like
        The public validation set.
    n_draws : int
        Noise draws averaged (paper §5: 15); every draw comes from one generator
        seeded by ``random_state``.
    random_state : int, Generator or None
        Seed of the release noise (OS entropy if ``None``).
    release : Release, optional
        ``release(X, y, allocation, rng) -> model``. Default: :func:`logistic_release`
        for the logistic loss; for other losses, no release (see below).

    Returns
    -------
    float
        Logistic loss: the misclassification rate of ``predict`` (paper §5). Other
        losses: the mean validation loss of the released model's predictions, or with
        the default ``release=None`` that of the allocation's noise-free ``w`` (their
        private releases belong to their own learners).
    """
    if n_draws < 1:
        raise ValueError(f"n_draws must be >= 1, got {n_draws!r}")
    Xv = np.asarray(X_val, dtype=float)
    yv = np.asarray(y_val, dtype=float)
    cfg = alloc.config
    logistic = cfg.loss == "logistic"
    loss = make_loss(cfg.loss, quantile=cfg.quantile, smoothing=cfg.pinball_smoothing)
    if release is None:
        if not logistic:
            return float(np.mean(loss.value(Xv @ alloc.w, yv)))
        release = logistic_release
    Xf, yf = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    rng = np.random.default_rng(random_state)
    errors = []
    for _ in range(n_draws):
        pred = np.asarray(release(Xf, yf, alloc, rng).predict(Xv), dtype=float)
        err = np.mean(pred != yv) if logistic else np.mean(loss.value(pred, yv))
        errors.append(float(err))
    return float(np.mean(errors))
