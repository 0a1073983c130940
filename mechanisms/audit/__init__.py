"""Self-audits of the mechanism's incentives (spec ``mechanism.md`` §5, §6).

:func:`audit_incentives` measures IC regret, individual rationality, budget and
monotonicity for a frozen rule (private module ``_incentives``);
:func:`audit_gamma_choice` the IC regret when ``γ`` is re-chosen from the reports for a
budget (``_gamma_choice``).
"""

from mechanisms.audit._gamma_choice import ChoiceRegretReport, audit_gamma_choice
from mechanisms.audit._incentives import AuditReport, audit_incentives

__all__ = [
    "AuditReport",
    "ChoiceRegretReport",
    "audit_gamma_choice",
    "audit_incentives",
]
