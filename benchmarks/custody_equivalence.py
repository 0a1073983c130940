"""Seller custody against platform custody: the same accuracy within Monte-Carlo error.

For each local learner, on the same synthetic data and the same per-seller ``ε_i``,
each repetition fits the order twice:

- **seller custody** — the order's protocol (``LearnerSpec.build_protocol`` with the
  market's public schema), every request answered seller by seller as the seller's
  client does: the request goes through ``ReportRequest.to_json`` / JSON text /
  ``ReportRequest.from_json``, the seller runs ``answer_request`` on its own **raw**
  records (the client scales them with the request's public scaling) with its own
  generator, the report goes through JSON text and is validated by the platform
  (``LocalProtocol.submit`` checks every report) before it is used, and the protocol
  goes through its JSON state between rounds, as the service stores it;
- **platform custody** — what a platform-custody order runs: the records go through
  the market's intake scaling (``market.offers.records.scale_records``), the learner
  built by ``LEARNERS[name].for_order`` with the same context, and its ordinary
  ``fit(X, y, sample_epsilon=…, groups=…)`` (for ``ldp_missing_logistic`` the spec's
  one-report-per-step SGD, for the others the same rounds answered in process).

Independent seeds throughout (one per seller for the seller-custody fit, one stream for
the platform fit). Accuracy against the known truth, in raw units: estimation error
``‖θ̂ − θ‖₂`` (intercept included when fitted) and excess test loss on a fresh test
sample (pinball loss at α for quantile regression, cross-entropy on complete records
for logistic regression, squared error for linear regression). Reported per learner:
mean ± standard error of each, the paired difference (seller − platform, same data)
± its standard error, and whether ``|difference| < 2 s.e.``.

Designs (the learners' benchmarks' generators):

- ``onebit_quantile``, public X: ``x ~ U[−1, 1]²``, ``y = x·(1, −1) + 0.5 + w``, ``w``
  asymmetric Laplace with ``P(w ≤ 0) = α = 0.3`` (``benchmarks/onebit_qmle.py``,
  speed design), one record per seller, ``ε_i ~ U[1, 4]``;
- ``onebit_quantile``, private X: ``x ~ {±1}⁴``, ``y = x·(1, −0.5, 0.5, 0.25) + w``
  (same benchmark), no intercept, one record per seller, ``ε_i ~ U[5, 10]`` shared by
  the ``k + 1`` bits;
- ``ldp_missing_logistic`` (two_phase): ``learners.ldp_missing.simulate`` with
  ``β* = (0, 1)``, ``α* = (1, 1)``, σ = P(observed) (``benchmarks/ldp_missing_rounds.py``;
  about a third of the cells missing), one record per seller, ``ε_i ~ U[1, 4]``;
  seller custody in rounds of the order default ``round_size = 100``;
- ``uldp_sparse_linear`` (2-SLR, defaults): ``learners.uldp_sparse.independent_design``
  at V5's sizes (n = 400 sellers × m = 100 records, d = 256, 8 coefficients of 0.2;
  ``benchmarks/uldp_sparse.py``), ``ε_i ~ U[2, 6]``; features' public bounds ±4,
  target ±5 (clipping applies to both fits alike).

Run: ``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/custody_equivalence.py
[--reps 30] [--seed 0] [--only NAME] [--write]``.
``--same-coins``: instead, check that both paths give identical coefficients when they
draw the library's coins (``seller_generators(seed, n)`` against
``fit(random_state=seed)``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_note, markdown_table, write_section

from learners import LEARNERS
from learners.ldp_missing import cross_entropy, simulate
from learners.local_protocol import (
    LocalProtocol,
    ReportRequest,
    answer_request,
    seller_generators,
)
from learners.onebit_quantile import sample_ald_noise
from learners.registry import ReleaseContext
from learners.uldp_sparse import independent_design
from market.offers.records import scale_records

N_TEST = 20_000


@dataclass
class Draw:
    """One repetition's data: raw records in seller order, the public shape, truth."""

    X: np.ndarray
    y: np.ndarray
    n_records: np.ndarray
    epsilon: np.ndarray  # per seller
    intercept: float
    beta: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


