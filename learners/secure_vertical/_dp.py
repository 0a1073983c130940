"""Differential privacy on top of the secure fit (spec §7).

- Unit: the record. Record ``i`` is protected at ``ε_i = min_{k ∈ s_i} ε_k`` over the
  parties holding it (§7.1); a party's ledger is charged the largest ε any of its
  records spent.
- Norms (§7.2): party ``k`` clips its block to ``r_k``; the intercept column is the
  public constant ``c_0``; ``c_0² + Σ_k r_k² = 1`` so ``‖x_i‖₂ ≤ 1`` without any
  cross-party norm (:func:`clip_radii`, :func:`clip_rows`).
- Imputation model (§7.3): a single Gaussian (``J = 1``), released first with
  ``ε_θ`` as noisy per-pattern moments ``s_m = Σ x^O``, ``Q_m = Σ x^O x^Oᵀ`` (the
  counts ``n_m`` are public, §6 row 1); EM then runs as post-processing on the noisy
  moments. Replace-one sensitivities with ``‖x‖ ≤ 1``: ``‖Δs‖₁ ≤ 2√|O|`` and, on the
  upper triangle of ``Q``, ``‖ΔQ‖₁ ≤ |O| + 1``; each gets ``ε_θ/2`` of discrete Laplace
  noise on the fixed-point grid ``2^{−f}``. Records sit in one pattern each, so the
  patterns compose in parallel. The moments are rounded to the grid *before* the
  noise is added (:func:`on_grid`), so the release has no floating-point low bits
  of the data (the attack of Mironov, CCS 2012, on textbook Laplace); the rounding
  moves each entry by at most ``2^{−f−1}``, which the sensitivities include
  (``+ |O|·2^{−f}`` and ``+ |O|(|O|+1)/2·2^{−f}``).
- Imputed blocks are an affine public map of the clipped observed values,
  ``ê = a_m + B_m x^O``; they are scaled by the public factor
  ``min(1, r_k / (‖a‖ + ‖B‖₂ r_O))`` so they obey the same radius (no secret comparison).
- β (§7.2): the market's heterogeneous objective perturbation
  (:func:`learners.privacy.ridge_remedy` for weights, ``η`` and ``λ_eff`` so that
  ``a_i η + 2 ln(1 + a_i/(4λ)) ≤ ε_i − ε_θ``; noise
  :func:`learners._noise.sample_gamma_direction_noise` rounded to the fixed-point grid).

Noise comes from ``numpy.random.default_rng(random_state)``: OS entropy when
``random_state`` is None (the market never passes one).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from learners._noise import sample_gamma_direction_noise
from learners.privacy import (
    Guarantee,
    PrivacyReport,
    PrivacySpend,
    StageSpend,
    certified_grad_bound,
    curvature_slack,
    ridge_remedy,
)
from learners.secure_vertical._em import RHO, Pattern, Theta, m_step, patterns

FloatArray = NDArray[np.float64]
FRAC_BITS = 32
GRID = 2.0**-FRAC_BITS


def record_epsilon(held: NDArray[np.bool_], party_epsilon: FloatArray) -> FloatArray:
    """``ε_i = min_{k ∈ s_i} ε_k`` (§7.1)."""
    eps = np.where(held, party_epsilon[None, :], np.inf)
    return np.asarray(eps.min(axis=1), dtype=float)


def clip_radii(sizes: list[int]) -> tuple[float, FloatArray]:
    """``(c_0, r)`` with ``c_0² = 1/(p+1)`` and ``r_k² = p_k/(p+1)`` (sum 1)."""
    p = float(sum(sizes))
    return float(np.sqrt(1.0 / (p + 1.0))), np.sqrt(
        np.asarray(sizes, dtype=float) / (p + 1.0)
    )


def clip_rows(block: FloatArray, radius: float) -> FloatArray:
    """Each row scaled to norm at most ``radius`` (NaN rows stay NaN).

    The factor ``radius/‖x‖`` is computed as ``(radius/m)/‖x/m‖`` with ``m`` the
    row's largest ``|entry|``, so a row of finite entries near ``1e300`` is projected
    onto the sphere like any other (no overflow to ``∞``/``NaN``)."""
    filled = np.nan_to_num(block, nan=0.0)
    peak = np.abs(filled).max(axis=1) if filled.size else np.zeros(filled.shape[0])
    safe = np.where(peak > 0, peak, 1.0)
    unit_norms = np.linalg.norm(filled / safe[:, None], axis=1)
    with np.errstate(divide="ignore"):
        scale = np.minimum(
            1.0, np.where(unit_norms > 0, (radius / safe) / unit_norms, 1.0)
        )
    return np.asarray(block * scale[:, None], dtype=float)


def on_grid(values: FloatArray) -> FloatArray:
    """``values`` rounded to the nearest multiple of ``2^{−f}`` (exact: power of two)."""
    return np.asarray(
        np.rint(np.asarray(values, dtype=float) / GRID) * GRID, dtype=float
    )


def discrete_laplace(
    scale: float, size: tuple[int, ...], rng: np.random.Generator
) -> FloatArray:
    """Discrete Laplace noise on the grid ``2^{−f}``: ``P(k·2^{−f}) ∝ exp(−|k|·2^{−f}/scale)``,
    the difference of two geometric variables (no floating-point low bits)."""
    t = scale / GRID
    q = -np.expm1(-1.0 / t)
    k = rng.geometric(q, size=size) - rng.geometric(q, size=size)
    return np.asarray(k, dtype=float) * GRID


@dataclass(frozen=True, slots=True)
class NoisyMoments:
    """Per-pattern noisy ``(n_m, s_m, Q_m)`` (``J = 1``) and the patterns."""

    pats: list[Pattern]
    sums: list[list[tuple[float, FloatArray, FloatArray]]]


def noisy_pattern_moments(
    X: FloatArray, eps_theta: float, rng: np.random.Generator
) -> NoisyMoments:
    """The DP release of §7.3 (module docstring); ``X`` rows have norm ≤ 1."""
    pats = patterns(X)
    sums = []
    for pat in pats:
        xo = X[np.ix_(pat.rows, pat.obs)]
        o = pat.obs.size
        iu = np.triu_indices(o)
        # sensitivities of the moments *after* rounding to the grid (module docstring)
        sens_s = 2.0 * np.sqrt(o) + o * GRID
        sens_q = (o + 1.0) + iu[0].size * GRID
        s = on_grid(xo.sum(axis=0)) + discrete_laplace(
            sens_s / (eps_theta / 2.0), (o,), rng
        )
        Q = on_grid(xo.T @ xo)
        noise = np.zeros((o, o))
        noise[iu] = discrete_laplace(sens_q / (eps_theta / 2.0), (iu[0].size,), rng)
        Q = Q + noise + np.triu(noise, 1).T
        sums.append([(float(pat.rows.size), s, Q)])
    return NoisyMoments(pats, sums)


def em_from_moments(
    moments: NoisyMoments, p: int, *, n: int, max_iter: int = 500, tol: float = 1e-10
) -> Theta:
    """EM for one Gaussian from the (noisy) pattern moments: post-processing (§7.3).

    Each ``Σ`` is projected to eigenvalues ``≥ 1e-6`` (noise can make it indefinite).
    """
    theta = Theta(np.ones(1), np.zeros((1, p)), np.eye(p)[None])
    for _ in range(max_iter):
        new = m_step(moments.sums, theta, moments.pats, n=n, covariance="full")
        vals, vecs = np.linalg.eigh(new.covariances[0])
        cov = (vecs * np.maximum(vals, 1e-6)) @ vecs.T
        new = Theta(
            new.weights, new.means, (0.5 * (cov + cov.T) + RHO * np.eye(p))[None]
        )
        change = float(np.max(np.abs(new.means - theta.means))) + float(
            np.max(np.abs(new.covariances - theta.covariances))
        )
        theta = new
        if change < tol:
            break
    return theta


def imputation_scale(
    theta: Theta,
    pat: Pattern,
    radii_obs: float,
    radius_mis: FloatArray,
    block_of: NDArray[np.intp],
) -> FloatArray:
    """Public per-block factors that keep ``ê = a + B x^O`` inside the radius (docstring).

    ``block_of[c]`` is the party of missing coordinate ``c``; returns one factor per
    missing coordinate (equal within a block).
    """
    S, mu = theta.covariances[0], theta.means[0]
    o, m = pat.obs, pat.mis
    B = S[np.ix_(m, o)] @ np.linalg.inv(S[np.ix_(o, o)])
    a = mu[m] - B @ mu[o]
    out = np.ones(m.size)
    for k in np.unique(block_of):
        sel = block_of == k
        bound = float(np.linalg.norm(a[sel]) + np.linalg.norm(B[sel], 2) * radii_obs)
        out[sel] = min(1.0, float(radius_mis[sel][0]) / max(bound, 1e-300))
    return out


def objective_weights(
    targets: FloatArray, lam: float
) -> tuple[FloatArray, float, float]:
    """``(a, η, λ_eff)`` of the heterogeneous objective perturbation (§7.2)."""
    a, eta, lam_eff = ridge_remedy(targets, lam)
    return a, eta, lam_eff


def objective_noise(
    targets: FloatArray, lam: float, d: int, rng: np.random.Generator
) -> tuple[FloatArray, float, float, FloatArray]:
    """``(a, η, λ_eff, c)`` of the heterogeneous objective perturbation (§7.2) with
    ``c = (2/η) b`` rounded to the fixed-point grid (one drawer: the plain backend;
    in MPC the parties draw it jointly, :mod:`._joint_noise`)."""
    a, eta, lam_eff = objective_weights(targets, lam)
    b = sample_gamma_direction_noise(d, rng=rng)
    c = np.round((2.0 / eta) * b / GRID) * GRID
    return a, eta, lam_eff, c


def expand_report(report: PrivacyReport, active: NDArray[np.bool_]) -> PrivacyReport:
    """``report`` over all records: zeros for the records left out (``ε_i = 0``)."""
    if active.all():
        return report

    def full(values: tuple[float, ...]) -> tuple[float, ...]:
        out = np.zeros(active.size)
        out[active] = values
        return tuple(float(v) for v in out)

    return replace(
        report,
        sample_epsilon=full(report.sample_epsilon),
        sample_epsilon_total=full(report.sample_epsilon_total),
        stages=tuple(
            StageSpend(st.label, full(st.sample_epsilon)) for st in report.stages
        ),
    )


def mpc_dp_report(
    *,
    eps_theta: FloatArray,
    a: FloatArray,
    eta: float,
    lam: float,
    labelled: NDArray[np.bool_],
    grad_norm: float,
    gtol: float,
    guarantee: Guarantee = "mpc_plus_dp",
) -> PrivacyReport:
    """The :class:`PrivacyReport` with the stages ``ε_θ`` and ``ε_β`` (noise and
    curvature terms) per record (§7.3, V10), labelled ``guarantee``: ``mpc_plus_dp``
    when the fit ran in MPC, a central label when it ran in the clear."""
    n = labelled.size
    noise = np.zeros(n)
    slack = np.zeros(n)
    noise[labelled] = a * eta
    slack[labelled] = curvature_slack(a, lam)
    beta = noise + slack
    total = eps_theta + beta
    worst = int(np.argmax(total))
    where = "computed in MPC" if guarantee == "mpc_plus_dp" else "computed in the clear"
    return PrivacyReport(
        mechanism="secure vertical logistic: DP imputation moments + heterogeneous "
        f"objective perturbation {where}",
        guarantee=guarantee,
        neighbouring="replace_one",
        sample_epsilon=tuple(float(e) for e in eps_theta + noise),
        sample_epsilon_total=tuple(float(e) for e in total),
        epsilon_max=float(total[worst]),
        grad_norm=certified_grad_bound(grad_norm, gtol),
        gtol=float(gtol),
        spends=(
            PrivacySpend(
                "epsilon_theta: noisy pattern moments (worst record)",
                float(eps_theta[worst]),
            ),
            PrivacySpend(
                "epsilon_beta: objective perturbation (worst record)",
                float(beta[worst]),
            ),
        ),
        stages=(
            StageSpend(
                "epsilon_theta: imputation model (noisy pattern moments)",
                tuple(float(e) for e in eps_theta),
            ),
            StageSpend(
                "epsilon_beta: noise term a_i*eta", tuple(float(e) for e in noise)
            ),
            StageSpend(
                "epsilon_beta: curvature term 2 ln(1 + a_i/(4 lam))",
                tuple(float(e) for e in slack),
            ),
        ),
        lam_effective=float(lam),
    )
