"""The privacy report of a DS or TP fit (spec §2, §6, §9).

Each participating record makes one ``ε_i``-LDP report (DS), or one ``ε_i·s`` and one
``ε_i·(1 − s)`` report (TP); by sequential composition it spends ``ε_i`` in total,
whatever the other records' budgets (spec §9). Records with ``ε_i = 0`` do not report.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from learners.privacy import PrivacyReport, PrivacySpend, StageSpend

__all__ = ["local_report"]

MECHANISM = (
    "l2-ball private sampling in projected SGD (Duchi, Jordan & Wainwright 2018)"
)
DS_STAGE = "dummy submission: private sampling of the gradient"
TP_STAGES = (
    "two-phase 1: missingness model",
    "two-phase 2: inverse-probability-weighted gradient",
)


def _floats(a: NDArray[np.float64]) -> tuple[float, ...]:
    return tuple(np.asarray(a, dtype=float).tolist())  # fast at n = 10⁶


def local_report(
    epsilon: NDArray[np.float64], *, algorithm: str, split: float
) -> PrivacyReport:
    """``PrivacyReport`` with guarantee ``local`` and one stage per phase.

    ``sample_epsilon_total = ε_i`` exactly: TP's stages are ``ε_i·s`` and
    ``ε_i − ε_i·s`` (at ``s = 1/2`` both are exactly ``ε_i/2``).
    """
    stages: tuple[StageSpend, ...]
    if algorithm == "dummy":
        stages = (StageSpend(DS_STAGE, _floats(epsilon)),)
    else:
        eps1 = epsilon * split
        stages = (
            StageSpend(TP_STAGES[0], _floats(eps1)),
            StageSpend(TP_STAGES[1], _floats(epsilon - eps1)),
        )
    worst = int(np.argmax(epsilon)) if epsilon.size else 0
    spends = tuple(
        PrivacySpend(f"{st.label} (worst record)", st.sample_epsilon[worst])
        for st in stages
        if st.sample_epsilon
    )
    return PrivacyReport(
        mechanism=MECHANISM,
        guarantee="local",
        neighbouring="replace_one",
        sample_epsilon=_floats(epsilon),
        sample_epsilon_total=_floats(epsilon),
        epsilon_max=float(epsilon.max()) if epsilon.size else 0.0,
        grad_norm=0.0,
        gtol=0.0,
        spends=spends,
        stages=stages,
    )
