"""Choosing ``(λ, μ, σ)`` on public validation data.

Spec ``mechanism.md`` §4.3, paper §4.2–§5: for a fixed ``γ`` the platform picks the
hyperparameters minimising

    score(λ, μ, σ) = E_b[ 1{sign(ŵᵀx) ≠ y} ]_val + γ · Σ_i t_i

where ``ŵ`` is the model released at the allocation (fresh noise ``b``, spec §3) on a
public proxy of the sellers' records drawn from the validation set
(:func:`mechanisms.tuning.public_validation_error`: no private record is released), the
misclassification is averaged over ``n_draws`` noise draws on the public validation set,
and ``Σ t_i`` is the total payment. By default the payment in the score is the
**expected payment** ``Σ_i Ψ_i u(ε_i)`` (the payment identity in expectation over costs,
paper Thm 3.2 — labelled ``expected_payment`` everywhere); a ``payment_fn`` hook plugs in
the Myerson total (spec §5) instead. The trade-off curve (``_tradeoff``) repeats the
choice per ``γ`` (paper Fig. 2a).

All grid points of one selection use the same noise seed (common random numbers), so
their validation errors differ by the allocation only, not by the luck of the draws.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mechanisms.allocation._eta_search import allocate
from mechanisms.allocation._problem import utility
from mechanisms.config import MechanismConfig
from mechanisms.payments._payments import myerson_total
from mechanisms.priors import CostPrior
from mechanisms.result import Allocation
from mechanisms.tuning._validation_error import Release, public_validation_error

FloatArray = NDArray[np.float64]
PaymentFn = Callable[..., float]
Grid = Mapping[str, Sequence[float]]
GRID_KEYS = ("lam", "mu", "sigma")


@dataclass(frozen=True, slots=True)
class SelectionRow:
    """One grid point: its allocation's validation error, payments and score."""

    lam: float
    mu: float
    sigma: float
    validation_error: float
    expected_payment: float
    total_payment: float | None
    score: float
    eps_avg: float
    status: str


@dataclass(frozen=True, eq=False)
class Selection:
    """The chosen configuration, its allocation, and the whole table.

    ``payment_kind`` says which payment entered the scores: ``"expected"``
    (``Σ Ψ_i u(ε_i)``) or ``"payment_fn"`` (the caller's, e.g. the Myerson total).
    """

    cfg: MechanismConfig
    best: SelectionRow
    allocation: Allocation
    rows: tuple[SelectionRow, ...]
    payment_kind: str


def expected_payment(alloc: Allocation) -> float:
    """``Σ_i Ψ_i u(ε_i)`` with ``ε_i = a_i η`` (paper Thm 3.2; spec §5: equal to the
    Myerson total only in expectation over costs)."""
    eps = np.asarray(alloc.epsilon, dtype=float)
    return float(np.asarray(alloc.virtual_costs) @ utility(eps, alloc.config))


def default_grid(cfg: MechanismConfig) -> dict[str, list[float]]:
    """A decade either side of ``cfg``'s ``(λ, μ, σ)``: ``{x/10, x, 10x}`` (27 points;
    a zero ``μ`` or ``σ`` stays a single zero)."""
    return {
        key: sorted({float(getattr(cfg, key)) * f for f in (0.1, 1.0, 10.0)})
        for key in GRID_KEYS
    }


def grid_points(cfg: MechanismConfig, grid: Grid | None) -> list[MechanismConfig]:
    """Configurations of the grid, ``λ`` outermost, then ``μ``, then ``σ``.

    A key missing from ``grid`` keeps ``cfg``'s value.

    Raises
    ------
    ValueError
        ``grid`` has an unknown key or an empty list, or a value ``MechanismConfig``
        rejects (the message names it).
    """
    g = default_grid(cfg) if grid is None else dict(grid)
    unknown = set(g) - set(GRID_KEYS)
    if unknown:
        raise ValueError(f"grid: unknown keys {sorted(unknown)}; use {GRID_KEYS}")
    axes = []
    for key in GRID_KEYS:
        values = list(g.get(key, [getattr(cfg, key)]))
        if not values:
            raise ValueError(f"grid[{key!r}] must not be empty")
        axes.append(values)
    return [
        cfg.with_(lam=float(lam), mu=float(mu), sigma=float(sigma))
        for lam, mu, sigma in itertools.product(*axes)
    ]


def noise_seed(random_state: int | np.random.Generator | None) -> int:
    """One seed for every grid point: the int itself, else drawn once."""
    if isinstance(random_state, int | np.integer) and not isinstance(
        random_state, bool
    ):
        return int(random_state)
    return int(np.random.default_rng(random_state).integers(2**63 - 1))


