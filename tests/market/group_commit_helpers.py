"""Helper for the group-commit tests (the writer itself and the intake through the API)."""

import threading

import sqlalchemy as sa

from market.store import GroupCommitWriter


def hold(writer: GroupCommitWriter) -> threading.Event:
    """Occupy the writer thread until the returned event is set, so that the jobs
    submitted meanwhile queue up and form one batch."""
    release, started = threading.Event(), threading.Event()

    def gate(conn: sa.Connection) -> None:
        started.set()
        assert release.wait(30)

    writer.submit(gate, lambda result, exc: None, durable=False)
    assert started.wait(30)
    return release