@dataclass
class Case:
    label: str
    learner: str
    params: dict[str, Any]
    task: str
    schema: dict[str, Any]
    draw: Callable[[np.random.Generator], Draw]
    loss: Callable[[np.ndarray, float, np.ndarray, np.ndarray], float]
    note: str


def _features(d: int, low: float, high: float, **extra: Any) -> list[dict[str, Any]]:
    return [{"name": f"x{j}", "low": low, "high": high, **extra} for j in range(d)]


def _pinball(
    alpha: float,
) -> Callable[[np.ndarray, float, np.ndarray, np.ndarray], float]:
    def loss(beta: np.ndarray, b: float, X: np.ndarray, y: np.ndarray) -> float:
        r = y - (X @ beta + b)
        return float(np.mean(np.maximum(alpha * r, (alpha - 1.0) * r)))

    return loss


def _logistic(beta: np.ndarray, b: float, X: np.ndarray, y: np.ndarray) -> float:
    return cross_entropy(np.r_[b, beta], X, (y + 1.0) / 2.0)


def _squared(beta: np.ndarray, b: float, X: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((y - X @ beta - b) ** 2))


# --- designs ------------------------------------------------------------------

ONEBIT_PUBLIC_N = 4000
ONEBIT_PRIVATE_N = 4000
LDP_N = 3000
ULDP_USERS, ULDP_M, ULDP_D = 400, 100, 256


def _onebit_public(rng: np.random.Generator) -> Draw:
    beta, b = np.array([1.0, -1.0]), 0.5

    def sample(n: int) -> tuple[np.ndarray, np.ndarray]:
        X = rng.uniform(-1, 1, (n, 2))
        return X, X @ beta + b + sample_ald_noise(n, alpha=0.3, rng=rng)

    X, y = sample(ONEBIT_PUBLIC_N)
    Xt, yt = sample(N_TEST)
    n = ONEBIT_PUBLIC_N
    return Draw(X, y, np.ones(n, np.int64), rng.uniform(1, 4, n), b, beta, Xt, yt)


def _onebit_private(rng: np.random.Generator) -> Draw:
    beta = np.array([1.0, -0.5, 0.5, 0.25])

    def sample(n: int) -> tuple[np.ndarray, np.ndarray]:
        X = rng.choice([-1.0, 1.0], size=(n, beta.size))
        return X, X @ beta + sample_ald_noise(n, alpha=0.3, rng=rng)

    X, y = sample(ONEBIT_PRIVATE_N)
    Xt, yt = sample(N_TEST)
    n = ONEBIT_PRIVATE_N
    return Draw(X, y, np.ones(n, np.int64), rng.uniform(5, 10, n), 0.0, beta, Xt, yt)


def _ldp_missing(rng: np.random.Generator) -> Draw:
    beta = (0.0, 1.0)
    kw: dict[str, Any] = {
        "beta": beta,
        "alpha": (1.0, 1.0),
        "alpha_parametrizes": "observed",
    }
    data = simulate(LDP_N, rng=rng, **kw)
    test = simulate(N_TEST, rng=rng, **kw)
    return Draw(
        data.X,
        2.0 * data.y01 - 1.0,
        np.ones(LDP_N, np.int64),
        rng.uniform(1, 4, LDP_N),
        beta[0],
        np.array(beta[1:]),
        test.X_full,
        2.0 * test.y01 - 1.0,
    )


def _uldp(rng: np.random.Generator) -> Draw:
    des = independent_design(ULDP_USERS, ULDP_M, ULDP_D, rng=rng)
    Xt = rng.standard_normal((N_TEST, ULDP_D))
    yt = Xt @ des.theta + rng.standard_normal(N_TEST)
    return Draw(
        des.X,
        des.y,
        np.full(ULDP_USERS, ULDP_M, np.int64),
        rng.uniform(2, 6, ULDP_USERS),
        0.0,
        des.theta,
        Xt,
        yt,
    )


