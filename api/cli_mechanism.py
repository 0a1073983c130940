"""``privmarket audit``: run the mechanism's incentive self-audit and print the report.

Register with ``app.command("audit")(audit)`` in :mod:`api.cli` (or ``add_typer(app)``).
Data: the Wisconsin breast-cancer set shipped with scikit-learn (scaled with its fixed,
published per-feature bounds, never with statistics of the data), or a CSV of
``x_1..x_d, y, cost`` rows already scaled to ``‖x‖₂ ≤ 1``. The audit runs through
``market.pipeline.audits`` (the API layer never imports the numerics).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from market.errors import InvalidInputError

app = typer.Typer(help="Mechanism self-audits.", no_args_is_help=True)


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
        str,
        typer.Option(
            help="'auto' (certified optimum over the declared range), 'report' "
            "(unrestricted local search, labelled uncertified) or 'raise_lambda'."
        ),
    ] = "auto",
    out: Annotated[Path | None, typer.Option(help="Also write the JSON here.")] = None,
) -> None:
    """Audit IC regret, IR, budget and monotonicity; print one JSON report.

    The monotonicity audit sweeps the allocated ε of each of the first N-SELLERS
    sellers over MONO-POINTS reported costs, each a cold re-solve.
    """
    from tqdm import tqdm

    from market.pipeline import audits

    rng = np.random.default_rng(seed)
    if csv is None:
        X, y = audits.wisconsin_instance(m, rng=rng)
        costs = None
    else:
        X, y, costs = load_csv(csv)
    bar = tqdm(total=X.shape[0], desc="payments", unit="seller")

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    try:
        result = audits.audit_dataset(
            X, y, costs,
            prior_spec={"family": "uniform", "params": {"low": cost_low, "high": cost_high}},
            settings={
                "gamma": gamma, "lam": lam, "mu": mu, "sigma": sigma, "k": k,
                "certify": certify,
            },
            budget=budget, n_sellers=n_sellers, workers=workers, seed=seed,
            mono_points=mono_points, progress=progress,
        )  # fmt: skip
    except (ValueError, InvalidInputError) as exc:
        raise typer.BadParameter(str(exc)) from None
    finally:
        bar.close()
    text = json.dumps(result, indent=2)
    typer.echo(text)
    if out is not None:
        out.write_text(text + "\n")
