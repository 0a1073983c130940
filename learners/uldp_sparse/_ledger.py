"""The per-user privacy ledger (spec §1.3 and V1(c)).

Every randomizer call charges its senders here before a message exists; the ledger
refuses a second message from a user (one message per user per fit, spec §1.3) and a
charge above the user's budget ``ε_i``. After a fit it is the proof that each user's
randomizers ran within ``ε_i``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
BUDGET_RTOL = 1e-12


class PrivacyLedger:
    """Spent budget, message count and per-stage spend of each of ``n_users`` users.

    Parameters
    ----------
    budgets : ndarray of shape (n_users,)
        Each user's ``ε_i`` (``inf`` in the non-private exact mode).
    """

    def __init__(self, budgets: FloatArray) -> None:
        self.budgets = np.asarray(budgets, dtype=float).copy()
        self.spent = np.zeros_like(self.budgets)
        self.messages = np.zeros(self.budgets.size, dtype=np.int64)
        self.stages: dict[str, FloatArray] = {}

    def charge(self, users: NDArray[np.int64], epsilon: FloatArray, stage: str) -> None:
        """Record that ``users`` each send one message at ``epsilon`` in ``stage``.

        Raises
        ------
        RuntimeError
            A user already sent a message in this fit, or ``epsilon`` exceeds its budget
            (an implementation error: the fit must stop before anything is sent).
        """
        users = np.asarray(users, dtype=np.int64)
        eps = np.asarray(epsilon, dtype=float)
        if np.unique(users).size != users.size or (self.messages[users] > 0).any():
            raise RuntimeError(f"{stage}: a user would send a second message")
        over = eps > self.budgets[users] * (1 + BUDGET_RTOL)
        if over.any():
            i = int(users[np.flatnonzero(over)[0]])
            raise RuntimeError(f"{stage}: user {i} would spend more than its budget")
        self.messages[users] += 1
        self.spent[users] += eps
        per_stage = self.stages.setdefault(stage, np.zeros_like(self.budgets))
        per_stage[users] += eps

    def within_budget(self) -> bool:
        """Every user spent at most its ``ε_i`` and sent at most one message."""
        return bool(
            (self.spent <= self.budgets * (1 + BUDGET_RTOL)).all()
            and (self.messages <= 1).all()
        )