CASES = [
    Case(
        "onebit_quantile, public X",
        "onebit_quantile",
        {"alpha": 0.3, "interval": [-4.0, 6.0], "scale": 1.0},
        "quantile",
        {
            "features": _features(2, -1.0, 1.0, public=True),
            "target": {"name": "y", "low": -4.0, "high": 6.0},
        },
        _onebit_public,
        _pinball(0.3),
        f"n = {ONEBIT_PUBLIC_N} sellers × 1 record, ε_i ~ U[1, 4]",
    ),
    Case(
        "onebit_quantile, private X",
        "onebit_quantile",
        {
            "alpha": 0.3,
            "interval": [-4.0, 4.0],
            "scale": 1.0,
            "private_x": True,
            "fit_intercept": False,
        },
        "quantile",
        {
            "features": _features(4, -1.0, 1.0),
            "target": {"name": "y", "low": -4.0, "high": 4.0},
        },
        _onebit_private,
        _pinball(0.3),
        f"n = {ONEBIT_PRIVATE_N} sellers × 1 record, k = 4, ε_i ~ U[5, 10]",
    ),
    Case(
        "ldp_missing_logistic, two_phase",
        "ldp_missing_logistic",
        {"algorithm": "two_phase"},
        "classification",
        {"features": _features(1, -1.0, 1.0, missable=True), "target": None},
        _ldp_missing,
        _logistic,
        f"n = {LDP_N} sellers × 1 record, ε_i ~ U[1, 4]; seller custody in rounds of "
        "100 (default), platform custody one report per SGD step",
    ),
    Case(
        "uldp_sparse_linear, 2-SLR",
        "uldp_sparse_linear",
        {},
        "regression",
        {
            "features": _features(ULDP_D, -4.0, 4.0),
            "target": {"name": "y", "low": -5.0, "high": 5.0},
        },
        _uldp,
        _squared,
        f"n = {ULDP_USERS} sellers × {ULDP_M} records, d = {ULDP_D}, ε_i ~ U[2, 6]",
    ),
]


# --- the two fits ---------------------------------------------------------------


def _context(case: Case) -> ReleaseContext:
    # λ does not enter the local learners; strict mode, as a seller-custody market
    return ReleaseContext(
        lam=1e-3, allocation_uses_data=False, task=case.task, market=case.schema
    )


def seller_custody_fit(
    case: Case,
    draw: Draw,
    public_rng: np.random.Generator,
    seed: np.random.SeedSequence | list[np.random.Generator],
) -> Any:
    """The order's protocol, every request answered as the seller's client does."""
    proto = LEARNERS.spec(case.learner).build_protocol(
        case.params,
        context=_context(case),
        epsilon=draw.epsilon,
        n_records=draw.n_records,
        random_state=public_rng,
    )
    sellers = (
        list(seed)
        if isinstance(seed, list)
        else [np.random.default_rng(s) for s in seed.spawn(draw.epsilon.size)]
    )
    starts = np.concatenate([[0], np.cumsum(draw.n_records)])
    while (reqs := proto.next_round()) is not None:
        reports: dict[int, Mapping[str, Any]] = {}
        for i, req in reqs.items():
            wire = json.loads(json.dumps(req.to_json()))  # platform → seller
            rows = slice(int(starts[i]), int(starts[i + 1]))
            report = answer_request(
                ReportRequest.from_json(wire),
                draw.X[rows],
                draw.y[rows],
                rng=sellers[i],
            )
            reports[i] = json.loads(json.dumps(report))  # seller → platform
        proto.submit(reports)  # validated against the randomizer's output space
        # the service stores the protocol as JSON between rounds and restores it
        proto = LocalProtocol.from_state(json.loads(json.dumps(proto.to_state())))
    return proto.result()


def platform_custody_fit(
    case: Case,
    draw: Draw,
    rng: np.random.Generator | int,
    *,
    round_size: int | None = None,
) -> Any:
    """What a platform-custody order runs on the uploaded records (``round_size``:
    ``ldp_missing_logistic`` in report rounds instead, for :func:`same_coins`)."""
    records = [
        {"x": [None if math.isnan(v) else float(v) for v in row], "y": float(t)}
        for row, t in zip(draw.X, draw.y, strict=True)
    ]
    Xs, ys = scale_records(
        records,
        features=case.schema["features"],
        task=case.task,
        target=case.schema["target"],
        out_of_bounds="clip",
    )
    learner = LEARNERS[case.learner].for_order(case.params, context=_context(case))
    learner.set_params(random_state=rng)
    if round_size is not None:
        learner.set_params(round_size=round_size)
    groups = np.repeat(np.arange(draw.epsilon.size), draw.n_records)
    return learner.fit(Xs, ys, sample_epsilon=draw.epsilon[groups], groups=groups)


