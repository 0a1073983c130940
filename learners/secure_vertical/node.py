"""Command line of one party of a secure vertical session (its own process)::

    python -m learners.secure_vertical.node --plan PLAN.json --index I \
        --peers HOST:PORT,HOST:PORT,HOST:PORT [--data BLOCK.csv] --out OUT.json \
        [--listen HOST] [--workdir DIR] [--timeout S] [--connect-timeout S] \
        [--tls-cert CRT --tls-key KEY --tls-ca CA]

See :func:`learners.secure_vertical._nodes.main`.
"""

from __future__ import annotations

from learners.secure_vertical._nodes import main

if __name__ == "__main__":
    raise SystemExit(main())
