"""API load: ``POST /v1/markets/{id}/offers`` throughput and latency vs ``/healthz``.

A real ``privmarket serve`` (uvicorn, SQLite WAL with ``synchronous=FULL``, HMAC-SHA-256
API-key hashes, no worker threads) runs in a subprocess on loopback; httpx clients
in ``--clients`` threads send requests. First ``/healthz`` (trivial endpoint of the
same app, same run), then one offer per registered seller (a Wisconsin record with 30
features: validation against the schema, public-bound scaling, one committed write).
Sellers are registered before timing starts. Bounded: ``--sellers`` offers,
``--health`` health requests, loopback only.

    python benchmarks/api_load.py --sellers 400 --health 2000 --clients 8

``--bulk N`` then ingests N one-record offers (new sellers, Wisconsin records) into a
second market with ``POST /v1/markets/{id}/offers:bulk`` in requests of
``--bulk-batch`` rows from ``--bulk-clients`` threads, and prints rows per second and
the implied time for 10⁶ offers:

    python benchmarks/api_load.py --sellers 0 --health 0 --bulk 100000 --bulk-batch 10000
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from market.datasets import WBC_FEATURE_BOUNDS  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(*args: str, env: dict[str, str], **kw: object) -> subprocess.Popen[str]:
    code = "from api.cli import app; app()"
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], cwd=ROOT, env=env, text=True, **kw
    )  # type: ignore[call-overload]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _py_spy(pid: int, out: str | None) -> subprocess.Popen[bytes] | None:
    """Start ``py-spy record`` on the server (``--profile``; py-spy is not a dependency)."""
    if out is None:
        return None
    cmd = ["py-spy", "record", "--pid", str(pid), "--format", "raw", "-o", out]
    spy = subprocess.Popen([*cmd, "--rate", "250", "--threads", "--gil"])
    time.sleep(1.0)  # let it attach before the phase starts
    return spy


def _run(
    n: int,
    clients: int,
    send: Callable[[httpx.Client, int], httpx.Response],
    base: str,
    timeout: float = 30,
) -> tuple[float, np.ndarray, int]:
    """Send ``n`` requests from ``clients`` threads; return (seconds, latencies, errors)."""
    lat = np.zeros(n)
    errors = [0]
    nxt = iter(range(n))
    lock = threading.Lock()

    def worker() -> None:
        with httpx.Client(base_url=base, timeout=timeout) as c:
            while True:
                with lock:
                    i = next(nxt, None)
                if i is None:
                    return
                t = time.perf_counter()
                r = send(c, i)
                lat[i] = time.perf_counter() - t
                if r.status_code >= 300:
                    with lock:
                        errors[0] += 1

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, lat, errors[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sellers", type=int, default=400)
    ap.add_argument("--health", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--bulk", type=int, default=0)
    ap.add_argument("--bulk-batch", type=int, default=10_000)
    ap.add_argument("--bulk-clients", type=int, default=2)
    ap.add_argument(
        "--profile",
        metavar="FILE",
        help="record the server with py-spy during the offers phase (collapsed stacks)",
    )
    args = ap.parse_args()
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    X, y = data.data, np.where(data.target == 1, 1, -1)
    tmp = tempfile.mkdtemp(prefix="privmarket-load-")
    env = {
        **os.environ,
        "PRIVMARKET_DATABASE_URL": f"sqlite:///{tmp}/load.db",
        "PRIVMARKET_WORKERS": "0",
        # setup registers --sellers accounts from one address: limits stay on (every
        # request is still counted) but high enough not to refuse the setup
        "PRIVMARKET_RATE_LIMIT_REGISTRATIONS": "1000000",
        "PRIVMARKET_RATE_LIMIT_WRITES": "1000000",
    }
    key = _cli("admin", "create-key", env=env, stdout=subprocess.PIPE).communicate()[0]
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = _cli(
        "serve",
        "--port",
        str(port),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        admin = {"Authorization": f"Bearer {key.strip()}"}
        features = [
            {"name": str(n), "low": lo, "high": hi}
            for n, (lo, hi) in zip(data.feature_names, WBC_FEATURE_BOUNDS, strict=True)
        ]
        body = {
            "name": "load",
            "task": "classification",
            "features": features,
            "cost_prior": {"family": "uniform", "params": {"low": 0, "high": 1}},
            "out_of_bounds": "clip",
        }
        setup = httpx.Client(base_url=base, timeout=120)
        mid = setup.post("/v1/markets", headers=admin, json=body).json()["id"]
        keys = [
            setup.post("/v1/sellers", json={"name": f"s{i}"}).json()["api_key"]
            for i in range(args.sellers)
        ]
        # One unauthenticated offer (401) before timing: FastAPI builds an included
        # router's routes on its first request, a one-off cost not to count per offer.
        setup.post(f"/v1/markets/{mid}/offers", json={})
        setup.close()

        def health(c: httpx.Client, i: int) -> httpx.Response:
            return c.get("/healthz")

        def offer(c: httpx.Client, i: int) -> httpx.Response:
            j = i % len(y)
            rec = {
                "records": [{"x": X[j].tolist(), "y": int(y[j])}],
                "reported_cost": 0.5,
            }
            headers = {"Authorization": f"Bearer {keys[i]}"}
            return c.post(f"/v1/markets/{mid}/offers", headers=headers, json=rec)

        rows = []
        for name, n, send in (
            ("GET /healthz", args.health, health),
            ("POST offers", args.sellers, offer),
        ):
            if n == 0:
                continue
            spy = _py_spy(server.pid, args.profile) if send is offer else None
            cpu0 = _cpu_seconds(server.pid)
            secs, lat, errors = _run(n, args.clients, send, base)
            cpu = (_cpu_seconds(server.pid) - cpu0) / n * 1e6
            if spy is not None:
                spy.send_signal(2)  # SIGINT: py-spy writes its output and exits
                spy.wait()
            rows.append(
                (name, n, n / secs, *np.percentile(lat, [50, 99]) * 1e3, errors, cpu)
            )
        if args.bulk:
            cpu0 = _cpu_seconds(server.pid)
            bulk = _bulk(base, admin, body, X, y, args)
            server_cpu = _cpu_seconds(server.pid) - cpu0
    finally:
        server.terminate()
        server.wait()
    print(
        f"clients={args.clients}  python={sys.version.split()[0]}  cpus={os.cpu_count()}"
    )
    print(
        "| endpoint | requests | req/s | p50 ms | p99 ms | errors | server CPU µs/req |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, n, rps, p50, p99, err, cpu in rows:
        print(
            f"| {name} | {n} | {rps:.0f} | {p50:.1f} | {p99:.1f} | {err} | {cpu:.0f} |"
        )
    if len(rows) == 2:
        (h, o) = rows
        print(
            f"\noffers/s ÷ healthz/s = {o[2] / h[2]:.3f};"
            f" p50 ratio = {o[3] / h[3]:.1f}×; p99 ratio = {o[4] / h[4]:.1f}×"
        )
    if args.bulk:
        n, secs, errors, lat = bulk
        print(
            f"\nbulk: {n} one-record offers (new sellers) in {secs:.1f} s ="
            f" {n / secs:.0f} offers/s; batch {args.bulk_batch},"
            f" {args.bulk_clients} clients; request p50 {np.median(lat):.2f} s,"
            f" max {lat.max():.2f} s; errors {errors};"
            f" implied time for 10⁶ offers: {1e6 / (n / secs) / 60:.1f} min"
        )
        print(
            f"server CPU (user+sys) {server_cpu:.1f} s = {server_cpu / n * 1e6:.0f} µs"
            f" per offer; CPU-bound time for 10⁶ offers on one free core:"
            f" {server_cpu / n * 1e6 / 60:.1f} min"
        )


def _bulk(
    base: str,
    admin: dict[str, str],
    market: dict[str, object],
    X: np.ndarray,
    y: np.ndarray,
    args: argparse.Namespace,
) -> tuple[int, float, int, np.ndarray]:
    """Ingest ``args.bulk`` offers in batches; return (n, seconds, errors, latencies)."""
    with httpx.Client(base_url=base, timeout=600) as c:
        r = c.post("/v1/markets", headers=admin, json=market | {"name": "bulk"})
        mid = r.json()["id"]
    batches = [
        range(start, min(start + args.bulk_batch, args.bulk))
        for start in range(0, args.bulk, args.bulk_batch)
    ]

    def send(c: httpx.Client, b: int) -> httpx.Response:
        rows = [
            {
                "seller_name": f"bulk-{i}",
                "records": [{"x": X[i % len(y)].tolist(), "y": int(y[i % len(y)])}],
                "reported_cost": 0.5,
            }
            for i in batches[b]
        ]
        r = c.post(
            f"/v1/markets/{mid}/offers:bulk", headers=admin, json={"offers": rows}
        )
        if r.status_code == 201:
            assert r.json()["created"] == len(rows)
        else:
            print(f"bulk batch {b}: {r.status_code} {r.text[:300]}", file=sys.stderr)
        return r

    secs, lat, errors = _run(len(batches), args.bulk_clients, send, base, timeout=600)
    return args.bulk, secs, errors, lat


if __name__ == "__main__":
    main()