def _evaluate(
    data: tuple[FloatArray, FloatArray, FloatArray, CostPrior],
    cfg: MechanismConfig,
    *,
    val: tuple[FloatArray, FloatArray],
    eps_max: FloatArray | None,
    n_draws: int,
    seed: int,
    payment_fn: PaymentFn | None,
    release: Release | None,
    n_rows: int | None = None,
) -> tuple[SelectionRow, Allocation]:
    X, y, costs, prior = data
    alloc = allocate(X, y, costs, prior, cfg, eps_max)
    if not alloc.success:
        nan = math.nan
        row = SelectionRow(
            cfg.lam, cfg.mu, cfg.sigma, nan, nan, None, math.inf, nan, str(alloc.status)
        )
        return row, alloc
    err = public_validation_error(
        alloc,
        val[0],
        val[1],
        n_draws=n_draws,
        random_state=seed,
        release=release,
        n_rows=n_rows,
    )
    exp_pay = expected_payment(alloc)
    total = (
        None
        if payment_fn is None
        else float(payment_fn(X, y, costs, prior, cfg, alloc))
    )
    pay = exp_pay if total is None else total
    row = SelectionRow(
        lam=cfg.lam,
        mu=cfg.mu,
        sigma=cfg.sigma,
        validation_error=err,
        expected_payment=exp_pay,
        total_payment=total,
        score=err + cfg.gamma * pay,
        eps_avg=alloc.eps_avg,
        status=str(alloc.status),
    )
    return row, alloc


def select_hyperparameters(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: CostPrior,
    cfg: MechanismConfig,
    *,
    X_val: ArrayLike,
    y_val: ArrayLike,
    grid: Grid | None = None,
    n_draws: int = 15,
    random_state: int | np.random.Generator | None = None,
    payment_fn: PaymentFn | None = None,
    eps_max: ArrayLike | None = None,
    progress: Callable[[int, int], None] | None = None,
    release: Release | None = None,
    n_rows: int | None = None,
) -> Selection:
    """Choose ``(λ, μ, σ)`` at ``cfg.gamma`` by the validation score (spec §4.3).

    Parameters
    ----------
    X, y, costs, prior, cfg, eps_max
        As for :func:`mechanisms.allocate`; ``cfg`` supplies ``γ`` and every setting
        the grid does not vary.
    X_val, y_val : array-like
        The **public** validation set.
    grid : mapping {"lam", "mu", "sigma"} -> list of float, optional
        Values to try (full product); default :func:`default_grid` around ``cfg``.
    n_draws : int
        Noise draws averaged in the validation error (paper §5: 15).
    random_state : int, Generator or None
        Seed of the release noise, shared by all grid points (OS entropy if ``None``).
    payment_fn : callable, optional
        ``payment_fn(X, y, costs, prior, cfg, alloc) -> float``: the total payment to use
        in the score (e.g. the Myerson total); default: the expected payment.
    progress : callable, optional
        ``progress(done, total)`` after each grid point.
    release : callable, optional
        ``release(X, y, allocation, rng) -> model with predict``: the private release,
        fitted on a public proxy drawn from the validation set and scored on it
        (:func:`mechanisms.tuning.public_validation_error`; default: objective
        perturbation for the logistic loss). The sellers' ``X, y`` reach only the
        allocation, never a release: the selection spends no privacy.
    n_rows : int, optional
        Proxy rows per release (default one per seller).

    Returns
    -------
    Selection
        Ties are broken by grid order (first minimum).

    Raises
    ------
    ValueError
        Bad grid or inputs, or no grid point gave a feasible allocation.
    """
    data = (
        np.asarray(X, dtype=float),
        np.asarray(y, dtype=float),
        np.asarray(costs, dtype=float),
        prior,
    )
    val = (np.asarray(X_val, dtype=float), np.asarray(y_val, dtype=float))
    caps = None if eps_max is None else np.asarray(eps_max, dtype=float)
    configs = grid_points(cfg, grid)
    seed = noise_seed(random_state)
    rows: list[SelectionRow] = []
    best: tuple[SelectionRow, Allocation, MechanismConfig] | None = None
    for i, point in enumerate(configs):
        row, alloc = _evaluate(
            data,
            point,
            val=val,
            eps_max=caps,
            n_draws=n_draws,
            seed=seed,
            payment_fn=payment_fn,
            release=release,
            n_rows=n_rows,
        )
        rows.append(row)
        if math.isfinite(row.score) and (best is None or row.score < best[0].score):
            best = (row, alloc, point)
        if progress is not None:
            progress(i + 1, len(configs))
    if best is None:
        raise ValueError(
            f"grid: no grid point gave a feasible allocation ({rows[0].status})"
        )
    kind = "expected" if payment_fn is None else "payment_fn"
    return Selection(best[2], best[0], best[1], tuple(rows), kind)


def myerson_total_fn(
    eps_max: ArrayLike | None = None, *, executor: Any = None
) -> PaymentFn:
    """A ``payment_fn`` giving the Myerson total ``Σ t_i`` of spec §5
    (:func:`mechanisms.payments.myerson_total`; seconds to minutes per allocation)."""

    def total(
        X: ArrayLike,
        y: ArrayLike,
        costs: ArrayLike,
        prior: CostPrior,
        cfg: MechanismConfig,
        alloc: Allocation,
    ) -> float:
        return myerson_total(
            X, y, costs, prior, cfg, eps_max, executor=executor, base=alloc
        )

    return total
