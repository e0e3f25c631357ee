"""Optuna's own sampler tests, run against every fairtune sampler.

Optuna tests its samplers in ``tests/samplers_tests/test_samplers.py``, which is not part of the
installed package (only the contract classes of ``optuna.testing.pytest_samplers`` are). This
script takes that file from the source distribution of the *installed* Optuna version (cached
under ``benchmarks/results/tmp/``; fetched once with ``pip download optuna==<version> --no-deps
--no-binary :all:`` when missing), and runs it with pytest, unedited, with fairtune's samplers in
place of Optuna's: this module is also a pytest plugin (``-p optuna_sampler_suite``) that, when
pytest imports Optuna's test file, replaces the file's sampler lists (``sampler_class_with_seed``
and the parametrizations built from it, the expected-structure list of
``test_sampler_reseed_rng``, and the ``sampler`` fixtures of its contract test classes) with the
samplers of :data:`SAMPLERS`, and deselects the tests that do not take a sampler.

It prints one row per sampler: passed, failed and skipped tests, and the failed tests by name;
the per-test outcomes go to a CSV file.

Adding a sampler: a public sampler of ``fairtune.samplers`` without an entry in :data:`SAMPLERS`
is run with ``cls(seed=seed)`` and both the single-objective and the multi-objective contract
tests (its row says "(default constructor)"). Give it an entry to choose its arguments and
declare whether it supports multi-objective studies.

Usage (``--summarize`` prints the table, and ``--plot`` draws the tests per sampler and contract
class, from a stored CSV instead of running):
    OMP_NUM_THREADS=1 python -m benchmarks.optuna_sampler_suite
    python -m benchmarks.optuna_sampler_suite --summarize \\
        benchmarks/results/optuna_sampler_suite.csv.gz --plot docs/images/optuna_suite.png
    python -m benchmarks.optuna_sampler_suite --samplers CollaborativeUCBSampler \\
        -k test_reseed_rng_change_sampling
    python -m benchmarks.optuna_sampler_suite --fetch-only   # cache Optuna's tests and stop

Exit status: 0 when the run completed (whatever the tests' outcomes), 3 when Optuna's source
distribution is neither cached nor downloadable, 1 on other errors.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.samplers import BaseSampler

HERE = Path(__file__).resolve().parent
DEFAULT_CACHE = HERE / "results" / "tmp" / "optuna-sdist"
DEFAULT_OUT = HERE / "results" / "optuna_sampler_suite.csv.gz"
# The files of Optuna's source distribution that the run needs (the test file, the packages
# above it and the conftest that registers assertion rewriting for optuna.testing).
SUITE_FILES = (
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/samplers_tests/__init__.py",
    "tests/samplers_tests/test_samplers.py",
)
TEST_FILE = "tests/samplers_tests/test_samplers.py"
EXIT_NO_SDIST = 3
# Environment variables through which the script talks to the plugin in pytest's process (and
# in the processes that Optuna's test_reproducible_in_other_process spawns).
_ENV_SAMPLERS = "FAIRTUNE_SUITE_SAMPLERS"
_ENV_REPORT = "FAIRTUNE_SUITE_REPORT"
# The parametrized arguments of Optuna's test file that carry samplers.
_SEEDED_ARG = "sampler_class_with_seed"
_NAME_ARG = "sampler_name"
_RESEED_ARGS = "sampler_class_reseed_rng,expected_has_rng,expected_has_another_sampler"


@dataclass(frozen=True)
class SamplerSpec:
    """How to build a sampler for the suite.

    Attributes:
        make: ``seed -> sampler`` (Optuna's seeded tests pass a seed; the contract tests None).
        multi_objective: Whether the sampler supports multi-objective studies: True runs the
            multi-objective contract tests, False the single-objective-only ones (which check
            that a multi-objective study is refused), None both.
        has_optuna_rng: Whether the sampler holds an ``optuna.samplers._lazy_random_state.
            LazyRandomState`` (``test_sampler_reseed_rng`` checks this structure; fairtune's
            samplers have their own lazy random state).
        has_inner_sampler: Whether it holds another sampler (its independent sampler), whose
            ``reseed_rng`` must be called once by its own.
        default: True when the spec was made up for a sampler missing from :data:`SAMPLERS`.
    """

    make: Callable[[int | None], BaseSampler]
    multi_objective: bool | None = False
    has_optuna_rng: bool = False
    has_inner_sampler: bool = True
    default: bool = False


def _fairbo(**kwargs: Any) -> Callable[[int | None], BaseSampler]:
    def make(seed: int | None) -> BaseSampler:
        from fairtune.samplers import FairBOSampler

        # As Optuna's suite runs GPSampler: no random startup, so the model samples from the
        # second trial on.
        return FairBOSampler(n_startup_trials=0, seed=seed, **kwargs)

    return make


def _collaborative(seed: int | None) -> BaseSampler:
    from fairtune.samplers import CollaborativeUCBSampler

    return CollaborativeUCBSampler(tenants=2, n_startup_rounds=0, seed=seed)


def _mtkb(**kwargs: Any) -> Callable[[int | None], BaseSampler]:
    def make(seed: int | None) -> BaseSampler:
        from fairtune.samplers import MTKBSampler

        return MTKBSampler(n_startup_trials=0, seed=seed, **kwargs)

    return make


def _cgp(acquisition: str) -> Callable[[int | None], BaseSampler]:
    def make(seed: int | None) -> BaseSampler:
        from fairtune.samplers import CGPSampler

        # Alone (board=None): the paper's non-collaborative agent; the board's own tests are
        # in tests/test_collaboration.py.
        return CGPSampler(board=None, acquisition=acquisition, n_startup_trials=0,
                          seed=seed)  # type: ignore[arg-type]

    return make


# The samplers the suite runs (label -> spec). New samplers: add an entry here (see the module
# docstring for what happens to a public sampler without one).
SAMPLERS: dict[str, SamplerSpec] = {
    "FairBOSampler": SamplerSpec(_fairbo()),
    "FairBOSampler(acquisition='cmes')": SamplerSpec(_fairbo(acquisition="cmes")),
    "FairBOSampler(deterministic_objective=True)": SamplerSpec(
        _fairbo(deterministic_objective=True)
    ),
    "CollaborativeUCBSampler": SamplerSpec(_collaborative),
    "MTKBSampler": SamplerSpec(_mtkb(), multi_objective=True),
    "MTKBSampler(budgeted=True)": SamplerSpec(_mtkb(budgeted=True), multi_objective=True),
    "CGPSampler(acquisition='ucb', board=None)": SamplerSpec(_cgp("ucb")),
    "CGPSampler(acquisition='ei', board=None)": SamplerSpec(_cgp("ei")),
    "CGPSampler(acquisition='ts', board=None)": SamplerSpec(_cgp("ts")),
}


def _make_default(name: str, seed: int | None) -> BaseSampler:
    import fairtune.samplers

    return getattr(fairtune.samplers, name)(seed=seed)


def all_samplers() -> dict[str, SamplerSpec]:
    """:data:`SAMPLERS`, plus a default spec for each public sampler of ``fairtune.samplers``
    that no entry covers."""
    import fairtune.samplers

    specs = dict(SAMPLERS)
    # An entry covers the class it is named after, with or without arguments in its label.
    covered = {label.split("(")[0] for label in SAMPLERS}
    for name in fairtune.samplers.__all__:
        if name.endswith("Sampler") and name not in covered:
            specs[f"{name} (default constructor)"] = SamplerSpec(
                functools.partial(_make_default, name), multi_objective=None, default=True
            )
    return specs


def _selected() -> dict[str, SamplerSpec]:
    specs = all_samplers()
    names = json.loads(os.environ.get(_ENV_SAMPLERS, "null"))
    return specs if names is None else {name: specs[name] for name in names}


# -- fetching Optuna's test file -------------------------------------------------------------------


class SdistUnavailable(RuntimeError):
    """Optuna's source distribution is neither cached nor downloadable."""


def fetch_suite(cache: Path, version: str = optuna.__version__) -> Path:
    """Return the directory holding Optuna ``version``'s tests (``tests/...``), extracting it
    from the cached source distribution, downloaded first with pip if it is missing."""
    root = cache / f"optuna-{version}"
    if all((root / name).is_file() for name in SUITE_FILES):
        return root
    cache.mkdir(parents=True, exist_ok=True)
    archive = cache / f"optuna-{version}.tar.gz"
    if not archive.is_file():
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", f"optuna=={version}", "--no-deps",
                   "--no-binary", ":all:", "--disable-pip-version-check", "-q", "-d", tmp]
            result = subprocess.run(cmd, capture_output=True, text=True)
            found = list(Path(tmp).glob("optuna-*.tar.gz"))
            if result.returncode != 0 or len(found) != 1:
                raise SdistUnavailable(
                    f"could not download Optuna {version}'s source distribution with "
                    f"`{' '.join(cmd[2:])}` (exit {result.returncode}): "
                    f"{result.stderr.strip()[-500:]}"
                )
            found[0].replace(archive)  # atomic: a cached archive is always complete
    # Only the test files are written (never the sdist's optuna/ package, which would shadow
    # the installed one), each from its archive member, so no path can leave ``root``.
    with tarfile.open(archive) as tar:
        for name in SUITE_FILES:
            member = tar.extractfile(f"optuna-{version}/{name}")
            if member is None:
                raise SdistUnavailable(f"{archive} has no {name}")
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".part")
            partial.write_bytes(member.read())
            partial.replace(target)
    return root


