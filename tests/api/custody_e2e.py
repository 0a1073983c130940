"""A seller-custody market end to end with real processes: the server
(``privmarket serve`` with an in-process worker, its log captured) and one
``privmarket seller serve`` process per seller, each holding only its own CSV file.

Every API response the test receives is kept, so that the database file, the server's
log and those responses can be scanned for the sellers' raw values (canaries).
"""

from __future__ import annotations

import csv
import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def canary(low: float, high: float) -> float:
    """A high-entropy value inside ``(low, high)``: 13 random decimal digits."""
    u = 0.05 + 0.9 * secrets.randbelow(10**13) / 10**13
    return float(f"{low + u * (high - low):.13g}")


def needles(value: float) -> list[str]:
    """Strings that would reveal ``value``: its CSV text and a run of 8 of its
    significant digits (found in any decimal rendering that keeps them)."""
    text = repr(value)
    digits = text.replace("-", "").replace(".", "").lstrip("0")
    return [text, digits[2:10]]


def _env(db: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PRIVMARKET_DATABASE_URL": f"sqlite:///{db}",
        "PRIVMARKET_API_KEY_SECRET_FILE": str(db.parent / "key-secret"),
        "PRIVMARKET_RATE_LIMIT_REGISTRATIONS": "0",
        "PRIVMARKET_WORKERS": "1",
        "PRIVMARKET_CUSTODY_POLL_SECONDS": "0.2",
        "PRIVMARKET_CUSTODY_ROUND_SECONDS": "180",
    }
    env.update(extra)
    return env


@dataclass
class Server:
    """A running ``privmarket serve`` and everything the test read from it."""

    base: str
    proc: subprocess.Popen[bytes]
    log: Path
    db: Path
    admin_key: str
    responses: list[str] = field(default_factory=list)

    def call(self, method: str, path: str, key: str | None = None, **kw: Any) -> Any:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        r = httpx.request(method, self.base + path, headers=headers, timeout=60, **kw)
        self.responses.append(f"{r.status_code} {dict(r.headers)} {r.text}")
        return r

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_server(tmp: Path, **env: str) -> Server:
    """``privmarket serve`` on a fresh SQLite file, plus an admin key."""
    db = tmp / "market.db"
    environ = _env(db, **env)
    key = subprocess.run(
        [sys.executable, "-m", "api.cli", "admin", "create-key", "--name", "root"],
        cwd=ROOT,
        env=environ,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    port = free_port()
    log = tmp / "server.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "serve", "--port", str(port)],
            cwd=ROOT,
            env=environ,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    server = Server(f"http://127.0.0.1:{port}", proc, log, db, key)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(server.base + "/healthz", timeout=2).status_code < 500:
                return server
        except httpx.HTTPError:
            time.sleep(0.2)
    server.stop()
    raise AssertionError(f"the server did not start: {log.read_text()[-2000:]}")


def write_csv(path: Path, names: list[str], X: np.ndarray, y: np.ndarray) -> None:
    """The seller's file: feature names then ``y``; NaN written as an empty cell."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow([*names, "y"])
        for row, target in zip(X, y, strict=True):
            cells = ["" if np.isnan(v) else repr(float(v)) for v in row]
            w.writerow([*cells, repr(float(target))])


@dataclass
class SellerProc:
    name: str
    key: str
    csv: Path
    log: Path
    proc: subprocess.Popen[str] | None = None
    output: str = ""


def register_sellers(
    server: Server,
    market_id: int,
    data: list[tuple[np.ndarray, np.ndarray]],
    names: list[str],
    tmp: Path,
    costs: list[float],
) -> list[SellerProc]:
    """Register one seller per ``(X_i, y_i)``, write its CSV, offer ``n_records``."""
    out = []
    for i, ((X, y), cost) in enumerate(zip(data, costs, strict=True)):
        r = server.call("POST", "/v1/sellers", json={"name": f"seller{i}"})
        assert r.status_code == 201, r.text
        key = r.json()["api_key"]
        body = {"n_records": len(y), "reported_cost": float(cost)}
        r = server.call("POST", f"/v1/markets/{market_id}/offers", key, json=body)
        assert r.status_code == 201, r.text
        path = tmp / f"seller{i}.csv"
        write_csv(path, names, X, y)
        out.append(SellerProc(f"seller{i}", key, path, tmp / f"seller{i}.jsonl"))
    return out


def start_sellers(
    server: Server, market_id: int, sellers: list[SellerProc], until_idle: float
) -> None:
    """One ``privmarket seller serve`` process per seller."""
    for s in sellers:
        s.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "api.cli",
                "seller",
                "serve",
                "--server",
                server.base,
                "--key",
                s.key,
                "--market",
                str(market_id),
                "--data",
                str(s.csv),
                "--until-idle",
                str(until_idle),
                "--log",
                str(s.log),
                "--poll",
                "0.2",
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    for s in sellers:  # each has read its file and is polling for requests
        assert s.proc is not None
        assert s.proc.stdout is not None
        first = s.proc.stdout.readline()
        s.output += first
        assert first.startswith("serving market"), first + s.proc.stdout.read()


def wait_sellers(sellers: list[SellerProc], timeout: float = 300) -> None:
    for s in sellers:
        assert s.proc is not None
        try:
            rest, _ = s.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            s.proc.kill()
            rest, _ = s.proc.communicate()
        s.output += rest
        assert s.proc.returncode == 0, s.output


def wait_order(server: Server, order_id: int, key: str, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = server.call("GET", f"/v1/orders/{order_id}", key).json()
        if body["status"] in ("succeeded", "failed"):
            return body
        time.sleep(0.3)
    raise AssertionError(f"order {order_id} did not finish: {body}")


def scan(
    server: Server, values: list[float], extra: list[Path] | None = None
) -> list[str]:
    """Where any canary shows up: the database files, the server log, the responses
    (and ``extra`` files, for the positive control)."""
    blobs: dict[str, str] = {}
    for path in sorted(server.db.parent.glob(server.db.name + "*")):
        blobs[path.name] = path.read_bytes().decode("latin-1")
    blobs["server.log"] = server.log.read_text(errors="replace")
    blobs["responses"] = "\n".join(server.responses)
    for path in extra or []:
        blobs[path.name] = path.read_text()
    found = []
    for v in values:
        for needle in needles(v):
            for name, text in blobs.items():
                if needle in text:
                    found.append(f"{needle} ({v!r}) in {name}")
    return found
