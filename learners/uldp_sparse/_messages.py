"""What the users send to the curator: messages only, never raw data or pre-noise values.

The curator functions (``_curator``) take these types and nothing else (spec §1.3: a
randomizer reads its own data, the broadcast state and its own coins; everything after
is post-processing of the messages).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, slots=True)
class BitMessages:
    """One randomized ``±1`` bit per sending user.

    Attributes
    ----------
    group : ndarray of int
        The public group of the sender (tree level, or coordinate index).
    row : ndarray of int
        The public Hadamard row ``r_i`` (or ``q_i``) the sender was given.
    bit : ndarray of int8
        The released bit ``y_i ∈ {−1, +1}``.
    epsilon : ndarray of float
        The sender's (public) budget ``ε_i``: the curator re-weights with it.
    cell : ndarray of int or None
        The public hash index ``j_i`` of the hashed heavy-hitter oracle (spec §4.2);
        None for the direct oracle.
    """

    group: NDArray[np.int64]
    row: NDArray[np.int64]
    bit: NDArray[np.int8]
    epsilon: NDArray[np.float64]
    cell: NDArray[np.int64] | None = None


@dataclass(frozen=True, slots=True)
class ValueMessages:
    """One noisy real number per sending user (``Π_I(w) + Laplace(Δ/ε_i)``).

    Attributes
    ----------
    group : ndarray of int
        The coordinate the sender reported on.
    value : ndarray of float
        The released noisy value.
    epsilon : ndarray of float
        The sender's budget ``ε_i``.
    """

    group: NDArray[np.int64]
    value: NDArray[np.float64]
    epsilon: NDArray[np.float64]
