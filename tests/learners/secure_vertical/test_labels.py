"""Honest labels and checked inputs of ``secure_vertical_logistic``: the guarantee says
where the fit ran, ``groups`` is checked, a fit without ε says it is not private, the
budgets accept a scalar and refuse strings, the MPC grid rounds to nearest."""

from __future__ import annotations

import numpy as np
import pytest

from learners import NonPrivateFitWarning
from learners.registry import ReleaseContext
from learners.secure_vertical import SecureVerticalLogisticRegression
from learners.secure_vertical._dp import clip_radii, clip_rows
from learners.secure_vertical._mpyc_backend import (
    GRID_BITS,
    quantise,
    rounding_margin,
)
from tests.learners.secure_vertical._data import split, v1_data


def _blocks(
    rng: np.random.Generator, n: int = 200
) -> tuple[list[np.ndarray], np.ndarray]:
    X, y = v1_data(rng, n=n)
    return split(X / 6.0, [2, 2, 2]), y


def test_plain_backend_dp_fit_is_not_labelled_mpc(rng: np.random.Generator) -> None:
    """The plain backend pools the blocks in the clear: a central label, never
    ``mpc_plus_dp`` ("computed in MPC")."""
    blocks, y = _blocks(rng)
    est = SecureVerticalLogisticRegression(lam=0.05, random_state=0).fit(
        blocks, y, party_epsilon=[2.0, 2.0, 2.0]
    )
    assert est.privacy_report_ is not None
    assert est.privacy_report_.guarantee == "conditional_on_allocation"
    assert "in the clear" in est.privacy_report_.mechanism
    assert est.dp_
    assert est.export_model()["differentially_private"] is True


@pytest.mark.parametrize(
    ("uses_data", "label"),
    [(True, "conditional_on_allocation"), (False, "end_to_end")],
)
def test_order_label_follows_the_allocation_mode(
    rng: np.random.Generator, uses_data: bool, label: str
) -> None:
    blocks, y = _blocks(rng)
    ctx = ReleaseContext(lam=0.05, allocation_uses_data=uses_data)
    est = SecureVerticalLogisticRegression.for_order({"backend": "plain"}, context=ctx)
    est.set_params(random_state=0).fit(blocks, y, party_epsilon=[2.0, 2.0, 2.0])
    assert est.privacy_report_ is not None
    assert est.privacy_report_.guarantee == label


@pytest.mark.parametrize(
    ("groups", "match"),
    [
        (np.arange(199), r"groups must have shape \(200,\)"),
        (np.r_[np.arange(199), np.nan], "groups must hold integer"),
        (np.arange(200) + 0.5, "groups must hold integer"),
        (np.r_[np.arange(199), 0], "groups: .* group 0 holds 2 records"),
        (np.array(["a"] * 200), "groups must hold integer"),
    ],
)
def test_groups_are_checked(
    rng: np.random.Generator, groups: np.ndarray, match: str
) -> None:
    blocks, y = _blocks(rng)
    est = SecureVerticalLogisticRegression(lam=0.05, random_state=0)
    with pytest.raises(ValueError, match=match):
        est.fit(blocks, y, party_epsilon=2.0, groups=groups)


def test_one_record_per_group_is_accepted_and_changes_nothing(
    rng: np.random.Generator,
) -> None:
    blocks, y = _blocks(rng)
    kw = {"lam": 0.05, "random_state": 4}
    a = SecureVerticalLogisticRegression(**kw).fit(blocks, y, party_epsilon=2.0)  # type: ignore[arg-type]
    b = SecureVerticalLogisticRegression(**kw).fit(  # type: ignore[arg-type]
        blocks, y, party_epsilon=2.0, groups=np.arange(200)[::-1]
    )
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_fit_without_epsilon_warns_and_is_labelled_non_private(
    rng: np.random.Generator,
) -> None:
    blocks, y = _blocks(rng)
    with pytest.warns(NonPrivateFitWarning, match="not differentially private"):
        est = SecureVerticalLogisticRegression().fit(blocks, y)
    assert est.dp_ is False
    assert est.privacy_report_ is None
    assert est.export_model()["differentially_private"] is False


def test_scalar_epsilon_means_the_same_epsilon_everywhere(
    rng: np.random.Generator,
) -> None:
    blocks, y = _blocks(rng)
    kw = {"lam": 0.05, "random_state": 1}
    for name, vector in (("party_epsilon", [1.5] * 3), ("sample_epsilon", [1.5] * 200)):
        a = SecureVerticalLogisticRegression(**kw).fit(blocks, y, **{name: 1.5})  # type: ignore[arg-type]
        b = SecureVerticalLogisticRegression(**kw).fit(blocks, y, **{name: vector})  # type: ignore[arg-type]
        np.testing.assert_array_equal(a.coef_, b.coef_)
        assert a.privacy_report_ is not None
        assert b.privacy_report_ is not None
        assert (
            a.privacy_report_.sample_epsilon_total
            == b.privacy_report_.sample_epsilon_total
        )


@pytest.mark.parametrize("name", ["party_epsilon", "sample_epsilon"])
@pytest.mark.parametrize("bad", [["1", "1", "1"], "2.0", ["a"] * 200])
def test_epsilon_given_as_strings_names_the_parameter(
    rng: np.random.Generator, name: str, bad: object
) -> None:
    blocks, y = _blocks(rng)
    est = SecureVerticalLogisticRegression(lam=0.05)
    with pytest.raises(ValueError, match=f"{name} must be numbers"):
        est.fit(blocks, y, **{name: bad})  # type: ignore[arg-type]


def test_mpc_grid_rounds_to_nearest() -> None:
    """Spec §3.1 encodes ``round(x·2^f)``: every entry within half a grid step, errors
    of both signs (truncation toward zero moved 0.0039 to 0 and shrank every row)."""
    step = 2.0**-GRID_BITS
    assert quantise(np.array([0.99 * step, -0.99 * step])).tolist() == [step, -step]
    x = np.random.default_rng(0).uniform(-1, 1, size=(500, 3))
    err = quantise(x) - x
    assert np.abs(err).max() <= step / 2
    assert abs(err.mean()) < 0.05 * step  # unbiased, not pulled toward zero
    assert np.mean(np.abs(quantise(x)) > np.abs(x)) > 0.4


def test_dp_rows_keep_their_radius_after_rounding() -> None:
    """A DP MPC fit clips each block ``√p_k·2⁻⁹`` inside its radius before rounding
    (the estimator's clip), so the rounded row still has norm ≤ ``r_k``."""
    sizes = [2, 3, 1]
    _, radii = clip_radii(sizes)
    rng = np.random.default_rng(1)
    for r, p in zip(radii, sizes, strict=True):
        block = rng.standard_normal((2000, p)) * 3.0
        block[:5] = r / np.sqrt(p)  # on the sphere exactly
        rounded = quantise(clip_rows(block, r - rounding_margin(p)))
        assert np.linalg.norm(rounded, axis=1).max() <= r
