"""One-bit LDP quasi-MLE for quantile regression (spec ``one-bit-ldp-qmle.md``).

Facade of the subpackage (the modules starting with ``_`` are internal):

- the estimator :class:`OneBitQuantileRegression` (registered as ``onebit_quantile``);
- the users' side: :func:`bit_flip_probability`, :func:`bit_flip`,
  :func:`split_budget`, :func:`randomize_public_x`, :func:`randomize_private_x` and the
  report types :class:`PublicXReports` / :class:`PrivateXReports`;
- the working model :class:`QuantileWorkingModel` (``Ψ``, ``Ψ'``, ``Ψ''``) and
  :func:`sample_ald_noise`;
- the curator's side: :func:`estimate_public_x`, :func:`estimate_private_x`,
  :class:`QMLEResult`, the prior :class:`CornerPrior`, the likelihoods and the exact
  transform (:func:`posterior_transform`, :func:`posterior_weights`).
"""

from learners.onebit_quantile._estimator import OneBitQuantileRegression
from learners.onebit_quantile._model import (
    QuantileWorkingModel,
    privacy_factors,
    sample_ald_noise,
)
from learners.onebit_quantile._private_x import CornerPrior, PrivateXLikelihood
from learners.onebit_quantile._public_x import PublicXLikelihood
from learners.onebit_quantile._qmle import (
    QMLEResult,
    estimate_private_x,
    estimate_public_x,
)
from learners.onebit_quantile._randomizers import (
    PrivateXReports,
    PublicXReports,
    bit_flip,
    bit_flip_probability,
    randomize_private_x,
    randomize_public_x,
    split_budget,
)
from learners.onebit_quantile._transform import (
    corner_signs,
    posterior_transform,
    posterior_weights,
    report_index,
)
from learners.onebit_quantile._units import MarketUnits

__all__ = [
    "CornerPrior",
    "MarketUnits",
    "OneBitQuantileRegression",
    "PrivateXLikelihood",
    "PrivateXReports",
    "PublicXLikelihood",
    "PublicXReports",
    "QMLEResult",
    "QuantileWorkingModel",
    "bit_flip",
    "bit_flip_probability",
    "corner_signs",
    "estimate_private_x",
    "estimate_public_x",
    "posterior_transform",
    "posterior_weights",
    "privacy_factors",
    "randomize_private_x",
    "randomize_public_x",
    "report_index",
    "sample_ald_noise",
    "split_budget",
]
