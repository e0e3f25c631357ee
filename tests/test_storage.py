"""The storage helpers that keep fairtune's shared state within an RDB storage's value limit."""

from __future__ import annotations

import json
from pathlib import Path

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
