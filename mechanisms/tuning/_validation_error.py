"""Score an allocation by the validation error of the model released at it.

Spec ``mechanism.md`` §3 and §4.1 (Correction): the allocation ``(a, η)`` is chosen on the
noise-free objective ``G``; the model is then released with a **fresh** noise draw at
that ``(a, η)``. The tuning code (§4.3) scores an allocation by the released model's
error on the public validation set. The release is a parameter: any
``release(X, y, allocation, rng)`` returning a fitted model with ``predict``; the default
is heterogeneous objective perturbation (:class:`learners.HeteroDPLogisticRegression`,
paper Algorithm 0) for the logistic loss.

Two scores:

- :func:`public_validation_error` (what the tuning code uses): the release is fitted on
  a **public proxy** of the sellers' data — rows resampled from one half of the public
  validation set, row ``j`` standing for seller ``j`` and spending that seller's
  allocated ``ε_j`` — and scored on the other half. It reads no private record, so
  choosing ``γ`` or ``(λ, μ, σ)`` with it spends no privacy (spec §4.4: a ``strict``
  order stays ``ε_i^total``-DP end to end).
- :func:`released_validation_error`: the release fitted on the ``X, y`` the caller
  passes. Every call on private records is a release of them (``n_draws`` releases at
  the allocation's ``ε``, composing); it is for experiments on data the caller may
  spend, not for the market's tuning.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.exceptions import ConvergenceWarning

from learners import HeteroDPLogisticRegression, make_loss
from mechanisms.result import Allocation

FloatArray = NDArray[np.float64]

__all__ = [
    "Predictor",
    "Release",
    "ValidationDraws",
    "logistic_release",
    "public_validation_draws",
    "public_validation_error",
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


def _proxy_folds(
    n_val: int, rng: np.random.Generator
) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Two disjoint halves of a random permutation of the validation rows (both the
    whole set when it has fewer than 4 rows)."""
    if n_val < 4:
        every = np.arange(n_val)
        return every, every
    perm = rng.permutation(n_val)
    return perm[: n_val // 2], perm[n_val // 2 :]


def public_validation_error(
    alloc: Allocation,
    X_val: ArrayLike,
    y_val: ArrayLike,
    *,
    n_draws: int = 15,
    random_state: int | np.random.Generator | None = None,
    release: Release | None = None,
    n_rows: int | None = None,
) -> float:
    """Validation error of the release at ``alloc`` fitted on **public** data only.

    Each of the ``n_draws`` draws takes one half ``F`` of the public validation set
    (the halves alternate between draws: two-fold cross-fitting), draws ``n_rows``
    rows from ``F`` uniformly with replacement — the proxy of the sellers' records,
    proxy row ``j`` standing for seller ``j`` (or for record ``j`` of a learner that
    maps records to sellers itself) — releases ``release(X_F, y_F, alloc, rng)`` on
    them, and scores the model on the other half; the two halves' mean errors are
    averaged weighted by their rows. The proxy has the sellers' number of
    rows and the allocation's per-seller ``ε``, so the release's noise is the noise the
    buyer's model will carry; its records are public, so the score is a post-
    processing of public data and the allocation (no privacy spent). What it does not
    see is how the sellers' records differ from the validation set's distribution.

    Parameters
    ----------
    alloc : Allocation
        The allocation ``(a, η)`` to release at.
    X_val, y_val : array-like
        The public validation set (at least one row).
    n_draws : int
        Draws averaged; proxy rows and noise come from one generator seeded by
        ``random_state`` (common random numbers across allocations with an int seed).
    random_state : int, Generator or None
        Seed of the proxy rows and the release noise (OS entropy if ``None``).
    release : Release, optional
        ``release(X, y, allocation, rng) -> model``; default :func:`logistic_release`
        (logistic loss only).
    n_rows : int, optional
        Proxy rows per draw; default one per seller (``alloc.weights.size``).

    Returns
    -------
    float
        Logistic loss: misclassification rate of ``predict``; other losses: the mean
        validation loss of the predictions.

    Raises
    ------
    ValueError
        ``n_draws < 1``, an empty validation set, ``n_rows < 1``, or a non-logistic
        loss without a ``release``.
    """
    draws = public_validation_draws(
        alloc,
        X_val,
        y_val,
        n_draws=n_draws,
        random_state=random_state,
        release=release,
        n_rows=n_rows,
    )
    return draws.mean


@dataclass(frozen=True, slots=True)
class ValidationDraws:
    """The per-draw errors behind :func:`public_validation_error`.

    ``errors[d]`` is draw ``d``'s error on its scored half; ``weights[d]`` is the
    draw's weight in the mean (its scored half's rows over the draws scored on that
    half, normalised to sum to one), so ``mean = Σ_d weights[d]·errors[d]`` is the
    row-weighted two-fold average :func:`public_validation_error` returns.
    """

    errors: FloatArray
    weights: FloatArray

    @property
    def mean(self) -> float:
        return float(np.dot(self.weights, self.errors))

    @property
    def standard_error(self) -> float | None:
        """Standard error of :attr:`mean` over the draws, ``s / √D`` with ``s`` the
        sample standard deviation (``ddof = 1``) of the ``D`` draws' errors; ``None``
        for a single draw (no spread to measure)."""
        n = int(self.errors.size)
        if n < 2:
            return None
        return float(np.std(self.errors, ddof=1) / math.sqrt(n))

    def band(self) -> tuple[float, float] | None:
        """``mean ± standard_error`` (``None`` for a single draw)."""
        se = self.standard_error
        if se is None:
            return None
        return (self.mean - se, self.mean + se)


def public_validation_draws(
    alloc: Allocation,
    X_val: ArrayLike,
    y_val: ArrayLike,
    *,
    n_draws: int = 15,
    random_state: int | np.random.Generator | None = None,
    release: Release | None = None,
    n_rows: int | None = None,
) -> ValidationDraws:
    """The ``n_draws`` public-data draws of :func:`public_validation_error`, one by one
    (same parameters, same random stream: with the same seed, ``.mean`` equals
    :func:`public_validation_error`'s value). Reads no private record.
    """
    if n_draws < 1:
        raise ValueError(f"n_draws must be >= 1, got {n_draws!r}")
    Xv = np.asarray(X_val, dtype=float)
    yv = np.asarray(y_val, dtype=float)
    if Xv.shape[0] < 1 or yv.shape[0] != Xv.shape[0]:
        raise ValueError(
            "X_val, y_val: the public validation set needs at least one row and one "
            "label per row"
        )
    rows = int(np.asarray(alloc.weights).size) if n_rows is None else int(n_rows)
    if rows < 1:
        raise ValueError(f"n_rows must be >= 1, got {n_rows!r}")
    cfg = alloc.config
    logistic = cfg.loss == "logistic"
    loss = make_loss(cfg.loss, quantile=cfg.quantile, smoothing=cfg.pinball_smoothing)
    if release is None:
        if not logistic:
            raise ValueError(
                f"release: loss={cfg.loss!r} has no default release; pass the "
                "learner's release"
            )
        release = logistic_release
    rng = np.random.default_rng(random_state)
    folds = _proxy_folds(Xv.shape[0], rng)
    errors: tuple[list[float], list[float]] = ([], [])
    for d in range(n_draws):
        fit, score = folds[d % 2], folds[1 - d % 2]
        idx = fit[rng.integers(0, fit.size, size=rows)]
        with warnings.catch_warnings():
            # A proxy fitted on public rows claims no privacy, so "the privacy proof
            # assumes the exact minimiser" does not apply; only its score is used.
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = release(Xv[idx], yv[idx], alloc, rng)
        pred = np.asarray(model.predict(Xv[score]), dtype=float)
        ys = yv[score]
        err = np.mean(pred != ys) if logistic else np.mean(loss.value(pred, ys))
        errors[1 - d % 2].append(float(err))
    # each scored half weighted by its rows: a whole-set average when both are scored
    sizes = [folds[k].size if errors[k] else 0 for k in (0, 1)]
    per_draw = np.empty(n_draws)
    weights = np.empty(n_draws)
    for k in (0, 1):
        at = [d for d in range(n_draws) if 1 - d % 2 == k]
        for i, d in enumerate(at):
            per_draw[d] = errors[k][i]
            weights[d] = sizes[k] / len(at)
    return ValidationDraws(per_draw, weights / weights.sum())
