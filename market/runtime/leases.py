"""Leases on running orders and jobs: owner ids, fenced updates, heartbeats.

A worker that claims a row (``status = "running"``) owns it until ``lease_expires_at``.
Every write the worker makes to the row afterwards is *fenced*: an ``UPDATE ... WHERE
lease_owner = <me> AND status = 'running'``, so a worker whose lease expired and was
taken over can no longer change the row (it notices and stops). A heartbeat thread
extends the lease every ``lease_seconds / 3`` while work runs.
"""

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from market import store
from market.store import Job, Order, RunStatus, utcnow

LeasedTable = type[Order] | type[Job]


def new_owner() -> str:
    """Return a unique lease owner id ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def owner_is_dead(owner: str | None) -> bool:
    """Whether ``owner`` names a process on this host that no longer exists.

    Owners on other hosts (or unparsable ones) are never declared dead here: their
    leases end by expiry only.
    """
    if not owner:
        return False
    parts = owner.split(":")
    if len(parts) != 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # exists, owned by someone else
        return False
    return False


def touch(
    engine: Engine,
    table: LeasedTable,
    row_id: int,
    *,
    owner: str,
    lease_seconds: float,
    **values: Any,
) -> bool:
    """Extend the lease and set ``values`` on a row we own; ``False`` if we lost it."""
    now = utcnow()
    stmt = (
        sa.update(table)
        .where(
            table.id == row_id,  # type: ignore[arg-type]
            table.lease_owner == owner,  # type: ignore[arg-type]
            table.status == RunStatus.RUNNING,  # type: ignore[arg-type]
        )
        .values(
            heartbeat_at=now,
            lease_expires_at=now + timedelta(seconds=lease_seconds),
            **values,
        )
    )
    with store.session_scope(engine, write=True) as session:
        result = session.execute(stmt)
        session.commit()
        return bool(result.rowcount)  # type: ignore[attr-defined]


@contextmanager
def heartbeat(
    engine: Engine,
    table: LeasedTable,
    row_id: int,
    *,
    owner: str,
    lease_seconds: float,
) -> Iterator[threading.Event]:
    """Extend the lease in a background thread; yield an event set once it is lost."""
    lost = threading.Event()
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(lease_seconds / 3.0):
            try:
                ok = touch(
                    engine, table, row_id, owner=owner, lease_seconds=lease_seconds
                )
            except Exception:  # a transient database error: try again next beat
                continue
            if not ok:
                lost.set()
                return

    thread = threading.Thread(target=beat, name=f"heartbeat-{row_id}", daemon=True)
    thread.start()
    try:
        yield lost
    finally:
        stop.set()
        thread.join(timeout=5.0)
