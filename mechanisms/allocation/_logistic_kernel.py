"""The logistic loss, its slope and curvature per record, in loops the compiler vectorises.

For ``t = −y z`` and ``e = exp(−|t|)`` (spec §4.1's logistic loss ``ℓ(z) = log(1 + e^{−yz})``):

    ℓ = max(t, 0) + log1p(e),   σ = 1/(1 + e) (t ≥ 0) or e/(1 + e),
    ℓ' = −y σ,   ℓ'' = σ(1 − σ) = e/(1 + e)²,   r = ℓ + qΨ.

The C library's ``exp`` and ``log1p`` are scalar calls: in a compiled loop over 10⁶
records they took 7 and 10 ms, where a vector unit evaluates a polynomial for eight
records at once. Here both are polynomials in plain arithmetic, which the compiler
vectorises:

- ``exp(−a)``, ``a = min(|t|, 800)``: ``a = k·ln 2 − x`` with ``k`` the nearest
  integer to ``a/ln 2`` and ``|x| ≤ ln 2 / 2`` (Cody–Waite: ``ln 2`` split in a head
  whose products with ``k`` are exact and a tail), ``e^x`` by its Taylor polynomial of
  degree 13 (remainder below ``0.35¹⁴/14! < 5·10⁻¹⁸``), times ``2^{−k}`` built from its
  exponent bits in two halves (each a normal number, so results down to the smallest
  subnormals are right, and ``a ≥ 800`` gives 0 as ``exp`` does);
- ``log1p(e)`` for ``0 ≤ e ≤ 1``: ``2 atanh(s)`` with ``s = e/(2 + e) ≤ 1/3``, the series
  ``Σ s^{2j+1}/(2j + 1)`` to ``j = 16`` (remainder below ``9^{−17}/35 < 2·10⁻¹⁸``).

Against the C library over ``|z| ≤ 800``: ``ℓ`` and ``r`` within 4 units in the last
place, ``ℓ'`` within 2; ``ℓ''`` from ``e/(1 + e)²``, without the cancellation of
``σ(1 − σ)`` (which lost up to 2,000 units where ``σ`` is near 1). A NaN input gives
NaN, ``±∞`` the limits. The records are taken in blocks of :data:`BLOCK`, so the
intermediate arrays stay in the first-level cache.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from mechanisms.allocation._weights_kernel import _jit

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
F = TypeVar("F", bound=Callable[..., Any])

try:
    from numba import njit as _njit

    def _vector_jit(fn: F) -> F:
        # ``error_model="numpy"``: a float division needs no zero test (every
        # denominator here is at least 1), which would keep the loops scalar;
        # ``contract``: multiply-adds fused, nothing reordered.
        return cast(
            F,
            _njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})(
                fn
            ),
        )

except ImportError:  # pragma: no cover - numba is a declared dependency

    def _vector_jit(fn: F) -> F:
        return fn


BLOCK = 512  # records per block: the scratch arrays fit the first-level cache
LOG2E = 1.4426950408889634  # 1/ln 2
LN2_HI = 6.93147180369123816490e-01  # ln 2 to 32 bits: k·LN2_HI is exact for |k| < 2¹¹
LN2_LO = 1.90821492927058770002e-10  # ln 2 − LN2_HI
MAX_A = 800.0  # exp(−a) is 0 in double precision beyond 745.2
EXP_TAYLOR = tuple(1.0 / math.factorial(n) for n in range(14))
ATANH_SERIES = tuple(1.0 / (2 * j + 1) for j in range(17))


@_vector_jit
def _block(
    z: FloatArray,
    y: FloatArray,
    val: FloatArray,
    d1: FloatArray,
    d2: FloatArray,
    t: FloatArray,
    e: FloatArray,
    k1: IntArray,
    k2: IntArray,
    f1: FloatArray,
    f2: FloatArray,
) -> None:
    """``(ℓ, ℓ', ℓ'')`` of one block of :func:`logistic_pass` (``f1``, ``f2``: ``k1``,
    ``k2`` viewed as floats)."""
    n = z.size
    c = EXP_TAYLOR
    w = ATANH_SERIES
    for j in range(n):
        t[j] = -y[j] * z[j]
    for j in range(n):
        a = min(abs(t[j]), MAX_A)
        k = math.floor(a * LOG2E + 0.5)
        x = (k * LN2_HI - a) + k * LN2_LO  # −a + k ln 2, |x| ≤ ln 2 / 2
        p = c[13]
        p = p * x + c[12]
        p = p * x + c[11]
        p = p * x + c[10]
        p = p * x + c[9]
        p = p * x + c[8]
        p = p * x + c[7]
        p = p * x + c[6]
        p = p * x + c[5]
        p = p * x + c[4]
        p = p * x + c[3]
        p = p * x + c[2]
        p = p * x + c[1]
        e[j] = p * x + c[0]
        ki = np.int64(k)
        half = ki >> 1
        k1[j] = (1023 - half) << 52  # the bits of 2^{−half}
        k2[j] = (1023 - (ki - half)) << 52
    for j in range(n):
        e[j] = (e[j] * f1[j]) * f2[j]
    for j in range(n):
        ej = e[j]
        s = ej / (2.0 + ej)
        s2 = s * s
        g = w[16]
        g = g * s2 + w[15]
        g = g * s2 + w[14]
        g = g * s2 + w[13]
        g = g * s2 + w[12]
        g = g * s2 + w[11]
        g = g * s2 + w[10]
        g = g * s2 + w[9]
        g = g * s2 + w[8]
        g = g * s2 + w[7]
        g = g * s2 + w[6]
        g = g * s2 + w[5]
        g = g * s2 + w[4]
        g = g * s2 + w[3]
        g = g * s2 + w[2]
        g = g * s2 + w[1]
        g = g * s2 + w[0]
        tj = t[j]
        val[j] = (tj if tj > 0.0 else 0.0) + 2.0 * s * g
    for j in range(n):
        ej = e[j]
        one_e = 1.0 + ej
        d1[j] = -y[j] * ((1.0 if t[j] >= 0.0 else ej) / one_e)
        d2[j] = ej / (one_e * one_e)


@_vector_jit
def _loss_blocks(
    z: FloatArray, y: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(ℓ, ℓ', ℓ'')`` at margins ``z``, block by block."""
    m = z.size
    val = np.empty(m)
    d1 = np.empty(m)
    d2 = np.empty(m)
    t = np.empty(BLOCK)
    e = np.empty(BLOCK)
    k1 = np.empty(BLOCK, np.int64)
    k2 = np.empty(BLOCK, np.int64)
    f1 = k1.view(np.float64)
    f2 = k2.view(np.float64)
    for lo in range(0, m, BLOCK):
        hi = min(lo + BLOCK, m)
        _block(
            z[lo:hi], y[lo:hi], val[lo:hi], d1[lo:hi], d2[lo:hi], t, e, k1, k2, f1,
            f2,
        )  # fmt: skip
    return val, d1, d2


@_jit
def logistic_pass(
    z: FloatArray, y: FloatArray, q: float, psi: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """``(ℓ, ℓ', ℓ'', r = ℓ + qΨ)`` of the logistic loss at margins ``z`` (module
    docstring). ``r`` is rounded as NumPy's ``ℓ + q * Ψ`` (compiled without fused
    multiply-adds), so a caller that keeps ``ℓ`` and forms ``r`` for other virtual
    costs gets the same values."""
    val, d1, d2 = _loss_blocks(z, y)
    r = np.empty(val.size)
    for i in range(val.size):
        r[i] = val[i] + q * psi[i]
    return val, d1, d2, r


def logistic_value_slope(z: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(ℓ, ℓ')`` at margins ``z`` (the loss and its slope in ``z``)."""
    val, d1, _ = _loss_blocks(np.ascontiguousarray(z), np.ascontiguousarray(y))
    return val, d1
