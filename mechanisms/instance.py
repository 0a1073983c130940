"""One instance of the mechanism: the sellers' data, reports, public prior and caps.

The allocation (spec ``mechanism.md`` §4) and the payments (§5) of one market round are
functions of the same five inputs: the records ``X`` (rows scaled with public bounds to
``‖x_i‖₂ ≤ 1``), the labels ``y``, the reported costs ``c``, the public cost prior
``F`` (§2) and the optional per-seller caps ``ε_i^max``. :class:`Instance` holds them
once, validated, so :func:`mechanisms.allocate` and :func:`mechanisms.myerson_payments`
take ``(instance, cfg)`` instead of six positional arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mechanisms._inputs import check_costs, check_eps_max, check_prior, check_X, check_y
from mechanisms.config import MechanismConfig
from mechanisms.priors import CostPrior

FloatArray = NDArray[np.float64]
R = TypeVar("R")

__all__ = ["Instance"]


def _frozen(a: FloatArray) -> FloatArray:
    out = np.array(
        a, dtype=float
    )  # a copy: later edits of the caller's array are not seen
    out.flags.writeable = False
    return out


@dataclass(frozen=True, eq=False, init=False)
class Instance:
    """The inputs of one allocation and its payments, validated on construction.

    Parameters
    ----------
    X : array-like of shape (n_sellers, n_features)
        Records, already scaled with public bounds so that ``‖x_i‖₂ ≤ 1``; at least 2
        rows.
    y : array-like of shape (n_sellers,)
        Labels or targets (finite). Whether they must be ``±1`` depends on the loss,
        so it is checked when the instance meets a :class:`MechanismConfig`.
    costs : array-like of shape (n_sellers,)
        Reported privacy costs ``c_i``, inside ``prior``'s support.
    prior : CostPrior
        Public cost prior (spec §2).
    eps_max : array-like of shape (n_sellers,), optional
        Per-seller caps ``ε_i^max`` on ``a_i η`` (``inf`` for none; not all zero).

    Attributes
    ----------
    X, y, costs, eps_max : ndarray
        Read-only float copies (``eps_max`` stays ``None`` when not given).

    Raises
    ------
    ValueError
        Naming the parameter (and the offending row or index) for malformed input.

    Examples
    --------
    >>> import numpy as np
    >>> from mechanisms import Instance, UniformPrior
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-0.5, 0.5, size=(4, 2))
    >>> inst = Instance(X, [1, -1, 1, -1], [0.2, 0.3, 0.4, 0.5], UniformPrior(0.1, 0.6))
    >>> inst.n_sellers, inst.n_features
    (4, 2)
    >>> Instance(X, [1, -1, 1, -1], [0.2, 0.3, 0.4, 0.7], UniformPrior(0.1, 0.6))
    Traceback (most recent call last):
    ...
    ValueError: costs[3] = 0.7 is above the prior's support high = 0.6
    """

    X: FloatArray
    y: FloatArray
    costs: FloatArray
    prior: CostPrior
    eps_max: FloatArray | None = None

    def __init__(
        self,
        X: ArrayLike,
        y: ArrayLike,
        costs: ArrayLike,
        prior: CostPrior,
        eps_max: ArrayLike | None = None,
    ) -> None:
        X_ = check_X(X)
        m = X_.shape[0]
        prior = check_prior(prior)
        fields: Mapping[str, object] = {
            "X": _frozen(X_),
            "y": _frozen(check_y(y, m=m, loss=None)),
            "costs": _frozen(check_costs(costs, m=m, prior=prior)),
            "prior": prior,
            "eps_max": None
            if eps_max is None
            else _frozen(check_eps_max(eps_max, m=m)),
        }
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    @property
    def n_sellers(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    def positional(
        self,
    ) -> tuple[FloatArray, FloatArray, FloatArray, CostPrior, FloatArray | None]:
        """``(X, y, costs, prior, eps_max)`` in the order of the positional forms."""
        return self.X, self.y, self.costs, self.prior, self.eps_max


def dispatch(
    positional_form: Callable[..., R], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> R:
    """Run ``positional_form`` for a facade called either way.

    ``f(instance, cfg, **options)`` becomes
    ``positional_form(X, y, costs, prior, cfg, eps_max, **options)`` (so the instance
    form takes no further positional arguments); any other call is passed on as is.
    """
    first = args[0] if args else kwargs.get("instance")
    if not isinstance(first, Instance):
        return positional_form(*args, **kwargs)
    return _unpacked(positional_form, *args, **kwargs)


def _unpacked(
    positional_form: Callable[..., R],
    /,
    instance: Instance,
    cfg: MechanismConfig,
    **options: Any,
) -> R:
    X, y, costs, prior, eps_max = instance.positional()
    return positional_form(X, y, costs, prior, cfg, eps_max, **options)
