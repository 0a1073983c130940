"""Privacy reports of the learners, and the per-record accounting of spec §3.

The release of spec ``mechanism.md`` §3 (the paper's Algorithm 0, objective
perturbation [CMS11]_ with per-record weights) gives record ``i`` the guarantee

    ε_i^total = a_i·η + Δ_i,    Δ_i = 2·ln(1 + a_i / (4λ)),

for replace-one neighbours, ``‖x_i‖₂ ≤ 1`` and the logistic loss (``|ℓ'| ≤ 1``,
``ℓ'' ≤ 1/4``). The noise term ``a_i·η`` bounds the change of the perturbation
``b`` needed to keep the same minimiser (gradient sensitivity ``2a_i`` against the
``exp(−η‖2b/η‖/2)`` density); ``Δ_i`` bounds the log-ratio of the Jacobians, whose
Hessians differ by a rank-two term of eigenvalues at most ``a_i/4`` on top of ``λI``
(spec §3 **Correction**: the paper uses ``ℓ'' ≤ 1`` and a global bound).

References
----------
.. [CMS11] K. Chaudhuri, C. Monteleoni, A. D. Sarwate, "Differentially private
   empirical risk minimization", JMLR 12 (2011), Theorem 9.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

Guarantee = Literal[
    "conditional_on_allocation",
    "end_to_end",
    "local",
    "user_level_local",
    "mpc_plus_dp",
]
Neighbouring = Literal["add_remove", "replace_one"]
Custody = Literal["platform", "seller"]
CENTRAL_GUARANTEES: tuple[str, ...] = ("conditional_on_allocation", "end_to_end")
GUARANTEES: tuple[str, ...] = (
    "conditional_on_allocation",
    "end_to_end",
    "local",
    "user_level_local",
    "mpc_plus_dp",
)
"""Guarantee labels (``docs/mathematics.md``, Part III, says what each promises):

- ``conditional_on_allocation``: central DP of the released model given the allocation
  ``(a, η)``, which itself was chosen with the sellers' data (spec ``mechanism.md`` §4.4);
