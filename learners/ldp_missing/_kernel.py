"""The sequential pass of private projected SGD (spec §4), compiled with numba.

Only this loop is sequential (each user's input depends on the current iterate), so it
is compiled; the randomness is drawn beforehand, vectorised
(:func:`learners.ldp_missing._randomizer.draw_sampling_noise`). Each round has a
*client* part (:func:`_client_report`: reads user ``i``'s record and the public
iterate, returns its randomized report) and a *server* part (:func:`_server_step`:
reads only the report). Without numba the same functions run as plain Python (slow,
but identical).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

__all__ = ["sgd_pass"]

F = TypeVar("F", bound=Callable[..., Any])

try:  # numba compiles the loop; without it the pass is pure Python (same results)
    from numba import njit as _njit

    def _jit(fn: F) -> F:
        return cast(F, _njit(cache=True, nogil=True)(fn))

except ImportError:  # pragma: no cover - numba is a declared dependency

    def _jit(fn: F) -> F:
        return fn


def _client_report_py(
    b: NDArray[np.float64],
    x: NDArray[np.float64],
    target: float,
    weight: float,
    bound: float,
    radius: float,
    pi: float,
    u_sign: float,
    u_hemi: float,
    u: NDArray[np.float64],
    identity: bool,
    v: NDArray[np.float64],
    z: NDArray[np.float64],
) -> int:
    """User's round: ``v = w·(σ(bᵀx) − t)·x`` (``0`` if ``w = 0``: dummy), ``z = Q_ps(v)``.

    Writes ``v`` and ``z``. An input above ``G`` is projected onto the sphere of
    radius ``G``; an input whose norm is not finite (overflow) is replaced by the
    public ``v = 0`` before randomizing, so ``z`` is always ``±B·u``. Nothing about
    the input is returned (no count of projected inputs leaves the user).
    """
    d = x.shape[0]
    if weight == 0.0:
        for j in range(d):
            v[j] = 0.0
    else:
        margin = 0.0
        for j in range(d):
            margin += b[j] * x[j]
        g = weight * (1.0 / (1.0 + math.exp(-margin)) - target)
        for j in range(d):
            v[j] = g * x[j]
    if identity:
        for j in range(d):
            z[j] = v[j]
        return 0
    sq = 0.0
    for j in range(d):
        sq += v[j] * v[j]
    nv = math.sqrt(sq)
    if not math.isfinite(nv):  # overflow or NaN: the fixed public input 0
        for j in range(d):
            v[j] = 0.0
        nv = 0.0
    if nv > 0.0:
        dot = 0.0
        for j in range(d):
            dot += u[j] * v[j]
        dot /= nv
    else:
        dot = u[0]
    s = 1.0 if u_sign < 0.5 + min(nv, bound) / (2.0 * bound) else -1.0
    side = s * dot
    t = u_hemi < pi
    flip = (t and side < 0.0) or ((not t) and side > 0.0)
    scale = -radius if flip else radius
    for j in range(d):
        z[j] = scale * u[j]
    return 0


def _server_step_py(
    b: NDArray[np.float64], z: NDArray[np.float64], step: float, ball: float
) -> None:
    """``b ← Π_R(b − η·z)`` in place (spec §4); reads only the report ``z``."""
    d = b.shape[0]
    sq = 0.0
    for j in range(d):
        b[j] -= step * z[j]
        sq += b[j] * b[j]
    norm = math.sqrt(sq)
    if norm > ball:
        shrink = ball / norm
        for j in range(d):
            b[j] *= shrink


_client_report = _jit(_client_report_py)
_server_step = _jit(_server_step_py)


@_jit
def _sgd_pass(
    feats: NDArray[np.float64],
    targets: NDArray[np.float64],
    weights: NDArray[np.float64],
    steps: NDArray[np.float64],
    bound: float,
    radii: NDArray[np.float64],
    pis: NDArray[np.float64],
    u_sign: NDArray[np.float64],
    u_hemi: NDArray[np.float64],
    u_dir: NDArray[np.float64],
    ball: float,
    identity: bool,
    b0: NDArray[np.float64],
    inputs_out: NDArray[np.float64],
    reports_out: NDArray[np.float64],
) -> NDArray[np.float64]:
    d = feats.shape[1]
    b = b0.copy()
    v = np.empty(d)
    z = np.empty(d)
    record = reports_out.shape[0] > 0
    for i in range(feats.shape[0]):
        _client_report(
            b,
            feats[i],
            targets[i],
            weights[i],
            bound,
            radii[i],
            pis[i],
            u_sign[i],
            u_hemi[i],
            u_dir[i],
            identity,
            v,
            z,
        )
        if record:
            inputs_out[i] = v
            reports_out[i] = z
        _server_step(b, z, steps[i], ball)
    return b


sgd_pass: Callable[..., NDArray[np.float64]] = _sgd_pass
"""One pass from ``b0`` over the rows **in processing order** (row ``t`` is the user
of round ``t``; the caller gathers them so that memory is read sequentially): returns
the last iterate. ``inputs_out``/``reports_out`` of
shape ``(n, d)`` receive each round's un-randomized input and report (pass ``(0, d)``
arrays not to record: the service never does)."""
