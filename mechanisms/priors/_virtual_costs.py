"""Myerson virtual costs of reported costs (spec ``mechanism.md`` §2).

A seller's privacy cost ``c`` is drawn from a public prior ``F`` with density ``f`` on
``[low, high]`` (``high`` may be ``inf``). Its *virtual cost* (procurement form of
Myerson's virtual value) is

    Ψ(c) = c + F(c) / f(c),

and the Myerson payments of spec §5 are incentive compatible when ``Ψ`` is
non-decreasing (the prior is *regular*). This module holds :func:`virtual_costs`
(``Ψ_i(c_i)`` per seller, under a shared prior or one prior per seller) and
:func:`ensure_regular` (iron the prior unless it passes the regularity check). The
abstract :class:`CostPrior` lives in ``_cost_prior``, the families in their own modules,
ironing in ``_ironing``; all are importable from :mod:`mechanisms.priors`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from mechanisms.priors._cost_prior import CostPrior, FloatArray
from mechanisms.priors._ironing import IronedPrior

__all__ = ["ensure_regular", "virtual_costs"]


def virtual_costs(
    costs: ArrayLike,
    priors: CostPrior | Sequence[CostPrior],
    *,
    name: str = "costs",
) -> FloatArray:
    """Per-seller virtual costs ``Ψ_i(c_i) = c_i + F_i(c_i)/f_i(c_i)`` (spec §2).

    Parameters
    ----------
    costs : array_like of shape (n_sellers,)
        Reported costs ``c_i``, each in the support of its prior.
    priors : CostPrior or sequence of CostPrior
        One prior shared by all sellers, or one per seller (``F_i``). Pass ironed priors
        (:func:`ensure_regular`) when the payments must be incentive compatible.
    name : str
        Name used in error messages.

    Returns
    -------
    ndarray of shape (n_sellers,)

    Raises
    ------
    ValueError
        Naming ``name`` and the seller index for a bad cost, or ``priors`` for a
        length mismatch or a non-prior entry.
    """
    arr = np.atleast_1d(np.array(costs, dtype=float))
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if isinstance(priors, CostPrior):
        return np.asarray(priors.virtual_cost(priors.validate_costs(arr, name=name)))
    plist = list(priors)
    if len(plist) != arr.size:
        raise ValueError(f"priors has {len(plist)} entries but {name} has {arr.size}")
    groups: dict[int, list[int]] = {}
    for i, prior in enumerate(plist):
        if not isinstance(prior, CostPrior):
            raise ValueError(
                f"priors[{i}] must be a CostPrior, got {type(prior).__name__}"
            )
        problem = prior._first_invalid(arr[i : i + 1])
        if problem is not None:
            raise ValueError(f"{name}[{i}] = {float(arr[i])!r} {problem[1]}")
        groups.setdefault(id(prior), []).append(i)
    out = np.empty(arr.size)
    for idx in groups.values():
        prior = plist[idx[0]]
        out[idx] = prior._virtual_cost(np.clip(arr[idx], prior.low, prior.high))
    return out


def ensure_regular(prior: CostPrior, *, n_points: int = 2001) -> CostPrior:
    """``prior`` itself when :meth:`CostPrior.check_regularity` passes, else its
    Myerson-ironed version ``IronedPrior(prior, n_points=n_points)``."""
    if _is_regular(prior, n_points):
        return prior
    return IronedPrior(prior, n_points=n_points)


def _is_regular(prior: CostPrior, n_points: int) -> bool:
    """:meth:`CostPrior.check_regularity` of ``prior``, remembered for hashable priors
    (frozen dataclasses: equal parameters, equal answer). The check evaluates ``Ψ`` on
    a 4,000-point grid (~0.4 ms) and each allocation asks twice (the reports' and the
    public scenarios' virtual costs); unhashable priors (arrays inside) re-check."""
    try:
        return _regular_memo(prior, n_points)
    except TypeError:
        return prior.check_regularity(n_points=n_points).regular


@functools.lru_cache(maxsize=64)
def _regular_memo(prior: CostPrior, n_points: int) -> bool:
    return prior.check_regularity(n_points=n_points).regular
