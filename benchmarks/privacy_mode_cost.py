"""What the end-to-end privacy mode (``strict``) costs in accuracy against ``default``
on Wisconsin at the demo's settings.

``default`` (``conditional_on_allocation``) lets the allocation read the records'
losses, so the guarantee holds only given the allocation; ``strict`` allocates with a
data-independent loss, so the released model's guarantee is end to end. Per
replication: the demo's split (300 sellers with one record each, 100 public validation
records, the rest held out), costs ~ U[0, 0.1] (the demo's prior), the demo's mechanism
settings and lifetime cap (``api.demo``), and the market's own code path for one
order: caps (``instance.seller_caps``), allocation (``numerics.allocate``) and the
learner's release (``numerics.release``, ``hetero_dp_logistic``), each allocation
released ``--draws`` times with fresh noise. Payments do not change the model and are
not computed. Both modes see the same split, costs and seed.

Run: ``python benchmarks/privacy_mode_cost.py`` (``--reps 10 --draws 5``).
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

from api.demo import LIFETIME_CAP, MECHANISM, N_VALIDATION
from market import numerics
from market.datasets import WBC_FEATURE_BOUNDS
from market.offers import records
from market.pipeline import instance

LEARNER = "hetero_dp_logistic"
TITLE = "Privacy mode: strict vs default on Wisconsin"


def _split(rng: np.random.Generator, n_sellers: int) -> dict[str, Any]:
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    X, y = np.asarray(data.data), np.where(data.target == 1, 1, -1)
    feats = [
        {"name": str(n), "low": lo, "high": hi}
        for n, (lo, hi) in zip(data.feature_names, WBC_FEATURE_BOUNDS, strict=True)
    ]
    perm = rng.permutation(len(y))
    sel, _val, test = np.split(perm, [n_sellers, n_sellers + N_VALIDATION])

    def scaled(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        recs = [{"x": X[i].tolist(), "y": int(y[i])} for i in idx]
        return records.scale_records(
            recs, features=feats, task="classification", out_of_bounds="clip"
        )

    return {"train": scaled(sel), "test": scaled(test), "features": feats}


def _run_mode(
    d: dict[str, Any], costs: np.ndarray, mode: str, draws: int
) -> dict[str, float]:
    values = dict(MECHANISM) | {"mode": mode}
    cfg = numerics.learner_config(values, learner=LEARNER)
    X, y = d["train"]
    m = len(y)
    _, eps_max = instance.seller_caps(
        np.full(m, LIFETIME_CAP), np.full(m, np.inf), k=cfg.k, lam=cfg.lam,
        learner=LEARNER,
    )  # fmt: skip
    params = numerics.check_order_learner(LEARNER, {}, task="classification")
    schema = {"task": "classification", "features": d["features"], "target": None}
    learner = numerics.build_learner(
        LEARNER, params, config=cfg, task="classification", schema=schema
    )
    Xd = learner.design_matrix(X)
    prior = numerics.build_prior(
        {"family": "uniform", "params": {"low": 0, "high": 0.1}}
    )
    t0 = time.perf_counter()
    alloc = numerics.allocate(Xd, y, costs, prior=prior, config=cfg, eps_max=eps_max)
    seconds = time.perf_counter() - t0
    eps = np.asarray(alloc.epsilon, dtype=float)
    Xt, yt = d["test"]
    errors = []
    for _ in range(draws):
        fitted = numerics.release(
            learner, X, y, sample_epsilon=eps, groups=np.arange(m)
        )
        errors.append(float(np.mean(np.asarray(fitted.predict(Xt)) != yt)))
    total = np.asarray(alloc.epsilon_total, dtype=float)
    return {
        "error": float(np.mean(errors)),
        "eps_mean": float(total[total > 0].mean()) if (total > 0).any() else 0.0,
        "used": float(np.sum(total > 0)),
        "seconds": seconds,
        "guarantee": str(fitted.privacy_report_.guarantee),  # type: ignore[dict-item]
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--sellers", type=int, default=300)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    rows: dict[str, list[dict[str, Any]]] = {"default": [], "strict": []}
    for rep in range(args.reps):
        rng = np.random.default_rng(1000 + rep)
        d = _split(rng, args.sellers)
        costs = rng.uniform(0.0, 0.1, size=len(d["train"][1]))
        for mode in rows:
            rows[mode].append(_run_mode(d, costs, mode, args.draws))
        print(
            rep,
            {k: round(v[-1]["error"], 4) for k, v in rows.items()},
            flush=True,
        )
    diff = np.array(
        [
            s["error"] - t["error"]
            for s, t in zip(rows["strict"], rows["default"], strict=True)
        ]
    )
    half = 1.96 * float(diff.std(ddof=1)) / np.sqrt(len(diff)) if len(diff) > 1 else 0
    table = [
        [
            mode,
            rows[mode][0]["guarantee"],
            float(np.mean([r["error"] for r in rows[mode]])),
            float(np.std([r["error"] for r in rows[mode]], ddof=1))
            if len(rows[mode]) > 1
            else None,
            float(np.mean([r["used"] for r in rows[mode]])),
            float(np.mean([r["eps_mean"] for r in rows[mode]])),
            float(np.mean([r["seconds"] for r in rows[mode]])),
        ]
        for mode in rows
    ]
    body = (
        f"Command: `python benchmarks/privacy_mode_cost.py --reps {args.reps} "
        f"--draws {args.draws}` ({machine_note()}). Wisconsin, the demo's settings "
        f"({MECHANISM}, cap {LIFETIME_CAP}, costs ~ U[0, 0.1]), {args.sellers} "
        f"one-record sellers, {args.reps} splits × {args.draws} noise draws; test "
        "misclassification of the released model on the held-out records.\n\n"
        + markdown_table(
            [
                "mode",
                "guarantee",
                "test error",
                "sd over splits",
                "sellers used",
                "mean ε_i (used)",
                "allocation s",
            ],
            table,
        )
        + f"\nPaired difference strict − default: {diff.mean():+.4f} "
        f"(95% CI ± {half:.4f}) in test error.\n"
    )
    print(body)
    if not args.no_write:
        write_section(TITLE, body)


if __name__ == "__main__":
    main()
