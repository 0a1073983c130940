"""Secure vertical logistic regression (spec ``secure-multiparty-logistic.md``).

Two measurements, written to the ``## Secure vertical logistic`` section of
``benchmarks/RESULTS.md``:

1. One secure Newton step at ``n = 1000``, ``p = 6``, three data parties (V1 data),
   MPyC with three processes on 127.0.0.1 and with one process, against the plain
   float64 step in the same process; the spec measured 80–105 s for a straightforward
   MPyC version, the target is under 20 s. Wall time includes starting the
   party processes and secret-sharing the inputs.
2. V6 scaling: the paper's second simulation (``n = 1000``, ``J = 2`` mixture as in V5,
   two attributes per party, party ``k`` missing 200 consecutive rows at a seeded
   offset) — time to EM convergence plus the Newton fit per ``K``, plain backend; the
   paper's reference protocol (pairwise Z-matrix products) for the complete-data
   Newton fit at ``n = 300``; fitted exponents of time vs ``K`` (log-log least squares).

Run: ``PYTHONPATH=. python benchmarks/secure_vertical.py [--quick] [--step-only]``
(``--baseline COMMIT`` times the MPyC backend of that commit on the same data in the
same run, for the speed-up ratio; ``--baseline ''`` skips it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._common import (
    extract_revision,
    machine_note,
    markdown_table,
    write_section,
)
from learners.secure_vertical import SecureVerticalLogisticRegression
from learners.secure_vertical._backend import PlainBackend
from learners.secure_vertical._em import (
    default_init,
    fit_gaussian_mixture,
    impute_conditional_mean,
)
from learners.secure_vertical._ledger import Ledger
from learners.secure_vertical._mpyc_backend import MPyCBackend, quantise
from learners.secure_vertical._newton import secure_newton

ROOT = Path(__file__).resolve().parents[1]
BETA = np.array([-0.5, 1.0, -1.0, 0.5, 0.5, -0.5, 0.25])


def v1_blocks(rng: np.random.Generator, n: int) -> tuple[list[np.ndarray], np.ndarray]:
    X = quantise(rng.standard_normal((n, 6)))
    y = (rng.random(n) < 1 / (1 + np.exp(-(BETA[0] + X @ BETA[1:])))).astype(float)
    blocks = [np.hstack([np.ones((n, 1)), X[:, :2]]), X[:, 2:4], X[:, 4:]]
    return blocks, y


BASELINE_COMMIT = (
    "7642efe"  # the MPyC backend before the truncation/entropy/launcher work
)
STEP_SECTION = "Secure vertical logistic: one secure Newton step"
BASELINE_CODE = """
import json, sys, time
import numpy as np
from learners.secure_vertical._ledger import Ledger
from learners.secure_vertical._mpyc_backend import MPyCBackend
d = np.load(sys.argv[1]); m = int(sys.argv[2])
blocks = [d["b0"], d["b1"], d["b2"]]
t0 = time.perf_counter()
tr = MPyCBackend(m, timeout=1800).newton(blocks, d["y"], weights=None, lam=0.0, noise=None,
    reveal="R1", tol=1e-6, max_iter=1, fixed_iterations=False, ledger=Ledger())
