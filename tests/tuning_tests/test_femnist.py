"""The CNN of the collaborative FEMNIST experiment: training, determinism, its space, and the
tenant objective inside a collaborative study (tiny tenants, tiny networks)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import optuna
import pytest

from fairtune.datasets import TenantData, federated_digits
from fairtune.samplers import CollaborativeUCBSampler
from fairtune.tenancy import tenant_of
from fairtune.tuning.femnist import CNN_PARAMS, CNNClassifier, CNNTenantObjective, cnn_space

SMALL = {"channels": (2, 4), "hidden": 8}


@pytest.fixture(scope="module")
def tenants() -> dict[str, TenantData]:
    return federated_digits(n_writers=30, seed=0).partition(
        n_tenants=2, writers_per_tenant=3, seed=0
    )


def _toy(n: int = 24) -> tuple[np.ndarray, np.ndarray]:
    y = np.arange(n) % 2
    X = np.zeros((n, 8, 8), dtype=np.float32)
    X[y == 1, 2:6, 3:5] = 1.0
    return X, y


def test_import_of_the_cnn_module_does_not_import_torch() -> None:
    code = ("import sys, fairtune.tuning.femnist, fairtune.datasets; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_cnn_learns_a_separable_problem_and_is_deterministic() -> None:
    X, y = _toy()
    net = {"channels": (4, 8), "hidden": 16, "batch_size": 8, "epochs": 20}
    a = CNNClassifier(learning_rate=0.1, random_state=3, **net).fit(X, y)
    b = CNNClassifier(learning_rate=0.1, random_state=3, **net).fit(X, y)
    c = CNNClassifier(learning_rate=0.1, random_state=4, **net).fit(X, y)
    assert a.score(X, y) == 1.0 and not a.diverged_
    wa, wb, wc = (m.network_[0].weight.detach().numpy() for m in (a, b, c))
    np.testing.assert_array_equal(wa, wb)
    assert not np.array_equal(wa, wc)
    # A learning rate of 1e-5 barely moves the weights: the same net does not learn it.
    slow = CNNClassifier(learning_rate=1e-5, random_state=3, **net).fit(X, y)
    assert slow.score(X, y) < 1.0


def test_learning_rate_decay_and_l2_change_the_result() -> None:
    X, y = _toy()
    base = dict(learning_rate=0.1, epochs=3, random_state=0, **SMALL)
    w = {
        name: CNNClassifier(**base, **extra).fit(X, y).network_[0].weight.detach().numpy()
        for name, extra in (("plain", {}), ("decay", {"lr_decay": 1.0}), ("l2", {"l2": 1.0}))
    }
    assert not np.allclose(w["plain"], w["decay"])
    assert not np.allclose(w["plain"], w["l2"])
    # Strong weight decay shrinks the weights.
    assert np.abs(w["l2"]).sum() < np.abs(w["plain"]).sum()


def test_diverged_training_stops_and_predicts_class_zero(tenants: dict[str, TenantData]) -> None:
    data = tenants["t0"]
    model = CNNClassifier(learning_rate=1e20, l2=1.0, epochs=3, n_classes=10, **SMALL)
    model.fit(data.X_train, data.y_train)
    assert model.diverged_
    np.testing.assert_array_equal(model.predict(data.X_valid), 0)
    assert model.score(data.X_valid, data.y_valid) == np.mean(data.y_valid == 0)


def test_cnn_rejects_bad_input() -> None:
    X, y = _toy()
    with pytest.raises(ValueError, match="`learning_rate` must be a finite number >= 0, but got "
                                         "learning_rate=-1"):
        CNNClassifier(learning_rate=-1)
    with pytest.raises(ValueError, match="`channels` must be two positive integers"):
        CNNClassifier(channels=(4,))
    with pytest.raises(ValueError, match=r"`X` must be images of shape \(n, height, width\)"):
        CNNClassifier(**SMALL).fit(X.reshape(len(X), -1), y)
    with pytest.raises(ValueError, match="`y` has label 5, but the network has n_classes=3"):
        CNNClassifier(n_classes=3, **SMALL).fit(X, np.full(len(X), 5))
    with pytest.raises(RuntimeError, match="not fitted yet"):
        CNNClassifier(**SMALL).predict(X)


def test_cnn_space_suggests_the_three_log_parameters() -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask()
    model = cnn_space(trial, epochs=2, **SMALL)
    assert set(trial.params) == set(CNN_PARAMS) == {"learning_rate", "lr_decay", "l2"}
    for name, dist in trial.distributions.items():
        assert (dist.low, dist.high, dist.log) == (1e-5, 1.0, True)
        assert getattr(model, name) == trial.params[name]
    assert model.epochs == 2 and model.channels == (2, 4)


def test_tenant_objective_in_a_collaborative_study(tenants: dict[str, TenantData]) -> None:
    objective = CNNTenantObjective(tenants, epochs=2, **SMALL)
    sampler = CollaborativeUCBSampler(tenants=list(tenants), n_startup_rounds=1, seed=0)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(objective, n_trials=2 * 2)
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 4
    assert sorted(tenant_of(t) for t in study.trials) == ["t0", "t0", "t1", "t1"]
    for trial in study.trials:
        # Each value is the validation accuracy of that tenant's network with those parameters.
        data = tenants[tenant_of(trial)]
        model = objective.classifier(trial.params, data).fit(data.X_train, data.y_train)
        assert trial.value == model.score(data.X_valid, data.y_valid)
        assert trial.user_attrs["fairtune:cnn_diverged"] is False


def test_tenant_objective_of_one_tenant_and_unknown_tenants(
    tenants: dict[str, TenantData],
) -> None:
    single = CNNTenantObjective(tenants["t1"], epochs=1, **SMALL)
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(single, n_trials=2)
    assert all(0.0 <= t.value <= 1.0 for t in study.trials)
    assert single.tenants == ["t1"]

    objective = CNNTenantObjective(tenants, epochs=1, **SMALL)
    with pytest.raises(ValueError, match=r"belongs to tenant None, which must be one of "
                                         r"\['t0', 't1'\]"):
        study.optimize(objective, n_trials=1)  # RandomSampler does not tag tenants
    with pytest.raises(ValueError, match="`tenants` must be a TenantData or a non-empty mapping"):
        CNNTenantObjective({})
