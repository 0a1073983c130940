"""The trade-off curve: validation error vs payment over a ``γ`` grid.

Spec ``mechanism.md`` §4.3, paper §5 (Fig. 2a): for each ``γ`` the hyperparameters
``(λ, μ, σ)`` are chosen on the public validation set (``_hyperparameters``), and the
chosen allocation's validation error is reported beside its Myerson total and its
expected payment ``Σ Ψ_i u(ε_i)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mechanisms.config import MechanismConfig
from mechanisms.priors import CostPrior
from mechanisms.tuning._hyperparameters import (
    Grid,
    PaymentFn,
    grid_points,
    myerson_total_fn,
    noise_seed,
    select_hyperparameters,
)
from mechanisms.tuning._validation_error import Release, public_validation_draws

__all__ = ["TradeoffPoint", "tradeoff_curve"]


@dataclass(frozen=True, slots=True)
class TradeoffPoint:
    """One ``γ`` of the trade-off curve at its validation-chosen ``(λ, μ, σ)``.

    ``total_payment`` is the Myerson total (``None`` until a payment rule is
    available); ``expected_payment`` is ``Σ Ψ_i u(ε_i)``. Supports ``dict(point)``
    (JSON-ready keys, without ``cfg``).
    """

    gamma: float
    validation_error: float
    total_payment: float | None
    expected_payment: float
    cfg: MechanismConfig
    eps_avg: float = math.nan
    epsilon_total: NDArray[np.float64] | None = None
    """Per-seller ``ε_i^total`` of the chosen allocation (not a JSON key)."""
    validation_error_se: float | None = None
    """Standard error of ``validation_error`` over its public-data draws
    (:class:`ValidationDraws.standard_error`); ``None`` for a single draw."""
    validation_error_band: tuple[float, float] | None = None
    """``validation_error ± validation_error_se``: the band the console shades."""
    n_draws: int = 0
    """Public-data release draws averaged into ``validation_error``."""

    _KEYS = (
        "gamma",
        "validation_error",
        "total_payment",
        "expected_payment",
        "lam",
        "mu",
        "sigma",
        "eps_avg",
        "validation_error_se",
        "validation_error_band",
        "n_draws",
    )

    def keys(self) -> tuple[str, ...]:
        return self._KEYS

    def __getitem__(self, key: str) -> Any:
        if key in ("lam", "mu", "sigma"):
            return getattr(self.cfg, key)
        if key not in self._KEYS:
            raise KeyError(key)
        if key == "validation_error_band" and self.validation_error_band is not None:
            return list(self.validation_error_band)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._KEYS)

    def to_dict(self) -> dict[str, Any]:
        return dict(self)


def _offset(
    progress: Callable[[int, int], None] | None, start: int, total: int
) -> Callable[[int, int], None] | None:
    """``progress`` shifted by ``start`` grid points, out of ``total``."""
    if progress is None:
        return None
    return lambda done, _n: progress(start + done, total)


def tradeoff_curve(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: CostPrior,
    cfg: MechanismConfig,
    *,
    gammas: Sequence[float],
    X_val: ArrayLike,
    y_val: ArrayLike,
    grid: Grid | None = None,
    n_draws: int = 15,
    random_state: int | np.random.Generator | None = None,
    payment_fn: PaymentFn | None = None,
    myerson: bool = True,
    select_on_total: bool = False,
    eps_max: ArrayLike | None = None,
    progress: Callable[[int, int], None] | None = None,
    release: Release | None = None,
    n_rows: int | None = None,
) -> list[TradeoffPoint]:
    """Validation error vs payment over a ``γ`` grid (paper §5, Fig. 2a; spec §4.3).

    For each ``γ``: :func:`select_hyperparameters` at ``cfg.with_(gamma=γ)``, then the
    chosen allocation's ``total_payment`` — ``payment_fn`` if given, else the Myerson
    total when ``myerson`` (:func:`myerson_total_fn`), else ``None`` — beside its
    ``expected_payment``. Each point's ``validation_error`` is the mean over
    ``n_draws`` public-data release draws at the chosen allocation
    (:func:`~mechanisms.tuning.public_validation_draws`, the same draws that chose it),
    with ``validation_error_se = s/√D`` (``s`` the draws' sample standard deviation)
    and ``validation_error_band = mean ± se``: more draws narrow the band as ``1/√D``.
    The scores use the expected payment unless
    ``select_on_total`` (then every grid point pays for a full payment computation).
    All ``γ`` share one noise seed. ``progress(done, total)`` counts grid points;
    ``release`` is the private release, fitted on ``n_rows`` public proxy rows drawn
    from the validation set and scored on it (as for :func:`select_hyperparameters`):
    the curve reads the sellers' records only through the allocation, never through a
    release, and spends no privacy.

    Raises
    ------
    ValueError
        ``gammas`` empty or negative, or as :func:`select_hyperparameters`.
    """
    gs = [float(g) for g in gammas]
    if not gs or any(not (math.isfinite(g) and g >= 0.0) for g in gs):
        raise ValueError(
            f"gammas must be a non-empty list of finite values >= 0, got {gammas!r}"
        )
    fn = (
        payment_fn
        if payment_fn is not None
        else (myerson_total_fn(eps_max) if myerson else None)
    )
    n_points = len(grid_points(cfg, grid))
    Xa, ya, ca = (np.asarray(v, dtype=float) for v in (X, y, costs))
    seed = noise_seed(random_state)
    points: list[TradeoffPoint] = []
    for j, gamma in enumerate(gs):
        sel = select_hyperparameters(
            Xa,
            ya,
            ca,
            prior,
            cfg.with_(gamma=gamma),
            X_val=X_val,
            y_val=y_val,
            grid=grid,
            n_draws=n_draws,
            random_state=seed,
            payment_fn=fn if select_on_total else None,
            eps_max=eps_max,
            progress=_offset(progress, j * n_points, len(gs) * n_points),
            release=release,
            n_rows=n_rows,
        )
        total = sel.best.total_payment
        if total is None and fn is not None:
            total = float(fn(Xa, ya, ca, prior, sel.cfg, sel.allocation))
        # the chosen allocation's draws again, one by one (same seed: same mean)
        draws = public_validation_draws(
            sel.allocation,
            X_val,
            y_val,
            n_draws=n_draws,
            random_state=seed,
            release=release,
            n_rows=n_rows,
        )
        points.append(
            TradeoffPoint(
                gamma=gamma,
                validation_error=draws.mean,
                validation_error_se=draws.standard_error,
                validation_error_band=draws.band(),
                n_draws=n_draws,
                total_payment=total,
                expected_payment=sel.best.expected_payment,
                cfg=sel.cfg,
                eps_avg=sel.best.eps_avg,
                epsilon_total=np.asarray(sel.allocation.epsilon_total, dtype=float),
            )
        )
    return points
