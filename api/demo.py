"""``privmarket demo``: the README's main job, end to end over the real HTTP API.

On a fresh SQLite file in a temporary directory: migrate, start the service in-process
(uvicorn in a thread, one worker thread), create an admin key, create a Wisconsin
breast-cancer market (public feature bounds ``market.datasets.WBC_FEATURE_BOUNDS``,
a public validation set), offer one record per simulated seller in one bulk request
that also creates their accounts (costs drawn from the market's prior), run a buyer order under a budget, poll its progress, and print:
accuracy of the released model vs a non-private scikit-learn model on held-out records,
total paid vs budget, the ε distribution, and the incentive audit. With ``serve`` it
then prints the console's URL and an admin key and keeps serving until Ctrl-C.
"""

import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from typer import echo

MECHANISM = {
    "gamma": 0.01,
    "lam": 1e-3,
    "mu": 300.0,
    "sigma": 1e4,
    "k": 4.0,
    "eps_avg_max": 10.0,
}
"""Demo mechanism settings (measured on Wisconsin, 300 sellers): a large μ spreads weight
over all sellers (a small one buys only the m/k easiest records, a biased fit), a large σ
buys a large η (the release's noise is ~ 2‖b‖/(ηλ)), and a small λ keeps the noise-free
fit accurate. Private test error ≈ 8% against ≈ 4% without privacy, at ε_avg ≈ 10."""
PRIOR = {"family": "uniform", "params": {"low": 0.0, "high": 0.1}}
N_VALIDATION = 100
LIFETIME_CAP = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """uvicorn serving ``app`` in a daemon thread on a free loopback port."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = _free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=90)


def _data(rng: np.random.Generator, n_sellers: int) -> dict[str, Any]:
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    X, y = np.asarray(data.data), np.where(data.target == 1, 1, -1)
    perm = rng.permutation(len(y))
    n_sellers = min(n_sellers, len(y) - N_VALIDATION - 100)
    sel, val, test = np.split(perm, [n_sellers, n_sellers + N_VALIDATION])
    names = [str(n) for n in data.feature_names]
    return {"X": X, "y": y, "sellers": sel, "val": val, "test": test, "names": names}


def _market_body(d: dict[str, Any]) -> dict[str, Any]:
    from market.datasets import WBC_FEATURE_BOUNDS

    X, y = d["X"], d["y"]
    return {
        "name": "wisconsin-breast-cancer",
        "task": "classification",
        "features": [
            {"name": n, "low": lo, "high": hi}
            for n, (lo, hi) in zip(d["names"], WBC_FEATURE_BOUNDS, strict=True)
        ],
        "cost_prior": PRIOR,
        "mechanism": MECHANISM,
        "validation": [{"x": X[i].tolist(), "y": int(y[i])} for i in d["val"]],
        "lifetime_epsilon_cap": LIFETIME_CAP,
        "out_of_bounds": "clip",
    }


def _register_sellers(
    c: httpx.Client,
    admin: dict[str, str],
    mid: int,
    d: dict[str, Any],
    rng: np.random.Generator,
) -> tuple[np.ndarray, list[str]]:
    """Offer one record per simulated seller with one ``offers:bulk`` request (which
    creates the seller accounts too); return the costs and the sellers' API keys."""
    from market.pipeline import audits

    costs = audits.sample_costs(PRIOR, len(d["sellers"]), rng=rng)
    rows = [
        {
            "seller_name": f"seller-{j}",
            "records": [{"x": d["X"][i].tolist(), "y": int(d["y"][i])}],
            "reported_cost": float(cost),
        }
        for j, (i, cost) in enumerate(zip(d["sellers"], costs, strict=True))
    ]
    r = c.post(f"/v1/markets/{mid}/offers:bulk", headers=admin, json={"offers": rows})
    r.raise_for_status()
    return costs, [item["api_key"] for item in r.json()["items"]]


def seed_market(
    c: httpx.Client,
    admin: dict[str, str],
    *,
    n_sellers: int,
    rng: np.random.Generator,
    **overrides: Any,
) -> tuple[int, dict[str, Any], np.ndarray, list[str]]:
    """Create the Wisconsin market (``overrides`` replace fields of its body) and offer
    one record per simulated seller; return its id, the data, the costs, the sellers'
    API keys."""
    d = _data(rng, n_sellers)
    r = c.post("/v1/markets", headers=admin, json=_market_body(d) | overrides)
    r.raise_for_status()
    mid = int(r.json()["id"])
    costs, keys = _register_sellers(c, admin, mid, d, rng)
    return mid, d, costs, keys


def _poll(c: httpx.Client, oid: int, headers: dict[str, str]) -> dict[str, Any]:
    last = None
    while True:
        st = c.get(f"/v1/orders/{oid}", headers=headers).json()
        now = (
            st["status"],
            st["progress"]["stage"],
            round(st["progress"]["fraction"], 1),
        )
        if now != last:
            echo(f"  order {oid}: {now[0]:<9} stage={now[1]:<15} {now[2]:.0%}")
            last = now
        if st["status"] in ("succeeded", "failed"):
            return st
        time.sleep(0.25)


def _accuracy(model: dict[str, Any], d: dict[str, Any], bounds: np.ndarray) -> float:
    X = np.clip(d["X"][d["test"]], bounds[:, 0], bounds[:, 1])
    score = X @ np.array(model["coefficients"]) + (model["intercept"] or 0.0)
    return float(np.mean(np.where(score >= 0, 1, -1) == d["y"][d["test"]]))


