"""Locally private logistic regression with missing covariates (spec
``ldp-logistic-missing-data.md``).

Public surface: the estimator :class:`LDPMissingLogisticRegression` (registered as
``ldp_missing_logistic``); the randomizer :func:`private_sampling` with its constants
(:func:`kappa`, :func:`c_epsilon`, :func:`pi_epsilon`, :func:`sampling_radius`);
private projected SGD (:func:`private_sgd`, :func:`replay_server`); algorithms
:func:`dummy_submission` and :func:`two_phase`; and the paper's simulation design
(:func:`simulate`, :func:`cross_entropy`, :func:`missing_data_limit`,
:func:`run_trial`).
"""

from learners.ldp_missing._algorithms import (
    DSResult,
    TPResult,
    dummy_submission,
    observation_probabilities,
    two_phase,
)
from learners.ldp_missing._constants import (
    c_epsilon,
    kappa,
    pi_epsilon,
    sampling_radius,
)
from learners.ldp_missing._estimator import LDPMissingLogisticRegression
from learners.ldp_missing._randomizer import (
    SamplingNoise,
    apply_private_sampling,
    draw_sampling_noise,
    private_sampling,
)
from learners.ldp_missing._sgd import SGDResult, private_sgd, replay_server
from learners.ldp_missing._simulation import (
    MissingData,
    Trial,
    cross_entropy,
    missing_data_limit,
    run_trial,
    run_trials,
    simulate,
)

__all__ = [
    "DSResult",
    "LDPMissingLogisticRegression",
    "MissingData",
    "SGDResult",
    "SamplingNoise",
    "TPResult",
    "Trial",
    "apply_private_sampling",
    "c_epsilon",
    "cross_entropy",
    "draw_sampling_noise",
    "dummy_submission",
    "kappa",
    "missing_data_limit",
    "observation_probabilities",
    "pi_epsilon",
    "private_sampling",
    "private_sgd",
    "replay_server",
    "run_trial",
    "run_trials",
    "sampling_radius",
    "simulate",
    "two_phase",
]