# -- the pytest plugin ---------------------------------------------------------------------------


class _Factory:
    """A spec's ``make``, labelled (so that a test item tells which sampler it runs); called
    with a seed, or without one for the tests that take no seed."""

    def __init__(self, label: str, make: Callable[[int | None], BaseSampler], seeded: bool):
        self.label, self._make, self._seeded = label, make, seeded

    def __call__(self, *args: Any) -> BaseSampler:
        return self._make(*args) if self._seeded else self._make(None)

    def __repr__(self) -> str:
        return self.label


def _sampler_fixture(params: list[Any]) -> Any:
    def sampler(self: Any, request: pytest.FixtureRequest) -> Any:
        return request.param

    return pytest.fixture(params=params)(sampler)


def patch_module(mod: Any) -> None:
    """Put the selected fairtune samplers in place of Optuna's in the test module ``mod``."""
    if getattr(mod, "_fairtune_patched", False):
        return
    from optuna.testing.pytest_samplers import (
        MultiObjectiveSamplerTestCase,
        SingleOnlySamplerTestCase,
    )

    specs = _selected()
    # Seeded tests: the dict by name (looked up in spawned processes too) and the parameter
    # lists built from it, which the parametrize marks hold by reference.
    mod.sampler_class_with_seed.clear()
    seeded_factories = {name: _Factory(name, spec.make, True) for name, spec in specs.items()}
    mod.sampler_class_with_seed.update(seeded_factories)
    seeded = [pytest.param(factory, id=name) for name, factory in seeded_factories.items()]
    names = [pytest.param(name, id=name) for name in specs]
    reseed = [
        pytest.param(
            _Factory(name, spec.make, False), spec.has_optuna_rng, spec.has_inner_sampler,
            id=name,
        )
        for name, spec in specs.items()
    ]
    replaced = set()
    for obj in list(vars(mod).values()):
        for mark in getattr(obj, "pytestmark", []):
            if mark.name != "parametrize" or not isinstance(mark.args[1], list):
                continue
            new = {_SEEDED_ARG: seeded, _NAME_ARG: names, _RESEED_ARGS: reseed}.get(mark.args[0])
            if new is not None:
                mark.args[1][:] = new
                replaced.add(mark.args[0])
    missing = {_SEEDED_ARG, _NAME_ARG, _RESEED_ARGS} - replaced
    if missing:
        raise RuntimeError(f"Optuna's test file has no parametrization of {sorted(missing)}")
    # Contract test classes: a subclass of each with the fairtune samplers as its fixture.
    for attr, cls in list(vars(mod).items()):
        if not (isinstance(cls, type) and attr.startswith("Test") and "sampler" in vars(cls)):
            continue
        if issubclass(cls, MultiObjectiveSamplerTestCase):
            chosen = {n: s for n, s in specs.items() if s.multi_objective is not False}
        elif issubclass(cls, SingleOnlySamplerTestCase):
            chosen = {n: s for n, s in specs.items() if s.multi_objective is not True}
        else:
            chosen = specs
        params = [pytest.param(_Factory(n, s.make, False), id=n) for n, s in chosen.items()]
        new_cls = type(attr, (cls,), {"sampler": _sampler_fixture(params)})
        new_cls.__module__ = mod.__name__
        setattr(mod, attr, new_cls)
    # test_reproducible_in_other_process runs ``run_optimize`` in fresh processes, which import
    # the test file anew: patch it there too before the original runs.
    mod._fairtune_run_optimize = mod.run_optimize
    mod.run_optimize = functools.partial(_run_optimize_patched, mod.__name__)
    mod._fairtune_patched = True


