"""fairtune's samplers survive pickle and deepcopy, as Optuna's own samplers do.

Optuna's FAQ resumes a study with the same random state by saving its sampler with pickle. A
sampler restored that way mid-study must continue exactly as the original would have.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import optuna
import pytest

from fairtune.samplers import CollaborativeUCBSampler, FairBOSampler, MTKBSampler
from tests.conftest import small


def _small(sampler: Any) -> Any:
    return small(sampler)


SAMPLERS: dict[str, Callable[[], optuna.samplers.BaseSampler]] = {
    "fairbo": lambda: _small(FairBOSampler(seed=3, n_startup_trials=4)),
    "fairbo-binary": lambda: _small(
        FairBOSampler(seed=3, n_startup_trials=4, binary_constraints=True)
    ),
    "fairbo-cmes": lambda: _small(FairBOSampler(seed=3, n_startup_trials=4, acquisition="cmes")),
    "mtkb": lambda: _small(MTKBSampler(seed=3, n_startup_trials=4)),
    "mtbkb": lambda: _small(MTKBSampler(seed=3, n_startup_trials=4, budgeted=True)),
    "collaborative": lambda: _small(
        CollaborativeUCBSampler(tenants=["a", "b"], n_startup_rounds=2, seed=3)
    ),
}


def _objective(trial: optuna.Trial) -> float:
    x = trial.suggest_float("x", 0.0, 1.0)
    k = trial.suggest_int("k", 1, 8)
    trial.set_constraint("c", x - 0.6)
    return x + 0.05 * k


@pytest.mark.parametrize("name", list(SAMPLERS))
@pytest.mark.parametrize("clone", [pickle.loads, copy.deepcopy], ids=["pickle", "deepcopy"])
def test_restored_sampler_continues_the_study_as_the_original_would(
    name: str, clone: Callable
) -> None:
    sampler = SAMPLERS[name]()
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(_objective, n_trials=7)  # past the startup phase: model state and warm starts

    restored = clone(pickle.dumps(sampler)) if clone is pickle.loads else clone(sampler)
    storage = optuna.storages.InMemoryStorage()
    optuna.copy_study(from_study_name=study.study_name, from_storage=study._storage,
                      to_storage=storage)
    twin = optuna.load_study(study_name=study.study_name, storage=storage, sampler=restored)

    study.optimize(_objective, n_trials=3)
    twin.optimize(_objective, n_trials=3)
    assert len(twin.trials) == 10
    assert [t.params for t in twin.trials[7:]] == [t.params for t in study.trials[7:]]
    # Its locks were recreated: parallel threads run (a missing lock would fail the trials),
    # and FairBOSampler, which never proposes a pending or evaluated point, still does not.
    twin.optimize(_objective, n_trials=4, n_jobs=2)
    assert [t.state for t in twin.trials[10:]] == [optuna.trial.TrialState.COMPLETE] * 4
    if name.startswith("fairbo"):
        points = {tuple(sorted(t.params.items())) for t in twin.trials}
        assert len(points) == 14