def same_coins_difference(case: Case, draw: Draw, seed: int) -> float:
    """Largest coefficient difference between the seller-custody path and the
    platform-custody fit when both draw the library's coins: the platform's
    ``fit(random_state=seed)`` and the sellers answering with
    ``seller_generators(seed, n)`` (``ldp_missing_logistic`` in rounds of 100 on both
    sides). 0.0 means the wire, the client-side scaling and the JSON state change
    no number."""
    public_rng, kids = seller_generators(seed, draw.epsilon.size)
    est_s = seller_custody_fit(case, draw, public_rng, kids)
    rounds = 100 if case.learner == "ldp_missing_logistic" else None
    est_p = platform_custody_fit(case, draw, seed, round_size=rounds)
    a = np.r_[est_s.coef_, est_s.intercept_]
    b = np.r_[est_p.coef_, est_p.intercept_]
    return float(np.max(np.abs(a - b)))


def raw_coefficients(case: Case, est: Any) -> tuple[float, np.ndarray]:
    """The fitted (intercept, slopes) in raw units.

    The learners fit in the market's units ``x̃_j = (x_j − c_j)/(h_j √d)`` (``c_j``,
    ``h_j`` the midpoint and half-width of the public bounds) and, for a
    non-classification target, ``ỹ = a(y − lo) − 1`` with ``a = 2/(hi − lo)``.
    """
    feats = case.schema["features"]
    d = len(feats)
    low = np.array([f["low"] for f in feats], dtype=float)
    high = np.array([f["high"] for f in feats], dtype=float)
    c, h = (low + high) / 2.0, (high - low) / 2.0
    theta = np.asarray(est.coef_, dtype=float)
    b0 = float(getattr(est, "intercept_", 0.0))
    target = case.schema.get("target")
    if case.task != "classification" and target:
        a, lo = 2.0 / (target["high"] - target["low"]), float(target["low"])
        beta = theta / (a * h * math.sqrt(d))
        return lo + (b0 + 1.0) / a - float(beta @ c), beta
    beta = theta / (h * math.sqrt(d))
    return b0 - float(beta @ c), beta


def run_case(case: Case, reps: int, seed: int) -> dict[str, Any]:
    root = np.random.SeedSequence([seed, sum(map(ord, case.label))])
    err: dict[str, list[float]] = {"seller": [], "platform": []}
    test: dict[str, list[float]] = {"seller": [], "platform": []}
    times = {"seller": 0.0, "platform": 0.0}
    fit_intercept = case.params.get("fit_intercept", True)
    for r, ss in enumerate(root.spawn(reps)):
        data_ss, public_ss, sellers_ss, platform_ss = ss.spawn(4)
        draw = case.draw(np.random.default_rng(data_ss))
        base = case.loss(draw.beta, draw.intercept, draw.X_test, draw.y_test)
        t0 = time.perf_counter()
        est_s = seller_custody_fit(
            case, draw, np.random.default_rng(public_ss), sellers_ss
        )
        t1 = time.perf_counter()
        est_p = platform_custody_fit(case, draw, np.random.default_rng(platform_ss))
        t2 = time.perf_counter()
        times["seller"] += t1 - t0
        times["platform"] += t2 - t1
        assert est_s.privacy_report_.custody == "seller"
        assert est_p.privacy_report_.custody == "platform"
        for key, est in (("seller", est_s), ("platform", est_p)):
            b, beta = raw_coefficients(case, est)
            diff = (
                np.r_[b - draw.intercept, beta - draw.beta]
                if fit_intercept
                else beta - draw.beta
            )
            err[key].append(float(np.linalg.norm(diff)))
            test[key].append(case.loss(beta, b, draw.X_test, draw.y_test) - base)
        print(
            f"{case.label} rep {r + 1}/{reps}: err seller {err['seller'][-1]:.4f} "
            f"platform {err['platform'][-1]:.4f}; test seller {test['seller'][-1]:.5f} "
            f"platform {test['platform'][-1]:.5f} ({t1 - t0:.1f} s + {t2 - t1:.1f} s)",
            flush=True,
        )
    return {"err": err, "test": test, "times": times, "reps": reps}


