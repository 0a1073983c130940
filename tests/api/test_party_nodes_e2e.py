"""End to end: a seller-custody vertical market whose two data parties run their nodes
(``privmarket party serve``) in separate processes, each with only its own CSV; the
platform's worker runs the third (compute) party and receives only the opened outputs.

* the order succeeds with ``backend: "mpc"``; with DP off (the test-only switch) the
  model equals the plain fit on the same rounded rows within 1e-8;
* planted canary values of the CSVs appear nowhere in the platform's database file,
  its logs or any API response;
* a node killed mid-fit fails the order with the reason, the ledgers are untouched,
  and a retry (the node restarted) succeeds.
"""

from __future__ import annotations

import csv
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from learners.secure_vertical import PlainBackend, secure_newton
from learners.secure_vertical._mpyc_backend import quantise
from market.runtime.party_sessions import NO_DP_ENV
from tests.api.conftest import fast_settings
from tests.api.test_party_nodes_api import custody_vertical_market

pytest.importorskip("mpyc")
ROOT = Path(__file__).resolve().parents[2]
CANARIES = [3.14159265, -2.71828182, 1.41421356, -1.73205080]
BETA = np.array([-0.5, 1.0, -1.0, 0.5, 0.5, -0.5, 0.25])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Live:
    """The app served by uvicorn in a thread (its in-process worker runs orders),
    every API response body recorded, every log record of the process captured."""

    def __init__(self, database_url: str, log_path: Path) -> None:
        import uvicorn

        from api.main import create_app

        self.settings = fast_settings(database_url, workers=1, job_lease_seconds=30)
        self.app = create_app(self.settings)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port,
                                log_level="info", access_log=True)  # fmt: skip
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.responses: list[bytes] = []
        self.handler = logging.FileHandler(log_path)
        self.handler.setLevel(logging.DEBUG)
        self.handler.setFormatter(
            logging.Formatter("%(name)s %(levelname)s %(message)s")
        )

    def __enter__(self) -> Live:
        root = logging.getLogger()
        root.addHandler(self.handler)
        self._level = root.level
        root.setLevel(logging.DEBUG)
        self.thread.start()
        end = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < end, "server did not start"
            time.sleep(0.05)
        self.http = httpx.Client(base_url=self.url, timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()
        self.server.should_exit = True
        self.thread.join(timeout=30)
        root = logging.getLogger()
        root.removeHandler(self.handler)
        root.setLevel(self._level)
        self.handler.close()

    def call(self, method: str, path: str, headers: dict[str, str] | None = None,
             **kw: Any) -> httpx.Response:  # fmt: skip
        r = self.http.request(method, path, headers=headers, **kw)
        self.responses.append(r.content)
        return r

    def register(self, role: str, name: str) -> tuple[dict[str, str], str]:
        r = self.call("POST", f"/v1/{role}s", json={"name": name})
        assert r.status_code == 201, r.text
        key = r.json()["api_key"]
        return {"Authorization": f"Bearer {key}"}, key

    def admin(self) -> dict[str, str]:
        from market.access import accounts
        from market.store import Role, session_scope

        with session_scope(self.app.state.engine) as session:
            _, key = accounts.create_account(
                session, role=Role.ADMIN, name="root", settings=self.settings
            )
        return {"Authorization": f"Bearer {key}"}


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.clip(rng.standard_normal((n, 6)), -3.9, 3.9)
    eta = BETA[0] + X @ BETA[1:]
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-eta)), 1.0, -1.0)
    X[:2, 0] = CANARIES[:2]  # planted in party A's block
    X[:2, 3] = CANARIES[2:]  # planted in party B's block
    return X, y


def _write(
    path: Path, keys: list[str], X: np.ndarray, names: list[str], y: Any
) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["key", *names, *(["y"] if y is not None else [])])
        for i, k in enumerate(keys):
            w.writerow([k, *[repr(float(v)) for v in X[i]],
                        *([int(y[i])] if y is not None else [])])  # fmt: skip


