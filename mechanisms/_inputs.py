"""Validation of the mechanism's inputs, before any solving: bad input is a ``ValueError`` naming the parameter.

Shared by :class:`mechanisms.Instance` (on construction) and the solvers' positional
entry points (:func:`check_problem`). Every error is a ``ValueError`` naming the
parameter and, where there is one, the offending index.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mechanisms.config import MechanismConfig
from mechanisms.priors import CostPrior

FloatArray = NDArray[np.float64]
_NORM_TOL = 1e-9


def _first_bad(mask: NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(mask)[0])


def check_X(X: ArrayLike) -> FloatArray:
    """2-D with at least 2 rows (sellers), finite, rows with ``‖x_i‖₂ ≤ 1`` (the
    privacy proof needs it)."""
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D of shape (m, d), got shape {X.shape}")
    if X.shape[0] < 2:
        raise ValueError(f"X must have at least 2 rows (sellers), got m = {X.shape[0]}")
    bad = ~np.isfinite(X).all(axis=1)
    if bad.any():
        raise ValueError(f"X has a NaN or infinite value in row {_first_bad(bad)}")
    norms = np.linalg.norm(X, axis=1)
    bad = norms > 1.0 + _NORM_TOL
    if bad.any():
        i = _first_bad(bad)
        raise ValueError(
            f"X row {i} has norm {norms[i]:.6g} > 1: scale records with the market's "
            "public bounds and clip to the unit ball first"
        )
    return X


def check_y(y: ArrayLike, *, m: int, loss: str | None) -> FloatArray:
    """Shape ``(m,)``, finite; labels in ``{−1, +1}`` for the logistic loss (``loss``
    ``None``: not known yet, labels unchecked)."""
    y = np.asarray(y, dtype=float)
    if y.ndim != 1 or y.shape[0] != m:
        raise ValueError(f"y must have shape ({m},), got {y.shape}")
    bad = ~np.isfinite(y)
    if bad.any():
        raise ValueError(f"y has a NaN or infinite value at index {_first_bad(bad)}")
    if loss == "logistic":
        bad = (y != 1.0) & (y != -1.0)
        if bad.any():
            i = _first_bad(bad)
            raise ValueError(
                f"y must be -1 or +1 for the logistic loss; y[{i}] = {y[i]!r}"
            )
    return y


def check_prior(prior: object) -> CostPrior:
    """``prior`` itself if it is a :class:`CostPrior`."""
    if not isinstance(prior, CostPrior):
        raise ValueError(f"prior must be a CostPrior, got {type(prior).__name__}")
    return prior


def check_costs(costs: ArrayLike, *, m: int, prior: CostPrior) -> FloatArray:
    """Shape ``(m,)``, finite, ``≥ 0`` and inside the prior's support."""
    c = np.asarray(costs, dtype=float)
    if c.ndim != 1 or c.shape[0] != m:
        raise ValueError(f"costs must have shape ({m},), got {c.shape}")
    bad = ~np.isfinite(c)
    if bad.any():
        raise ValueError(
            f"costs has a NaN or infinite value at index {_first_bad(bad)}"
        )
    bad = c < 0
    if bad.any():
        i = _first_bad(bad)
        raise ValueError(f"costs must be >= 0; costs[{i}] = {c[i]!r}")
    return np.asarray(prior.validate_costs(c, name="costs"), dtype=float)


def check_eps_max(eps_max: ArrayLike | None, *, m: int) -> FloatArray:
    """Per-seller caps: shape ``(m,)``, ``≥ 0`` (``inf`` = no cap), not all zero."""
    if eps_max is None:
        return np.full(m, np.inf)
    e = np.asarray(eps_max, dtype=float)
    if e.ndim != 1 or e.shape[0] != m:
        raise ValueError(f"eps_max must have shape ({m},), got {e.shape}")
    bad = np.isnan(e) | (e < 0)
    if bad.any():
        i = _first_bad(bad)
        raise ValueError(
            f"eps_max must be >= 0 (inf for no cap); eps_max[{i}] = {e[i]!r}"
        )
    if not (e > 0).any():
        raise ValueError(
            "eps_max: every seller's cap is 0, so no privacy can be bought"
        )
    return e


def check_problem(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: CostPrior,
    cfg: MechanismConfig,
    eps_max: ArrayLike | None,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Validate everything; return float arrays ``(X, y, costs, eps_max)``."""
    if not isinstance(cfg, MechanismConfig):
        raise ValueError(f"cfg must be a MechanismConfig, got {type(cfg).__name__}")
    X = check_X(X)
    m = X.shape[0]
    y = check_y(y, m=m, loss=cfg.loss)
    c = check_costs(costs, m=m, prior=check_prior(prior))
    e = check_eps_max(eps_max, m=m)
    return X, y, c, e
