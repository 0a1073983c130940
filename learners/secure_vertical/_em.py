"""EM for a Gaussian mixture with missing blocks (spec §5.1–§5.2, §5.4, §5.6).

Model ``x_i ~ Σ_j π_j N(μ_j, Σ_j)`` on the ``p`` covariates; record ``i`` observes the
coordinates ``O`` of its pattern (the blocks of the parties holding it). E-step (§5.1):

    log r_ij = log π_j − ½|O| log 2π − ½ log det Σ_j^{OO} − ½ (x^O − μ_j^O)ᵀ (Σ_j^{OO})⁻¹ (x^O − μ_j^O),

``α_ij`` the softmax over ``j``. Per pattern ``m`` and component ``j`` the regression of
the missing part on the observed part is ``ê = a_jm + B_jm x^O`` with
``B_jm = Σ_j^{MO}(Σ_j^{OO})⁻¹``, ``a_jm = μ_j^M − B_jm μ_j^O`` and conditional covariance
``V_jm = Σ_j^{MM} − B_jm Σ_j^{OM}``. The M-step needs only the pattern sums (§5.2)
``c_jm = Σ α_ij``, ``s_jm = Σ α_ij x^O``, ``Q_jm = Σ α_ij x^O x^Oᵀ``; the completed
first and second moments follow in closed form, **in the original coordinate order**
(Correction 5 of §9). ``Σ_j`` gets ``ρ I`` (``ρ = 1e-9``) added.

The plain implementation here is what every backend's EM equals (§10 V5: "Secure EM
equals the pooled EM on the same data"); the ledger records what reveal level E2
opens (``θ`` every iteration, §6 row 8).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

from learners.secure_vertical._ledger import Ledger

FloatArray = NDArray[np.float64]
Covariance = Literal["full", "fixed_identity", "diagonal", "tied"]
COVARIANCES: tuple[str, ...] = ("full", "fixed_identity", "diagonal", "tied")
RHO = 1e-9
_LOG2PI = float(np.log(2.0 * np.pi))


@dataclass(frozen=True, slots=True)
class Theta:
    """Mixture parameters ``θ = {π_j, μ_j, Σ_j}``."""

    weights: FloatArray
    means: FloatArray
    covariances: FloatArray

    @property
    def n_components(self) -> int:
        """``J``."""
        return int(self.weights.size)


@dataclass(frozen=True, slots=True)
class Pattern:
    """Records ``rows`` sharing the observed coordinates ``obs`` (missing: ``mis``)."""

    rows: NDArray[np.intp]
    obs: NDArray[np.intp]
    mis: NDArray[np.intp]


@dataclass(slots=True)
class MixtureFit:
    """Result of :func:`fit_gaussian_mixture`."""

    theta: Theta
    loglik: list[float] = field(default_factory=list)
    n_iter: int = 0
    converged: bool = False


def patterns(X: FloatArray) -> list[Pattern]:
    """Group the rows of ``X`` (NaN = missing) by their observed coordinates (§1.2)."""
    observed = ~np.isnan(X)
    keys, inverse = np.unique(observed, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    out = []
    for m, key in enumerate(keys):
        out.append(
            Pattern(
                rows=np.flatnonzero(inverse == m),
                obs=np.flatnonzero(key),
                mis=np.flatnonzero(~key),
            )
        )
    return out


def _regression(
    theta: Theta, j: int, pat: Pattern
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, float]:
    """``(P^O, B, a, V, log det Σ^{OO})`` of component ``j`` on pattern ``pat``."""
    S, mu = theta.covariances[j], theta.means[j]
    o, m = pat.obs, pat.mis
    Soo = S[np.ix_(o, o)]
    chol = np.linalg.cholesky(Soo)
    logdet = 2.0 * float(np.sum(np.log(np.diag(chol))))
    P = np.linalg.inv(Soo)
    B = S[np.ix_(m, o)] @ P
    a = mu[m] - B @ mu[o]
    V = S[np.ix_(m, m)] - B @ S[np.ix_(o, m)]
    return P, B, a, V, logdet


def e_step(
    X: FloatArray, theta: Theta, pats: list[Pattern]
) -> tuple[FloatArray, float]:
    """Responsibilities ``α`` (``n × J``) and the observed-data log-likelihood ``L(θ)``."""
    n, J = X.shape[0], theta.n_components
    logr = np.empty((n, J))
    for pat in pats:
        xo = X[np.ix_(pat.rows, pat.obs)]
        for j in range(J):
            P, _, _, _, logdet = _regression(theta, j, pat)
            diff = xo - theta.means[j][pat.obs]
            quad = np.einsum("ia,ab,ib->i", diff, P, diff)
            logr[pat.rows, j] = (
                np.log(theta.weights[j])
                - 0.5 * pat.obs.size * _LOG2PI
                - 0.5 * logdet
                - 0.5 * quad
            )
    norm = logsumexp(logr, axis=1)
    return np.exp(logr - norm[:, None]), float(norm.sum())


def pattern_sums(
    X: FloatArray, alpha: FloatArray, pats: list[Pattern]
) -> list[list[tuple[float, FloatArray, FloatArray]]]:
    """``[(c_jm, s_jm, Q_jm) for j] for m`` (§5.2)."""
    out = []
    for pat in pats:
        xo = X[np.ix_(pat.rows, pat.obs)]
        per_j = []
        for j in range(alpha.shape[1]):
            w = alpha[pat.rows, j]
            per_j.append((float(w.sum()), w @ xo, (xo.T * w) @ xo))
        out.append(per_j)
    return out


def m_step(
    sums: list[list[tuple[float, FloatArray, FloatArray]]],
    theta: Theta,
    pats: list[Pattern],
    *,
    n: int,
    covariance: Covariance,
) -> Theta:
    """``θ_{t+1}`` from the pattern sums and the regressions of ``θ_t`` (§5.2)."""
    J, p = theta.n_components, theta.means.shape[1]
    counts = np.zeros(J)
    first = np.zeros((J, p))
    second = np.zeros((J, p, p))
    for pat, per_j in zip(pats, sums, strict=True):
        o, m = pat.obs, pat.mis
        for j, (c, s, Q) in enumerate(per_j):
            counts[j] += c
            first[j][o] += s
            second[j][np.ix_(o, o)] += Q
            if m.size == 0:
                continue
            _, B, a, V, _ = _regression(theta, j, pat)
            first[j][m] += a * c + B @ s
            mo = np.outer(a, s) + B @ Q
            second[j][np.ix_(m, o)] += mo
            second[j][np.ix_(o, m)] += mo.T
            second[j][np.ix_(m, m)] += (
                c * np.outer(a, a)
                + np.outer(a, B @ s)
                + np.outer(B @ s, a)
                + B @ Q @ B.T
                + c * V
            )
    counts = np.maximum(counts, 1e-300)
    means = first / counts[:, None]
    covs = second / counts[:, None, None] - np.einsum("ja,jb->jab", means, means)
    covs = 0.5 * (covs + np.transpose(covs, (0, 2, 1)))
    if covariance == "fixed_identity":
        covs = np.broadcast_to(np.eye(p), (J, p, p)).copy()
    elif covariance == "diagonal":
        covs = np.stack([np.diag(np.diag(c)) for c in covs])
    elif covariance == "tied":
        pooled = np.einsum("j,jab->ab", counts, covs) / counts.sum()
        covs = np.broadcast_to(pooled, (J, p, p)).copy()
    if covariance != "fixed_identity":
        covs = covs + RHO * np.eye(p)
    return Theta(counts / n, means, covs)


def fit_gaussian_mixture(
    X: FloatArray,
    init: Theta,
    *,
    covariance: Covariance = "full",
    max_iter: int = 2000,
    tol: float = 1e-10,
    ledger: Ledger | None = None,
) -> MixtureFit:
    """EM from ``init`` until ``L_t − L_{t−1} < tol·|L_t|`` or ``max_iter`` (§5.1).

    ``ledger`` receives what reveal level E2 opens: ``θ_{t+1}`` every iteration
    (§6 row 8); ``α``, the pattern sums and the imputations stay secret.

    Raises
    ------
    ValueError
        ``covariance`` unknown, or ``init`` of the wrong shape.
    """
    if covariance not in COVARIANCES:
        raise ValueError(f"covariance must be one of {COVARIANCES}, got {covariance!r}")
    n, p = X.shape
    if init.means.shape[1] != p or init.covariances.shape[1:] != (p, p):
        raise ValueError(f"init: θ must be for p = {p} covariates")
    pats = patterns(X)
    theta = init
    fit = MixtureFit(theta)
    prev = -np.inf
    for it in range(1, max_iter + 1):
        alpha, L = e_step(X, theta, pats)
        fit.loglik.append(L)
        if it > 1 and L - prev < tol * abs(L):
            fit.theta, fit.n_iter, fit.converged = theta, it - 1, True
            return fit
        prev = L
        theta = m_step(
            pattern_sums(X, alpha, pats), theta, pats, n=n, covariance=covariance
        )
        if ledger is not None:
            record_theta(ledger, theta, iteration=it)
    fit.theta, fit.n_iter = theta, max_iter
    return fit


def record_theta(ledger: Ledger, theta: Theta, *, iteration: int | None) -> None:
    """Log the opening of ``θ`` (§6 row 8)."""
    ledger.record("theta.weights", theta.weights.shape, iteration=iteration, row=8)
    ledger.record("theta.means", theta.means.shape, iteration=iteration, row=8)
    ledger.record(
        "theta.covariances", theta.covariances.shape, iteration=iteration, row=8
    )


def impute_conditional_mean(X: FloatArray, theta: Theta) -> FloatArray:
    """``x̃_i^M = Σ_j α_ij ê_ij`` (§5.6 default); observed entries are kept."""
    pats = patterns(X)
    alpha, _ = e_step(X, theta, pats)
    out = X.copy()
    for pat in pats:
        if pat.mis.size == 0:
            continue
        xo = X[np.ix_(pat.rows, pat.obs)]
        fill = np.zeros((pat.rows.size, pat.mis.size))
        for j in range(theta.n_components):
            _, B, a, _, _ = _regression(theta, j, pat)
            fill += alpha[pat.rows, j][:, None] * (a + xo @ B.T)
        out[np.ix_(pat.rows, pat.mis)] = fill
    return out


def default_init(p: int, n_components: int, *, scale: float = 1.0) -> Theta:
    """A public, data-free start: equal weights, means ``±scale·(j-centred)·1``, ``Σ = I``.

    The spec's starts (§10 V5) are of this form; components are spread along ``1``.
    """
    J = n_components
    offsets = np.linspace(-scale, scale, J) if J > 1 else np.zeros(1)
    means = offsets[:, None] * np.ones((J, p))
    return Theta(
        np.full(J, 1.0 / J), means, np.broadcast_to(np.eye(p), (J, p, p)).copy()
    )
