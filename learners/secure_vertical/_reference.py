"""The paper's protocols with simulated parties and message logs (spec §3.1–§3.5, §4.1).

**Not private when iterated** (§4.2, §6 rows 3–5): this module exists to reproduce the
paper and to demonstrate the attacks (:func:`recover_block`, :func:`z_recovery`).

- Fixed point (§3.1): ``x ↦ round(x·2^f) mod 2^64`` (two's complement), ``f = 32``;
  arithmetic in ``uint64`` wraps exactly mod ``Q = 2^64`` (values need ``|Σ x| < 2^31``).
- Ring sum (§3.2, ``K ≥ 3``), share sum (§3.3), Z-matrix product (§3.4) with the
  "fair" ``g* = round(b n/(a+b))``.
- :func:`reference_newton`: the §4.1 flow (``η`` by a row-wise secure sum and revealed;
  ``X_kᵀ y`` once and ``I_kl`` every iteration by Z-matrix products; all blocks of
  ``I`` and ``∇`` and ``β`` public).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import solve_triangular

from learners.secure_vertical._backend import cholesky_solve
from learners.secure_vertical._ledger import Ledger
from learners.secure_vertical._newton import NewtonTrace

FloatArray = NDArray[np.float64]
U64 = NDArray[np.uint64]
FRAC_BITS = 32


@dataclass(frozen=True, slots=True)
class Message:
    """One simulated message."""

    sender: str
    receiver: str
    label: str
    payload: NDArray[Any]


@dataclass(slots=True)
class MessageLog:
    """Every message the simulated parties exchanged."""

    messages: list[Message] = field(default_factory=list)

    def send(
        self, sender: str, receiver: str, label: str, payload: NDArray[Any]
    ) -> None:
        """Log a copy of ``payload``."""
        self.messages.append(
            Message(sender, receiver, label, np.array(payload, copy=True))
        )

    def received_by(self, party: str) -> list[Message]:
        """Messages ``party`` received."""
        return [m for m in self.messages if m.receiver == party]


def encode(x: Any, frac_bits: int = FRAC_BITS) -> U64:
    """Fixed-point encoding into ``Z_{2^64}`` (two's complement)."""
    return (
        np.round(np.asarray(x, dtype=float) * 2.0**frac_bits)
        .astype(np.int64)
        .view(np.uint64)
    )


def decode(v: U64, frac_bits: int = FRAC_BITS) -> FloatArray:
    """Inverse of :func:`encode`."""
    return np.asarray(v, dtype=np.uint64).view(np.int64).astype(float) / 2.0**frac_bits


def _uniform(rng: np.random.Generator, shape: tuple[int, ...]) -> U64:
    return rng.integers(
        0, np.iinfo(np.uint64).max, size=shape, dtype=np.uint64, endpoint=True
    )


def _party(k: int) -> str:
    return f"A{k + 1}"


def ring_sum(
    values: list[U64], rng: np.random.Generator, log: MessageLog | None = None
) -> U64:
    """Secure summation around a ring (§3.2); every message is uniform on ``Z_Q``.

    Raises
    ------
    ValueError
        ``K < 3`` (with two parties the sum reveals the other input).
    """
    K = len(values)
    if K < 3:
        raise ValueError(f"K: ring secure summation needs K >= 3 parties, got {K}")
    with np.errstate(over="ignore"):
        R = _uniform(rng, np.shape(values[0]))
        running = R + values[0]
        for k in range(1, K):
            if log is not None:
                log.send(_party(k - 1), _party(k), "ring running total", running)
            running = running + values[k]
        if log is not None:
            log.send(_party(K - 1), _party(0), "ring running total", running)
        total: U64 = running - R
    if log is not None:
        for k in range(1, K):
            log.send(_party(0), _party(k), "ring sum result", total)
    return total


def share_sum(
    values: list[U64], rng: np.random.Generator, log: MessageLog | None = None
) -> U64:
    """Benaloh's secret-sharing summation (§3.3): ``K(K−1)`` share messages, then each
    party publishes the sum of the shares it holds."""
    K = len(values)
    shape = np.shape(values[0])
    held = [np.zeros(shape, dtype=np.uint64) for _ in range(K)]
    with np.errstate(over="ignore"):
        for k, v in enumerate(values):
            shares = [_uniform(rng, shape) for _ in range(K - 1)]
            last = v - sum(shares, start=np.zeros(shape, dtype=np.uint64))
            shares.append(last)
            for l, s in enumerate(shares):  # noqa: E741
                if l != k and log is not None:
                    log.send(_party(k), _party(l), "share", s)
                held[l] = held[l] + s
        for l in range(K):  # noqa: E741
            if log is not None:
                for m in range(K):
                    if m != l:
                        log.send(_party(l), _party(m), "published share sum", held[l])
        return np.asarray(
            sum(held, start=np.zeros(shape, dtype=np.uint64)), dtype=np.uint64
        )


def fair_g(n: int, a: int, b: int) -> int:
    """``g* = round(b n / (a + b))`` (§3.4), which equalises ``a g`` and ``b (n − g)``."""
    return round(b * n / (a + b))


def orthogonal_z(XA: FloatArray, g: int, rng: np.random.Generator) -> FloatArray:
    """An orthonormal ``n × g`` matrix orthogonal to the columns of ``XA`` (§3.4 step 1).

    Same distribution as the spec's "last ``n − a`` columns of a full QR times a random
    matrix, re-orthonormalised", without the ``O(n² a)`` full factorisation.
    """
    n = XA.shape[0]
    Qa, _ = np.linalg.qr(XA)
    G = rng.standard_normal((n, g))
    G -= Qa @ (Qa.T @ G)  # a random basis of a g-dim subspace of col(XA)^⊥
    G -= Qa @ (Qa.T @ G)  # second pass: orthogonality to 1e-15
    for _ in range(2):  # CholeskyQR2: orthonormal to 1e-15, cheaper than Householder
        R = np.linalg.cholesky(G.T @ G)
        G = solve_triangular(R, G.T, lower=True).T
    return np.asarray(G, dtype=float)


def z_matrix_product(
    XA: FloatArray,
    XB: FloatArray,
    rng: np.random.Generator,
    log: MessageLog | None = None,
    *,
    g: int | None = None,
    parties: tuple[str, str] = ("A", "B"),
) -> FloatArray:
    """``X_Aᵀ X_B`` by the Z-matrix construction (§3.4): ``A`` sends ``Z``, ``B`` returns
    ``W = X_B − Z(Zᵀ X_B)``, ``A`` computes ``X_Aᵀ W``.

    Raises
    ------
    ValueError
        ``n ≤ a + b`` or ``g`` outside ``[1, n − a]``.
    """
    n, a = XA.shape
    b = XB.shape[1]
    if n <= a + b:
        raise ValueError(
            f"XA, XB: the Z-matrix product needs n > a + b, got n={n}, a+b={a + b}"
        )
    g = fair_g(n, a, b) if g is None else g
    if not 1 <= g <= n - a:
        raise ValueError(f"g must be in [1, n - a] = [1, {n - a}], got {g}")
    Z = orthogonal_z(XA, g, rng)
    W = XB - Z @ (Z.T @ XB)
    if log is not None:
        log.send(parties[0], parties[1], "Z", Z)
        log.send(parties[1], parties[0], "W", W)
    return np.asarray(XA.T @ W, dtype=float)


@dataclass(slots=True)
class Transcript:
    """What every party saw in a :func:`reference_newton` run: the ``β`` used and the
    revealed ``η`` of each iteration (§6 rows 2, 3) and the message log."""

    betas: list[FloatArray] = field(default_factory=list)
    etas: list[FloatArray] = field(default_factory=list)
    log: MessageLog = field(default_factory=MessageLog)


def reference_newton(
    party_blocks: list[FloatArray],
    y: FloatArray,
    *,
    tol: float = 1e-8,
    max_iter: int = 25,
    ledger: Ledger | None = None,
    random_state: Any = None,
    transcript: Transcript | None = None,
) -> NewtonTrace:
    """The paper's secure Newton–Raphson (§4.1); ``party_blocks[0]`` holds the
    intercept column and ``y``. Ring sums for ``K ≥ 3``, the share sum for ``K = 2``."""
    rng = np.random.default_rng(random_state)
    ledger = ledger if ledger is not None else Ledger()
    tr = transcript if transcript is not None else Transcript()
    K = len(party_blocks)
    sizes = [b.shape[1] for b in party_blocks]
    edges = np.concatenate([[0], np.cumsum(sizes)])
    secure_sum = ring_sum if K >= 3 else share_sum
    c = [party_blocks[0].T @ y] + [
        z_matrix_product(
            party_blocks[k], y[:, None], rng, tr.log, parties=(_party(k), "A1")
        )[:, 0]
        for k in range(1, K)
    ]
    for k in range(1, K):
        ledger.record("X_k^T y via Z-product", (sizes[k],), to=(_party(k), "A1"), row=5)
    beta = np.zeros(int(edges[-1]))
    for it in range(1, max_iter + 1):
        parts = [
            encode(party_blocks[k] @ beta[edges[k] : edges[k + 1]]) for k in range(K)
        ]
        eta = decode(secure_sum(parts, rng, tr.log))
        tr.betas.append(beta.copy())
        tr.etas.append(eta)
        ledger.record("eta", eta.shape, iteration=it, row=3)
        pi = 1.0 / (1.0 + np.exp(-eta))
        w = pi * (1.0 - pi)
        info = np.zeros((edges[-1], edges[-1]))
        grad = np.zeros(edges[-1])
        for k in range(K):
            sk = slice(edges[k], edges[k + 1])
            Xk = party_blocks[k]
            info[sk, sk] = (Xk.T * w) @ Xk
            grad[sk] = c[k] - Xk.T @ pi
            for l in range(k + 1, K):  # noqa: E741
                sl = slice(edges[l], edges[l + 1])
                block = z_matrix_product(Xk * w[:, None], party_blocks[l], rng, tr.log,
                                         parties=(_party(k), _party(l)))  # fmt: skip
                info[sk, sl] = block
                info[sl, sk] = block.T
                ledger.record(
                    "W (projections of X_l)",
                    party_blocks[l].shape,
                    to=(_party(k),),
                    iteration=it,
                    row=4,
                )
                ledger.record(
                    "Z (constraints on X_k)",
                    (Xk.shape[0], fair_g(Xk.shape[0], sizes[k], sizes[l])),
                    to=(_party(l),),
                    iteration=it,
                    row=4,
                )
        ledger.record("I", info.shape, iteration=it, row=6)
        ledger.record("g", grad.shape, iteration=it, row=6)
        delta = cholesky_solve(info, grad)
        beta = beta + delta
        ledger.record("beta_t", beta.shape, iteration=it, row=2)
        if np.max(np.abs(delta)) < tol:
            return NewtonTrace(beta, it, True)
    return NewtonTrace(beta, max_iter, False)


def recover_block(
    transcript: Transcript, own_block: FloatArray, own: slice, other: slice
) -> FloatArray:
    """The §4.2 attack by the label holder for ``K = 2``: with ``η^{(t)}`` revealed and
    ``β^{(t)}`` public, ``η^{(t)} − X_1β_1^{(t)} = X_2 β_2^{(t)}``; stacking the
    iterations gives ``X_2`` by least squares once the ``β_2^{(t)}`` span ``R^{p_2}``.

    Raises
    ------
    ValueError
        The transcript holds too few iterations (the ``β_2`` do not span).
    """
    R = np.column_stack(
        [
            eta - own_block @ b[own]
            for b, eta in zip(transcript.betas, transcript.etas, strict=True)
        ]
    )
    B = np.column_stack([b[other] for b in transcript.betas])
    if np.linalg.matrix_rank(B) < B.shape[0]:
        raise ValueError("transcript: the revealed β_2 do not span R^{p_2} yet")
    sol = np.linalg.lstsq(B.T, R.T, rcond=None)[0]
    return np.asarray(sol.T, dtype=float)


def z_recovery(
    XA: FloatArray, XB: FloatArray, uses: int, rng: np.random.Generator
) -> tuple[int, FloatArray]:
    """The repeated-use leak of §3.4: ``A`` stacks the projections ``W_t`` of ``uses``
    products with fresh ``Z_t`` on the same ``X_B``; returns the rank of the stacked
    projectors and ``A``'s least-squares reconstruction of ``X_B``."""
    n, a = XA.shape
    g = fair_g(n, a, XB.shape[1])
    P, W = [], []
    for _ in range(uses):
        Z = orthogonal_z(XA, g, rng)
        proj = np.eye(n) - Z @ Z.T
        P.append(proj)
        W.append(proj @ XB)
    A = np.vstack(P)
    rank = int(np.linalg.matrix_rank(A, tol=1e-8))
    est = np.linalg.lstsq(A, np.vstack(W), rcond=None)[0]
    return rank, np.asarray(est, dtype=float)


def leak_uses(a: int, b: int) -> int:
    """``⌈(a+b)/a⌉``: uses after which ``X_B`` is determined at ``g = g*`` (§3.4)."""
    return math.ceil((a + b) / a)
