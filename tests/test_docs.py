"""The documentation site: its examples run, its links resolve, the API reference is complete.

The site itself is built in CI (``python -m sphinx -W -b html docs docs/_build/html``); these
checks are the fast part, which needs no build.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest

from tests.test_readme import check_links, python_blocks, run_block

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)

# Each page's Python examples, in order (a ```py block is shown, not run).
_EXPECTED_BLOCKS = {
    "index.md": ["home"],
    "getting_started.md": ["own_objective", "ready_made", "two_objectives", "own_pipeline"],
    "user_guide/fair_model.md": ["objective", "searchcv", "dashboard", "refit", "certified",
                                 "mitigation", "defaults"],
    "user_guide/multi_objective.md": ["mtkb"],
    "user_guide/tenants.md": ["tenants", "femnist"],
    "user_guide/agents.md": ["cgp"],
    "user_guide/fairness_metrics.md": ["metrics", "interval", "ratio"],
    "user_guide/datasets.md": ["datasets"],
    "user_guide/own_data.md": ["own_file", "own_frame"],
}
_BLOCKS = [(page, i, name) for page, names in _EXPECTED_BLOCKS.items()
           for i, name in enumerate(names)]

_TEST_SCORES = re.compile(
    r"\{'accuracy': 0\.\d+, 'demographic_parity': [0-9.e-]+, 'fair': (True|False)\}\n"
)


def test_every_page_with_python_examples_is_listed() -> None:
    for page in PAGES:
        name = page.relative_to(DOCS).as_posix()
        assert len(python_blocks(page)) == len(_EXPECTED_BLOCKS.get(name, [])), name


@pytest.mark.parametrize(("page", "index", "name"), _BLOCKS, ids=[b[2] for b in _BLOCKS])
def test_documented_example_runs(tmp_path: Path, page: str, index: int, name: str) -> None:
    out = run_block(python_blocks(DOCS / page)[index], tmp_path)
    if name in ("home", "ready_made", "refit", "mitigation", "own_file"):  # test split's scores
        assert _TEST_SCORES.fullmatch(out), out
    if name == "dashboard":  # the study note's headline, as optuna-dashboard shows it
        assert re.fullmatch(r"### Deploy trial \\#\d+, the best fair trial\n", out), out
    if name == "certified":  # the certificate of the deployed model
        assert re.fullmatch(r"Certified: trial #\d+ keeps demographic_parity<=0\.05 on new data "
                            r"with 95% confidence \(.*\)\.\n", out), out
    if name == "own_objective":  # the best fair trial's accuracy and parameters
        value, params = out.split(" ", 1)
        assert 0.5 < float(value) <= 1.0 and "max_depth" in params
    if name == "searchcv":  # the best parameters and the best trial's gap, under the limit
        params, gap = out.rsplit(" ", 1)
        assert params.startswith("{'logisticregression__C': ") and float(gap) <= 0.05
    if name == "own_frame":  # the best parameters, three predictions
        assert out.startswith("{'logisticregression__C': ") and re.search(r"\[[01] [01] [01]\]", out)
    if name == "own_pipeline":  # the best fair trial's accuracy, three predictions
        score, predictions = out.split(" ", 1)
        assert 0.5 < float(score) <= 1.0 and re.fullmatch(r"\[[01] [01] [01]\]\n", predictions)
    if name == "tenants":  # every tenant's cumulative utility; only beta ran
        assert re.search(r"'alpha': 0(\.0)?, 'beta': -[0-9.e-]+, 'gamma': 0(\.0)?", out)
    if name == "mtkb":  # Pareto-optimal trials and a 2 x 2 task correlation
        n_best, correlation = out.split(" ", 1)
        assert int(n_best) >= 1 and correlation.startswith("[[1.0, ")
    if name == "femnist":  # the CNN tenants: best accuracy, 3 parameters
        value, params = out.split(" ", 1)
        assert 0.0 <= float(value) <= 1.0
        assert all(p in params for p in ("'learning_rate'", "'lr_decay'", "'l2'"))
    if name == "cgp":  # three agents' best values, the board's last post
        best, post = out.splitlines()
        assert all(-0.5 < float(v) <= 0.0 for v in best.strip("[]").split(","))
        assert post.startswith("Post(agent='lab-c', round=9, design={'x': ")
    if name == "metrics":  # 2/3 - 1/3, then the larger of the TPR and FPR gaps
        dsp, eod = map(float, out.split())
        assert dsp == pytest.approx(1 / 3) and 0.0 <= eod <= 1.0
    if name == "ratio":  # no one selected: 1, not settled; everyone: bounded near 1
        assert out.splitlines() == ["0 1.0 (0.0, 1.0) 0.0", "1 1.0 (1.0, 1.0) 0.994"], out
    if name == "interval":  # a gap, then an interval about 0.11 either side of it, from 0
        gap, interval = out.split("\n", 1)
        low, high = map(float, interval.strip().strip("()").split(","))
        assert low == 0.0 and high - float(gap) == pytest.approx(0.11, abs=0.02)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_page_links_point_to_existing_files_and_headings(page: Path) -> None:
    check_links(page)


def test_every_page_is_in_a_table_of_contents() -> None:
    listed = set()
    for index in [DOCS / "index.md", *DOCS.glob("*/index.md")]:
        for block in re.findall(r"^```\{toctree\}\n(.*?)^```", index.read_text(), re.S | re.M):
            for entry in block.splitlines():
                if entry.strip() and not entry.startswith(":"):
                    listed.add((index.parent / entry.strip()).relative_to(DOCS).as_posix())
    pages = {p.relative_to(DOCS).with_suffix("").as_posix() for p in PAGES} - {"index"}
    assert pages <= listed, pages - listed


def _docs_extension() -> Any:
    """docs/_ext/fairtune_docs.py, the site's Sphinx extension, as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fairtune_docs", DOCS / "_ext" / "fairtune_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_has_a_gallery_title_and_a_small_budget() -> None:
    # sphinx-gallery takes an example's title from the first lines of its docstring (underlined
    # with "=") and runs it with the arguments docs/_ext/fairtune_docs.py gives it.
    import ast

    GALLERY_ARGS = _docs_extension().GALLERY_ARGS
    for path in sorted((ROOT / "examples").glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
        title, underline = (doc.splitlines() + ["", ""])[:2]
        assert title.strip() and set(underline) == {"="} and len(underline) >= len(title), path
        assert path.name in GALLERY_ARGS, f"{path.name}: add its small budget to GALLERY_ARGS"


def test_every_gallery_page_says_it_ran_a_smaller_budget_than_its_run_block() -> None:

    module = _docs_extension()
    page = "Tune a pipeline\n===============\n\nRun::\n\n    python examples/searchcv.py\n"
    noted = module.gallery_budget_note("auto_examples/searchcv", page)
    title, rest = noted.split("===============\n", 1)
    assert title == "Tune a pipeline\n"
    assert rest.startswith("\n.. note::\n\n   The output and figures on this page come from a "
                           "smaller budget than the script's defaults: ``python "
                           "examples/searchcv.py --n-trials 8 --n-rows 3000``")
    assert rest.endswith("Run::\n\n    python examples/searchcv.py\n")
    # Other pages are left as they are.
    assert module.gallery_budget_note("user_guide/cli", page) == page
    assert module.gallery_budget_note("auto_examples/index", page) == page


# -- the API reference ------------------------------------------------------------------------

PACKAGES = {
    "fairtune": "fairtune.rst",
    "fairtune.samplers": "samplers.rst",
    "fairtune.fairness": "fairness.rst",
    "fairtune.datasets": "datasets.rst",
    "fairtune.tuning": "tuning.rst",
    "fairtune.tenancy": "tenancy.rst",
    "fairtune.collaboration": "collaboration.rst",
    "fairtune.visualization": "visualization.rst",
    "fairtune.report": "report.rst",
}
_PUBLIC = [(package, name) for package in PACKAGES
           for name in importlib.import_module(package).__all__]


def _attribute_docs(package: str, name: str) -> list[str] | None:
    return _docs_extension().attribute_docs(package, name)  # the helper the site's build uses


@pytest.mark.parametrize(("package", "name"), _PUBLIC, ids=[f"{p}.{n}" for p, n in _PUBLIC])
def test_public_name_has_a_docstring(package: str, name: str) -> None:
    obj = getattr(importlib.import_module(package), name)
    if inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isroutine(obj):
        assert (inspect.getdoc(obj) or "").strip(), f"{package}.{name} has no docstring"
    else:  # a constant: a ``#:`` comment or a docstring after it, where it is defined
        assert _attribute_docs(package, name), f"{package}.{name} has no doc comment"


@pytest.mark.parametrize(("package", "name"), _PUBLIC, ids=[f"{p}.{n}" for p, n in _PUBLIC])
def test_public_name_is_in_the_api_reference(package: str, name: str) -> None:
    text = (DOCS / "api" / PACKAGES[package]).read_text()
    autosummary = "\n".join(re.findall(r"^\.\. autosummary::\n(?:   .*\n|\n)*", text, re.M))
    entries = {line.strip() for line in autosummary.splitlines()
               if line.startswith("   ") and not line.strip().startswith(":")}
    # fairtune's top level re-exports the samplers and subpackages, documented where they live.
    listed = entries | set(re.findall(r"``fairtune\.(\w+)``", text))
    assert name in listed, f"{package}.{name} is missing from docs/api/{PACKAGES[package]}"


def test_the_api_reference_lists_every_package() -> None:
    index = (DOCS / "api" / "index.rst").read_text()
    assert all(page.removesuffix(".rst") in index for page in PACKAGES.values())


# -- the fairness metrics table ---------------------------------------------------------------

def test_the_metrics_table_is_the_registry() -> None:
    from fairtune.fairness import METRICS

    text = (DOCS / "user_guide" / "fairness_metrics.md").read_text()
    rows = {}
    for row in text.splitlines():
        if row.startswith("| `"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]  # not at \|
            rows[cells[0].strip("`")] = cells
    assert set(rows) == set(METRICS)
    for name, spec in METRICS.items():
        cells = rows[name]
        assert cells[1] == ", ".join(f"`{alias}`" for alias in spec.aliases), name
        assert cells[2] == f"`{spec.function.__name__}`", name
        assert cells[4].startswith("[0, 1]"), name
        assert cells[5].startswith("lower bound" if spec.sense == "lower" else "upper bound")


# -- docstring examples -----------------------------------------------------------------------

def test_docstring_examples_run_as_doctests() -> None:
    # The suite's settings run every docstring example of the package (pytest --doctest-modules
    # over fairtune/); this test fails if those settings stop doing so, or the examples vanish.
    import fairtune

    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    addopts = re.search(r'^addopts = "(.*)"$', pyproject, re.M)
    testpaths = re.search(r"^testpaths = \[(.*)\]$", pyproject, re.M)
    assert addopts and "--doctest-modules" in addopts.group(1).split()
    assert testpaths and '"fairtune"' in testpaths.group(1)
    finder, n_examples = doctest.DocTestFinder(), 0
    for module in pkgutil.walk_packages(fairtune.__path__, "fairtune."):
        mod = importlib.import_module(module.name)
        n_examples += sum(len(test.examples) for test in finder.find(mod, module.name))
    assert n_examples >= 20
