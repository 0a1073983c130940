"""``privmarket worker``: separate worker processes for larger deployments."""

import logging
import signal
import threading

from market.config import Settings
from market.pipeline.deadline import clear_stop
from market.runtime.worker import Worker, recover
from market.store import make_engine


def run_worker(settings: Settings, *, once: bool = False, threads: int = 1) -> None:
    """Run the recovery sweep, then claim and run orders and jobs.

    ``once``: at most one order or job, then return (tests). Otherwise ``threads``
    claim loops run until SIGINT or SIGTERM: a running order is then handed back to
    the queue at its next cooperative check (well under a second; ``Worker.stop``) and
    the process exits; a trade-off job finishes first (its lease lets another worker
    take over if this process is killed instead).
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    engine = make_engine(settings.database_url)
    log = logging.getLogger("privmarket.worker")
    try:
        recover(engine)
        log.info(
            "worker started: %s thread(s) on %s; Ctrl-C or SIGTERM hands a running "
            "order back to the queue",
            1 if once else threads,
            engine.url.render_as_string(hide_password=True),
        )
        if once:
            Worker.from_settings(engine, settings).run_once()
            return
        stop = threading.Event()
        workers = [Worker.from_settings(engine, settings) for _ in range(threads)]

        def on_signal(*_: object) -> None:
            stop.set()
            for w in workers:
                w.stop()

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)
        loops = [
            threading.Thread(
                target=w.run_forever, args=(stop,), name=f"privmarket-worker-{i}"
            )
            for i, w in enumerate(workers)
        ]
        for t in loops:
            t.start()
        while any(t.is_alive() for t in loops):
            for t in loops:
                t.join(timeout=0.5)
        for w in workers:
            clear_stop(w.owner)  # the stop flag files of its payment processes
    finally:
        engine.dispose()
