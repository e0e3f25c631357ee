"""Sphinx helpers of fairtune's documentation (loaded by docs/conf.py as an extension).

- ``gallery_args``: the command-line arguments with which sphinx-gallery runs each example (a
  smaller budget than the script's defaults, so that the gallery builds in a few minutes), and
  a note on each gallery page that says so (``gallery_budget_note``).
- Public constants are documented by a ``#:`` comment where they are defined, often in a
  submodule, while autodoc looks only in the module it is given (the package that re-exports
  them); ``autodoc-process-docstring`` fills their docstring from the defining module.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
from pathlib import Path

# Each example's budget in the gallery (its defaults are in its docstring).
GALLERY_ARGS = {
    "fairbo_quickstart.py": ["--n-trials", "12", "--n-rows", "3000"],
    "fair_mitigation.py": ["--n-trials", "10"],
    "mtkb_tradeoff.py": ["--n-trials", "12", "--n-rows", "3000"],
    "collaborative_tenants.py": ["--rounds", "4"],
    "femnist_tenants.py": ["--rounds", "3", "--epochs", "5"],
    "cgp_agents.py": ["--n-trials", "8", "--n-startup", "4", "--n-rows", "1000"],
    "searchcv.py": ["--n-trials", "8", "--n-rows", "3000"],
}


def gallery_args(gallery_conf: dict, script_vars: dict) -> list[str]:
    """sphinx-gallery's ``reset_argv``: the arguments of the example being run."""
    return list(GALLERY_ARGS.get(Path(script_vars["src_file"]).name, []))


def _module_attribute_docs(source: str) -> dict[str, list[str]]:
    """Module-level ``name = ...`` documented by ``#:`` lines above it or a string below it.

    The same two forms Sphinx reads; written here with ``ast`` so that the test suite, which
    does not install Sphinx, checks them the same way.
    """
    lines = source.splitlines()
    tree = ast.parse(source)
    docs: dict[str, list[str]] = {}
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign):
            target = node.target
        else:
            continue
        if not isinstance(target, ast.Name):
            continue
        comment = []
        row = node.lineno - 2
        while row >= 0 and lines[row].lstrip().startswith("#:"):
            comment.insert(0, lines[row].lstrip()[2:].strip())
            row -= 1
        after = tree.body[i + 1] if i + 1 < len(tree.body) else None
        if (isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            comment = inspect.cleandoc(after.value.value).splitlines()
        if comment:
            docs[target.id] = comment
    return docs


def attribute_docs(package: str, name: str) -> list[str] | None:
    """The ``#:`` comment (or attribute docstring) of ``name`` in ``package`` or a submodule."""
    module = importlib.import_module(package)
    names = [package]
    if hasattr(module, "__path__"):
        names += [m.name for m in pkgutil.walk_packages(module.__path__, package + ".")]
    for modname in names:
        spec = importlib.util.find_spec(modname)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        docs = _module_attribute_docs(Path(spec.origin).read_text())
        if name in docs:
            return docs[name] + [""]
    return None


def _document_reexported_constants(app, what, name, obj, options, lines) -> None:
    # Without a comment of its own, autodoc shows the docstring of the value's type (``dict``).
    if what not in ("data", "attribute"):
        return
    package, _, attr = name.rpartition(".")
    if package == "fairtune" or package.startswith("fairtune."):
        try:
            if importlib.util.find_spec(package) is None:
                return
        except ImportError:  # a class attribute: autodoc reads its own ``#:`` comment
            return
        docs = attribute_docs(package, attr)
        if docs:
            lines[:] = docs


def _skip_generated_members(app, what, name, obj, skip, options):
    # scikit-learn adds set_<method>_request to every estimator (metadata routing); they are
    # scikit-learn's API, documented there.
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def _keep_short_cells_on_one_line(app, doctree, docname) -> None:
    # Benchmark tables of short numbers read best one row per line (the table then scrolls
    # sideways, and only the header wraps); a table with sentences in its cells wraps them.
    from docutils import nodes

    for table in doctree.findall(nodes.table):
        body = [e for tbody in table.findall(nodes.tbody) for e in tbody.findall(nodes.entry)]
        longest = max((len(entry.astext()) for entry in body), default=0)
        if longest <= 60:
            table["classes"].append("nowrap")


def gallery_budget_note(docname: str, source: str) -> str:
    """``source`` of a gallery page with a note under its title saying which budget the page
    ran the example with, when that is smaller than the script's defaults (its "Run::" block
    shows the defaults)."""
    args = GALLERY_ARGS.get(f"{Path(docname).name}.py")
    if not docname.startswith("auto_examples/") or not args:
        return source
    lines = source.splitlines(keepends=True)
    for i in range(1, len(lines)):
        underline = lines[i].strip()
        if len(underline) >= 3 and set(underline) == {"="} and lines[i - 1].strip():
            note = (
                "\n.. note::\n\n   The output and figures on this page come from a smaller budget "
                f"than the script's defaults: ``python examples/{Path(docname).name}.py "
                f"{' '.join(args)}``, so that the site builds in minutes.\n\n"
            )
            return "".join(lines[: i + 1]) + note + "".join(lines[i + 1:])
    return source


def _note_gallery_budget(app, docname: str, source: list[str]) -> None:
    source[0] = gallery_budget_note(docname, source[0])


def setup(app):
    app.connect("source-read", _note_gallery_budget)
    app.connect("autodoc-process-docstring", _document_reexported_constants)
    app.connect("autodoc-skip-member", _skip_generated_members)
    app.connect("doctree-resolved", _keep_short_cells_on_one_line)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
