"""The privacy report of a fit, from the per-user ledger (spec §1.3, V1(c))."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from learners.privacy import PrivacyReport, PrivacySpend, StageSpend
from learners.uldp_sparse._ledger import PrivacyLedger

IntArray = NDArray[np.int64]


def privacy_report(
    ledger: PrivacyLedger, user: IntArray, *, exact: bool
) -> PrivacyReport:
    """Per-record view of the ledger: every record carries its user's spend (the unit is
    the user with all its records), one stage per kind of message."""
    spent = ledger.spent[user]
    stages = tuple(
        StageSpend(label, tuple(per_user[user].tolist()))
        for label, per_user in ledger.stages.items()
    )
    worst = int(np.argmax(ledger.spent)) if ledger.spent.size else 0
    spends = tuple(
        PrivacySpend(f"{label} (worst user)", float(per_user[worst]))
        for label, per_user in ledger.stages.items()
    )
    mechanism = (
        "NON-PRIVATE exact mode (tests only): raw indices and values, epsilon = inf"
        if exact
        else "user-level LDP sparse regression: one message per user "
        "(heavy-hitter bit, bin bit or Laplace report) at its own epsilon_i"
    )
    as_tuple = tuple(spent.tolist())
    return PrivacyReport(
        mechanism=mechanism,
        guarantee="user_level_local",
        neighbouring="replace_one",
        sample_epsilon=as_tuple,
        sample_epsilon_total=as_tuple,
        epsilon_max=float(ledger.spent.max()) if ledger.spent.size else 0.0,
        grad_norm=0.0,
        gtol=0.0,
        spends=spends,
        stages=stages,
    )
