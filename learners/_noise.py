"""Noise for heterogeneous objective perturbation (spec ``mechanism.md`` §3, step 1).

The perturbation vector ``b ∈ R^d`` has density ``p(b) ∝ exp(−‖b‖₂)``. In polar
coordinates that is ``‖b‖ ~ Gamma(shape=d, scale=1)`` (the radial density is
``r^{d−1} e^{−r}``) times a direction uniform on the unit sphere ``S^{d−1}``, which is a
normalised standard Gaussian vector [CMS11]_.

References
----------
.. [CMS11] K. Chaudhuri, C. Monteleoni, A. D. Sarwate, "Differentially private
   empirical risk minimization", JMLR 12 (2011), Algorithm 2.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def sample_gamma_direction_noise(
    d: int, *, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Draw ``b ∈ R^d`` with density proportional to ``exp(−‖b‖₂)``.

    Parameters
    ----------
    d : int
        Dimension, ``d ≥ 1``.
    rng : numpy.random.Generator
        Source of randomness (the caller decides between a seed and OS entropy).

    Returns
    -------
    ndarray of shape (d,)
        ``b = r·u`` with ``r ~ Gamma(d, 1)`` and ``u = g/‖g‖``, ``g ~ N(0, I_d)``.

    Raises
    ------
    ValueError
        If ``d`` is not a positive integer or ``rng`` is not a Generator.

    Examples
    --------
    >>> import numpy as np
    >>> b = sample_gamma_direction_noise(3, rng=np.random.default_rng(0))
    >>> b.shape
    (3,)
    """
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
        raise ValueError(f"d must be a positive integer, got {d!r}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy.random.Generator, got {type(rng).__name__}"
        )
    d = int(d)
    g = rng.standard_normal(d)
    norm = float(np.linalg.norm(g))
    while norm == 0.0:  # probability zero, but a zero vector has no direction
        g = rng.standard_normal(d)
        norm = float(np.linalg.norm(g))
    radius = rng.gamma(shape=d, scale=1.0)
    return (radius / norm) * g
