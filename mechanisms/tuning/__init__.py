"""Tuning on public validation data (spec ``mechanism.md`` §4.3).

:func:`select_hyperparameters` chooses ``(λ, μ, σ)`` at a fixed ``γ``;
:func:`tradeoff_curve` repeats that choice over a ``γ`` grid (validation error vs
payment); :func:`choose_gamma` finds the most accurate ``γ`` whose Myerson total fits a
budget. All score an allocation by :func:`public_validation_error`, the validation
error of the model released at it on a public proxy of the sellers' records drawn from
the validation set: tuning reads the records only through the allocation, never
through a release, and spends no privacy (:func:`released_validation_error` scores a
release on records the caller passes, for experiments only). Private modules: ``_validation_error``,
``_hyperparameters``, ``_tradeoff``, ``_gamma_for_budget``.
"""

from mechanisms.tuning._gamma_for_budget import GammaChoice, GammaPoint, choose_gamma
from mechanisms.tuning._hyperparameters import (
    Selection,
    SelectionRow,
    myerson_total_fn,
    select_hyperparameters,
)
from mechanisms.tuning._tradeoff import TradeoffPoint, tradeoff_curve
from mechanisms.tuning._validation_error import (
    Predictor,
    Release,
    ValidationDraws,
    public_validation_draws,
    public_validation_error,
    released_validation_error,
)

__all__ = [
    "GammaChoice",
    "GammaPoint",
    "Predictor",
    "Release",
    "Selection",
    "SelectionRow",
    "TradeoffPoint",
    "ValidationDraws",
    "choose_gamma",
    "myerson_total_fn",
    "public_validation_draws",
    "public_validation_error",
    "released_validation_error",
    "select_hyperparameters",
    "tradeoff_curve",
]
