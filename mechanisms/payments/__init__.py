"""Myerson threshold payments for the allocation rule (spec ``mechanism.md`` §5).

:func:`myerson_payments` computes every seller's ``t_i`` (a :class:`PaymentResult`),
:func:`myerson_total` their sum, :func:`expected_payments` the paper's Thm 3.2
diagnostic. Sellers run on any ``concurrent.futures.Executor``
(:class:`SerialExecutor`, a process pool of :func:`default_workers` workers, or a
Dask cluster through :class:`DaskExecutor`).
Private modules, in dependency order: ``_executors``, the subpackage ``_resolve`` (one
seller's ``ε_i(s)`` and the re-solves behind it: the certified shortcut, the lean
candidate-range re-solve), ``_kinks``, ``_base_memo`` (per-base values shared by the
sellers), ``_critical_cost`` (the cut-off ``s*_i``), ``_quadrature``,
``_seller_certificate``, ``_seller_payment`` (one seller), ``_payments`` (all sellers)
and ``_myerson_payments`` (the public entry point: an :class:`mechanisms.Instance` or
the positional arrays).
"""

from mechanisms.payments._executors import (
    DaskExecutor,
    Progress,
    SerialExecutor,
    default_workers,
    worker_count,
)
from mechanisms.payments._myerson_payments import myerson_payments
from mechanisms.payments._payments import (
    PaymentResult,
    expected_payments,
    myerson_total,
)
from mechanisms.payments._seller_payment import SellerPayment

__all__ = [
    "DaskExecutor",
    "PaymentResult",
    "Progress",
    "SellerPayment",
    "SerialExecutor",
    "default_workers",
    "expected_payments",
    "myerson_payments",
    "myerson_total",
    "worker_count",
]
