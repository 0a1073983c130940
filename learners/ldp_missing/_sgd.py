"""Private projected SGD, one report per user (spec §4, heterogeneous steps of §9).

    b ← b₀;  for t = 1..n (user i = order[t]):
        z_i = Q_ps(v_i(b); G, ε_i)                     (client, ``_kernel``)
        b  ← Π_R(b − η_t z_i),  η_t = c_i/√t,  c_i = γ·2R/B_i    (server)

``B_i = G·C_{ε_i}·κ_d`` (spec §3); with equal ``ε_i`` this is the homogeneous step
``c = γ·D/B`` of §4 (``D = 2R``). ``order`` is a uniformly random permutation of the
participating users (a public, data-independent choice, spec §4 PROPOSAL); users with
``ε_i = 0`` are skipped (spec §9: a public decision) and spend nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from learners.ldp_missing._constants import (
    check_epsilon,
    pi_epsilon,
    sampling_radius,
)
from learners.ldp_missing._kernel import sgd_pass
from learners.ldp_missing._randomizer import draw_sampling_noise

__all__ = ["SGDResult", "private_sgd", "replay_server", "step_sizes"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SGDResult:
    """Outcome of one private SGD phase.

    Attributes
    ----------
    coef : ndarray of shape (d,)
        Last iterate ``b^(n)``.
    order : ndarray of shape (p,)
        Users in processing order (participants only).
    steps : ndarray of shape (p,)
        ``η_t`` of each round.
    radii : ndarray of shape (n,)
        ``B_i`` (``inf`` for users that did not report; 0 in identity mode).
    inputs, reports : ndarray of shape (n, d) or None
        Each user's un-randomized input and report, only with ``record=True``
        (tests; never in the service).
    """

    coef: NDArray[np.float64]
    order: NDArray[np.int64]
    steps: NDArray[np.float64]
    radii: NDArray[np.float64]
    inputs: NDArray[np.float64] | None = None
    reports: NDArray[np.float64] | None = None


def step_sizes(
    constants: NDArray[np.float64], *, positions: int
) -> NDArray[np.float64]:
    """``η_t = c_t/√t`` for rounds ``t = 1..positions`` (``constants`` in round order)."""
    return np.asarray(
        constants / np.sqrt(np.arange(1, positions + 1, dtype=float)), dtype=float
    )


def _participants(epsilon: NDArray[np.float64]) -> NDArray[np.int64]:
    bad = ~np.isfinite(epsilon) | (epsilon < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"sample_epsilon must be finite and >= 0; sample_epsilon[{i}] = {epsilon[i]!r}"
        )
    return np.flatnonzero(epsilon > 0).astype(np.int64)


def private_sgd(
    feats: NDArray[np.float64],
    targets: NDArray[np.float64],
    weights: NDArray[np.float64],
    *,
    bound: float,
    epsilon: NDArray[np.float64],
    ball: float,
    gamma: float,
    rng: np.random.Generator,
    step_scale: float | None = None,
    identity: bool = False,
    record: bool = False,
) -> SGDResult:
    """Run one phase of private projected SGD on the logistic gradient (spec §4, §9).

    Parameters
    ----------
    feats : ndarray of shape (n, d)
        ``x_i'`` of each user (finite; rows of users with ``weight 0`` are not read).
    targets : ndarray of shape (n,)
        ``t_i ∈ {0, 1}``; the user's input is ``v_i = w_i·(σ(bᵀx_i') − t_i)·x_i'``.
    weights : ndarray of shape (n,)
        ``w_i ≥ 0``; 0 makes the user submit the dummy ``v = 0`` (spec §5).
    bound : float
        ``G ≥ max ‖v_i‖`` (public).
    epsilon : ndarray of shape (n,)
        ``ε_i`` of this phase (``0``: the user is skipped).
    ball : float
        Projection radius ``R``.
    gamma : float
        Step constant ``γ`` of ``c_i = γ·2R/B_i``.
    rng : numpy.random.Generator
        Order and randomizer noise.
    step_scale : float, optional
        A common ``c`` instead of ``γ·2R/B_i`` (spec §10 V-A3 uses ``c = 1``).
    identity : bool, default=False
        Test-only exact mode: the "report" is ``v_i`` itself (no privacy; spec V-A3).
    record : bool, default=False
        Keep every input and report (tests only).
    """
    n, d = feats.shape
    order = rng.permutation(_participants(epsilon))
    p = order.size
    radii = np.full(n, np.inf)
    pis = np.full(n, 0.5)
    if identity:
        radii[order] = 0.0
    elif p:
        radii[order] = sampling_radius(bound, d, check_epsilon(epsilon[order]))
        pis[order] = pi_epsilon(epsilon[order])
    if step_scale is not None:
        constants = np.full(p, float(step_scale))
    elif identity:
        raise ValueError("identity mode needs step_scale (there is no radius B)")
    else:
        constants = gamma * 2.0 * ball / radii[order]
    steps = step_sizes(constants, positions=p)
    noise = draw_sampling_noise(p, d, rng=rng)
    shape = (p, d) if record else (0, d)
    inputs_out, reports_out = np.zeros(shape), np.zeros(shape)
    coef = sgd_pass(
        np.ascontiguousarray(feats[order]),
        targets[order].astype(float),
        weights[order].astype(float),
        steps,
        float(bound),
        radii[order],
        pis[order],
        noise.sign,
        noise.hemisphere,
        noise.direction,
        float(ball),
        bool(identity),
        np.zeros(d),
        inputs_out,
        reports_out,
    )
    inputs = reports = None
    if record:
        inputs, reports = np.zeros((n, d)), np.zeros((n, d))
        inputs[order], reports[order] = inputs_out, reports_out
    return SGDResult(
        coef=np.asarray(coef, dtype=float),
        order=order,
        steps=steps,
        radii=radii,
        inputs=inputs,
        reports=reports,
    )


def replay_server(
    reports: NDArray[np.float64],
    *,
    order: NDArray[np.int64],
    steps: NDArray[np.float64],
    ball: float,
) -> NDArray[np.float64]:
    """The server's side alone: ``b ← Π_R(b − η_t z_{order[t]})`` from ``b = 0``.

    It reads reports and public quantities only; reproducing :func:`private_sgd`'s
    ``coef`` from them shows the server never needs a record (spec §2, V-A6).
    """
    b = np.zeros(reports.shape[1])
    for t, i in enumerate(order):
        b = b - steps[t] * reports[i]
        norm = math.sqrt(float(b @ b))
        if norm > ball:
            b *= ball / norm
    return b
