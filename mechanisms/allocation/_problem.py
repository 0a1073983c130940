"""The allocation problem as data, and the objective ``G`` (spec ``mechanism.md`` §4.1).

``G(w, a, η) = Σ a_i ℓ_i(w) + (λ/2)‖w‖² + μ‖a‖₂ + σ/η + γ Σ_i Ψ_i u(η a_i)``
(paper eq. (10) without the realised noise term; see the spec's Correction).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from learners.losses import Loss, make_loss
from mechanisms.config import MechanismConfig

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Problem:
    """Everything the allocation needs, already validated.

    ``noise`` is the realised ``b`` of the paper's literal objective (mode ``"paper"``);
    ``None`` otherwise. ``scenario_psi``: virtual costs of public cost scenarios
    (``n × m``, drawn from the prior with a fixed seed, never from the reports), from
    which the default rule's candidate models are computed
    (:mod:`mechanisms.allocation._range._candidate_range`).
    """

    X: FloatArray
    y: FloatArray
    psi: FloatArray
    eps_max: FloatArray
    cfg: MechanismConfig
    noise: FloatArray | None = None
    scenario_psi: FloatArray | None = None

    given_psi: FloatArray | None = field(default=None, repr=False)
    given_eps_max: FloatArray | None = field(default=None, repr=False)
    # Values computed from the records alone, as (X, value) so that a problem derived
    # with other records cannot read them; shared with the problems derived from this
    # one (with_seller_psi, dataclasses.replace): a payment job asks once.
    records_memo: dict[str, tuple[FloatArray, Any]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def from_records(self, key: str, compute: Callable[[FloatArray], Any]) -> Any:
        """``compute(X)``, remembered for these records under ``key``."""
        hit = self.records_memo.get(key)
        if hit is not None and hit[0] is self.X:
            return hit[1]
        value = compute(self.X)
        self.records_memo[key] = (self.X, value)
        return value

    def __post_init__(self) -> None:
        # An infinite virtual cost (a prior whose density vanishes at the top of its
        # support, e.g. Beta with b > 1: Ψ(c̄) = c̄ + F/f = c̄ + 1/0 = ∞) makes every
        # ε_i > 0 infinitely expensive when γ > 0: the exact optimum gives that seller
        # ε_i = 0, which is what a cap of 0 imposes. The entry is then replaced by a
        # finite stand-in (the largest finite Ψ; its weight is 0, so G does not see
        # it), so no kernel meets ∞·0 or a division by a vanishing density. With
        # γ = 0 the Ψ term is absent from G and only the stand-in is needed. The
        # arrays as given are kept (``given_psi``, ``given_eps_max``) so that
        # :meth:`with_seller_psi` re-derives both from them. ``dataclasses.replace``
        # keeps them as they are: it takes ``psi`` and ``eps_max`` as already derived.
        psi = np.asarray(self.psi, dtype=float)
        if not psi.flags.writeable:
            # e.g. a row of the shared scenario table: numba specialises each kernel
            # on its arrays' writability, and a read-only Ψ would compile every solver
            # kernel a second time in each process (seconds, at a first payment)
            psi = psi.copy()
            object.__setattr__(self, "psi", psi)
        if self.given_psi is not None:
            return
        eps_max = np.asarray(self.eps_max, dtype=float)
        object.__setattr__(self, "given_psi", psi)
        object.__setattr__(self, "given_eps_max", eps_max)
        if np.isnan(psi).any():
            j = int(np.flatnonzero(np.isnan(psi))[0])
            raise ValueError(f"virtual cost of seller {j} is not a number")
        bad = ~np.isfinite(psi)
        if bad.any():
            object.__setattr__(self, "psi", np.where(bad, _finite_stand_in(psi), psi))
            if self.cfg.gamma > 0:
                object.__setattr__(self, "eps_max", np.where(bad, 0.0, eps_max))
        scen = self.scenario_psi
        if scen is not None and not np.isfinite(scen).all():
            scen = np.asarray(scen, dtype=float)
            scen = np.where(np.isfinite(scen), scen, _finite_stand_in(scen))
            object.__setattr__(self, "scenario_psi", scen)

    def with_seller_psi(self, i: int, psi_i: float) -> Problem:
        """The problem with seller ``i``'s virtual cost (as given) replaced by
        ``psi_i`` (possibly ``∞``), everything else as given."""
        assert self.given_psi is not None
        assert self.given_eps_max is not None
        psi = self.given_psi.copy()
        psi[i] = psi_i
        # Without stand-ins here and with a finite psi_i there are none to derive:
        # the arrays as given are the problem's (no validation pass over m).
        clean = (
            self.psi is self.given_psi
            and self.eps_max is self.given_eps_max
            and math.isfinite(psi_i)
        )
        return Problem(
            self.X,
            self.y,
            psi,
            self.given_eps_max,
            self.cfg,
            self.noise,
            scenario_psi=self.scenario_psi,
            given_psi=psi if clean else None,
            given_eps_max=self.given_eps_max if clean else None,
            records_memo=self.records_memo,
        )

    @property
    def m(self) -> int:
        return int(self.X.shape[0])

    @property
    def loss(self) -> Loss:
        return make_loss(
            self.cfg.loss,
            quantile=self.cfg.quantile,
            smoothing=self.cfg.pinball_smoothing,
        )

    @property
    def strict_loss_value(self) -> float:
        """The public constant replacing ``ℓ_i(w)`` in strict mode: ``ℓ`` at ``w = 0``
        for a label at the centre of its range (``log 2`` for the logistic loss)."""
        if self.cfg.loss == "logistic":
            return _LOG_2
        return 0.0

    def caps(self, eta: float) -> FloatArray:
        """``h_i = min(k/m, ε_i^max/η)``."""
        return np.minimum(self.cfg.k / self.m, self.eps_max / eta)

    def linear_term(self, eta: float) -> FloatArray | None:
        """``c = 2b/η`` of the paper's literal objective, else ``None``."""
        return None if self.noise is None else 2.0 * self.noise / eta


