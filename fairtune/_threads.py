"""The thread budgets under which fairtune computes: one for the samplers' GP numerics, one
for the models that trials train. Both have the same shape: a default of one thread, an
environment variable, a setter that wins over it, and a context manager that applies the budget
to torch and to the BLAS and OpenMP pools that ``threadpoolctl`` finds, and restores them.

Why one thread by default. Hyperparameter tuning gives the GP engine small matrices: tens to
hundreds of trials, a few parameters, batches of a thousand candidate points. On such sizes a
thread pool costs more than it saves: its threads spin waiting for work that one core finishes
alone, and with several worker processes on one machine (the usual way to tune in parallel) the
pools of every process fight for the same cores. A tuning run also trains many small models,
one after the other in each worker; thread pools sized for the whole machine then fight in the
same way (OpenMP threads of scikit-learn's histogram gradient boosting or torch spin while
waiting for cores another process holds). Measurements: ``benchmarks/fairbo_speed.py`` and the
benchmark pages.

The numerics (:func:`limit_threads`, :func:`set_num_threads`, :func:`get_num_threads`,
``FAIRTUNE_NUM_THREADS``): studies of ``MANY_POINTS`` or more points, where a Cholesky
factorization of the t x t kernel matrix dominates and gains from threads, keep the
environment's default count. Several threads of a process may run samplers at once
(``study.optimize(n_jobs=k)``). Torch's thread count (OpenMP's and MKL's) belongs to the
calling thread, so every thread that enters sets its own and restores it when it leaves (to the
count seen by the first thread that entered: a thread that never ran torch before would read
the limited count). The BLAS pools of NumPy and SciPy are shared by the process: the first
thread that enters limits them and the last one that leaves restores them. Code that runs
meanwhile in other threads (the objective of another trial, with ``n_jobs > 1``) sees those BLAS
pools limited too while a suggestion is computed.

The training (:func:`limit_training_threads`, :func:`set_training_threads`,
:func:`get_training_threads`, ``FAIRTUNE_TRAINING_THREADS``): ``n`` threads for each training
instead of one suit a single worker on an idle machine with large models. XGBoost models of
:mod:`fairtune.tuning.spaces` run on ``n_jobs=1``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from functools import wraps
from typing import Any, TypeVar

__all__ = [
    "ENV_VAR", "MANY_POINTS", "TRAINING_ENV_VAR", "get_num_threads", "get_training_threads",
    "limit_threads", "limit_training_threads", "set_num_threads", "set_training_threads",
    "training_threads",
]

# From this many points (trials, or training points of a model) the automatic rule stops
# limiting threads.
MANY_POINTS = 2000
ENV_VAR = "FAIRTUNE_NUM_THREADS"

_user_threads: int | None = None
_lock = threading.Lock()
_local = threading.local()
# Shared by the threads inside a limit: how many there are, and the settings to restore.
_n_inside = 0
_saved_torch_threads = 1
_blas_limiter: Any = None
_controller: Any = None

_F = TypeVar("_F", bound=Callable[..., Any])


def set_num_threads(n: int | None) -> None:
    """Set the number of threads of fairtune's GP numerics in this process.

    Set a number for a very large study on a machine of its own; this wins over
    ``FAIRTUNE_NUM_THREADS`` (the module docstring gives the automatic rule, ``None``).

    Args:
        n: A positive number of threads, or None for the automatic rule.

    Example:
        >>> import fairtune
        >>> fairtune.set_num_threads(2)
        >>> fairtune.get_num_threads(100)
        2
        >>> fairtune.set_num_threads(None)
        >>> fairtune.get_num_threads(100)
        1
    """
    global _user_threads
    _user_threads = _check_threads(n, "n")


def _check_threads(n: Any, name: str) -> int | None:
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"`{name}` must be a positive integer or None, but got {name}={n!r}.")
    return n


def get_num_threads(n_points: int = 0) -> int | None:
    """The thread count for numerics on ``n_points`` points; None leaves the defaults alone."""
    if _user_threads is not None:
        return _user_threads
    env = _env_threads(ENV_VAR)
    return env if env is not None else 1 if n_points < MANY_POINTS else None


def _env_threads(name: str) -> int | None:
    """The count the environment variable ``name`` sets (None if it is unset or blank)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"The environment variable {name} must be a positive integer, but got "
                         f"{name}={text!r}.")
    return value


