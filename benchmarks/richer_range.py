"""What the default rule's declared range costs in ``G`` on random small instances.

The default rule (``certify="auto"``, mode ``"default"``) minimises ``G`` exactly over a
declared range (``w`` in a finite set of public candidate models) when no convexity
certificate exists (``λ ≤ λ_conv``); otherwise over the whole ``η`` range. This
benchmark measures, on ``--n`` random small instances drawn with a fixed seed, the
relative excess of the rule's objective over the continuous optimum,

    excess = (G_rule − G_opt) / (1 + |G_opt|),

``G_opt`` the best ``G`` found by a multi-start continuous minimisation over
``(w, a, η)`` (:func:`continuous_optimum`): from ``w = 0``, the candidate models of
every rule compared (at most ``--max-model-starts`` of each, evenly spaced in its
list), the rules' own points and ``--random-starts`` random models, each
start followed along a log grid of ``η`` (fixed-``η`` block solves warm-started point to
point, as the full solver's grid search), the best grid point of each track refined
by a bounded Brent search and finished by the full solver's exact ``η`` polish, plus a
solve from each rule's ``(w, a)`` at its ``η``. ``G_opt`` is also never above a rule's
own value (the rule's point is feasible).

Instances (:func:`draw_instance`): ``m`` uniform on ``[2, 20]``; records from the
Wisconsin training split (``m`` random rows, d = 31) or synthetic
(``make_synthetic``, d uniform on ``[2, 10]``, label noise 0.05), each with probability
1/2; costs ``U[1e-4, 5e-4]`` under that prior; settings as
``benchmarks/random_configs.py::draw_configs`` draws them (log-uniform on
``[1e-6, 1e6]`` for γ, μ, σ, L, on ``[1, 1e6]`` for k; γ, μ, σ exactly 0 with
probability 0.1) except ``λ``, drawn log-uniform over its whole accepted range
``[1e-8, 1e6]`` (``mechanisms.config.SETTING_RANGES``); mode ``"default"``.
``--family moderate`` draws the tests' settings instead (:func:`draw_instance`).

``--before REV`` also runs the rule of revision ``REV`` (extracted with
``git archive``, in a subprocess) on the same instances, and reports both against
the same ``G_opt`` (whose starts include both rules' models and points).

Run: ``python benchmarks/richer_range.py [--n 200] [--before REV]`` from the
repository root (``--no-write`` to leave ``RESULTS.md`` alone).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SEED = 2026_11
LAM_RANGE = (-8.0, 6.0)  # log10 of SETTING_RANGES["lam"]
LOG_LO, LOG_HI = -6.0, 6.0
P_ZERO = 0.1
COST_LO, COST_HI = 1e-4, 5e-4


def draw_instance(k: int, seed: int = SEED, family: str = "accepted") -> dict[str, Any]:
    """Instance ``k`` of the benchmark (module docstring): a function of ``(k, seed)``.

    ``family="moderate"``: the settings of the tests' ``random_instance``
    (``tests/mechanisms/test_certified_allocation.py``: γ log-uniform on
    ``[1e-2, 1]``, μ on ``[10^-0.7, 10^0.5]``, σ on ``[0.1, 10^1.5]``, k uniform on
    ``[1.5, 3]``, L = 5, costs ``U[0.1, 1]`` under that prior), with λ log-uniform on
    ``[1e-4, 1e-1]`` and the same ``m`` and records as the accepted family."""
    from market.datasets import load_wisconsin, make_synthetic, train_val_test_split

    rng = np.random.default_rng([seed, k])
    if family == "moderate":
        return _moderate(rng, load_wisconsin, make_synthetic, train_val_test_split)

    def logu(lo: float = LOG_LO, hi: float = LOG_HI) -> float:
        return float(10.0 ** rng.uniform(lo, hi))

    def maybe_zero() -> float:
        return 0.0 if rng.random() < P_ZERO else logu()

    m = int(rng.integers(2, 21))
    cfg = {
        "gamma": maybe_zero(),
        "lam": logu(*LAM_RANGE),
        "mu": maybe_zero(),
        "sigma": maybe_zero(),
        "k": logu(0.0, LOG_HI),
        "eps_avg_max": logu(),
        "mode": "default",
    }
    X, y, source = _records(
        rng, m, load_wisconsin, make_synthetic, train_val_test_split
    )
    c = rng.uniform(COST_LO, COST_HI, m)
    return {"X": X, "y": y, "c": c, "cfg": cfg, "source": source,
            "prior": (COST_LO, COST_HI)}  # fmt: skip


def _records(
    rng: np.random.Generator, m: int, load: Any, synth: Any, split: Any
) -> tuple[np.ndarray, np.ndarray, str]:
    if rng.random() < 0.5:
        X, y = _wisconsin_train(load, split)
        rows = rng.choice(X.shape[0], size=m, replace=False)
        return X[rows], y[rows], "wisconsin"
    d = int(rng.integers(2, 11))
    data = synth(m, d, label_noise=0.05, random_state=int(rng.integers(2**31)))
    return data.X, data.y, "synthetic"


def _moderate(
    rng: np.random.Generator, load: Any, synth: Any, split: Any
) -> dict[str, Any]:
    m = int(rng.integers(2, 21))
    cfg = {
        "gamma": float(10 ** rng.uniform(-2, 0)),
        "lam": float(10 ** rng.uniform(-4, -1)),
        "mu": float(10 ** rng.uniform(-0.7, 0.5)),
        "sigma": float(10 ** rng.uniform(-1, 1.5)),
        "k": float(rng.uniform(1.5, 3.0)),
        "eps_avg_max": 5.0,
        "mode": "default",
    }
    X, y, source = _records(rng, m, load, synth, split)
    c = rng.uniform(MOD_LO, MOD_HI, m)
    return {"X": X, "y": y, "c": c, "cfg": cfg, "source": source,
            "prior": (MOD_LO, MOD_HI)}  # fmt: skip


MOD_LO, MOD_HI = 0.1, 1.0
_WBC: tuple[np.ndarray, np.ndarray] | None = None


def _wisconsin_train(load: Any, split: Any) -> tuple[np.ndarray, np.ndarray]:
    global _WBC
    if _WBC is None:
        X, y = load()
        sp = split(X, y, random_state=0)
        _WBC = (sp.X_train, sp.y_train)
    return _WBC


def rule_rows(n: int, seed: int, family: str = "accepted") -> list[dict[str, Any]]:
    """The rule of the imported ``mechanisms`` on instances ``0..n-1``: ``G``, its point,
    its candidate models, status and time."""
    from mechanisms import MechanismConfig, UniformPrior, allocate

    out = []
    for k in range(n):
        inst = draw_instance(k, seed, family)
        prior = UniformPrior(*inst["prior"])
        cfg = MechanismConfig(**inst["cfg"])
        t0 = time.process_time()
        a = allocate(inst["X"], inst["y"], inst["c"], prior, cfg)
        t = time.process_time() - t0
        cert = a.certificate
        models = getattr(cert, "models", None)
        out.append(
            {
                "k": k,
                "G": float(a.objective),
                "eta": float(a.eta),
                "w": a.w.tolist(),
                "a": a.weights.tolist(),
                "status": str(a.status),
                "rule": getattr(cert, "rule", None),
                "n_models": getattr(cert, "n_models", None),
                "lam_conv": getattr(cert, "lam_conv", None),
                "models": [] if models is None else models.W.tolist(),
                "cpu_s": t,
            }
        )
    return out


WORKER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import richer_range as rr
rows = rr.rule_rows(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
print("JSON" + json.dumps(rows))
"""


