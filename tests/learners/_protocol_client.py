"""Test helper: run a local protocol as the service and the sellers' clients would."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from learners import LocalProtocol, ReportRequest, answer_request


def as_client(
    proto: LocalProtocol,
    X: np.ndarray,
    y: np.ndarray,
    rngs: list[np.random.Generator],
    *,
    drop: set[int] = frozenset(),  # type: ignore[assignment]
    restart: bool = False,
    seen: Callable[[int, ReportRequest, dict[str, Any]], None] | None = None,
    stop: dict[int, int] | None = None,
) -> LocalProtocol:
    """Run ``proto`` as the service would: requests and reports through JSON, each
    seller answering on its own rows only; ``restart`` reloads the protocol from its
    JSON state between publishing and collecting every round. ``drop``: sellers that
    never answer; ``stop``: seller → the first round it no longer answers;
    ``seen(i, request, report)`` is called for every report sent."""
    starts = np.concatenate([[0], np.cumsum(proto.n_records)])
    while (reqs := proto.next_round()) is not None:
        if restart:
            proto = LocalProtocol.from_state(json.loads(json.dumps(proto.to_state())))
        reports = {}
        for i, req in reqs.items():
            if i in drop or (stop is not None and req.round >= stop.get(i, 1 << 30)):
                continue
            wire = ReportRequest.from_json(json.loads(json.dumps(req.to_json())))
            rows = slice(starts[i], starts[i + 1])
            rep = answer_request(wire, X[rows], y[rows], rng=rngs[i])
            reports[i] = json.loads(json.dumps(rep, allow_nan=False))
            if seen is not None:
                seen(i, wire, reports[i])
        proto.submit(reports)
    return proto
