"""fairtune._interrupts.optimize_guarded, the trial loop of ``fairtune tune``: enqueued trials
run one at a time before the threads start (Optuna's SQLite storage can hand one enqueued trial
to two threads, and the second one's ``tell`` then fails the whole run)."""

from __future__ import annotations

import collections
import threading
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from fairtune._interrupts import optimize_guarded


def _counting_objective():
    runs: collections.Counter[int] = collections.Counter()
    threads: dict[int, str] = {}
    lock = threading.Lock()

    def objective(trial: optuna.Trial) -> float:
        with lock:
            runs[trial.number] += 1
            threads[trial.number] = threading.current_thread().name
        return trial.suggest_float("x", 0.0, 1.0)

    return objective, runs, threads


def test_enqueued_trials_run_once_each_before_the_threads(tmp_path: Path) -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    for attempt in range(5):  # the race it avoids showed up in about one run of ten
        url = f"sqlite:///{tmp_path / f's{attempt}.db'}"
        study = optuna.create_study(storage=url, direction="maximize")
        study.enqueue_trial({"x": 0.25})
        study.enqueue_trial({"x": 0.5})
        objective, runs, threads = _counting_objective()
        guard, run = optimize_guarded(study, objective, n_trials=6, n_jobs=2)
        assert not guard.interrupted
        assert [t.state for t in run] == [TrialState.COMPLETE] * 6
        assert set(runs.values()) == {1}, runs  # no trial evaluated twice
        main = threading.main_thread().name
        assert threads[0] == threads[1] == main  # the enqueued ones, one at a time
        assert [t.params["x"] for t in run[:2]] == [0.25, 0.5]
        assert any(threads[n] != main for n in range(2, 6))  # the rest in Optuna's threads


def test_fewer_trials_than_enqueued_run_only_those(tmp_path: Path) -> None:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}")
    for x in (0.1, 0.2, 0.3):
        study.enqueue_trial({"x": x})
    objective, runs, _ = _counting_objective()
    guard, run = optimize_guarded(study, objective, n_trials=2, n_jobs=2)
    assert [t.params["x"] for t in run] == [0.1, 0.2]
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 1


def test_one_job_is_one_optimize_call(tmp_path: Path) -> None:
    study = optuna.create_study()
    study.enqueue_trial({"x": 0.5})
    objective, runs, threads = _counting_objective()
    guard, run = optimize_guarded(study, objective, n_trials=3, n_jobs=1)
    assert len(run) == 3 and sum(runs.values()) == 3
    assert set(threads.values()) == {threading.main_thread().name}


def test_ctrl_c_in_the_safety_test_says_no_model_is_certified_and_how_to_resume(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from fairtune.cli import main
    from fairtune.report import report
    from fairtune.tuning import FairObjective

    def interrupted(self, study):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt  # Ctrl-C while the safety test bounds the candidates

    monkeypatch.setattr(FairObjective, "_certified", interrupted)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    code = main(["tune", "--dataset", "compas", "--model", "linear", "--limit",
                 "demographic_parity<=0.2", "--confidence", "0.9", "--n-trials", "2",
                 "--no-progress", "--storage", url, "--study-name", "c"])
    assert code == 130
    err = [line for line in capsys.readouterr().err.splitlines()
           if not line.startswith("fairtune: warning:")]
    assert len(err) == 1, err
    assert err[0].startswith("fairtune: interrupted after the search (2 trials of this run, "
                             "stored), during the safety test, so no model is certified; ")
    assert err[0].endswith(f"to resume, run the same command again (the study is stored in "
                           f"{url}).")
    study = optuna.load_study(study_name="c", storage=url)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 2
    assert "No model is certified yet" in report(study).text()


_STORAGE_CALL = """
import os, signal, time
def write(done):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while a database call runs
    time.sleep(0.3)
    done.append(True)
"""


def test_ctrl_c_inside_a_storage_call_waits_until_the_call_returns(tmp_path: Path) -> None:
    # A KeyboardInterrupt raised mid-commit can leave the connection holding the SQLite lock
    # (the heartbeat and the trial's FAIL then time out): the call finishes, then it raises.
    namespace: dict[str, object] = {"__name__": "optuna.storages._fake"}
    exec(compile(_STORAGE_CALL, "optuna/storages/_fake.py", "exec"), namespace)
    done: list[bool] = []
    after: list[bool] = []

    def objective(trial: optuna.Trial) -> float:
        namespace["write"](done)  # type: ignore[operator]
        for _ in range(500):
            time.sleep(0.01)
        after.append(True)
        return 0.0

    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}")
    guard, run = optimize_guarded(study, objective, n_trials=3)
    assert guard.interrupted and done == [True] and not after
    assert [t.state for t in run] == [TrialState.FAIL]
