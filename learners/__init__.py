"""Pure numerics, bottom layer: losses and private estimators that report their spend.

Public surface (``__all__``): the heterogeneous-DP logistic release
:class:`HeteroDPLogisticRegression`, its :class:`PrivacyReport` /
:class:`PrivacySpend`, the per-record accounting :func:`curvature_slack` and
:func:`total_epsilon`, and the losses.
"""

from learners.hetero_dp_logistic import HeteroDPLogisticRegression
from learners.losses import LogisticLoss, PinballLoss, SquaredLoss, make_loss
from learners.privacy import (
    PrivacyReport,
    PrivacySpend,
    curvature_slack,
    ridge_remedy,
    total_epsilon,
)

__all__ = [
    "HeteroDPLogisticRegression",
    "LogisticLoss",
    "PinballLoss",
    "PrivacyReport",
    "PrivacySpend",
    "SquaredLoss",
    "curvature_slack",
    "make_loss",
    "ridge_remedy",
    "total_epsilon",
]
