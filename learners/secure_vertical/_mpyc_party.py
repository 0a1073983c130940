"""One MPyC party: runs :func:`~learners.secure_vertical._newton.secure_newton` on
secret-shared fixed-point arrays (spec §4.3, §8.3). Started by
:class:`~learners.secure_vertical._mpyc_backend.MPyCBackend` as

    python -m learners.secure_vertical._mpyc_party JOB_DIR PID -- [MPyC options]

``mpyc.runtime`` configures itself from ``sys.argv`` at import time, so it is imported
here only, after ``sys.argv`` is set to the MPyC options (§8.3 "Global runtime"). The
party reads only its own providers' blocks from ``JOB_DIR/data_PID.npz`` and the public
metadata from ``JOB_DIR/meta.json``, and writes ``JOB_DIR/out_PID.json`` (the opened
``β̂``, iteration count and ledger).

Numerics (§8.3): secure fixed point with 64 bits / 32 fractional bits; covariates on
the public ``2^{-8}`` grid are shared as *integers* ``X·2^8`` with the integral flag
passed explicitly and identically at every party (non-senders pass zeros, which would
otherwise look integral). The sigmoid (``MPyCOps.sigmoid``) takes the sign bit and
clamps ``|η|`` to 16 (two secure comparisons), ``e^{−|η|/2^7}`` by a degree-6 Taylor
polynomial squared 7 times (the spec's degree 4 with 8 squarings left errors of 1.2e-8:
each squaring doubles the truncation error), and replaces the secure fixed-point
division by 3 Newton steps for ``1/(1 + e)`` on ``[1, 2]``. R2 solves ``I Δ = g`` by
Gauss–Jordan with secure reciprocals.

Cost (``benchmarks/secure_vertical.py``): every secret × secret fixed-point product is
truncated, and MPyC's truncation consumes ``f = 32`` secret random bits per element
(with PRSS, one secret square and one public modular square root per bit and party),
which dominated the step. :func:`install_fast_truncation` masks the low part with a
sum of random shares instead (two random field elements per element), and
:func:`use_pooled_entropy` serves MPyC's per-value ``secrets`` calls from pooled OS
entropy.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import secrets
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from numpy.typing import NDArray

from learners.secure_vertical._joint_noise import JointNoise
from learners.secure_vertical._ledger import Ledger
from learners.secure_vertical._newton import secure_newton

FloatArray = NDArray[np.float64]
CLAMP = 16.0
SQUARINGS = 7
RECIPROCAL_STEPS = 3
GRAD_SCALE = 2.0**8
NODE_CONFIG = "node.json"
FAILED = "failed.json"
CONNECTED = "connected"
EXIT_SESSION_FAILED = 75


def bind_loopback() -> None:
    """Make every server this process creates listen on 127.0.0.1 only (MPyC's
    listener binds all interfaces by default; §8.3 "Networking")."""
    bind_host("127.0.0.1")


def bind_host(host: str) -> None:
    """Make every server this process creates listen on ``host`` only (MPyC's
    listener binds all interfaces by default)."""
    original = asyncio.base_events.BaseEventLoop.create_server

    async def create_server(self: Any, *args: Any, **kwargs: Any) -> Any:
        if len(args) < 2 and kwargs.get("host") is None:
            kwargs["host"] = host
        return await original(self, *args, **kwargs)

    asyncio.base_events.BaseEventLoop.create_server = create_server  # type: ignore[method-assign]


def fail_session(job: Path, party: int | None, reason: str) -> NoReturn:
    """End this party process at once with ``reason`` in ``JOB_DIR/failed.json``
    (``party``: the index of the party at fault, if known) and exit code
    :data:`EXIT_SESSION_FAILED`. Used from callbacks and watchdog threads, where an
    exception would only be logged while the protocol waits forever."""
    try:
        (job / FAILED).write_text(json.dumps({"party": party, "reason": reason}))
        sys.stderr.write(reason + "\n")
        sys.stderr.flush()
    finally:
        os._exit(EXIT_SESSION_FAILED)


class PeerWatch:
    """Fail fast instead of hanging when a peer drops out (node mode).

    MPyC waits without a timeout for every message of its peers, and a connection
    lost mid-protocol is only logged: without this watch the remaining parties would
    wait until an outer deadline. Installed before ``mpc.start()``, it

    * ends the process with the reason ``party j dropped out`` as soon as a peer's
      connection is lost before this party enters the shutdown barrier
      (:meth:`closing`), whether the peer closed it or the connection broke;
    * ends it with ``parties [..] did not connect within S s`` when the connections
      are not all made within ``connect_timeout`` seconds;
    * ends it with ``the fit did not finish within S s`` after ``deadline`` seconds.
    """

    def __init__(
        self, mpc: Any, job: Path, *, connect_timeout: float, deadline: float
    ) -> None:
        from mpyc import asyncoro

        self.mpc = mpc
        self.job = job
        self._closing = False
        self._connected = False
        original = asyncoro.MessageExchanger.connection_lost
        watch = self

        def connection_lost(exchanger: Any, exc: Exception | None) -> None:
            if not watch._closing:
                peer = exchanger.peer_pid
                who = "an unidentified peer" if peer is None else f"party {peer}"
                cause = f" ({type(exc).__name__}: {exc})" if exc else ""
                fail_session(
                    job, peer, f"{who} dropped out: connection lost mid-protocol{cause}"
                )
            original(exchanger, exc)

        asyncoro.MessageExchanger.connection_lost = connection_lost
        self._timers = [
            threading.Timer(connect_timeout, self._check_connected),
            threading.Timer(deadline, self._expire, args=(deadline,)),
        ]
        for t in self._timers:
            t.daemon = True
            t.start()

    def _check_connected(self) -> None:
        if self._connected:
            return
        missing = [p.pid for p in self.mpc.parties
                   if p.pid != self.mpc.pid and p.protocol is None]  # fmt: skip
        party = missing[0] if len(missing) == 1 else None
        who = f"party {party}" if party is not None else f"parties {missing}"
        fail_session(self.job, party,
                     f"{who} did not connect within {self._timers[0].interval:g} s")  # fmt: skip

    def _expire(self, deadline: float) -> None:
        fail_session(self.job, None, f"the fit did not finish within {deadline:g} s")

    def connected(self) -> None:
        """All peers are connected: record it (``JOB_DIR/connected``)."""
        self._connected = True
        (self.job / CONNECTED).write_text("1")

    def closing(self) -> None:
        """This party enters the shutdown barrier: connections may now close."""
        self._closing = True

    def stop(self) -> None:
        """Cancel the timers (the session ended)."""
        for t in self._timers:
            t.cancel()


class PooledEntropy:
    """OS entropy read in large blocks: ``randbits``/``randbelow`` with the semantics of
    :mod:`secrets` (uniform, from ``os.urandom``), but one system call per ``pool``
    bytes instead of one per value.

    MPyC draws every Shamir coefficient with ``secrets.randbelow`` and every random bit
    of a truncation with ``secrets.randbits(1)``, one ``os.urandom`` call each: about
    1.7 million calls per Newton step at ``n = 1000`` (a third of the step).
    :func:`use_pooled_entropy` points :mod:`secrets` at this pool inside a party process.
    """

    def __init__(self, pool: int = 1 << 16) -> None:
        self.pool = pool
        self._buf = b""
        self._pos = 0

    def _take(self, nbytes: int) -> bytes:
        if self._pos + nbytes > len(self._buf):
            self._buf = os.urandom(max(self.pool, nbytes))
            self._pos = 0
        out = self._buf[self._pos : self._pos + nbytes]
        self._pos += nbytes
        return out

    def randbits(self, k: int) -> int:
        """A uniform integer in ``[0, 2^k)``."""
        if k < 0:
            raise ValueError("number of bits must be non-negative")
        nbytes = (k + 7) // 8
        return int.from_bytes(self._take(nbytes), "little") >> (8 * nbytes - k)

    def randbelow(self, exclusive_upper_bound: int) -> int:
        """A uniform integer in ``[0, exclusive_upper_bound)`` (rejection sampling)."""
        if exclusive_upper_bound <= 0:
            raise ValueError("Upper bound must be positive.")
        k = exclusive_upper_bound.bit_length()
        while True:
            r = self.randbits(k)
            if r < exclusive_upper_bound:
                return r


def use_pooled_entropy() -> None:
    """Route :func:`secrets.randbits` and :func:`secrets.randbelow` (MPyC's sources of
    shares and random bits) through one :class:`PooledEntropy` in this process."""
    pool = PooledEntropy()
    secrets.randbits = pool.randbits
    secrets.randbelow = pool.randbelow


def install_fast_truncation(mpc: Any) -> None:
    """Replace ``mpc.np_trunc`` (used by every secret × secret fixed-point product) for
    secure arrays by a truncation whose low mask is a sum of ``d`` random integers.

    MPyC's probabilistic truncation of ``a`` by ``f`` bits (Catrina–de Hoogh) opens
    ``c = a + 2^{l−1} + r_lo + 2^f r_hi`` with ``r_lo`` built from ``f`` secret random
    *bits* per element (the dominant cost of the Newton step). Here ``r_lo = Σ_j u_j``
    is the sum of the ``d`` independent random shares MPyC's ``_np_randoms`` already
    produces (``d = t + 1`` inputs without PRSS, ``d = C(m, t)`` PRSS terms), each
    ``u_j`` uniform on ``[0, 2^f)``:

    * privacy: ``c mod 2^f = (a + r_lo) mod 2^f`` is uniform as soon as one ``u_j`` is
      unknown (every coalition of ``t`` parties misses one); ``c div 2^f`` is hidden
      statistically by ``r_hi`` (``k`` = ``sec_param`` bits), exactly as in MPyC;
    * result: ``(a + r_lo − (c mod 2^f)) / 2^f = ⌊(a + r_lo)/2^f⌋ = ⌊a/2^f⌋ + δ`` with
      ``δ ∈ {0, …, d}`` and mean ``a mod 2^f / 2^f + (d − 1)/2``; subtracting
      ``⌊(d − 1)/2⌋`` leaves a bias of at most half a unit of the last place
      (``2^{−33}`` at ``f = 32``) and an error of at most ``d`` units;
    * range: ``c < 2^l + d·2^f + 2^{k+l}`` fits MPyC's field (``l + f + k + 2`` bits).

    Cost: ``2`` random field elements per element instead of ``f + 1``.
    Non-array (field) arguments keep MPyC's own routine.
    """
    from mpyc import asyncoro

    original = mpc.np_trunc

    # no return annotation: mpc_coro would read it as the result's type
    @asyncoro.mpc_coro  # type: ignore[untyped-decorator]
    async def fast(a: Any, f: int | None, l: int | None):  # type: ignore[no-untyped-def]  # noqa: E741
        sftype = type(a)
        await asyncoro.returnType((sftype, a.shape))
        field = sftype.sectype.field
        l = l or sftype.sectype.bit_length  # noqa: E741
        if f is None:
            f = sftype.frac_length
        if issubclass(sftype, mpc.SecureFixedPoint):
            l += f  # noqa: E741
        k = mpc.options.sec_param
        t, m = mpc.threshold, len(mpc.parties)
        d = t + 1 if mpc.options.no_prss else math.comb(m, t)
        r_lo = mpc._np_randoms(field, a.size, d << f)
        r_hi = mpc._np_randoms(field, a.size, 1 << (k + l - f))
        if mpc.options.no_prss:
            r_lo, r_hi = await r_lo, await r_hi
        a = await mpc.gather(a)
        masked = a.value + r_lo.value.reshape(a.shape)
        opened = field.array(
            masked + (1 << (l - 1)) + (r_hi.value.reshape(a.shape) << f)
        )
        c = await mpc.output(opened)
        low = c.value & ((1 << f) - 1)
        return (field.array(masked - low) >> f) - (d - 1) // 2

    def np_trunc(a: Any, f: int | None = None, l: int | None = None) -> Any:  # noqa: E741
        if isinstance(a, mpc.SecureObject):
            return fast(a, f, l)
        return original(a, f, l)

    mpc.np_trunc = np_trunc


class MPyCOps:
    """The :class:`~learners.secure_vertical._backend.Backend` operations in MPyC."""

    def __init__(
        self, mpc: Any, meta: dict[str, Any], data: dict[str, FloatArray]
    ) -> None:
        self.mpc = mpc
        self.meta = meta
        self.data = data
        self.m = int(meta["n_parties"])
        self.pid = int(mpc.pid)
        self.secfxp = mpc.SecFxp(int(meta["bit_length"]), int(meta["frac_bits"]))
        self.integral = bool(meta["integral"])
        self.scale = 2.0 ** int(meta["grid_bits"]) if self.integral else 1.0
        self.ledger = Ledger()
        self.em_iterations = 0

    def host(self, provider: int) -> int:
        """The process that inputs data provider ``provider``'s values."""
        return provider % self.m

    def _input(
        self,
        sender: int,
        key: str,
        shape: tuple[int, ...],
        *,
        integral: bool,
        scale: float,
    ) -> Any:
        if self.pid == sender:
            arr = np.asarray(self.data[key], dtype=float) * scale
            if integral and not np.array_equal(arr, np.round(arr)):
                raise ValueError(
                    f"{key}: declared integral but not on the 2^-grid_bits grid"
                )
        else:
            arr = np.zeros(shape)
        return self.mpc.input(self.secfxp.array(arr, integral=integral), senders=sender)

    def share(self, party: int, values: Any, *, integral: bool) -> Any:
        """Party ``party``'s block ``X_k·2^8`` (integral) from its host process."""
        shape = tuple(self.meta["block_shapes"][party])
        return self._input(
            self.host(party),
            f"block_{party}",
            shape,
            integral=self.integral,
            scale=self.scale,
        )

    def share_labels(self) -> Any:
        """``y`` from the label holder's host."""
        return self._input(
            self.host(0), "y", (int(self.meta["n"]),), integral=True, scale=1.0
        )

    def share_joint_noise(self) -> Any:
        """``[c] = Σ_j [c_j]`` (spec §7.2): process ``j ∈ {0..t}`` draws ``c_j``
        (:meth:`JointNoise.draw`, on the grid ``2^{−32}``) here, from its own OS
        entropy unless a test seed is given, and secret-shares it; nobody learns ``c``."""
        spec = self.meta["noise"]
        noise = JointNoise(float(spec["scale"]), int(spec["dim"]), tuple(spec["seeds"]))
        total: Any = None
        for j in range(len(noise.seeds)):
            if self.pid == j:
                self.data[f"noise_{j}"] = noise.draw(j)
            part = self._input(j, f"noise_{j}", (noise.dim,), integral=False, scale=1.0)
            total = part if total is None else total + part
        return total

    def impute(self, X: Any, spec: dict[str, Any]) -> tuple[Any, NDArray[np.intp]]:
        """Conditional-mean imputation inside MPC (spec §5.1, §5.4, §5.6) from the
        public ``θ``; returns the completed design (real units, not integral) with
        its rows grouped by pattern, and that row order.

        Per pattern (observed ``O``, missing ``M``) and component ``j``, each party
        computes the public ``P = (Σ_j^{OO})⁻¹``, ``B = Σ_j^{MO} P`` and
        ``a = μ_j^M − B μ_j^O``; in MPC: ``ê_j = a + B x^O`` (public × secret) and,
        for ``J = 2``, ``α_1 = σ(log r_1 − log r_2)`` with
        ``log r_j = log π_j − ½ log det Σ_j^{OO} − ½ (x^O − μ_j^O)ᵀ P (x^O − μ_j^O)``
        (``|O| log 2π`` cancels), by the protocol's sigmoid;
        ``x̃^M = ê_2 + α_1 (ê_1 − ê_2)``, times the public DP factor. Nothing is
        opened. ``J > 2`` would need a secure softmax and is refused.
        """
        mpc = self.mpc
        weights = np.asarray(spec["weights"], dtype=float)
        means = np.asarray(spec["means"], dtype=float)
        covs = np.asarray(spec["covariances"], dtype=float)
        if weights.size > 2:
            raise ValueError("imputation: inside MPC needs J <= 2 mixture components")
        Xr = X * (1.0 / self.scale) if self.scale != 1.0 else X
        pieces, order = [], []
        for pat in spec["patterns"]:
            rows = np.asarray(pat["rows"], dtype=np.intp)
            obs = np.asarray(pat["obs"], dtype=np.intp)
            mis = np.asarray(pat["mis"], dtype=np.intp)
            Xp = Xr[rows]
            order.append(rows)
            if mis.size == 0:
                pieces.append(Xp)
                continue
            xo = Xp[:, 1 + obs]  # column 0 is the intercept
            fills = []
            for j in range(weights.size):
                S = covs[j]
                B = S[np.ix_(mis, obs)] @ np.linalg.inv(S[np.ix_(obs, obs)])
                a = means[j][mis] - B @ means[j][obs]
                fills.append(xo @ B.T + a)
            if weights.size == 1:
                fill = fills[0]
            else:
                alpha = self.responsibility(xo, obs, weights, means, covs).reshape(
                    -1, 1
                )
                fill = fills[1] + alpha * (fills[0] - fills[1])
            fill = fill * np.asarray(pat["scale"], dtype=float)
            full = mpc.np_hstack([Xp[:, :1], xo, fill])
            pieces.append(full[:, np.argsort(np.r_[0, 1 + obs, 1 + mis])])
        out = mpc.np_vstack(pieces) if len(pieces) > 1 else pieces[0]
        return out, np.concatenate(order)

    def responsibility(
        self, xo: Any, obs: NDArray[np.intp], weights: FloatArray, means: FloatArray,
        covs: FloatArray,
    ) -> Any:  # fmt: skip
        """``[α_1] = σ(log r_1 − log r_2)`` of a pattern's records (``J = 2``, §5.4),
        ``log r_j = log π_j − ½ log det Σ_j^{OO} − ½ (x^O − μ_j^O)ᵀ (Σ_j^{OO})⁻¹ (x^O − μ_j^O)``
        (public matrices, one secure product per coordinate; ``|O| log 2π`` cancels)."""
        logr = []
        for j in range(2):
            Soo = covs[j][np.ix_(obs, obs)]
            D = xo - means[j][obs]
            quad = self.mpc.np_sum((D @ np.linalg.inv(Soo)) * D, axis=1)
            _, logdet = np.linalg.slogdet(Soo)
            logr.append(float(np.log(weights[j]) - 0.5 * logdet) - 0.5 * quad)
        return self.sigmoid(logr[0] - logr[1])

    def em(self, X: Any, spec: dict[str, Any]) -> dict[str, Any]:
        """EM for the Gaussian mixture inside MPC (spec §5.4); the responsibilities
        ``α`` stay secret. Per iteration and pattern the sums ``c_jm = Σ α_ij``,
        ``s_jm = Σ α_ij x_i^O``, ``Q_jm = Σ α_ij x_i^O x_i^Oᵀ`` are computed on shares;
        then, by ``spec["em"]["reveal"]``:

        * ``"E1"``: the pattern sums are opened (§6 row 10) and every party runs the
          M-step of §5.2 in the clear (:func:`~learners.secure_vertical._em.m_step`);
        * ``"E2"`` (default): the M-step runs on shares as well
          (:meth:`secure_m_step`) and only ``θ_{t+1}`` is opened (§6 row 8).

        Stops when ``θ`` moves less than ``tol`` (max-abs over means and covariances;
        the log-likelihood needs a secure ``log``, §4.3) or after ``max_iter``. Returns
        ``θ`` as metadata for :meth:`impute` (public at E1 and E2)."""
        from learners.secure_vertical._em import Pattern, Theta, m_step

        mpc = self.mpc
        cfg = spec["em"]
        Xr = X * (1.0 / self.scale) if self.scale != 1.0 else X
        theta = Theta(
            np.asarray(cfg["weights"], dtype=float),
            np.asarray(cfg["means"], dtype=float),
            np.asarray(cfg["covariances"], dtype=float),
        )
        if theta.n_components > 2:
            raise ValueError("imputation: inside MPC needs J <= 2 mixture components")
        pats = [
            Pattern(
                np.asarray(p["rows"], dtype=np.intp),
                np.asarray(p["obs"], dtype=np.intp),
                np.asarray(p["mis"], dtype=np.intp),
            )
            for p in spec["patterns"]
        ]
        blocks = [Xr[pat.rows][:, 1 + pat.obs] for pat in pats]
        n = sum(int(pat.rows.size) for pat in pats)
        level = cfg.get("reveal", "E2")
        if level not in ("E1", "E2"):
            raise ValueError(f"em_reveal: must be 'E1' or 'E2', got {level!r}")
        for it in range(1, int(cfg["max_iter"]) + 1):
            if level == "E2":
                new = self.secure_m_step(
                    self.secret_pattern_sums(
                        blocks, pats, theta,
                        second=cfg["covariance"] != "fixed_identity",
                    ),
                    theta, pats, n=n, covariance=cfg["covariance"], iteration=it,
                )  # fmt: skip
                change = float(np.max(np.abs(new.means - theta.means))) + float(
                    np.max(np.abs(new.covariances - theta.covariances))
                )
                theta = new
                if change < float(cfg["tol"]):
                    break
                continue
            sums = []
            for pat, xo in zip(pats, blocks, strict=True):
                if theta.n_components == 1:
                    alphas: list[Any] = [None]
                else:
                    a1 = self.responsibility(
                        xo, pat.obs, theta.weights, theta.means, theta.covariances
                    )
                    alphas = [a1, 1 - a1]
                per_j = []
                for al in alphas:
                    if al is None:
                        c: Any = float(pat.rows.size)
                        s_ = mpc.np_sum(xo, axis=0)
                        Q = xo.T @ xo
                    else:
                        c = mpc.np_sum(al)
                        s_ = al @ xo
                        Q = (xo.T * al) @ xo
                    k = pat.obs.size
                    c_o = (
                        c
                        if isinstance(c, float)
                        else float(
                            self.open(
                                c, label="pattern sums (c, s, Q)", row=10, iteration=it
                            )
                        )
                    )
                    s_o = self.open(
                        s_, label="pattern sums (c, s, Q)", row=10, iteration=it
                    )
                    Q_o = self.open(
                        Q, label="pattern sums (c, s, Q)", row=10, iteration=it
                    )
                    per_j.append((c_o, s_o.reshape(k), Q_o.reshape(k, k)))
                sums.append(per_j)
            new = m_step(sums, theta, pats, n=n, covariance=cfg["covariance"])
            change = float(np.max(np.abs(new.means - theta.means))) + float(
                np.max(np.abs(new.covariances - theta.covariances))
            )
            theta = new
            if change < float(cfg["tol"]):
                break
        self.em_iterations = it
        return {
            "weights": theta.weights.tolist(),
            "means": theta.means.tolist(),
            "covariances": theta.covariances.tolist(),
            "patterns": spec["patterns"],
        }

    def secret_pattern_sums(
        self, blocks: list[Any], pats: list[Any], theta: Any, *, second: bool = True
    ) -> list[list[tuple[Any, Any, Any]]]:
        """``[(c_jm, s_jm, Q_jm) for j] for m`` on shares (§5.2, §5.4): ``c`` a
        ``1×1`` secure array (a public count when ``J = 1``), ``s`` of shape ``|O|``,
        ``Q`` of shape ``|O|×|O|`` (None without ``second``: a fixed covariance needs
        no second moments). Nothing is opened."""
        out = []
        for pat, xo in zip(pats, blocks, strict=True):
            if theta.n_components == 1:
                s_all = self.mpc.np_sum(xo, axis=0)
                Q_all = xo.T @ xo if second else None
                out.append([(float(pat.rows.size), s_all, Q_all)])
                continue
            a1 = self.responsibility(
                xo, pat.obs, theta.weights, theta.means, theta.covariances
            )
            per_j = []
            for al in (a1, 1 - a1):
                c = al.reshape(1, -1) @ np.ones((pat.rows.size, 1))
                Q = (xo.T * al) @ xo if second else None
                per_j.append((c, al @ xo, Q))
            out.append(per_j)
        return out

    def secure_m_step(
        self, sums: list[list[tuple[Any, Any, Any]]], theta: Any, pats: list[Any],
        *, n: int, covariance: str, iteration: int,
    ) -> Any:  # fmt: skip
        """The M-step of §5.2 on shares, opening only ``θ_{t+1}`` (reveal level E2,
        §5.4; §6 row 8). With the public regression of ``θ_t`` on pattern ``m``
        written ``x̂ = G x^O + h`` (``G``: identity on ``O``, ``B_jm`` on ``M``;
        ``h``: ``a_jm`` on ``M``, 0 on ``O``; original coordinate order) and the
        padded conditional covariance ``C`` (``V_jm`` on ``(M, M)``):

            Σ_i α_ij x̂_ij = G s + c h,
            Σ_i α_ij (x̂_ij x̂_ijᵀ + C) = G Q Gᵀ + G s hᵀ + h sᵀ Gᵀ + c (h hᵀ + C),

        the blocks of §5.2 (public × secret products only). Then
        ``n_j = Σ_m c_jm`` and one secure reciprocal per component:
        ``μ_j = first_j / n_j``, ``Σ_j = second_j / n_j − μ_j μ_jᵀ`` (``full``), its
        diagonal (``diagonal``), ``(Σ_j second_j − Σ_j first_j μ_jᵀ)/n`` (``tied``),
        or nothing (``fixed_identity``: ``Σ_j = I`` is public). ``θ_t`` is public, so
        no secure inverse is needed (E3 would need them). Opened: ``π`` (``n_j/n``),
        ``μ`` and the covariances in one output; the public symmetrisation and
        ``ρ I`` of :func:`~learners.secure_vertical._em.m_step` follow in the clear."""
        from learners.secure_vertical._em import RHO, Theta, _regression, record_theta

        mpc = self.mpc
        J, p = theta.n_components, theta.means.shape[1]
        counts: list[Any] = [None] * J
        first: list[Any] = [None] * J
        second: list[Any] = [None] * J
        for pat, per_j in zip(pats, sums, strict=True):
            o, m, k = pat.obs, pat.mis, pat.obs.size
            for j, (c, s, Q) in enumerate(per_j):
                G = np.zeros((p, k))
                G[o, np.arange(k)] = 1.0
                h = np.zeros(p)
                C = np.zeros((p, p))
                if m.size:
                    _, B, a, V, _ = _regression(theta, j, pat)
                    G[m] = B
                    h[m] = a
                    C[np.ix_(m, m)] = V
                c_vec = c if isinstance(c, float) else c.reshape(1)
                counts[j] = _accumulate(counts[j], c)
                first[j] = _accumulate(first[j], s @ G.T + c_vec * h)
                if Q is None:
                    continue
                cross = (s.reshape(k, 1) @ h.reshape(1, p)).T @ G.T  # h sᵀ Gᵀ
                GQG = (Q @ G.T).T @ G.T  # G Qᵀ Gᵀ = G Q Gᵀ (Q symmetric)
                moment = GQG + cross + cross.T + c * (np.outer(h, h) + C)
                second[j] = _accumulate(second[j], moment)
        recips: list[Any] = [1.0 / c if isinstance(c, float) else 1 / c for c in counts]
        means = [
            first[j]
            * (recips[j] if isinstance(recips[j], float) else recips[j].reshape(1))
            for j in range(J)
        ]
        eye = np.eye(p)
        if covariance == "full":
            covs = [
                second[j] * recips[j] - mpc.np_outer(means[j], means[j])
                for j in range(J)
            ]
        elif covariance == "diagonal":
            covs = [
                (second[j] * recips[j] - mpc.np_outer(means[j], means[j])) * eye
                for j in range(J)
            ]
        elif covariance == "tied":
            pooled: Any = None
            for j in range(J):
                pooled = _accumulate(
                    pooled, second[j] - mpc.np_outer(first[j], means[j])
                )
            covs = [pooled * (1.0 / n)]
        elif covariance == "fixed_identity":
            covs = []
        else:
            raise ValueError(f"covariance: unknown {covariance!r}")
        pieces = [
            v if isinstance(v, float) else v.reshape(-1)
            for v in [*counts, *means, *covs]
        ]
        flat = self._open_quiet(pieces)
        cnt = flat[:J]
        mu = flat[J : J + J * p].reshape(J, p)
        rest = flat[J + J * p :]
        if covariance == "fixed_identity":
            S = np.broadcast_to(eye, (J, p, p)).copy()
        elif covariance == "tied":
            S = np.broadcast_to(rest.reshape(p, p), (J, p, p)).copy()
        else:
            S = rest.reshape(J, p, p)
        if covariance != "fixed_identity":
            S = 0.5 * (S + np.transpose(S, (0, 2, 1))) + RHO * eye
        new = Theta(cnt / n, mu, S)
        record_theta(self.ledger, new, iteration=iteration)
        return new

    def _open_quiet(self, pieces: list[Any]) -> FloatArray:
        """Open the concatenation of ``pieces`` (secure arrays or public floats) in one
        output, unrecorded: the caller records what the values are (§6 rows)."""
        mpc = self.mpc
        secret = [v for v in pieces if not isinstance(v, float | np.ndarray)]
        opened = (
            np.asarray(mpc.run(mpc.output(mpc.np_hstack(secret))), dtype=float)
            if secret
            else np.zeros(0)
        )
        out, pos = [], 0
        for v in pieces:
            if isinstance(v, float):
                out.append(np.array([v]))
            elif isinstance(v, np.ndarray):
                out.append(v.reshape(-1).astype(float))
            else:
                size = int(np.prod(v.shape))
                out.append(opened[pos : pos + size])
                pos += size
        return np.concatenate(out)

    def grad_norm(
        self, X: Any, y: Any, beta: FloatArray, weights: FloatArray | None,
        lam: float, noise: Any,
    ) -> float:  # fmt: skip
        """``‖∇F(β̂)‖`` of the perturbed objective at the opened ``β̂`` (a solver
        diagnostic for the market, one opened scalar). ``g`` is scaled by ``2^8``
        before squaring so a residual near ``1e-6`` stays above the grid ``2^{−32}``."""
        pi = self.sigmoid(self.predict(X, beta))
        g, _ = self.score_information(X, y, pi, weights)
        gs = (g - lam * beta - noise) * GRAD_SCALE
        sq = self.open(self.mpc.np_sum(gs * gs), label="grad_norm", row=7)
        return float(np.sqrt(max(float(sq), 0.0)) / GRAD_SCALE)

    def hstack(self, blocks: list[Any]) -> Any:
        return self.mpc.np_hstack(blocks) if len(blocks) > 1 else blocks[0]

    def predict(self, X: Any, beta: Any) -> Any:
        """``η = (X·2^8) β · 2^{−8}``: the integral covariates times ``β`` first (no
        truncation, or ``β`` rounded once to the grid ``2^{−32}`` when public), then one
        scaling. Scaling ``β`` first (``X·2^8 · (β/2^8)``) rounds ``β/2^8`` to the grid
        and multiplies that error by ``|X|·2^8``: about ``1e-7`` in ``η`` instead of
        ``4e-10``, and ``3e-8`` in the fitted ``β̂`` at ``n = 150``."""
        if self.scale == 1.0:
            return X @ beta
        return (X @ beta) * (1.0 / self.scale)

    def sigmoid(self, eta: Any) -> Any:
        """``σ(η)`` without a secure division: with ``s = [η ≥ 0]`` and
        ``u = min(|η|, 16)``, ``e = e^{−u} ∈ [e^{−16}, 1]`` (Taylor + squarings), so
        ``1 + e ∈ [1, 2]`` and its reciprocal ``r`` takes a public linear start
        ``24/17 − 8/17·x`` (relative error ≤ 1/17) and 3 Newton steps
        ``r ← r(2 − x r)`` (each squares the relative error: ≤ 17^{−8} ≈ 1.4e-10,
        below the grid ``2^{−32}`` ≈ 2.3e-10); ``σ(η) = (1 − s) + (2s − 1) r``."""
        mpc = self.mpc
        s = eta >= 0
        sign = 2 * s - 1
        u = mpc.np_minimum(sign * eta, CLAMP)
        t = u * (-(2.0**-SQUARINGS))
        p = 1 + t * (
            1 + t * (0.5 + t * (1.0 / 6 + t * (1.0 / 24 + t * (1.0 / 120 + t / 720))))
        )
        for _ in range(SQUARINGS):
            p = p * p
        x = 1 + p
        r = 24.0 / 17.0 - (8.0 / 17.0) * x
        for _ in range(RECIPROCAL_STEPS):
            r = r * (2 - x * r)
        return (1 - s) + sign * r

    def score_information(
        self, X: Any, y: Any, pi: Any, weights: FloatArray | None
    ) -> tuple[Any, Any]:
        r = y - pi
        w = pi * (1 - pi)
        if weights is not None:
            r = r * weights
            w = w * weights
        g = (r @ X) * (1.0 / self.scale)
        info = ((X.T * w) @ X) * (1.0 / self.scale**2)
        return g, info

    def solve(self, info: Any, score: Any) -> Any:
        """Gauss–Jordan on ``[I | g]`` with secure reciprocals (``I`` is SPD: no pivoting)."""
        mpc = self.mpc
        d = int(self.meta["d"])
        M = mpc.np_hstack((info, score.reshape(d, 1)))
        for k in range(d):
            row = M[k] * (1 / M[k, k])
            M = M - mpc.np_outer(M[:, k], row)
            M = mpc.np_update(M, k, row)
        return M[:, d]

    def below(self, delta: Any, tol: float, *, iteration: int) -> bool:
        inside = (delta < tol) * (delta > -tol)
        bit = self.mpc.np_sum(inside) >= int(self.meta["d"])
        self.ledger.record("converged", (), iteration=iteration)
        return bool(self.mpc.run(self.mpc.output(bit)))

    def open(self, value: Any, *, label: str, row: int | None = None, iteration: int | None = None,
             to: tuple[str, ...] = ("all",)) -> FloatArray:  # fmt: skip
        if isinstance(value, np.ndarray):
            arr = np.array(value, dtype=float)
        else:
            arr = np.asarray(self.mpc.run(self.mpc.output(value)), dtype=float)
        self.ledger.record(label, arr.shape, to=to, iteration=iteration, row=row)
        return arr


