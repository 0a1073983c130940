"""``MPyCBackend``: real MPC with MPyC (spec §3.6, §4.3, §8.3–§8.4; optional extra ``mpc``).

The runner writes each party's input slice and the public metadata to a private
temporary directory, starts ``m`` party processes
(:mod:`learners.secure_vertical._mpyc_party`) on 127.0.0.1 with ports chosen at run
time, waits with a timeout and stops every process it started by pid. ``m = 1`` runs
one process (no secrecy, but the same fixed-point protocol: the default tests);
``m ≥ 3`` gives Shamir sharing with threshold ``t = ⌊(m−1)/2⌋``. Data provider ``k``
inputs from process ``k mod m``; the DP perturbation is drawn jointly: processes
``0..t`` each draw a full-strength ``c_j`` from their own OS entropy and share it
(:mod:`learners.secure_vertical._joint_noise`); no process, and not this runner,
knows ``c = Σ_j c_j``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from learners.secure_vertical._em import Theta, patterns
from learners.secure_vertical._joint_noise import JointNoise, contributors
from learners.secure_vertical._ledger import Ledger
from learners.secure_vertical._newton import NewtonTrace

FloatArray = NDArray[np.float64]
MISSING_EXTRA = (
    "backend='mpc' needs the optional extra 'mpc' (MPyC and gmpy2): "
    "pip install 'privmarket[mpc]'"
)
GRID_BITS = 8


def mpc_available() -> bool:
    """Whether MPyC is installed (the ``mpc`` extra)."""
    return importlib.util.find_spec("mpyc") is not None


def require_mpc() -> None:
    """Raise ``ValueError`` naming the missing extra when MPyC is absent."""
    if not mpc_available():
        raise ValueError(MISSING_EXTRA)


def quantise(block: FloatArray, grid_bits: int = GRID_BITS) -> FloatArray:
    """Values on the public grid ``2^{−grid_bits}``, rounded to the nearest grid point
    (spec §3.1's ``round(x·2^f)``; ties to even), so each entry moves by at most
    ``2^{−grid_bits−1}`` and the errors do not share a sign.

    A row of ``p`` entries therefore moves by at most ``√p·2^{−grid_bits−1}`` in norm
    (:func:`rounding_margin`); a DP fit clips its rows that much inside their radius
    first, so the bound ``‖x‖ ≤ 1`` of the privacy proof survives the rounding.
    """
    s = 2.0**grid_bits
    return np.asarray(np.round(np.asarray(block, dtype=float) * s) / s, dtype=float)


def rounding_margin(n_columns: int, grid_bits: int = GRID_BITS) -> float:
    """Largest change of a row's norm under :func:`quantise`: ``√p·2^{−grid_bits−1}``."""
    return float(np.sqrt(n_columns)) * 2.0 ** (-grid_bits - 1)


def check_integral_flags(
    views: list[list[bool]], blocks: list[FloatArray] | None = None
) -> None:
    """Refuse a run whose parties disagree on the public ``integral`` flags, or whose
    block declared integral is off the grid, before any protocol runs (§8.3, V11).

    Raises
    ------
    ValueError
        Naming ``integral``.
    """
    if any(v != views[0] for v in views[1:]):
        raise ValueError(f"integral: the parties' fixed-point flags differ: {views}")
    if blocks is not None:
        for k, (flag, b) in enumerate(zip(views[0], blocks, strict=True)):
            if flag and not np.array_equal(quantise(b), b):
                raise ValueError(
                    f"integral: blocks[{k}] is declared integral but is off the 2^-{GRID_BITS} grid"
                )


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (chosen at run time)."""
    socks, ports = [], []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(int(s.getsockname()[1]))
    for s in socks:
        s.close()
    return ports


@dataclass(frozen=True, slots=True)
class MPCImputation:
    """Public inputs of the imputation inside MPC (spec §5.4, §5.6): the mixture ``θ``
    (released with DP), or — with ``em`` (``covariance``, ``max_iter``, ``tol``) — the
    public start of an EM run inside MPC (``reveal`` E1 or E2); and, per missing-data
    pattern of the records, its rows, observed and missing covariate coordinates and
    the public per-coordinate factor (DP clipping of imputed blocks; 1 otherwise)."""

    theta: Theta
    patterns: tuple[
        tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp], FloatArray], ...
    ]
    em: dict[str, Any] | None = None

    @classmethod
    def build(
        cls, theta: Theta, X: FloatArray, scales: dict[tuple[int, ...], FloatArray],
        em: dict[str, Any] | None = None,
    ) -> MPCImputation:  # fmt: skip
        """From the covariates ``X`` of the records (NaN = missing)."""
        pats = []
        for pat in patterns(X):
            key = tuple(int(c) for c in pat.obs)
            scale = scales.get(key, np.ones(pat.mis.size))
            pats.append((pat.rows, pat.obs, pat.mis, np.asarray(scale, dtype=float)))
        return cls(theta, tuple(pats), em)

    def to_meta(self) -> dict[str, Any]:
        """JSON-ready public metadata for the parties."""
        em = None
        if self.em is not None:
            em = {**self.em, "weights": self.theta.weights.tolist(),
                  "means": self.theta.means.tolist(),
                  "covariances": self.theta.covariances.tolist()}  # fmt: skip
        return {
            "em": em,
            "weights": self.theta.weights.tolist(),
            "means": self.theta.means.tolist(),
            "covariances": self.theta.covariances.tolist(),
            "patterns": [
                {
                    "rows": r.tolist(),
                    "obs": o.tolist(),
                    "mis": m.tolist(),
                    "scale": s.tolist(),
                }
                for r, o, m, s in self.patterns
            ],
        }


class MPyCBackend:
    """Run the secure Newton–Raphson in ``n_parties`` MPyC processes.

    Parameters
    ----------
    n_parties : int
        MPyC processes ``m`` (1, or ≥ 3 for secrecy; 2 is refused: ``t`` would be 0).
    timeout : float
        Seconds before every party is stopped and ``RuntimeError`` raised.
    integral : bool
        Share covariates as integers on the ``2^{-8}`` grid (blocks must be on it).
    prss : bool
        Random shares by MPyC's pseudorandom secret sharing (default; no interaction).
        With False (``--no-prss``), ``t + 1`` parties input random values instead. The
        truncation's low mask is a sum of ``d`` such terms (``C(m, t)`` with PRSS,
        ``t + 1`` without); an odd ``d`` (PRSS at ``m = 3``: ``d = 3``) makes the
        rounding exactly unbiased, an even one leaves a bias of ½ unit of ``2^{−32}``
        per product (see ``_mpyc_party.install_fast_truncation``).

    Attributes
    ----------
    last_timings : list of dict
        Per process, seconds spent starting (``start``), sharing the inputs
        (``share``) and in the Newton protocol (``newton``) in the last run.
    last_grad_norm : float
        ``‖∇F(β̂)‖`` opened after a DP run (NaN otherwise).
    last_theta : Theta or None
        The mixture fitted by the EM inside MPC (E1 or E2), if one ran.
    """

    def __init__(self, n_parties: int = 1, *, timeout: float = 600.0, integral: bool = True,
                 bit_length: int = 64, frac_bits: int = 32, prss: bool = True) -> None:  # fmt: skip
        require_mpc()
        if n_parties == 2 or n_parties < 1:
            raise ValueError(
                "n_parties must be 1 or >= 3 (with 2, MPyC's threshold t is 0: nothing is secret)"
            )
        self.n_parties = n_parties
        self.timeout = timeout
        self.integral = integral
        self.bit_length = bit_length
        self.frac_bits = frac_bits
        self.prss = prss
        self.last_timings: list[dict[str, float]] = []
        self.last_grad_norm = float("nan")
        self.last_theta: Theta | None = None
        self.last_em_iterations = 0
        self.last_pids: list[int] = []
        self.last_ports: list[int] = []

    def newton(
        self, party_blocks: list[FloatArray], y: FloatArray, *, weights: FloatArray | None,
        lam: float, noise: JointNoise | None, reveal: str, tol: float, max_iter: int,
        fixed_iterations: bool, ledger: Ledger, imputation: MPCImputation | None = None,
    ) -> NewtonTrace:  # fmt: skip
        """Secure Newton (§4.3) on the providers' blocks; ``ledger`` gets the openings.

        With ``noise`` (DP), the ``t + 1`` drawers must match ``noise.seeds``, and the
        parties also open ``‖∇F(β̂)‖`` of the perturbed objective at the released
        ``β̂`` (a scalar solver diagnostic, :attr:`last_grad_norm`). With
        ``imputation``, the blocks hold zeros where a party lacks a record and the
        missing blocks are imputed inside MPC (never seen by any process)."""
        m = self.n_parties
        if noise is not None and len(noise.seeds) != contributors(m):
            raise ValueError(
                f"noise: {len(noise.seeds)} drawers given, {contributors(m)} needed for m = {m}"
            )
        flags = [self.integral] * len(party_blocks)
        check_integral_flags([flags] * m, party_blocks)
        n = int(y.shape[0])
        d = sum(b.shape[1] for b in party_blocks)
        meta = {
            "n_parties": m, "n": n, "d": d, "block_shapes": [list(b.shape) for b in party_blocks],
            "integral": self.integral, "grid_bits": GRID_BITS, "bit_length": self.bit_length,
            "frac_bits": self.frac_bits, "lam": lam, "reveal": reveal, "tol": tol,
            "max_iter": max_iter, "fixed_iterations": fixed_iterations,
            "weights": None if weights is None else [float(v) for v in weights],
            "imputation": None if imputation is None else imputation.to_meta(),
            "noise": None if noise is None else {
                "scale": noise.scale, "dim": noise.dim, "seeds": list(noise.seeds)},
        }  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="privmarket-mpc-") as tmp:
            job = Path(tmp)
            (job / "meta.json").write_text(json.dumps(meta))
            for pid in range(m):
                data: dict[str, FloatArray] = {}
                for k, b in enumerate(party_blocks):
                    if k % m == pid:
                        data[f"block_{k}"] = b
                if pid == 0:
                    data["y"] = np.asarray(y, dtype=float)
                np.savez(job / f"data_{pid}.npz", **data)  # type: ignore[arg-type]
            out = self._run_parties(job)
        ledger.extend(out["ledger"])
        return NewtonTrace(
            np.asarray(out["beta"], dtype=float),
            int(out["n_iter"]),
            bool(out["converged"]),
        )

    def _commands(self, job: Path) -> list[list[str]]:
        launcher = Path(__file__).with_name("_mpyc_main.py")
        base = [sys.executable, str(launcher), str(job)]
        opts = ["--no-log"] if self.prss else ["--no-log", "--no-prss"]
        m = self.n_parties
        if m == 1:
            return [[*base, "0", "--", *opts]]
        ports = free_ports(m)
        self.last_ports = ports
        addrs = [a for p in ports for a in ("-P", f"127.0.0.1:{p}")]
        return [
            [*base, str(i), "--", "-M", str(m), "-I", str(i), *addrs, *opts]
            for i in range(m)
        ]

    def _run_parties(self, job: Path) -> dict[str, Any]:
        procs: list[subprocess.Popen[bytes]] = []
        logs = []
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(
            [root, *filter(None, [env.get("PYTHONPATH")])]
        )
        try:
            for i, cmd in enumerate(self._commands(job)):
                log = open(job / f"party_{i}.log", "wb")  # noqa: SIM115
                logs.append(log)
                procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True))  # fmt: skip
            self.last_pids = [p.pid for p in procs]
            deadline = time.monotonic() + self.timeout
            for p in procs:
                remaining = deadline - time.monotonic()
                p.wait(timeout=max(remaining, 0.01))
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(
                f"MPyC parties did not finish within {self.timeout:g} s"
            ) from exc
        finally:
            for p in procs:
                if p.poll() is None:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait()
            for log in logs:
                log.close()
        bad = [i for i, p in enumerate(procs) if p.returncode != 0]
        if bad:
            tail = (job / f"party_{bad[0]}.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"MPyC party {bad[0]} failed:\n{tail}")
        outs = [
            json.loads((job / f"out_{i}.json").read_text())
            for i in range(self.n_parties)
        ]
        if any(o["beta"] != outs[0]["beta"] for o in outs[1:]):
            raise RuntimeError("MPyC parties opened different estimates")
        self.last_timings = [dict(o.get("timings", {})) for o in outs]
        self.last_grad_norm = float(outs[0].get("grad_norm", float("nan")))
        th = outs[0].get("theta")
        self.last_theta = None if th is None else Theta(
            np.asarray(th["weights"], dtype=float), np.asarray(th["means"], dtype=float),
            np.asarray(th["covariances"], dtype=float),
        )  # fmt: skip
        self.last_em_iterations = int(outs[0].get("em_iterations", 0))
        result: dict[str, Any] = outs[0]
        return result
