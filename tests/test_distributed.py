"""Optuna's distributed mode for real: worker processes on a PostgreSQL server (and SQLite).

Each test starts real processes that share one study through the storage, as workers on several
machines would; the PostgreSQL server is a throwaway one (see ``conftest.py``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from fairtune.samplers.collaborative import ROUND_KEY
from fairtune.tenancy import tenant_of
from fairtune.tuning import get_space

optuna.logging.set_verbosity(optuna.logging.WARNING)
pytestmark = pytest.mark.processes

_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}

FAIRBO_WORKER = textwrap.dedent(
    """
    import os, sys, time
    import optuna
    from fairtune._storage import open_storage
    from fairtune.samplers import FairBOSampler
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    url, total, victim_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    storage = open_storage(url, heartbeat_interval=1, grace_period=2, max_retry=1)
    sampler = FairBOSampler(seed=0, n_startup_trials=4)
    sampler._n_preliminary_samples = 64
    sampler._n_local_search = 1
    study = optuna.load_study(study_name="shared", storage=storage, sampler=sampler)

    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        y = trial.suggest_int("y", 0, 1000)
        if trial.number >= 5:
            try:  # the first worker here becomes the victim: it waits to be killed
                fd = os.open(victim_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, f"{os.getpid()} {trial.number}".encode())
                os.close(fd)
                time.sleep(600)
        time.sleep(0.3)
        trial.set_constraint("c", x - 0.8)
        return -((x - 0.6) ** 2) - ((y - 400) / 1000) ** 2

    study.optimize(objective, n_trials=10 * total, callbacks=[
        optuna.study.MaxTrialsCallback(total, states=(optuna.trial.TrialState.COMPLETE,))
    ])
    """
)


def _start(script: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(script), *args], env=_ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(procs: list[subprocess.Popen], timeout: float = 300) -> None:
    for p in procs:
        _, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err


def _points(trials: list[optuna.trial.FrozenTrial]) -> list[tuple]:
    return [tuple(sorted(t.params.items())) for t in trials]


def test_a_killed_fairbo_worker_s_trial_fails_and_is_retried(
    tmp_path: Path, postgres_url: str
) -> None:
    # On PostgreSQL; the killed tenant below is also run on SQLite.
    url = postgres_url
    optuna.create_study(study_name="shared", storage=url, direction="maximize")
    script = tmp_path / "worker.py"
    script.write_text(FAIRBO_WORKER)
    victim_file = tmp_path / "victim"
    # The dead trial is failed by the first trial a survivor starts 2 s (the grace period) after
    # the kill: with 0.3 s per trial, 30 trials keep two survivors busy for more than 3 s after
    # it, however fast the machine.
    total = 30
    procs = [_start(script, url, str(total), str(victim_file)) for _ in range(3)]
    deadline = time.time() + 120
    while not victim_file.exists() or not victim_file.read_text():
        assert time.time() < deadline, "no worker reached the victim's trial"
        time.sleep(0.05)
    pid, number = map(int, victim_file.read_text().split())
    os.kill(pid, signal.SIGKILL)  # mid-trial, as a lost machine or an OOM kill would
    victim = next(p for p in procs if p.pid == pid)
    victim.communicate(timeout=30)
    _finish([p for p in procs if p is not victim])

    study = optuna.load_study(study_name="shared", storage=url)
    trials = study.get_trials()
    states = Counter(t.state for t in trials)
    # The killed trial ended as FAIL (not RUNNING for ever), was re-run with its parameters by
    # another worker, and the study reached its trial count; nothing else was lost.
    assert states[TrialState.RUNNING] == 0 and states[TrialState.WAITING] == 0
    assert states[TrialState.FAIL] == 1
    failed = next(t for t in trials if t.state == TrialState.FAIL)
    assert failed.number == number
    retried = [t for t in trials if optuna.storages.RetryHeartbeatStaleTrialCallback
               .retried_trial_number(t) == number]
    assert len(retried) == 1 and retried[0].state == TrialState.COMPLETE
    assert retried[0].params == failed.params
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) >= total
    assert len(set(_points(complete))) == len(complete)


COLLAB_WORKER = textwrap.dedent(
    """
    import sys, time
    import optuna
    from fairtune._storage import open_storage
    from fairtune.samplers import CollaborativeUCBSampler
    from fairtune.samplers.collaborative import ROUND_KEY
    from fairtune.tenancy import optimize
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    url, tenant, rounds, hang_round = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    storage = open_storage(url, heartbeat_interval=1, grace_period=2, max_retry=0)
    sampler = CollaborativeUCBSampler(tenants=["a", "b", "c"], n_startup_rounds=1, seed=0)
    sampler._n_preliminary_samples = 32
    sampler._n_local_search = 1
    study = optuna.load_study(study_name="shared", storage=storage, sampler=sampler)

    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        y = trial.suggest_float("y", 0.0, 1.0)
        if study._storage.get_trial_system_attrs(trial._trial_id)[ROUND_KEY] == hang_round:
            print("hanging", flush=True)
            time.sleep(600)
        time.sleep(0.2)
        return -((x - 0.3) ** 2 + (y - 0.6) ** 2)

    optimize(study, tenant, objective, n_trials=rounds)
    """
)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_killed_tenant_does_not_stall_the_others(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    url = (f"sqlite:///{tmp_path / 'db.sqlite3'}" if backend == "sqlite"
           else request.getfixturevalue("postgres_url"))
    optuna.create_study(study_name="shared", storage=url, direction="maximize")
    script = tmp_path / "tenant.py"
    script.write_text(COLLAB_WORKER)
    rounds = 4
    victim = _start(script, url, "a", str(rounds), "1")  # hangs in its round 1
    others = [_start(script, url, tenant, str(rounds), "-1") for tenant in "bc"]
    assert victim.stdout is not None and victim.stdout.readline().strip() == "hanging"
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=30)
    _finish(others)  # b and c run every round although a's round-1 trial never ends
    time.sleep(3)  # past the grace period: the next worker to start a trial fails a's trial
    _finish([_start(script, url, "a", str(rounds - 2), "-1")])  # a, restarted, finishes

    study = optuna.load_study(study_name="shared", storage=url)
    trials = study.get_trials()
    assert Counter(t.state for t in trials) == {TrialState.COMPLETE: 3 * rounds - 1,
                                                TrialState.FAIL: 1}
    failed = next(t for t in trials if t.state == TrialState.FAIL)
    assert (tenant_of(failed), failed.system_attrs[ROUND_KEY]) == ("a", 1)
    done = Counter((tenant_of(t), t.system_attrs[ROUND_KEY]) for t in trials
                   if t.state == TrialState.COMPLETE)
    assert set(done.values()) == {1}
    assert set(done) == {(t, r) for t in "abc" for r in range(rounds)} - {("a", 1)}
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(set(_points(complete))) == len(complete)


def test_three_cli_workers_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    command = [sys.executable, "-m", "fairtune.cli", "tune", "--dataset", "german", "--model",
               "linear", "--limit", "demographic_parity<=0.1", "--n-trials", "4", "--storage",
               postgres_url, "--study-name", "cli", "--no-progress"]
    procs = [subprocess.Popen(command, env=_ENV, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    _finish(procs)
    trials = optuna.load_study(study_name="cli", storage=postgres_url).get_trials()
    assert len(trials) == 12
    assert all(t.state == TrialState.COMPLETE for t in trials)
    assert sorted(t.number for t in trials) == list(range(12))
    # Each worker that finds the new study empty enqueues the untuned model (so workers started
    # at the same moment may each run it); every other point is proposed once.
    defaults = tuple(sorted(get_space("linear").defaults.items()))
    points = _points(trials)
    assert 1 <= points.count(defaults) <= 3
    others = [p for p in points if p != defaults]
    assert len(set(others)) == len(others)


@pytest.mark.parametrize("objectives", [None, "accuracy,demographic_parity"])
def test_ctrl_c_on_one_cli_worker_leaves_the_others_trials_alone(
    tmp_path: Path, postgres_url: str, objectives: str | None
) -> None:
    n_trials = 10
    command = [sys.executable, "-m", "fairtune.cli", "tune", "--dataset", "german", "--model",
               "random_forest", "--cv", "3", "--n-trials", str(n_trials), "--sampler", "random",
               "--storage", postgres_url, "--study-name", "cli", "--no-progress"]
    command += ["--objectives", objectives] if objectives else ["--limit", "dsp<=0.1"]
    procs = [subprocess.Popen(command, env=_ENV, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        # Interrupt the first worker once the three are under way: the others have RUNNING
        # trials numbered after its first one, which an interrupt must not touch.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                trials = optuna.load_study(study_name="cli", storage=postgres_url).get_trials()
            except KeyError:
                trials = []
            if sum(t.state == TrialState.COMPLETE for t in trials) >= 4 and any(
                t.state == TrialState.RUNNING for t in trials
            ):
                break
            time.sleep(0.05)
        procs[0].send_signal(signal.SIGINT)
        out0, err0 = procs[0].communicate(timeout=120)
        outs = [p.communicate(timeout=300) for p in procs[1:]]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert procs[0].returncode == 130, err0
    ran = int(re.search(r"interrupted after (\d+) trials of this run", err0).group(1))
    assert "to resume, run the same command again" in err0
    assert out0.startswith("Study cli: ")  # the best fair trial or the front so far
    assert ("Pareto-optimal trials" if objectives else "Best fair trial") in out0
    for p, (out, err) in zip(procs[1:], outs):
        assert p.returncode == 0, err
        assert "Cannot tell" not in err and "error" not in err
    trials = optuna.load_study(study_name="cli", storage=postgres_url).get_trials()
    # The two others ran all their trials, every one COMPLETE; at most the interrupted worker's
    # own trial in flight ended as FAIL.
    assert len(trials) == ran + 2 * n_trials
    assert sum(t.state == TrialState.COMPLETE for t in trials) >= len(trials) - 1
    assert not any(t.state == TrialState.RUNNING for t in trials)
