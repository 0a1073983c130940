"""Launcher of one MPyC party process (:mod:`learners.secure_vertical._mpyc_party`).

Run as a script (``python …/_mpyc_main.py JOB_DIR PID -- [MPyC options]``), not with
``-m``: ``-m`` would first execute ``learners/__init__.py``, which imports every learner
and scikit-learn — seconds per process, paid by each of the ``m`` parties on the
shared cores before the protocol can start. The party needs only the NumPy modules
``_ledger``, ``_backend``, ``_newton`` and ``_mpyc_party``, so the launcher registers
the two packages as bare namespace modules (their ``__init__`` files are not run) and
imports those modules alone.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def register_bare_packages() -> None:
    """Put ``learners`` and ``learners.secure_vertical`` in ``sys.modules`` as packages
    whose submodules import from this source tree, without running their ``__init__``."""
    for name, path in (
        ("learners", ROOT / "learners"),
        ("learners.secure_vertical", ROOT / "learners" / "secure_vertical"),
    ):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [str(path)]
            sys.modules[name] = module


if __name__ == "__main__":
    sys.path[0] = str(ROOT)  # not this directory: its modules are package-private
    register_bare_packages()
    from learners.secure_vertical._mpyc_party import main

    raise SystemExit(main(sys.argv))
