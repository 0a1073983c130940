"""Kinks of a seller's curve located from the default rule's lean re-solves (spec
``mechanism.md`` §5).

Between two lean re-solves on the same candidate model ``j`` a change of seller
``k``'s status (0, free, capped) happens where ``A − s(ℓ_jk + γηΨ_k)`` crosses 0 or
the cap ``h_k(η) = min(k/m, ε_k^max/η)``; the resolver names that seller and bound
(:meth:`RangeResolver.kink_boundary`), its margin (:meth:`RangeResolver.kink_margin`)
is extrapolated to the change (:meth:`SellerCurve.kink_guess`). Checked here against
the change found by bisecting the signatures, across a model switch (where ``ε_i``
can jump and nothing may be read as a kink), and through the payments, against the
bisection-only search at a tight tolerance.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mechanisms import MechanismConfig, UniformPrior
from mechanisms.payments import _kinks
from mechanisms.payments._payments import PaymentJob, payment_job, seller_payment
from mechanisms.payments._resolve._range_resolve import RangeResolver, range_resolver
from mechanisms.payments._resolve._seller_curve import SellerCurve

Setting = tuple[int, float, float, bool]  # (seed, μ, k, ε^max caps)


def _job(setting: Setting, m: int = 300) -> tuple[PaymentJob, np.ndarray]:
    """A default-rule market whose sweeps cross status changes of other sellers and
    of the seller itself; ``capped``: a third of the sellers with ``ε^max`` caps
    that bind at the optimum's ``η`` (caps below ``k/m`` that move with ``η``)."""
    job, costs = market_job(setting, m, lam=1e-2)
    assert isinstance(range_resolver(job.prob, job.base), RangeResolver)
    return job, costs


