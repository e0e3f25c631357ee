"""The storage helpers that keep fairtune's shared state within an RDB storage's value limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pytest

from fairtune._storage import read_text, read_trial_text, write_study_text, write_trial_text

_LONG = json.dumps({f"parameter_with_a_long_name_{i}": i / 7 for i in range(150)})


@pytest.fixture(params=["inmemory", "sqlite"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> optuna.storages.BaseStorage:
    if request.param == "inmemory":
        return optuna.storages.InMemoryStorage()
    # SQLite enforces the RDB schema's value length, unlike the in-memory storage.
    return optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'db.sqlite3'}")


def test_long_study_texts_are_chunked(storage: optuna.storages.BaseStorage) -> None:
    study_id = storage.create_new_study([optuna.study.StudyDirection.MINIMIZE], "s")
    assert len(_LONG) > 5000
    write_study_text(storage, study_id, "fairtune:test", _LONG)
    attrs = storage.get_study_system_attrs(study_id)
    assert len(attrs) > 2  # chunks and their header
    # The limit is on the stored JSON text, in which every quote of ``_LONG`` is escaped.
    assert all(len(json.dumps(v)) <= 2048 for v in attrs.values())
    assert read_text(attrs, "fairtune:test") == _LONG
    write_study_text(storage, study_id, "fairtune:short", "{}")
    assert read_text(storage.get_study_system_attrs(study_id), "fairtune:short") == "{}"
    assert read_text(attrs, "fairtune:absent") is None


def test_a_short_text_that_looks_like_a_header_survives() -> None:
    storage = optuna.storages.InMemoryStorage()
    study_id = storage.create_new_study([optuna.study.StudyDirection.MINIMIZE], "s")
    write_study_text(storage, study_id, "fairtune:t", "chunks:3")
    assert read_text(storage.get_study_system_attrs(study_id), "fairtune:t") == "chunks:3"


def test_trial_texts_are_chunked_and_a_shorter_rewrite_wins(
    storage: optuna.storages.BaseStorage,
) -> None:
    study_id = storage.create_new_study([optuna.study.StudyDirection.MINIMIZE], "s")
    trial_id = storage.create_new_trial(study_id)
    write_trial_text(storage, trial_id, "fairtune:p", _LONG)
    attrs = storage.get_trial(trial_id).system_attrs
    assert len(attrs) > 2
    assert all(len(json.dumps(v)) <= 2048 for v in attrs.values())
    assert read_trial_text(attrs, "fairtune:p") == _LONG
    write_trial_text(storage, trial_id, "fairtune:p", "{}")  # old chunks 1 and 2 stay behind
    assert read_trial_text(storage.get_trial(trial_id).system_attrs, "fairtune:p") == "{}"
    assert read_trial_text(attrs, "fairtune:other") is None


def _heartbeat_storage(url: str, callback: Any = None) -> optuna.storages.RDBStorage:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(url, heartbeat_interval=1, grace_period=2,
                                          heartbeat_stale_trial_callback=callback)


def _running_trial(study: optuna.Study, seconds_ago: float) -> int:
    """A RUNNING trial that started ``seconds_ago`` and never recorded a heartbeat (its worker
    died at once)."""
    import datetime

    template = optuna.trial.create_trial(state=optuna.trial.TrialState.RUNNING)
    template.datetime_start = datetime.datetime.now() - datetime.timedelta(seconds=seconds_ago)
    trial_id = study._storage.create_new_trial(study._study_id, template_trial=template)
    return study._storage.get_trial(trial_id).number


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_trial_that_died_before_its_first_heartbeat_is_failed_by_the_next_worker(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    from fairtune._storage import fail_stale_trials
    from fairtune.samplers import FairBOSampler

    url = (f"sqlite:///{tmp_path / 'hb.db'}" if backend == "sqlite"
           else request.getfixturevalue("postgres_url"))
    retried: list[int] = []
    storage = _heartbeat_storage(url, callback=lambda study, trial: retried.append(trial.number))
    study = optuna.create_study(storage=storage, sampler=FairBOSampler(seed=0))
    dead = _running_trial(study, seconds_ago=60)
    young = _running_trial(study, seconds_ago=0)  # another worker's, just asked: not stale
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    states = {t.number: t.state for t in study.trials}
    assert states[dead] == optuna.trial.TrialState.FAIL
    assert states[young] == optuna.trial.TrialState.RUNNING
    assert retried == [dead]  # the storage's failed-trial callback ran, as Optuna's sweep does
    # A long trial that keeps its heartbeat is left alone, however old.
    alive = _running_trial(study, seconds_ago=60)
    study._storage.record_heartbeat(study.trials[alive]._trial_id)
    assert fail_stale_trials(study) == []
    assert study.trials[alive].state == optuna.trial.TrialState.RUNNING


def test_without_a_heartbeat_no_running_trial_is_touched(tmp_path: Path) -> None:
    from fairtune._storage import fail_stale_trials

    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'plain.db'}")
    old = _running_trial(study, seconds_ago=3600)
    assert fail_stale_trials(study) == []
    assert study.trials[old].state == optuna.trial.TrialState.RUNNING


@pytest.mark.parametrize("heartbeat", [None, 5])
def test_sqlite_files_wait_for_another_process_lock(tmp_path: Path, heartbeat: int | None) -> None:
    from fairtune._storage import SQLITE_BUSY_TIMEOUT, open_storage

    storage = open_storage(f"sqlite:///{tmp_path / 'busy.db'}", heartbeat_interval=heartbeat)
    assert isinstance(storage, optuna.storages.RDBStorage)
    assert storage.get_heartbeat_interval() == heartbeat
    with storage.engine.connect() as connection:  # SQLite's own setting, in milliseconds
        busy = connection.exec_driver_sql("PRAGMA busy_timeout").scalar()
    assert busy == SQLITE_BUSY_TIMEOUT * 1000 > 5000  # longer than sqlite3's default
    # Other RDB URLs without a heartbeat are left to Optuna as they are.
    assert open_storage("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
