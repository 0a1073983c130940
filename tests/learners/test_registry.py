"""The learner registry's contract, run over every registered learner.

Each learner must declare a valid spec, validate its buyer parameters with the field
named, build itself for an order, price the rows it will fit, and, after a fit on tiny
data, report a per-record ε that never exceeds the allocated ε plus its declared
overhead ``Δ``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from learners import (
    GUARANTEES,
    LEARNERS,
    HeteroDPLogisticRegression,
    LearnerSpec,
    OrderableLearner,
    ParamError,
    ParamSpec,
    ReleaseContext,
)

NAMES = sorted(LEARNERS)


def _tiny(task: str, *, n: int, d: int, rng: np.random.Generator) -> tuple[Any, Any]:
    X = rng.standard_normal((n, d))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0) * 1.01
    score = X @ rng.standard_normal(d)
    if task == "classification":
        return X, np.where(score > 0, 1.0, -1.0)
    return X, np.clip(score / (np.abs(score).max() + 1e-12), -1.0, 1.0)


def _records(spec: LearnerSpec, n_sellers: int) -> tuple[np.ndarray, np.ndarray]:
    """Seller index of each record and the record count per seller."""
    per = spec.min_records_per_seller
    groups = np.repeat(np.arange(n_sellers), per)
    return groups, np.full(n_sellers, per)


def test_hetero_dp_logistic_is_registered() -> None:
    assert LEARNERS["hetero_dp_logistic"] is HeteroDPLogisticRegression


@pytest.mark.parametrize("name", NAMES)
def test_spec_is_complete_and_json_safe(name: str) -> None:
    cls = LEARNERS[name]
    spec = cls.learner_spec
    assert spec.name == name
    assert isinstance(cls, type)
    for method in ("for_order", "design_matrix", "fit", "predict", "export_model"):
        assert callable(getattr(cls, method))
    desc = json.loads(json.dumps(spec.to_dict(), allow_nan=False))
    assert desc["name"] == name
    assert desc["tasks"]
    assert set(desc["params"]) == {p.name for p in spec.params}
    assert spec.check_params({}) == {p.name: p.default for p in spec.params}


@pytest.mark.parametrize("name", NAMES)
def test_params_are_validated_with_the_field_named(name: str) -> None:
    spec = LEARNERS[name].learner_spec
    with pytest.raises(ParamError) as err:
        spec.check_params({"no_such_parameter": 1})
    assert err.value.field == "params.no_such_parameter"
    for p in spec.params:
        bad: Any = "not-a-value" if p.kind != "choice" else 12345
        with pytest.raises(ParamError) as err:
            spec.check_params({p.name: bad})
        assert err.value.field == f"params.{p.name}"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("uses_data", [True, False])
def test_fit_never_reports_more_than_allocated_plus_overhead(
    name: str, uses_data: bool, rng: np.random.Generator
) -> None:
    cls = LEARNERS[name]
    spec = cls.learner_spec
    n_sellers, d, lam = 12, 3, 0.05
    groups, _ = _records(spec, n_sellers)
    X, y = _tiny(spec.tasks[0], n=groups.size, d=d, rng=rng)
    ctx = ReleaseContext(lam=lam, allocation_uses_data=uses_data, task=spec.tasks[0])
    est = cls.for_order({}, context=ctx)
    # vertical learners take per-party column blocks and price one row per party
    X_in: Any = [X[:, :1], X[:, 1:]] if spec.partition == "vertical" else X
    Z = est.design_matrix(X_in)
    assert Z.shape[0] == (2 if spec.partition == "vertical" else X.shape[0])
    assert np.linalg.norm(Z, axis=1).max() <= 1.0 + 1e-12
    seller_eps = rng.uniform(0.0, 3.0, n_sellers)
    seller_eps[0] = 0.0  # an excluded seller spends nothing beyond its overhead
    eps = seller_eps[groups]
    kwargs = {"groups": groups} if spec.several_records_per_seller else {}
    est.fit(X_in, y, sample_epsilon=eps, **kwargs)
    assert isinstance(est, OrderableLearner)  # every protocol member, once fitted
    rep = est.privacy_report_
    assert rep.guarantee in GUARANTEES
    if spec.privacy_model == "central":
        want = "conditional_on_allocation" if uses_data else "end_to_end"
        assert rep.guarantee == want
    spent = np.asarray(rep.sample_epsilon_total, dtype=float)
    weights = eps / eps.sum()
    allowed = eps + spec.overhead_epsilon(weights, lam=lam)
    assert spent.shape == eps.shape
    assert np.all(spent <= allowed * (1 + 1e-12) + 1e-12)
    model = json.loads(json.dumps(est.export_model(), allow_nan=False))
    assert len(model["coef"]) == X.shape[1]
    assert est.predict(X).shape == (X.shape[0],)


def test_param_spec_bounds_and_types() -> None:
    p = ParamSpec(name="rate", kind="float", default=0.5, low=0.0, high=1.0, doc="r")
    assert p.check(1) == 1.0
    for bad in (1.5, -0.1, float("nan"), True, "0.5"):
        with pytest.raises(ParamError, match="rate"):
            p.check(bad)
    n = ParamSpec(name="rounds", kind="int", default=2, low=1, doc="r")
    assert n.check(3) == 3
    with pytest.raises(ParamError):
        n.check(2.5)
    c = ParamSpec(name="algo", kind="choice", default="a", choices=("a", "b"), doc="")
    with pytest.raises(ParamError):
        c.check("c")


def test_spec_rejects_bad_declarations() -> None:
    with pytest.raises(ValueError, match="tasks"):
        LearnerSpec(
            name="x",
            tasks=("ranking",),
            privacy_model="local",
            mechanism_loss="squared",
        )  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="privacy_model"):
        LearnerSpec(
            name="x",
            tasks=("regression",),
            privacy_model="cloud",
            mechanism_loss="squared",
        )  # type: ignore[arg-type]
    bad_default = ParamSpec(name="p", kind="int", default=0, low=1, doc="")
    with pytest.raises(ParamError):
        LearnerSpec(
            name="x",
            tasks=("regression",),
            privacy_model="local",
            mechanism_loss="squared",
            params=(bad_default,),
        )


def test_priced_params_map_order_params_to_mechanism_fields() -> None:
    alpha = ParamSpec(name="alpha", kind="float", default=0.5, low=0.0, high=1.0, doc="")
    with pytest.raises(ValueError, match="priced_params"):
        LearnerSpec(
            name="x",
            tasks=("quantile",),
            privacy_model="local",
            mechanism_loss="pinball",
            params=(alpha,),
            priced_params=(("level", "quantile"),),
        )
    spec = LearnerSpec(
        name="x",
        tasks=("quantile",),
        privacy_model="local",
        mechanism_loss="pinball",
        params=(alpha,),
        priced_params=(("alpha", "quantile"),),
    )
    assert spec.mechanism_options(spec.check_params({"alpha": 0.8})) == {
        "quantile": 0.8
    }
    assert spec.mechanism_options(spec.check_params({})) == {"quantile": 0.5}
    # every registered pinball learner prices its own quantile parameter
    for name in NAMES:
        reg = LEARNERS.spec(name)
        if reg.mechanism_loss == "pinball":
            assert "quantile" in reg.mechanism_options(reg.check_params({}))


def test_registry_refuses_incomplete_or_clashing_classes() -> None:
    class NoSpec:
        pass

    with pytest.raises(ValueError, match="learner_spec"):
        LEARNERS.register(NoSpec)

    class Clash(HeteroDPLogisticRegression):
        pass

    with pytest.raises(ValueError, match="taken"):
        LEARNERS.register(Clash)
    assert LEARNERS["hetero_dp_logistic"] is HeteroDPLogisticRegression


def test_one_record_learner_refuses_grouped_records(rng: np.random.Generator) -> None:
    X, y = _tiny("classification", n=4, d=2, rng=rng)
    est = HeteroDPLogisticRegression(random_state=0)
    with pytest.raises(ValueError, match="groups"):
        est.fit(X, y, sample_epsilon=np.ones(4), groups=np.array([0, 0, 1, 2]))


def test_param_spec_interval_kind() -> None:
    """``interval``: a list ``[low, high]`` of two finite numbers with ``low < high``."""
    p = ParamSpec(name="interval", kind="interval", default=[0.0, 1.0], doc="i")
    assert p.check([-1, 2.5]) == [-1.0, 2.5]
    assert p.check((0, 1)) == [0.0, 1.0]
    for bad in (
        [1.0, -1.0],
        [2.0, 2.0],
        [0.0],
        [0.0, 1.0, 2.0],
        [0.0, float("inf")],
        [float("nan"), 1.0],
        [True, 2.0],
        ["0", "1"],
        "0,1",
        None,
        3.0,
    ):
        with pytest.raises(ParamError) as err:
            p.check(bad)
        assert err.value.field == "params.interval"
    assert p.to_dict()["type"] == "interval"


def test_param_spec_nullable_and_exclusive_bounds() -> None:
    level = ParamSpec(
        name="alpha",
        kind="float",
        default=0.5,
        low=0.0,
        high=1.0,
        exclusive_low=True,
        exclusive_high=True,
        doc="a",
    )
    assert level.check(0.25) == 0.25
    for bad in (0.0, 1.0, -0.1, 1.1):
        with pytest.raises(ParamError, match="alpha"):
            level.check(bad)
    desc = level.to_dict()
    assert desc["exclusiveMinimum"] == 0.0
    assert desc["exclusiveMaximum"] == 1.0
    assert "minimum" not in desc
    maybe = ParamSpec(name="iv", kind="interval", default=None, nullable=True, doc="")
    assert maybe.check(None) is None
    assert maybe.to_dict()["nullable"] is True
    strict = ParamSpec(name="iv", kind="interval", default=[0, 1], doc="")
    with pytest.raises(ParamError):
        strict.check(None)
