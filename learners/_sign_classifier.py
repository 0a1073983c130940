"""Shared prediction methods of the binary ``{−1, +1}`` linear classifiers."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit


class SignClassifierMixin:
    """``predict``/``predict_proba`` from a ``decision_function`` (positive: ``+1``),
    and the scikit-learn tag of a binary-only classifier."""

    def decision_function(self, X: ArrayLike) -> NDArray[np.float64]:
        """The linear score of each row (defined by the estimator)."""
        raise NotImplementedError

    def predict(self, X: ArrayLike) -> NDArray[np.int64]:
        """Labels in ``{−1, +1}`` (``+1`` where the decision function is ``> 0``)."""
        return np.where(self.decision_function(X) > 0, 1, -1)

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """``[P(y=−1|x), P(y=+1|x)]`` with ``P(y=+1|x) = σ(decision_function(x))``."""
        z = self.decision_function(X)
        return np.column_stack([expit(-z), expit(z)])

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.classifier_tags.multi_class = False
        return tags
