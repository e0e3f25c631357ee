"""The thread budget under which trials train their models.

A tuning run trains many small models, one after the other in each worker, and often several
workers share a machine (processes on one storage, ``n_jobs`` threads, other jobs). Thread pools
sized for the whole machine then fight: OpenMP threads of scikit-learn's histogram gradient
boosting or torch spin while waiting for cores another process holds. Four agent processes of
``examples/cgp_agents.py`` (gradient boosting, 8 trials each) took 61 s on a busy 2-core machine
with the libraries' default pools against 19 s with one thread each.

So fairtune trains models on :func:`training_threads` threads: one by default (like the GP
engine's numerics, see :mod:`fairtune._gp.threads`), which never oversubscribes and leaves the
parallelism to the workers; ``FAIRTUNE_TRAINING_THREADS=n`` in the environment, or
:func:`set_training_threads`, gives each training ``n`` threads instead (for a single worker on
an idle machine with large models). :func:`limit_training_threads` applies the budget to the
BLAS and OpenMP pools that ``threadpoolctl`` finds and to torch (when it is loaded), and
restores them afterwards. XGBoost models of :mod:`fairtune.tuning.spaces` run on ``n_jobs=1``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["ENV_VAR", "limit_training_threads", "set_training_threads", "training_threads"]

ENV_VAR = "FAIRTUNE_TRAINING_THREADS"
_user_threads: int | None = None


def _check(n: object, name: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"`{name}` must be a positive integer, but got {name}={n!r}.")
    return n


def set_training_threads(n: int | None) -> None:
    """Set the threads each model training may use in this process (None: the default, 1, or
    ``FAIRTUNE_TRAINING_THREADS``).

    Raises:
        ValueError: If ``n`` is not None or a positive integer.
    """
    global _user_threads
    _user_threads = None if n is None else _check(n, "n")


def training_threads() -> int:
    """The threads a model training may use: :func:`set_training_threads`, else the
    environment variable ``FAIRTUNE_TRAINING_THREADS``, else 1.

    Raises:
        ValueError: If the environment variable is not a positive integer.
    """
    if _user_threads is not None:
        return _user_threads
    text = os.environ.get(ENV_VAR)
    if text is None or not text.strip():
        return 1
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{ENV_VAR} must be a positive integer, but got {ENV_VAR}={text!r}.")
    return value


@contextlib.contextmanager
def limit_training_threads(n: int | None = None) -> Iterator[int]:
    """Run the enclosed model training on ``n`` threads (default :func:`training_threads`).

    Example:
        >>> from sklearn.linear_model import LogisticRegression
        >>> with limit_training_threads() as n:
        ...     model = LogisticRegression().fit([[0.0], [1.0]], [0, 1])
        >>> n
        1
    """
    from threadpoolctl import threadpool_limits

    n = training_threads() if n is None else _check(n, "n")
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
