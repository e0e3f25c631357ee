"""The few places where fairtune needs more of Optuna than its public API offers.

Everything here uses Optuna's private names (a study's storage and id, a trial's id, private
modules), so it lives in one module that a new Optuna release can be checked against; a layout
test refuses them anywhere else in the package.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution
    from optuna.storages import BaseStorage, RDBStorage


def storage_and_id(study: optuna.Study) -> tuple[BaseStorage, int]:
    """A study's storage and the study's id in it."""
    return study._storage, study._study_id


def study_system_attrs(study: optuna.Study) -> dict[str, Any]:
    """A study's system attributes, read from its storage (Optuna 5 has no public reader)."""
    return study._storage.get_study_system_attrs(study._study_id)


def study_key(study: optuna.Study) -> tuple[int, int]:
    """``(id of the storage object, study id)``: the same for every object of one study in this
    process that shares the storage object."""
    return id(study._storage), study._study_id


def trial_id(trial: optuna.Trial | optuna.trial.FrozenTrial) -> int:
    """A trial's id in its study's storage (unlike its number, unique across studies)."""
    return trial._trial_id


def contains(distribution: BaseDistribution, internal: Any) -> bool:
    """Whether the value ``internal`` (in the internal representation) is in ``distribution``."""
    return distribution._contains(internal)


def suggest(trial: optuna.Trial, name: str, distribution: BaseDistribution) -> Any:
    """Sample ``name`` from ``distribution`` as ``trial.suggest_*`` would (the path of
    ``study.ask(fixed_distributions)``)."""
    return trial._suggest(name, distribution)


def set_artifact_entry(study: optuna.Study, artifact_id: str, meta: dict[str, Any]) -> None:
    """The study's entry of an artifact, as ``optuna.artifacts.upload_artifact`` writes it, but
    under an id of the caller's choice."""
    from optuna.artifacts._upload import ARTIFACTS_ATTR_PREFIX

    storage, study_id = storage_and_id(study)
    storage.set_study_system_attr(study_id, ARTIFACTS_ATTR_PREFIX + artifact_id, json.dumps(meta))


def rdb_storage(storage: BaseStorage) -> RDBStorage | None:
    """The ``RDBStorage`` behind a study's storage (Optuna wraps it in a cache), or None."""
    from optuna.storages import RDBStorage

    inner = getattr(storage, "_backend", storage)
    return inner if isinstance(inner, RDBStorage) else None


def trials_without_heartbeat(storage: BaseStorage, trial_ids: list[int]) -> set[int]:
    """The ids among ``trial_ids`` that have no heartbeat row in an RDB storage.

    Optuna fails a stale trial only when its heartbeat row is old (``fail_stale_trials``); a
    trial whose worker died before its first heartbeat has no row and would stay RUNNING.
    """
    rdb = rdb_storage(storage)
    if rdb is None or not trial_ids:
        return set()
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session

    with _create_scoped_session(rdb.scoped_session) as session:
        with_row = {
            trial_id for (trial_id,) in session.query(models.TrialHeartbeatModel.trial_id)
            .filter(models.TrialHeartbeatModel.trial_id.in_(trial_ids)).all()
        }
    return set(trial_ids) - with_row