def _run_optimize_patched(module_name: str, *args: Any) -> None:
    mod = importlib.import_module(module_name)
    patch_module(mod)
    mod._fairtune_run_optimize(*args)


def _sampler_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    for value in callspec.params.values():
        if isinstance(value, _Factory):
            return value.label
        if isinstance(value, str) and value in _selected():  # test_reproducible_in_other_process
            return value
    return None


_sampler_by_nodeid: dict[str, str] = {}
_outcomes: dict[str, dict[str, str]] = {}


def pytest_collectstart(collector: pytest.Collector) -> None:
    if isinstance(collector, pytest.Module) and collector.path.name == Path(TEST_FILE).name:
        patch_module(collector.obj)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    for item in items:
        name = _sampler_of(item)
        if name is None:
            dropped.append(item)  # tests of Optuna's own samplers or helpers
        else:
            kept.append(item)
            _sampler_by_nodeid[item.nodeid] = name
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.nodeid not in _sampler_by_nodeid:
        return
    record = _outcomes.setdefault(
        report.nodeid,
        {"sampler": _sampler_by_nodeid[report.nodeid], "outcome": "passed", "message": ""},
    )
    if record["outcome"] == "failed":
        return
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash is not None else str(report.longrepr)
        record.update(outcome="failed", message=message.strip().splitlines()[0][:300])
    elif report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
        record.update(outcome="skipped", message=str(reason))


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get(_ENV_REPORT)
    if path:
        Path(path).write_text(json.dumps(_outcomes))


