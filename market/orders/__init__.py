"""Orders and jobs: what buyers and admins ask the market to compute.

- :mod:`market.orders.crud`: place an order, read its status, model and allocations
  (this facade);
- :mod:`market.orders.jobs`: an admin's trade-off job;
- :mod:`market.orders.onnx_model`: the buyer's linear model as an ONNX graph.

One order's run is :mod:`market.pipeline` (the numerics) driven by
:mod:`market.runtime` (the worker that claimed it).
"""

from market.orders.crud import (
    ALLOCATIONS_PAGE,
    ALLOCATIONS_PAGE_MAX,
    cancel_order,
    get_model,
    get_model_onnx,
    get_order_or_raise,
    list_allocations,
    list_learners,
    list_orders,
    place_order,
    to_public,
)

__all__ = [
    "ALLOCATIONS_PAGE",
    "ALLOCATIONS_PAGE_MAX",
    "cancel_order",
    "get_model",
    "get_model_onnx",
    "get_order_or_raise",
    "list_allocations",
    "list_learners",
    "list_orders",
    "place_order",
    "to_public",
]