_LOG_2 = float(np.log(2.0))
""":attr:`Problem.strict_loss_value` of the logistic loss (a strict payment sweep reads
it at every re-solve)."""


def _finite_stand_in(psi: FloatArray) -> float:
    """The largest finite entry of ``psi`` (1.0 when there is none)."""
    finite = psi[np.isfinite(psi)]
    return float(finite.max()) if finite.size else 1.0


def utility(eps: FloatArray, cfg: MechanismConfig) -> FloatArray:
    """``u(ε) = ε`` or ``ε^p``."""
    return eps if cfg.u == "linear" else eps**cfg.p


def utility_derivative(eps: FloatArray, cfg: MechanismConfig) -> FloatArray:
    """``u'(ε)``."""
    return np.ones_like(eps) if cfg.u == "linear" else cfg.p * eps ** (cfg.p - 1.0)


def _privacy_cost(prob: Problem, a: FloatArray, eta: float) -> float:
    """``γ Σ_i Ψ_i u(η a_i)`` (0 when ``γ = 0``); ``+∞`` where it exceeds the float
    range (virtual costs near the top of a prior whose density vanishes there grow
    without bound): such a point is worse than every finite one, which is how the
    searches compare it."""
    if prob.cfg.gamma == 0:
        return 0.0
    with np.errstate(over="ignore"):
        return prob.cfg.gamma * float(prob.psi @ utility(eta * a, prob.cfg))


def objective(prob: Problem, w: FloatArray, a: FloatArray, eta: float) -> float:
    """``G(w, a, η)`` of spec §4.1 (never with the noise term)."""
    return objective_from_losses(prob, w, a, eta, prob.loss.value(prob.X @ w, prob.y))


def objective_from_losses(
    prob: Problem, w: FloatArray, a: FloatArray, eta: float, losses: FloatArray
) -> float:
    """:func:`objective` given the per-record losses ``ℓ_i(w)`` (no pass over ``X``)."""
    cfg = prob.cfg
    risk = float(a @ losses)
    return (
        risk
        + 0.5 * cfg.lam * float(w @ w)
        + cfg.mu * float(np.linalg.norm(a))
        + (cfg.sigma / eta)
        + _privacy_cost(prob, a, eta)
    )


def search_value(prob: Problem, w: FloatArray, a: FloatArray, eta: float) -> float:
    """The value the mode's search minimises (spec §4.1, §4.4)."""
    cfg = prob.cfg
    if cfg.mode == "strict":
        return (
            prob.strict_loss_value * float(a.sum())
            + cfg.mu * float(np.linalg.norm(a))
            + cfg.sigma / eta
            + _privacy_cost(prob, a, eta)
        )
    val = objective(prob, w, a, eta)
    c = prob.linear_term(eta)
    return val if c is None else val + float(c @ w)
