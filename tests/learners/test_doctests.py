"""Run the numpydoc examples of ``learners`` as part of the default test command."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "learners.privacy",
    "learners._noise",
    "learners._validation",
    "learners.hetero_dp_logistic",
    "learners.ldp_missing._constants",
    "learners.ldp_missing._randomizer",
    "learners.ldp_missing._estimator",
    "learners.onebit_quantile._estimator",
    "learners.onebit_quantile._model",
    "learners.onebit_quantile._randomizers",
    "learners.onebit_quantile._transform",
    "learners.secure_vertical._estimator",
    "learners.uldp_sparse._defaults",
    "learners.uldp_sparse._estimator",
    "learners.uldp_sparse._hadamard",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(
        importlib.import_module(name), optionflags=doctest.ELLIPSIS
    )
    assert result.attempted > 0
    assert result.failed == 0
