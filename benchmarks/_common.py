"""Helpers shared by the benchmarks: timing and the sections of ``RESULTS.md``.

Each benchmark owns one or more ``## <title>`` sections of ``benchmarks/RESULTS.md``
and rewrites only those (other engineers append their own sections).
"""

from __future__ import annotations

import platform
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).with_name("RESULTS.md")
ROOT = RESULTS.parent.parent
HEADER = "# Benchmark results\n\nEach section states the command that produced it.\n"


def extract_revision(rev: str, dest: str | Path, paths: Sequence[str]) -> None:
    """Write the directories ``paths`` of git revision ``rev`` into ``dest`` (``git
    archive`` piped to ``tar -x``): the code a benchmark compares against, imported
    from there with ``PYTHONPATH=dest``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, *paths],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def best_time(fn: Callable[[], Any], *, repeat: int = 3) -> tuple[float, Any]:
    """Smallest wall time of ``repeat`` calls (shared machine: the minimum is the
    least disturbed run) and the last call's result."""
    best, out = float("inf"), None
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def machine_note() -> str:
    """One line describing where the numbers were measured."""
    import os

    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores "
        f"(shared), Python {platform.python_version()}"
    )


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-style table; floats rendered with 4 significant digits."""

    def cell(v: Any) -> str:
        if v is None:
            return "–"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_section(title: str, body: str, *, path: Path = RESULTS) -> None:
    """Replace the ``## title`` section of ``path`` with ``body`` (append if absent).

    A section runs from its heading to the next ``## `` heading or the end of file.
    """
    text = path.read_text() if path.exists() else HEADER
    block = f"## {title}\n\n{body.strip()}\n\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text.rstrip("\n") + "\n")