# -- the script ----------------------------------------------------------------------------------


def _test_name(nodeid: str) -> str:
    """``tests/.../test_samplers.py::TestBasicSampler::test_float[X-d0]`` -> the name without
    the file and the parameters: ``TestBasicSampler::test_float``."""
    return nodeid.split("::", 1)[1].split("[", 1)[0]


def run_suite(
    *, root: Path, samplers: list[str] | None, keyword: str | None, pytest_args: list[str]
) -> dict[str, dict[str, str]]:
    """Run Optuna's test file under root with the plugin; returns nodeid -> outcome record."""
    ini = root / "pytest.ini"
    # Optuna's own pytest settings (pyproject.toml of its repository), minus colour codes.
    ini.write_text(
        "[pytest]\n"
        "filterwarnings = ignore::optuna.exceptions.ExperimentalWarning\n"
        "markers =\n    slow: marks tests as slow\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        env = {**os.environ, _ENV_REPORT: str(report), _ENV_SAMPLERS: json.dumps(samplers)}
        env["PYTHONPATH"] = os.pathsep.join(
            [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        cmd = [sys.executable, "-m", "pytest", TEST_FILE, "-c", str(ini), "--rootdir", str(root),
               "-p", "optuna_sampler_suite", "-p", "no:cacheprovider", "-q", "-rN",
               "--tb=line", *(["-k", keyword] if keyword else []), *pytest_args]
        result = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        # pytest's exit codes 0 (all passed), 1 (some failed) and 5 (nothing selected) are
        # outcomes; anything else (an error in collection, a bad option) is the run failing.
        if result.returncode not in (0, 1, 5) or not report.is_file():
            raise RuntimeError(
                f"pytest failed to run (exit {result.returncode}):\n{result.stdout[-3000:]}\n"
                f"{result.stderr[-3000:]}"
            )
        return json.loads(report.read_text())


def summarize(outcomes: dict[str, dict[str, str]], samplers: list[str]) -> str:
    lines = [
        "| sampler | passed | failed | skipped | failed tests |",
        "|---|---:|---:|---:|---|",
    ]
    for name in samplers:
        records = {k: v for k, v in outcomes.items() if v["sampler"] == name}
        counts = Counter(v["outcome"] for v in records.values())
        failed = Counter(_test_name(k) for k, v in records.items() if v["outcome"] == "failed")
        listed = ", ".join(
            f"`{test}`" + (f" (x{n})" if n > 1 else "") for test, n in sorted(failed.items())
        )
        lines.append(
            f"| {name} | {counts['passed']} | {counts['failed']} | {counts['skipped']} | "
            f"{listed or '-'} |"
        )
    return "\n".join(lines)


# The groups of Optuna's test file in the figure: its contract classes, then the module's tests.
GROUPS = {
    "TestBasicSampler": "BasicSamplerTestCase",
    "TestRelativeSampler": "RelativeSamplerTestCase",
    "TestMultiObjectiveSampler": "MultiObjectiveSamplerTestCase",
    "TestSingleOnlySampler": "SingleOnlySamplerTestCase",
}


def read_outcomes(path: Path | str) -> dict[str, dict[str, str]]:
    """The outcomes of a stored run (the CSV that a run writes), keyed as :func:`run_suite`'s."""
    from benchmarks._common import read_rows

    return {f"{TEST_FILE}::{r['test']}": {"sampler": r["sampler"], "outcome": r["outcome"],
                                         "message": r["message"]} for r in read_rows(path)}


def plot(outcomes: dict[str, dict[str, str]], samplers: list[str], path: Path | str) -> None:
    """Per sampler, its tests by contract class of Optuna's file as stacked bars (a failed
    test hatched)."""
    from benchmarks._common import figure, save_figure

    groups = [*GROUPS.values(), "the file's other tests"]
    colors = ["tab:blue", "tab:cyan", "tab:purple", "tab:olive", "tab:gray"]
    fig, ax = figure(figsize=(8.5, 0.45 * len(samplers) + 2.0))
    seen: set[str] = set()  # each group in the legend once
    for row, name in enumerate(reversed(samplers)):
        records = [(k.split("::")[1].split("[")[0], v["outcome"]) for k, v in outcomes.items()
                   if v["sampler"] == name]
        left = 0
        for group, color in zip(groups, colors):
            tests = [o for c, o in records if GROUPS.get(c, groups[-1]) == group]
            failed = sum(o == "failed" for o in tests)
            for n, hatch in ((len(tests) - failed, None), (failed, "xx")):
                if n:
                    label = "failed" if hatch else group
                    ax.barh(row, n, left=left, color=color, hatch=hatch,
                            edgecolor="tab:red" if hatch else "white",
                            label=None if label in seen else label)
                    seen.add(label)
                    left += n
        ax.text(left + 2, row, f"{sum(o == 'passed' for _, o in records)} of {len(records)} "
                "passed", va="center", fontsize=8)
    ax.set_yticks(range(len(samplers)), list(reversed(samplers)), fontsize=8)
    ax.set_xlabel("tests of Optuna's tests/samplers_tests/test_samplers.py")
    ax.set_xlim(0, 175)
    ax.legend(loc="upper center", bbox_to_anchor=(0.4, -0.14), ncol=3, fontsize=7)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samplers", nargs="+", metavar="LABEL",
                        help="labels of the samplers to run (default: all)")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression selecting tests")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help="where Optuna's source distribution is cached")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="CSV of test outcomes")
    parser.add_argument("--fetch-only", action="store_true",
                        help="fetch and cache Optuna's test file, then stop")
    parser.add_argument("--summarize", type=Path, metavar="CSV",
                        help="print the table of a stored run instead of running")
    parser.add_argument("--plot", type=Path, metavar="PNG",
                        help="draw the tests per sampler and contract class")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.summarize:
        outcomes = read_outcomes(args.summarize)
        present = dict.fromkeys(v["sampler"] for v in outcomes.values())
        ordered = [s for s in all_samplers() if s in present]  # the order of a run
        samplers = args.samplers or ordered + [s for s in present if s not in ordered]
        print(summarize(outcomes, samplers))
        if args.plot:
            plot(outcomes, samplers, args.plot)
        return 0

    specs = all_samplers()
    samplers = args.samplers or list(specs)
    unknown = [s for s in samplers if s not in specs]
    if unknown:
        parser.error(f"`--samplers` must be among {list(specs)}, but got {unknown}")
    try:
        root = fetch_suite(args.cache)
    except SdistUnavailable as error:
        print(f"optuna_sampler_suite: {error}", file=sys.stderr)
        return EXIT_NO_SDIST
    print(f"Optuna {optuna.__version__}: {root / TEST_FILE}")
    if args.fetch_only:
        return 0
    start = time.perf_counter()
    outcomes = run_suite(root=root, samplers=samplers, keyword=args.keyword,
                         pytest_args=args.pytest_args)
    print(f"{len(outcomes)} tests in {time.perf_counter() - start:.0f} s")
    from benchmarks._common import append_rows

    args.out.unlink(missing_ok=True)  # each run writes the file anew
    append_rows(args.out, [{"sampler": record["sampler"], "test": nodeid.split("::", 1)[1],
                            "outcome": record["outcome"], "message": record["message"]}
                           for nodeid, record in sorted(outcomes.items())])
    print(summarize(outcomes, samplers))
    if args.plot:
        plot(outcomes, samplers, args.plot)
    failures = {k: v for k, v in outcomes.items() if v["outcome"] == "failed"}
    for nodeid, record in sorted(failures.items()):
        print(f"FAILED {nodeid.split('::', 1)[1]}: {record['message']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
