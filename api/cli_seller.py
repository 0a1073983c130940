"""``privmarket seller serve``: answer a seller-custody market's report requests from
a local CSV file that never leaves this machine (:class:`api.client.SellerClient`)."""

import csv
import json
import math
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

seller_app = typer.Typer(
    help="A seller's side of seller-custody markets.", no_args_is_help=True
)


def read_records(path: Path, feature_names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Read ``path`` (CSV; header: the market's feature names in order, then ``y``; an
    empty cell is a missing value) into ``X`` (``np.nan`` where missing) and ``y``.

    Raises
    ------
    typer.BadParameter
        The header is not the market's features then ``y``, or a cell is not a number
        (row and column named).
    """
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        raise typer.BadParameter(f"{path} is empty", param_hint="--data")
    header = [h.strip() for h in rows[0]]
    expected = [*feature_names, "y"]
    if header != expected:
        raise typer.BadParameter(
            f"{path}: the header must be the market's features then y: {expected}, "
            f"got {header}",
            param_hint="--data",
        )
    values = np.full((len(rows) - 1, len(header)), np.nan)
    for i, row in enumerate(rows[1:]):
        if len(row) != len(header):
            raise typer.BadParameter(
                f"{path}: row {i + 2} has {len(row)} cells, the header {len(header)}",
                param_hint="--data",
            )
        for j, cell in enumerate(row):
            text = cell.strip()
            if not text:
                continue
            try:
                values[i, j] = float(text)
            except ValueError:
                raise typer.BadParameter(
                    f"{path}: row {i + 2}, column {header[j]!r} is not a number",
                    param_hint="--data",
                ) from None
    if len(values) == 0:
        raise typer.BadParameter(f"{path} holds no record", param_hint="--data")
    if np.isnan(values[:, -1]).any():
        raise typer.BadParameter(f"{path}: every record needs y", param_hint="--data")
    return values[:, :-1], values[:, -1]


@seller_app.command("serve")
def serve(
    server: Annotated[str, typer.Option(help="The server's URL.")],
    key: Annotated[str, typer.Option(help="Your seller API key.")],
    market: Annotated[int, typer.Option(help="The seller-custody market's id.")],
    data: Annotated[
        Path,
        typer.Option(
            exists=True,
            dir_okay=False,
            help="Your records: CSV with the market's feature names then y; an empty "
            "cell is a missing value. It is read here and never sent.",
        ),
    ],
    until_idle: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="Stop once no request has been open for this many seconds "
            "(default: keep serving until interrupted).",
        ),
    ] = None,
    log: Annotated[
        Path | None,
        typer.Option(
            help="Local log of every report sent and its ε (JSON lines; default "
            "$PRIVMARKET_SELLER_LOG or ~/.privmarket/seller-reports.jsonl)."
        ),
    ] = None,
    poll: Annotated[
        float, typer.Option(min=0.05, help="Seconds between looks for new requests.")
    ] = 1.0,
) -> None:
    """Answer your report requests in a seller-custody market: each is randomized
    here, from OS entropy, by the randomizer it names; only the report is sent."""
    from api.client.seller import SellerClient

    with SellerClient(server, key, log_path=log, poll_seconds=poll) as client:
        info = client.market(market)
        if info.get("custody") != "seller":
            raise typer.BadParameter(
                f"market {market} keeps records on the platform (custody "
                f"{info.get('custody')!r}); this command serves seller-custody markets",
                param_hint="--market",
            )
        X, y = read_records(data, [str(f["name"]) for f in info["features"]])
        typer.echo(
            f"serving market {market} with {len(y)} record(s) from {data} "
            f"(log: {client.log_path})"
        )

        def show(request: dict[str, Any], report: dict[str, Any]) -> None:
            typer.echo(
                f"sent request {request['id']} (order {request['order_id']}, round "
                f"{request['round']}, {request['randomizer']}, epsilon "
                f"{request['epsilon']:.6g}): {json.dumps(report)}"
            )

        wait = math.inf if until_idle is None else until_idle
        n = client.answer_requests(market, X, y, wait=wait, on_sent=show)
        typer.echo(
            f"answered {n} request(s); epsilon logged for market {market}: "
            f"{client.epsilon_logged(market):.6g}"
        )