def rule_rows_at(
    rev: str | None, n: int, seed: int, family: str
) -> list[dict[str, Any]]:
    """:func:`rule_rows` in a subprocess importing ``mechanisms`` from revision ``rev``
    (``None``: this tree)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = str(ROOT)
        if rev is not None:
            from _common import extract_revision

            extract_revision(rev, tmp, ["mechanisms", "learners", "market"])
            path = tmp
        env = dict(os.environ, PYTHONPATH=path)
        res = subprocess.run(
            [sys.executable, "-c", WORKER, str(HERE), str(n), str(seed), family],
            env=env, check=True, capture_output=True, text=True, cwd=path,
        )  # fmt: skip
    line = [s for s in res.stdout.splitlines() if s.startswith("JSON")][-1]
    return list(json.loads(line[4:]))


def continuous_optimum(
    inst: dict[str, Any], starts: list[np.ndarray], points: list[tuple[float, np.ndarray]],
    *, n_grid: int = 24, n_random: int = 4, seed: int = 0,
) -> tuple[float, float, np.ndarray]:  # fmt: skip
    """Best ``(G, η, w)`` of the multi-start minimisation of the module docstring.

    ``starts``: models to follow along ``η``; ``points``: ``(η, w)`` to solve from."""
    from scipy.optimize import minimize_scalar

    from mechanisms import MechanismConfig, UniformPrior
    from mechanisms.allocation._block_solver import solve_at_eta
    from mechanisms.allocation._eta_search import _polish, eta_bounds
    from mechanisms.allocation._problem import Problem
    from mechanisms.allocation._weights_step import project_capped_simplex

    cfg = MechanismConfig(**inst["cfg"]).with_(certify="report")
    psi = UniformPrior(*inst["prior"]).virtual_cost(inst["c"])
    m, d = inst["X"].shape
    prob = Problem(inst["X"], inst["y"], psi, np.full(m, np.inf), cfg)
    bounds = eta_bounds(prob)
    assert bounds is not None
    lo, hi = bounds
    grid = np.geomspace(lo, hi, n_grid)
    rng = np.random.default_rng(seed)
    scale = max([float(np.linalg.norm(w)) for w in starts] + [1.0])
    starts = [np.zeros(d), *starts]
    starts += [rng.standard_normal(d) * scale / np.sqrt(d) for _ in range(n_random)]
    best: Any = None

    def a0(eta: float) -> np.ndarray:
        return project_capped_simplex(np.full(m, 1.0 / m), prob.caps(eta))[0]

    def keep(sol: Any) -> None:
        nonlocal best
        if np.isfinite(sol.value) and (best is None or sol.value < best.value):
            best = sol

    def finish(sol: Any) -> None:
        keep(sol)
        with contextlib.suppress(Exception):  # a failed polish only loses a candidate
            keep(_polish(prob, sol, lo, hi))

    for w0 in starts:
        track = []
        w, a, state = np.asarray(w0, dtype=float), a0(hi), None
        for eta in grid[::-1]:
            sol = solve_at_eta(prob, float(eta), w0=w, a0=a, state=state)
            track.append(sol)
            keep(sol)
            w, a, state = sol.w, sol.a, sol.state
        track = track[::-1]
        j = int(np.argmin([s.value for s in track]))
        lo_j, hi_j = float(grid[max(j - 1, 0)]), float(grid[min(j + 1, n_grid - 1)])
        ref = [track[j]]

        def f(x: float, ref: list[Any] = ref) -> float:
            s0 = ref[-1]
            sol = solve_at_eta(prob, float(np.exp(x)), w0=s0.w, a0=s0.a, state=s0.state)
            keep(sol)
            if sol.value < ref[0].value:
                ref[0] = sol
            ref.append(sol)
            return float(sol.value)

        minimize_scalar(f, bounds=(np.log(lo_j), np.log(hi_j)), method="bounded",
                        options={"xatol": 1e-6, "maxiter": 60})  # fmt: skip
        finish(ref[0])
    for eta, w in points:
        eta = float(np.clip(eta, lo, hi))
        finish(solve_at_eta(prob, eta, w0=np.asarray(w, dtype=float), a0=a0(eta)))
    return float(best.value), float(best.eta), np.asarray(best.w)


def summarise(ex: np.ndarray) -> dict[str, float]:
    return {
        "median": float(np.median(ex)),
        "share_le_1e-3": float(np.mean(ex <= 1e-3)),
        "share_le_1e-2": float(np.mean(ex <= 1e-2)),
        "worst": float(ex.max()),
        "n_above_1e-3": int(np.sum(ex > 1e-3)),
    }


def main() -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(HERE))
    from _common import machine_note, markdown_table, write_section

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--before", default=None, help="revision of the 'before' rule")
    ap.add_argument("--random-starts", type=int, default=4)
    ap.add_argument(
        "--max-model-starts", type=int, default=16,
        help="follow at most this many of each rule's models (evenly spaced)",
    )  # fmt: skip
    ap.add_argument("--family", choices=["accepted", "moderate"], default="accepted")
    ap.add_argument("--json", default=None, help="write the per-instance rows here")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--title", default="A richer public range")
    args = ap.parse_args()
    t_start = time.perf_counter()
    variants: dict[str, list[dict[str, Any]]] = {}
    if args.before is not None:
        variants["before"] = rule_rows_at(args.before, args.n, args.seed, args.family)
        print("before rule done", time.perf_counter() - t_start, flush=True)
    variants["after"] = rule_rows_at(None, args.n, args.seed, args.family)
    print("after rule done", time.perf_counter() - t_start, flush=True)
    rows = []
    for k in range(args.n):
        inst = draw_instance(k, args.seed, args.family)
        starts, points = [], []
        for rs in variants.values():
            r = rs[k]
            models = r["models"]
            step = max(1, -(-len(models) // args.max_model_starts))  # ceil
            starts += [np.asarray(w) for w in models[::step]]
            points.append((r["eta"], np.asarray(r["w"])))
        g_opt, eta_opt, _ = continuous_optimum(
            inst, starts, points, n_random=args.random_starts, seed=k
        )
        g_opt = min([g_opt] + [rs[k]["G"] for rs in variants.values()])
        row: dict[str, Any] = {
            "k": k, "m": int(inst["X"].shape[0]), "d": int(inst["X"].shape[1]),
            "source": inst["source"],
            **{("k_cap" if key == "k" else key): v for key, v in inst["cfg"].items()},
            "G_opt": g_opt, "eta_opt": eta_opt,
        }  # fmt: skip
        for name, rs in variants.items():
            r = rs[k]
            row[f"G_{name}"] = r["G"]
            row[f"excess_{name}"] = (r["G"] - g_opt) / (1.0 + abs(g_opt))
            row[f"rule_{name}"] = r["rule"]
            row[f"status_{name}"] = r["status"]
            row[f"models_{name}"] = r["n_models"]
            row[f"cpu_{name}"] = r["cpu_s"]
            row[f"eta_{name}"] = r["eta"]
        rows.append(row)
        print(json.dumps({k2: v for k2, v in row.items() if k2 != "mode"}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    secs = time.perf_counter() - t_start
    cmd = f"python benchmarks/richer_range.py --n {args.n} --family {args.family}" + (
        f" --before {args.before}" if args.before else ""
    )
    summ_rows = []
    for name in variants:
        ex = np.array([r[f"excess_{name}"] for r in rows])
        s = summarise(ex)
        cert = np.mean([str(r[f"status_{name}"]) == "optimal" for r in rows])
        range_rule = np.mean([r[f"rule_{name}"] == "candidate_models" for r in rows])
        cpu = np.median([r[f"cpu_{name}"] for r in rows])
        summ_rows.append([name, s["median"], s["share_le_1e-3"], s["share_le_1e-2"],
                          s["worst"], s["n_above_1e-3"], float(range_rule),
                          float(cert), float(cpu)])  # fmt: skip
    table = markdown_table(
        ["rule", "median excess", "share ≤ 1e-3", "share ≤ 1e-2", "worst",
         "instances > 1e-3", "share on the model range", "share status optimal",
         "median allocate CPU s"], summ_rows,
    )  # fmt: skip
    last = list(variants)[-1]
    worst = sorted(rows, key=lambda r: -r[f"excess_{last}"])[:10]
    if "before" in variants:
        worst = sorted(rows, key=lambda r: -r["excess_before"])[:10]
    wcols = ["k", "m", "d", "source", "lam", "gamma", "mu", "sigma", "k_cap", "L",
             *[f"excess_{n}" for n in variants], *[f"models_{n}" for n in variants]]  # fmt: skip
    wrows = [[r["k"], r["m"], r["d"], r["source"], r["lam"], r["gamma"], r["mu"],
              r["sigma"], r["k_cap"], r["eps_avg_max"],
              *[r[f"excess_{n}"] for n in variants],
              *[r[f"models_{n}"] for n in variants]] for r in worst]  # fmt: skip
    body = (
        f"Command: `{cmd}` ({secs:.0f} s; {machine_note()}).\n\n"
        f"{args.n} instances (seed {args.seed}); excess = (G_rule − G_opt)/(1 + |G_opt|)."
        "\n\n" + table + "\nWorst instances:\n\n" + markdown_table(wcols, wrows)
    )
    print(body)
    if not args.no_write:
        write_section(args.title, body)


if __name__ == "__main__":
    main()
