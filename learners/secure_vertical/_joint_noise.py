"""The objective-perturbation noise ``c = (2/η) b`` drawn jointly by the compute
parties (spec §7.2–§7.3), on the fixed-point grid ``2^{−32}``.

``b`` has density ``∝ exp(−‖b‖₂)`` (``Gamma(d, 1)`` norm, uniform direction,
:func:`learners._noise.sample_gamma_direction_noise`). No single party may know ``c``:
whoever knows it can subtract it from the released ``β̂``'s optimality condition. So
``t + 1`` compute parties (``t = ⌊(m−1)/2⌋``, MPyC's passive threshold) each draw a
full-strength ``c_j`` from their own OS entropy inside their own process and
secret-share it; the protocol uses ``[c] = Σ_j [c_j]``:

* every coalition of at most ``t`` parties misses at least one ``c_j``; the
  objective-perturbation proof holds for any *fixed* additional linear term (the
  density ratio at each output compares ``b_j`` at data sets that differ in one
  record, and the known terms cancel), so the release is ε-DP against the coalition,
  and against outsiders (a mixture of ε-DP mechanisms);
* the price is utility: the noise is a sum of ``t + 1`` independent draws (norm about
  ``√(t+1)`` times larger; ``t + 1 = 2`` at ``m = 3``). A Gamma-norm, uniform-direction
  vector cannot be split into additive shares of the same family, and sampling it
  inside MPC needs secure ``log``/``exp``/``cos`` (spec §7.2, first option).

Each ``c_j`` is rounded to the grid by its owner before it is shared, so the value
in the protocol is exactly what was drawn (no floating-point low bits, §7.3). Seeds
are for tests only: ``None`` (the market's case) means OS entropy in the drawing
process.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from learners._noise import sample_gamma_direction_noise

FloatArray = NDArray[np.float64]
FRAC_BITS = 32
GRID = 2.0**-FRAC_BITS


def contributors(n_processes: int) -> int:
    """``t + 1``: the number of compute parties that draw noise (``t = ⌊(m−1)/2⌋``)."""
    if n_processes < 1:
        raise ValueError(f"n_processes must be >= 1, got {n_processes}")
    return (n_processes - 1) // 2 + 1


@dataclass(frozen=True, slots=True)
class JointNoise:
    """Public description of the noise; the values exist only at their drawers.

    Attributes
    ----------
    scale : float
        ``2/η`` of the objective perturbation (public).
    dim : int
        ``d`` (coefficients, intercept included).
    seeds : tuple of (int or None)
        One per contributor; ``None`` draws from OS entropy (tests pass integers).
    """

    scale: float
    dim: int
    seeds: tuple[int | None, ...]

    def __post_init__(self) -> None:
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be finite and > 0, got {self.scale}")
        if self.dim < 1:
            raise ValueError(f"dim must be >= 1, got {self.dim}")
        if not self.seeds:
            raise ValueError("seeds: at least one contributor is needed")

    def draw(self, j: int) -> FloatArray:
        """Contributor ``j``'s ``c_j = (2/η) b_j`` rounded to the grid ``2^{−32}``."""
        b = sample_gamma_direction_noise(
            self.dim, rng=np.random.default_rng(self.seeds[j])
        )
        return np.asarray(np.round(self.scale * b / GRID) * GRID, dtype=float)

    def total(self) -> FloatArray:
        """``Σ_j c_j`` (what the protocol uses; computed in the clear by the plain
        backend, which has one contributor)."""
        return np.asarray(
            np.sum([self.draw(j) for j in range(len(self.seeds))], axis=0), dtype=float
        )


def joint_noise(
    scale: float, dim: int, n_contributors: int, rng: np.random.Generator,
    *, seeded: bool,
) -> JointNoise:  # fmt: skip
    """A :class:`JointNoise` with ``n_contributors`` seeds drawn from ``rng`` when
    ``seeded`` (a ``random_state`` was given), else OS entropy at every drawer."""
    seeds: tuple[int | None, ...] = (
        tuple(int(s) for s in rng.integers(0, 2**63, size=n_contributors))
        if seeded
        else (None,) * n_contributors
    )
    return JointNoise(float(scale), int(dim), seeds)
