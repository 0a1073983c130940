"""Input checks shared by the learners (bad input → ``ValueError`` naming it).

The privacy proofs of spec ``mechanism.md`` §3 need ``‖x_i‖₂ ≤ 1`` and labels in
``{−1, +1}``. These checks refuse violating input; they never clip or rescale with
statistics of the (private) data (spec §1).
"""

from __future__ import annotations

import math
from numbers import Integral
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils._param_validation import Interval

# Rounding slack on the unit-ball constraint: rows scaled to norm 1 may land at 1 + ulp.
ROW_NORM_TOL = 1e-12
SIMPLEX_TOL = 1e-9
RANDOM_STATE_CONSTRAINT: list[Any] = [
    Interval(Integral, 0, None, closed="left"),
    np.random.Generator,
    None,
]
"""scikit-learn parameter constraint of every learner's ``random_state`` (a seed, a
Generator, or None for OS entropy)."""


def check_unit_rows(X: NDArray[np.float64], *, name: str = "X") -> None:
    """Require finite entries and ``‖x_i‖₂ ≤ 1 + 1e-12`` for every row ``i``.

    The norm is computed without overflow (rows are scaled by their largest entry
    first), so a row of entries near ``1e300`` is refused, not passed as ``inf``/NaN.

    Raises
    ------
    ValueError
        Naming ``name`` only: the message says *that* some row is out of range,
        never which row or what it holds (the records are private).
    """
    if not np.isfinite(X).all():
        raise ValueError(f"{name} must be finite (some entry is NaN or inf)")
    peak = np.abs(X).max(axis=1) if X.size else np.zeros(X.shape[0])
    safe = np.where(peak > 0, peak, 1.0)
    norms = np.linalg.norm(X / safe[:, None], axis=1) * safe
    if not (norms <= 1.0 + ROW_NORM_TOL).all():
        raise ValueError(
            f"{name} rows must have Euclidean norm <= 1 (the privacy guarantee needs it; "
            "scale with public bounds first); some row does not"
        )


def check_sign_labels(y: NDArray[Any], *, name: str = "y") -> NDArray[np.float64]:
    """Return ``y`` as floats after checking every label is ``−1`` or ``+1``.

    Raises
    ------
    ValueError
        Naming ``name`` (``{0, 1}`` labels are refused too); never a row or a value.
    """
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    try:
        ok = (arr == 1) | (arr == -1)
    except (TypeError, ValueError):  # pragma: no cover - exotic dtypes
        ok = np.zeros(arr.shape, dtype=bool)
    ok = np.asarray(ok, dtype=bool)
    if not ok.all():
        raise ValueError(f"{name} labels must be -1 or +1; some label is not")
    return arr.astype(float)


def check_nonnegative_vector(
    values: ArrayLike, *, name: str, n_samples: int
) -> NDArray[np.float64]:
    """Return a float copy of a length-``n_samples`` vector of finite ``≥ 0`` entries."""
    arr = np.array(values, dtype=float, copy=True)
    if arr.shape != (n_samples,):
        raise ValueError(f"{name} must have shape ({n_samples},), got {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{name} must be finite and >= 0; {name}[{i}] = {arr[i]!r}")
    return arr


def resolve_privacy_weights(
    *,
    sample_epsilon: ArrayLike | None,
    weights: ArrayLike | None,
    eta: float | None,
    n_samples: int,
) -> tuple[NDArray[np.float64], float]:
    """Turn the caller's privacy request into ``(a, η)`` with ``a ∈ Δ_n``, ``η > 0``.

    Exactly one of: ``sample_epsilon`` (a scalar: the same ε for every record; then ``η = Σ ε_i``, ``a = ε/η``, and the
    constructor's ``eta`` must be None) or ``weights`` on the simplex together with
    ``eta > 0``.

    Raises
    ------
    ValueError
        Both or neither given, entries negative/non-finite (index named), all
        ``sample_epsilon`` zero, ``weights`` not summing to 1 within 1e-9, ``eta``
        missing, non-finite or ``≤ 0``.
    """
    if (sample_epsilon is None) == (weights is None):
        raise ValueError(
            "give exactly one of sample_epsilon, or weights together with eta; "
            f"got {'both' if weights is not None else 'neither'}"
        )
    if sample_epsilon is not None:
        if eta is not None:
            raise ValueError(
                "eta must be None when sample_epsilon is given (then eta = sum of sample_epsilon)"
            )
        eps = check_sample_epsilon(sample_epsilon, n_samples=n_samples)
        total = float(eps.sum())
        if not (total > 0 and math.isfinite(total)):
            raise ValueError("sample_epsilon must not be all zero")
        return eps / total, total
    assert weights is not None  # exactly one of the two was given (checked above)
    a = check_nonnegative_vector(weights, name="weights", n_samples=n_samples)
    if abs(float(a.sum()) - 1.0) > SIMPLEX_TOL:
        raise ValueError(
            f"weights must sum to 1 (within {SIMPLEX_TOL}), got {a.sum()!r}"
        )
    if eta is None:
        raise ValueError("eta must be set (constructor) when weights are given")
    if not (math.isfinite(float(eta)) and float(eta) > 0):
        raise ValueError(f"eta must be finite and > 0, got {eta!r}")
    return a, float(eta)


