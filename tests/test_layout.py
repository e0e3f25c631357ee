"""The package layout of shared/DESIGN.md section 1: imports point down, with no cycle, nothing
under ``fairtune/tuning/`` imports its two entrances but the entrances themselves, and every
``"fairtune:..."`` key is spelled in one bottom module, ``fairtune/_keys.py``.

The checks read the source with :mod:`ast` (nothing is imported), so that an import inside a
function or under ``if TYPE_CHECKING:`` counts as much as one at the top of a module: a lazy
import that closes a cycle still makes the import order matter, and an annotation that names an
upper module's class still ties the lower layer to it (a helper typed by ``FairSearchCV`` is a
piece of that entrance).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fairtune"

# What fairtune.datasets may not import, directly or through another fairtune module.
_ABOVE_DATASETS = ("fairtune.report", "fairtune.tuning", "fairtune.visualization",
                   "fairtune.samplers", "fairtune.cli")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _target(module: str) -> str | None:
    """The module an import of ``module`` runs: itself, or None if it is not fairtune's."""
    return module if module in MODULES else None


def _imported(source: str, name: str, *, is_package: bool = False
              ) -> Iterator[tuple[str, str | None]]:
    """``(module, imported name)`` of every import in the code ``source`` of module ``name``,
    anywhere in it (in a function, under ``if TYPE_CHECKING:``), the module made absolute; the
    name is None for ``import module`` (``is_package``: ``source`` is the ``__init__.py`` of
    package ``name``)."""
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: "." is the package, each further dot one level up
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield from ((module, alias.name) for alias in node.names)


def imports(source: str, name: str, *, is_package: bool = False) -> set[str]:
    """The fairtune modules that the code ``source`` of module ``name`` imports, anywhere in it
    (``is_package``: ``source`` is the ``__init__.py`` of package ``name``)."""
    found: set[str] = set()
    for module, imported in _imported(source, name, is_package=is_package):
        # `from fairtune.x import y` runs fairtune.x.y when y is a module, else fairtune.x.
        target = (imported and _target(f"{module}.{imported}")) or _target(module)
        if target:
            found.add(target)
    found.discard(name)
    return found


# The two entrances of fairtune.tuning, as modules and as the classes they define.
_ENTRANCES = {"fairtune.tuning.objective": "FairObjective",
              "fairtune.tuning.search": "FairSearchCV"}


def entrance_imports(source: str, name: str, *, is_package: bool = False) -> list[str]:
    """The imports in ``source`` (module ``name``) of an entrance module or of its class, from
    anywhere (``from fairtune.tuning import FairSearchCV`` too), as ``module.name`` text."""
    found = []
    for module, imported in _imported(source, name, is_package=is_package):
        full = f"{module}.{imported}" if imported else module
        if (full in _ENTRANCES or module in _ENTRANCES
                or (imported in _ENTRANCES.values() and module.startswith("fairtune"))):
            found.append(full)
    return found


GRAPH: dict[str, set[str]] = {
    name: imports(path.read_text(), name, is_package=path.name == "__init__.py")
    for name, path in MODULES.items()
}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) through each strongly connected component of more than one
    module (Tarjan's algorithm, then a path back to the component's first module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)

    cycles = []
    for component in components:
        inside = set(component)
        start = component[0]
        # Breadth-first from start's successors back to start, inside the component.
        parents: dict[str, str] = dict.fromkeys(sorted(graph[start] & inside), start)
        queue = list(parents)
        while start not in parents:
            v = queue.pop(0)
            for w in sorted(graph[v] & inside):
                if w not in parents:
                    parents[w] = v
                    queue.append(w)
        path = [start]
        while (v := parents[path[-1]]) != start:
            path.append(v)
        cycles.append([start, *reversed(path)])
    return cycles


