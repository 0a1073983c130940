"""Result objects of the mechanism: status is data, crashes are exceptions (style §6.6)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mechanisms.config import MechanismConfig

FloatArray = NDArray[np.float64]


class SolveStatus(StrEnum):
    """Outcome of a solve.

    ``OPTIMAL``: certified — the point is the global optimum over the declared range
    (to the range search's tolerance), so the rule is monotone in each report. The
    range is every feasible ``(w, a, η)`` when every fixed-``η`` problem is provably
    convex (``λ > λ_conv``), or — the default rule for ``λ ≤ λ_conv`` — ``w`` over
    public candidate models computed without the costs
    (:mod:`mechanisms.allocation._range._candidate_range`); ``certificate.rule`` says which.
    ``LOCAL``: a KKT point with no global certificate (``certify="report"`` at
    ``λ ≤ λ_conv``, or no certificate exists for the utility / mode).
    ``UNCERTIFIED``: convexity holds but the range branch-and-bound did not close
    within its budget. ``OPTIMAL_INACCURATE``: a point was returned but its block KKT
    residuals (:class:`KKTResiduals`) exceed ``KKT_TOL = 10⁻⁶``
    (:mod:`mechanisms.allocation._eta_search`): the blocks did not reach their
    first-order tolerance, so the point is neither certified nor known to be a local
    optimum; the message gives the residuals. Only ``OPTIMAL`` is certified
    (:attr:`Allocation.certified`, ``PaymentResult.rule_certified``); the market
    never pays on an allocation whose residuals exceed ``10⁻⁴`` (the order fails
    before payment) and reports any other uncertified status, ``OPTIMAL_INACCURATE``
    within that bound included, in the order's summary.
    """

    OPTIMAL = "optimal"
    LOCAL = "local"
    UNCERTIFIED = "uncertified"
    OPTIMAL_INACCURATE = "optimal_inaccurate"
    INFEASIBLE = "infeasible"
    SOLVER_ERROR = "solver_error"


class SolverError(RuntimeError):
    """Raised by :meth:`Allocation.raise_for_status` when a solve did not succeed."""


@dataclass(frozen=True, slots=True)
class KKTResiduals:
    """First-order optimality residuals of each block at the returned point.

    ``w``: ``‖∇_w G‖₂``. ``a``: the largest violation of the capped-simplex KKT
    conditions of the a-block, relative to the spread of its gradient.
    ``eta``: ``|∂G/∂η|·η/(1+|G|)`` (0 at a bound where the sign is right).
    """

    w: float
    a: float
    eta: float

    def max(self) -> float:
        return max(self.w, self.a, self.eta)


@dataclass(frozen=True, eq=False)
class EtaProfile:
    """The search over ``η``: each evaluated ``η`` and ``min_{w,a} G`` there.

    ``starts`` holds the block solution at each coarse-grid point (``(w, a)``), used to
    warm-start re-solves with one seller's report changed (payments).
    """

    grid: FloatArray
    grid_values: FloatArray
    starts: tuple[tuple[FloatArray, FloatArray], ...]
    refined_eta: FloatArray
    refined_values: FloatArray


@dataclass(frozen=True, eq=False)
class Allocation:
    """The allocation ``(w, a, η)`` and the privacy it buys (spec §4).

    Attributes
    ----------
    weights : ndarray of shape (m,)
        ``a`` on the capped simplex.
    eta : float
        ``η = Σ ε_i``.
    epsilon : ndarray of shape (m,)
        ``ε_i = a_i·η`` (the noise part).
    epsilon_total : ndarray of shape (m,)
        The guarantee each seller gets (spec §3): ``a_i·η + Δ_i`` with
        ``Δ_i = 2 ln(1 + a_i/(4λ))`` for the logistic release; equal to ``epsilon``
        for other losses (their learners account for their own release).
    w : ndarray of shape (d,)
        The allocation's noise-free model.
    objective : float
        ``G(w, a, η)`` of spec §4.1 at the returned point.
    status : SolveStatus
        ``"optimal"`` only when certified (see :class:`SolveStatus`).
    certificate : AllocationCertificate or None
        The global-optimality certificate (:mod:`mechanisms.allocation._range._certify`): ``λ`` used,
        ``λ_conv``, the range lower bound and gap.
    """

    weights: FloatArray
    eta: float
    epsilon: FloatArray
    epsilon_total: FloatArray
    w: FloatArray
    objective: float
    virtual_costs: FloatArray
    status: SolveStatus
    message: str
    kkt: KKTResiduals
    iterations: int
    n_eta_evaluations: int
    timings: dict[str, float]
    config: MechanismConfig
    profile: EtaProfile | None = field(default=None, repr=False)
    mode_objective: float | None = None
    # a mechanisms.allocation._range._certify.AllocationCertificate
    certificate: Any = None

    def __post_init__(self) -> None:
        for arr in (self.weights, self.epsilon, self.epsilon_total, self.w):
            arr.flags.writeable = False

    @property
    def success(self) -> bool:
        """A point was returned (certified or not; see :attr:`certified`)."""
        return self.status in (
            SolveStatus.OPTIMAL,
            SolveStatus.LOCAL,
            SolveStatus.UNCERTIFIED,
            SolveStatus.OPTIMAL_INACCURATE,
        )

    @property
    def certified(self) -> bool:
        """``status == "optimal"``: the global optimum over the declared range."""
        return self.status == SolveStatus.OPTIMAL

    @property
    def eps_avg(self) -> float:
        return self.eta / self.weights.size

    def raise_for_status(self) -> Allocation:
        if not self.success:
            raise SolverError(
                f"allocation did not solve: {self.status}: {self.message}"
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe summary for persistence by the market."""
        return {
            "status": str(self.status),
            "message": self.message,
            "eta": self.eta,
            "weights": self.weights.tolist(),
            "epsilon": self.epsilon.tolist(),
            "epsilon_total": self.epsilon_total.tolist(),
            "w": self.w.tolist(),
            "objective": self.objective,
            "kkt": {"w": self.kkt.w, "a": self.kkt.a, "eta": self.kkt.eta},
            "iterations": self.iterations,
            "timings": dict(self.timings),
            "lam": self.config.lam,
            "certificate": (
                None if self.certificate is None else self.certificate.to_dict()
            ),
        }
