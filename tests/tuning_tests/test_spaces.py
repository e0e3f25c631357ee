from __future__ import annotations

import warnings

import numpy as np
import optuna
import pytest

from fairtune import datasets
from fairtune.tuning import SPACES, FairObjective, get_space, register_space

optuna.logging.set_verbosity(optuna.logging.WARNING)

EXPECTED_DIMS = {
    "xgboost": 7, "random_forest": 4, "random_forest_deep": 4, "mlp": 11, "linear": 6,
}


@pytest.mark.parametrize("name", sorted(EXPECTED_DIMS))
def test_space_samples_valid_parameters(name: str) -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(5):
        trial = study.ask()
        estimator = get_space(name).build(trial)
        assert len(trial.params) == EXPECTED_DIMS[name]
        estimator.set_params(**{})  # a real scikit-learn estimator
        for key, dist in trial.distributions.items():
            assert dist._contains(dist.to_internal_repr(trial.params[key]))
        study.tell(trial, 0.0)


@pytest.mark.parametrize("dataset", ["adult", "german", "compas"])
@pytest.mark.parametrize("name", sorted(EXPECTED_DIMS))
def test_estimator_trains_on_a_slice_of_each_dataset(dataset: str, name: str) -> None:
    X, y, s = getattr(datasets, f"load_{dataset}")(return_X_y=True)
    rng = np.random.RandomState(0)
    rows = rng.choice(len(X), 300, replace=False)
    objective = FairObjective(
        (X.iloc[rows], y.iloc[rows], s.iloc[rows]), name, limits="dsp<=0.2"
    )
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        study.optimize(objective, n_trials=2)
    for t in study.trials:
        assert t.state == optuna.trial.TrialState.COMPLETE
        assert 0.0 <= t.value <= 1.0
        assert "demographic_parity" in t.constraints


def test_registry() -> None:
    assert set(EXPECTED_DIMS) <= set(SPACES)
    with pytest.raises(ValueError, match=r"`model` must be one of \["):
        get_space("svm")

    def tiny(trial: optuna.Trial):
        from sklearn.tree import DecisionTreeClassifier

        return DecisionTreeClassifier(max_depth=trial.suggest_int("max_depth", 1, 3))

    try:
        register_space("tree", tiny)
        assert get_space("tree").build is tiny
        with pytest.raises(ValueError, match="already registered"):
            register_space("tree", tiny)
        register_space("tree", tiny, overwrite=True)
        with pytest.raises(ValueError, match="`build` must be callable"):
            register_space("other", 3)  # type: ignore[arg-type]
    finally:
        SPACES.pop("tree", None)


@pytest.mark.parametrize("name", sorted(EXPECTED_DIMS))
def test_space_defaults_are_a_point_of_the_space(name: str) -> None:
    defaults = get_space(name).defaults
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    study.enqueue_trial(dict(defaults))
    trial = study.ask()
    with warnings.catch_warnings():
        # Optuna warns, and samples instead, when an enqueued value lies outside its range.
        warnings.simplefilter("error")
        get_space(name).build(trial)
    assert trial.params == defaults  # every parameter, each one inside its distribution


def test_xgboost_defaults_are_xgboosts_own_where_the_space_has_them() -> None:
    from xgboost import XGBClassifier

    built = get_space("xgboost").build(optuna.trial.FixedTrial(dict(get_space("xgboost").defaults)))
    # XGBoost documents these defaults (its get_params() reports None for "library default").
    documented = {"n_estimators": 100, "learning_rate": 0.3, "gamma": 0.0, "reg_lambda": 1.0,
                  "subsample": 1.0, "max_depth": 6}
    assert {k: built.get_params()[k] for k in documented} == documented
    assert XGBClassifier().get_params()["reg_alpha"] is None  # 0: the space's lowest, 1e-3
    assert built.get_params()["reg_alpha"] == 1e-3


def test_deep_forest_defaults_are_scikit_learns_forest() -> None:
    from sklearn.ensemble import RandomForestClassifier

    space = get_space("random_forest_deep")
    built = space.build(optuna.trial.FixedTrial(dict(space.defaults)))
    library = RandomForestClassifier().get_params()
    assert built.get_params() == {**library, "n_jobs": 1, "random_state": 0}
    assert library["max_depth"] is None  # every tree grown to full depth, as in the space
    # The paper's forest space cannot express it: its trees stop at depth 5.
    paper = get_space("random_forest")
    assert paper.build(optuna.trial.FixedTrial(dict(paper.defaults))).max_depth == 5


def test_register_space_keeps_defaults_and_refuses_a_non_mapping() -> None:
    def tiny(trial: optuna.Trial):
        from sklearn.tree import DecisionTreeClassifier

        return DecisionTreeClassifier(max_depth=trial.suggest_int("max_depth", 1, 3))

    try:
        assert register_space("tree", tiny, defaults={"max_depth": 2}).defaults == {"max_depth": 2}
        assert register_space("tree", tiny, overwrite=True).defaults is None
        with pytest.raises(ValueError, match=r"`defaults` must be a mapping .* got \[2\]"):
            register_space("tree", tiny, defaults=[2], overwrite=True)  # type: ignore[arg-type]
    finally:
        SPACES.pop("tree", None)