def _nonprivate_accuracy(d: dict[str, Any]) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    clf.fit(d["X"][d["sellers"]], d["y"][d["sellers"]])
    return float(clf.score(d["X"][d["test"]], d["y"][d["test"]]))


def _audit(
    db_engine: Any,
    market_id: int,
    summary: dict[str, Any],
    n_audit: int,
    rng: np.random.Generator,
    budget: float,
) -> str:
    """The incentive audit of the rule an order on the market would now run, at the
    order's ``γ`` (``market.pipeline.audits``: the order pipeline's loader and adapter)."""
    if n_audit == 0:
        return "skipped (--audit-sellers 0)"
    from market.pipeline import audits

    m = audits.eligible_sellers(
        db_engine, market_id=market_id, learner="hetero_dp_logistic"
    )
    sellers = np.sort(rng.choice(m, size=min(n_audit, m), replace=False))
    fields = audits.audit_market(
        db_engine,
        market_id=market_id,
        learner="hetero_dp_logistic",
        gamma=summary["gamma"],
        budget=budget,
        sellers=sellers,
    )
    keys = (
        "ic_regret_max",
        "ir_min_utility",
        "ir_violations",
        "budget_total",
        "budget_ok",
        "monotonicity_max_violation",
    )
    return ", ".join(f"{k}={fields[k]}" for k in keys if k in fields) or str(fields)


def _report(
    model: dict[str, Any],
    allocs: dict[str, Any],
    st: dict[str, Any],
    d: dict[str, Any],
    n_costs: int,
    budget: float,
) -> None:
    from market.datasets import WBC_FEATURE_BOUNDS

    summary = st["summary"]
    eps = np.array([a["epsilon"] for a in allocs["items"]])
    bounds = np.asarray(WBC_FEATURE_BOUNDS)
    echo("\n== result ==")
    echo(f"gamma                 {summary['gamma']:.4g} ({summary['gamma_source']})")
    echo(
        f"accuracy (held-out)   private {_accuracy(model, d, bounds):.3f}"
        f" | non-private {_nonprivate_accuracy(d):.3f}"
        f" | on {len(d['test'])} records"
    )
    echo(f"total paid / budget   {summary['total_paid']:.2f} / {budget:.2f}")
    echo(f"sellers used          {summary['sellers_used']} of {n_costs}")
    q = np.percentile(eps, [0, 10, 50, 90, 100]) if eps.size else np.zeros(5)
    echo(
        "epsilon (total)       min {:.3g}  p10 {:.3g}  median {:.3g}  p90 {:.3g}"
        "  max {:.3g}".format(*q)
    )
    echo(f"guarantee             {model['privacy']['guarantee']}")


def _serve_console(base: str, admin_key: str) -> None:
    """Print where the console is and keep serving until Ctrl-C."""
    echo(f"\nconsole               {base}/console/")
    echo(f"admin API key         {admin_key}")
    echo("                      (paste the key into the console's sign-in form)")
    echo("serving until Ctrl-C …")
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        echo("stopped")


def run_demo(
    *,
    n_sellers: int = 300,
    budget: float = 400.0,
    audit_sellers: int = 2,
    gamma: float | None = None,
    serve: bool = False,
) -> None:
    """Run the demo (module docstring) and print its report; with ``serve``, keep the
    service (and its console) up until Ctrl-C."""
    from api.main import create_app
    from market import access, numerics
    from market.config import Settings
    from market.store import Role, session_scope, upgrade_to_head

    t0 = time.perf_counter()
    rng = np.random.default_rng()
    with tempfile.TemporaryDirectory(prefix="privmarket-demo-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'demo.db'}"
        echo(f"database: {url} (fresh)")
        upgrade_to_head(url)
        settings = Settings(database_url=url, workers=1, job_lease_seconds=60)
        app = create_app(settings)
        with session_scope(app.state.engine, write=True) as s:
            _, admin_key = access.create_account(
                s, role=Role.ADMIN, name="demo-admin", settings=settings
            )
        with LocalServer(app) as base, httpx.Client(base_url=base, timeout=30) as c:
            echo(f"service: {base} (uvicorn in-process, 1 worker thread)")
            if not numerics.kernels_compiled():
                echo(numerics.FIRST_RUN_NOTE)
            admin = {"Authorization": f"Bearer {admin_key}"}
            t_seed = time.perf_counter()
            mid, d, costs, _ = seed_market(c, admin, n_sellers=n_sellers, rng=rng)
            echo(
                f"market {mid}: {len(costs)} sellers, costs ~ U[0, 0.1] (the prior);"
                f" created and offered in {time.perf_counter() - t_seed:.1f} s"
            )
            key = c.post("/v1/buyers", json={"name": "demo-buyer"}).json()["api_key"]
            buyer = {"Authorization": f"Bearer {key}"}
            order = {"learner": "hetero_dp_logistic", "budget": budget, "gamma": gamma}
            r = c.post(f"/v1/markets/{mid}/orders", headers=buyer, json=order)
            oid = r.json()["id"]
            st = _poll(c, oid, buyer)
            if st["status"] != "succeeded":
                echo(f"order failed: {st['error']}")
            else:
                model = c.get(f"/v1/orders/{oid}/model", headers=buyer).json()
                allocs = c.get(f"/v1/orders/{oid}/allocations", headers=admin).json()
                _report(model, allocs, st, d, len(costs), budget)
                audit = _audit(
                    app.state.engine, mid, st["summary"], audit_sellers, rng, budget
                )
                echo("audit                 " + audit)
            echo(f"elapsed               {time.perf_counter() - t0:.1f} s")
            if serve:
                _serve_console(base, admin_key)
