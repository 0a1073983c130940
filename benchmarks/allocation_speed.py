"""Speed of ``allocate`` vs the paper-style PGD reference vs one scikit-learn fit.

Same process, same data. Targets: ``allocate``'s objective never
worse than the reference's; on Wisconsin (fixed hyperparameters) ``allocate`` within 10×
one ``LogisticRegression(solver="lbfgs")`` fit; ``m = 10⁵, d = 10`` under 10 s; time
near-linear in ``m``.

Synthetic data (paper Appendix B, :func:`market.datasets.make_synthetic`) use
hyperparameters that keep the problem the same as ``m`` grows: the loss term
``Σ a_i ℓ_i`` is an average (``Σ a = 1``), while for weights spread over the sellers
``‖a‖₂ ~ 1/√m`` (so ``μ ∝ √m``), and ``η = m·ε_avg`` (so ``γ Σ Ψ_i a_i η`` stays fixed
with ``γ ∝ 1/m`` and ``σ/η`` with ``σ ∝ m``; then ``η* = √(σ/(γ ΣΨa)) ∝ m`` and ``ε_avg``
does not drift). The reference runs only for ``m ≤ 10³`` by default (``--ref-max-m``):
it is first-order and slow (~500 s at ``m = 10³, d = 10`` here; ~10× more at 10⁴).

Run: ``python benchmarks/allocation_speed.py`` (``--quick``: m ≤ 10⁴).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import pstats
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import best_time, machine_note, markdown_table, write_section

from market.datasets import load_wisconsin, make_synthetic, train_val_test_split
from mechanisms import MechanismConfig, UniformPrior, allocate
from mechanisms.allocation import reference_allocate

PRIOR = UniformPrior(1e-4, 5e-4)
WBC_CFG = MechanismConfig(gamma=1.0, lam=1e-3, mu=100.0, sigma=1e3, k=4, eps_avg_max=10)
M_REF = 1000


def synthetic_cfg(m: int) -> MechanismConfig:
    """``γ ∝ 1/m``, ``μ ∝ √m``, ``σ ∝ m`` around their values at ``m = 1000``."""
    r = m / M_REF
    return MechanismConfig(
        gamma=1.0 / r, lam=1e-3, mu=30.0 * np.sqrt(r), sigma=1e3 * r, k=4,
        eps_avg_max=10,
    )  # fmt: skip


def sklearn_fit(X: np.ndarray, y: np.ndarray) -> LogisticRegression:
    return LogisticRegression(solver="lbfgs", max_iter=10_000).fit(X, y)


def run_case(
    name: str,
    X: np.ndarray,
    y: np.ndarray,
    costs: np.ndarray,
    cfg: MechanismConfig,
    *,
    reference: bool,
    repeat: int,
) -> dict[str, object]:
    t_alloc, alloc = best_time(lambda: allocate(X, y, costs, PRIOR, cfg), repeat=repeat)
    t_sk, _ = best_time(lambda: sklearn_fit(X, y), repeat=repeat)
    row: dict[str, object] = {
        "case": name, "m": X.shape[0], "d": X.shape[1], "allocate_s": t_alloc,
        "sklearn_s": t_sk, "ratio_sk": t_alloc / t_sk, "per_m_us": 1e6 * t_alloc / X.shape[0],
        "G": alloc.objective, "status": str(alloc.status), "eps_avg": alloc.eps_avg,
        "ref_s": None, "G_ref": None, "ratio_ref": None, "not_worse": None,
    }  # fmt: skip
    if reference:
        t0 = time.perf_counter()
        ref = reference_allocate(X, y, costs, PRIOR, cfg, random_state=0)
        t_ref = time.perf_counter() - t0
        row.update(ref_s=t_ref, G_ref=ref.objective, ratio_ref=t_ref / t_alloc)
        row["not_worse"] = alloc.objective <= ref.objective + 1e-9 * (
            1 + abs(ref.objective)
        )
    print(row, flush=True)
    return row


def profile_top(fn: object, n: int = 12) -> str:
    """cProfile's top entries by cumulative time (for a missed target)."""
    prof = cProfile.Profile()
    prof.runcall(fn)  # type: ignore[arg-type]
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(n)
    return out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument(
        "--ref-max-m", type=int, default=1000, help="run the reference up to this m"
    )
    args = ap.parse_args()
    t0 = time.perf_counter()
    X, y = load_wisconsin()
    split = train_val_test_split(X, y, random_state=0)
    rng = np.random.default_rng(0)
    c = rng.uniform(1e-4, 5e-4, size=split.y_train.size)
    rows = [
        run_case("Wisconsin", split.X_train, split.y_train, c, WBC_CFG,
                 reference=True, repeat=5)
    ]  # fmt: skip
    sizes = [1000, 10_000] if args.quick else [1000, 10_000, 100_000]
    for d in (10, 50):
        for m in sizes:
            data = make_synthetic(m, d, label_noise=0.05, random_state=rng)
            ref = m <= args.ref_max_m
            rows.append(
                run_case(f"synthetic d={d}", data.X, data.y, data.costs,
                         synthetic_cfg(m), reference=ref, repeat=1 if m > 1000 else 3)
            )  # fmt: skip
    prof = ""
    big = [r for r in rows if r["m"] == 100_000 and r["d"] == 10]
    if big and float(big[0]["allocate_s"]) > 10.0:  # type: ignore[arg-type]
        data = make_synthetic(100_000, 10, label_noise=0.05, random_state=1)
        prof = profile_top(
            lambda: allocate(data.X, data.y, data.costs, PRIOR, synthetic_cfg(100_000))
        )
        print(prof)
    body = report(rows, args, time.perf_counter() - t0, prof)
    print(body)
    if not args.no_write:
        write_section("Allocation", body)


