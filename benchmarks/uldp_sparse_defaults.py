"""The default settings of ``uldp_sparse_linear`` against the zero estimator and the
spec's V5/V7 bands (spec ``uldp-sparse-linear-regression.md`` §15;
``learners/uldp_sparse/_defaults.py``, ``docs/uldp-sparse-defaults.md``).

Every fit uses ``ULDPSparseLinearRegression()`` with its defaults (the rule picks
``hh_alpha``, ``hh_levels``, ``n_bins``, ``bound``), next to the previous fixed defaults
(``hh_alpha = 0``, ``hh_levels = "all"``, ``n_bins = 8``, ``bound = 1``) on the same data
sets and seeds. Sizes: the paper's default (n = 400 users, m = 100 records each,
d = 256, ε = 4) with the support {0..7} (V5) and a uniformly random one (V7); the V6
trend settings; and V7 at n = 20,000.

Run: ``python benchmarks/uldp_sparse_defaults.py`` (``--quick``: fewer runs, no
RESULTS.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_note, markdown_table, write_section

from learners.uldp_sparse import ULDPSparseLinearRegression
from learners.uldp_sparse._defaults import default_settings
from learners.uldp_sparse._simulation import f1_score, independent_design

ZERO = float(np.sqrt(8) * 0.2)  # ‖θ*‖₂, the zero estimator's ℓ2 error
OLD = {"hh_alpha": 0.0, "hh_levels": "all", "n_bins": 8, "bound": 1.0}
CONFIGS: dict[str, dict[str, Any]] = {"default rule": {}, "previous defaults": OLD}


def run(
    *,
    n: int,
    m: int,
    d: int,
    epsilon: float,
    runs: int,
    random_support: bool,
    seed: int,
) -> dict[str, tuple[float, float, float]]:
    """Mean ℓ2, its standard error and mean F1 per configuration (same data, seeds)."""
    l2: dict[str, list[float]] = {k: [] for k in CONFIGS}
    f1: dict[str, list[float]] = {k: [] for k in CONFIGS}
    for r in range(runs):
        rng = np.random.default_rng(seed + r)
        des = independent_design(n, m, d, rng=rng, random_support=random_support)
        for name, params in CONFIGS.items():
            est = ULDPSparseLinearRegression(random_state=seed + r, **params)
            est.fit(des.X, des.y, sample_epsilon=epsilon, groups=des.groups)
            l2[name].append(float(np.linalg.norm(est.coef_ - des.theta)))
            f1[name].append(f1_score(est.support_, des.support))
    return {
        k: (
            float(np.mean(l2[k])),
            float(np.std(l2[k], ddof=1) / np.sqrt(runs)) if runs > 1 else float("nan"),
            float(np.mean(f1[k])),
        )
        for k in CONFIGS
    }


def rule_note(n: int, d: int, epsilon: float) -> str:
    s = default_settings(np.full(n, epsilon), d=d, k=8)
    return (
        f"α={s.hh_alpha:g}, {s.hh_levels}, N_b={s.n_bins}, B={s.bound:.3g} "
        f"(ρ={s.selection_strength:.2f}, u={s.users_per_coordinate:g})"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--trend-runs", type=int, default=20)
    ap.add_argument("--big-runs", type=int, default=8)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.runs = args.trend_runs = 4
        args.big_runs = 1
    cmd = (
        f"python benchmarks/uldp_sparse_defaults.py --runs {args.runs} "
        f"--trend-runs {args.trend_runs} --big-runs {args.big_runs}"
    )
    t0 = time.perf_counter()
    base: dict[str, Any] = {"n": 400, "m": 100, "d": 256, "epsilon": 4.0}
    settings: list[tuple[str, dict[str, Any], bool, int, str]] = [
        ("V5: paper's size, support {0..7}", base, False, args.runs,
         "F1 ∈ [0.55, 0.90], ℓ2 ∈ [0.22, 0.42], ≥ 0.12 below zero"),
        ("V7: paper's size, random support", base, True, args.runs,
         "F1 ≤ 0.2, ℓ2 ∈ 0.566 ± 0.06"),
        ("V7: n = 20,000, random support", {**base, "n": 20_000}, True, args.big_runs,
         "F1 ≥ 0.5, ℓ2 ≤ 0.40"),
    ]  # fmt: skip
    trends: list[tuple[str, dict[str, Any]]] = [("ε = 1", {"epsilon": 1.0}), ("ε = 16", {"epsilon": 16.0}),
              ("m = 50", {"m": 50}), ("m = 200", {"m": 200}), ("d = 64", {"d": 64}),
              ("d = 1024", {"d": 1024}), ("n = 800", {"n": 800})]  # fmt: skip
    settings += [
        (f"V6: {name}, support {{0..7}}", {**base, **over}, False, args.trend_runs, "")
        for name, over in trends
    ]
    rows = []
    for i, (label, size, random_support, runs, band) in enumerate(settings):
        res = run(**size, runs=runs, random_support=random_support, seed=1000 * i)
        new, old = res["default rule"], res["previous defaults"]
        rows.append([
            label, runs, rule_note(size["n"], size["d"], size["epsilon"]),
            f"{new[0]:.3f} ± {new[1]:.3f}", f"{new[2]:.3f}",
            f"{old[0]:.3f} ± {old[1]:.3f}", f"{old[2]:.3f}", f"{ZERO:.3f}", band,
        ])  # fmt: skip
        print(rows[-1], flush=True)
    table = markdown_table(
        ["setting", "runs", "default rule chose", "ℓ2 (rule)", "F1 (rule)",
         "ℓ2 (previous defaults)", "F1 (previous)", "ℓ2 zero estimator", "spec band"],
        rows,
    )  # fmt: skip
    print(table)
    if args.quick:
        return
    body = (
        f"Command: `{cmd}` ({time.perf_counter() - t0:.0f} s; {machine_note()}).\n\n"
        "Every fit is `ULDPSparseLinearRegression()` at its defaults (the rule of "
        "`learners/uldp_sparse/_defaults.py`, `docs/uldp-sparse-defaults.md`) next to "
        "the previous fixed defaults (α = 0, all levels, N_b = 8, B = 1) on the same "
        "data sets and seeds; m = 100, d = 256, ε = 4, s* = 8, θ*_j = 0.2 unless the "
        "setting says otherwise. ℓ2 is the mean over the runs ± its standard error.\n\n"
        f"{table}"
    )
    write_section("uldp_sparse_linear: default settings by rule", body)


if __name__ == "__main__":
    main()
