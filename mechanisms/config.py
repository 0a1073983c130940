"""Mechanism settings: one frozen, validated value object (spec ``mechanism.md`` §4)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

LossName = Literal["logistic", "squared", "pinball"]
UtilityName = Literal["linear", "power"]
ModeName = Literal["default", "paper", "strict"]
OverheadName = Literal["auto", "objective_perturbation", "none"]
CertifyName = Literal["auto", "report", "raise_lambda"]

_LOSSES = ("logistic", "squared", "pinball")
_UTILITIES = ("linear", "power")
_MODES = ("default", "paper", "strict")
_OVERHEADS = ("auto", "objective_perturbation", "none")
_CERTIFY = ("auto", "report", "raise_lambda")


SETTING_RANGES: dict[str, tuple[float, float]] = {
    "gamma": (0.0, 1e6),
    "lam": (1e-8, 1e6),
    "mu": (0.0, 1e6),
    "sigma": (0.0, 1e6),
    "k": (1.0, 1e6),
    "eps_avg_max": (1e-6, 1e6),
    "u_power": (1.0, 2.0),
}
"""The closed range ``[low, high]`` of each numeric setting the numerics can run
(``docs/money-and-settings.md`` gives the measurements behind each bound):

* ``gamma ≤ 10⁶``: an 8-seller allocation with payments solves in seconds at ``10⁶``;
  at ``10³⁰⁸`` it did not finish in two minutes.
* ``lam ≥ 10⁻⁸``: the release overhead ``Δ_i = 2 ln(1 + a_i/(4λ))`` (spec §3) is at
  most ``2 ln(1 + 2.5·10⁷) ≈ 34`` there, finite; at ``λ = 5·10⁻³²⁴`` ``a_i/(4λ)``
  overflows. ``lam ≤ 10⁶``: ``λ‖w‖²`` then dominates every loss; larger gains nothing.
