"""``privmarket worker``: separate worker processes for larger deployments."""

import logging
import signal
import threading

from market.config import Settings
from market.db import make_engine
from market.runtime.worker import Worker, recover


def run_worker(settings: Settings, *, once: bool = False, threads: int = 1) -> None:
    """Run the recovery sweep, then claim and run orders and jobs.

    ``once``: at most one order or job, then return (tests). Otherwise ``threads``
    claim loops run until SIGINT or SIGTERM; the running item finishes first (its lease
    lets another worker take over if this process is killed instead).
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    engine = make_engine(settings.database_url)
    try:
        recover(engine)
        if once:
            Worker(engine, lease_seconds=settings.job_lease_seconds).run_once()
            return
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        loops = [
            threading.Thread(
                target=Worker(
                    engine, lease_seconds=settings.job_lease_seconds
                ).run_forever,
                args=(stop,),
                name=f"privmarket-worker-{i}",
            )
            for i in range(threads)
        ]
        for t in loops:
            t.start()
        while any(t.is_alive() for t in loops):
            for t in loops:
                t.join(timeout=0.5)
    finally:
        engine.dispose()
