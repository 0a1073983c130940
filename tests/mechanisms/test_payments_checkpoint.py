"""The payments' ``checkpoint`` hook (issue 14: bounded order work): called before
every allocation re-solve, and what it raises stops the payments at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from mechanisms.payments._executors import SerialExecutor
from mechanisms.payments._payments import myerson_payments
from tests.conftest import SEED
from tests.mechanisms.test_payments_instances import small_instance


class Stop(Exception):
    pass


def test_checkpoint_runs_before_every_resolve() -> None:
    ins = small_instance(np.random.default_rng(SEED), m=5)
    calls = []
    paid = myerson_payments(
        ins.X, ins.y, ins.costs, ins.prior, ins.cfg,
        executor=SerialExecutor(), checkpoint=lambda: calls.append(1),
    )  # fmt: skip
    solves = sum(s.n_solves for s in paid.sellers)
    assert solves > 0
    # once per re-solve (the verification re-solves included), never skipped
    assert len(calls) >= solves


@pytest.mark.parametrize("pool", ["serial", "thread"])
def test_raising_checkpoint_stops_the_payments(pool: str) -> None:
    ins = small_instance(np.random.default_rng(SEED), m=5)
    calls = {"n": 0}

    def checkpoint() -> None:
        calls["n"] += 1
        if calls["n"] > 3:
            raise Stop

    executor = SerialExecutor() if pool == "serial" else ThreadPoolExecutor(1)
    with executor, pytest.raises(Stop):
        myerson_payments(
            ins.X, ins.y, ins.costs, ins.prior, ins.cfg,
            executor=executor, checkpoint=checkpoint,
        )  # fmt: skip
    # the first raise ended its seller's sweep; any other seller queued on the
    # executor stops at its first re-solve (one more call each at most)
    assert 4 <= calls["n"] <= 3 + len(ins.costs)
