"""Allocation constant factors: ``allocate`` (default rule: the certified
optimum over public candidate models) against one scikit-learn ``LogisticRegression``
fit, before and after a change, ratios within one subprocess.

Each variant runs in its own subprocess with ``PYTHONPATH`` at its code (``--before``:
a git revision extracted with ``git archive``; "after": this checkout) and times, with
``benchmarks/scale.py``'s own functions (``wisconsin_row``: best of 15 each;
``allocate_row``: best of 5 / 2 / 1 by size) but the default configuration
(``certify="auto"``), ``allocate`` and the sklearn fit on the same data (the fit also
under one BLAS thread, as ``allocate`` runs: ``sklearn_1t_s``). It also
reports ``allocate``'s split (candidate models / range search) and the Newton steps
(Hessians built) of the candidate models. ``--big`` sizes run for "after" only unless
``--big-before`` (the old code took 168 s at m = 10⁶).

Run: ``python benchmarks/allocation_factors.py --before REV [--sizes 1000 100000]
[--big 1000000] [--rounds 2]`` from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from _common import extract_revision  # noqa: E402

TIMER = r"""
import json, sys
root = sys.argv[1]
sys.path.insert(0, root + "/benchmarks")
import scale
import mechanisms.allocation._reduced_newton as rn
from mechanisms import allocate
scale.CFG = scale.CFG.with_(certify="auto")
count = {"hessians": 0}  # ∇²F builds in one allocate (the Newton steps)
hessian = rn._hessian
def counted(*a, **k):
    count["hessians"] += 1
    return hessian(*a, **k)
rn._hessian = counted
rows = []
for m in [int(x) for x in sys.argv[2:]]:
    count["hessians"] = 0
    row = scale.wisconsin_row() if m == 0 else scale.allocate_row(m)
    if m == 0:
        from market.datasets import load_wisconsin, train_val_test_split
        import numpy as np
        X, y = load_wisconsin()
        sp = train_val_test_split(X, y, random_state=0)
        c = np.random.default_rng(0).uniform(1e-4, 5e-4, size=sp.y_train.size)
        count["hessians"] = 0
        a = allocate(sp.X_train, sp.y_train, c, scale.PRIOR, scale.WBC_CFG)
    else:
        X, y, c = scale.data(m)
        count["hessians"] = 0
        a = allocate(X, y, c, scale.PRIOR, scale.CFG)
    # sklearn again under one BLAS thread, as allocate runs: on a loaded 2-core machine
    # its two OpenBLAS threads' wake-ups make the unlimited timing swing 10-100 ms.
    from sklearn.linear_model import LogisticRegression
    from mechanisms.allocation._blas import one_blas_thread
    Xs, ys = (sp.X_train, sp.y_train) if m == 0 else (X, y)
    with one_blas_thread():
        t1, _ = scale.best_of(lambda: LogisticRegression().fit(Xs, ys),
                              15 if m == 0 else scale.repeats(m))
    row.update(sklearn_1t_s=t1, ratio_sklearn_1t=row["allocate_s"] / t1)
    row.update(case="wisconsin" if m == 0 else f"m={m}", hessians=count["hessians"],
               objective=a.objective, n_models=a.certificate.n_models,
               models_s=a.timings.get("models"), range_s=a.timings.get("range"))
    print(json.dumps(row), flush=True)
"""


def run(path: str, sizes: list[int]) -> list[dict[str, object]]:
    env = dict(os.environ, PYTHONPATH=path)
    res = subprocess.run(
        [sys.executable, "-c", TIMER, path, *map(str, sizes)],
        env=env, check=True, capture_output=True, text=True, cwd=path,
    )  # fmt: skip
    return [json.loads(line) for line in res.stdout.strip().splitlines()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 100_000])
    ap.add_argument("--big", type=int, nargs="*", default=[])
    ap.add_argument("--big-before", action="store_true")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        extract_revision(
            args.before, tmp, ["mechanisms", "learners", "market", "benchmarks"]
        )
        for r in range(args.rounds):
            for name, path in (("before", tmp), ("after", str(ROOT))):
                sizes = [0, *args.sizes]
                if name == "after" or args.big_before:
                    sizes += args.big
                for row in run(path, sizes):
                    row.update(round=r, variant=name, load=os.getloadavg()[0])
                    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
