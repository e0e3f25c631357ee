"""Run a repository script (``benchmarks/*.py``) in the test process, as its command line would.

Starting a fresh interpreter costs seconds of imports (torch, optuna, scikit-learn) per call;
the benchmark tests call their scripts dozens of times, so they run them here instead: the
script's folder on ``sys.path`` (as ``python script.py`` puts it), ``sys.argv`` set, the working
directory changed, standard output captured, and all of that restored afterwards.
"""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import sys
from pathlib import Path

import optuna


def run_script(script: Path, *args: str, cwd: Path) -> str:
    """Run ``python script args...`` in ``cwd`` in this process and return its standard output.

    Raises:
        AssertionError: If the script exits with a non-zero status; the message carries its
            output and standard error.
    """
    saved_argv, saved_path, saved_cwd = sys.argv, list(sys.path), os.getcwd()
    saved_verbosity = optuna.logging.get_verbosity()
    out, err = io.StringIO(), io.StringIO()
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.parent))
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(str(script), run_name="__main__")
            except SystemExit as exit_:
                if exit_.code not in (None, 0):
                    raise AssertionError(
                        f"{script.name} {' '.join(args)} exited with {exit_.code}:\n"
                        f"{out.getvalue()}\n{err.getvalue()}"
                    ) from None
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        os.chdir(saved_cwd)
        optuna.logging.set_verbosity(saved_verbosity)
    return out.getvalue()
