"""Pure numerics, bottom layer: losses and private estimators that report their spend.

Public surface (``__all__``): the registry of orderable learners :data:`LEARNERS`
(public name → estimator class) with its protocol :class:`OrderableLearner`,
:class:`LearnerSpec` / :class:`ParamSpec` and :class:`ReleaseContext`; the
heterogeneous-DP logistic release :class:`HeteroDPLogisticRegression`; the locally
private logistic regression with missing covariates
:class:`LDPMissingLogisticRegression` (subpackage :mod:`learners.ldp_missing`); the
one-bit LDP quantile regression :class:`OneBitQuantileRegression` (subpackage
:mod:`learners.onebit_quantile`); the secure vertical (multi-party) logistic
regression :class:`SecureVerticalLogisticRegression` (subpackage
:mod:`learners.secure_vertical`); the user-level LDP sparse linear regression
:class:`ULDPSparseLinearRegression` (subpackage :mod:`learners.uldp_sparse`); their
:class:`PrivacyReport` / :class:`PrivacySpend` / :class:`StageSpend` (and
:class:`NonPrivateFitWarning` when a fit ran without ε); seller custody
(:mod:`learners.local_protocol`): :class:`ReportRequest`, :func:`answer_request`,
:func:`validate_report`, :class:`LocalProtocol`, :data:`RANDOMIZERS` and
:func:`seller_generators`; the per-record
accounting :func:`curvature_slack` and :func:`total_epsilon`; and the losses.
"""

from learners.hetero_dp_logistic import HeteroDPLogisticRegression
from learners.ldp_missing import LDPMissingLogisticRegression
from learners.local_protocol import (
    RANDOMIZERS,
    LocalProtocol,
    ReportRequest,
    answer_request,
    seller_generators,
    validate_report,
)
from learners.losses import LogisticLoss, PinballLoss, SquaredLoss, make_loss
from learners.onebit_quantile import OneBitQuantileRegression
from learners.privacy import (
    GUARANTEES,
    NonPrivateFitWarning,
    PrivacyReport,
    PrivacySpend,
    StageSpend,
    curvature_slack,
    ridge_remedy,
    total_epsilon,
)
from learners.registry import (
    LEARNERS,
    LearnerRegistry,
    OrderableLearner,
    ReleaseContext,
    register_learner,
)
from learners.secure_vertical import (
    SecureVerticalLogisticRegression,
    SessionFailed,
    SessionPlan,
    TLSFiles,
    align_by_key,
    finish_session,
    plan_session,
    run_party,
)
from learners.spec import LearnerSpec, ParamError, ParamSpec
from learners.uldp_sparse import ULDPSparseLinearRegression

LEARNERS.register(HeteroDPLogisticRegression)
LEARNERS.register(LDPMissingLogisticRegression)
LEARNERS.register(OneBitQuantileRegression)
LEARNERS.register(SecureVerticalLogisticRegression)
LEARNERS.register(ULDPSparseLinearRegression)

__all__ = [
    "GUARANTEES",
    "LEARNERS",
    "RANDOMIZERS",
    "HeteroDPLogisticRegression",
    "LDPMissingLogisticRegression",
    "LearnerRegistry",
    "LearnerSpec",
    "LocalProtocol",
    "LogisticLoss",
    "NonPrivateFitWarning",
    "OneBitQuantileRegression",
    "OrderableLearner",
    "ParamError",
    "ParamSpec",
    "PinballLoss",
    "PrivacyReport",
    "PrivacySpend",
    "ReleaseContext",
    "ReportRequest",
    "SecureVerticalLogisticRegression",
    "SessionFailed",
    "SessionPlan",
    "SquaredLoss",
    "StageSpend",
    "TLSFiles",
    "ULDPSparseLinearRegression",
    "align_by_key",
    "answer_request",
    "curvature_slack",
    "finish_session",
    "make_loss",
    "plan_session",
    "register_learner",
    "ridge_remedy",
    "run_party",
    "seller_generators",
    "total_epsilon",
    "validate_report",
]
