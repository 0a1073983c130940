"""Bulk ingestion: many sellers' offers to one market in one all-or-nothing request.

``POST /v1/markets/{id}/offers:bulk`` (admin) takes rows that are each an
``OfferCreate`` (the single-offer schema, so the same field rules) plus a seller: an
existing seller account (``seller_id``) or a new one (``seller_name``, created with the
offer; its API key is returned once). The request is validated as a whole before
anything is written: the first bad row gives an ``InvalidInputError`` whose field names
its index (``offers[3].records[0].x[1]``), a seller who already has an active offer
(or appears twice) a ``ConflictError`` / ``InvalidInputError`` naming the row, and
nothing is stored. Otherwise every account and offer is inserted in one transaction
with one ``executemany`` ``INSERT`` per table; new ids are read back through the unique
key prefix (accounts) and the unique active (market, seller) pair (offers).

Validation is vectorised over the whole request (one ``records.scale_records`` call for
all records, one support check for all reported costs): its checks are per record and
per cost, so the batch fails exactly when some row would fail on its own, and only then
are rows re-checked one by one to name the first bad one.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from market import access, numerics, offers
from market.access import resolve_key_secret
from market.config import Settings
from market.errors import ConflictError, InvalidInputError
from market.offers import records
from market.schemas import BulkOfferCreated, BulkOfferIn, BulkOffersCreated
from market.store import Account, Market, Offer, OfferStatus, Role, db, utcnow


@dataclass(frozen=True, slots=True)
class _Validated:
    raw: list[list[dict[str, Any]]]
    scaled: list[list[dict[str, Any]]]
    n_records: list[int]


def _prefixed(index: int, exc: InvalidInputError) -> InvalidInputError:
    return InvalidInputError(f"offers[{index}].{exc.field}", exc.message)


def _first_bad_row(market: Market, rows: Sequence[BulkOfferIn]) -> InvalidInputError:
    """Re-check rows one by one (the error path only) and return the first error."""
    for i, row in enumerate(rows):
        try:
            offers.validate_offer(market, row)
        except InvalidInputError as exc:
            return _prefixed(i, exc)
    raise AssertionError("the batch failed but no row fails on its own")


def _check_counts(market: Market, rows: Sequence[BulkOfferIn]) -> None:
    per_seller = offers.RECORDS_PER_SELLER.get(market.task)
    if per_seller is None:
        return
    for i, row in enumerate(rows):
        if len(row.records or ()) != per_seller:
            raise InvalidInputError(
                f"offers[{i}].records",
                f"a {market.task} market takes exactly {per_seller} record per seller",
            )


def validate_rows(market: Market, rows: Sequence[BulkOfferIn]) -> _Validated:
    """Validate and scale every row (module docstring); raise naming the first bad row.

    Raises
    ------
    InvalidInputError
        Field ``offers[i]....``: the first row that does not fit the market.
    """
    if market.custody == "seller" or any(row.records is None for row in rows):
        # seller custody (no records to scale), or a row missing its records: the
        # row-by-row rules name the first bad row
        for i, row in enumerate(rows):
            try:
                offers.validate_offer(market, row)
            except InvalidInputError as exc:
                raise _prefixed(i, exc) from None
        return _Validated(
            raw=[[] for _ in rows],
            scaled=[[] for _ in rows],
            n_records=[offers.offer_size(market, row, []) for row in rows],
        )
    _check_counts(market, rows)
    raw = [[r.model_dump() for r in row.records or ()] for row in rows]
    flat = [rec for row in raw for rec in row]
    try:
        X, y = records.scale_records(
            flat,
            features=market.features,
            task=market.task,
            target=market.target,
            out_of_bounds=market.out_of_bounds,
        )
        numerics.check_reported_costs(
            market.cost_prior, [row.reported_cost for row in rows]
        )
    except InvalidInputError:
        raise _first_bad_row(market, rows) from None
    scaled_flat = records.to_json(X, y)
    scaled, start = [], 0
    for row in raw:
        scaled.append(scaled_flat[start : start + len(row)])
        start += len(row)
    return _Validated(raw=raw, scaled=scaled, n_records=[len(r) for r in raw])


def _check_existing_sellers(
    session: Session, market_id: int, rows: Sequence[BulkOfferIn]
) -> None:
    """Every ``seller_id`` is a seller, appears once, and has no active offer here."""
    where: dict[int, int] = {}
    for i, row in enumerate(rows):
        if row.seller_id is None:
            continue
        if row.seller_id in where:
            raise InvalidInputError(
                f"offers[{i}].seller_id",
                f"seller {row.seller_id} already has a row (offers[{where[row.seller_id]}])"
                "; one offer per seller and market",
            )
        where[row.seller_id] = i
    ids = sorted(where)
    sellers: set[int] = set()
    busy: set[int] = set()
    for chunk in db.in_chunks(ids):
        sellers.update(
            session.exec(
                select(Account.id).where(
                    col(Account.id).in_(chunk), Account.role == Role.SELLER.value
                )
            ).all()  # type: ignore[arg-type]
        )
        busy.update(
            session.exec(
                select(Offer.seller_id).where(
                    Offer.market_id == market_id,
                    Offer.status == OfferStatus.ACTIVE.value,
                    col(Offer.seller_id).in_(chunk),
                )
            ).all()
        )
    for seller_id, i in sorted(where.items(), key=lambda item: item[1]):
        if seller_id not in sellers:
            raise InvalidInputError(
                f"offers[{i}].seller_id", f"no seller account with id {seller_id}"
            )
        if seller_id in busy:
            raise ConflictError(
                f"offers[{i}].seller_id: seller {seller_id} already has an active offer"
                " in this market (PUT /v1/offers/{id} replaces it)"
            )


def _insert(
    session: Session,
    table: sa.Table,
    values: list[dict[str, Any]],
    *,
    json_columns: Sequence[str] = (),
) -> None:
    """One ``executemany`` of a plain ``INSERT`` (ids are read back by unique keys:
    ``RETURNING`` in parameter order makes SQLite insert row by row).

    ``json_columns`` hold values already serialised by :func:`_json` (orjson, about
    15× faster than the standard library on float lists, which dominated the insert);
    they are bound as text, which both databases store into their JSON columns.
    """
    if not values:
        return
    stmt = sa.insert(table)
    if json_columns:
        cast = session.get_bind().dialect.name == "postgresql"
        stmt = stmt.values(
            {
                name: sa.cast(sa.bindparam(name, type_=sa.Text), table.c[name].type)
                if cast
                else sa.bindparam(name, type_=sa.Text)
                for name in json_columns
            }
        )
    session.execute(stmt, values)


def _json(value: Any) -> str:
    """Serialise validated records (finite floats or ``None``) as JSON text."""
    return orjson.dumps(value).decode()


def _ids_by(
    session: Session, id_col: Any, key_col: Any, keys: Sequence[Any], *where: Any
) -> dict[Any, int]:
    """Return ``{key: id}`` for rows whose unique ``key_col`` is in ``keys``."""
    found: dict[Any, int] = {}
    for chunk in db.in_chunks(keys):
        stmt = sa.select(id_col, key_col).where(key_col.in_(chunk), *where)
        found.update({key: int(i) for i, key in session.execute(stmt).all()})
    return found


def _new_sellers(
    names: list[str], secret: bytes
) -> tuple[list[dict[str, Any]], list[str]]:
    """Return the account rows of new sellers and their API keys (``names`` order)."""
    now = utcnow()
    keys, values = [], []
    for name in names:
        key, prefix, key_hash = access.issue_key(secret)
        keys.append(key)
        values.append(
            {
                "role": Role.SELLER.value,
                "name": name,
                "key_prefix": prefix,
                "key_hash": key_hash,
                "created_at": now,
            }
        )
    return values, keys


def _offer_rows(
    market_id: int, rows: Sequence[BulkOfferIn], checked: _Validated
) -> list[dict[str, Any]]:
    """Return the offer rows to insert (``seller_id`` still unset for new sellers)."""
    now = utcnow()
    return [
        {
            "market_id": market_id,
            "seller_id": row.seller_id,
            "records": _json(raw),
            "records_scaled": _json(scaled),
            "n_records": n,
            "reported_cost": row.reported_cost,
            "max_epsilon": row.max_epsilon,
            "status": OfferStatus.ACTIVE.value,
            "created_at": now,
            "updated_at": now,
        }
        for row, raw, scaled, n in zip(
            rows, checked.raw, checked.scaled, checked.n_records, strict=True
        )
    ]


def create_offers(
    session: Session,
    *,
    market: Market,
    rows: Sequence[BulkOfferIn],
    settings: Settings,
) -> BulkOffersCreated:
    """Validate all rows, then store every new seller and offer in one transaction.

    Everything per row (validation, scaling, serialisation, new keys) is done before
    the write transaction begins (the caller's transaction is committed first), so on
    SQLite the write lock is held only for the inserts and the id look-ups.

    Raises
    ------
    InvalidInputError
        A row does not fit the market, names an unknown seller or repeats a seller
        (the field names the row).
    ConflictError
        A seller already has an active offer in the market (also when a concurrent
        request created one first).
    """
    assert market.id is not None
    names = [
        access.clean_name(row.seller_name, f"offers[{i}].seller_name")
        for i, row in enumerate(rows)
        if row.seller_name is not None
    ]
    session.commit()
    offer_values = _offer_rows(market.id, rows, validate_rows(market, rows))
    account_values, new_keys = _new_sellers(names, resolve_key_secret(settings))
    try:
        _check_existing_sellers(session, market.id, rows)
        _insert(session, Account.__table__, account_values)  # type: ignore[attr-defined]
        prefixes = [a["key_prefix"] for a in account_values]
        by_prefix = _ids_by(session, Account.id, Account.key_prefix, prefixes)
        new_sellers = iter(zip((by_prefix[p] for p in prefixes), new_keys, strict=True))
        owners: list[tuple[int, str | None]] = []
        for values in offer_values:
            if values["seller_id"] is None:
                values["seller_id"], key = next(new_sellers)
            else:
                key = None
            owners.append((values["seller_id"], key))
        _insert(
            session,
            Offer.__table__,  # type: ignore[attr-defined]
            offer_values,
            json_columns=("records", "records_scaled"),
        )
        by_seller = _ids_by(
            session,
            Offer.id,
            Offer.seller_id,
            [seller for seller, _ in owners],
            Offer.market_id == market.id,
            Offer.status == OfferStatus.ACTIVE.value,
        )
        offer_ids = [by_seller[seller] for seller, _ in owners]
        session.commit()
    except IntegrityError as exc:  # a concurrent request took a seller's active slot
        session.rollback()
        raise ConflictError(
            "an offer of one of these sellers was created concurrently; nothing was"
            " stored, retry"
        ) from exc
    except BaseException:
        session.rollback()
        raise
    items = [
        BulkOfferCreated(index=i, offer_id=oid, seller_id=sid, api_key=key)
        for i, (oid, (sid, key)) in enumerate(zip(offer_ids, owners, strict=True))
    ]
    return BulkOffersCreated(
        market_id=market.id,
        created=len(items),
        sellers_created=len(new_keys),
        items=items,
    )
