"""Orders: buyers place and follow them; admins see per-seller allocations."""

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response, status

from api.deps import (
    MAX_ID,
    AdminAccount,
    BuyerAccount,
    BuyerOrAdmin,
    MarketId,
    OrderId,
    SessionDep,
)
from api.errors import ERROR_RESPONSES
from api.links import ORDER_ACCEPTED
from market import orders
from market.schemas import (
    AllocationsPublic,
    OrderAccepted,
    OrderCreate,
    OrderPublic,
    Page,
)
from market.store import RunStatus

router = APIRouter(
    tags=["orders"], responses={k: ERROR_RESPONSES[k] for k in (401, 403, 404, 422)}
)
IdempotencyKey = Annotated[
    str | None, Header(alias="Idempotency-Key", min_length=1, max_length=255)
]


@router.post(
    "/markets/{market_id}/orders",
    status_code=status.HTTP_202_ACCEPTED,
    responses={409: ERROR_RESPONSES[409], **ORDER_ACCEPTED},
)
def create_order(
    session: SessionDep,
    buyer: BuyerAccount,
    market_id: MarketId,
    body: OrderCreate,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> OrderAccepted:
    """Place an order; poll ``GET /v1/orders/{order_id}``. Retries with the same
    ``Idempotency-Key`` return the same order."""
    order, created = orders.place_order(
        session,
        market_id=market_id,
        buyer=buyer,
        body=body,
        idempotency_key=idempotency_key,
    )
    if not created:
        response.headers["Idempotent-Replayed"] = "true"
    # A new order was stored as queued; by the time its row is read back a worker may
    # already have claimed it, but the 202 answers for the placement (spec api.md).
    placed = RunStatus.QUEUED if created else order.status
    return OrderAccepted(id=order.id, status=placed)  # type: ignore[arg-type]


@router.get("/orders")
def list_orders(
    session: SessionDep,
    account: BuyerOrAdmin,
    market_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
) -> Page[OrderPublic]:
    """List orders, newest first: your own (buyer) or every order (admin)."""
    return orders.list_orders(
        session, account=account, market_id=market_id, limit=limit, offset=offset
    )


@router.get("/orders/{order_id}")
def get_order(
    session: SessionDep, account: BuyerOrAdmin, order_id: OrderId
) -> OrderPublic:
    """Return an order's status and progress (its buyer or an admin)."""
    return orders.to_public(
        session, orders.get_order_or_raise(session, order_id=order_id, account=account)
    )


@router.post("/orders/{order_id}:cancel", responses={409: ERROR_RESPONSES[409]})
def cancel_order(
    session: SessionDep, account: BuyerOrAdmin, order_id: OrderId
) -> OrderPublic:
    """Cancel an order (its buyer or an admin): a queued order ends ``cancelled`` at
    once; a running one at its next stage boundary, before anything is settled.
    Nothing is charged and nothing is paid; ``409`` if it already finished."""
    return orders.to_public(
        session, orders.cancel_order(session, order_id=order_id, account=account)
    )


@router.get("/orders/{order_id}/model", responses={409: ERROR_RESPONSES[409]})
def get_model(
    session: SessionDep, buyer: BuyerAccount, order_id: OrderId
) -> dict[str, Any]:
    """Return the released model of a succeeded order (its buyer only)."""
    return orders.get_model(session, order_id=order_id, buyer=buyer)


ONNX_MEDIA_TYPE = "application/octet-stream"


@router.get(
    "/orders/{order_id}/model.onnx",
    response_class=Response,
    responses={
        200: {
            "content": {ONNX_MEDIA_TYPE: {}},
            "description": "The model's linear predictor as an ONNX graph",
        },
        409: ERROR_RESPONSES[409],
    },
)
def get_model_onnx(
    session: SessionDep, buyer: BuyerAccount, order_id: OrderId
) -> Response:
    """Return the released model as ONNX (its buyer only): input ``X`` (raw features
    in ``feature_names`` order, clipped to the public bounds); outputs ``score``,
    ``probability`` and ``label`` (classification) or ``prediction``. ``409`` until
    the order has succeeded."""
    data = orders.get_model_onnx(session, order_id=order_id, buyer=buyer)
    return Response(
        content=data,
        media_type=ONNX_MEDIA_TYPE,
        headers={
            "Content-Disposition": (
                f'attachment; filename="privmarket-order-{order_id}-model.onnx"'
            )
        },
    )


@router.get("/orders/{order_id}/allocations")
def get_allocations(
    session: SessionDep,
    _admin: AdminAccount,
    order_id: OrderId,
    limit: Annotated[
        int, Query(ge=1, le=orders.ALLOCATIONS_PAGE_MAX)
    ] = orders.ALLOCATIONS_PAGE,
    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
) -> AllocationsPublic:
    """Return per-seller ε and payment of an order (admin), one page by seller id
    (``limit`` rows from ``offset``); ``total``, ``total_payment``, the IR count and
    the ε histogram are over every seller of the order."""
    return orders.list_allocations(
        session, order_id=order_id, limit=limit, offset=offset
    )
