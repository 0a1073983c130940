"""The randomizers' empirical privacy audits, run through :func:`answer_request` — the
function a seller's client calls — with their broken twins still detected.

Each audit draws many reports of one seller-side input and of its worst neighbour
through ``answer_request`` (a seller holding many copies of one record: every record
is randomized independently at the request's ε), and bounds the privacy loss from
below with the audits' own estimators. The broken twins are patched in place of the
library function the registered randomizer calls: the audit must then fail, which also
shows that ``answer_request`` runs exactly that function.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import learners.ldp_missing._protocol as ldp_protocol
import learners.onebit_quantile._protocol as onebit_protocol
import learners.uldp_sparse._protocol as uldp_protocol
from learners import (
    LDPMissingLogisticRegression,
    OneBitQuantileRegression,
    ReportRequest,
    ULDPSparseLinearRegression,
    answer_request,
)
from learners.ldp_missing import private_sampling
from learners.onebit_quantile import bit_flip
from learners.uldp_sparse import hadamard_entry, one_bit_randomizer
from tests.learners.onebit_quantile.test_privacy_audit import (
    N_DRAWS,
)
from tests.learners.onebit_quantile.test_privacy_audit import (
    epsilon_lower_bound as discrete_lower_bound,
)
from tests.learners.test_ldp_missing_audit import ALPHA, _clopper_pearson

# --- onebit_quantile.bits@1 ----------------------------------------------------------


def _onebit_request(eps: float, private_x: bool) -> ReportRequest:
    kw: dict[str, Any] = {"alpha": 0.5, "interval": [-1.0, 1.0]}
    if private_x:
        kw |= {"private_x": True, "bounds_X": (-1.0, 1.0)}
    proto = OneBitQuantileRegression(**kw).protocol(
        epsilon=[eps], n_records=[N_DRAWS], n_features=2, random_state=0
    )
    reqs = proto.next_round()
    assert reqs is not None
    return reqs[0]


def _onebit_codes(
    req: ReportRequest, point: tuple[float, float, float], rng: np.random.Generator
) -> np.ndarray:
    y, x1, x2 = point
    X = np.tile([x1, x2], (N_DRAWS, 1))
    rep = answer_request(req, X, np.full(N_DRAWS, y), rng=rng)
    if "z" in rep:
        return np.asarray(rep["z"], dtype=np.int64)
    bits = np.column_stack([rep["z_y"], (np.asarray(rep["z_x"]) + 1) // 2])
    return bits.astype(np.int64) @ np.array([4, 2, 1])


def _untruncated(v: Any, *, epsilon: Any, low: float, high: float, rng: Any) -> Any:
    """Broken twin of the bit flip: ``q_ε`` of the raw value, clamped."""
    c = (math.exp(float(np.max(epsilon))) + 1) / (math.exp(float(np.max(epsilon))) - 1)
    q = np.clip(0.5 + np.asarray(v, dtype=float) / (2.0 * c), 0.0, 1.0)
    return (rng.random(q.shape) < q).astype(np.int8)


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_onebit_public_x_through_the_client(
    eps: float, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    req = _onebit_request(eps, private_x=False)
    far = discrete_lower_bound(
        _onebit_codes(req, (3.0, 0.0, 0.0), rng),
        _onebit_codes(req, (-3.0, 0.0, 0.0), rng),
        n_outputs=2,
    )
    assert 0.8 * eps < far <= eps  # raw values beyond the interval: truncated
    import learners.onebit_quantile._randomizers as randomizers

    monkeypatch.setattr(randomizers, "bit_flip", _untruncated)
    broken = discrete_lower_bound(
        _onebit_codes(req, (3.0, 0.0, 0.0), rng),
        _onebit_codes(req, (-3.0, 0.0, 0.0), rng),
        n_outputs=2,
    )
    assert broken > eps


@pytest.mark.parametrize("eps", [0.75, 3.0])
def test_onebit_private_x_through_the_client(
    eps: float, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """k = 2: the k + 1 bits share ε; the extreme neighbours realise all of it."""
    req = _onebit_request(eps, private_x=True)
    ok = discrete_lower_bound(
        _onebit_codes(req, (1.0, 1.0, 1.0), rng),
        _onebit_codes(req, (-1.0, -1.0, -1.0), rng),
        n_outputs=8,
    )
    assert 0.7 * eps < ok <= eps
    real = onebit_protocol.randomize_private_x

    def every_bit_at_full_eps(*args: Any, epsilon: Any, **kw: Any) -> Any:
        return real(*args, epsilon=3.0 * np.asarray(epsilon), **kw)

    monkeypatch.setattr(onebit_protocol, "randomize_private_x", every_bit_at_full_eps)
    broken = discrete_lower_bound(
        _onebit_codes(req, (1.0, 1.0, 1.0), rng),
        _onebit_codes(req, (-1.0, -1.0, -1.0), rng),
        n_outputs=8,
    )
    assert broken > eps


def test_onebit_client_calls_the_library_bit_flip() -> None:
    """Same generator state: the client's bits are the library's ``bit_flip``."""
    req = _onebit_request(1.0, private_x=False)
    y = np.linspace(-2, 2, N_DRAWS)
    rep = answer_request(req, np.zeros((N_DRAWS, 2)), y, rng=5)
    direct = bit_flip(y, epsilon=1.0, low=-1.0, high=1.0, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(rep["z"], direct)


# --- ldp_missing_logistic.private_sampling@1 -------------------------------------------


def _ldp_request(eps: float) -> ReportRequest:
    """A request whose inputs reach the worst case: at the iterate 0 a record with
    ``x = 1`` has ``v = (1/2 − t)·(1, 1)``, so labels ∓1 give the antipodal pair
    ``±(1/2)(1, 1)``; the published bound ``G = ‖v‖ = 1/√2`` makes it extreme."""
    proto = LDPMissingLogisticRegression(algorithm="dummy", x_norm_bound=1.0).protocol(
        epsilon=[eps], n_records=[N_DRAWS], n_features=1, round_size=1, random_state=0
    )
    reqs = proto.next_round()
    assert reqs is not None
    req = reqs[0]
    public = dict(req.public, bound=1.0 / math.sqrt(2.0))
    return ReportRequest(req.round, req.randomizer, req.epsilon, public)


def _ldp_lower_bound(req: ReportRequest, rng: np.random.Generator) -> float:
    w = np.ones(2) / math.sqrt(2.0)
    inside = []
    for label in (-1.0, 1.0):
        rep = answer_request(
            req, np.ones((N_DRAWS, 1)), np.full(N_DRAWS, label), rng=rng
        )
        inside.append(int(np.sum(np.asarray(rep["z"]) @ w > 0)))
    best = -math.inf
    for k_v, k_vp in (
        (inside[0], inside[1]),
        (N_DRAWS - inside[1], N_DRAWS - inside[0]),
    ):
        lo, _ = _clopper_pearson(k_v, N_DRAWS, ALPHA / 4)
        _, hi = _clopper_pearson(k_vp, N_DRAWS, ALPHA / 4)
        best = max(best, math.log(lo / hi))
    return best


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_private_sampling_through_the_client(
    eps: float, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    req = _ldp_request(eps)
    honest = _ldp_lower_bound(req, rng)
    assert 0.8 * eps < honest <= eps

    def at_twice_eps(V: Any, *, bound: float, epsilon: Any, rng: Any) -> Any:
        return private_sampling(
            V, bound=bound, epsilon=2.0 * np.asarray(epsilon), rng=rng
        )

    monkeypatch.setattr(ldp_protocol, "private_sampling", at_twice_eps)
    assert _ldp_lower_bound(req, rng) > eps


# --- uldp_sparse_linear.heavy_hitter_bit@1 ---------------------------------------------

UL_DRAWS = 40_000


def _uldp_request(eps: float) -> ReportRequest:
    proto = ULDPSparseLinearRegression(sparsity=1, k_sel=1).protocol(
        epsilon=[eps, eps], n_records=[4, 4], n_features=2, random_state=0
    )
    reqs = proto.next_round()
    assert reqs is not None
    req = next(iter(reqs.values()))
    # level 1 of a 2-leaf tree, row 1: H[1, 0] = +1, H[1, 1] = −1 (opposite bits)
    return ReportRequest(
        req.round, req.randomizer, req.epsilon, dict(req.public, level=1, row=1)
    )


def _uldp_bits(
    req: ReportRequest, feature: int, rng: np.random.Generator
) -> np.ndarray:
    """A seller whose records load on one feature only: its local set is that index."""
    X = np.zeros((4, 2))
    X[:, feature] = 1.0
    y = np.ones(4)
    out = np.empty(UL_DRAWS, dtype=np.int64)
    for j in range(UL_DRAWS):
        out[j] = answer_request(req, X, y, rng=rng)["bit"]
    return (out + 1) // 2


@pytest.mark.slow
def test_heavy_hitter_bit_through_the_client(
    rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    eps = 1.0
    assert hadamard_entry(1, 0) == -hadamard_entry(1, 1)
    req = _uldp_request(eps)
    a, b = _uldp_bits(req, 0, rng), _uldp_bits(req, 1, rng)
    import tests.learners.onebit_quantile.test_privacy_audit as audit

    monkeypatch.setattr(audit, "N_DRAWS", UL_DRAWS)
    honest = audit.epsilon_lower_bound(a, b, n_outputs=2)
    assert 0.8 * eps < honest <= eps
    import learners.uldp_sparse._randomizers as randomizers

    def at_four_eps(x: Any, epsilon: Any, rng: Any) -> Any:
        return one_bit_randomizer(x, 4.0 * np.asarray(epsilon), rng)

    monkeypatch.setattr(randomizers, "one_bit_randomizer", at_four_eps)
    a, b = _uldp_bits(req, 0, rng), _uldp_bits(req, 1, rng)
    assert audit.epsilon_lower_bound(a, b, n_outputs=2) > eps
    assert req.randomizer == uldp_protocol.HH
