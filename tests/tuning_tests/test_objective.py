from __future__ import annotations

import numpy as np
import optuna
import pandas as pd
import pytest

from fairtune.datasets import load_german
from fairtune.fairness import demographic_parity_difference
from fairtune.samplers import FairBOSampler
from fairtune.tuning import VALIDATION_ERROR_KEY, FairObjective

optuna.logging.set_verbosity(optuna.logging.WARNING)

SAMPLERS = {
    "random": lambda: optuna.samplers.RandomSampler(seed=0),
    "tpe": lambda: optuna.samplers.TPESampler(seed=0, n_startup_trials=2),
    "gp": lambda: optuna.samplers.GPSampler(seed=0, n_startup_trials=2),
    "fairbo": lambda: FairBOSampler(seed=0, n_startup_trials=2),
}


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_sets_constraints_and_user_attributes_with_every_sampler(sampler: str) -> None:
    objective = FairObjective("german", "random_forest", limits=["dsp<=0.05", "deo<=0.1"])
    study = optuna.create_study(direction="maximize", sampler=SAMPLERS[sampler]())
    study.optimize(objective, n_trials=4)
    assert len(study.trials) == 4
    for t in study.trials:
        assert t.state == optuna.trial.TrialState.COMPLETE
        assert set(t.constraints) == {"demographic_parity", "equal_opportunity"}
        dsp = t.user_attrs["fairtune:demographic_parity"]
        assert t.constraints["demographic_parity"] == pytest.approx(dsp - 0.05)
        assert t.user_attrs[VALIDATION_ERROR_KEY] == pytest.approx(1 - t.value)


def test_objective_value_and_fairness_are_those_of_the_pipeline() -> None:
    objective = FairObjective("german", "random_forest", limits="dsp<=0.05", random_state=3)
    params = {"n_estimators": 8, "min_samples_split": 0.05, "max_depth": 3, "criterion": "gini"}
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial(params)
    study.optimize(objective, n_trials=1)
    pipeline = objective.make_pipeline(optuna.trial.FixedTrial(params)).fit(
        objective.X_train, objective.y_train
    )
    y_pred = pipeline.predict(objective.X_valid)
    trial = study.trials[0]
    assert trial.value == pytest.approx(float(np.mean(y_pred == objective.y_valid.to_numpy())))
    assert trial.user_attrs["fairtune:demographic_parity"] == pytest.approx(
        demographic_parity_difference(objective.y_valid, y_pred, sensitive_features=objective.s_valid)
    )
    assert len(objective.X_valid) == 300  # 30% of 1,000 rows


def test_refit_best_fits_the_best_fair_trial_on_all_data() -> None:
    objective = FairObjective("german", "linear", limits="dsp<=0.1")
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=1))
    study.optimize(objective, n_trials=5)
    pipeline = objective.refit_best(study)
    model = pipeline[-1]
    assert model.get_params()["alpha"] == pytest.approx(study.best_trial.params["alpha"])
    assert pipeline.predict(objective.X.iloc[:5]).shape == (5,)
    assert hasattr(pipeline, "classes_")


def test_refit_best_without_a_fair_trial_raises() -> None:
    objective = FairObjective("german", "random_forest", limits="dsp<=0.05")
    study = optuna.create_study(direction="maximize")
    study.add_trial(
        optuna.trial.create_trial(
            params={"n_estimators": 2, "min_samples_split": 0.1, "max_depth": 2, "criterion": "gini"},
            distributions={
                "n_estimators": optuna.distributions.IntDistribution(1, 64, log=True),
                "min_samples_split": optuna.distributions.FloatDistribution(0.01, 0.5, log=True),
                "max_depth": optuna.distributions.IntDistribution(1, 5),
                "criterion": optuna.distributions.CategoricalDistribution(["gini", "entropy"]),
            },
            value=0.7,
            system_attrs={"constraints:demographic_parity": 0.3},
        )
    )
    with pytest.raises(ValueError, match="no fair trial"):
        objective.refit_best(study)


def test_use_sensitive_feature_false_drops_the_column_and_custom_models_work() -> None:
    data = load_german()
    objective = FairObjective(data, "random_forest", limits="dsp<=0.1", use_sensitive_feature=False)
    assert "sex" not in objective.X.columns and "sex" in data.data.columns

    def stump(trial: optuna.Trial):
        from sklearn.tree import DecisionTreeClassifier

        return DecisionTreeClassifier(max_depth=trial.suggest_int("depth", 1, 2), random_state=0)

    custom = FairObjective(data, stump, limits="dsp<=0.1", metric="balanced_accuracy")
    study = optuna.create_study(direction="maximize")
    study.optimize(custom, n_trials=2)
    assert {t.params["depth"] for t in study.trials} <= {1, 2}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dataset": "mnist"}, r"`dataset` must be one of \['adult', 'german', 'compas'\]"),
        ({"model": "svm"}, r"`model` must be one of"),
        ({"model": 3}, "`model` must be a space name or a callable"),
        ({"limits": "dsp<0.1"}, "`limits` must be strings like"),
        ({"metric": "precision"}, r"`metric` must be one of \["),
        ({"validation_size": 1.5}, r"`validation_size` must be a float in \(0, 1\)"),
        ({"dataset": (pd.DataFrame({"a": [1, 2]}), [0, 1], ["x"])}, "equal lengths"),
    ],
)
def test_bad_arguments(kwargs: dict, match: str) -> None:
    args = {"dataset": "german", "model": "random_forest", "limits": "dsp<=0.1"}
    args.update(kwargs)
    dataset, model = args.pop("dataset"), args.pop("model")
    with pytest.raises(ValueError, match=match):
        FairObjective(dataset, model, **args)
