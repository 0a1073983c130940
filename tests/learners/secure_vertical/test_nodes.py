"""Party nodes: each MPyC party in its own OS process with only its own block."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from learners.secure_vertical import PlainBackend, secure_newton
from learners.secure_vertical._mpyc_backend import free_ports, quantise
from learners.secure_vertical._nodes import (
    SessionPlan,
    finish_session,
    party_inputs,
    plan_session,
    read_party_csv,
)
from tests.learners.secure_vertical._data import v1_data

pytest.importorskip("mpyc")
ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _parties(rng: np.random.Generator, n: int = 160) -> dict[str, Any]:
    """V1 data split over two parties with partial overlap: A (label holder) holds
    records 0..n-11 with x1..x3 and y in {-1, +1}, B holds records 10..n-1 with
    x4..x6; keys are pseudonyms in a shuffled order at each party."""
    X, y01 = v1_data(rng, n=n)
    keys = np.array([f"p{int(v):06d}" for v in rng.choice(10**6, n, replace=False)])
    a = rng.permutation(np.arange(0, n - 10))
    b = rng.permutation(np.arange(10, n))
    return {
        "X": X, "y01": y01, "keys": keys, "a": a, "b": b,
        "A": (list(keys[a]), X[a, :3], 2 * y01[a] - 1),
        "B": (list(keys[b]), X[b, 3:], None),
    }  # fmt: skip


def _write_csv(
    path: Path, keys: list[str], X: np.ndarray, y: Any, names: list[str]
) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["key", *names, *(["y"] if y is not None else [])])
        for i, k in enumerate(keys):
            w.writerow(
                [
                    k,
                    *[repr(float(v)) for v in X[i]],
                    *([int(y[i])] if y is not None else []),
                ]
            )


def _plain_on_rounded_rows(d: dict[str, Any]) -> np.ndarray:
    """Independent reference: float64 Newton (tol 1e-12) on the records both parties
    hold, covariates truncated to the 2^-8 grid, intercept column 1."""
    both = np.intersect1d(d["a"], d["b"])
    X = quantise(d["X"][both])
    Z = np.hstack([np.ones((both.size, 1)), X])
    ops = PlainBackend()
    return secure_newton(ops, Z, d["y01"][both], d=7, tol=1e-12, max_iter=30).beta


def _start(plan_path: Path, index: int, peers: str, out: Path, work: Path,
           data: Path | None, timeout: float = 300.0) -> subprocess.Popen[bytes]:  # fmt: skip
    cmd = [sys.executable, "-m", "learners.secure_vertical.node", "--plan", str(plan_path),
           "--index", str(index), "--peers", peers, "--out", str(out), "--workdir", str(work),
           "--timeout", str(timeout), "--connect-timeout", "60"]  # fmt: skip
    if data is not None:
        cmd += ["--data", str(data)]
    with open(out.with_suffix(".log"), "wb") as log:
        return subprocess.Popen(cmd, env=ENV, cwd=ROOT, start_new_session=True,
                                stdout=log, stderr=subprocess.STDOUT)  # fmt: skip


def _log(tmp_path: Path, i: int) -> str:
    return (tmp_path / f"out_{i}.log").read_text(errors="replace")[-3000:]


def _session(
    tmp_path: Path, d: dict[str, Any], plan: SessionPlan
) -> tuple[list[Any], Path]:
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(json.dumps(plan.to_json()))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    keys_a, Xa, ya = d["A"]
    keys_b, Xb, _ = d["B"]
    _write_csv(tmp_path / "a" / "a.csv", keys_a, Xa, ya, ["x1", "x2", "x3"])
    _write_csv(tmp_path / "b" / "b.csv", keys_b, Xb, None, ["x4", "x5", "x6"])
    peers = ",".join(f"127.0.0.1:{p}" for p in free_ports(3))
    data = [tmp_path / "a" / "a.csv", tmp_path / "b" / "b.csv", None]
    procs = [_start(plan_path, i, peers, tmp_path / f"out_{i}.json", tmp_path / f"work_{i}",
                    data[i]) for i in range(3)]  # fmt: skip
    return procs, plan_path


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_three_party_processes_each_with_its_own_block_equal_the_plain_fit(
    rng: np.random.Generator, tmp_path: Path
) -> None:
    d = _parties(rng)
    plan = plan_session(["A", "B"], [d["A"][0], d["B"][0]], [3, 3],
                        params={"imputation": "complete_case"})  # fmt: skip
    procs, _ = _session(tmp_path, d, plan)
    try:
        for i, p in enumerate(procs):
            assert p.wait(timeout=600) == 0, _log(tmp_path, i)
    finally:
        _stop(procs)
    outs = [json.loads((tmp_path / f"out_{i}.json").read_text()) for i in range(3)]
    assert outs[0]["beta"] == outs[1]["beta"] == outs[2]["beta"]
    est = finish_session(plan, outs[2])  # the compute party's opened outputs
    ref = _plain_on_rounded_rows(d)
    # the fixed point's own error, as in test_mpc.py (docs/secure-vertical.md: about
    # 5e-8 at n = 100; its probabilistic truncation varies between runs, and 1e-8
    # failed here once at 1.005e-8)
    np.testing.assert_allclose(np.r_[est.intercept_, est.coef_], ref, rtol=0, atol=1e-7)
    assert est.converged_
    assert list(est.classes_) == [-1, 1]
    # R1 opens g, I and β per iteration (aggregates of size d, d²), nothing of size n
    assert est.ledger_.labels() == {"g", "I", "beta_t"}
    assert not est.ledger_.opens_dimension(150)
    # each party's directory holds its own block only; the compute party's none
    assert sorted(f.name for f in (tmp_path / "work_0").glob("data_*")) == [
        "data_0.npz"
    ]
    assert sorted(f.name for f in (tmp_path / "work_1").glob("data_*")) == [
        "data_1.npz"
    ]
    assert not list((tmp_path / "work_2").glob("data_*"))


def test_a_party_killed_mid_fit_fails_the_others_with_the_reason(
    rng: np.random.Generator, tmp_path: Path
) -> None:
    d = _parties(rng, n=120)
    plan = plan_session(["A", "B"], [d["A"][0], d["B"][0]], [3, 3],
                        params={"imputation": "complete_case", "max_iter": 25, "tol": 1e-300})  # fmt: skip
    procs, _ = _session(tmp_path, d, plan)
    try:
        for i in range(3):  # every party connected: the protocol is running
            deadline = time.monotonic() + 120
            while not (tmp_path / f"work_{i}" / "connected").exists():
                assert time.monotonic() < deadline, f"party {i} never connected"
                assert procs[i].poll() is None, _log(tmp_path, i)
                time.sleep(0.05)
        time.sleep(1.0)
        os.killpg(procs[1].pid, signal.SIGKILL)
        killed = time.monotonic()
        for i in (0, 2):
            assert procs[i].wait(timeout=30) == 75
        assert time.monotonic() - killed < 30
    finally:
        _stop(procs)
    outs = {i: json.loads((tmp_path / f"out_{i}.json").read_text()) for i in (0, 2)}
    for i, out in outs.items():
        # each survivor names a party that left it; once one survivor has stopped,
        # the other may see that one leave first (a matter of scheduling)
        assert out["party"] in {0, 1, 2} - {i}, out
        assert "dropped out" in out["error"], out
        assert not (tmp_path / f"work_{i}" / f"out_{i}.json").exists()
    assert any(
        out["party"] == 1 and out["error"].startswith("party 1 ('B') dropped out")
        for out in outs.values()
    ), outs


def test_party_inputs_hold_the_partys_own_rounded_block(
    rng: np.random.Generator,
) -> None:
    d = _parties(rng, n=60)
    plan = plan_session(["A", "B"], [d["A"][0], d["B"][0]], [3, 3],
                        params={"imputation": "complete_case"})  # fmt: skip
    der = plan.derive()
    both = sorted(set(d["A"][0]) & set(d["B"][0]))
    assert [k for k, r in zip(der.universe, der.rows, strict=True) if r] == both
    a = party_inputs(plan, 0, *d["A"], derived=der)
    b = party_inputs(plan, 1, *d["B"][:2], derived=der)
    assert set(a) == {"block_0", "y"}
    assert set(b) == {"block_1"}
    pos = {k: i for i, k in enumerate(d["keys"])}
    idx = [pos[k] for k in both]
    np.testing.assert_array_equal(a["block_0"][:, 0], 1.0)
    np.testing.assert_array_equal(a["block_0"][:, 1:], quantise(d["X"][idx, :3]))
    np.testing.assert_array_equal(b["block_1"], quantise(d["X"][idx, 3:]))
    np.testing.assert_array_equal(a["y"], d["y01"][idx])


def test_party_inputs_refuse_a_block_that_does_not_match_the_plan(
    rng: np.random.Generator,
) -> None:
    d = _parties(rng, n=40)
    keys_a, Xa, ya = d["A"]
    plan = plan_session(["A", "B"], [keys_a, d["B"][0]], [3, 3])
    with pytest.raises(ValueError, match=r"^keys: this block's keys differ"):
        party_inputs(plan, 0, keys_a[:-1], Xa[:-1], ya[:-1])
    with pytest.raises(ValueError, match=r"^keys: duplicate"):
        party_inputs(plan, 0, [keys_a[0], *keys_a[:-1]], Xa, ya)
    with pytest.raises(ValueError, match=r"^X must be finite with shape"):
        party_inputs(plan, 0, keys_a, Xa[:, :2], ya)
    with pytest.raises(ValueError, match=r"^y: the label holder"):
        party_inputs(plan, 0, keys_a, Xa, None)
    with pytest.raises(ValueError, match=r"^y: only the label holder"):
        party_inputs(plan, 1, d["B"][0], d["B"][1], np.ones(len(d["B"][0])))
    with pytest.raises(ValueError, match=r"^y: one label in \[-1.0, 1.0\]"):
        party_inputs(plan, 0, keys_a, Xa, (ya + 1) / 2)


def test_plan_refuses_bad_public_parameters() -> None:
    with pytest.raises(ValueError, match=r"^parties"):
        plan_session(["A", "A"], [["k"], ["k"]], [1, 1])
    with pytest.raises(ValueError, match=r"^keys\[1\]: duplicate"):
        plan_session(["A", "B"], [["k"], ["k", "k"]], [1, 1])
    with pytest.raises(ValueError, match=r"^params: unknown"):
        plan_session(["A", "B"], [["k"], ["k"]], [1, 1], params={"backend": "plain"})
    plan = plan_session(["A", "B"], [["k1", "k2"], ["k2"]], [1, 1],
                        params={"lam": 0.1}, party_epsilon=[1.0, 1.0])  # fmt: skip
    with pytest.raises(ValueError, match=r"^imputation: a distributed DP fit"):
        plan.derive()
    assert SessionPlan.from_json(json.loads(json.dumps(plan.to_json()))) == plan


def test_read_party_csv_names_the_column(tmp_path: Path) -> None:
    p = tmp_path / "b.csv"
    p.write_text("key,x4,y\nk1,0.5,1\n")
    with pytest.raises(ValueError, match=r"^y: only the label holder"):
        read_party_csv(p)
    p.write_text("key,x4\nk1,abc\n")
    with pytest.raises(ValueError, match=r"^x4: row 0 is not a number"):
        read_party_csv(p)
    p.write_text("key,x4\nk1,0.5\nk1,0.25\n")
    with pytest.raises(ValueError, match=r"^key: duplicate"):
        read_party_csv(p)
    p.write_text("key,x4\nk1,0.5\nk2,0.25\n")
    keys, names, X, y = read_party_csv(p, features=["x4"])
    assert keys == ["k1", "k2"]
    assert names == ["x4"]
    assert y is None
    np.testing.assert_array_equal(X, [[0.5], [0.25]])


def _threads(plan: SessionPlan, inputs: list[Any], **kw: Any) -> list[dict[str, Any]]:
    """The m parties of a session from threads of this process (each runs its own
    MPyC process with only its own inputs)."""
    from concurrent.futures import ThreadPoolExecutor

    from learners.secure_vertical._nodes import run_party

    peers = [f"127.0.0.1:{p}" for p in free_ports(plan.n_processes)]
    with ThreadPoolExecutor(plan.n_processes) as pool:
        futs = [pool.submit(run_party, plan, i, peers, inputs[i], timeout=600, **kw)
                for i in range(plan.n_processes)]  # fmt: skip
        return [f.result() for f in futs]


@pytest.mark.slow
def test_dp_session_equals_the_in_worker_mpc_fit_with_the_same_noise(
    rng: np.random.Generator,
) -> None:
    """A DP session (ε per party, objective perturbation drawn by parties 0 and 1
    inside their own processes) releases what the in-worker MPC fit releases with
    the same drawer seeds, and the same privacy report."""
    from learners.secure_vertical import SecureVerticalLogisticRegression

    n = 80
    X, y01 = v1_data(rng, n=n)
    X = X / 6.0
    keys = [f"k{i:04d}" for i in range(n)]
    eps = [2.0, 1.0]
    kw: dict[str, Any] = {"lam": 0.05, "dp_iterations": 6}
    seeds = [int(s) for s in np.random.default_rng(5).integers(0, 2**63, size=2)]
    worker = SecureVerticalLogisticRegression(
        backend="mpc", mpc_parties=3, mpc_timeout=900, random_state=5, **kw
    ).fit([X[:, :3], X[:, 3:]], 2 * y01 - 1, party_epsilon=eps)
    plan = plan_session(["A", "B"], [keys, keys], [3, 3], params=kw,
                        party_epsilon=eps, noise_seeds=seeds)  # fmt: skip
    inputs = [party_inputs(plan, 0, keys, X[:, :3], 2 * y01 - 1),
              party_inputs(plan, 1, keys, X[:, 3:]), None]  # fmt: skip
    outs = _threads(plan, inputs)
    est = finish_session(plan, outs[2])
    np.testing.assert_allclose(est.coef_, worker.coef_, rtol=0, atol=1e-6)
    assert est.intercept_ == pytest.approx(worker.intercept_, abs=1e-6)
    assert est.ledger_.labels() == {"beta", "grad_norm"}
    assert est.privacy_report_ is not None
    assert worker.privacy_report_ is not None
    assert est.privacy_report_.guarantee == "mpc_plus_dp"
    np.testing.assert_allclose(est.privacy_report_.sample_epsilon_total,
                               worker.privacy_report_.sample_epsilon_total, rtol=1e-12)  # fmt: skip
    assert (
        max(est.privacy_report_.sample_epsilon_total) <= 1.0 + 1e-9
    )  # min ε over holders


def _certificates(tmp: Path, m: int) -> None:
    """A CA and one certificate per party with the common name MPyC checks."""

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=tmp, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
        "ca.crt", "-days", "2", "-subj", "/CN=MPyC test CA")  # fmt: skip
    for i in range(m):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"p{i}.key", "-out",
            f"p{i}.csr", "-subj", f"/CN=MPyC party {i}")  # fmt: skip
        run("x509", "-req", "-in", f"p{i}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"p{i}.crt", "-days", "2")  # fmt: skip


def test_tls_session_runs_and_a_party_without_the_ca_is_refused(
    rng: np.random.Generator, tmp_path: Path
) -> None:
    """With TLS every connection is mutually authenticated: the session runs; a
    party whose certificate is signed by another CA never connects, and the others
    fail with the reason instead of waiting."""
    import shutil

    from learners.secure_vertical._nodes import SessionFailed, TLSFiles

    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    _certificates(tmp_path, 3)
    d = _parties(rng, n=60)
    plan = plan_session(["A", "B"], [d["A"][0], d["B"][0]], [3, 3],
                        params={"imputation": "complete_case", "max_iter": 2})  # fmt: skip
    inputs = [party_inputs(plan, 0, *d["A"]), party_inputs(plan, 1, *d["B"][:2]), None]
    tls = [TLSFiles(str(tmp_path / f"p{i}.crt"), str(tmp_path / f"p{i}.key"),
                    str(tmp_path / "ca.crt")) for i in range(3)]  # fmt: skip
    from concurrent.futures import ThreadPoolExecutor

    from learners.secure_vertical._nodes import run_party

    peers = [f"127.0.0.1:{p}" for p in free_ports(3)]
    with ThreadPoolExecutor(3) as pool:
        futs = [pool.submit(run_party, plan, i, peers, inputs[i], tls=tls[i], timeout=300)
                for i in range(3)]  # fmt: skip
        outs = [f.result() for f in futs]
    assert outs[0]["beta"] == outs[2]["beta"]
    assert outs[0]["n_iter"] == 2
    # party 2 with a certificate from a CA the others do not trust
    other = tmp_path / "other"
    other.mkdir()
    _certificates(other, 3)
    tls[2] = TLSFiles(
        str(other / "p2.crt"), str(other / "p2.key"), str(other / "ca.crt")
    )
    peers = [f"127.0.0.1:{p}" for p in free_ports(3)]
    with ThreadPoolExecutor(3) as pool:
        futs = [pool.submit(run_party, plan, i, peers, inputs[i], tls=tls[i], timeout=300,
                            connect_timeout=8) for i in range(3)]  # fmt: skip
        errors = []
        for f in futs:
            with pytest.raises(SessionFailed) as info:
                f.result()
            errors.append(info.value.reason)
    # The first data party to time out names the refused party; the other may instead
    # see that party drop out first (which one wins is a matter of scheduling).
    assert any(
        "did not connect within 8 s" in e and "party 2 (compute)" in e for e in errors[:2]
    ), errors
    assert all("dropped out" in e or "did not connect" in e for e in errors[:2]), errors