print(json.dumps({"wall": time.perf_counter() - t0, "beta": tr.beta.tolist()}))
"""


def baseline_step(
    blocks: list[np.ndarray], y: np.ndarray, m: int, commit: str
) -> tuple[float, np.ndarray]:
    """Wall time and ``β`` of one step with the backend as of ``commit`` (its
    ``learners/`` tree extracted with ``git archive``, run in a fresh interpreter)."""
    with tempfile.TemporaryDirectory(prefix="privmarket-baseline-") as tmp:
        extract_revision(commit, tmp, ["learners"])
        np.savez(Path(tmp) / "data.npz", b0=blocks[0], b1=blocks[1], b2=blocks[2], y=y)
        env = {**os.environ, "PYTHONPATH": tmp}
        out = subprocess.run([sys.executable, "-c", BASELINE_CODE, str(Path(tmp) / "data.npz"),
                              str(m)], check=True, capture_output=True, text=True, env=env,
                             cwd=tmp)  # fmt: skip
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return float(res["wall"]), np.asarray(res["beta"], dtype=float)


def newton_step(
    n: int, processes: list[int], rng: np.random.Generator, baseline: str | None
) -> list[list[object]]:
    """Rows: plain float64, then per process count the current backend (and, with
    ``baseline``, the backend of that commit) on the same data in the same run."""
    blocks, y = v1_blocks(rng, n)
    rows: list[list[object]] = []
    ops = PlainBackend()
    t0 = time.perf_counter()
    ref = secure_newton(ops, ops.hstack(blocks), y, d=7, max_iter=1)
    plain = time.perf_counter() - t0
    rows.append(["plain float64", 1, plain, None, None, 0.0])
    for m in processes:
        runner = MPyCBackend(m, timeout=1800)
        t0 = time.perf_counter()
        trace = runner.newton(
            blocks, y, weights=None, lam=0.0, noise=None, reveal="R1", tol=1e-6,
            max_iter=1, fixed_iterations=False, ledger=Ledger(),
        )  # fmt: skip
        wall = time.perf_counter() - t0
        protocol = max(t["newton"] for t in runner.last_timings)
        err = float(np.max(np.abs(trace.beta - ref.beta)))
        old_wall = None
        if baseline is not None:
            old_wall, old_beta = baseline_step(blocks, y, m, baseline)
            rows.append([f"MPyC as of {baseline}", m, old_wall, None, None,
                         float(np.max(np.abs(old_beta - ref.beta)))])  # fmt: skip
            print(rows[-1], flush=True)
        rows.append([
            "MPyC (current)", m, wall, protocol,
            None if old_wall is None else old_wall / wall, err,
        ])  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def step_section(rows: list[list[object]], argv: str, load: str) -> str:
    return "\n".join(
        [
            f"Command: `PYTHONPATH=. python benchmarks/secure_vertical.py {argv}` "
            f"({machine_note()}; load average {load} before the run, shared with other jobs).",
            "",
            "V1 data (n = 1000, p = 6 on the 2^-8 grid, three data parties), reveal level R1, "
            "one step from β = 0. Wall time includes starting the party processes and "
            "secret-sharing the inputs; 'protocol s' is the slowest party's time inside the "
            "Newton protocol. The baseline rows run the backend as of the named commit on the "
            "same data in the same run (its `learners/` tree extracted with `git archive`). "
            "Spec §8.2: 80–105 s for a straightforward MPyC version; target: under 20 s.",
            "",
            markdown_table(
                [
                    "backend",
                    "processes",
                    "wall s",
                    "protocol s",
                    "speed-up vs baseline",
                    "max abs(β − β_plain)",
                ],
                rows,
            ),
            "",
            "What changed (see `learners/secure_vertical/_mpyc_party.py`): (1) every "
            "secret × secret fixed-point product is truncated, and MPyC's truncation makes "
            "f = 32 secret random bits per element (with PRSS one modular square root per bit "
            "and party); the truncation now masks the low part with the sum of MPyC's d random "
            "shares (two random field elements per element; error ≤ d units of 2^-32, bias "
            "≤ ½ unit; with PRSS at m = 3, d = 3 and the rounding is unbiased); (2) MPyC's "
            "per-value `secrets` calls read pooled OS entropy; (3) the parties start through a "
            "launcher that does not import `learners/__init__` (scikit-learn) in each "
            "process; (4) three "
            "instead of four Newton steps for 1/(1+e). The two secure comparisons of the "
            "sigmoid (sign, clamp) keep MPyC's bit-based protocol.",
        ]
    )


def v6_data(
    K: int, rng: np.random.Generator, n: int = 1000
) -> tuple[list[np.ndarray], np.ndarray]:
    p = 2 * K
    z = rng.random(n) < 0.25
    X = np.where(z[:, None], -2.0, 2.0) + rng.standard_normal((n, p))
    y = (
        rng.random(n) < 1 / (1 + np.exp(-(-0.5 + 0.5 * X.sum(axis=1) / np.sqrt(p))))
    ).astype(float)
    held = np.ones((n, K), dtype=bool)
    for k in range(K):
        off = int(rng.integers(0, n - 200))
        held[off : off + 200, k] = False
    while not held.any(axis=1).all():  # rows observed by nobody are redrawn
        bad = ~held.any(axis=1)
        held[bad, rng.integers(0, K, size=int(bad.sum()))] = True
    held[:, 0] |= True  # the label holder holds every labelled record
    Xm = X.copy()
    for k in range(K):
        Xm[~held[:, k], 2 * k : 2 * k + 2] = np.nan
    return [Xm[:, 2 * k : 2 * k + 2] for k in range(K)], y


def scaling(
    Ks: list[int], ref_Ks: list[int], rng: np.random.Generator
) -> tuple[list[list[object]], dict[str, float]]:
    rows: list[list[object]] = []
    times_plain, times_ref = [], []
    for K in Ks:
        blocks, y = v6_data(K, rng)
        X = np.hstack(blocks)
        t0 = time.perf_counter()
        fit = fit_gaussian_mixture(
            X,
            default_init(X.shape[1], 2, scale=2.0),
            covariance="fixed_identity",
            max_iter=200,
        )
        t_em = time.perf_counter() - t0
        imp = impute_conditional_mean(X, fit.theta)
        t0 = time.perf_counter()
        est = SecureVerticalLogisticRegression().fit(
            [imp[:, 2 * k : 2 * k + 2] for k in range(K)], y
        )
        t_newton = time.perf_counter() - t0
        times_plain.append(t_em + t_newton)
        rows.append([K, "plain", t_em, fit.n_iter, t_newton, est.n_iter_])
        print(rows[-1], flush=True)
    for K in ref_Ks:
        blocks, y = v6_data(K, rng, n=300)
        full = [np.nan_to_num(b, nan=0.0) for b in blocks]
        t0 = time.perf_counter()
        est = SecureVerticalLogisticRegression(backend="reference", random_state=0).fit(
            full, y
        )
        t = time.perf_counter() - t0
        times_ref.append(t)
        rows.append([K, "reference (n = 300, complete)", None, None, t, est.n_iter_])
        print(rows[-1], flush=True)
    slope = {
        "plain": float(np.polyfit(np.log(Ks), np.log(times_plain), 1)[0]),
        "reference": float(np.polyfit(np.log(ref_Ks), np.log(times_ref), 1)[0])
        if len(ref_Ks) > 1
        else float("nan"),
    }
    return rows, slope


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-mpc", action="store_true")
    ap.add_argument(
        "--step-only", action="store_true", help="only the secure Newton step section"
    )
    ap.add_argument("--baseline", default=BASELINE_COMMIT,
                    help="commit whose MPyC backend is timed alongside ('' to skip)")  # fmt: skip
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    Ks = [3, 5, 10] if args.quick else [3, 5, 10, 15, 25, 45]
    ref_Ks = [3, 5] if args.quick else [3, 5, 8]
    if not args.skip_mpc:
        load = " ".join(f"{v:.1f}" for v in os.getloadavg())
        step_rows = newton_step(1000, [3, 1], rng, args.baseline or None)
        write_section(STEP_SECTION, step_section(step_rows, " ".join(argv), load))
    if args.step_only:
        return
    scale_rows, slope = scaling(Ks, ref_Ks, rng)
    body = [
        f"Command: `PYTHONPATH=. python benchmarks/secure_vertical.py{' --quick' if args.quick else ''}` "
        f"({machine_note()}; the machine was shared with other jobs, load average ≈ 10 on 2 cores, "
        "so wall times are inflated; treat them as upper bounds).",
        "",
        f"The secure Newton step is in the section '{STEP_SECTION}'.",
        "",
        "### V6 scaling (time vs number of parties K)",
        "",
        markdown_table(
            ["K", "mode", "EM s", "EM iters", "Newton s", "Newton iters"], scale_rows
        ),
        f"Fitted exponents of total time vs K: plain {slope['plain']:.2f}, reference {slope['reference']:.2f}.",
        "",
        "Reading: Newton iteration counts of 25 at "
        "K = 25 and 45 are the iteration cap (p = 50 and 90 imputed covariates, near "
        "separation), not convergence. The plain EM + Newton grows with exponent ≈ 1.5 in "
        "K (the EM's per-pattern d×d algebra), the paper's reference protocol with ≈ 2.8 "
        "(one Z-matrix product per pair of parties per iteration, each with an n×g "
        "orthonormalisation).",
    ]
    write_section("Secure vertical logistic", "\n".join(body))


if __name__ == "__main__":
    main(sys.argv[1:])
