"""Party nodes: each data party runs its MPyC party from its own process, with its own
block only (spec §3.6, §4.3, §8.4; the deployment the in-worker runner only simulates).

A distributed fit is one **session** between ``m = K + 1`` MPyC parties: data
party ``k`` (``k = 0..K−1``, label holder first) is MPyC party ``k`` and inputs its own
block; the last party (index ``K``) is a **compute party** without data, run by the
platform's worker, which receives the opened outputs; with ``K = 2`` it is what keeps
an honest majority (Shamir threshold ``t = ⌊(m−1)/2⌋``, ``t = 1`` of 3). Every party receives the same :class:`SessionPlan` — the public
parameters: party names, every party's key list (the one thing parties learn about
each other, §6 row 1), block widths, the order's settings and the party budgets —
and derives from it, identically and without any data (:meth:`SessionPlan.derive`),
the aligned record universe, the rows fitted, the public DP weights and clipping
radii and the MPyC metadata.

* :func:`party_inputs` (at the data party): its block aligned on the universe,
  clipped with the public radius (DP), zeros where it lacks a record (non-DP EM
  inside MPC), on the public ``2^{−8}`` grid, the intercept column and ``y`` at the
  label holder. Nothing else is read.
* :func:`run_party` (at every party): writes the plan's metadata and its own inputs to
  a private directory and runs one MPyC party process (``_mpyc_main.py``) that
  connects to the others over TCP (TLS with :class:`TLSFiles`), with a deadline; a
  peer that drops out or never connects fails the run with :class:`SessionFailed`
  naming it, instead of a hang.
* :func:`finish_session` (at the platform): the fitted estimator from the opened
  outputs only (``β̂`` — DP-perturbed inside MPC when the plan has budgets — the
  iteration count, the ledger of openings, ``‖∇F(β̂)‖`` of a DP fit).

What is opened is exactly the ledger of the in-worker runner at the same reveal
level (§6): R1 (non-DP) opens ``g`` and ``I`` per iteration, R2 with fixed
iterations (DP) only the perturbed ``β̂`` and the scalar ``‖∇F(β̂)‖``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from learners.secure_vertical._dp import (
    clip_radii,
    clip_rows,
    expand_report,
    mpc_dp_report,
    objective_weights,
    record_epsilon,
)
from learners.secure_vertical._em import Theta, default_init
from learners.secure_vertical._joint_noise import contributors
from learners.secure_vertical._ledger import Ledger
from learners.secure_vertical._newton import NewtonTrace

FloatArray = NDArray[np.float64]
GRID_BITS = 8
PLAN_VERSION = 1
DEFAULTS: dict[str, Any] = {
    "lam": 0.0,
    "reveal": None,
    "tol": 1e-6,
    "max_iter": 25,
    "dp_iterations": 12,
    "imputation": "em",
    "n_components": 2,
    "covariance": "full",
    "em_max_iter": 2000,
    "em_reveal": "E2",
}
EXIT_SESSION_FAILED = 75


class SessionFailed(RuntimeError):
    """A distributed fit ended without a result.

    Attributes
    ----------
    reason : str
        What happened (e.g. ``party 1 ('bank') dropped out: connection lost
        mid-protocol``).
    party : int or None
        Index of the party at fault, when known.
    """

    def __init__(self, reason: str, party: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.party = party


@dataclass(frozen=True, slots=True)
class TLSFiles:
    """TLS material of one party (MPyC's ``--ssl``): its certificate and private key
    (PEM; the certificate's common name must be ``MPyC party <index>``, the name
    MPyC checks when it connects) and the CA certificate every party trusts."""

    cert: str
    key: str
    ca: str


@dataclass(frozen=True, slots=True)
class Derived:
    """What every party computes from a :class:`SessionPlan` (public, no data)."""

    universe: list[str]
    held: NDArray[np.bool_]
    active: NDArray[np.bool_]
    rows: NDArray[np.bool_]  # over the active records
    labelled: NDArray[np.bool_]  # over the active records
    dp: bool
    c0: float
    radii: FloatArray
    eps_theta: FloatArray
    a: FloatArray
    eta: float
    lam: float
    reveal: str
    meta: dict[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """The public parameters of one distributed fit (JSON-able, :meth:`to_json`).

    Parameters
    ----------
    parties : list of str
        Data party names, label holder first (``K ≥ 2``).
    keys : list of list of str
        Each party's record keys (pseudonymous, unique within a party).
    widths : list of int
        Each party's number of features ``p_k``.
    params : dict
        ``lam``, ``reveal``, ``tol``, ``max_iter``, ``dp_iterations``,
        ``imputation`` (``"em"`` / ``"complete_case"``), ``n_components``,
        ``covariance``, ``em_max_iter``, ``em_reveal`` (as the estimator's).
    party_epsilon : list of float or None
        One ε per party (a DP release, §7); None: no DP (tests only: the market
        always releases with DP).
    labels : {"pm", "01"}
        The label holder's label values: ``{−1, +1}`` or ``{0, 1}``.
    noise_seeds : list of int or None
        Seeds of the ``t + 1`` noise drawers (tests only; None: OS entropy at each).
    """

    parties: list[str]
    keys: list[list[str]]
    widths: list[int]
    params: dict[str, Any]
    party_epsilon: list[float] | None = None
    labels: str = "pm"
    noise_seeds: list[int] | None = None

    @property
    def n_data_parties(self) -> int:
        """``K``."""
        return len(self.parties)

    @property
    def n_processes(self) -> int:
        """MPyC parties ``m = K + 1``: the data parties and one compute party without
        data (the platform's, which receives the opened outputs; with ``K = 2`` it is
        what keeps an honest majority)."""
        return self.n_data_parties + 1

    def party_name(self, index: int | None) -> str:
        """Display name of MPyC party ``index`` (``compute`` beyond the data parties)."""
        if index is None:
            return "unknown party"
        if 0 <= index < self.n_data_parties:
            return f"party {index} ({self.parties[index]!r})"
        return f"party {index} (compute)"

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (what the coordinator sends to every party)."""
        return {
            "version": PLAN_VERSION,
            "parties": list(self.parties),
            "keys": [list(k) for k in self.keys],
            "widths": list(self.widths),
            "params": dict(self.params),
            "party_epsilon": self.party_epsilon,
            "labels": self.labels,
            "noise_seeds": self.noise_seeds,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SessionPlan:
        """Inverse of :meth:`to_json`, validated (:func:`plan_session`)."""
        if d.get("version") != PLAN_VERSION:
            raise ValueError(
                f"plan: version {d.get('version')!r} is not {PLAN_VERSION}"
            )
        return plan_session(
            d["parties"], d["keys"], d["widths"], params=d.get("params"),
            party_epsilon=d.get("party_epsilon"), labels=d.get("labels", "pm"),
            noise_seeds=d.get("noise_seeds"),
        )  # fmt: skip

    def derive(self) -> Derived:
        """The public derivation every party repeats (as
        :meth:`SecureVerticalLogisticRegression.fit` does with ``backend="mpc"``).

        Universe: the sorted union of the keys (:func:`align_by_key`); ``held[i, k]``:
        party ``k`` has record ``i``; the label holder labels all its records. DP:
        ``ε_i = min_{k∈s_i} ε_k`` (§7.1), records with ``ε_i = 0`` left out, radii
        ``c_0² + Σ r_k² = 1`` (§7.2), weights ``a``, ``η`` and ``λ_eff`` of the
        objective perturbation, reveal R2 with ``dp_iterations`` fixed steps.
        Non-DP with missing blocks and ``imputation="em"``: EM and imputation inside
        MPC from the public start (§5.4), unlabelled records weight 0.

        Raises
        ------
        ValueError
            ``imputation``: a DP fit with missing blocks needs ``"complete_case"``
            here (its imputation model is estimated from noisy pattern moments,
            which only the in-worker fit computes); ``lam``: 0 with DP; ``reveal``:
            R1 with DP; ``keys``: no labelled record left.
        """
        from learners.secure_vertical._mpyc_backend import MPCImputation, quantise

        p = self.params
        universe = sorted(set().union(*[set(k) for k in self.keys]))
        index = {s: i for i, s in enumerate(universe)}
        n_all, K = len(universe), self.n_data_parties
        held = np.zeros((n_all, K), dtype=bool)
        for k, ks in enumerate(self.keys):
            held[[index[s] for s in ks], k] = True
        dp = self.party_epsilon is not None
        eps_rec = (
            record_epsilon(held, np.asarray(self.party_epsilon, dtype=float))
            if dp
            else None
        )
        active = np.ones(n_all, dtype=bool) if eps_rec is None else eps_rec > 0
        if not active.any():
            raise ValueError("party_epsilon: every record has ε = 0 (nothing to fit)")
        h = held[active]
        labelled = h[:, 0].copy()
        lam = float(p["lam"])
        if dp and not lam > 0:
            raise ValueError("lam must be > 0 for a DP fit (objective perturbation)")
        reveal = p["reveal"] or ("R2" if dp else "R1")
        if dp and reveal != "R2":
            raise ValueError(
                "reveal: a DP fit requires R2 (nothing opened per iteration)"
            )
        complete = bool(h.all())
        if dp and not complete and p["imputation"] != "complete_case":
            raise ValueError(
                "imputation: a distributed DP fit with missing blocks needs "
                "'complete_case' (the DP imputation model needs noisy pattern moments)"
            )
        keep = (
            h.all(axis=1)
            if p["imputation"] == "complete_case"
            else np.ones(h.shape[0], bool)
        )
        mpc_em = not dp and not complete and p["imputation"] == "em"
        rows = keep if mpc_em else keep & labelled
        if not (keep & labelled).any():
            raise ValueError(
                "keys: no labelled record is held by every party (complete_case)"
            )
        c0, radii = 1.0, np.ones(K)
        if dp:
            c0, radii = clip_radii(list(self.widths))
        c0 = float(quantise(np.array([c0]))[0])
        d = sum(self.widths) + 1
        n = int(rows.sum())
        imputation = None
        weights: FloatArray | None = None
        if mpc_em:
            mask = np.where(np.repeat(h, self.widths, axis=1), 0.0, np.nan)[rows]
            em = {"covariance": p["covariance"], "max_iter": int(p["em_max_iter"]),
                  "tol": 1e-8, "reveal": p["em_reveal"]}  # fmt: skip
            init = default_init(mask.shape[1], int(p["n_components"]))
            imputation = MPCImputation.build(init, mask, {}, em).to_meta()
            if not labelled[rows].all():
                weights = labelled[rows].astype(float)
        eps_theta = np.zeros(n_all)[active]
        a, eta = np.zeros(0), 0.0
        noise = None
        if dp:
            assert eps_rec is not None
            targets = eps_rec[active][rows]
            a, eta, lam = objective_weights(targets, lam)
            weights = a
            m = self.n_processes
            seeds: list[int | None] = (
                list(self.noise_seeds) if self.noise_seeds else [None] * contributors(m)
            )
            if len(seeds) != contributors(m):
                raise ValueError(f"noise_seeds: {contributors(m)} drawers for m = {m}")
            noise = {"scale": 2.0 / eta, "dim": d, "seeds": list(seeds)}
        shapes = [[n, w + (1 if k == 0 else 0)] for k, w in enumerate(self.widths)]
        meta = {
            "n_parties": self.n_processes, "n": n, "d": d, "block_shapes": shapes,
            "integral": True, "grid_bits": GRID_BITS, "bit_length": 64, "frac_bits": 32,
            "lam": lam, "reveal": reveal, "tol": float(p["tol"]),
            "max_iter": int(p["dp_iterations"] if dp else p["max_iter"]),
            "fixed_iterations": dp,
            "weights": None if weights is None else [float(v) for v in weights],
            "imputation": imputation, "noise": noise,
        }  # fmt: skip
        return Derived(universe=universe, held=held, active=active,
                       rows=np.asarray(rows, dtype=bool),
                       labelled=labelled, dp=dp, c0=c0, radii=np.asarray(radii, float),
                       eps_theta=eps_theta, a=np.asarray(a, float), eta=float(eta),
                       lam=lam, reveal=reveal, meta=meta)  # fmt: skip


def _check_keys(keys: Any, name: str) -> list[str]:
    if not isinstance(keys, list | tuple) or not keys:
        raise ValueError(f"{name} must be a non-empty list of record keys")
    if not all(isinstance(s, str) and s for s in keys):
        raise ValueError(f"{name} must be non-empty strings")
    seen: set[str] = set()
    for s in keys:
        if s in seen:
            raise ValueError(f"{name}: duplicate record key {s!r}")
        seen.add(s)
    return list(keys)


def plan_session(
    parties: Sequence[str], keys: Sequence[Sequence[str]], widths: Sequence[int], *,
    params: Mapping[str, Any] | None = None, party_epsilon: Sequence[float] | None = None,
    labels: str = "pm", noise_seeds: Sequence[int] | None = None,
) -> SessionPlan:  # fmt: skip
    """A validated :class:`SessionPlan` (coordinator side: key lists and widths only).

    Raises
    ------
    ValueError
        Naming ``parties``, ``keys[k]``, ``widths``, ``params``, ``party_epsilon``,
        ``labels`` or ``noise_seeds``.
    """
    names = [str(p) for p in parties]
    if len(names) < 2 or len(set(names)) != len(names) or not all(names):
        raise ValueError("parties: at least two distinct non-empty party names")
    if len(keys) != len(names):
        raise ValueError(f"keys: one key list per party ({len(names)})")
    ks = [_check_keys(list(k), f"keys[{i}]") for i, k in enumerate(keys)]
    ws = [int(w) for w in widths]
    if len(ws) != len(names) or any(w < 1 for w in ws):
        raise ValueError("widths: one feature count >= 1 per party")
    unknown = set(params or {}) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"params: unknown {sorted(unknown)}")
    merged = {**DEFAULTS, **dict(params or {})}
    if merged["imputation"] not in ("em", "complete_case"):
        raise ValueError("params: imputation must be 'em' or 'complete_case'")
    if merged["reveal"] not in (None, "R1", "R2"):
        raise ValueError("params: reveal must be 'R1', 'R2' or None")
    eps = None
    if party_epsilon is not None:
        eps = [float(e) for e in party_epsilon]
        if len(eps) != len(names) or not all(math.isfinite(e) and e >= 0 for e in eps):
            raise ValueError("party_epsilon: one finite ε >= 0 per party")
    if labels not in ("pm", "01"):
        raise ValueError("labels must be 'pm' ({-1, +1}) or '01' ({0, 1})")
    seeds = None if noise_seeds is None else [int(s) for s in noise_seeds]
    return SessionPlan(names, ks, ws, merged, eps, labels, seeds)


def party_inputs(
    plan: SessionPlan, index: int, keys: Sequence[str], X: ArrayLike,
    y: ArrayLike | None = None, *, derived: Derived | None = None,
) -> dict[str, FloatArray]:  # fmt: skip
    """Data party ``index``'s MPC inputs, computed from its own block only.

    Rows in the plan's order (:meth:`SessionPlan.derive`); DP: each row clipped to
    the public radius ``r_k`` (§7.2); zeros for the records the party lacks (only
    when the EM imputes them inside MPC); values truncated to the public grid
    ``2^{−8}`` (§8.3); the label holder adds the intercept column ``c_0`` and ``y`` in
    ``{0, 1}``.

    Raises
    ------
    ValueError
        ``index`` out of range; ``keys`` not the key list the plan declares for this
        party; ``X`` not finite of shape ``(len(keys), widths[index])``; ``y`` missing
        at the label holder, given by another party, or outside the plan's labels.
    """
    from learners.secure_vertical._mpyc_backend import quantise

    if not 0 <= index < plan.n_data_parties:
        raise ValueError(f"index must be a data party in 0..{plan.n_data_parties - 1}")
    ks = _check_keys(list(keys), "keys")
    if set(ks) != set(plan.keys[index]):
        raise ValueError(f"keys: this block's keys differ from the key list declared "
                         f"for party {plan.parties[index]!r}")  # fmt: skip
    arr = np.asarray(X, dtype=float)
    if arr.shape != (len(ks), plan.widths[index]) or not np.isfinite(arr).all():
        raise ValueError(f"X must be finite with shape ({len(ks)}, {plan.widths[index]}), "
                         f"got {arr.shape}")  # fmt: skip
    der = derived if derived is not None else plan.derive()
    pos = {s: i for i, s in enumerate(der.universe)}
    full = np.full((len(der.universe), arr.shape[1]), np.nan)
    full[[pos[s] for s in ks]] = arr
    if der.dp:
        full = clip_rows(full, float(der.radii[index]))
    block = quantise(np.nan_to_num(full[der.active][der.rows], nan=0.0))
    out: dict[str, FloatArray] = {}
    if index == 0:
        if y is None:
            raise ValueError(
                f"y: the label holder {plan.parties[0]!r} gives every label"
            )
        yy = np.asarray(y, dtype=float).reshape(-1)
        allowed = {-1.0, 1.0} if plan.labels == "pm" else {0.0, 1.0}
        if yy.size != len(ks) or not set(np.unique(yy).tolist()) <= allowed:
            raise ValueError(f"y: one label in {sorted(allowed)} per record key")
        yfull = np.zeros(len(der.universe))
        yfull[[pos[s] for s in ks]] = np.where(yy == -1.0, 0.0, yy)
        out["y"] = np.asarray(yfull[der.active][der.rows], dtype=float)
        block = np.hstack([np.full((block.shape[0], 1), der.c0), block])
    elif y is not None:
        raise ValueError(f"y: only the label holder {plan.parties[0]!r} gives labels")
    out[f"block_{index}"] = np.asarray(block, dtype=float)
    return out


def run_party(
    plan: SessionPlan, index: int, addresses: Sequence[str],
    inputs: Mapping[str, FloatArray] | None = None, *, tls: TLSFiles | None = None,
    listen_host: str = "127.0.0.1", connect_timeout: float = 60.0,
    timeout: float = 600.0, workdir: str | os.PathLike[str] | None = None,
    derived: Derived | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Run MPyC party ``index`` of the session in a child process; returns its opened
    outputs (``beta``, ``n_iter``, ``converged``, ``ledger``, ``grad_norm``,
    ``theta``) and ``timings`` (seconds; ``session``: the MPyC process's wall time).

    Parameters
    ----------
    addresses : list of str
        ``host:port`` of every MPyC party, in index order (``m`` entries); this
        party listens on its own entry's port (on ``listen_host``).
    inputs : dict or None
        :func:`party_inputs` of a data party; None for a compute party.
    tls : TLSFiles or None
        Run MPyC with ``--ssl`` (mutual TLS between all parties).
    connect_timeout, timeout : float
        Seconds to wait for every peer to connect, and for the whole run.
    workdir : path or None
        Private directory for the run (a temporary one, removed afterwards, when
        None; a given one is kept: ``connected`` appears there once every peer is
        connected).

    Raises
    ------
    SessionFailed
        A peer dropped out or did not connect, the deadline passed, or the party
        failed (the reason names the party when known).
    ValueError
        ``index`` or ``addresses`` inconsistent with the plan; inputs of a data party
        missing.
    """
    m = plan.n_processes
    if not 0 <= index < m:
        raise ValueError(f"index must be in 0..{m - 1}")
    if len(addresses) != m or not all(":" in a for a in addresses):
        raise ValueError(f"addresses: {m} 'host:port' entries, one per MPyC party")
    if index < plan.n_data_parties and (
        inputs is None or f"block_{index}" not in inputs
    ):
        raise ValueError(f"inputs: data party {index} needs its block (party_inputs)")
    der = derived if derived is not None else plan.derive()
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="privmarket-node-") as tmp:
            return _run(plan, index, addresses, inputs, tls, listen_host,
                        connect_timeout, timeout, Path(tmp), der)  # fmt: skip
    job = Path(workdir)
    job.mkdir(parents=True, exist_ok=True)
    return _run(plan, index, addresses, inputs, tls, listen_host, connect_timeout,
                timeout, job, der)  # fmt: skip


def _run(
    plan: SessionPlan, index: int, addresses: Sequence[str],
    inputs: Mapping[str, FloatArray] | None, tls: TLSFiles | None, listen_host: str,
    connect_timeout: float, timeout: float, job: Path, der: Derived,
) -> dict[str, Any]:  # fmt: skip
    os.chmod(job, 0o700)
    (job / "meta.json").write_text(json.dumps(der.meta))
    (job / "node.json").write_text(json.dumps(
        {"listen_host": listen_host, "connect_timeout": connect_timeout, "deadline": timeout}))  # fmt: skip
    if inputs is not None:
        np.savez(job / f"data_{index}.npz", **dict(inputs))  # type: ignore[arg-type]
    opts = ["--no-log"]
    if tls is not None:
        cfg = job / ".config"
        cfg.mkdir(exist_ok=True)
        shutil.copyfile(tls.cert, cfg / f"party_{index}.crt")
        shutil.copyfile(tls.key, cfg / f"party_{index}.key")
        shutil.copyfile(tls.ca, cfg / "mpyc_ca.crt")
        os.chmod(cfg / f"party_{index}.key", 0o600)
        opts.append("--ssl")
    launcher = Path(__file__).with_name("_mpyc_main.py")
    peers = [a for addr in addresses for a in ("-P", addr)]
    cmd = [sys.executable, str(launcher), str(job), str(index), "--",
           "-M", str(plan.n_processes), "-I", str(index), *peers, *opts]  # fmt: skip
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    t0 = time.monotonic()
    with open(job / "party.log", "wb") as log:
        # same process group as this node: stopping the node stops its party
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=job
        )
        (job / "pid").write_text(str(proc.pid))
        try:
            proc.wait(timeout=timeout + 10.0)
        except subprocess.TimeoutExpired as exc:
            raise SessionFailed(f"{plan.party_name(index)} did not finish within "
                                f"{timeout:g} s") from exc  # fmt: skip
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
    failed = job / "failed.json"
    if failed.exists():
        info = json.loads(failed.read_text())
        party = info.get("party")
        reason = str(info["reason"])
        if party is not None:
            reason = reason.replace(f"party {party}", plan.party_name(int(party)), 1)
        raise SessionFailed(reason, None if party is None else int(party))
    if proc.returncode != 0:
        tail = (job / "party.log").read_text(errors="replace")[-1500:]
        raise SessionFailed(f"{plan.party_name(index)} failed (exit {proc.returncode}):\n{tail}",
                            index)  # fmt: skip
    out: dict[str, Any] = json.loads((job / f"out_{index}.json").read_text())
    out.setdefault("timings", {})["session"] = time.monotonic() - t0
    return out


def finish_session(plan: SessionPlan, output: Mapping[str, Any]) -> Any:
    """The fitted :class:`SecureVerticalLogisticRegression` from the opened outputs of
    a session (:func:`run_party` at any party; the platform uses its compute
    party's), with the DP privacy report (label ``mpc_plus_dp``) when the plan has
    budgets. Coefficients in party order; the intercept is ``β̂_0 c_0``.
    """
    from learners.secure_vertical._estimator import SecureVerticalLogisticRegression

    der = plan.derive()
    p = plan.params
    est = SecureVerticalLogisticRegression(
        backend="mpc", imputation=p["imputation"], lam=float(p["lam"]),
        n_components=int(p["n_components"]), covariance=p["covariance"],
        reveal=p["reveal"], tol=float(p["tol"]), max_iter=int(p["max_iter"]),
        dp_iterations=int(p["dp_iterations"]), em_max_iter=int(p["em_max_iter"]),
        em_reveal=p["em_reveal"], mpc_parties=plan.n_processes,
    )  # fmt: skip
    ledger = Ledger()
    ledger.extend(list(output["ledger"]))
    trace = NewtonTrace(np.asarray(output["beta"], dtype=float), int(output["n_iter"]),
                        bool(output["converged"]))  # fmt: skip
    est._set_result(trace, c0=der.c0, pm=plan.labels == "pm", reveal=der.reveal,
                    ledger=ledger)  # fmt: skip
    th = output.get("theta")
    est.theta_ = None if th is None else Theta(
        np.asarray(th["weights"], float), np.asarray(th["means"], float),
        np.asarray(th["covariances"], float))  # fmt: skip
    est.dummy_columns_ = None
    est.cell_probabilities_ = None
    est.privacy_report_ = None
    if der.dp:
        est.privacy_report_ = expand_report(mpc_dp_report(
            eps_theta=der.eps_theta, a=der.a, eta=der.eta, lam=der.lam,
            labelled=der.rows, grad_norm=float(output.get("grad_norm", float("nan"))),
            gtol=float(p["tol"]),
        ), der.active)  # fmt: skip
        est.lam_effective_ = der.lam
    return est


def read_party_csv(
    path: str | os.PathLike[str], *, features: Sequence[str] | None = None,
    label_holder: bool = False,
) -> tuple[list[str], list[str], FloatArray, FloatArray | None]:  # fmt: skip
    """``(keys, feature_names, X, y)`` of a party's CSV: a ``key`` column, the
    party's features and, at the label holder only, ``y``.

    Raises
    ------
    ValueError
        Naming the column: no ``key``, a ``y`` column at another party or none at
        the label holder, features other than ``features`` (when given), a value
        that is not a finite number, a duplicate key.
    """
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        cols = list(reader.fieldnames or [])
        rows = list(reader)
    if "key" not in cols:
        raise ValueError("key: the CSV needs a 'key' column")
    if label_holder and "y" not in cols:
        raise ValueError("y: the label holder's CSV needs a 'y' column")
    if not label_holder and "y" in cols:
        raise ValueError("y: only the label holder's CSV has a 'y' column")
    names = [c for c in cols if c not in ("key", "y")]
    if features is not None and names != list(features):
        raise ValueError(
            f"features: the CSV has {names}, the party declares {list(features)}"
        )
    keys = _check_keys([r["key"] for r in rows], "key")

    def num(r: int, c: str) -> float:
        try:
            v = float(rows[r][c])
        except (TypeError, ValueError):
            raise ValueError(f"{c}: row {r} is not a number") from None
        if not math.isfinite(v):
            raise ValueError(f"{c}: row {r} is not finite")
        return v

    X = np.array([[num(r, c) for c in names] for r in range(len(rows))], dtype=float)
    X = X.reshape(len(rows), len(names))
    y = np.array([num(r, "y") for r in range(len(rows))]) if label_holder else None
    return keys, names, X, y


def wait_for(path: Path, timeout: float) -> bool:
    """Poll until ``path`` exists (True) or ``timeout`` seconds pass (False)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists():
            return True
        time.sleep(0.05)
    return path.exists()


def main(argv: Sequence[str] | None = None) -> int:
    """One party of a session from the command line (its own process)::

        python -m learners.secure_vertical.node --plan PLAN.json --index I \\
            --peers HOST:PORT,HOST:PORT,HOST:PORT [--data BLOCK.csv] --out OUT.json \\
            [--listen HOST] [--workdir DIR] [--timeout S] [--connect-timeout S] \\
            [--tls-cert CRT --tls-key KEY --tls-ca CA]

    ``--data`` (a data party's CSV, :func:`read_party_csv`) is the only data read.
    Writes the opened outputs to ``--out``; on failure writes ``{"error": reason,
    "party": index}`` there and exits with status 75.
    """
    import argparse

    ap = argparse.ArgumentParser(prog="python -m learners.secure_vertical.node")
    ap.add_argument("--plan", required=True)
    ap.add_argument("--index", type=int, required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--data")
    ap.add_argument("--out", required=True)
    ap.add_argument("--listen", default="127.0.0.1")
    ap.add_argument("--workdir")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--connect-timeout", type=float, default=60.0)
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--tls-ca")
    args = ap.parse_args(argv)
    plan = SessionPlan.from_json(json.loads(Path(args.plan).read_text()))
    inputs = None
    if args.data:
        keys, _, X, y = read_party_csv(args.data, label_holder=args.index == 0)
        inputs = party_inputs(plan, args.index, keys, X, y)
    tls = None
    if args.tls_cert:
        tls = TLSFiles(args.tls_cert, args.tls_key, args.tls_ca)
    try:
        out = run_party(plan, args.index, args.peers.split(","), inputs, tls=tls,
                        listen_host=args.listen, connect_timeout=args.connect_timeout,
                        timeout=args.timeout, workdir=args.workdir)  # fmt: skip
    except SessionFailed as exc:
        Path(args.out).write_text(json.dumps({"error": exc.reason, "party": exc.party}))
        return EXIT_SESSION_FAILED
    Path(args.out).write_text(json.dumps(out))
    return 0
