"""How often is an allocation at random accepted settings certified optimal?

Draws instances as the money property test does
(``tests/mechanisms/test_promises_property.py``: every prior family, settings
log-uniform over ``SETTING_RANGES``, reports at the support's edges, 2–6 sellers, both
modes) and, with ``--caps``, gives each seller a lifetime cap ``ε_i^max`` with
probability 1/2, log-uniform in ``[e⁻³, e]·eps_avg_max`` (caps that bind). Prints the
count of each ``Allocation.status`` per mode, and the instances that are not
``optimal`` (nor ``infeasible``: fewer than ``m/k`` positive caps).

Usage::

    python benchmarks/allocation_status.py --seed 3 --n 1500 [--caps]
    # an older checkout, same draws:
    PYTHONPATH=/path/to/old python /path/to/new/benchmarks/allocation_status.py ...
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from mechanisms import allocate  # noqa: E402
from tests.mechanisms.test_promises_property import random_instance  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--n", type=int, default=1500)
    ap.add_argument("--caps", action="store_true", help="binding lifetime caps")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    odd = []
    t0 = time.perf_counter()
    slowest = 0.0
    for j in range(args.n):
        ins = random_instance(rng)
        m, cap = len(ins["costs"]), ins["cfg"].eps_avg_max
        draw = cap * np.exp(rng.uniform(-3.0, 1.0, m))
        eps_max = np.where(rng.random(m) < 0.5, draw, np.inf)
        t = time.perf_counter()
        out = allocate(
            ins["X"], ins["y"], ins["costs"], ins["prior"], ins["cfg"],
            eps_max if args.caps else None,
        )  # fmt: skip
        slowest = max(slowest, time.perf_counter() - t)
        status = str(out.status)
        counts[(status, ins["cfg"].mode)] += 1
        if status not in ("optimal", "infeasible"):
            odd.append((j, status, ins["cfg"].mode, out.message[:100]))
    total = time.perf_counter() - t0
    print(f"seed {args.seed}, {args.n} instances, caps={args.caps}: {total:.1f} s "
          f"(slowest allocate {slowest:.2f} s)")  # fmt: skip
    print("| status | default | strict |")
    print("|---|---|---|")
    for status in sorted({s for s, _ in counts}):
        print(
            f"| {status} | {counts[(status, 'default')]} | {counts[(status, 'strict')]} |"
        )
    for row in odd:
        print(row)


if __name__ == "__main__":
    main()
