"""Open registration of sellers and buyers (admins come from the CLI)."""

from fastapi import APIRouter, Depends, status

from api.deps import CurrentAccount, SessionDep, SettingsDep
from api.errors import ERROR_RESPONSES
from api.rate_limit import registration_budget
from market import access
from market.schemas import AccountCreate, AccountCreated
from market.store import Role

router = APIRouter(tags=["accounts"], responses={422: ERROR_RESPONSES[422]})
REGISTRATION_BUDGET = [Depends(registration_budget)]
"""Registration has a per-address budget of its own (``rate_limit_registrations``)."""


def _register(
    session: SessionDep, settings: SettingsDep, body: AccountCreate, role: Role
) -> AccountCreated:
    account, key = access.create_account(
        session, role=role, name=body.name, settings=settings
    )
    assert account.id is not None
    return AccountCreated(
        id=account.id, name=account.name, role=account.role, api_key=key
    )


@router.post(
    "/sellers",
    status_code=status.HTTP_201_CREATED,
    dependencies=REGISTRATION_BUDGET,
)
def register_seller(
    session: SessionDep, settings: SettingsDep, body: AccountCreate
) -> AccountCreated:
    """Create a seller account; the API key is shown once."""
    return _register(session, settings, body, Role.SELLER)


@router.post(
    "/buyers",
    status_code=status.HTTP_201_CREATED,
    dependencies=REGISTRATION_BUDGET,
)
def register_buyer(
    session: SessionDep, settings: SettingsDep, body: AccountCreate
) -> AccountCreated:
    """Create a buyer account; the API key is shown once."""
    return _register(session, settings, body, Role.BUYER)


@router.get("/me", responses={401: ERROR_RESPONSES[401]})
def whoami(account: CurrentAccount) -> dict[str, int | str]:
    """Return the caller's id, name and role."""
    assert account.id is not None
    return {"id": account.id, "name": account.name, "role": account.role}