def _node(live: Live, key: str, mid: int, party: str, data: Path, log: Path) -> subprocess.Popen[bytes]:  # fmt: skip
    cmd = [sys.executable, "-c", "from api.cli import app; app()", "party", "serve",
           "--server", live.url, "--key", key, "--market", str(mid), "--party", party,
           "--data", str(data), "--until-idle", "120"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log, "ab") as fh:
        return subprocess.Popen(cmd, env=env, cwd=data.parent, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


def _stop(p: subprocess.Popen[bytes]) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def _wait_node(live: Live, mid: int, party: str, headers: dict[str, str]) -> None:
    end = time.monotonic() + 120
    while time.monotonic() < end:
        r = live.call("GET", f"/v1/markets/{mid}/nodes/{party}", headers)
        if r.status_code == 200:
            return
        time.sleep(0.2)
    raise AssertionError(f"node of {party} never registered")


def _order(live: Live, mid: int, buyer: dict[str, str]) -> int:
    body = {"learner": "secure_vertical_logistic", "budget": 50.0, "gamma": 0.05,
            "params": {"backend": "mpc", "imputation": "complete_case"}}  # fmt: skip
    r = live.call("POST", f"/v1/markets/{mid}/orders", buyer, json=body)
    assert r.status_code == 202, r.text
    return int(r.json()["id"])


def _finish(live: Live, oid: int, buyer: dict[str, str], timeout: float = 600) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st = live.call("GET", f"/v1/orders/{oid}", buyer).json()
        if st["status"] in ("succeeded", "failed"):
            return st
        time.sleep(0.2)
    raise AssertionError(f"order {oid} did not finish")


def _mpc_child_connected(node_pid: int) -> bool:
    """Whether the node's MPyC party process exists and is connected to its peers."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text().split()
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat[4]) != node_pid:  # process group of the node
            continue
        if any(c.endswith(b"_mpyc_main.py") for c in cmd):
            job = Path(cmd[2].decode())
            return (job / "connected").exists()
    return False


def _ledgers(live: Live, sellers: list[dict[str, str]]) -> list[Any]:
    return [(live.call("GET", "/v1/sellers/me/earnings", h).json(),
             live.call("GET", "/v1/sellers/me/privacy", h).json()) for h in sellers]  # fmt: skip


@pytest.fixture
def live(database_url: str, tmp_path: Path) -> Iterator[Live]:
    if not database_url.startswith("sqlite"):
        pytest.skip("the database file scan needs SQLite")
    with Live(database_url, tmp_path / "platform.log") as server:
        yield server


@pytest.mark.slow
def test_two_party_nodes_end_to_end(
    live: Live, tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NO_DP_ENV, "1")  # test-only: compare with the plain fit
    n = 150
    X, y = _data(n, seed=3)
    keys = [f"person{i:04d}" for i in range(n)]
    held_a, held_b = keys[:140], keys[8:]  # partial overlap (complete-case rows 8..139)
    idx = {k: i for i, k in enumerate(keys)}
    admin = live.admin()
    r = live.call("POST", "/v1/markets", admin, json=custody_vertical_market())
    assert r.status_code == 201, r.text
    mid = int(r.json()["id"])
    (ha, ka), (hb, kb) = live.register("seller", "A"), live.register("seller", "B")
    for h, party, held, cost in ((ha, "A", held_a, 0.1), (hb, "B", held_b, 0.2)):
        r = live.call("POST", f"/v1/markets/{mid}/offers", h,
                      json={"party": party, "keys": held, "reported_cost": cost})  # fmt: skip
        assert r.status_code == 201, r.text
    # each party's own directory and CSV (A: x1..x3 and y; B: x4..x6)
    (tmp_path / "A").mkdir()
    (tmp_path / "B").mkdir()
    rows_a = [idx[k] for k in held_a]
    rows_b = [idx[k] for k in held_b]
    _write(
        tmp_path / "A" / "a.csv", held_a, X[rows_a, :3], ["x1", "x2", "x3"], y[rows_a]
    )
    _write(tmp_path / "B" / "b.csv", held_b, X[rows_b, 3:], ["x4", "x5", "x6"], None)
    nodes = {
        "A": _node(
            live, ka, mid, "A", tmp_path / "A" / "a.csv", tmp_path / "A" / "node.log"
        ),
        "B": _node(
            live, kb, mid, "B", tmp_path / "B" / "b.csv", tmp_path / "B" / "node.log"
        ),
    }
    try:
        _wait_node(live, mid, "A", ha)
        _wait_node(live, mid, "B", hb)
        buyer, _ = live.register("buyer", "buyer")
        oid = _order(live, mid, buyer)
        st = _finish(live, oid, buyer)
        assert st["status"] == "succeeded", st
        model = live.call("GET", f"/v1/orders/{oid}/model", buyer).json()
        assert model["backend"] == "mpc"
        assert model["privacy"]["guarantee"] == "mpc_plus_dp"
        assert model["privacy"]["stages"]  # accounting of the allocated ε
        assert model["privacy"]["custody"] == "seller"  # the platform held no block
        # the plain fit on the same rounded rows (complete cases, public scaling)
        both = sorted(set(rows_a) & set(rows_b))
        low, high = -4.0, 4.0
        Xs = quantise((2 * (X[both] - low) / (high - low) - 1) / np.sqrt(6))
        Z = np.hstack([np.ones((len(both), 1)), Xs])
        lam = float(
            live.call("GET", f"/v1/markets/{mid}", buyer).json()["mechanism"]["lam"]
        )
        ref = secure_newton(PlainBackend(), Z, (y[both] + 1) / 2, d=7, lam=lam,
                            tol=1e-12, max_iter=30).beta  # fmt: skip
        scale = 2 / ((high - low) * np.sqrt(6))
        coef = ref[1:] * scale
        intercept = ref[0] + float(
            np.sum(ref[1:] * (-2 * low / (high - low) - 1) / np.sqrt(6))
        )
        np.testing.assert_allclose(model["coefficients"], coef, rtol=0, atol=1e-8)
        assert model["intercept"] == pytest.approx(intercept, abs=1e-8)
        assert not any(
            150 in o["shape"] or len(both) in o["shape"] for o in model["opened"]
        )
        for h, party in ((ha, "A"), (hb, "B")):
            node = live.call("GET", f"/v1/markets/{mid}/nodes/{party}", h).json()
            assert node["last_session_status"] == "succeeded"
        paid = live.call("GET", f"/v1/orders/{oid}/allocations", admin).json()
        assert len(paid["items"]) == 2

        # --- a node killed mid-fit -------------------------------------------------
        before = _ledgers(live, [ha, hb])
        oid2 = _order(live, mid, buyer)
        end = time.monotonic() + 300
        while not _mpc_child_connected(nodes["B"].pid):
            assert time.monotonic() < end, "B's MPyC party never connected"
            time.sleep(0.05)
        time.sleep(0.5)
        _stop(nodes["B"])
        killed = time.monotonic()
        st2 = _finish(live, oid2, buyer, timeout=120)
        assert time.monotonic() - killed < 60
        assert st2["status"] == "failed", st2
        assert "party 1 ('B') dropped out" in st2["error"], st2["error"]
        assert "nothing was paid or charged" in st2["error"]
        assert _ledgers(live, [ha, hb]) == before
        r = live.call("GET", f"/v1/orders/{oid2}/allocations", admin)
        assert r.status_code != 200 or r.json()["items"] == []

        # --- retry with the node restarted ----------------------------------------
        old_port = live.call("GET", f"/v1/markets/{mid}/nodes/B", hb).json()["port"]
        nodes["B"] = _node(
            live, kb, mid, "B", tmp_path / "B" / "b.csv", tmp_path / "B" / "node.log"
        )
        end = time.monotonic() + 120
        while (
            live.call("GET", f"/v1/markets/{mid}/nodes/B", hb).json()["port"]
            == old_port
        ):
            assert time.monotonic() < end, "the restarted node never registered"
            time.sleep(0.2)
        oid3 = _order(live, mid, buyer)
        st3 = _finish(live, oid3, buyer)
        assert st3["status"] == "succeeded", st3
        model3 = live.call("GET", f"/v1/orders/{oid3}/model", buyer).json()
        np.testing.assert_allclose(model3["coefficients"], coef, rtol=0, atol=1e-8)
    finally:
        for p in nodes.values():
            _stop(p)
    # --- the canaries never reached the platform --------------------------------------
    db_path = Path(database_url.removeprefix("sqlite:///"))
    platform_bytes = [p.read_bytes() for p in db_path.parent.glob(db_path.name + "*")]
    platform_bytes.append((tmp_path / "platform.log").read_bytes())
    platform_bytes.extend(live.responses)
    assert len(live.responses) > 20
    for canary in CANARIES:
        for form in {repr(canary), f"{canary:.6f}", f"{abs(canary):.5f}"}:
            for blob in platform_bytes:
                assert form.encode() not in blob, f"canary {form} found on the platform"
    # the nodes' CSVs did hold them (the scan looks for something that exists)
    assert repr(CANARIES[0]).encode() in (tmp_path / "A" / "a.csv").read_bytes()


@pytest.mark.slow
def test_a_dp_order_between_party_nodes(live: Live, tmp_path: Path) -> None:
    """The production path (DP on): the release is labelled ``mpc_plus_dp`` with
    custody ``seller``, each party is paid and charged at most its allocated ε."""
    n = 120
    X, y = _data(n, seed=4)
    keys = [f"person{i:04d}" for i in range(n)]
    admin = live.admin()
    r = live.call("POST", "/v1/markets", admin, json=custody_vertical_market())
    assert r.status_code == 201, r.text
    mid = int(r.json()["id"])
    (ha, ka), (hb, kb) = live.register("seller", "A"), live.register("seller", "B")
    for h, party in ((ha, "A"), (hb, "B")):
        r = live.call("POST", f"/v1/markets/{mid}/offers", h,
                      json={"party": party, "keys": keys, "reported_cost": 0.1})  # fmt: skip
        assert r.status_code == 201, r.text
    (tmp_path / "A").mkdir()
    (tmp_path / "B").mkdir()
    _write(tmp_path / "A" / "a.csv", keys, X[:, :3], ["x1", "x2", "x3"], y)
    _write(tmp_path / "B" / "b.csv", keys, X[:, 3:], ["x4", "x5", "x6"], None)
    nodes = [
        _node(
            live, ka, mid, "A", tmp_path / "A" / "a.csv", tmp_path / "A" / "node.log"
        ),
        _node(
            live, kb, mid, "B", tmp_path / "B" / "b.csv", tmp_path / "B" / "node.log"
        ),
    ]
    try:
        _wait_node(live, mid, "A", ha)
        _wait_node(live, mid, "B", hb)
        buyer, _ = live.register("buyer", "buyer")
        oid = _order(live, mid, buyer)
        st = _finish(live, oid, buyer)
        assert st["status"] == "succeeded", st
    finally:
        for p in nodes:
            _stop(p)
    model = live.call("GET", f"/v1/orders/{oid}/model", buyer).json()
    assert model["privacy"]["guarantee"] == "mpc_plus_dp"
    assert model["privacy"]["custody"] == "seller"
    assert {o["label"] for o in model["opened"]} == {
        "beta",
        "grad_norm",
    }  # R2, fixed steps
    allocs = live.call("GET", f"/v1/orders/{oid}/allocations", admin).json()["items"]
    assert len(allocs) == 2
    for h, a in zip((ha, hb), sorted(allocs, key=lambda a: a["offer_id"]), strict=True):
        priv = live.call("GET", "/v1/sellers/me/privacy", h).json()["items"][0]
        assert 0 < priv["epsilon_spent"] <= a["epsilon"] + 1e-9
