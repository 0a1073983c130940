"""The backend protocol of spec §8.4 and its float64 implementation :class:`PlainBackend`.

A backend holds *secret* values (NumPy arrays in :class:`PlainBackend`, secret-shared
fixed-point arrays in the MPyC party program) and offers the few operations the secure
Newton–Raphson of §4.3 needs: input a party's block, the linear predictor, the batched
sigmoid, the weighted score and information, a secret solve (reveal level R2), and
``open``. Small secret arrays (``d`` and ``d × d``) also support ``+``, ``-`` and
multiplication by public constants through their own operators.

Every ``open`` is written to the backend's :class:`~learners.secure_vertical._ledger.Ledger`,
so a run in :class:`PlainBackend` records exactly what the same run would open in MPC
mode (spec §6, §10 V9).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit

from learners.secure_vertical._ledger import Ledger

FloatArray = NDArray[np.float64]


class Backend(Protocol):
    """Operations on secret values (spec §8.4: input, add, multiply, matmul, sigmoid,
    reciprocal, open and secure solve)."""

    ledger: Ledger

    def share(self, party: int, values: FloatArray, *, integral: bool) -> Any:
        """Secret-share ``values`` held by data provider ``party`` (its block)."""
        ...

    def hstack(self, blocks: list[Any]) -> Any:
        """``[X] = [[X_1] | … | [X_K]]`` (no opening)."""
        ...

    def predict(self, X: Any, beta: Any) -> Any:
        """``[η] = [X] β`` for a public or secret ``β`` (§4.3 step 1)."""
        ...

    def sigmoid(self, eta: Any) -> Any:
        """``[π] = σ([η])`` elementwise (§8.3)."""
        ...

    def score_information(
        self, X: Any, y: Any, pi: Any, weights: FloatArray | None
    ) -> tuple[Any, Any]:
        """``[g] = [X]ᵀ(a ⊙ ([y] − [π]))`` and ``[I] = [X]ᵀ((a ⊙ [π](1 − [π])) ⊙ [X])``."""
        ...

    def solve(self, info: Any, score: Any) -> Any:
        """``[Δ] = [I]⁻¹[g]`` inside the backend (reveal level R2)."""
        ...

    def below(self, delta: Any, tol: float, *, iteration: int) -> bool:
        """Open the single bit ``max|Δ| < tol`` (R2's only per-iteration opening)."""
        ...

    def open(
        self,
        value: Any,
        *,
        label: str,
        row: int | None = None,
        iteration: int | None = None,
        to: tuple[str, ...] = ("all",),
    ) -> FloatArray:
        """Reveal ``value`` to ``to`` and write it to the ledger."""
        ...


class PlainBackend:
    """float64 in one process; secret values are plain arrays, openings are logged.

    Parameters
    ----------
    ledger : Ledger or None
        Where openings go (a new one by default).

    Examples
    --------
    >>> import numpy as np
    >>> b = PlainBackend()
    >>> x = b.share(0, np.array([[1.0], [2.0]]), integral=False)
    >>> b.open(b.predict(x, np.array([3.0])), label="eta").tolist()
    [3.0, 6.0]
    >>> b.ledger.openings[0].shape
    (2,)
    """

    def __init__(self, ledger: Ledger | None = None) -> None:
        self.ledger = ledger if ledger is not None else Ledger()

    def share(self, party: int, values: FloatArray, *, integral: bool) -> FloatArray:
        """The block itself (nothing is hidden in one process)."""
        return np.array(values, dtype=float, copy=True)

    def hstack(self, blocks: list[Any]) -> FloatArray:
        """Concatenate the blocks' columns."""
        return np.hstack([np.asarray(b, dtype=float) for b in blocks])

    def predict(self, X: Any, beta: Any) -> FloatArray:
        """``X β``."""
        return np.asarray(X @ np.asarray(beta, dtype=float), dtype=float)

    def sigmoid(self, eta: Any) -> FloatArray:
        """``1/(1 + e^{−η})`` (exact, no clamp)."""
        return np.asarray(expit(eta), dtype=float)

    def score_information(
        self, X: Any, y: Any, pi: Any, weights: FloatArray | None
    ) -> tuple[FloatArray, FloatArray]:
        """Weighted score and information (spec §2.1, §7.2)."""
        a = np.ones(X.shape[0]) if weights is None else weights
        g = X.T @ (a * (y - pi))
        info = (X.T * (a * pi * (1.0 - pi))) @ X
        return np.asarray(g, dtype=float), np.asarray(info, dtype=float)

    def solve(self, info: Any, score: Any) -> FloatArray:
        """``I⁻¹ g`` by Cholesky."""
        return cholesky_solve(
            np.asarray(info, dtype=float), np.asarray(score, dtype=float)
        )

    def below(self, delta: Any, tol: float, *, iteration: int) -> bool:
        """``max|Δ| < tol``, logged as a one-bit opening."""
        self.ledger.record("converged", (), iteration=iteration)
        return bool(np.max(np.abs(delta)) < tol)

    def open(
        self,
        value: Any,
        *,
        label: str,
        row: int | None = None,
        iteration: int | None = None,
        to: tuple[str, ...] = ("all",),
    ) -> FloatArray:
        """Log and return ``value``."""
        arr = np.array(value, dtype=float, copy=True)
        self.ledger.record(label, arr.shape, to=to, iteration=iteration, row=row)
        return arr


def cholesky_solve(info: FloatArray, score: FloatArray) -> FloatArray:
    """Solve ``I Δ = g`` for symmetric positive definite ``I`` (spec §2.2 PROPOSAL).

    Falls back to a least-squares solve when ``I`` is numerically singular (complete
    separation or a constant column), so the caller sees a finite step.
    """
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    try:
        factor = cho_factor(info, lower=True)
        return np.asarray(cho_solve(factor, score), dtype=float)
    except LinAlgError:
        return np.asarray(np.linalg.lstsq(info, score, rcond=None)[0], dtype=float)