def _ms(v: np.ndarray, digits: int) -> str:
    return f"{v.mean():.{digits}f} ± {v.std(ddof=1) / math.sqrt(v.size):.{digits}f}"


def rows_of(case: Case, res: dict[str, Any]) -> list[list[str]]:
    out = []
    for metric, name, digits in (
        ("err", "‖θ̂ − θ‖₂", 4),
        ("test", "excess test loss", 5),
    ):
        s = np.array(res[metric]["seller"])
        p = np.array(res[metric]["platform"])
        d = s - p
        se = d.std(ddof=1) / math.sqrt(d.size)
        out.append(
            [
                case.label,
                str(res["reps"]),
                name,
                _ms(s, digits),
                _ms(p, digits),
                f"{d.mean():+.{digits}f} ± {se:.{digits}f}",
                "yes" if abs(d.mean()) < 2 * se else "**no**",
            ]
        )
    return out


HEADER = [
    "learner",
    "R",
    "metric",
    "seller custody (mean ± s.e.)",
    "platform custody (mean ± s.e.)",
    "seller − platform (± s.e.)",
    "difference within 2 s.e.",
]


def same_coins(seed: int, write: bool) -> None:
    rows = []
    for case in CASES:
        draw = case.draw(np.random.default_rng(seed))
        diff = same_coins_difference(case, draw, seed + 1)
        rows.append([case.label, f"{diff:.3g}"])
        print(rows[-1], flush=True)
    cmd = (
        "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python "
        f"benchmarks/custody_equivalence.py --same-coins --seed {seed} --write"
    )
    body = (
        f"`{cmd}`\n\nThe designs of the section above, one data set each. The "
        "seller-custody path (raw records on the sellers' side, requests, reports and "
        "protocol state through JSON, every report validated) answered with the "
        "library's coins (`seller_generators(seed, n)`) against the platform-custody "
        "fit with `random_state=seed` on the market's intake-scaled records "
        "(`ldp_missing_logistic` with `round_size = 100` on both sides): the largest "
        "absolute difference of the fitted coefficients.\n\n"
        + markdown_table(["learner", "largest coefficient difference"], rows)
    )
    print(body)
    if write:
        write_section("Seller custody against platform custody: same coins", body)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--only", default=None, help="run the cases whose label contains this"
    )
    ap.add_argument("--write", action="store_true")
    ap.add_argument(
        "--same-coins",
        action="store_true",
        help="only check that both paths agree exactly on the library's coins",
    )
    args = ap.parse_args()
    if args.same_coins:
        same_coins(args.seed, args.write)
        return
    rows: list[list[str]] = []
    notes = []
    t0 = time.perf_counter()
    for case in CASES:
        if args.only and args.only not in case.label:
            continue
        res = run_case(case, args.reps, args.seed)
        rows += rows_of(case, res)
        notes.append(
            f"- {case.label}: {case.note}; fit time per repetition "
            f"{res['times']['seller'] / args.reps:.1f} s (seller custody, JSON "
            f"included) / {res['times']['platform'] / args.reps:.1f} s (platform, record "
            "intake included)."
        )
        print(markdown_table(HEADER, rows), flush=True)
    took = time.perf_counter() - t0
    cmd = (
        "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/custody_equivalence.py "
        f"--reps {args.reps} --seed {args.seed}"
        + (f" --only '{args.only}'" if args.only else "")
        + " --write"
    )
    body = (
        f"`{cmd}`\n\n{machine_note()}; {took:.0f} s. Per repetition one data set, "
        "fitted by both custodies with independent seeds (paired). Seller custody: the "
        "order's protocol answered seller by seller through the JSON of requests and "
        "reports, each seller scaling its raw records with the request's public scaling "
        "and every report validated, the protocol restored from its JSON state after "
        "every round; platform custody: the market's intake scaling and "
        "the learner's ordinary `fit`. Errors in raw units against the known truth; "
        "excess test loss on 20,000 fresh records (pinball at α = 0.3, cross-entropy, "
        "squared error).\n\n" + "\n".join(notes) + "\n\n" + markdown_table(HEADER, rows)
    )
    print(body)
    if args.write:
        write_section("Seller custody against platform custody: accuracy", body)


if __name__ == "__main__":
    main()
