"""The pages a user reads first stay short and plain: the README is a product page, every
benchmark page opens with its answer and a figure, and the library's docstrings link to the
evidence instead of quoting it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs" / "benchmarks").glob("*.md"))
# A number in prose: digits, with decimals or thousands separators (not inside a word or a name).
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])")
# How measured statistics are quoted: a p-value, a win / tie / loss count, "N of M seeds".
QUOTED_STATISTICS = re.compile(
    r"\bp\s*[=<]\s*0?\.\d|\b\d+\s*/\s*\d+\s*/\s*\d+\b"
    r"|\b\d+ (?:out )?of \d+ (?:held-out )?(?:seeds|splits|agents|replications|families)\b"
)


def _blocks(text: str) -> tuple[list[str], list[list[str]]]:
    """The prose lines of a markdown page (outside code fences and tables) and its tables."""
    prose, tables, fenced = [], [], False
    table: list[str] = []
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.startswith("|"):
            table.append(line)
            continue
        if table:
            tables.append(table)
            table = []
        prose.append(line)
    if table:
        tables.append(table)
    return prose, tables


def _first_paragraph(text: str) -> str:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# ")) + 1
    while not lines[start].strip():
        start += 1
    end = start
    while end < len(lines) and lines[end].strip():
        end += 1
    return " ".join(lines[start:end])


def _sentences(paragraph: str) -> int:
    # A sentence ends at ". ", "! " or "? " followed by a capital, or at the paragraph's end;
    # "e.g." and "i.e." do not end one.
    text = re.sub(r"\b(?:e\.g|i\.e|et al|vs)\.", "", paragraph)
    return len(re.findall(r"[.!?](?:\s+(?=[A-Z`*(\[])|\s*$)", text))


def test_the_readme_is_a_product_page() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 120
    prose, tables = _blocks(text)
    headline, *others = tables  # the first table is the headline result
    # Numbers in the text (and in the other tables), not in code, links or link targets.
    words = [re.sub(r"`[^`]*`|\]\([^)]*\)", "", line) for line in prose + sum(others, [])]
    numbers = [n for line in words for n in NUMBER.findall(line)]
    assert len(numbers) <= 30, numbers
    rows = headline[2:]
    assert len(rows) <= 6
    for row in rows:  # methods in words, not the benchmark's identifiers
        assert not re.search(r"\b[a-z]+_[a-z_]+\b", row.replace("`", "")), row


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_a_benchmark_page_opens_with_its_answer_and_a_figure(page: Path) -> None:
    text = page.read_text()
    assert len(text.splitlines()) <= 250
    if page.name == "index.md":
        return
    assert _sentences(_first_paragraph(text)) <= 3, _first_paragraph(text)
    figure = text.find("![")
    table = text.find("\n|")
    if page.name != "optuna_suite.md":  # Optuna's own test suite: a count, nothing to plot
        assert figure != -1, "a figure"
        assert table == -1 or figure < table, "the figure comes before the first table"


def test_the_benchmarks_are_run_as_modules_of_one_package() -> None:
    for folder in ("benchmarks", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            assert "sys" + ".path" not in path.read_text(), path  # (this line spells it apart)
    size = sum(p.stat().st_size for p in (ROOT / "benchmarks" / "results").rglob("*")
               if p.is_file() and "tmp" not in p.relative_to(ROOT / "benchmarks" / "results").parts)
    assert size < 10 * 2**20


def test_the_library_links_to_its_evidence_instead_of_quoting_it() -> None:
    quoted = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
              for path in sorted((ROOT / "fairtune").rglob("*.py"))
              for number, line in enumerate(path.read_text().splitlines(), 1)
              if QUOTED_STATISTICS.search(line)]
    assert not quoted, "\n".join(quoted)


def test_the_quoted_statistics_pattern_finds_what_it_must() -> None:
    for line in ("below alone for 265 of 480 agents, p = 0.025", "7 / 0 / 13 against it",
                 "fair in 17 of 20 splits", "(p<0.001)"):
        assert QUOTED_STATISTICS.search(line), line
    for line in ("6,172 of 7,214 rows", "a p-value", "seed 0"):
        assert not QUOTED_STATISTICS.search(line), line
