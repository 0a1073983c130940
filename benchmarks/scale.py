"""Scale of the allocation and the Myerson payments, ratios within one run.

Run:  python benchmarks/scale.py [--sizes 1000 10000 100000] [--big 1000000]
      [--sample 8] [--dask-m 400] [--dask-workers 1 2 4] [--dask-repeats 1]
      [--json out.json] [--write]

* ``allocate`` at each ``m`` (synthetic, ``d = 20``; ``--big`` adds sizes run for
  ``allocate`` only), next to one scikit-learn ``LogisticRegression`` fit on the same
  data, and on Wisconsin (best of 15 each); log-log slope of time in ``m``.
* Payments (the default rule: the certified optimum over public candidate models,
  ``certify="auto"``; re-solves reuse the base's models and cached summaries):
  per-seller seconds over a random sample of sellers, as a ratio to ``allocate`` in
  the same run. Two kinds of seller: outside the
  verification sample (shortcut re-solves, each with its own KKT + range certificate)
  and inside it (plus cold full solves as cross-checks). The all-seller time is
  **extrapolated** from these (``(m − k)·t_shortcut + k·t_verified`` with ``k`` the
  verification sample of :func:`mechanisms.payments._payments.verification_sample`,
  plus the base allocation and the job's stale nodes, divided by the workers); at the
  smallest size the real all-seller run is also timed to check the extrapolation.
* Dask vs the process pool: all sellers of an ``m = --dask-m`` instance on a
  ``LocalCluster`` with 1, 2, 4 worker processes and on a ``ProcessPoolExecutor`` with
  as many, both warmed (imports, compiled kernels) before the clock starts; the
  speed-up curve (this machine has 2 cores: 4 workers cannot beat 2). With
  ``--dask-repeats N`` the two alternate N times and each one's best run counts.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
from _common import machine_note, markdown_table, write_section
from sklearn.linear_model import LogisticRegression

from market.datasets import load_wisconsin, make_synthetic, train_val_test_split
from mechanisms import MechanismConfig, UniformPrior, allocate
from mechanisms.allocation._blas import one_blas_thread
from mechanisms.payments import DaskExecutor, SerialExecutor
from mechanisms.payments._payments import (
    myerson_payments,
    payment_job,
    verification_sample,
)
from mechanisms.payments._seller_payment import seller_payment

PRIOR = UniformPrior(1e-4, 5e-4)
CFG = MechanismConfig(gamma=1.0, lam=1e-2, mu=10.0, sigma=100.0, k=4.0)
WBC_CFG = MechanismConfig(gamma=1.0, lam=1e-3, mu=100.0, sigma=1e3, k=4, eps_avg_max=10)
D = 20


def data(m: int, seed: int = 0) -> tuple[Any, Any, Any]:
    s = make_synthetic(m, D, scale=1 / 3, label_noise=0.1, random_state=seed)
    return s.X, s.y, s.costs


def best_of(fn: Callable[[], Any], n: int) -> tuple[float, Any]:
    best, out = math.inf, None
    for _ in range(max(n, 1)):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def repeats(m: int) -> int:
    return 5 if m <= 10_000 else (2 if m <= 100_000 else 1)


def allocate_row(m: int) -> dict[str, Any]:
    X, y, c = data(m)
    n = repeats(m)
    ta, alloc = best_of(lambda: allocate(X, y, c, PRIOR, CFG), n)
    ts, _ = best_of(lambda: LogisticRegression().fit(X, y), n)
    return {
        "m": m,
        "allocate_s": ta,
        "status": str(alloc.status),
        "sklearn_s": ts,
        "ratio_sklearn": ta / ts,
        "repeats": n,
    }


def wisconsin_row() -> dict[str, Any]:
    X, y = load_wisconsin()
    sp = train_val_test_split(X, y, random_state=0)
    c = np.random.default_rng(0).uniform(1e-4, 5e-4, size=sp.y_train.size)
    ta, alloc = best_of(lambda: allocate(sp.X_train, sp.y_train, c, PRIOR, WBC_CFG), 15)
    ts, _ = best_of(lambda: LogisticRegression().fit(sp.X_train, sp.y_train), 15)
    return {
        "m": sp.y_train.size,
        "allocate_s": ta,
        "status": str(alloc.status),
        "sklearn_s": ts,
        "ratio_sklearn": ta / ts,
    }


def payments_row(m: int, n_sample: int, *, workers: int, full: bool) -> dict[str, Any]:
    X, y, c = data(m)
    ta, alloc = best_of(lambda: allocate(X, y, c, PRIOR, CFG), repeats(m))
    t0 = time.perf_counter()
    job = payment_job(X, y, c, PRIOR, CFG, base=alloc)
    t_job = time.perf_counter() - t0
    rng = np.random.default_rng(1)
    everyone = list(range(m))
    winners = [i for i in everyone if alloc.epsilon_total[i] > 0]
    k = len(verification_sample(alloc, everyone))
    sample = [int(i) for i in rng.choice(m, size=n_sample, replace=False)]
    vsample = [int(i) for i in rng.choice(winners, size=max(2, n_sample // 4))]
    fast_job = dataclasses.replace(job, unverified=frozenset(everyone))
    slow_job = dataclasses.replace(job, unverified=frozenset())
    with one_blas_thread():
        t0 = time.perf_counter()
        fast = [seller_payment(fast_job, i) for i in sample]
        t_fast = (time.perf_counter() - t0) / len(sample)
        t0 = time.perf_counter()
        slow = [seller_payment(slow_job, i) for i in vsample]
        t_ver = (time.perf_counter() - t0) / len(vsample)
    certified = all(
        s.certificate is not None and s.certificate.rule_certified for s in fast + slow
    )
    total_1 = ta + t_job + (m - k) * t_fast + k * t_ver
    extrap = ta + t_job + ((m - k) * t_fast + k * t_ver) / workers
    row: dict[str, Any] = {
        "m": m,
        "allocate_s": ta,
        "status": str(alloc.status),
        "winners": len(winners),
        "job_s": t_job,
        "per_seller_s": t_fast,
        "per_verified_seller_s": t_ver,
        "ratio_per_seller": t_fast / ta,
        "ratio_per_verified_seller": t_ver / ta,
        "n_verified": k,
        "sample": n_sample,
        "solves_per_seller": float(np.mean([s.n_solves for s in fast])),
        "all_certified": certified,
        "extrapolated_all_s_1_core": total_1,
        "extrapolated_all_s": extrap,
        "measured_all_s": None,
    }
    if full:
        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=workers) as pool:
            pay = myerson_payments(X, y, c, PRIOR, CFG, executor=pool, base=alloc)
        row["measured_all_s"] = time.perf_counter() - t0 + ta
        row["measured_all_certified"] = pay.rule_certified
    return row


def _warm_worker(_: int = 0) -> int:
    """Import the mechanism and load its compiled kernels in this worker process (a
    tiny allocation and one payment), then linger so that each of ``w`` submitted
    warm-ups lands on a different pool process; returns the process id."""
    X, y, c = data(40, seed=9)
    alloc = allocate(X, y, c, PRIOR, CFG)
    myerson_payments(
        X, y, c, PRIOR, CFG, sellers=[0], executor=SerialExecutor(), base=alloc
    )
    time.sleep(0.5)
    return os.getpid()


# The Dask worker settings README recommends for payment workers ("Payments on a Dask
# cluster"): the worker's statistical profiler samples every thread's Python stack every
# 10 ms and its event loop ticks every 20 ms; on the payment re-solves (then a Python
# branch-and-bound) that cost ~15 % of the task time (m = 3,000, one worker: 62.9 s with
# the defaults, 53.1 s with these, the pool 53.9 s). And the nanny starts workers with
# ``MALLOC_TRIM_THRESHOLD_=65536``, which fixes glibc's mmap threshold at 128 kB: every
# O(m) temporary of a re-solve (an a-step's ``r`` and caps, 800 kB each at m = 10⁵) is
# then mapped and faulted in afresh (12× the page faults of a pool process; the compiled
# re-solves' tasks ran ~20 % longer than in the pool). A LocalCluster's nannies hand the
# parent's Dask configuration to the worker processes they start, so the settings are
# set there for the cluster's start; each row reads them back from the workers.
PAYMENT_WORKER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
}


def _worker_settings() -> tuple[Any, Any, Any]:
    import dask

    return (
        dask.config.get("distributed.worker.profile.enabled"),
        dask.config.get("distributed.admin.tick.interval"),
        os.environ.get("MALLOC_TRIM_THRESHOLD_"),
    )


def worker_config(defaults: bool) -> contextlib.AbstractContextManager[Any]:
    """``dask.config.set(PAYMENT_WORKER_CONFIG)``, or nothing with ``defaults``."""
    import dask

    return (
        contextlib.nullcontext() if defaults else dask.config.set(PAYMENT_WORKER_CONFIG)
    )


def dask_curve(
    m: int, workers: list[int], *, defaults: bool = False, repeats: int = 1
) -> list[dict[str, Any]]:
    """All sellers' payments on a process pool and on a Dask ``LocalCluster`` with the
    same number of worker processes. Both are started and warmed (imports, compiled
    kernels) before the clock starts — a cluster is long-lived, and a pool's start-up
    is reported separately — so the ratio compares the executors' own overhead:
    shipping the job (pickled per chunk vs scattered once) and scheduling chunks.
    With ``repeats > 1`` the two run alternately (pool, Dask, pool, …; both kept
    alive) and each one's best time counts: this shared machine's speed drifts by
    ±20 % over minutes, more than the executors differ."""
    import distributed

    X, y, c = data(m, seed=2)
    alloc = allocate(X, y, c, PRIOR, CFG)
    ref = myerson_payments(X, y, c, PRIOR, CFG, executor=SerialExecutor(), base=alloc)
    rows = []
    for w in workers:
        with (
            ProcessPoolExecutor(max_workers=w) as pool,
            worker_config(defaults),
            distributed.LocalCluster(
                n_workers=w, threads_per_worker=1, processes=True,
                dashboard_address=None,
            ) as cluster,
            distributed.Client(cluster) as client,
        ):  # fmt: skip
            t0 = time.perf_counter()
            pids = set(pool.map(_warm_worker, range(w)))
            t_start_pool = time.perf_counter() - t0
            client.run(_warm_worker)
            settings = sorted(set(client.run(_worker_settings).values()))
            times: dict[str, list[float]] = {"pool": [], "dask": []}
            out: dict[str, Any] = {}
            for _ in range(repeats):
                for name, ex in (("pool", pool), ("dask", DaskExecutor(client))):
                    t0 = time.perf_counter()
                    out[name] = myerson_payments(
                        X, y, c, PRIOR, CFG, executor=ex, base=alloc
                    )
                    times[name].append(time.perf_counter() - t0)
        t_pool, t_dask = min(times["pool"]), min(times["dask"])
        rows.append(
            {
                "workers": w,
                "pool_processes_warmed": len(pids),
                "pool_start_s": t_start_pool,
                "pool_s": t_pool,
                "dask_s": t_dask,
                "dask_over_pool": t_dask / t_pool,
                "pool_runs_s": times["pool"],
                "dask_runs_s": times["dask"],
                "dask_worker_profiler_tick": settings,
                "max_diff": float(
                    max(
                        np.abs(out["pool"].payments - ref.payments).max(),
                        np.abs(out["dask"].payments - ref.payments).max(),
                    )
                ),
            }
        )
    base = rows[0]
    for r in rows:
        r["pool_speedup"] = base["pool_s"] / r["pool_s"]
        r["dask_speedup"] = base["dask_s"] / r["dask_s"]
    return rows


def _fmt_slope(value: float | None) -> str:
    return "– (one size)" if value is None else f"{value:.2f}"


def slope(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 2:
        return None
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def report(out: dict[str, Any], command: str) -> str:
    alloc, pays, wbc, dask = (
        out["allocate"],
        out["payments"],
        out["wisconsin"],
        out["dask"],
    )
    parts = [
        f"Command: `{command}`. {machine_note()}; other jobs were running "
        f"(1-minute load average {out['load'][0]:.0f} at the start, "
        f"{out['load'][1]:.0f} at the end), so absolute times are noisy; every ratio "
        "is within one run.",
        "",
        "Allocate (synthetic, d = 20, default rule) and one scikit-learn "
        "`LogisticRegression` fit on the same data:",
        "",
        markdown_table(
            ["m", "allocate s", "status", "sklearn s", "allocate / sklearn", "best of"],
            [
                [
                    r["m"],
                    r["allocate_s"],
                    r["status"],
                    r["sklearn_s"],
                    r["ratio_sklearn"],
                    r.get("repeats"),
                ]
                for r in [*alloc, wbc]
            ],
        ),
        f"(last row: Wisconsin, `WBC_CFG`, best of 15.) Log-log slope of `allocate` "
        f"time in m: {_fmt_slope(out['slope_allocate'])}.",
        "",
        "Payments (default rule): per-seller time over a random sample of sellers, "
        "ratio to `allocate` in the same run; all-seller time extrapolated unless "
        "`measured`:",
        "",
        markdown_table(
            [
                "m",
                "allocate s",
                "winners",
                "job s",
                "s / seller",
                "ratio",
                "s / verified seller",
                "ratio (verified)",
                "k verified",
                "solves / seller",
                "certified",
                "all sellers (2 workers, extrapolated) s",
                "measured s",
            ],
            [
                [
                    r["m"],
                    r["allocate_s"],
                    r["winners"],
                    r["job_s"],
                    r["per_seller_s"],
                    r["ratio_per_seller"],
                    r["per_verified_seller_s"],
                    r["ratio_per_verified_seller"],
                    r["n_verified"],
                    r["solves_per_seller"],
                    r["all_certified"],
                    r["extrapolated_all_s"],
                    r["measured_all_s"],
                ]
                for r in pays
            ],
        ),
        f"Log-log slope in m of the per-seller time: {out['slope_per_seller']}; of the "
        f"all-seller time: {out['slope_all']}.",
        "",
    ]
    if dask:
        parts += [
            f"Dask vs the process pool, all sellers of m = {out['dask_m']}; Dask "
            f"workers {out['dask_settings']}:",
            "",
            markdown_table(
                [
                    "workers",
                    "pool start s",
                    "pool s",
                    "Dask s",
                    "Dask / pool",
                    "pool speed-up",
                    "Dask speed-up",
                    "max |Δt| vs serial",
                    "Dask workers' (profiler, tick, MALLOC_TRIM_THRESHOLD_)",
                ],
                [
                    [
                        r["workers"],
                        r["pool_start_s"],
                        r["pool_s"],
                        r["dask_s"],
                        r["dask_over_pool"],
                        r["pool_speedup"],
                        r["dask_speedup"],
                        r["max_diff"],
                        r["dask_worker_profiler_tick"],
                    ]
                    for r in dask
                ],
            ),
        ]
    return "\n".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--big", type=int, nargs="*", default=[])
    ap.add_argument("--sample", type=int, nargs="+", default=[8])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--full-max", type=int, default=1000)
    ap.add_argument("--dask-m", type=int, default=400)
    ap.add_argument("--dask-workers", type=int, nargs="*", default=[1, 2, 4])
    ap.add_argument("--dask-repeats", type=int, default=1)
    ap.add_argument(
        "--dask-defaults",
        action="store_true",
        help="Dask workers with distributed's default settings (profiler on)",
    )
    ap.add_argument("--json")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    samples = dict(zip(args.sizes, args.sample * len(args.sizes), strict=False))
    load0 = os.getloadavg()[0]
    out: dict[str, Any] = {"wisconsin": wisconsin_row(), "allocate": [], "payments": []}
    print(out["wisconsin"], flush=True)
    for m in [*args.sizes, *args.big]:
        out["allocate"].append(allocate_row(m))
        print(out["allocate"][-1], flush=True)
    for m in args.sizes:
        full = m <= args.full_max
        out["payments"].append(
            payments_row(m, samples[m], workers=args.workers, full=full)
        )
        print(out["payments"][-1], flush=True)
    a = out["allocate"]
    out["slope_allocate"] = slope([r["m"] for r in a], [r["allocate_s"] for r in a])
    p = out["payments"]
    ps = slope([r["m"] for r in p], [r["per_seller_s"] for r in p])
    pa = slope([r["m"] for r in p], [r["extrapolated_all_s"] for r in p])
    out["slope_per_seller"] = None if ps is None else round(ps, 2)
    out["slope_all"] = None if pa is None else round(pa, 2)
    out["dask_m"] = args.dask_m
    out["dask_settings"] = (
        "with distributed's defaults"
        if args.dask_defaults
        else "with README's payment-worker settings (profiler off, 1 s tick, "
        "glibc's own trim threshold)"
    )
    out["dask"] = (
        dask_curve(
            args.dask_m,
            args.dask_workers,
            defaults=args.dask_defaults,
            repeats=args.dask_repeats,
        )
        if args.dask_workers
        else []
    )
    for r in out["dask"]:
        print(r, flush=True)
    out["load"] = [load0, os.getloadavg()[0]]
    command = "python benchmarks/scale.py " + " ".join(
        f"--{k.replace('_', '-')} {' '.join(map(str, v)) if isinstance(v, list) else v}"
        for k, v in vars(args).items()
        if k not in ("json", "write") and v not in (None, [])
    )
    text = report(out, command)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if args.write:
        write_section("Scale", text)


if __name__ == "__main__":
    main()
