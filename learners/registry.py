"""The learner protocol and the one registry of orderable learners.

Every learner a buyer can order implements :class:`OrderableLearner` and sits in
:data:`LEARNERS` (public name → estimator class). The market reaches learners only
through this module: it reads the class's :class:`~learners.spec.LearnerSpec`, builds the
estimator for an order with :meth:`OrderableLearner.for_order`, asks it which rows the
mechanism prices (:meth:`OrderableLearner.design_matrix`), fits it with the per-record ε
the mechanism allocated, and stores :meth:`OrderableLearner.export_model` and the
``privacy_report_``.

Contract (outside checks call exactly this)::

    from learners import LEARNERS
    est = LEARNERS["hetero_dp_logistic"](**params)
    est.fit(X, y, sample_epsilon=eps)
    est.privacy_report_.guarantee
    est.privacy_report_.sample_epsilon_total
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from learners.privacy import PrivacyReport
from learners.spec import LearnerSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseContext:
    """What the market tells a learner about the order it is built for (public data only).

    Attributes
    ----------
    lam : float
        The mechanism's ridge weight ``λ`` (spec ``mechanism.md`` §3: the release and
        the allocation share it, so ``Δ_i`` is the one the mechanism priced).
    allocation_uses_data : bool
        False in the mechanism's strict mode (spec §4.4): the weights were chosen from
        costs and public data only, so a central release is DP end to end.
    task : str
        The market's task.
    market : Mapping
        The market's public schema (features with their public bounds, target, task
        settings), for learners that need more than the scaled rows.
    """

    lam: float
    allocation_uses_data: bool = True
    task: str = "classification"
    market: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class OrderableLearner(Protocol):
    """What every orderable learner implements (scikit-learn conventions).

    ``fit(X, y, *, sample_epsilon, groups=None)``: ``sample_epsilon`` is the per-record
    ε (each seller's ε_i repeated on its records); ``groups`` the seller index of each
    record for learners whose privacy unit is the seller. After ``fit``,
    ``privacy_report_.sample_epsilon_total[r]`` never exceeds ``sample_epsilon[r]`` plus
    the spec's overhead ``Δ`` of that record's seller.
    """

    learner_spec: ClassVar[LearnerSpec]
    privacy_report_: PrivacyReport

    @classmethod
    def for_order(cls, params: Mapping[str, Any], *, context: ReleaseContext) -> Self:
        """The estimator for an order's validated ``params`` and ``context``."""
        ...

    def design_matrix(self, X: ArrayLike) -> NDArray[np.float64]:
        """The rows the mechanism prices for scaled records ``X`` (``‖row‖₂ ≤ 1``)."""
        ...

    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        *,
        sample_epsilon: ArrayLike,
        groups: ArrayLike | None = None,
    ) -> Self:
        """Release the model spending at most ``sample_epsilon`` (+ the overhead)."""
        ...

    def predict(self, X: ArrayLike) -> NDArray[Any]:
        """Predictions for scaled records ``X``."""
        ...

    def export_model(self) -> dict[str, Any]:
        """JSON-safe fitted fields: ``coef`` and ``intercept`` in scaled-feature units,
        plus the learner's own fields (standard errors, classes, ...)."""
        ...


class LearnerRegistry(Mapping[str, type[OrderableLearner]]):
    """Public learner name → estimator class (read-only mapping; see :func:`register`)."""

    def __init__(self) -> None:
        self._classes: dict[str, type[OrderableLearner]] = {}

    def __getitem__(self, name: str) -> type[OrderableLearner]:
        return self._classes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes)

    def __len__(self) -> int:
        return len(self._classes)

    def register(self, cls: type[Any]) -> type[Any]:
        """Add ``cls`` under ``cls.learner_spec.name`` (usable as a class decorator).

        Raises
        ------
        ValueError
            ``cls`` has no :class:`LearnerSpec`, misses a protocol method, or its
            name is taken by another class.
        """
        spec = getattr(cls, "learner_spec", None)
        if not isinstance(spec, LearnerSpec):
            raise ValueError(f"{cls.__name__} has no learner_spec (a LearnerSpec)")
        missing = [
            m
            for m in ("for_order", "design_matrix", "fit", "predict", "export_model")
            if not callable(getattr(cls, m, None))
        ]
        if missing:
            raise ValueError(f"{cls.__name__} misses {missing} of the learner protocol")
        other = self._classes.get(spec.name)
        if other is not None and other is not cls:
            raise ValueError(f"learner name {spec.name!r} is taken by {other.__name__}")
        self._classes[spec.name] = cls
        return cls

    def unregister(self, name: str) -> None:
        """Remove ``name`` (tests that register a learner of their own)."""
        self._classes.pop(name, None)

    @contextmanager
    def registered(self, cls: type[Any]) -> Iterator[type[Any]]:
        """Register ``cls`` for the duration of a ``with`` block."""
        self.register(cls)
        try:
            yield cls
        finally:
            self.unregister(cls.learner_spec.name)

    def spec(self, name: str) -> LearnerSpec:
        """The :class:`LearnerSpec` of ``name``; ``KeyError`` naming the known ones."""
        if name not in self._classes:
            raise KeyError(f"unknown learner {name!r}; known: {sorted(self._classes)}")
        return self._classes[name].learner_spec

    def specs(self) -> list[LearnerSpec]:
        """Every registered spec, sorted by name."""
        return [self._classes[n].learner_spec for n in sorted(self._classes)]

    def seller_custody(self) -> list[str]:
        """Names of the learners that can run with records kept by their sellers
        (:attr:`LearnerSpec.seller_custody`), sorted."""
        return [s.name for s in self.specs() if s.seller_custody]


LEARNERS = LearnerRegistry()
"""The registry: ``LEARNERS[name]`` is the estimator class of an orderable learner."""

register_learner = LEARNERS.register