def _blas_controller() -> Any:
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


@contextlib.contextmanager
def limit_threads(n_points: int = 0) -> Iterator[None]:
    """Run the enclosed numerics under the thread limit for ``n_points`` points.

    Re-entrant, and safe when several threads enter at once (see the module docstring).
    """
    n = get_num_threads(n_points)
    depth = getattr(_local, "depth", 0)
    if n is None or depth:
        # No limit, or already inside one in this thread: the outermost call decides.
        _local.depth = depth + 1
        try:
            yield
        finally:
            _local.depth = depth
        return
    _enter(n)
    _local.depth = 1
    try:
        yield
    finally:
        _local.depth = 0
        _exit()


def _enter(n: int) -> None:
    global _n_inside, _saved_torch_threads, _blas_limiter
    import torch  # here, so that ``fairtune.set_num_threads`` does not import torch

    with _lock:
        if _n_inside == 0:
            _saved_torch_threads = torch.get_num_threads()
            try:
                _blas_limiter = _blas_controller().limit(limits=n, user_api="blas")
            except Exception:  # noqa: BLE001  # pragma: no cover - a BLAS threadpoolctl cannot set
                _blas_limiter = None
        _n_inside += 1
    torch.set_num_threads(n)


def _exit() -> None:
    global _n_inside, _blas_limiter
    import torch

    with _lock:
        _n_inside -= 1
        torch.set_num_threads(_saved_torch_threads)  # this thread's count
        if _n_inside == 0 and _blas_limiter is not None:
            _blas_limiter.restore_original_limits()
            _blas_limiter = None


def with_thread_limit(n_points: Callable[..., int]) -> Callable[[_F], _F]:
    """Decorate an engine entry point to run under :func:`limit_threads`; ``n_points`` maps the
    call's arguments to its number of points."""

    def decorate(func: _F) -> _F:
        @wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with limit_threads(n_points(*args, **kwargs)):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


# -- the training budget ------------------------------------------------------------------------

TRAINING_ENV_VAR = "FAIRTUNE_TRAINING_THREADS"
_user_training_threads: int | None = None


def set_training_threads(n: int | None) -> None:
    """Set the threads each model training may use in this process (None: the default, 1, or
    ``FAIRTUNE_TRAINING_THREADS``).

    Raises:
        ValueError: If ``n`` is not None or a positive integer.
    """
    global _user_training_threads
    _user_training_threads = _check_threads(n, "n")


def get_training_threads() -> int:
    """The threads a model training may use: :func:`set_training_threads`, else the
    environment variable ``FAIRTUNE_TRAINING_THREADS``, else 1.

    Raises:
        ValueError: If the environment variable is not a positive integer.
    """
    if _user_training_threads is not None:
        return _user_training_threads
    return _env_threads(TRAINING_ENV_VAR) or 1


training_threads = get_training_threads
"""The same as :func:`get_training_threads` (its earlier name)."""


@contextlib.contextmanager
def limit_training_threads(n: int | None = None) -> Iterator[int]:
    """Run the enclosed model training on ``n`` threads (default :func:`get_training_threads`).

    Example:
        >>> from sklearn.linear_model import LogisticRegression
        >>> with limit_training_threads() as n:
        ...     model = LogisticRegression().fit([[0.0], [1.0]], [0, 1])
        >>> n
        1
    """
    from threadpoolctl import threadpool_limits

    n = _check_threads(n, "n") or get_training_threads()
    torch = sys.modules.get("torch")
    previous = torch.get_num_threads() if torch is not None else None
    with threadpool_limits(limits=n):
        if torch is not None:
            torch.set_num_threads(n)
        try:
            yield n
        finally:
            if torch is not None and previous is not None:
                torch.set_num_threads(previous)
