"""Run a benchmark (``python -m benchmarks.<name>``) or a documented example in the test process.

Starting a fresh interpreter costs seconds of imports (torch, optuna, scikit-learn) per call;
the benchmark tests call their scripts dozens of times and the documentation tests run every
example, so they run them here instead, as their command line would: ``sys.argv`` set, the
working directory changed, standard output captured, and all of that restored afterwards. A documented example shows its
warnings as ``python -c`` does; a benchmark script runs under the suite's warning filters.
"""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import optuna


@contextlib.contextmanager
def _as_a_command(
    argv: list[str], cwd: Path, out: io.StringIO, err: io.StringIO, show_warnings: bool
) -> Iterator[None]:
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    saved_verbosity = optuna.logging.get_verbosity()
    sys.argv = argv
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                warnings.catch_warnings():
            if show_warnings:  # to standard error, once per place, as the interpreter shows them
                warnings.simplefilter("default")
                warnings.showwarning = (
                    lambda message, category, filename, lineno, file=None, line=None:
                    err.write(warnings.formatwarning(message, category, filename, lineno, line))
                )
            yield
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        optuna.logging.set_verbosity(saved_verbosity)


def _run(run: Callable[[], object], argv: list[str], cwd: Path, what: str,
         example: bool = False) -> str:
    """Run ``run`` as a command line; an ``example`` shows its warnings (``python -c``)."""
    out, err = io.StringIO(), io.StringIO()
    with _as_a_command(argv, cwd, out, err, show_warnings=example):
        try:
            run()
        except SystemExit as exit_:
            if exit_.code not in (None, 0):
                raise AssertionError(
                    f"{what} exited with {exit_.code}:\n{out.getvalue()}\n{err.getvalue()}"
                ) from None
    return out.getvalue()


def run_module(name: str, *args: str, cwd: Path) -> str:
    """Run ``python -m name args...`` in ``cwd`` in this process and return its standard output
    (the repository's root is importable in the tests, as ``python -m`` makes it from there).

    Raises:
        AssertionError: If the module exits with a non-zero status; the message carries its
            output and standard error.
    """
    def run() -> None:
        # A module a test imported runs afresh, as in a new interpreter (and without runpy's
        # warning about a module already imported).
        imported = sys.modules.pop(name, None)
        try:
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        finally:
            if imported is not None:
                sys.modules[name] = imported

    return _run(run, [name, *args], cwd, f"{name} {' '.join(args)}")


def module_command(name: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """``python -m name args...`` for a subprocess, and its environment: this one with the
    repository's root importable from any working directory."""
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get(
        "PYTHONPATH"))))}
    return [sys.executable, "-m", name, *args], env


def run_code(code: str, cwd: Path) -> str:
    """Run ``python -c code`` in ``cwd`` in this process and return its standard output.

    The code gets a namespace of its own, as a fresh interpreter's ``__main__``; an exception
    propagates with its traceback.
    """
    return _run(lambda: exec(compile(code, "<documented example>", "exec"),
                             {"__name__": "__main__", "__builtins__": __builtins__}),
                ["-c"], cwd, "the example", example=True)


def run_benchmark(tmp_path: Path, script: str, *args: str) -> str:
    """``python -m benchmarks.<script> args...`` (``script`` with or without ``.py``) in
    ``tmp_path``: its standard output."""
    return run_module(f"benchmarks.{Path(script).stem}", *args, cwd=tmp_path)


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file a benchmark wrote, as dicts."""
    import csv

    with open(path, newline="") as f:
        return list(csv.DictReader(f))
