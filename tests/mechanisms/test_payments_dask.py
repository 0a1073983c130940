"""The Dask payments path (issue 16): a ``LocalCluster`` with 2 worker processes.

Checks that the payments on Dask equal the in-process ones, that the job is scattered
to the workers once (every chunk receives a reference, never the job itself), that
chunks are sized by the cluster's real worker count, and that the market's numerics
adapter runs an order's payments on the scheduler named by
``PRIVMARKET_DASK_SCHEDULER``.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest

from market import numerics
from market.config import get_settings
from market.numerics import executors
from mechanisms.payments import DaskExecutor, worker_count
from mechanisms.payments._executors import SerialExecutor, shrinking_chunks
from mechanisms.payments._payments import myerson_payments
from tests.conftest import SEED
from tests.mechanisms.test_payments_instances import broad_instance

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as c:
        yield c


class RecordingDask(DaskExecutor):
    """Records what each task receives as its shared argument."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.shared: list[Any] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.shared.append(args[0])
        return super().submit(fn, *args, **kwargs)


def test_dask_payments_equal_serial_and_scatter_once(cluster: Any) -> None:
    ins = broad_instance(np.random.default_rng(SEED), m=24)
    sellers = list(range(16))  # 2 per chunk
    ser = myerson_payments(
        ins.X, ins.y, ins.costs, ins.prior, ins.cfg,
        sellers=sellers, executor=SerialExecutor(),
    )  # fmt: skip
    with distributed.Client(cluster) as client:
        pool = RecordingDask(client)
        assert worker_count(pool) == 2
        assert worker_count(client.get_executor()) == 2
        pay = myerson_payments(
            ins.X, ins.y, ins.costs, ins.prior, ins.cfg,
            sellers=sellers, executor=pool, base=ser.allocation,
        )  # fmt: skip
    np.testing.assert_allclose(pay.payments, ser.payments, rtol=1e-12, atol=0)
    assert pay.rule_certified == ser.rule_certified
    # every chunk for the 2-worker cluster handed the scattered job
    assert len(pool.shared) == len(shrinking_chunks(sellers, 2))
    assert all(isinstance(s, distributed.Future) for s in pool.shared)
    assert len({s.key for s in pool.shared}) == 1


def test_worker_setting_runs_payments_on_the_scheduler(
    cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ins = broad_instance(np.random.default_rng(SEED + 1), m=10)
    eps_max = np.full(ins.costs.size, np.inf)
    local = numerics.myerson_payments(
        ins.X, ins.y, ins.costs, prior=ins.prior, config=ins.cfg, eps_max=eps_max
    )
    seen: list[Any] = []
    real = numerics.dask_executor

    def spy(address: str) -> Any:
        seen.append(address)
        return real(address)

    monkeypatch.setenv("PRIVMARKET_DASK_SCHEDULER", cluster.scheduler_address)
    monkeypatch.setattr(executors, "SERIAL_PAYMENTS_MAX", 0)
    monkeypatch.setattr(executors, "dask_executor", spy)
    get_settings.cache_clear()
    try:
        remote = numerics.myerson_payments(
            ins.X, ins.y, ins.costs, prior=ins.prior, config=ins.cfg, eps_max=eps_max
        )
    finally:
        get_settings.cache_clear()
    assert seen == [cluster.scheduler_address]
    np.testing.assert_allclose(remote.payments, local.payments, rtol=1e-12, atol=0)
