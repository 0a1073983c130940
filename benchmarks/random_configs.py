"""Speed at random accepted settings, not only at the benchmark's one configuration.

Configurations are drawn with a fixed seed over the mechanism settings a market accepts
(``market.schemas.MechanismSettings``: ``0 ≤ γ ≤ 10⁶``, ``0 < λ ≤ 10⁶``, ``0 ≤ μ, σ ≤ 10⁶``,
``1 ≤ k ≤ 10⁶``, ``0 < L ≤ 10⁶``), log-uniform since every range spans decades. An open
or zero lower end needs a finite one for a log scale: ``λ``, ``μ``, ``σ``, ``γ`` and ``L``
are drawn on ``[10⁻⁶, 10⁶]``, and ``γ``, ``μ``, ``σ`` are exactly 0 with probability
0.1 each (0 is accepted and takes other code paths). ``mode`` is ``"default"`` with
probability 3/4, else ``"strict"``; ``u`` is linear (the power utility's a-step is a
generic conic solve and is not part of this benchmark). Costs ``U[1e-4, 5e-4]`` under
the prior ``UniformPrior(1e-4, 5e-4)``.

Each part reports the median and the worst ratio over the draws next to the
configuration of ``benchmarks/allocation_speed.py`` (``WBC_CFG``):

- ``wbc``: ``allocate`` / one ``LogisticRegression(solver="lbfgs")`` fit on the Wisconsin
  training split (m = 399, d = 31), best of ``--repeat``, in one process, the two
  called in turns (:func:`interleaved_best`: a ratio then compares calls made during
  the same stretches of a shared machine's load).
- ``big``: the same at ``m = --big-m``, ``d = 20`` (``make_synthetic``), best of
  ``--big-repeat`` runs each (2 by default; in turns, as for ``wbc``: single runs of
  draw 20 read 7.7, 10.8 and 9.5 in a row, scikit-learn's fit 0.57-0.74 s), after
  one ``allocate`` per configuration on 50,000 of the records (:func:`warm_up`).
- ``pay``: payments per seller / ``allocate`` at ``m = --pay-m`` (``d = 20``) on the
  default process pool: all sellers (``--pay-sample 0``, the default; wall time), or
  an estimate from a random sample of ``--pay-sample`` sellers, ``mean seconds per
  seller × m / workers``. The estimate is an upper one, often by far: every chunk of
  the pool pays its own setup (unpickling the job, building the re-solver's caches),
  which a sample spreads over a few sellers and a whole market over thousands.
  ``allocate``: best of ``--repeat`` (about 10 ms at draw 9, where the best of two
  runs read 7.5 to 17 ms on this host); the payments: best of ``--pay-m-repeat`` (2)
  runs of a few seconds each (one run of seed 28's draw 9 read 4.1 to 4.9 s in a
  row); the runs after the first ``allocate`` in turns (:func:`interleaved_best`).
- ``pay`` and ``wbc_pay`` run on one pool, warmed first by a small payment job in each
  mode (:func:`warm_pool`).
- ``verified_share`` (``pay`` and ``wbc_pay``): the share of the sellers' seconds
  spent on the sellers whose shortcut re-solves are cross-checked against cold full
  re-solves (``verified``: ``max(32, ⌈√n⌉)`` of the ``n`` winners, all of them below
  32, each with two or three full solves of about one ``allocate`` each); at
  Wisconsin's size that part is set by the sample's size, not by the shortcut's speed.
- ``wbc_pay``: all Wisconsin payments (every seller, default pool, wall; best of
  ``--pay-repeat`` runs, 3 by default: a tenth of a second each, where one run on a
  shared machine moved by ±15 %) / one ``allocate`` (best of ``--repeat``: a few
  milliseconds, where two runs left the denominator up to twice too large); after
  the first ``allocate`` (the payments' base) the two are run in turns, as for
  ``wbc``.

Times are CPU seconds of this process (``time.process_time``; BLAS limited to one
thread) for ``allocate`` and scikit-learn: on a machine shared by many jobs a wall clock
measures the scheduler, a CPU clock the work. Wall times are recorded next to them.
Payments run in other processes, so their targets compare wall with wall (the pool's
wall time against ``allocate``'s best wall time); the CPU-denominator ratios
are in the tables too.

Run: ``python benchmarks/random_configs.py`` (``--parts wbc big pay wbc_pay``,
``--n-configs 20``, ``--big-m 1000000``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_note, markdown_table, write_section

from market.datasets import load_wisconsin, make_synthetic, train_val_test_split
from mechanisms import MechanismConfig, UniformPrior, allocate, myerson_payments
from mechanisms.payments import default_workers

PRIOR = UniformPrior(1e-4, 5e-4)
WBC_CFG = MechanismConfig(gamma=1.0, lam=1e-3, mu=100.0, sigma=1e3, k=4, eps_avg_max=10)
LOG_LO, LOG_HI = -6.0, 6.0  # decades of the log-uniform draws
P_ZERO = 0.1  # probability of an exact 0 for γ, μ, σ
SEED = 28


def draw_configs(
    n: int, seed: int = SEED, mode: str | None = None
) -> list[MechanismConfig]:
    """``n`` configurations over the accepted ranges (module docstring).

    ``mode`` (``"default"`` or ``"strict"``) sets every configuration's mode; the
    other settings are the same draws as without it (the mode's coin is still
    tossed, so the random stream is unchanged)."""
    rng = np.random.default_rng(seed)

    def logu(lo: float = LOG_LO, hi: float = LOG_HI) -> float:
        return float(10.0 ** rng.uniform(lo, hi))

    def maybe_zero() -> float:
        return 0.0 if rng.random() < P_ZERO else logu()

    out = []
    for _ in range(n):
        out.append(
            MechanismConfig(
                gamma=maybe_zero(),
                lam=logu(),
                mu=maybe_zero(),
                sigma=maybe_zero(),
                k=logu(0.0, LOG_HI),
                eps_avg_max=logu(),
                mode=_mode(rng.random(), mode),
            )
        )
    return out


def _mode(coin: float, fixed: str | None) -> str:
    if fixed is not None:
        return fixed
    return "default" if coin < 0.75 else "strict"


def cfg_label(cfg: MechanismConfig) -> str:
    return (
        f"γ={cfg.gamma:.2g} λ={cfg.lam:.2g} μ={cfg.mu:.2g} σ={cfg.sigma:.2g} "
        f"k={cfg.k:.3g} L={cfg.eps_avg_max:.2g} {cfg.mode}"
    )


def cpu_best(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Smallest CPU and wall time of ``repeat`` calls, and the last result."""
    return interleaved_best([fn], [repeat])[0]