def _path(graph: dict[str, set[str]], source: str, goal: str) -> list[str] | None:
    parents: dict[str, str | None] = {source: None}
    queue = [source]
    while queue:
        v = queue.pop(0)
        if v == goal:
            path = [v]
            while (p := parents[path[-1]]) is not None:
                path.append(p)
            return path[::-1]
        for w in sorted(graph[v]):
            if w not in parents:
                parents[w] = v
                queue.append(w)
    return None


def test_the_graph_sees_every_kind_of_import() -> None:
    source = """
import numpy
import fairtune.tenancy
from fairtune import collaboration, __version__
from fairtune.fairness import is_fair
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from fairtune.report import Report
else:
    from fairtune._names import arg
def f():
    from fairtune.samplers._base import collect_trials
    from . import spaces
    from .._gp import gp
    from ..datasets import load_adult
"""
    assert imports(source, "fairtune.tuning.probe") == {
        "fairtune.tenancy", "fairtune.collaboration", "fairtune", "fairtune.fairness",
        "fairtune.report", "fairtune._names", "fairtune.samplers._base", "fairtune.tuning.spaces",
        "fairtune._gp.gp", "fairtune.datasets",
    }
    assert imports("from . import spaces\nfrom .. import _keys", "fairtune.tuning",
                   is_package=True) == {"fairtune.tuning.spaces", "fairtune._keys"}


