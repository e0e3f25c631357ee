"""The README's Python examples run as written (with fewer trials), so that the docs stay true."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


# The README's Python examples, in order (the checks below pick theirs by name).
_EXPECTED_BLOCKS = [
    "quickstart", "objective", "refit", "mitigation", "tenants", "femnist", "cgp", "mtkb",
]


def _python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_the_readme_has_its_python_examples() -> None:
    assert len(_python_blocks()) == len(_EXPECTED_BLOCKS)


@pytest.mark.parametrize("index", range(len(_EXPECTED_BLOCKS)))
def test_readme_python_example_runs(tmp_path: Path, index: int) -> None:
    code = re.sub(r"n_trials=\d+", "n_trials=7", _python_blocks()[index])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    if index == 0:  # prints the best fair trial's accuracy and its recorded fairness metric
        value, attrs = result.stdout.split(" ", 1)
        assert 0.5 < float(value) <= 1.0 and "fairtune:demographic_parity" in attrs
    if index == 2:  # the test split's scores of the refitted best fair model
        assert re.fullmatch(
            r"\{'accuracy': 0\.\d+, 'demographic_parity': [0-9.e-]+, 'fair': (True|False)\}\n",
            result.stdout,
        )
    if _EXPECTED_BLOCKS[index] == "mitigation":  # test scores of the threshold pipeline
        assert re.fullmatch(
            r"\{'accuracy': 0\.\d+, 'demographic_parity': [0-9.e-]+, 'fair': (True|False)\}\n",
            result.stdout,
        )
    if _EXPECTED_BLOCKS[index] == "tenants":  # every tenant's cumulative utility; only beta ran
        assert re.search(r"'alpha': 0(\.0)?, 'beta': -[0-9.e-]+, 'gamma': 0(\.0)?", result.stdout)
    if _EXPECTED_BLOCKS[index] == "mtkb":  # Pareto-optimal trials and a 2 x 2 task correlation
        n_best, correlation = result.stdout.split(" ", 1)
        assert int(n_best) >= 1 and correlation.startswith("[[1.0, ")

    if _EXPECTED_BLOCKS[index] == "femnist":  # the CNN tenants: best accuracy, 3 parameters
        value, params = result.stdout.split(" ", 1)
        assert 0.0 <= float(value) <= 1.0
        assert all(name in params for name in ("'learning_rate'", "'lr_decay'", "'l2'"))
    if _EXPECTED_BLOCKS[index] == "cgp":  # three agents' best values, the board's last post
        best, post = result.stdout.splitlines()
        assert all(-0.5 < float(v) <= 0.0 for v in best.strip("[]").split(","))
        assert post.startswith("Post(agent='lab-c', round=9, design={'x': ")


ROOT = README.parent
DOCS = [README, ROOT / "docs" / "benchmarks.md"]


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("|--")]


def test_the_readme_benchmark_tables_are_those_of_the_full_record() -> None:
    # The README summarizes docs/benchmarks.md; its tables are copies that must not drift.
    summary = README.read_text().split("\n## Benchmarks\n", 1)[1]
    record = set(_table_rows((ROOT / "docs" / "benchmarks.md").read_text()))
    rows = _table_rows(summary)
    assert len(rows) >= 30
    assert [row for row in rows if row not in record] == []


def _slug(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_point_to_existing_files_and_headings(doc: Path) -> None:
    text = doc.read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        if re.match(r"[a-z]+://", link):
            continue
        path, _, anchor = link.partition("#")
        target = (doc.parent / path).resolve() if path else doc
        assert target.exists(), f"{doc.name}: {link} points to a missing file"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(), flags=re.M)
            assert anchor in {_slug(h) for h in headings}, f"{doc.name}: no heading for {link}"
