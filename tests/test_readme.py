"""The README's two commands are the contract CI runs (``.ci/run``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def test_readme_opens_with_the_main_job_and_the_test_command() -> None:
    blocks = _bash_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 2
    main_job, tests = blocks[0], blocks[1]
    assert main_job.endswith("privmarket demo")
    assert "pip install" in main_job
    assert "[dev]" not in main_job
    assert "pip install" in tests
    assert "pytest" in tests


def test_ci_runs_exactly_the_readme_test_command() -> None:
    tests = _bash_blocks((ROOT / "README.md").read_text())[1]
    ci_lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert tests in ci_lines
