"""Why the spec's V5/V7 bands need the reference's choices (spec
``uldp-sparse-linear-regression.md`` §4, §15 V5/V7).

The heavy hitters' accuracy is set by the **vote share** of each true index (the
probability that a selection user reports it) and by the pruning rule. This script
measures, in one process:

1. the vote share of each true index under the local selectors at m = 100, d = 256,
   s* = 8, θ*_j = 0.2 (k_sel = 4): Screening on ``|X_iᵀy_i|`` (spec PROPOSAL, the
   default) and on the signed ``X_iᵀy_i`` (the reference code);
2. the heavy hitters' F1 at given vote shares, from our :func:`heavy_hitters` and from
   an independent model of the same tree (exact prefix counts plus Gaussian noise of
   the oracle's standard deviation ``c_ε n1 / √(n1/L)``), for V5's selection half
   (n1 = 200, support {0..7}) and V7's (n1 = 10,000, random support), both pruning
   rules, and the ``hh_levels="pruned"`` option.

Run: ``python benchmarks/uldp_sparse_calibration.py`` (``--quick``: fewer runs, no
RESULTS.md).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_note, markdown_table, write_section

from learners.uldp_sparse import f1_score, first_pruned_level, heavy_hitters

D, S_STAR, K, L, EPS = 256, 8, 8, 8, 4.0


def vote_shares(n_users: int, *, seed: int = 0, chunk: int = 250) -> dict[str, float]:
    """Mean share of the votes per true index (random supports, 4 of them)."""
    out: dict[str, list[float]] = {"abs(c) (default)": [], "signed (reference)": []}
    rng = np.random.default_rng(seed)
    for _ in range(4):
        support = rng.choice(D, S_STAR, replace=False)
        theta = np.zeros(D)
        theta[support] = 0.2
        counts = {name: np.zeros(D) for name in out}
        for start in range(0, n_users, chunk):
            n = min(chunk, n_users - start)
            X = rng.standard_normal((n, 100, D))
            y = X @ theta + rng.standard_normal((n, 100))
            c = np.einsum("umd,um->ud", X, y)
            pick = rng.integers(0, 4, n)
            for name, score in (
                ("abs(c) (default)", np.abs(c)),
                ("signed (reference)", c),
            ):
                top = np.argpartition(-score, 3, axis=1)[:, :4]
                np.add.at(counts[name], top[np.arange(n), pick], 1)
        for name in out:
            out[name].append(float(counts[name][support].mean() / n_users))
    return {name: float(np.mean(v)) for name, v in out.items()}


def _votes(share: float, n1: int, contiguous: bool, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    support = np.arange(S_STAR) if contiguous else rng.choice(D, S_STAR, replace=False)
    p = np.full(D, (1 - S_STAR * share) / D)
    p[support] += share
    return rng.choice(D, size=n1, p=p).astype(np.int64), support


def tree_model_f1(
    share: float, n1: int, *, alpha: float, contiguous: bool, levels: str, runs: int
) -> float:
    """The independent Gaussian model of the tree (module docstring)."""
    rng = np.random.default_rng(1)
    c = (math.exp(EPS) + 1) / (math.exp(EPS) - 1)
    first = min(first_pruned_level(K, alpha), L) if levels == "pruned" else 1
    sd = c * n1 / math.sqrt(n1 / (L - first + 1))
    scores = []
    for _ in range(runs):
        v, support = _votes(share, n1, contiguous, rng)
        counts = np.bincount(v, minlength=D)
        cand, keep = np.array([0, 1]), np.array([0, 1])
        for lv in range(1, L + 1):
            if lv > 1:
                cand = np.sort(np.concatenate([2 * keep, 2 * keep + 1]))
            prefix = np.bincount(np.arange(D) >> (L - lv), weights=counts)
            noise = rng.normal(0, sd, cand.size) if lv >= first else 0.0
            est = prefix[cand] + noise
            order = np.argsort(-est)
            k_hi = min(K, cand.size)
            k_lo = min(cand.size, math.ceil(max(K / 2 ** (L - lv), 1)))
            extra = order[k_lo:k_hi]
            if alpha > 0:
                extra = extra[est[extra] >= alpha * n1]
            keep = cand[np.concatenate([order[:k_lo], extra])]
        scores.append(f1_score(keep, support))
    return float(np.mean(scores))


def package_f1(
    share: float, n1: int, *, alpha: float, contiguous: bool, levels: str, runs: int
) -> float:
    """Our :func:`heavy_hitters` on the same kind of votes."""
    rng = np.random.default_rng(2)
    scores = []
    for _ in range(runs):
        v, support = _votes(share, n1, contiguous, rng)
        res = heavy_hitters(
            v, np.full(n1, EPS), d=D, k=K, rng_public=rng, rng_private=rng,
            alpha=alpha, levels=levels,
        )  # fmt: skip
        scores.append(f1_score(res.support, support))
    return float(np.mean(scores))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=4000)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.users, args.runs = 1000, 40
    t0 = time.perf_counter()
    shares = vote_shares(args.users)
    share_table = markdown_table(
        ["selector (k_sel = 4, m = 100, d = 256)", "vote share per true index"],
        [[k, v] for k, v in shares.items()],
    )
    print(share_table, flush=True)
    rows = []
    settings = [
        ("V5: n1 = 200, support {0..7}", 200, True, 0.0, "all"),
        ("V5: n1 = 200, support {0..7}", 200, True, 0.1, "all"),
        ("V7: n1 = 200, random support", 200, False, 0.0, "all"),
        ("V7: n1 = 10,000, random support", 10_000, False, 0.0, "all"),
        ("V7: n1 = 10,000, random support", 10_000, False, 0.1, "all"),
        ("V7: n1 = 10,000, random support", 10_000, False, 0.0, "pruned"),
    ]
    for label, n1, contiguous, alpha, levels in settings:
        runs = args.runs if n1 > 1000 else 5 * args.runs
        for name, share in shares.items():
            kw = {
                "alpha": alpha,
                "contiguous": contiguous,
                "levels": levels,
                "runs": runs,
            }
            rows.append(
                [label, alpha, levels, name, share,
                 package_f1(share, n1, **kw), tree_model_f1(share, n1, **kw)]  # type: ignore[arg-type]
            )  # fmt: skip
            print(rows[-1], flush=True)
    tree_table = markdown_table(
        ["setting", "α", "levels", "selector's share", "share", "F1 (ours)",
         "F1 (tree model)"],
        rows,
    )  # fmt: skip
    print(tree_table, flush=True)
    if args.quick:
        return
    cmd = f"python benchmarks/uldp_sparse_calibration.py --users {args.users} --runs {args.runs}"
    body = (
        f"Command: `{cmd}` ({time.perf_counter() - t0:.0f} s; {machine_note()}).\n\n"
        f"Vote share of each true index ({args.users} users per support, 4 random "
        f"supports):\n\n{share_table}\nHeavy-hitter F1 at those shares (ε = 4, k = 8, "
        f"L = 8; mean over {args.runs} runs at n1 = 10,000, {5 * args.runs} at "
        f"n1 = 200):\n\n{tree_table}"
    )
    write_section("uldp_sparse_linear: heavy-hitter calibration", body)


if __name__ == "__main__":
    main()
