"""The README: short, its commands where CI finds them, its example runs, its links resolve.

The documentation pages' examples and links are checked in tests/test_docs.py, with the same
helpers.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests._scripts import run_code

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

# The README's Python examples, in order (a ```py block is shown, not run).
_EXPECTED_BLOCKS = ["quickstart"]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def run_block(code: str, cwd: Path) -> str:
    """Run a documented example as written, with 7 trials and 2 folds wherever it asks for more.

    Returns:
        Its standard output.
    """
    code = re.sub(r"n_trials=\d+", "n_trials=7", code)
    code = re.sub(r"\bcv=\d+", "cv=2", code)
    return run_code(code, cwd)


def test_the_readme_fits_on_a_screen_or_a_few() -> None:
    assert len(README.read_text().splitlines()) <= 200


def test_the_readme_has_its_python_examples() -> None:
    assert len(python_blocks(README)) == len(_EXPECTED_BLOCKS)


def test_the_second_bash_block_is_the_test_command() -> None:
    # .ci/run extracts the README's second ```bash block and runs it as the test suite.
    blocks = re.findall(r"^```bash\n(.*?)^```", README.read_text(), flags=re.S | re.M)
    assert blocks[1].strip() == 'pip install -e ".[test]" && python -m pytest -q'
    assert blocks[0].startswith("pip install . && fairtune tune ")


def test_the_readme_says_how_to_build_the_documentation() -> None:
    text = README.read_text()
    assert 'pip install -e ".[docs]"' in text
    assert "python -m sphinx -W -b html docs docs/_build/html" in text


def test_readme_quickstart_runs(tmp_path: Path) -> None:
    out = run_block(python_blocks(README)[_EXPECTED_BLOCKS.index("quickstart")], tmp_path)
    # The best fair trial's accuracy and its recorded fairness metric.
    value, attrs = out.split(" ", 1)
    assert 0.5 < float(value) <= 1.0 and "fairtune:demographic_parity" in attrs


def slug(heading: str) -> str:
    """The anchor a repository browser (and MyST, with myst_heading_anchors) gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def headings(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)  # not code comments
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def generated_page_source(target: Path) -> Path | None:
    """Pages Sphinx generates while it builds: the gallery's, from examples/*.py."""
    docs = ROOT / "docs"
    if target.parent == docs / "auto_examples" and target.suffix == ".rst":
        if target.stem == "index":
            return ROOT / "examples" / "GALLERY_HEADER.rst"
        return ROOT / "examples" / f"{target.stem}.py"
    return None


def check_links(doc: Path) -> int:
    """Check the relative links of a Markdown page; returns how many links it has."""
    text = re.sub(r"^```.*?^```", "", doc.read_text(), flags=re.S | re.M)
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    for link in links:
        if re.match(r"[a-z]+://", link):
            continue
        path, _, anchor = link.partition("#")
        target = (doc.parent / path).resolve() if path else doc
        source = generated_page_source(target)
        assert target.exists() or (source is not None and source.exists()), (
            f"{doc.relative_to(ROOT)}: {link} points to a missing file"
        )
        if anchor:
            assert target.suffix == ".md", f"{doc.relative_to(ROOT)}: anchor into {link}"
            assert anchor in headings(target), f"{doc.relative_to(ROOT)}: no heading for {link}"
    return len(links)


def test_readme_links_point_to_existing_files_and_headings() -> None:
    assert check_links(README) >= 20
    # The README links into every page of the user guide and of the benchmarks.
    linked = set(re.findall(r"\]\((docs/[^)#\s]+)", README.read_text()))
    for folder in ("user_guide", "benchmarks"):
        pages = {f"docs/{folder}/{p.name}" for p in (ROOT / "docs" / folder).glob("*.md")}
        assert pages - {f"docs/{folder}/index.md"} <= linked, pages - linked


def test_the_sentences_under_the_headline_table_say_what_its_rows_show() -> None:
    text = README.read_text()
    section = text[text.index("## How it compares"):text.index("## What is in the box")]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| ") and "---" not in line and not line.startswith("| method"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = [tuple(float(x) for x in re.findall(r"[\d.]+", c)) for c in cells[1:]]
    post = rows["fairlearn's ThresholdOptimizer on a default XGBoost"]
    reduction = rows["fairlearn's ExponentiatedGradient on a default XGBoost"]
    inside = rows["fairtune: tuned XGBoost with the threshold inside the search"]
    margin = rows["the same, validated against the limit less 0.01 (`--margin 0.01`)"]
    columns = range(4)
    prose = " ".join(section.split())
    # "at least as accurate ... and keeps the limit on more test splits in every column"
    assert "at least as accurate as post-processing" in prose
    assert all(inside[c][0] >= post[c][0] and inside[c][1] > post[c][1] for c in columns)
    # "the margin adds fair splits in three columns but not under equalized odds on COMPAS,
    # where it loses splits and accuracy"
    gains = [c for c in columns if margin[c][1] > inside[c][1]]
    assert "adds fair splits in three columns" in prose and len(gains) == 3
    assert 1 not in gains and margin[1][1] < inside[1][1] and margin[1][0] < inside[1][0]
    # "The reduction is more accurate only on Adult, and breaks the limit on most test splits
    # everywhere" (20 splits a column)
    assert "more accurate only on Adult" in prose
    assert [reduction[c][0] > inside[c][0] for c in columns] == [False, False, True, True]
    assert all(reduction[c][1] < 10 for c in columns)
