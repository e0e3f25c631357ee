"""Run a repository script (``benchmarks/*.py``) or a documented example in the test process.

Starting a fresh interpreter costs seconds of imports (torch, optuna, scikit-learn) per call;
the benchmark tests call their scripts dozens of times and the documentation tests run every
example, so they run them here instead, as their command line would: the script's folder on
``sys.path`` (as ``python script.py`` puts it), ``sys.argv`` set, the working directory changed,
standard output captured, and all of that restored afterwards. A documented example shows its
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
    saved_argv, saved_path, saved_cwd = sys.argv, list(sys.path), os.getcwd()
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
        sys.argv, sys.path[:] = saved_argv, saved_path
        os.chdir(saved_cwd)
        optuna.logging.set_verbosity(saved_verbosity)


def _run(run: Callable[[], object], argv: list[str], cwd: Path, what: str,
         script: Path | None = None) -> str:
    """Run ``run`` as a command line; ``script`` None is a documented example (``python -c``)."""
    out, err = io.StringIO(), io.StringIO()
    with _as_a_command(argv, cwd, out, err, show_warnings=script is None):
        if script is not None:
            sys.path.insert(0, str(script.parent))
        try:
            run()
        except SystemExit as exit_:
            if exit_.code not in (None, 0):
                raise AssertionError(
                    f"{what} exited with {exit_.code}:\n{out.getvalue()}\n{err.getvalue()}"
                ) from None
    return out.getvalue()


def run_script(script: Path, *args: str, cwd: Path) -> str:
    """Run ``python script args...`` in ``cwd`` in this process and return its standard output.

    Raises:
        AssertionError: If the script exits with a non-zero status; the message carries its
            output and standard error.
    """
    return _run(lambda: runpy.run_path(str(script), run_name="__main__"),
                [str(script), *args], cwd, f"{script.name} {' '.join(args)}", script)


def run_code(code: str, cwd: Path) -> str:
    """Run ``python -c code`` in ``cwd`` in this process and return its standard output.

    The code gets a namespace of its own, as a fresh interpreter's ``__main__``; an exception
    propagates with its traceback.
    """
    return _run(lambda: exec(compile(code, "<documented example>", "exec"),
                             {"__name__": "__main__", "__builtins__": __builtins__}),
                ["-c"], cwd, "the example")
