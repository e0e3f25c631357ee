from __future__ import annotations

import numpy as np
import optuna
import pytest
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from threadpoolctl import threadpool_info

from fairtune.tuning import (
    CNNClassifier,
    FairObjective,
    limit_training_threads,
    set_training_threads,
    training_threads,
)


def _pool_sizes() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info()}


class _Recorder(ClassifierMixin, BaseEstimator):
    """Records the thread pools' sizes and torch's thread count while it trains."""

    seen: list[tuple[set[int], int]] = []

    def fit(self, X, y):
        _Recorder.seen.append((_pool_sizes(), torch.get_num_threads()))
        self.classes_ = np.array([0, 1])
        return self

    def predict(self, X):
        return np.arange(len(X)) % 2


@pytest.fixture(autouse=True)
def _default_budget(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("FAIRTUNE_TRAINING_THREADS", raising=False)
    yield
    set_training_threads(None)


def test_models_train_on_the_budget_and_the_pools_are_restored() -> None:
    before, torch_before = _pool_sizes(), torch.get_num_threads()
    _Recorder.seen.clear()
    objective = FairObjective("german", lambda trial: _Recorder(), limits="dsp<=0.5")
    study = optuna.create_study(direction="maximize")
    study.optimize(objective, n_trials=1)
    pools, torch_threads = _Recorder.seen[0]
    assert pools == {1} and torch_threads == 1  # one thread by default
    assert _pool_sizes() == before and torch.get_num_threads() == torch_before
    set_training_threads(2)
    study.optimize(objective, n_trials=1)
    pools, torch_threads = _Recorder.seen[1]
    assert pools <= {1, 2} and 2 in pools | {torch_threads} and torch_threads == 2


def test_the_environment_variable_sets_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    assert training_threads() == 1
    monkeypatch.setenv("FAIRTUNE_TRAINING_THREADS", "3")
    assert training_threads() == 3
    with limit_training_threads() as n:
        assert n == 3 and torch.get_num_threads() == 3
    set_training_threads(2)  # the call wins over the environment
    assert training_threads() == 2
    monkeypatch.setenv("FAIRTUNE_TRAINING_THREADS", "many")
    set_training_threads(None)
    with pytest.raises(ValueError, match="FAIRTUNE_TRAINING_THREADS must be a positive integer, "
                                         "but got FAIRTUNE_TRAINING_THREADS='many'"):
        training_threads()
    with pytest.raises(ValueError, match=r"`n` must be a positive integer, but got n=0"):
        set_training_threads(0)


def test_the_cnn_trains_on_the_budget() -> None:
    torch_before = torch.get_num_threads()
    seen = []
    model = CNNClassifier(epochs=1, random_state=0)
    original = model._train

    def spy(*args):
        seen.append(torch.get_num_threads())
        return original(*args)

    model._train = spy
    rng = np.random.default_rng(0)
    model.fit(rng.random((8, 8, 8)).astype(np.float32), np.arange(8) % 2)
    assert seen == [1] and torch.get_num_threads() == torch_before