def test_cycles_are_found_and_spelled_out() -> None:
    graph = {"p": {"p.a", "p.b"}, "p.a": {"q"}, "p.b": {"p"}, "q": set(), "r": {"r2"}, "r2": set()}
    assert _cycles(graph) == [["p", "p.b", "p"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_no_import_cycle() -> None:
    # Lazy imports and those under `if TYPE_CHECKING:` included (see the module docstring).
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_entrance_imports_are_found_however_spelled() -> None:
    source = """
from typing import TYPE_CHECKING
from fairtune.tuning import FairSearchCV, spaces
import fairtune.tuning.objective
from .search import FairSearchCV as Search
from . import objective
if TYPE_CHECKING:
    from fairtune.tuning.objective import FairObjective
def f():
    from fairtune import FairObjective
    from fairtune.tuning.search import ERROR_KEY
    from optuna import FairSearchCV
"""
    assert entrance_imports(source, "fairtune.tuning._probe") == [
        "fairtune.tuning.FairSearchCV", "fairtune.tuning.objective",
        "fairtune.tuning.search.FairSearchCV", "fairtune.tuning.objective",
        "fairtune.tuning.objective.FairObjective", "fairtune.FairObjective",
        "fairtune.tuning.search.ERROR_KEY",
    ]


def test_nothing_under_tuning_imports_its_entrances() -> None:
    # Shared modules take values and return values (DESIGN.md section 1): only the entrances
    # themselves, and the package that exports them, name FairObjective or FairSearchCV.
    allowed = {*_ENTRANCES, "fairtune.tuning"}
    found = [f"{name}: {text}" for name, path in MODULES.items()
             if name.startswith("fairtune.tuning.") and name not in allowed
             for text in entrance_imports(path.read_text(), name,
                                          is_package=path.name == "__init__.py")]
    assert not found, "modules under fairtune/tuning/ that import an entrance:\n" + "\n".join(
        found)


def entrance_parameters(source: str) -> list[str]:
    """``line: text`` of each function parameter in ``source`` named ``objective`` or
    ``search`` or annotated with an entrance class, and of each attribute read off a name
    ``objective`` or ``search``: a helper that takes an entrance instead of its values."""
    names, classes = {"objective", "search"}, set(_ENTRANCES.values())
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                annotation = ast.unparse(p.annotation) if p and p.annotation else ""
                if p and (p.arg in names or any(c in annotation for c in classes)):
                    found.append(f"{node.lineno}: parameter {p.arg}: {annotation or '-'}")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id in names):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_entrance_parameters_are_found() -> None:
    source = """
def f(objective, x: int): return objective.setup
def g(*, study, trial: "FairSearchCV | None" = None): pass
h = lambda search: 1
def k(model, o: FairObjective): return model.objective
"""
    assert sorted(line.split(":", 1)[0] for line in entrance_parameters(source)) == [
        "2", "2", "3", "4", "5"]


def test_nothing_under_tuning_takes_an_entrance() -> None:
    # Values, not entrances, flow down (DESIGN.md section 1): a function below the entrances
    # takes what it reads, never the FairObjective or FairSearchCV itself.
    found = [f"{name}:{line}" for name, path in MODULES.items()
             if name.startswith("fairtune.tuning.") and name not in _ENTRANCES
             for line in entrance_parameters(path.read_text())]
    assert not found, "functions under fairtune/tuning/ that take an entrance:\n" + "\n".join(
        found)


def test_datasets_import_nothing_from_the_layers_above() -> None:
    # Follow imports from fairtune.datasets through the modules below it until one crosses into
    # a layer above it; each crossing is reported once, with the way there.
    below = {name: {t for t in targets if not t.startswith(_ABOVE_DATASETS)}
             for name, targets in GRAPH.items() if not name.startswith(_ABOVE_DATASETS)}
    leaks = []
    for name in sorted(below):
        way = _path(below, "fairtune.datasets", name)
        for target in sorted(GRAPH[name]):
            if way and target.startswith(_ABOVE_DATASETS):
                leaks.append(" -> ".join([*way, target]))
    assert not leaks, "fairtune.datasets imports from above it:\n" + "\n".join(leaks)


def _doc_strings(tree: ast.AST) -> set[int]:
    """The ids of string statements: module/class/function docstrings and the attribute
    docstrings after an assignment (text for readers, never a value the code uses)."""
    return {
        id(node.value) for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def key_literals(path: Path) -> list[str]:
    """``line: text`` of every string in the code of ``path`` that starts with "fairtune:"."""
    source = path.read_text()
    tree = ast.parse(source, str(path))
    docs = _doc_strings(tree)
    in_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
                   for part in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            first = node.values[0] if node.values else None
            text = first.value if isinstance(first, ast.Constant) else None
        elif isinstance(node, ast.Constant) and id(node) not in docs | in_fstrings:
            text = node.value
        else:
            continue
        if isinstance(text, str) and text.startswith("fairtune:"):
            found.append(f"{node.lineno}: {ast.get_source_segment(source, node)}")
    return found


def test_key_literals_are_found_in_code_and_not_in_docstrings(tmp_path: Path) -> None:
    # A constant, an f-string; not the docstrings (module, function, attribute).
    source = (
        '"""fairtune: a module."""\n'
        'KEY = "fairtune:a"\n'
        '"""``"fairtune:a"``."""\n'
        'def f(name):\n'
        '    """fairtune:doc"""\n'
        '    return f"fairtune:{name}", "x:fairtune:"\n'
    )
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert [line.split(":", 1)[0] for line in key_literals(path)] == ["2", "6"]


def test_every_key_is_spelled_in_keys_only() -> None:
    keys = PACKAGE / "_keys.py"
    assert key_literals(keys), "fairtune/_keys.py defines no key"
    found = [f"fairtune/{path.relative_to(PACKAGE).as_posix()}:{line}"
             for path in MODULES.values() if path != keys for line in key_literals(path)]
    assert not found, (
        "spell these keys with the constants of fairtune/_keys.py:\n" + "\n".join(found)
    )


def test_keys_module_is_at_the_bottom() -> None:
    assert GRAPH["fairtune._keys"] == set()


# -- Optuna's private names: only in fairtune/_optuna_compat.py (DESIGN.md section 1) -------------

_COMPAT = PACKAGE / "_optuna_compat.py"


def _optuna_private_attributes() -> set[str]:
    """The private attributes (``_storage``, ``_study_id``, ``_trial_id``, ``_backend``,
    ``_suggest``, ``_contains``, ...) of Optuna's study, trial, storage and distribution
    objects, read off live ones: a study in an RDB storage (which Optuna wraps in a cache) and
    in memory, a trial, a frozen trial, a distribution of each kind."""
    import optuna
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    study = optuna.create_study(storage=optuna.storages.RDBStorage("sqlite://"))
    trial = study.ask()
    objects = [study, trial, study.trials[0], study._storage, study._storage._backend,
               optuna.storages.InMemoryStorage(), optuna.storages.BaseStorage,
               FloatDistribution(0.0, 1.0), IntDistribution(0, 1), CategoricalDistribution("a")]
    return {name for obj in objects for name in [*vars(obj), *dir(type(obj)), *dir(obj)]
            if name.startswith("_") and not name.startswith("__")}


def optuna_private_uses(source: str, private: set[str]) -> list[str]:
    """``line: text`` of each use of a name of ``private`` as an attribute of anything but
    ``self`` or ``cls`` (an object's own private attributes may share Optuna's names), also by
    ``getattr``, ``hasattr`` or ``setattr``, and of each import from a private Optuna module or
    of a private name of Optuna's (``optuna.storages._rdb``, ``from optuna import _gp``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            used = node.attr in private and not (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            used = node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) > 1 and (
                isinstance(node.args[1], ast.Constant) and node.args[1].value in private)
        elif isinstance(node, ast.Import):
            used = any(alias.name.split(".")[0] == "optuna" and "._" in alias.name
                       for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            used = module.split(".")[0] == "optuna" and ("._" in module or any(
                alias.name.startswith("_") for alias in node.names))
        else:
            continue
        if used:
            found.append(f"{node.lineno}: {ast.get_source_segment(source, node)}")
    return found


def test_optuna_private_uses_are_found() -> None:
    source = """
import optuna._gp.gp
from optuna.storages._rdb import models
from optuna import _experimental
from optuna.artifacts import upload_artifact
def f(study, trial, board):
    study.sampler.sample_relative
    board._storage
    self._storage, cls._trial_id
    getattr(study._storage, "_backend", None)
    study._storage.create_new_trial(study._study_id)
    return trial._trial_id, trial._cached_frozen_trial, getattr(trial, "number")
"""
    found = optuna_private_uses(source, {"_storage", "_study_id", "_trial_id", "_backend",
                                         "_cached_frozen_trial"})
    assert sorted(int(line.split(":", 1)[0]) for line in found) == [
        2, 3, 4, 8, 10, 10, 11, 11, 12, 12]


def test_no_private_optuna_name_outside_the_compat_module() -> None:
    private = _optuna_private_attributes()
    assert {"_storage", "_study_id", "_trial_id", "_cached_frozen_trial", "_backend",
            "_suggest", "_contains"} <= private
    found = [f"fairtune/{path.relative_to(PACKAGE).as_posix()}:{line}"
             for path in MODULES.values() if path != _COMPAT
             for line in optuna_private_uses(path.read_text(), private)]
    assert not found, (
        "Optuna's private names outside fairtune/_optuna_compat.py (add a helper there):\n"
        + "\n".join(found))


def test_no_underscored_name_is_imported_from_another_folder() -> None:
    """A private name is its folder's: another folder imports what a module's ``__all__`` (or
    a public module) offers, never an underscored name (private modules, such as
    ``fairtune._keys``, are imported as modules)."""
    root = PACKAGE
    crossing = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.module
                    and node.module.startswith("fairtune")):
                continue
            target = root.parent.joinpath(*node.module.split("."))
            folder = target if target.is_dir() else target.parent
            for alias in node.names:
                private = alias.name.startswith("_") and not (folder / f"{alias.name}.py").exists()
                if private and folder.resolve() != path.parent.resolve():
                    crossing.append(f"{path.relative_to(root)}: {node.module}.{alias.name}")
    assert crossing == []


def test_no_function_is_longer_than_a_screen() -> None:
    """Every function and method of the package fits in 80 lines, its docstring included:
    a longer one is several steps that want names of their own."""
    long = [f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} "
            f"({node.end_lineno - node.lineno + 1} lines)"
            for path in PACKAGE.rglob("*.py")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (node.end_lineno or node.lineno) - node.lineno + 1 > 80]
    assert long == []
