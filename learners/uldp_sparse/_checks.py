"""Input checks of :class:`ULDPSparseLinearRegression` (``ValueError`` naming the input)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from learners._validation import check_sample_epsilon

FloatArray = NDArray[np.float64]


def check_user_epsilon(
    sample_epsilon: ArrayLike, user: NDArray[np.int64]
) -> FloatArray:
    """Each user's ``ε_i`` from the per-record ``sample_epsilon`` (a scalar is
    broadcast): finite, ``≥ 0``, equal on all of a user's records, not all zero."""
    n = user.size
    eps = check_sample_epsilon(sample_epsilon, n_samples=n)
    per_user = np.zeros(int(user.max()) + 1 if n else 0)
    per_user[user] = eps
    differ = np.flatnonzero(per_user[user] != eps)
    if differ.size:
        r = int(differ[0])
        raise ValueError(
            f"sample_epsilon must be the same on every record of a user (the unit is "
            f"the user); record {r} has {eps[r]!r}, its user {per_user[user[r]]!r}"
        )
    if not (per_user > 0).any():
        raise ValueError("sample_epsilon: no user has a budget > 0 (nothing to fit)")
    return per_user