- ``end_to_end``: central DP of the whole output (the allocation saw costs and public
  data only: the mechanism's strict mode);
- ``local``: each record was randomized on its own with its seller's ``ε_i`` before the
  curator used it;
- ``user_level_local``: as ``local``, with all of a seller's records as the unit;
- ``mpc_plus_dp``: computed in secure multi-party computation, the output released with
  DP noise.

A learner whose DP release may also run in the clear (``secure_vertical_logistic`` with
``backend="plain"``) labels that release with a central label, never ``mpc_plus_dp``."""


class NonPrivateFitWarning(UserWarning):
    """A learner that can fit without differential privacy did so (no ε was given):
    the fitted model carries no privacy guarantee and ``privacy_report_`` is None."""


def _as_weights(a: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(a, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"a must be one-dimensional, got shape {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"a must be finite and >= 0; a[{i}] = {arr[i]!r}")
    return arr


def _check_positive(value: float, name: str) -> float:
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return v


def curvature_slack(a: ArrayLike, lam: float) -> NDArray[np.float64]:
    """Per-record curvature term ``Δ_i = 2·ln(1 + a_i/(4λ))`` (spec §3 Correction).

    Parameters
    ----------
    a : array-like of shape (n_samples,)
        Record weights ``a_i ≥ 0`` of the weighted risk ``Σ a_i ℓ_i``.
    lam : float
        Ridge parameter ``λ > 0``.

    Returns
    -------
    ndarray of shape (n_samples,)

    Raises
    ------
    ValueError
        If ``a`` has a negative or non-finite entry (index named) or ``lam ≤ 0``.

    Examples
    --------
    >>> float(curvature_slack([0.0, 0.04], 0.01)[1])  # 2 ln 2
    1.3862943611198906
    """
    arr = _as_weights(a)
    lam = _check_positive(lam, "lam")
    return 2.0 * np.log1p(arr / (4.0 * lam))


def total_epsilon(a: ArrayLike, eta: float, lam: float) -> NDArray[np.float64]:
    """Per-record total privacy ``ε_i^total = a_i·η + Δ_i`` (spec §3).

    Parameters
    ----------
    a : array-like of shape (n_samples,)
        Record weights ``a_i ≥ 0``.
    eta : float
        Noise scale parameter ``η > 0`` (the perturbation is ``(2/η)·bᵀw``).
    lam : float
        Ridge parameter ``λ > 0``.

    Returns
    -------
    ndarray of shape (n_samples,)

    Examples
    --------
    >>> total_epsilon([0.5, 0.5], 2.0, 1e6).round(6).tolist()
    [1.0, 1.0]
    """
    arr = _as_weights(a)
    eta = _check_positive(eta, "eta")
    return arr * eta + curvature_slack(arr, lam)


@dataclass(frozen=True, slots=True)
class PrivacySpend:
    """One mechanism invocation (or one term of a bound) inside a fit."""

    label: str
    epsilon: float
    delta: float = 0.0


@dataclass(frozen=True, slots=True)
class StageSpend:
    """One stage of a fit (a randomizer round, a noise term) and each record's ε in it."""

    label: str
    sample_epsilon: tuple[float, ...]

    def summary(self) -> dict[str, Any]:
        """``{"stage", "min", "median", "max"}`` over the records that spent ε > 0."""
        eps = np.asarray(self.sample_epsilon, dtype=float)
        used = eps[eps > 0]
        if used.size == 0:
            return {"stage": self.label, "min": 0.0, "median": 0.0, "max": 0.0}
        return {
            "stage": self.label,
            "min": float(used.min()),
            "median": float(np.median(used)),
            "max": float(used.max()),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivacyReport:
    """What one call to ``fit`` spent, record by record.

    Attributes
    ----------
    mechanism : str
        Name of the release mechanism.
    guarantee : {"conditional_on_allocation", "end_to_end"}
        ``"end_to_end"`` only when the weights were chosen without the private data
        (spec §4.4); otherwise the guarantee holds given the allocation.
    neighbouring : {"replace_one", "add_remove"}
    sample_epsilon : tuple of float, length n_samples
        Noise part ``a_i·η``.
    sample_epsilon_total : tuple of float, length n_samples
        ``a_i·η + Δ_i``; what ledgers and payments use.
    epsilon_max : float
        ``max_i ε_i^total``.
    grad_norm : float
        The public certificate of the argmin (the proof assumes the exact one): the
        solver's tolerance ``gtol`` when the achieved ``‖∇F(ŵ)‖₂`` met it, ``inf`` when
        it did not (:func:`certified_grad_bound`). The achieved norm itself is a
        statistic of the records and is never stored.
    gtol : float
        Tolerance the solver was asked for.
    delta : float
        Always 0.0 here (pure DP).
    spends : tuple of PrivacySpend
        The bound split into its terms for the worst record; they add up to
        ``epsilon_max``.
    stages : tuple of StageSpend
        Per-record ε of each stage (or term); per record they add up to
        ``sample_epsilon_total``.
    lam_effective : float or None
        The ridge ``λ`` the release actually used (``None`` in reports from before
        it was recorded). Larger than the constructor's ``lam`` only when the ridge
        remedy (:func:`ridge_remedy`) raised it.
    custody : {"platform", "seller"}
        Who held the raw records when the randomizers ran: ``"platform"`` when the
        fit ran them itself (the library's ``fit``, a platform-custody market), or
        ``"seller"`` when the result was built from reports randomized on the
        sellers' own machines (:mod:`learners.local_protocol`).
    """

    mechanism: str
    guarantee: Guarantee
    neighbouring: Neighbouring = "replace_one"
    sample_epsilon: tuple[float, ...]
    sample_epsilon_total: tuple[float, ...]
    epsilon_max: float
    grad_norm: float
    gtol: float
    delta: float = 0.0
    spends: tuple[PrivacySpend, ...] = field(default=())
    stages: tuple[StageSpend, ...] = field(default=())
    lam_effective: float | None = None
    custody: Custody = "platform"

    def __post_init__(self) -> None:
        if self.guarantee not in GUARANTEES:
            raise ValueError(
                f"guarantee must be one of {GUARANTEES}, got {self.guarantee!r}"
            )
        if self.neighbouring not in ("replace_one", "add_remove"):
            raise ValueError(
                f"neighbouring must be 'replace_one' or 'add_remove', got {self.neighbouring!r}"
            )
        if self.custody not in ("platform", "seller"):
            raise ValueError(
                f"custody must be 'platform' or 'seller', got {self.custody!r}"
            )
        if len(self.sample_epsilon) != len(self.sample_epsilon_total):
            raise ValueError(
                "sample_epsilon and sample_epsilon_total must have the same length"
            )

    @property
    def epsilon(self) -> float:
        """The worst record's guarantee (alias of ``epsilon_max``)."""
        return self.epsilon_max

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form: plain floats, lists and dicts only."""
        return {
            "mechanism": self.mechanism,
            "guarantee": self.guarantee,
            "neighbouring": self.neighbouring,
            "sample_epsilon": [float(e) for e in self.sample_epsilon],
            "sample_epsilon_total": [float(e) for e in self.sample_epsilon_total],
            "epsilon_max": float(self.epsilon_max),
            "grad_norm": float(self.grad_norm),
            "gtol": float(self.gtol),
            "delta": float(self.delta),
            "spends": [
                {"label": s.label, "epsilon": float(s.epsilon), "delta": float(s.delta)}
                for s in self.spends
            ],
            "stages": [
                {
                    "label": st.label,
                    "sample_epsilon": [float(e) for e in st.sample_epsilon],
                }
                for st in self.stages
            ],
            "lam_effective": (
                None if self.lam_effective is None else float(self.lam_effective)
            ),
            "custody": self.custody,
        }

    def stage_summary(self) -> list[dict[str, Any]]:
        """Min/median/max ε of each stage over the records that spent any (no per-record
        values: what a buyer may see)."""
        return [st.summary() for st in self.stages]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrivacyReport:
        """Inverse of :meth:`to_dict`."""
        return cls(
            mechanism=data["mechanism"],
            guarantee=data["guarantee"],
            neighbouring=data["neighbouring"],
            sample_epsilon=tuple(float(e) for e in data["sample_epsilon"]),
            sample_epsilon_total=tuple(float(e) for e in data["sample_epsilon_total"]),
            epsilon_max=float(data["epsilon_max"]),
            grad_norm=float(data["grad_norm"]),
            gtol=float(data["gtol"]),
            delta=float(data["delta"]),
            spends=tuple(PrivacySpend(**s) for s in data["spends"]),
            stages=tuple(
                StageSpend(st["label"], tuple(float(e) for e in st["sample_epsilon"]))
                for st in data.get("stages", ())
            ),
            lam_effective=(
                None
                if data.get("lam_effective") is None
                else float(data["lam_effective"])
            ),
            custody=data.get("custody", "platform"),
        )


def ridge_remedy(
    target_total: ArrayLike, lam: float
) -> tuple[NDArray[np.float64], float, float]:
    """Weights, ``η`` and ``λ_eff`` so that record ``i`` gets at most ``target_total[i]``.

    The heterogeneous form of [CMS11]_'s Algorithm 2 remedy. Weights are
    proportional to the targets, ``a_i = T_i / ΣT``. If every ``T_i`` exceeds the
    curvature term ``Δ_i(λ) = 2 ln(1 + a_i/(4λ))`` the ridge stays ``λ``; otherwise it
    is raised to the smallest value with ``Δ_i(λ_eff) ≤ T_i/2`` for every record,
    ``λ_eff = max(λ, max_i a_i / (4(e^{T_i/4} − 1)))``, so the noise part
    ``T_i − Δ_i(λ_eff)`` stays positive. Then ``η = min_i (T_i − Δ_i)/a_i`` over the
    records with ``a_i > 0``: every ``a_i η + Δ_i ≤ T_i``, with equality for the
    binding record.

    Examples
    --------
    >>> a, eta, lam = ridge_remedy([0.1, 0.1], 1e-3)  # Δ(1e-3) = 2 ln 126 ≫ 0.1
    >>> lam > 1e-3
    True
    >>> bool(np.all(total_epsilon(a, eta, lam) <= 0.1 + 1e-12))
    True
    """
    T = _as_weights(target_total)
    lam = _check_positive(lam, "lam")
    s = float(T.sum())
    if not (s > 0 and math.isfinite(s)):
        raise ValueError("target_total must not be all zero")
    a = T / s
    pos = a > 0
    slack = curvature_slack(a, lam)
    lam_eff = lam
    if np.any(T[pos] <= slack[pos]):
        need = a[pos] / (4.0 * np.expm1(T[pos] / 4.0))
        lam_eff = max(lam, float(need.max()))
        slack = curvature_slack(a, lam_eff)
    eta = float(np.min((T[pos] - slack[pos]) / a[pos]))
    return a, eta, lam_eff


def certified_grad_bound(grad_norm: float, gtol: float) -> float:
    """What a report may state about the solver: ``gtol`` if ``‖∇F(ŵ)‖ ≤ gtol``, else
    ``inf``. The achieved norm is a function of the records outside any DP release,
    so only this public bound (one bit: whether the tolerance was met) leaves the fit.
    """
    return float(gtol) if float(grad_norm) <= float(gtol) else math.inf


def objective_perturbation_report(
    a: NDArray[np.float64],
    *,
    eta: float,
    lam: float,
    guarantee: Guarantee,
    grad_norm: float,
    gtol: float,
) -> PrivacyReport:
    """Build the :class:`PrivacyReport` of one heterogeneous objective-perturbation fit
    (``lam``: the ridge the release used, recorded as ``lam_effective``)."""
    noise = a * eta
    slack = curvature_slack(a, lam)
    total = noise + slack
    worst = int(np.argmax(total))
    return PrivacyReport(
        mechanism="heterogeneous objective perturbation (Algorithm 0; Chaudhuri et al. 2011)",
        guarantee=guarantee,
        neighbouring="replace_one",
        sample_epsilon=tuple(float(e) for e in noise),
        sample_epsilon_total=tuple(float(e) for e in total),
        epsilon_max=float(total[worst]),
        grad_norm=certified_grad_bound(grad_norm, gtol),
        gtol=float(gtol),
        spends=(
            PrivacySpend("noise term a_i*eta (worst record)", float(noise[worst])),
            PrivacySpend(
                "curvature term 2 ln(1 + a_i/(4 lam)) (worst record)",
                float(slack[worst]),
            ),
        ),
        stages=(
            StageSpend("noise term a_i*eta", tuple(float(e) for e in noise)),
            StageSpend(
                "curvature term 2 ln(1 + a_i/(4 lam))", tuple(float(e) for e in slack)
            ),
        ),
        lam_effective=float(lam),
    )
