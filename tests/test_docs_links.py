"""The README and ``docs/`` link only to what the repository holds.

Every relative link in ``README.md`` and ``docs/*.md`` must name a file of the
repository (not a path outside it, as a clone has nothing there), and a ``#anchor``
must name a heading of the target (GitHub's heading slugs). The README links nowhere
outside the repository at all, and stays short enough to read in a few minutes.

These pages, ``benchmarks/RESULTS.md`` and the benchmark scripts speak of the product:
no issue numbers, no branches (those belong in commit messages).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
# Not link-checked, only held to the product wording of PAGES.
BENCHMARKS = [ROOT / "benchmarks" / "RESULTS.md", *sorted((ROOT / "benchmarks").glob("*.py"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", flags=re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"
)
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", flags=re.M)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", flags=re.I)


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code (no links live there)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, inline code and link markup and
    punctuation dropped (letters of any script, digits, ``_`` and ``-`` kept), spaces
    turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (duplicates get ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, title in HEADING.findall(FENCE.sub("", path.read_text())):
        base = slug(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    """Every link target of a Markdown file (images included), in order."""
    return LINK.findall(_prose(path.read_text()))


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """The link targets of ``path`` that do not resolve inside the repository
    ``root``, each with the reason."""
    bad: list[str] = []
    for target in links(path):
        if EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.is_relative_to(root):
            bad.append(f"{target}: outside the repository")
        elif not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_inside_the_repository(page: Path) -> None:
    assert broken_links(page) == []


def test_the_readme_links_nowhere_outside_the_repository() -> None:
    external = [t for t in links(ROOT / "README.md") if EXTERNAL.match(t)]
    assert external == []


def test_the_readme_is_short_and_leads_into_the_docs() -> None:
    readme = ROOT / "README.md"
    assert len(readme.read_text().splitlines()) <= 200
    targets = {t.partition("#")[0] for t in links(readme)}
    assert "docs/index.md" in targets
    # every page of docs/ is reachable from the index
    index_targets = {t.partition("#")[0] for t in links(ROOT / "docs" / "index.md")}
    unlinked = [
        p.name for p in DOCS if p.name != "index.md" and p.name not in index_targets
    ]
    assert unlinked == []


def test_the_checker_finds_links_and_catches_bad_ones(tmp_path: Path) -> None:
    """The checker is not vacuous: it sees the pages' links, and on a planted page it
    reports a missing file, a missing anchor and a path outside the repository, while
    accepting a good link, a good anchor and links inside code."""
    assert sum(len(links(p)) for p in PAGES) > 50
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "README.md").write_text("# privmarket\n")
    (repo / "docs" / "index.md").write_text("# Documentation\n")
    page = repo / "docs" / "page.md"
    page.write_text(
        "# A page\n\n## Its `second` heading: γ, too\n\n"
        "[ok](index.md) [ok anchor](#its-second-heading-γ-too) [ok](../README.md#privmarket)\n"
        "[missing](no-such-page.md) [bad anchor](index.md#no-such-heading)\n"
        "[outside](../../shared/specs/api.md) [web](https://example.org)\n"
        "`[in code](nowhere.md)`\n\n```\n[in a block](nowhere.md)\n```\n"
    )
    bad = broken_links(page, root=repo)
    assert [b.split(":")[0] for b in bad] == [
        "no-such-page.md",
        "index.md#no-such-heading",
        "../../shared/specs/api.md",
    ]


PROCESS_WORDS = re.compile(
    r"\bissues? ?#?\d+|\bbranch(?:es)?\b(?!-and-bound)", flags=re.I
)


@pytest.mark.parametrize(
    "page", [*PAGES, *BENCHMARKS], ids=lambda p: str(p.relative_to(ROOT))
)
def test_pages_speak_of_the_product_not_of_its_development(page: Path) -> None:
    """No issue numbers or branches in the product's documentation, the benchmark
    results or the benchmark scripts."""
    assert PROCESS_WORDS.findall(page.read_text()) == []