def targets(rows: list[dict[str, object]]) -> str:
    """The four speed targets, checked on the table."""
    ref = [r for r in rows if r["not_worse"] is not None]
    wbc = rows[0]
    big = [r for r in rows if r["m"] == 100_000 and r["d"] == 10]
    lines = [
        f"- Objective never worse than the reference: {sum(bool(r['not_worse']) for r in ref)}"
        f" of {len(ref)} cases.",
        f"- Wisconsin: allocate / one sklearn fit = {float(wbc['ratio_sk']):.2f} "  # type: ignore[arg-type]
        "(target ≤ 10).",
    ]
    if big:
        t = float(big[0]["allocate_s"])  # type: ignore[arg-type]
        lines.append(
            f"- m = 10⁵, d = 10: {t:.1f} s (target < 10 s: {'met' if t < 10 else 'MISSED'})."
        )
    for d in (10, 50):
        per = [(r["m"], float(r["per_m_us"])) for r in rows[1:] if r["d"] == d]  # type: ignore[arg-type]
        steps = ", ".join(f"{b / a:.2f}" for (_, a), (_, b) in itertools.pairwise(per))
        lines.append(
            f"- d = {d}: time per seller (µs) {', '.join(f'{v:.0f}' for _, v in per)}; "
            f"ratio per 10× m: {steps} (1.0 = linear)."
        )
    return "Targets:\n\n" + "\n".join(lines) + "\n"


def report(rows: list[dict[str, object]], args: argparse.Namespace, secs: float,
           prof: str) -> str:  # fmt: skip
    cmd = "python benchmarks/allocation_speed.py" + (" --quick" if args.quick else "")
    keys = ["case", "m", "d", "allocate_s", "per_m_us", "sklearn_s", "ratio_sk",
            "ref_s", "ratio_ref", "G", "G_ref", "not_worse", "status", "eps_avg"]  # fmt: skip
    header = ["case", "m", "d", "allocate s", "µs per seller", "sklearn s",
              "allocate/sklearn", "reference s", "reference/allocate", "G allocate",
              "G reference", "G ≤ G_ref", "status", "ε_avg"]  # fmt: skip
    table = markdown_table(header, [[r[k] for k in keys] for r in rows])
    text = (
        f"Command: `{cmd}` ({secs:.0f} s; {machine_note()}).\n\n"
        "Wall times are the best of 5 (Wisconsin), 3 (m = 10³) or 1 run, in one process "
        "with scikit-learn's `LogisticRegression(solver='lbfgs')` on the same data. "
        "Wisconsin: m = 399 train records, d = 31, γ = 1, λ = 1e-3, μ = 100, σ = 1e3, "
        "k = 4, L = 10, costs U[1e-4, 5e-4]. Synthetic: "
        "`make_synthetic(m, d, label_noise=0.05)`, costs U[1e-4, 5e-4], "
        "γ = 1000/m, μ = 30·√(m/1000), σ = 1000·m/1000, λ = 1e-3, k = 4, L = 10 "
        "(m-invariant: ‖a‖ ~ 1/√m and η = m·ε_avg). The PGD reference "
        "(`mechanisms.reference.reference_allocate`, backtracking, 2000 iterations per "
        f"grid point) runs only for m ≤ {args.ref_max_m} (≈500 s at m = 10³, d = 10; "
        "first-order, so 10⁴ would take hours here).\n\n" + table
    )
    text += "\n" + targets(rows)
    if prof:
        text += (
            "\nProfile (cProfile, cumulative) of one more m = 10⁵, d = 10 allocate:\n\n```\n"
            + prof
            + "```\n"
        )
    return text


if __name__ == "__main__":
    main()
