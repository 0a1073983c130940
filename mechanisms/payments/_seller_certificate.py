"""Per-seller payment certificates: what a seller's payment rests on.

Stored with the order by the market (``PaymentResult.to_dict()["certificates"]``), so an
admin can read, next to each allocation, whether the payment was computed on
certified re-solves.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from dataclasses import dataclass
from typing import Any, Literal

Method = Literal["shortcut_certified", "full_solve", "report_independent"]


@dataclass(frozen=True, slots=True)
class SellerCertificate:
    """How one seller's Myerson payment was computed, and what was checked.

    Attributes
    ----------
    method : {"shortcut_certified", "full_solve", "report_independent"}
        ``"full_solve"``: every ``ε_i(s)`` on the seller's sweep is what
        :func:`mechanisms.allocate` returns for that report (the full ``η`` search).
        ``"shortcut_certified"``: some were re-solved by the local shortcut
        (:mod:`mechanisms.payments._resolve._local_resolve`) or, under the default rule, by the lean
        re-solve (:mod:`mechanisms.payments._resolve._range_resolve`: the same range search
        without the O(m) allocation around it), each accepted only because its own
        certificate held — KKT residuals ≤ ``KKT_TOL`` and the ``η``-range
        branch-and-bound closed (global optimum over the declared range, which is
        what the full search returns); any evaluation that failed it was re-done
        with the full search. ``"report_independent"``: ``γ = 0``, where the rule does
        not read the reports, so ``ε_i(s)`` is the base's at every report and the
        payment needs no re-solve.
    allocation_status : str
        ``status`` of the base allocation (``"optimal"`` = certified global optimum).
    rule_certified : bool
        The base and every re-solve on the sweep are certified global optima over
        the range (so ``s ↦ ε_i(s)`` is the monotone rule's curve and the payment is
        incentive compatible up to quadrature error).
    n_evaluations, n_shortcut, n_full : int
        Re-solves on the sweep (excluding the base), and how many were shortcuts /
        full searches.
    n_uncertified : int
        Re-solves whose status is not ``"optimal"``.
    max_kkt_residual : float
        Largest KKT residual (max over the w, a, η blocks) over the base and the
        re-solves.
    max_range_gap : float or None
        Largest certified optimality gap ``G − lower bound`` relative to
        ``1 + |G|`` over the certified evaluations (``None``: none certified).
    shortcut_checked : bool
        Whether shortcut values were also cross-checked against full searches at
        the critical-cost bracket and a quadrature node (``verify``).
    shortcut_mismatch : float
        Largest ``|Δε_i|`` those cross-checks found.
    monotonicity_violation : float
        Worst upward step of ``ε_i(s)`` over the evaluated reports.
    quad_error : float
        Error bound of the payment integral (quadrature + critical-cost bracket).
    """

    method: Method
    allocation_status: str
    rule_certified: bool
    n_evaluations: int
    n_shortcut: int
    n_full: int
    n_uncertified: int
    max_kkt_residual: float
    max_range_gap: float | None
    shortcut_checked: bool
    shortcut_mismatch: float
    monotonicity_violation: float
    quad_error: float

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its constructor's arguments (as
        :meth:`mechanisms.payments._seller_payment.SellerPayment.__reduce__`)."""
        return (SellerCertificate, _SELLER_CERTIFICATE_FIELDS(self))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (non-finite floats become ``None``)."""
        out = dataclasses.asdict(self)
        for k, v in out.items():
            if isinstance(v, float) and not math.isfinite(v):
                out[k] = None
        return out


_SELLER_CERTIFICATE_FIELDS = operator.attrgetter(
    *(f.name for f in dataclasses.fields(SellerCertificate))
)
"""The fields of :class:`SellerCertificate` in order, as a tuple
(:meth:`SellerCertificate.__reduce__`)."""
