"""2-SLR / M-SLR as rounds of report requests (seller custody; spec §2–§7, §12).

Every seller is one user with all its records, and sends exactly one message at its
full ``ε_i`` over the whole protocol (spec §1.3); the rounds only order who speaks when.
Public randomness (role split, tree levels, Hadamard rows, rotation signs, coordinate
groups, M-SLR batches) is drawn by the platform from the protocol's public generator
and from public budgets only.

- Round 0, localization of the support (selection half, spec §3–§4): each seller runs
  its local selector on its own records, picks one index of its local set with its
  own coins and sends one heavy-hitter bit ``RR_ε(H[r_i, pre_{ℓ_i}(v_i)])``
  (``uldp_sparse_linear.heavy_hitter_bit@1``). The curator descends the prefix tree
  and publishes the support ``Ŝ``.
- 2-SLR (spec §5–§6), estimation half: ULDPMean of the sellers' local OLS vectors on
  ``Ŝ`` in two rounds — round 1, the localization sellers send one bin bit of their
  rotated coordinate (``uldp_sparse_linear.bin_bit@1``); the curator publishes the
  intervals ``I_k``; round 2, the mean sellers send ``Π_{I_k}(w_ik) + Laplace(Δ/ε_i)``
  (``uldp_sparse_linear.laplace@1``).
- M-SLR (spec §7): ``T`` steps, each a ULDPMean (two rounds) of the local gradients of
  a fresh batch of sellers at the published ``θ_md``.

A seller computes every input from its own records and the request's public fields
only, with the library's own functions (:mod:`learners.uldp_sparse._local`,
:mod:`learners.uldp_sparse._randomizers`). The hashed heavy-hitter oracle and the exact
(non-private) mode are not offered with seller custody.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from learners.local_protocol import (
    LocalProtocol,
    Randomizer,
    ReportRequest,
    check_report_keys,
    market_scaling,
    register_protocol,
    register_randomizer,
    report_array,
)
from learners.uldp_sparse._curator import locate_bins, weighted_means
from learners.uldp_sparse._hadamard import n_rows, rotation
from learners.uldp_sparse._heavy_hitter import (
    STAGE as SELECTION_STAGE,
)
from learners.uldp_sparse._heavy_hitter import (
    assign_levels,
    curate_tree,
    tree_depth,
)
from learners.uldp_sparse._ledger import PrivacyLedger
from learners.uldp_sparse._local import (
    gram,
    local_gradients,
    local_ols,
    pick_one,
    post_lasso_sets,
    screening_scores,
    top_k_rows,
    top_k_signed_rows,
)
from learners.uldp_sparse._mean import padded_dimension
from learners.uldp_sparse._messages import BitMessages, ValueMessages
from learners.uldp_sparse._pipeline import estimation_algorithm
from learners.uldp_sparse._randomizers import (
    bin_randomizer,
    heavy_hitter_randomizer,
    laplace_randomizer,
)
from learners.uldp_sparse._report import privacy_report
from learners.uldp_sparse._roles import deal, split_halves

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
HH = "uldp_sparse_linear.heavy_hitter_bit@1"
BIN = "uldp_sparse_linear.bin_bit@1"
LAPLACE = "uldp_sparse_linear.laplace@1"


# --- the sellers' side ----------------------------------------------------------


def _one(value: float | int, dtype: Any = float) -> NDArray[Any]:
    return np.asarray([value], dtype=dtype)


def _selection_answer(
    request: ReportRequest, X: FloatArray, y: FloatArray, rng: np.random.Generator
) -> dict[str, Any]:
    pub = request.public
    d = int(pub["n_features"])
    if X.shape[1] != d:
        raise ValueError(f"X: the request is for {d} features, got {X.shape[1]}")
    _finite(X, y)
    user = np.zeros(X.shape[0], dtype=np.int64)
    me = np.zeros(1, dtype=np.int64)
    k_sel = int(pub["k_sel"])
    selector = str(pub["selector"])
    if selector == "post_lasso":
        sets = post_lasso_sets(
            X, y, user, me, k_sel=k_sel, k_screen=int(pub["k_screen"])
        )
    elif selector == "screening_signed":
        sets = top_k_signed_rows(screening_scores(X, y, user, me), k_sel)
    else:
        sets = top_k_rows(screening_scores(X, y, user, me), k_sel)
    v = pick_one(sets, rng)  # private coin, then the bit (library order)
    bit = heavy_hitter_randomizer(
        v,
        level=_one(int(pub["level"]), np.int64),
        row=_one(int(pub["row"]), np.int64),
        n_levels=int(pub["n_levels"]),
        epsilon=_one(request.epsilon),
        rng=rng,
    )
    return {"bit": int(bit[0])}


def _finite(X: FloatArray, y: FloatArray) -> None:
    if not np.isfinite(X).all():
        raise ValueError("X must be finite (this learner has no missing values)")
    if not np.isfinite(y).all():
        raise ValueError("y must be finite")


def _rotated_coordinate(request: ReportRequest, X: FloatArray, y: FloatArray) -> float:
    """The seller's rotated coordinate ``w_ik = (Uᵀ v_i)_k`` of its local vector
    ``v_i`` (local OLS on ``Ŝ``, or its local gradient at ``θ_md``)."""
    pub = request.public
    d = int(pub["n_features"])
    if X.shape[1] != d:
        raise ValueError(f"X: the request is for {d} features, got {X.shape[1]}")
    _finite(X, y)
    support = np.asarray(pub["support"], dtype=np.int64)
    Xs = X[:, support] * float(pub["x_scale"])
    if pub["fit_intercept"]:
        Xs = np.hstack([Xs, np.ones((Xs.shape[0], 1))])
    user = np.zeros(X.shape[0], dtype=np.int64)
    G, b, m = gram(Xs, y, user, np.zeros(1, dtype=np.int64))
    if pub["value"] == "gradient":
        v = local_gradients(G, b, m, np.asarray(pub["theta"], dtype=float))
    else:
        v = local_ols(G, b)
    signs = np.asarray(pub["signs"], dtype=float)
    K = signs.size
    U = rotation(signs) if pub["rotate"] else np.eye(K)
    padded = np.zeros((1, K))
    padded[:, : v.shape[1]] = v
    return float((padded @ U)[0, int(pub["coordinate"])])


def _bin_answer(
    request: ReportRequest, X: FloatArray, y: FloatArray, rng: np.random.Generator
) -> dict[str, Any]:
    pub = request.public
    w = _rotated_coordinate(request, X, y)
    bit = bin_randomizer(
        _one(w),
        bound=float(pub["bound"]),
        n_bins=int(pub["n_bins"]),
        row=_one(int(pub["row"]), np.int64),
        epsilon=_one(request.epsilon),
        rng=rng,
    )
    return {"bit": int(bit[0])}


def _laplace_answer(
    request: ReportRequest, X: FloatArray, y: FloatArray, rng: np.random.Generator
) -> dict[str, Any]:
    pub = request.public
    w = _rotated_coordinate(request, X, y)
    z = laplace_randomizer(
        _one(w),
        low=_one(float(pub["low"])),
        high=_one(float(pub["high"])),
        epsilon=_one(request.epsilon),
        rng=rng,
    )
    return {"value": float(z[0])}


def _validate_bit(request: ReportRequest, report: Mapping[str, Any]) -> None:
    check_report_keys(report, ("bit",))
    report_array(report, "bit", shape=(), alphabet=(-1, 1))


def _validate_value(request: ReportRequest, report: Mapping[str, Any]) -> None:
    check_report_keys(report, ("value",))
    report_array(report, "value", shape=())


register_randomizer(
    Randomizer(
        HH,
        _selection_answer,
        _validate_bit,
        "local selector, one index of the local set, one randomized-response bit of "
        "its Hadamard code at the seller's tree level",
    )
)
register_randomizer(
    Randomizer(
        BIN,
        _bin_answer,
        _validate_bit,
        "one randomized-response bit of the Hadamard code of the bin of a rotated "
        "coordinate of the seller's local vector",
    )
)
register_randomizer(
    Randomizer(
        LAPLACE,
        _laplace_answer,
        _validate_value,
        "a rotated coordinate of the seller's local vector, projected on the "
        "published interval, plus Laplace noise",
    )
)


# --- the protocol ------------------------------------------------------------------


def _ints(a: Any) -> IntArray:
    return np.asarray(a, dtype=np.int64).reshape(-1)


@register_protocol
class ULDPSparseProtocol(LocalProtocol):
    """Selection round, then ULDPMean rounds (2-SLR: 2; M-SLR: 2 per step)."""

    kind = "uldp_sparse_linear"
    learner = "uldp_sparse_linear"

    def __init__(self, *, n_features: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        p = self.params
        if p.get("exact"):
            raise ValueError(
                "exact: the non-private mode has no seller-custody protocol"
            )
        if p.get("hh_oracle", "direct") != "direct":
            raise ValueError(
                "hh_oracle: only the direct heavy-hitter oracle runs with seller custody"
            )
        self.d = int(n_features)
        self.L = tree_depth(self.d)
        active = np.flatnonzero(self.epsilon > 0).astype(np.int64)
        if active.size < 2:
            raise ValueError(
                "epsilon: at least 2 sellers need a budget > 0 (one selects, one "
                "estimates)"
            )
        cfg = self._cfg()
        first, second = split_halves(self.epsilon[active], self.rng)
        self.sel, self.est = active[first], active[second]
        self.level = assign_levels(
            self.epsilon[self.sel], n_levels=self.L, k=cfg.k, alpha=cfg.alpha,
            rule=cfg.levels, rng=self.rng,
        )  # fmt: skip
        self.hh_row = self.rng.integers(0, np.left_shift(1, self.level))
        self.stage = "selection"
        self.messages: dict[str, Any] = {}
        self.support = np.zeros(0, dtype=np.int64)
        self.survivors: list[list[int]] = []
        self.algorithm = cfg.algorithm
        self.mean: dict[str, Any] = {}
        self.mslr: dict[str, Any] = {}
        self.theta = np.zeros(0)
        self.empty = 0
        self.n_rounds = 0
        self.error = ""
        self.ledger_stages: dict[str, list[float]] = {}

    def _cfg(self) -> Any:
        """The pipeline's configuration: the order's params with the public default
        rule applied to the sellers' allocated ε (as the library fit does)."""
        return self._configured()[0]

    def _configured(self) -> tuple[Any, Any]:
        from learners.uldp_sparse._estimator import ULDPSparseLinearRegression

        est = ULDPSparseLinearRegression(**self.params)
        cfg = est._config(self.d, np.asarray(self.epsilon, dtype=float))
        return cfg, est.settings_

    # --- requests -------------------------------------------------------------

    def _plan(self) -> dict[int, ReportRequest] | None:
        if self.stage == "selection":
            cfg = self._cfg()
            pub = {
                "n_features": self.d, "selector": cfg.selector, "k_sel": cfg.k_sel,
                "k_screen": cfg.k_screen, "n_levels": self.L,
            }  # fmt: skip
            return {
                int(i): ReportRequest(
                    self.round,
                    HH,
                    float(self.epsilon[i]),
                    self._public(
                        n_records=int(self.n_records[i]),
                        stage="selection",
                        level=int(lv),
                        row=int(r),
                        **pub,
                    ),
                )
                for i, lv, r in zip(self.sel, self.level, self.hh_row, strict=True)
            }
        if self.stage in ("localization", "mean"):
            return self._mean_requests()
        return None

    def _mean_requests(self) -> dict[int, ReportRequest]:
        m = self.mean
        cfg = self._cfg()
        pub = {
            "n_features": self.d, "support": self.support.tolist(),
            "x_scale": cfg.x_scale, "fit_intercept": cfg.fit_intercept,
            "value": m["value"], "theta": m["theta"], "signs": m["signs"],
            "rotate": cfg.rotate, "bound": m["bound"], "n_bins": cfg.n_bins,
            "stage": m["stage"],
        }  # fmt: skip
        out = {}
        if self.stage == "localization":
            for i, k, r in zip(m["loc"], m["k_loc"], m["row"], strict=True):
                out[int(i)] = ReportRequest(
                    self.round, BIN, float(self.epsilon[i]),
                    self._public(
                        n_records=int(self.n_records[i]), coordinate=int(k), row=int(r),
                        **pub,
                    ),
                )  # fmt: skip
        else:
            for i, k in zip(m["est"], m["k_est"], strict=True):
                out[int(i)] = ReportRequest(
                    self.round, LAPLACE, float(self.epsilon[i]),
                    self._public(
                        n_records=int(self.n_records[i]), coordinate=int(k),
                        low=m["low"][k], high=m["high"][k], **pub,
                    ),
                )  # fmt: skip
        return out

    # --- the curator ------------------------------------------------------------

    def _charge(self, label: str, sellers: list[int], eps: list[float]) -> None:
        per = self.ledger_stages.setdefault(label, [0.0] * self.n_sellers)
        for i, e in zip(sellers, eps, strict=True):
            per[i] += e

    def _absorb(
        self,
        reports: Mapping[int, Mapping[str, Any]],
        requests: Mapping[int, ReportRequest],
    ) -> None:
        got = [i for i in requests if i in reports]
        eps = [requests[i].epsilon for i in got]
        if self.stage == "selection":
            self._charge(SELECTION_STAGE, got, eps)
            self._select(got, [int(reports[i]["bit"]) for i in got])
        elif self.stage == "localization":
            self._charge(f"{self.mean['stage']}: bin-localization bit", got, eps)
            self._localize(got, [int(reports[i]["bit"]) for i in got])
        elif self.stage == "mean":
            self._charge(f"{self.mean['stage']}: Laplace mean report", got, eps)
            self._average(got, [float(reports[i]["value"]) for i in got])

    def _select(self, got: list[int], bits: list[int]) -> None:
        if not got:
            self.error = "no seller of the selection half sent its report"
            self.stage = "done"
            return
        cfg = self._cfg()
        pos = {int(i): j for j, i in enumerate(self.sel)}
        idx = np.array([pos[i] for i in got], dtype=np.int64)
        messages = BitMessages(
            group=self.level[idx],
            row=self.hh_row[idx],
            bit=np.asarray(bits, dtype=np.int8),
            epsilon=self.epsilon[np.asarray(got, dtype=np.int64)],
        )
        res = curate_tree(
            messages, d=self.d, k=cfg.k, alpha=cfg.alpha, weighted=cfg.weighted
        )
        self.support = res.support
        self.survivors = [s.tolist() for s in res.survivors]
        s = self.support.size + (1 if cfg.fit_intercept else 0)
        self.theta = np.zeros(s)
        self.algorithm = estimation_algorithm(cfg, s)
        est = self.est[~self.failed[self.est]]
        if est.size == 0:
            self.stage = "done"
            return
        if self.algorithm == "multi_round":
            T = max(1, est.size // cfg.batch_size)
            batch = deal(self.epsilon[est], T, self.rng)
            self.mslr = {
                "T": T, "t": 0, "users": est.tolist(), "batch": batch.tolist(),
                "theta": [0.0] * s, "theta_ag": [0.0] * s,
            }  # fmt: skip
            self._next_step()
        else:
            self.n_rounds = 2
            self._start_mean(est, "ols", None, cfg.bound, "estimation (2-SLR)")

    def _next_step(self) -> None:
        ms = self.mslr
        t = ms["t"]
        users = _ints(ms["users"])[_ints(ms["batch"]) == t]
        beta = (t + 2) / 2.0
        theta, theta_ag = np.asarray(ms["theta"]), np.asarray(ms["theta_ag"])
        theta_md = theta / beta + (1 - 1 / beta) * theta_ag
        ms["theta_md"] = theta_md.tolist()
        cfg = self._cfg()
        self._start_mean(
            users, "gradient", theta_md.tolist(), cfg.gradient_bound,
            "estimation (M-SLR gradient)",
        )  # fmt: skip

    def _start_mean(
        self,
        users: IntArray,
        value: str,
        theta: list[float] | None,
        bound: float,
        stage: str,
    ) -> None:
        """Public setup of one ULDPMean (spec §6 steps 1–2), as ``uldp_mean`` draws it."""
        cfg = self._cfg()
        s = self.theta.size
        K = padded_dimension(s)
        signs = self.rng.choice([-1.0, 1.0], size=K) if cfg.rotate else np.ones(K)
        eps = self.epsilon[users]
        loc, est = split_halves(eps, self.rng)
        coordinate = np.empty(users.size, dtype=np.int64)
        coordinate[loc] = deal(eps[loc], K, self.rng)
        coordinate[est] = deal(eps[est], K, self.rng)
        row = self.rng.integers(0, n_rows(cfg.n_bins), size=loc.size)
        self.mean = {
            "value": value, "theta": theta, "signs": signs.tolist(), "bound": float(bound),
            "stage": stage, "K": K, "loc": users[loc].tolist(),
            "k_loc": coordinate[loc].tolist(), "row": row.tolist(),
            "est": users[est].tolist(), "k_est": coordinate[est].tolist(),
            "low": [], "high": [],
        }  # fmt: skip
        self.stage = "localization"

    def _localize(self, got: list[int], bits: list[int]) -> None:
        m = self.mean
        cfg = self._cfg()
        pos = {int(i): j for j, i in enumerate(m["loc"])}
        idx = np.array([pos[i] for i in got], dtype=np.int64)
        tau = 2.0 * m["bound"] / cfg.n_bins
        best, seen = locate_bins(
            BitMessages(
                group=_ints(m["k_loc"])[idx] if idx.size else np.zeros(0, np.int64),
                row=_ints(m["row"])[idx] if idx.size else np.zeros(0, np.int64),
                bit=np.asarray(bits, dtype=np.int8),
                epsilon=self.epsilon[np.asarray(got, dtype=np.int64)],
            ),
            n_groups=m["K"], n_bins=cfg.n_bins, weighted=cfg.weighted,
        )  # fmt: skip
        B = m["bound"]
        m["low"] = np.where(seen, -B + (best - 1) * tau, -B).tolist()
        m["high"] = np.where(seen, -B + (best + 2) * tau, B).tolist()
        self.stage = "mean"

    def _average(self, got: list[int], values: list[float]) -> None:
        m = self.mean
        cfg = self._cfg()
        pos = {int(i): j for j, i in enumerate(m["est"])}
        idx = np.array([pos[i] for i in got], dtype=np.int64)
        k_est = _ints(m["k_est"])[idx] if idx.size else np.zeros(0, np.int64)
        low, high = np.asarray(m["low"]), np.asarray(m["high"])
        tau = 2.0 * m["bound"] / cfg.n_bins
        mu, filled = weighted_means(
            ValueMessages(
                group=k_est,
                value=np.asarray(values, dtype=float),
                epsilon=self.epsilon[np.asarray(got, dtype=np.int64)],
            ),
            n_groups=m["K"], delta=high - low, v0=np.full(m["K"], tau**2 / 4.0),
            weighted=cfg.weighted,
        )  # fmt: skip
        signs = np.asarray(m["signs"])
        U = rotation(signs) if cfg.rotate else np.eye(m["K"])
        mean = np.asarray((U @ mu)[: self.theta.size], dtype=float)
        self.empty += int((~filled).sum())
        if self.algorithm != "multi_round":
            self.theta = mean
            self.stage = "done"
            return
        ms = self.mslr
        t = ms["t"]
        beta = (t + 2) / 2.0
        eta = cfg.step_c0 * (t + 1) ** cfg.step_power
        theta, theta_ag = np.asarray(ms["theta"]), np.asarray(ms["theta_ag"])
        base = theta if cfg.update == "ac_sa" else np.asarray(ms["theta_md"])
        theta = base - eta * mean
        theta_ag = theta / beta + (1 - 1 / beta) * theta_ag
        ms["theta"], ms["theta_ag"] = theta.tolist(), theta_ag.tolist()
        ms["t"] = t + 1
        self.n_rounds = ms["t"]
        self.theta = theta_ag
        if ms["t"] >= ms["T"]:
            self.stage = "done"
        else:
            self._next_step()

    # --- result -------------------------------------------------------------------

    def _new_estimator(self) -> Any:
        from learners.uldp_sparse._estimator import ULDPSparseLinearRegression

        return ULDPSparseLinearRegression(**self.params)

    def _finish(self, est: Any) -> None:
        if self.error:
            raise ValueError(f"too few sellers delivered: {self.error}")
        cfg, est.settings_ = self._configured()
        from learners.uldp_sparse._heavy_hitter import HeavyHitterResult

        coef = np.zeros(self.d)
        coef[self.support] = self.theta[: self.support.size] * cfg.x_scale
        est.coef_ = coef
        est.intercept_ = float(self.theta[-1]) if cfg.fit_intercept else 0.0
        est.support_ = self.support
        est.selection_ = HeavyHitterResult(
            support=self.support,
            survivors=[_ints(s) for s in self.survivors],
            n_levels=self.L,
        )
        est.empty_coordinates_ = self.empty
        est.n_rounds_ = self.n_rounds
        est.algorithm_ = self.algorithm
        est.n_users_ = self.n_sellers
        est.n_features_in_ = self.d
        ledger = PrivacyLedger(self.epsilon)
        ledger.spent = self.spent.copy()
        ledger.messages = self.asked.astype(np.int64) * (~self.failed)
        ledger.stages = {k: np.asarray(v) for k, v in self.ledger_stages.items()}
        est.ledger_ = ledger
        user = np.repeat(np.arange(self.n_sellers), self.n_records)
        est.privacy_report_ = privacy_report(ledger, user, exact=False)

    # --- state ----------------------------------------------------------------------

    def _dump(self) -> dict[str, Any]:
        return {
            "n_features": self.d, "sel": self.sel.tolist(), "est": self.est.tolist(),
            "level": self.level.tolist(), "hh_row": self.hh_row.tolist(),
            "stage": self.stage, "support": self.support.tolist(),
            "survivors": self.survivors, "algorithm": self.algorithm,
            "mean": self.mean, "mslr": self.mslr, "theta": self.theta.tolist(),
            "empty": self.empty, "n_rounds": self.n_rounds, "error": self.error,
            "ledger_stages": self.ledger_stages,
        }  # fmt: skip

    def _load(self, data: Mapping[str, Any]) -> None:
        self.d = int(data["n_features"])
        self.L = tree_depth(self.d)
        self.sel, self.est = _ints(data["sel"]), _ints(data["est"])
        self.level, self.hh_row = _ints(data["level"]), _ints(data["hh_row"])
        self.stage = str(data["stage"])
        self.support = _ints(data["support"])
        self.survivors = [list(s) for s in data["survivors"]]
        self.algorithm = str(data["algorithm"])
        self.mean = dict(data["mean"])
        self.mslr = dict(data["mslr"])
        self.theta = np.asarray(data["theta"], dtype=float)
        self.empty = int(data["empty"])
        self.n_rounds = int(data["n_rounds"])
        self.error = str(data["error"])
        self.ledger_stages = {k: list(v) for k, v in data["ledger_stages"].items()}
        self.messages = {}


def build_protocol(
    params: Mapping[str, Any],
    *,
    context: Any = None,
    epsilon: Any,
    n_records: Any,
    random_state: Any = None,
) -> ULDPSparseProtocol:
    """The seller-custody protocol of an order (the learner's ``local_protocol``).

    Raises
    ------
    ValueError
        Without a market schema (``context.market["features"]``): the number of
        features is unknown.
    """
    from learners.uldp_sparse._estimator import ULDPSparseLinearRegression

    scaling = market_scaling(context)
    if scaling is None:
        raise ValueError("context: a market schema with features is needed")
    est = ULDPSparseLinearRegression.for_order(params, context=context)
    return est.protocol(
        epsilon=epsilon,
        n_records=n_records,
        n_features=len(scaling["features"]),
        scaling=scaling,
        random_state=random_state,
    )
