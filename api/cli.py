"""The ``privmarket`` command line: ``serve``, ``worker``, ``demo``, ``audit``,
``admin create-key``, ``db upgrade``.

Help texts are plain text (no reStructuredText markup): they are what a user reads.
"""

from typing import Annotated

import typer

from api.cli_mechanism import audit as audit_command
from api.cli_seller import seller_app
from market.config import get_settings

app = typer.Typer(
    help="privmarket: a data market for heterogeneous differential privacy.",
    no_args_is_help=True,
)
admin_app = typer.Typer(help="Administration.", no_args_is_help=True)
db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)
app.add_typer(admin_app, name="admin")
app.add_typer(db_app, name="db")
app.add_typer(seller_app, name="seller")
app.command("audit")(audit_command)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
) -> None:
    """Serve the API, the web console (/console) and the API docs (/docs, /redoc).

    Upgrades the database to the newest schema first. Settings come from PRIVMARKET_*
    environment variables (database URL, workers, rate limits, Dask scheduler); see
    docs/operator.md.
    """
    import uvicorn

    from api.main import create_app
    from market import numerics
    from market.store import upgrade_to_head

    settings = get_settings()
    upgrade_to_head(settings.database_url)
    print(
        f"privmarket: console http://{host}:{port}/console, API docs "
        f"http://{host}:{port}/docs, in-process workers: {settings.workers}",
        flush=True,
    )
    if not numerics.kernels_compiled():
        print(f"privmarket: {numerics.FIRST_RUN_NOTE}", flush=True)
    uvicorn.run(create_app(settings), host=host, port=port)


@admin_app.command("create-key")
def create_key(
    name: Annotated[str, typer.Option(help="Account name.")] = "admin",
) -> None:
    """Create an admin account and print only its new API key."""
    from market import access
    from market.store import Role, make_engine, session_scope, upgrade_to_head

    settings = get_settings()
    upgrade_to_head(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        with session_scope(engine, write=True) as session:
            _, key = access.create_account(
                session, role=Role.ADMIN, name=name, settings=settings
            )
    finally:
        engine.dispose()
    print(key)


@db_app.command("upgrade")
def db_upgrade(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Apply database migrations up to REVISION (default: head)."""
    from alembic import command

    from market.store import alembic_config

    command.upgrade(alembic_config(get_settings().database_url), revision)


@app.command()
def worker(
    once: Annotated[
        bool, typer.Option(help="Run the recovery sweep and at most one order or job.")
    ] = False,
    threads: Annotated[int, typer.Option(min=1, help="Worker threads.")] = 1,
) -> None:
    """Run orders and jobs from the database (PRIVMARKET_DATABASE_URL) until
    interrupted; start as many processes as you like (claims never collide)."""
    from api.pipeline_cli import run_worker

    run_worker(get_settings(), once=once, threads=threads)


@app.command()
def demo(
    sellers: Annotated[int, typer.Option(min=10, help="Simulated sellers.")] = 300,
    budget: Annotated[float, typer.Option(help="The buyer's budget.")] = 400.0,
    audit_sellers: Annotated[
        int, typer.Option(min=0, help="Sellers sampled for the IC audit.")
    ] = 2,
    gamma: Annotated[float, typer.Option(help="γ of the order.")] = 0.01,
    choose_gamma: Annotated[
        bool,
        typer.Option(help="Order with gamma=null: choose γ for the budget (slower)."),
    ] = False,
    serve: Annotated[
        bool,
        typer.Option(
            help="Afterwards print the console URL and an admin key and keep serving "
            "until Ctrl-C (--no-serve: exit after the report, for scripts and CI)."
        ),
    ] = True,
) -> None:
    """Run a Wisconsin breast-cancer market end to end over the real HTTP API."""
    from api.demo import run_demo

    run_demo(
        n_sellers=sellers,
        budget=budget,
        audit_sellers=audit_sellers,
        gamma=None if choose_gamma else gamma,
        serve=serve,
    )


# --- a data party's node (seller-custody vertical markets) ----------------------

party_app = typer.Typer(
    help="A data party's node in a vertical market.", no_args_is_help=True
)
app.add_typer(party_app, name="party")


@party_app.command("serve")
def party_serve(
    server: Annotated[str, typer.Option(help="The platform's URL.")],
    key: Annotated[
        str, typer.Option(help="Your seller API key (holds the party's offer).")
    ],
    market: Annotated[int, typer.Option(help="Market id.")],
    party: Annotated[str, typer.Option(help="Your party's name in the market.")],
    data: Annotated[
        str,
        typer.Option(
            help="CSV: a 'key' column, your features in the market's order and, at the "
            "label holder only, 'y' (-1/+1). It never leaves this machine."
        ),
    ],
    until_idle: Annotated[
        float | None,
        typer.Option(
            help="Stop after this many seconds without a session (default: never)."
        ),
    ] = None,
    host: Annotated[
        str, typer.Option(help="Address the other parties reach this node at.")
    ] = "127.0.0.1",
    port: Annotated[
        int | None, typer.Option(help="TCP port (default: a free one).")
    ] = None,
    listen: Annotated[
        str | None, typer.Option(help="Interface to listen on (default: --host).")
    ] = None,
    tls_cert: Annotated[str | None, typer.Option(help="TLS certificate (PEM).")] = None,
    tls_key: Annotated[str | None, typer.Option(help="TLS private key (PEM).")] = None,
    tls_ca: Annotated[
        str | None, typer.Option(help="CA certificate all parties trust.")
    ] = None,
) -> None:
    """Take part in every secure fit of the market as your party, from this process:
    register the node, poll for fit sessions and run each; only secret shares of
    your values leave this machine."""
    from api.client.party import PartyNode

    tls = None
    if tls_cert or tls_key or tls_ca:
        if not (tls_cert and tls_key and tls_ca):
            raise typer.BadParameter("give --tls-cert, --tls-key and --tls-ca together")
        tls = (tls_cert, tls_key, tls_ca)
    node = PartyNode.from_csv(server, key, market, party, data, host=host, port=port,
                              listen_host=listen, tls=tls)  # fmt: skip
    for result in node.serve(until_idle=until_idle):
        typer.echo(f"session {result['session']}: {result['status']}"
                   + (f" ({result['reason']})" if result.get("reason") else ""))  # fmt: skip


if __name__ == "__main__":  # python -m api.cli, as the privmarket script
    app()
