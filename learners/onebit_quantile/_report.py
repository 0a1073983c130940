"""What a one-bit fit reports: the privacy ledger and the exported model (spec §5, V-B12)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm

from learners.onebit_quantile._qmle import QMLEResult
from learners.onebit_quantile._units import MarketUnits
from learners.privacy import PrivacyReport, PrivacySpend, StageSpend

FloatArray = NDArray[np.float64]
GTOL = 1e-8


def privacy_report(
    epsilon: FloatArray,
    *,
    fractions: FloatArray,
    stage_labels: list[str],
    result: QMLEResult,
    private_x: bool,
) -> PrivacyReport:
    """One stage per bit a user sends; each user's stages add up to its ``ε_i``.

    ``fractions``: the public budget split (one entry per bit, response first).
    Users with ``ε_i = 0`` sent nothing and spent nothing.
    """
    eps = np.asarray(epsilon, dtype=float)
    stages = tuple(
        StageSpend(label, tuple(float(e) for e in eps * f))
        for label, f in zip(stage_labels, fractions, strict=True)
    )
    worst = int(np.argmax(eps)) if eps.size else 0
    spends = tuple(
        PrivacySpend(f"{st.label} (worst record)", float(st.sample_epsilon[worst]))
        for st in stages
    )
    mechanism = (
        f"one-bit LDP: {len(stage_labels)} bit flips per user (private X)"
        if private_x
        else "one-bit LDP: one bit flip of the truncated response per user (public X)"
    )
    as_tuple = tuple(float(e) for e in eps)
    return PrivacyReport(
        mechanism=mechanism,
        guarantee="local",
        neighbouring="replace_one",
        sample_epsilon=as_tuple,
        sample_epsilon_total=as_tuple,
        epsilon_max=float(eps.max()) if eps.size else 0.0,
        grad_norm=float(result.grad_norm),
        gtol=GTOL,
        spends=spends,
        stages=stages,
    )


def _split(values: FloatArray, *, intercept: bool) -> dict[str, Any]:
    if values.ndim == 1:
        coef = [float(v) for v in (values[:-1] if intercept else values)]
        return {
            "coefficients": coef,
            "intercept": float(values[-1]) if intercept else None,
        }
    rows = values[:-1] if intercept else values
    return {
        "coefficients": [[float(a), float(b)] for a, b in rows],
        "intercept": [float(values[-1, 0]), float(values[-1, 1])]
        if intercept
        else None,
    }


def inference_fields(
    result: QMLEResult,
    *,
    intercept: bool,
    units: MarketUnits | None,
    level: float = 0.95,
) -> dict[str, Any]:
    """Standard errors and Wald intervals in the published units.

    With ``units`` (a market's public scaling), the raw coefficients the market
    publishes are ``M β̂ + c`` (:meth:`MarketUnits.jacobian`), so their covariance is
    ``M Cov Mᵀ`` and the intervals are ``raw ± z·SE_raw``: the same units as the
    published ``coefficients``/``intercept``. Without ``units`` they are in the units
    of the ``X``/``y`` given to ``fit``. ``None`` when no covariance is reported
    (optimum on the parameter box, or a singular information matrix).
    """
    unit_name = (
        "raw market units (the same as coefficients and intercept)"
        if units is not None
        else "units of the X and y given to fit"
    )
    meta: dict[str, Any] = {
        "units": unit_name,
        "covariance": result.covariance_kind,
        "level": level,
        "on_boundary": bool(result.on_boundary),
        "converged": bool(result.converged),
        "n_reports": int(result.n_users),
        "estimand": result.estimand,
        "notes": list(result.notes),
    }
    if result.covariance is None:
        return {"standard_errors": None, "conf_int_95": None, "inference": meta}
    params, cov = result.params, result.covariance
    if units is not None:
        M = units.jacobian(intercept=intercept)
        params = units.to_raw(params, intercept=intercept)
        cov = M @ cov @ M.T
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    z = float(norm.ppf(0.5 + level / 2.0))
    ci = np.column_stack([params - z * se, params + z * se])
    return {
        "standard_errors": _split(se, intercept=intercept),
        "conf_int_95": _split(ci, intercept=intercept),
        "inference": meta,
    }