def interleaved_best(
    fns: list[Callable[[], Any]], repeats: list[int]
) -> list[tuple[float, float, Any]]:
    """:func:`cpu_best` of each of ``fns`` (``repeats[k]`` calls of ``fns[k]``), the
    calls taken in turns (``fns[0]``, ``fns[1]``, …, then again) so that a ratio of
    two of them compares calls made during the same stretches of a shared machine's
    load, not one function's calls during a quiet stretch with the other's during a
    busy one."""
    best = [[np.inf, np.inf, None] for _ in fns]
    for r in range(max(max(repeats), 1)):
        for k, fn in enumerate(fns):
            if r >= max(repeats[k], 1):
                continue
            c0, w0 = time.process_time(), time.perf_counter()
            out = fn()
            b = best[k]
            b[0] = min(b[0], time.process_time() - c0)
            b[1] = min(b[1], time.perf_counter() - w0)
            b[2] = out
    return [(float(b[0]), float(b[1]), b[2]) for b in best]


def sklearn_fit(X: np.ndarray, y: np.ndarray) -> Any:
    return LogisticRegression(solver="lbfgs", max_iter=10_000).fit(X, y)


def ratio_rows(
    X: np.ndarray, y: np.ndarray, costs: np.ndarray, cfgs: list[MechanismConfig],
    repeat: int, labels: list[str | int] | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """``allocate`` / sklearn for each configuration (sklearn re-timed per row);
    ``labels``: each row's ``i`` (default ``"bench"`` for the first, then 1, 2, …)."""
    rows = []
    labels = labels or ["bench", *range(1, len(cfgs))]
    for i, cfg in zip(labels, cfgs, strict=True):
        (sk_cpu, sk_wall, _), (al_cpu, al_wall, alloc) = interleaved_best(
            [
                lambda: sklearn_fit(X, y),
                lambda cfg=cfg: allocate(X, y, costs, PRIOR, cfg),
            ],
            [repeat, repeat],
        )
        cert = alloc.certificate
        row = {
            "i": i, "config": cfg_label(cfg),
            "allocate_cpu_s": al_cpu, "sklearn_cpu_s": sk_cpu,
            "ratio": al_cpu / sk_cpu, "ratio_wall": al_wall / sk_wall,
            "status": str(alloc.status), "eps_avg": alloc.eps_avg,
            "bound_solves": getattr(cert, "n_bound_solves", None),
            "models": getattr(cert, "n_models", None),
        }  # fmt: skip
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def pay_rows(
    X: np.ndarray, y: np.ndarray, costs: np.ndarray, cfgs: list[MechanismConfig],
    sample: int | None, pool: ProcessPoolExecutor, workers: int, seed: int,
    repeat: int = 2, pay_repeat: int = 1, labels: list[str | int] | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """Payments / allocate per configuration (all sellers when ``sample`` is None);
    ``allocate``'s times are the best of ``repeat`` runs, the payments' the best of
    ``pay_repeat`` (the same payments each time: the rule is deterministic), the
    runs after the first ``allocate`` taken in turns (:func:`interleaved_best`)."""
    rows = []
    m = X.shape[0]
    rng = np.random.default_rng(seed)
    labels = labels or ["bench", *range(1, len(cfgs))]
    for i, cfg in zip(labels, cfgs, strict=True):
        al_cpu, al_wall, alloc = cpu_best(
            lambda cfg=cfg: allocate(X, y, costs, PRIOR, cfg), 1
        )
        sel = None
        if sample and sample < m:
            sel = np.sort(rng.choice(m, size=sample, replace=False))
        # the allocation's remaining runs and the payments' in turns
        (al2_cpu, al2_wall, _), (_, wall, pay) = interleaved_best(
            [
                lambda cfg=cfg: allocate(X, y, costs, PRIOR, cfg),
                lambda cfg=cfg, alloc=alloc, sel=sel: myerson_payments(
                    X, y, costs, PRIOR, cfg, sellers=sel, executor=pool, base=alloc
                ),
            ],
            [repeat - 1, pay_repeat],
        )
        al_cpu, al_wall = min(al_cpu, al2_cpu), min(al_wall, al2_wall)
        sec = np.array([s.seconds for s in pay.sellers])
        checked = np.array([s.verified for s in pay.sellers], dtype=bool)
        est_all = wall if sel is None else float(sec.mean()) * m / workers
        row = {
            "i": i, "config": cfg_label(cfg), "m": m,
            "allocate_cpu_s": al_cpu, "allocate_wall_s": al_wall,
            "sellers": len(pay.sellers), "payments_wall_s": wall,
            "all_sellers_s": est_all, "estimated": sel is not None,
            "per_seller_ratio": est_all / m / al_cpu,
            "all_ratio": est_all / al_cpu,
            "per_seller_ratio_wall": est_all / m / al_wall,
            "all_ratio_wall": est_all / al_wall, "winners": int(np.sum(alloc.epsilon > 0)),
            "converged": bool(pay.converged), "status": str(alloc.status),
            "escalated": bool(pay.escalated),
            "solves": int(sum(s.n_solves for s in pay.sellers)),
            "verified": int(checked.sum()),
            "verified_share": float(sec[checked].sum() / max(sec.sum(), 1e-300)),
        }  # fmt: skip
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def warm_up(
    X: np.ndarray, y: np.ndarray, costs: np.ndarray, cfgs: list[MechanismConfig]
) -> None:
    """``allocate`` once per configuration on the first ``WARM_ROWS`` records: the
    process loads the compiled kernels of each code path (numba's on-disk cache, or
    compiles them after a change) before the rows measured once each, where that
    fell on the first row (the benchmark configuration: 6.6 s against 5.4 s)."""
    n = min(WARM_ROWS, X.shape[0])
    for cfg in cfgs:
        allocate(X[:n], y[:n], costs[:n], PRIOR, cfg)


WARM_ROWS = 50_000  # beyond the row-screening threshold, so those kernels load too


def warm_pool(pool: ProcessPoolExecutor) -> None:
    """One small payment job per rule through ``pool``, before any measured row: a
    worker loads the compiled payment kernels (numba's on-disk cache) the first time it
    uses them, which would otherwise fall on the first row of that rule (a service's
    pool persists across orders and pays this once). The rules: the default mode's
    candidate models (``WBC_CFG``), its ``η`` search over the full range (``λ = 1``,
    above ``λ_conv``; about 60 ms a worker otherwise), and strict mode."""
    data = make_synthetic(80, 5, label_noise=0.05, random_state=3)
    for cfg in (WBC_CFG, WBC_CFG.with_(lam=1.0), WBC_CFG.with_(mode="strict")):
        myerson_payments(data.X, data.y, data.costs, PRIOR, cfg, executor=pool)


def summary(rows: list[dict[str, Any]], key: str) -> tuple[float, float, float, str]:
    """(benchmark config's value (NaN when not run), median and worst over the random
    draws, worst's config)."""
    bench = next((float(r[key]) for r in rows if r["i"] == "bench"), float("nan"))
    drawn = [r for r in rows if r["i"] != "bench"]
    rand = [r for r in drawn if np.isfinite(r[key])] or rows[:1]
    vals = np.array([float(r[key]) for r in rand])
    worst = rand[int(np.argmax(vals))]
    return bench, float(np.median(vals)), float(vals.max()), str(worst["config"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", nargs="*", default=["wbc", "big", "pay", "wbc_pay"])
    ap.add_argument("--n-configs", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--big-m", type=int, default=1_000_000)
    ap.add_argument(
        "--big-repeat", type=int, default=2,
        help="m = --big-m: best of this many runs of each side",
    )  # fmt: skip
    ap.add_argument("--pay-m", type=int, default=10_000)
    ap.add_argument(
        "--pay-m-repeat", type=int, default=2,
        help="payments at m = --pay-m: best of this many runs (allocate: --repeat)",
    )  # fmt: skip
    ap.add_argument(
        "--pay-sample", type=int, default=0,
        help="estimate payments from this many sampled sellers (0: all sellers)",
    )
    ap.add_argument(
        "--pay-repeat", type=int, default=3,
        help="Wisconsin payments: best of this many runs (allocate: --repeat)",
    )
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument(
        "--mode", choices=["default", "strict"], default=None,
        help="draw every configuration in this mode (default: strict with prob. 1/4)",
    )
    ap.add_argument(
        "--only", type=int, nargs="*", default=None,
        help="run only these rows (0: the benchmark's configuration, i: draw i)",
    )
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    t_start = time.perf_counter()
    cfgs = [WBC_CFG, *draw_configs(args.n_configs, args.seed, args.mode)]
    labels: list[str | int] = ["bench", *range(1, len(cfgs))]
    if args.only is not None:
        cfgs = [cfgs[i] for i in args.only]
        labels = [labels[i] for i in args.only]
    X, y = load_wisconsin()
    split = train_val_test_split(X, y, random_state=0)
    Xw, yw = split.X_train, split.y_train
    cw = np.random.default_rng(0).uniform(1e-4, 5e-4, size=yw.size)
    out: dict[str, list[dict[str, Any]]] = {}
    workers = default_workers()
    with threadpool_limits(1):
        if "wbc" in args.parts:
            out["wbc"] = ratio_rows(Xw, yw, cw, cfgs, args.repeat, labels)
        if "big" in args.parts:
            data = make_synthetic(args.big_m, 20, label_noise=0.05, random_state=1)
            warm_up(data.X, data.y, data.costs, cfgs)
            out["big"] = ratio_rows(
                data.X, data.y, data.costs, cfgs, args.big_repeat, labels
            )
        with ProcessPoolExecutor(workers) as pool:
            if "pay" in args.parts or "wbc_pay" in args.parts:
                warm_pool(pool)
            if "pay" in args.parts:
                data = make_synthetic(args.pay_m, 20, label_noise=0.05, random_state=2)
                out["pay"] = pay_rows(
                    data.X, data.y, data.costs, cfgs, args.pay_sample, pool, workers,
                    args.seed, repeat=args.repeat, pay_repeat=args.pay_m_repeat,
                    labels=labels,
                )  # fmt: skip
            if "wbc_pay" in args.parts:
                out["wbc_pay"] = pay_rows(
                    Xw, yw, cw, cfgs, None, pool, workers, 0, repeat=args.repeat,
                    pay_repeat=args.pay_repeat, labels=labels,
                )  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    body = report(out, args, workers, time.perf_counter() - t_start)
    print(body)
    if not args.no_write:
        write_section("Speed at random accepted settings", body)


TARGETS = {
    "wbc": ("ratio", 3.0, "allocate / sklearn, Wisconsin (CPU)"),
    "big": ("ratio", 10.0, "allocate / sklearn, m = {big_m}, d = 20 (CPU)"),
    "pay": (
        "per_seller_ratio_wall",
        0.05,
        "payments per seller (pool wall) / allocate (wall), m = {pay_m}",
    ),
    "wbc_pay": (
        "all_ratio_wall",
        100.0,
        "all payments (pool wall) / allocate (wall), Wisconsin",
    ),
}


def report(
    out: dict[str, list[dict[str, Any]]], args: argparse.Namespace, workers: int,
    secs: float,
) -> str:  # fmt: skip
    cmd = "python benchmarks/random_configs.py " + " ".join(
        [f"--parts {' '.join(args.parts)}", f"--n-configs {args.n_configs}",
         f"--repeat {args.repeat}",
         f"--big-m {args.big_m}", f"--big-repeat {args.big_repeat}",
         f"--pay-m {args.pay_m}", f"--pay-m-repeat {args.pay_m_repeat}",
         f"--pay-sample {args.pay_sample}", f"--pay-repeat {args.pay_repeat}",
         f"--seed {args.seed}"]
    )  # fmt: skip
    lines = [
        f"Command: `{cmd}` ({secs:.0f} s; {machine_note()}; {workers} pool workers).",
        "",
        "Configurations: the benchmark's `WBC_CFG` (γ = 1, λ = 1e-3, μ = 100, σ = 1e3, "
        f"k = 4, L = 10), then {args.n_configs} drawn with seed {args.seed} "
        "(`draw_configs`: log-uniform on [1e-6, 1e6] for γ, λ, μ, σ, L and on "
        "[1, 1e6] for k; γ, μ, σ exactly 0 with probability 0.1; mode default 3/4, "
        "strict 1/4; linear u). CPU-time ratios (wall ratios in the tables).",
        "",
    ]
    summ = []
    for part, (key, target, label) in TARGETS.items():
        rows = out.get(part)
        if not rows:
            summ.append(
                [label.format(**vars(args)), "not run", "", "", f"≤ {target:g}", ""]
            )
            continue
        bench, med, worst, wcfg = summary(rows, key)
        met = "met" if worst <= target else "NOT met"
        summ.append(
            [
                label.format(**vars(args)),
                bench,
                med,
                worst,
                f"≤ {target:g}: {met}",
                wcfg,
            ]
        )
    lines.append(markdown_table(
        ["measure", "benchmark config", "median (random)", "worst (random)", "target", "worst config"],
        summ,
    ))  # fmt: skip
    for part, rows in out.items():
        if not rows:
            continue
        keys = list(rows[0].keys())
        lines += [
            "",
            f"`{part}`:",
            "",
            markdown_table(keys, [[r[k] for k in keys] for r in rows]),
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
