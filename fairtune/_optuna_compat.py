"""The few places where fairtune needs more of Optuna than its public API offers.

Everything here depends on Optuna's private modules, so it lives in one module that a new Optuna
release can be checked against.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from optuna.storages import BaseStorage, RDBStorage


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