def check_groups(
    groups: ArrayLike | None, *, n_samples: int, one_per_group: bool = False
) -> NDArray[np.int64] | None:
    """Check ``groups`` (the seller index of each record, scikit-learn's convention).

    ``one_per_group``: the learner's privacy unit is one record, so every group must
    hold exactly one record (a seller with several records would need group privacy,
    which the learner does not account for).

    Raises
    ------
    ValueError
        ``groups`` has the wrong shape, a non-integer entry, or (``one_per_group``) a
        repeated value (the first repeated index named).
    """
    if groups is None:
        return None
    g = np.asarray(groups)
    if g.shape != (n_samples,):
        raise ValueError(f"groups must have shape ({n_samples},), got {g.shape}")
    if g.size and not np.issubdtype(g.dtype, np.integer):
        raise ValueError(
            f"groups must hold integer seller indices, got dtype {g.dtype}"
        )
    out = g.astype(np.int64)
    if one_per_group:
        _, first, counts = np.unique(out, return_index=True, return_counts=True)
        if (counts > 1).any():
            i = int(np.flatnonzero(counts > 1)[0])
            raise ValueError(
                f"groups: this learner's privacy unit is one record, but group "
                f"{int(out[first[i]])} holds {int(counts[i])} records"
            )
    return out


def check_sample_epsilon(
    sample_epsilon: Any,
    *,
    n_samples: int,
    name: str = "sample_epsilon",
    per: str = "record",
    require_positive: bool = False,
) -> NDArray[np.float64]:
    """Every learner's per-record privacy budgets, as a float vector of length ``n_samples``.

    ``sample_epsilon`` is either one number per record or a single scalar, which means
    the same ``ε`` for every record (every seller, every party: ``per`` names the unit
    in messages). The budgets must be real numbers (a string, even ``"1.0"``, is
    refused rather than parsed), finite and ``≥ 0``.

    Parameters
    ----------
    require_positive : bool, default=False
        Also refuse budgets that are all zero (nothing would be fitted).

    Raises
    ------
    ValueError
        Naming ``name``: not numbers, wrong length, an entry negative or not finite
        (index named), or (``require_positive``) every entry zero.

    Examples
    --------
    >>> check_sample_epsilon(2.0, n_samples=3).tolist()
    [2.0, 2.0, 2.0]
    >>> check_sample_epsilon(["1", "2"], n_samples=2)
    Traceback (most recent call last):
    ...
    ValueError: sample_epsilon must be numbers (one ε per record, or one for all), got text
    """
    try:
        raw = np.asarray(sample_epsilon)
    except (TypeError, ValueError):  # ragged nesting
        raise ValueError(
            f"{name} must be numbers (one ε per {per}, or one for all), got a ragged "
            "nesting"
        ) from None
    if raw.dtype.kind not in "iuf":
        kind = {"U": "text", "S": "bytes", "b": "booleans", "O": "objects"}.get(
            raw.dtype.kind, f"dtype {raw.dtype}"
        )
        raise ValueError(
            f"{name} must be numbers (one ε per {per}, or one for all), got {kind}"
        )
    if raw.ndim == 0:
        raw = np.full(n_samples, float(raw))
    if raw.ndim != 1 or raw.shape[0] != n_samples:
        raise ValueError(
            f"{name} must have shape ({n_samples},) (one ε per {per}) or be a single "
            f"ε for all, got shape {raw.shape}"
        )
    eps = check_nonnegative_vector(raw, name=name, n_samples=n_samples)
    if require_positive and not (eps > 0).any():
        raise ValueError(f"{name}: every ε is 0 (nothing to fit)")
    return eps
