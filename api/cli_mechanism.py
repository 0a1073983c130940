"""``privmarket audit``: run the mechanism's incentive self-audit and print the report.

Register with ``app.command("audit")(audit)`` in :mod:`api.cli` (or ``add_typer(app)``).
Data: the Wisconsin breast-cancer set shipped with scikit-learn (scaled with fixed
public per-feature bounds, never with statistics of the data), or a CSV of
``x_1..x_d, y, cost`` rows already scaled to ``‖x‖₂ ≤ 1``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

app = typer.Typer(help="Mechanism self-audits.", no_args_is_help=True)

# Public per-feature upper bounds for the Wisconsin features (the data set's published
# ranges, rounded up): a schema constant, not computed from the sellers' records.
WISCONSIN_BOUNDS = (
    29.0, 40.0, 190.0, 2600.0, 0.17, 0.35, 0.43, 0.21, 0.31, 0.1,
    2.9, 4.9, 22.0, 550.0, 0.032, 0.14, 0.4, 0.053, 0.079, 0.03,
    37.0, 50.0, 260.0, 4300.0, 0.23, 1.1, 1.3, 0.3, 0.67, 0.21,
)  # fmt: skip


def wisconsin(m: int, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``m`` Wisconsin records: ``x/bounds`` (clipped to [0, 1]) plus an intercept
    column, rows divided by ``sqrt(d + 1)`` so ``‖x‖₂ ≤ 1``; labels ``±1``."""
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    X = np.clip(np.asarray(data.data, float) / np.asarray(WISCONSIN_BOUNDS), 0.0, 1.0)
    X = np.hstack([X, np.ones((X.shape[0], 1))]) / np.sqrt(X.shape[1] + 1)
    y = np.where(data.target == 1, 1.0, -1.0)
    idx = rng.permutation(X.shape[0])[: min(m, X.shape[0])]
    return X[idx], y[idx]


def load_csv(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``x_1..x_d, y, cost`` (header line allowed)."""
    raw = np.genfromtxt(path, delimiter=",", dtype=float)
    if raw.ndim == 2 and np.isnan(raw[0]).all():
        raw = raw[1:]
    if raw.ndim != 2 or raw.shape[1] < 3:
        raise typer.BadParameter("need columns x_1..x_d, y, cost", param_hint="csv")
    return raw[:, :-2], raw[:, -2], raw[:, -1]


@app.command("audit")
def audit(
    csv: Annotated[
        Path | None, typer.Option(help="CSV of x_1..x_d, y, cost (scaled).")
    ] = None,
    m: Annotated[int, typer.Option(min=2, help="Wisconsin sellers to sample.")] = 80,
    cost_low: Annotated[float, typer.Option(help="Uniform cost prior: low.")] = 1e-4,
    cost_high: Annotated[float, typer.Option(help="Uniform cost prior: high.")] = 5e-4,
    gamma: Annotated[float, typer.Option(help="Weight of the payment term.")] = 1.0,
    lam: Annotated[float, typer.Option(help="Ridge weight λ.")] = 1e-2,
    mu: Annotated[float, typer.Option(help="Weight spread μ.")] = 10.0,
    sigma: Annotated[float, typer.Option(help="Noise-cost weight σ.")] = 100.0,
    k: Annotated[float, typer.Option(help="Weight cap factor k.")] = 4.0,
    budget: Annotated[float | None, typer.Option(help="Buyer's budget B.")] = None,
    n_sellers: Annotated[int, typer.Option(min=0, help="Sellers to audit.")] = 3,
    workers: Annotated[
        int, typer.Option(min=0, help="Processes (0: one per CPU).")
    ] = 0,
    seed: Annotated[int, typer.Option(help="Seed for sampling data and costs.")] = 0,
    mono_points: Annotated[
        int,
        typer.Option(min=0, help="Monotonicity audit: reports per seller (0: off)."),
    ] = 100,
    certify: Annotated[
        str, typer.Option(help="'report' (label uncertified) or 'raise_lambda'.")
    ] = "report",
    out: Annotated[Path | None, typer.Option(help="Also write the JSON here.")] = None,
) -> None:
    """Audit IC regret, IR, budget and monotonicity; print one JSON report.

    ``monotonicity``: the first ``n_sellers`` sellers' ``ε_i(s)`` swept over
    ``mono_points`` reports with cold re-solves (:func:`mechanisms.audit_monotonicity`).
    """
    from concurrent.futures import ProcessPoolExecutor

    from tqdm import tqdm

    from mechanisms import (
        MechanismConfig,
        UniformPrior,
        audit_incentives,
        audit_monotonicity,
    )
    from mechanisms.executors import default_workers

    rng = np.random.default_rng(seed)
    prior = UniformPrior(cost_low, cost_high)
    if csv is None:
        X, y = wisconsin(m, rng=rng)
        costs = prior.sample(X.shape[0], rng=rng)
    else:
        X, y, costs = load_csv(csv)
    try:
        cfg = MechanismConfig(
            gamma=gamma,
            lam=lam,
            mu=mu,
            sigma=sigma,
            k=k,
            certify=certify,  # type: ignore[arg-type]
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    bar = tqdm(total=X.shape[0], desc="payments", unit="seller")

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    n_proc = workers or default_workers()
    try:
        with ProcessPoolExecutor(n_proc) as pool:
            report = audit_incentives(
                X, y, costs, prior, cfg,
                budget=budget, n_sellers=n_sellers, executor=pool,
                progress=progress, random_state=seed,
            )  # fmt: skip
            mono = None
            if mono_points >= 2 and n_sellers > 0:
                mono = audit_monotonicity(
                    X, y, costs, prior, cfg,
                    sellers=range(min(n_sellers, X.shape[0])),
                    n_points=mono_points, executor=pool,
                )  # fmt: skip
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    finally:
        bar.close()
    result: dict[str, Any] = report.to_dict()
    result["ic_ok"] = report.ic_ok()
    result["monotonicity"] = None if mono is None else mono.to_dict()
    text = json.dumps(result, indent=2)
    typer.echo(text)
    if out is not None:
        out.write_text(text + "\n")
