"""Secure logistic regression over vertically partitioned, partially overlapping
databases (spec ``secure-multiparty-logistic.md``; Fienberg, Karr, Nardi, Slavković).

Public surface: the estimator :class:`SecureVerticalLogisticRegression` (registered as
``secure_vertical_logistic``); the backend protocol :class:`Backend` with
:class:`PlainBackend` and the MPyC runner :class:`MPyCBackend` (optional extra ``mpc``);
the paper's reference protocols (:func:`ring_sum`, :func:`share_sum`,
:func:`z_matrix_product`, :func:`reference_newton`, :func:`recover_block`); the secure
Newton–Raphson :func:`secure_newton` with the block algebra (:func:`information_blocks`,
:func:`assemble`, :func:`schur_solve`); EM imputation (:func:`fit_gaussian_mixture`,
:func:`impute_conditional_mean`; categorical :func:`saturated_em`); the leakage
:class:`Ledger`; key alignment :func:`align_by_key`; and party nodes, one MPyC party
per process holding only its own block (:class:`SessionPlan`, :func:`plan_session`,
:func:`party_inputs`, :func:`run_party`, :func:`finish_session`,
:class:`SessionFailed`, :class:`TLSFiles`, :func:`read_party_csv`).
"""

from learners.secure_vertical._backend import Backend, PlainBackend, cholesky_solve
from learners.secure_vertical._blocks import align_by_key, check_blocks, check_labels
from learners.secure_vertical._em import (
    Theta,
    default_init,
    fit_gaussian_mixture,
    impute_conditional_mean,
)
from learners.secure_vertical._estimator import SecureVerticalLogisticRegression
from learners.secure_vertical._ledger import Ledger, Opening
from learners.secure_vertical._newton import (
    NewtonTrace,
    assemble,
    information_blocks,
    schur_solve,
    secure_newton,
)
from learners.secure_vertical._nodes import (
    SessionFailed,
    SessionPlan,
    TLSFiles,
    finish_session,
    party_inputs,
    plan_session,
    read_party_csv,
    run_party,
)

__all__ = [
    "Backend",
    "Ledger",
    "NewtonTrace",
    "Opening",
    "PlainBackend",
    "SecureVerticalLogisticRegression",
    "SessionFailed",
    "SessionPlan",
    "TLSFiles",
    "Theta",
    "align_by_key",
    "assemble",
    "check_blocks",
    "check_labels",
    "cholesky_solve",
    "default_init",
    "finish_session",
    "fit_gaussian_mixture",
    "impute_conditional_mean",
    "information_blocks",
    "party_inputs",
    "plan_session",
    "read_party_csv",
    "run_party",
    "schur_solve",
    "secure_newton",
]