def _accumulate(total: Any, term: Any) -> Any:
    """``total + term`` with ``None`` as the empty sum (secure arrays do not add to
    numpy zeros on the left)."""
    return term if total is None else total + term


def run_party(
    job: Path, pid: int, *, node: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The party program (module docstring); returns what it writes to ``out_PID.json``,
    including ``timings`` (seconds: ``start`` = import and connecting, ``share`` = the
    inputs, ``newton`` = the protocol). With ``node`` (``connect_timeout``,
    ``deadline``: a party on its own machine), a :class:`PeerWatch` fails the run with
    a reason instead of hanging when a peer drops out."""
    t0 = time.perf_counter()
    from mpyc.runtime import mpc

    install_fast_truncation(mpc)
    meta = json.loads((job / "meta.json").read_text())
    path = job / f"data_{pid}.npz"
    data = dict(np.load(path)) if path.exists() else {}
    ops = MPyCOps(mpc, meta, data)
    watch = None
    if node is not None:
        watch = PeerWatch(mpc, job, connect_timeout=float(node["connect_timeout"]),
                          deadline=float(node["deadline"]))  # fmt: skip
    mpc.run(mpc.start())
    if watch is not None:
        watch.connected()
    t1 = time.perf_counter()
    blocks = [
        ops.share(k, None, integral=ops.integral)
        for k in range(len(meta["block_shapes"]))
    ]
    X = ops.hstack(blocks)
    y = ops.share_labels()
    noise = ops.share_joint_noise() if meta["noise"] is not None else None
    weights = (
        np.asarray(meta["weights"], dtype=float)
        if meta["weights"] is not None
        else None
    )
    theta_out = None
    if meta.get("imputation") is not None:
        spec = meta["imputation"]
        if spec.get("em") is not None:
            spec = theta_out = ops.em(X, spec)
        X, order = ops.impute(X, spec)
        y = y[order]
        weights = None if weights is None else weights[order]
        ops.scale = 1.0  # the completed design is in real units (not integral)
    t2 = time.perf_counter()
    trace = secure_newton(
        ops,
        X,
        y,
        d=int(meta["d"]),
        weights=weights,
        lam=float(meta["lam"]),
        noise=noise,
        reveal=meta["reveal"],
        tol=float(meta["tol"]),
        max_iter=int(meta["max_iter"]),
        fixed_iterations=bool(meta["fixed_iterations"]),
    )
    t3 = time.perf_counter()
    grad_norm = (
        ops.grad_norm(X, y, trace.beta, weights, float(meta["lam"]), noise)
        if noise is not None
        else float("nan")
    )
    if watch is not None:
        watch.closing()
    mpc.run(mpc.shutdown())
    if watch is not None:
        watch.stop()
    return {
        "theta": None
        if theta_out is None
        else {k: theta_out[k] for k in ("weights", "means", "covariances")},
        "em_iterations": getattr(ops, "em_iterations", 0),
        "grad_norm": grad_norm,
        "timings": {"start": t1 - t0, "share": t2 - t1, "newton": t3 - t2},
        "beta": [float(v) for v in trace.beta],
        "n_iter": trace.n_iter,
        "converged": trace.converged,
        "ledger": [o.to_dict() for o in ops.ledger.openings],
    }


def selftest() -> dict[str, Any]:
    """One process: the fixed-point sigmoid on a grid of ``[−20, 20]``, the secret
    solve of a 7×7 SPD system (spec §10 V11), against float64, and the error of 4000
    truncated products (:func:`install_fast_truncation`) in units of ``2^{−32}``."""
    from mpyc.runtime import mpc

    install_fast_truncation(mpc)
    meta = {"n_parties": 1, "bit_length": 64, "frac_bits": 32, "integral": False,
            "grid_bits": 8, "d": 7}  # fmt: skip
    ops = MPyCOps(mpc, meta, {})
    mpc.run(mpc.start())
    x = np.linspace(-20.0, 20.0, 161)
    sig = ops.open(ops.sigmoid(ops.secfxp.array(x, integral=False)), label="selftest")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((7, 7))
    info = A @ A.T + 7 * np.eye(7)
    g = rng.standard_normal(7)
    sec = ops.solve(
        ops.secfxp.array(info, integral=False), ops.secfxp.array(g, integral=False)
    )
    delta = ops.open(sec, label="selftest")
    ulp = 2.0**-32  # products of values on the 2^-32 grid: only the truncation errs
    a, b = (np.round(rng.uniform(-3, 3, 4000) / ulp) * ulp for _ in range(2))
    prod = ops.open(ops.secfxp.array(a, integral=False) * ops.secfxp.array(b, integral=False),
                    label="selftest")  # fmt: skip
    mpc.run(mpc.shutdown())
    return {"x": x.tolist(), "sigmoid": sig.tolist(), "solve": delta.tolist(),
            "info": info.tolist(), "g": g.tolist(),
            "product_error_ulp": ((prod - a * b) / ulp).tolist()}  # fmt: skip


def main(argv: list[str]) -> int:
    """Entry point: ``JOB_DIR PID -- [MPyC options]`` or ``--selftest``."""
    if len(argv) > 1 and argv[1] == "--selftest":
        sys.argv = [argv[0], "--no-log"]
        print(json.dumps(selftest()))  # noqa: T201
        return 0
    job, pid = Path(argv[1]), int(argv[2])
    rest = argv[3:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    sys.argv = [argv[0], *rest]
    node_path = job / NODE_CONFIG
    node = json.loads(node_path.read_text()) if node_path.exists() else None
    if node is None:
        bind_loopback()
    else:
        bind_host(str(node["listen_host"]))
    use_pooled_entropy()
    out = run_party(job, pid, node=node)
    (job / f"out_{pid}.json").write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