* ``eps_avg_max ≥ 10⁻⁶``: the ``ε_avg`` grid starts at ``L·eps_floor_ratio``, so ``η``
  stays above ``10⁻¹⁰·m`` and ``σ/η²`` (the ``η``-block's derivative) stays finite; at
  ``L = 10⁻³⁰⁰`` it overflows and the solve divides by zero.
* ``u_power ≤ 2``: the power utility's ``a``-step is a conic programme (CLARABEL); it
  failed (``SolverError``) at ``p = 3`` with 50 sellers and at ``p = 6`` with 10.
* ``mu``, ``sigma``, ``k`` ``≤ 10⁶``: beyond any useful weight, and finite in ``G``.
"""


@dataclass(frozen=True, slots=True)
class MechanismConfig:
    """Hyperparameters of the allocation objective ``G`` (spec §4.1, paper eq. (10)).

    Parameters
    ----------
    gamma : float
        Weight ``γ ≥ 0`` on the expected payment ``Σ Ψ_i u(ε_i)``.
    lam : float
        Ridge weight ``λ > 0`` on ``‖w‖²/2``.

    The numeric settings must lie in :data:`SETTING_RANGES` (what the numerics can
    run); a value outside raises ``ValueError`` naming the setting.
    mu : float
        Weight ``μ ≥ 0`` on ``‖a‖₂`` (spreads weight across sellers).
    sigma : float
        Weight ``σ ≥ 0`` on ``1/η`` (the cost of the privacy noise, paper Thm 2.1).
    k : float
        Weight cap factor ``k ≥ 1``: ``a_i ≤ k/m`` so ``ε_i ≤ k·ε_avg``.
    eps_avg_max : float
        ``L > 0``: the largest average privacy loss, ``η ≤ m·L``.
    loss : {"logistic", "squared", "pinball"}
        Per-record loss ``ℓ_i``.
    u : {"linear", "power"}
        Seller disutility ``u(ε) = ε`` or ``ε^p``.
    u_power : float
        Exponent ``p ≥ 1`` of the power utility.
    quantile : float
        Level ``τ ∈ (0, 1)`` of the pinball loss.
    pinball_smoothing : float
        Half-width ``h > 0`` of the quadratic smoothing of the pinball kink (keeps the
        w-step a Newton problem; the loss differs from the exact pinball by at most
        ``h/2``).
    mode : {"default", "paper", "strict"}
        ``"default"``: spec §4.1. ``"paper"``: the paper's literal objective, with the
        realised noise term ``2bᵀw/η`` (comparison only, spec §4.1 Correction).
        ``"strict"``: the allocation sees only costs and public data (spec §4.4).
    eps_floor_ratio : float
        The ``ε_avg`` grid starts at ``L·eps_floor_ratio`` (spec §4.2: positive floor).
    release_overhead : {"auto", "objective_perturbation", "none"}
        The release's per-seller term added to ``ε_i = a_i η`` in ``ε_i^total`` (what
        payments and ledgers use, spec §3): ``"objective_perturbation"`` adds
        ``Δ_i = 2 ln(1 + a_i/(4λ))``; ``"none"`` adds nothing (local learners, whose
        randomizers spend exactly ``ε_i``); ``"auto"`` is objective perturbation for the
        logistic loss and none otherwise. The learner registry declares it per learner.
    n_grid : int
        Points of the coarse log grid over ``ε_avg``.
    tol : float
        Relative tolerance of the block-coordinate solve at each ``η``.
    max_iter : int
        Maximum block-coordinate sweeps at each ``η``.
    certify : {"auto", "report", "raise_lambda"}
        How the rule is made a certified global optimum (the fixed-``η``
        problem is not convex for ``λ ≤ λ_conv``, :mod:`mechanisms.allocation._range._certify`).
        ``"auto"`` (default): for ``λ > λ_conv`` the global optimum over the whole
        ``η`` range; otherwise (and for the squared / pinball losses) the global
        optimum over the declared range of
        :mod:`mechanisms.allocation._range._candidate_range` (``w`` ranges over public
        candidate models computed without the costs) — both certified, so monotone in
        each report. ``"report"``: the unrestricted local search, labelled
        ``status="local"`` when no certificate exists (not monotone in general; kept
        for comparison). ``"raise_lambda"``: solves with ``λ`` raised to
        ``1.01·λ_conv`` (a function of the records and this configuration, never of
        the costs), reported as ``Allocation.config.lam``.
    """

    gamma: float = 1.0
    lam: float = 1e-2
    mu: float = 0.1
    sigma: float = 1.0
    k: float = 4.0
    eps_avg_max: float = 5.0
    loss: LossName = "logistic"
    u: UtilityName = "linear"
    u_power: float = 2.0
    quantile: float = 0.5
    pinball_smoothing: float = 1e-3
    mode: ModeName = "default"
    eps_floor_ratio: float = 1e-4
    release_overhead: OverheadName = "auto"
    n_grid: int = 24
    tol: float = 1e-9
    max_iter: int = 500
    certify: CertifyName = "auto"

    def __post_init__(self) -> None:
        for name, (low, high) in SETTING_RANGES.items():
            _check_real(name, getattr(self, name), low=low, high=high)
        _check_real("quantile", self.quantile, low=0.0, strict=True)
        if self.quantile >= 1.0:
            raise ValueError(f"quantile must be in (0, 1), got {self.quantile!r}")
        _check_real("pinball_smoothing", self.pinball_smoothing, low=0.0, strict=True)
        _check_real("eps_floor_ratio", self.eps_floor_ratio, low=0.0, strict=True)
        if self.eps_floor_ratio >= 1.0:
            raise ValueError(
                f"eps_floor_ratio must be in (0, 1), got {self.eps_floor_ratio!r}"
            )
        _check_real("tol", self.tol, low=0.0, strict=True)
        if not isinstance(self.n_grid, int) or self.n_grid < 2:
            raise ValueError(f"n_grid must be an integer >= 2, got {self.n_grid!r}")
        if not isinstance(self.max_iter, int) or self.max_iter < 1:
            raise ValueError(f"max_iter must be an integer >= 1, got {self.max_iter!r}")
        _check_choice("loss", self.loss, _LOSSES)
        _check_choice("u", self.u, _UTILITIES)
        _check_choice("mode", self.mode, _MODES)
        _check_choice("release_overhead", self.release_overhead, _OVERHEADS)
        _check_choice("certify", self.certify, _CERTIFY)

    @property
    def curvature_overhead(self) -> bool:
        """Whether ``ε_i^total`` includes the objective-perturbation ``Δ_i`` (spec §3)."""
        if self.release_overhead == "auto":
            return self.loss == "logistic"
        return self.release_overhead == "objective_perturbation"

    @property
    def p(self) -> float:
        """Exponent of ``u``: 1 for linear."""
        return 1.0 if self.u == "linear" else float(self.u_power)

    def with_(self, **changes: object) -> MechanismConfig:
        """Return a copy with ``changes`` applied (validated again)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _check_real(
    name: str,
    value: object,
    *,
    low: float,
    strict: bool = False,
    high: float = math.inf,
) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    try:
        v = float(value)
    except OverflowError:
        raise ValueError(f"{name} must be finite, got an integer too large") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if (strict and v <= low) or (not strict and v < low):
        op = ">" if strict else ">="
        raise ValueError(f"{name} must be {op} {low:g}, got {value!r}")
    if v > high:
        raise ValueError(f"{name} must be <= {high:g}, got {value!r}")


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