def market_job(
    setting: Setting, m: int, *, lam: float
) -> tuple[PaymentJob, np.ndarray]:
    """:func:`_job`'s market at regularisation ``lam``, whichever re-solver it takes."""
    seed, mu, k, capped = setting
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 3))
    X /= 1.2 * np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(X @ np.ones(3) + 0.3 * rng.normal(size=m) >= 0, 1.0, -1.0)
    costs = rng.uniform(0.0, 1.0, m)
    eps_max = None
    if capped:
        eps_max = np.full(m, np.inf)
        eps_max[rng.permutation(m)[: m // 3]] = rng.uniform(0.005, 0.03, m // 3)
    cfg = MechanismConfig(gamma=1.0, lam=lam, mu=mu, sigma=1.0, k=k, eps_avg_max=5)
    return payment_job(X, y, costs, UniformPrior(0.0, 1.0), cfg, eps_max), costs


def job_curve(job: PaymentJob, i: int, report: float) -> SellerCurve:
    """Seller ``i``'s curve as a payment sweep of ``job`` builds it: the job's stale
    nodes and base Hessian."""
    return SellerCurve(
        job.prob, job.base, job.prior, i, report, nodes=job.nodes, hessian=job.hessian
    )


def _scanned(job: PaymentJob, i: int, report: float, n: int = 30) -> SellerCurve:
    curve = SellerCurve(job.prob, job.base, job.prior, i, report)
    assert curve.locates_kinks
    for x in np.linspace(report, min(report + 0.4, 1.0), n)[1:]:
        curve.epsilon(float(x))
    return curve


SETTINGS: list[Setting] = [
    (0, 1.0, 4.0, False),
    (7, 1.0, 8.0, True),
    (0, 1.0, 8.0, True),
]
SWITCHING: Setting = (5, 0.3, 6.0, True)  # its sweeps change model


def test_kink_guess_finds_where_the_status_changes() -> None:
    """For brackets on one model holding one status change (one seller, one step),
    located by bisecting the signatures to 1e-12 of the bracket, the estimate is
    within 10 % of the bracket of the change, and within 1 % for half (a secant of
    the margin on a smooth side is second-order accurate; a midpoint is off by up to
    50 %, a margin with a wrong ``Ψ_k``, cap or bound by far more). Changes of other
    sellers and of the seller itself, at zero and at caps moved by ``ε^max``, are
    all met."""
    errors: list[float] = []
    kinds: set[tuple[bool, bool, bool]] = set()
    from_report = 0
    for setting in SETTINGS:
        job, costs = _job(setting)
        res = range_resolver(job.prob, job.base)
        assert isinstance(res, RangeResolver)
        kcap = job.prob.cfg.k / job.prob.m
        for i in np.flatnonzero(job.base.epsilon > 0)[:16]:
            i = int(i)
            curve = _scanned(job, i, float(costs[i]))
            for x0, x1 in itertools.pairwise(sorted(curve.cache)):
                lo, hi = curve._kink_lean(x0), curve._kink_lean(x1)
                assert lo is not None  # at the report: the base's optimum
                assert hi is not None
                if lo.j != hi.j:
                    continue
                c0 = np.frombuffer(curve.signature(x0), dtype=np.uint8).astype(int)
                c1 = np.frombuffer(curve.signature(x1), dtype=np.uint8).astype(int)
                if np.abs(c0 - c1).sum() != 1:
                    continue  # not exactly one status change of one step
                z = curve.kink_guess(x0, x1)
                assert z is not None
                a, b = x0, x1  # bisect to the change
                while b - a > 1e-12 * (x1 - x0) and curve.same_model(x0, a):
                    mid = 0.5 * (a + b)
                    if curve.signature(mid) == curve.signature(x0):
                        a = mid
                    else:
                        b = mid
                if not (curve.same_model(a, b) and curve.same_model(x0, a)):
                    continue  # another model inside the bracket
                errors.append(abs(z - a) / (x1 - x0))
                from_report += x0 == curve.report
                k = int(np.flatnonzero(c0 != c1)[0])
                held = bool(job.prob.eps_max[k] / lo.eta < kcap)
                kinds.add((k == i, 2 in (c0[k], c1[k]), held))
    assert len(errors) >= 15
    assert from_report >= 3  # brackets from the report, through the base's optimum
    assert max(errors) <= 0.1, errors
    assert np.median(errors) <= 0.01, errors
    own = {kind for kind in kinds if kind[0]}
    other = {kind for kind in kinds if not kind[0]}
    assert (True, True, False) in own  # the seller leaving its k/m cap
    assert (True, True, True) in own  # ... its ε^max cap
    assert (True, False, False) in own  # reaching 0
    assert (False, False, False) in other  # another seller reaching 0
    assert (False, True, False) in other  # ... its k/m cap
    assert (False, True, True) in other  # ... its ε^max cap


@pytest.mark.parametrize("setting", SETTINGS)
def test_signature_is_the_bound_status_of_the_weights(setting: Setting) -> None:
    """The compiled one-pass signature is, byte for byte, ``bound_status`` of the
    re-solve's whole ``a`` under ``Problem.caps`` (the definition), at re-solves
    whose statuses differ (zero, free and capped sellers, caps moving with ``η``)."""
    from mechanisms.payments._resolve._range_resolve import bound_status

    job, costs = _job(setting)
    res = range_resolver(job.prob, job.base)
    assert res is not None
    kinds: set[int] = set()
    n = 0
    for i in (0, 5, 17):
        curve = _scanned(job, i, float(costs[i]), n=12)
        for lean in curve.lean.values():
            want = bound_status(res.weights(lean), job.prob.caps(lean.eta))
            assert res.signature(lean) == want
            kinds |= set(want)
            n += 1
    assert n > 20
    assert kinds == {0, 1, 2}


def test_base_lean_is_the_re_solve_at_the_report() -> None:
    """The base's optimum read as a re-solve at the seller's own report (no re-solve)
    is the lean re-solve there: same model, ``η``, multipliers and own weight."""
    for setting in SETTINGS[:2]:
        job, _ = _job(setting)
        res = range_resolver(job.prob, job.base)
        assert isinstance(res, RangeResolver)
        for i in np.flatnonzero(job.base.epsilon > 0)[:5]:
            i = int(i)
            got = res.base_lean(i)
            ref = res.solve(i, float(job.prob.psi[i]))
            assert got is not None
            assert ref is not None
            assert (got.j, got.psi_i) == (ref.j, ref.psi_i)
            for f in ("eta", "A", "s", "a_i", "h_i", "epsilon_total"):
                assert getattr(got, f) == pytest.approx(getattr(ref, f), rel=1e-7)
            assert res.signature(got) == res.base_signature(i)


def test_no_kink_is_read_across_a_model_switch() -> None:
    """Where the two re-solves sit on different models ``ε_i`` can jump: no status
    is named (``kink_boundary`` is ``None``, no guess), a bracket across the switch
    is never accepted as a kink by the secant test, and every bracket the search
    returns across one is narrowed until ``|Δu|·width ≤ atol``."""
    job, costs = _job(SWITCHING)
    switches = tents = 0
    for i in np.flatnonzero(job.base.epsilon > 0)[:8]:
        i = int(i)
        curve = _scanned(job, i, float(costs[i]))
        res = curve.resolver
        assert isinstance(res, RangeResolver)
        pts = sorted(curve.lean)
        top = pts[-1]
        for x0, x1 in itertools.pairwise(pts):
            lo, hi = curve.lean[x0], curve.lean[x1]
            if lo.j == hi.j:
                continue
            switches += 1
            assert res.kink_boundary(lo, hi) is None
            assert curve.kink_guess(x0, x1) is None
            assert not _kinks._kink_not_jump(curve, x0, x1)
            # nor where u's secants cross inside (values of a continuous tent): the
            # model switch alone refuses it
            cut = sorted(curve.cache)
            xl, xr = cut[cut.index(x0) - 1], cut[cut.index(x1) + 1]
            if curve.signature(xl) == curve.signature(x0) and curve.signature(
                xr
            ) == curve.signature(x1):
                saved = {x: curve.cache[x] for x in (xl, x0, x1, xr)}
                top_u = max(saved.values())
                for x in saved:
                    curve.cache[x] = top_u - abs(x - 0.5 * (x0 + x1))
                assert not _kinks._kink_not_jump(curve, x0, x1)
                curve.cache.update(saved)
                tents += 1
        atol = 1e-6 * (top - costs[i]) * curve.u(float(costs[i]))
        width = 1e-3 * (top - costs[i])
        for x0, x1 in _kinks.kink_brackets(curve, float(costs[i]), top, atol=atol):
            if curve.same_model(x0, x1):
                continue
            du = abs(curve.u(x1) - curve.u(x0))
            floor = width * 2.0**-_kinks.MAX_JUMP_HALVINGS
            assert du * (x1 - x0) <= atol or x1 - x0 <= floor
    assert switches >= 2
    assert tents >= 1


@pytest.mark.parametrize("setting", [SETTINGS[1], SWITCHING])
def test_payments_with_located_kinks_agree_with_bisection(
    monkeypatch: pytest.MonkeyPatch, setting: Setting
) -> None:
    """Payments whose kinks are located from the margins agree within the payment
    tolerance with payments whose kinks are found by bisection alone at a 1000
    times tighter tolerance, every seller converged, with fewer re-solves than the
    bisection-only search at the same tolerance."""
    job, _ = _job(setting)
    winners = [int(i) for i in np.flatnonzero(job.base.epsilon > 0)[::9][:8]]
    located = [seller_payment(job, i) for i in winners]
    monkeypatch.setattr(SellerCurve, "locates_kinks", property(lambda self: False))
    bisected = [seller_payment(job, i) for i in winners]
    tight = PaymentJob(**{**job.__dict__, "rtol": 1e-8})
    reference = [seller_payment(tight, i) for i in winners]
    for got, ref in zip(located, reference, strict=True):
        assert got.converged
        assert got.payment == pytest.approx(ref.payment, rel=job.rtol)
    assert sum(p.n_solves for p in located) < sum(p.n_solves for p in bisected)


def test_weights_signature_is_the_bound_status_under_the_caps() -> None:
    """The compiled signature of a solve's weights is, byte for byte,
    ``bound_status(a, Problem.caps(η))``, at the edges of each status: exact zeros,
    ``1e-12`` and its neighbours, weights at and just below ``h(1 − 10⁻⁹)`` for the
    ``k/m`` cap and for binding ``ε^max`` caps (and zero caps), NaN; with some caps
    binding, and with every cap ``k/m`` (infinite or large finite ``ε^max``: the
    pass without divisions)."""
    from mechanisms.allocation._problem import Problem
    from mechanisms.payments._resolve._range_resolve import (
        bound_status,
        weights_signature,
    )

    rng = np.random.default_rng(4)
    m = 400
    mixed = np.where(rng.random(m) < 0.3, rng.uniform(0.0, 2.0, m), np.inf)
    mixed[:5] = 0.0
    cases = [
        (eps_max, eta)
        for eps_max in (mixed, np.full(m, np.inf), np.full(m, 50.0))
        for eta in (0.5, 7.0, 300.0)
    ]
    for eps_max, eta in cases:
        prob = Problem(
            rng.normal(size=(m, 2)), np.ones(m), np.ones(m), eps_max,
            MechanismConfig(k=3.0),
        )  # fmt: skip
        h = prob.caps(eta)
        edges = [0.0, 1e-12, np.nextafter(1e-12, 1), np.nextafter(1e-12, 0), np.nan]
        a = rng.uniform(0.0, 1.0, m) * h
        a[: len(edges)] = edges
        near = rng.choice(np.arange(len(edges), m), size=120, replace=False)
        a[near[:40]] = h[near[:40]]
        a[near[40:80]] = h[near[40:80]] * (1 - 1e-9)
        a[near[80:]] = np.nextafter(h[near[80:]] * (1 - 1e-9), 0)
        want = bound_status(a, h)
        got = weights_signature(a, prob.cfg.k / m, prob.eps_max, eta).tobytes()
        assert got == want
        assert set(want) == {0, 1, 2}


class _AdversarialCurve:
    """A curve with one kink at ``x*`` (``u = |x − x*|``-shaped, so continuous) whose
    kink estimates sit at a fixed share of every bracket, however wrong."""

    locates_kinks = False

    def __init__(self, kink: float, share: float) -> None:
        self.kink, self.share = kink, share
        self.cache: dict[float, float] = {}

    def epsilon(self, s: float) -> float:
        self.cache[s] = 2.0 - abs(s - self.kink)
        return self.cache[s]

    def u(self, s: float) -> float:
        return self.epsilon(s)

    def signature(self, s: float) -> bytes:
        self.epsilon(s)
        return b"a" if s < self.kink else b"b"

    def kink_guess(self, x0: float, x1: float) -> float:
        return x0 + self.share * (x1 - x0)

    def same_model(self, x: float, y: float) -> bool:
        return True


class _AdversarialCrossingCurve(_AdversarialCurve):
    """The same, its guesses served as crossings of two optima's objectives (no
    kink's estimate), with no rounding error: the probe pairs are then sized for a
    jump, narrower than a kink's."""

    def kink_guess(self, x0: float, x1: float) -> None:  # type: ignore[override]
        return None

    def value_crossing(self, x0: float, x1: float) -> tuple[float, float]:
        return x0 + self.share * (x1 - x0), 0.0


@pytest.mark.parametrize("crossing", [False, True])
@pytest.mark.parametrize("share", [1.0 - 1e-9, 1e-9, 0.85, 0.5])
def test_kink_search_progresses_whatever_the_guesses(
    share: float, crossing: bool
) -> None:
    """A guess just inside a bracket's end used to leave a bracket barely smaller
    than before, two re-solves at a time (a thousand probes without reaching the
    change); a bracket left beside a missed probe is now halved before it is probed
    again. So the change is bracketed to the search's width in a number of
    evaluations logarithmic in it, whatever the guesses."""
    cls = _AdversarialCrossingCurve if crossing else _AdversarialCurve
    curve = cls(kink=0.3, share=share)
    curve.epsilon(0.0)
    curve.epsilon(1.0)
    out = _kinks.kink_brackets(curve, 0.0, 1.0, xrtol=1e-6, atol=1e-9)  # type: ignore[arg-type]
    assert len(out) == 1
    x0, x1 = out[0]
    assert x0 < 0.3 <= x1
    assert x1 - x0 <= 1e-6
    assert len(curve.cache) <= 4 * 20 + 4  # at most ~4 evaluations per halving
