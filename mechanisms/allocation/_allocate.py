"""The public :func:`allocate`: an :class:`~mechanisms.Instance` or the positional arrays.

Both forms run the same solver (``_eta_search``, spec ``mechanism.md`` §4); the
positional form ``allocate(X, y, costs, prior, cfg, eps_max=None)`` is kept for the
callers written before :class:`~mechanisms.Instance` existed.
"""

from __future__ import annotations

from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike

from mechanisms.allocation import _eta_search
from mechanisms.config import MechanismConfig
from mechanisms.instance import Instance, dispatch
from mechanisms.priors import CostPrior
from mechanisms.result import Allocation

__all__ = ["allocate"]

RandomState = int | np.random.Generator | None


@overload
def allocate(
    instance: Instance,
    cfg: MechanismConfig,
    *,
    random_state: RandomState = None,
) -> Allocation: ...


@overload
def allocate(
    X: ArrayLike,
    y: ArrayLike,
    costs: ArrayLike,
    prior: CostPrior,
    cfg: MechanismConfig,
    eps_max: ArrayLike | None = None,
    *,
    random_state: RandomState = None,
) -> Allocation: ...


def allocate(*args: Any, **kwargs: Any) -> Allocation:
    """Solve the allocation of spec §4.1 for the reported costs.

    Called as ``allocate(instance, cfg, *, random_state=None)`` or, positionally, as
    ``allocate(X, y, costs, prior, cfg, eps_max=None, *, random_state=None)``.

    Parameters
    ----------
    instance : Instance
        Records, labels, reported costs, public prior and optional caps, validated.
    cfg : MechanismConfig
    random_state : int or Generator, optional
        Only for ``cfg.mode == "paper"``: the realised noise of the literal objective.
    X, y, costs, prior, eps_max
        The positional form's arrays, as the fields of :class:`~mechanisms.Instance`.

    Returns
    -------
    Allocation
        ``status`` says whether the solve is optimal, inaccurate or infeasible.

    Raises
    ------
    ValueError
        For malformed inputs (naming the parameter and the offending index).
    """
    return dispatch(_eta_search.allocate, args, kwargs)
