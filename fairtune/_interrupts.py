"""Ctrl-C during a study, in one place: the study stays consistent and the run reports it.

``fairtune tune`` runs its trials through :func:`optimize_guarded`: a Ctrl-C stores the trials
this process left running as failed (never its peers' on the same storage), stops the study,
and lets the caller print one line instead of a traceback.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["InterruptGuard", "caused_by_interrupt", "check_run", "fail_running", "in_storage",
           "one_line", "optimize_guarded", "quiet_interrupt_echoes"]


def one_line(error: BaseException) -> str:
    """An error's message on one line (its type's name when it has none)."""
    return " ".join(str(error).split()) or type(error).__name__


class InterruptGuard:
    """Ctrl-C during ``study.optimize`` that always leaves the study consistent.

    Optuna 5.0.0 finishes a trial (``tell``) outside the objective; a KeyboardInterrupt there
    ends in "cannot access local variable 'updated_state'" and can leave the trial RUNNING.
    While this handler is installed, Ctrl-C raises KeyboardInterrupt only inside the objective
    (in the main thread), where Optuna stores the trial as FAIL and re-raises it. Anywhere
    else (asking the sampler, telling the storage, other threads' trials with ``n_jobs``) it is
    remembered: the next trial fails at once with it, and a callback stops the study.
    """

    def __init__(self, objective: Callable[[Any], Any]) -> None:
        self.objective = objective
        self.interrupted = False
        self.first_error: str | None = None
        # The trials this process ran: the only ones an interrupt may touch (other workers on
        # the same storage have RUNNING trials of their own).
        self.numbers: set[int] = set()
        self._inside = False
        self._lock = threading.Lock()

    def __call__(self, trial: Any) -> Any:
        from optuna import TrialPruned

        with self._lock:
            self.numbers.add(trial.number)
        main = threading.current_thread() is threading.main_thread()
        if self.interrupted:
            raise KeyboardInterrupt
        self._inside = main
        try:
            return self.objective(trial)
        except TrialPruned:
            raise
        except Exception as e:
            with self._lock:
                if self.first_error is None:
                    self.first_error = f"trial {trial.number} failed: {one_line(e)}"
            raise
        finally:
            if main:
                self._inside = False

    def handler(self, signum: int, frame: Any) -> None:
        self.interrupted = True
        if not self._inside:
            return
        if in_storage(frame):
            # Raised inside a database call, the interrupt could leave its connection in a
            # transaction that holds the file's lock: the heartbeat and the trial's FAIL would
            # then wait for it and fail. Signal again once the call has returned.
            threading.Timer(0.05, self._again).start()
            return
        self._inside = False
        raise KeyboardInterrupt

    def _again(self) -> None:
        if self._inside:
            os.kill(os.getpid(), signal.SIGINT)

    def callback(self, study: Any, trial: Any) -> None:
        if self.interrupted:
            study.stop()


_STORAGE_MODULES = ("sqlalchemy", "sqlite3", "psycopg", "optuna.storages", "grpc")


def in_storage(frame: Any) -> bool:
    """Whether ``frame`` or one of its callers runs code of a database or storage module."""
    while frame is not None:
        name = frame.f_globals.get("__name__") or ""
        if name.startswith(_STORAGE_MODULES):
            return True
        frame = frame.f_back
    return False


def caused_by_interrupt(error: BaseException | None) -> bool:
    """Whether ``error`` is, or was raised while handling, a KeyboardInterrupt."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


@contextlib.contextmanager
def quiet_interrupt_echoes() -> Iterator[None]:
    """Writes the ``sqlalchemy`` loggers' warnings to stderr, except those Ctrl-C caused.

    A KeyboardInterrupt while the objective reads the database makes SQLAlchemy log "Error
    closing cursor" with a traceback, although the study is intact.
    """
    logger = logging.getLogger("sqlalchemy")
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.addFilter(
        lambda record: not (record.exc_info and caused_by_interrupt(record.exc_info[1]))
    )
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def optimize_guarded(
    study: Any, objective: Any, *, n_trials: int | None, n_jobs: int = 1,
    show_progress_bar: bool = False, tenant: str | None = None,
    callbacks: Sequence[Any] = (),
) -> tuple[InterruptGuard, list[Any]]:
    """``study.optimize`` under :class:`InterruptGuard`: (the guard, the trials this process
    ran); every exception of a trial is caught (the trial fails), the first one kept; each of
    ``callbacks`` is called after every trial. With ``tenant``, the trials are that tenant's
    of a shared study (:func:`fairtune.tenancy.optimize`).

    With ``n_jobs`` above 1, the enqueued trials run first, one at a time: Optuna's SQLite
    storage can hand one enqueued trial to two threads at once (optuna/optuna#4002).
    """
    guard = InterruptGuard(objective)
    installed = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, guard.handler) if installed else None
    from optuna.trial import TrialState

    serial = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,))) if (
        n_jobs != 1) else 0
    if n_trials is not None:
        serial = min(serial, n_trials)
    try:
        with quiet_interrupt_echoes():
            for trials, jobs in ((serial, 1), (None if n_trials is None else n_trials - serial,
                                               n_jobs)):
                if trials == 0 or guard.interrupted:
                    continue
                kwargs: dict[str, Any] = {
                    "n_trials": trials, "n_jobs": jobs, "catch": (Exception,),
                    "callbacks": [guard.callback, *callbacks],
                    "show_progress_bar": show_progress_bar and jobs == n_jobs,
                }
                if tenant is None:
                    study.optimize(guard, **kwargs)
                else:
                    from fairtune.tenancy import optimize

                    optimize(study, tenant, guard, **kwargs)
    except KeyboardInterrupt:
        guard.interrupted = True
    finally:
        if installed:
            signal.signal(signal.SIGINT, previous)
    if guard.interrupted:
        fail_running(study, guard.numbers)
    run = [t for t in study.get_trials(deepcopy=False) if t.number in guard.numbers]
    return guard, run


def fail_running(study: Any, numbers: set[int]) -> None:
    """Store as FAIL the trials of this process (``numbers``) that an interrupt left RUNNING."""
    from optuna.trial import TrialState

    for trial in study.get_trials(deepcopy=False):
        if trial.number in numbers and trial.state == TrialState.RUNNING:
            try:
                study.tell(trial.number, state=TrialState.FAIL)
            except (RuntimeError, ValueError):  # finished meanwhile (another thread)
                pass


def check_run(guard: InterruptGuard, run: list[Any]) -> str | None:
    """Raise when every trial of this process's run failed; else a warning when some did."""
    from optuna.trial import TrialState

    completed = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in run)
    if run and completed == 0:
        raise RuntimeError(
            f"every trial of this run failed ({len(run)} of {len(run)}); the first: "
            f"{guard.first_error or 'no value returned'}"
        )
    failed = sum(t.state == TrialState.FAIL for t in run)
    return (f"{failed} of {len(run)} trials of this run failed; the first: {guard.first_error}"
            if failed else None)
