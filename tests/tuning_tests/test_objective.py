from __future__ import annotations

import re
import warnings

import numpy as np
import optuna
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

from fairtune.datasets import load_german
from fairtune.fairness import demographic_parity_difference, metric_interval
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
    # German credit's personal_status_sex encodes sex (A92: women only): hiding `sex` alone
    # leaves the model a column it can read the group from, and the user is told so.
    with pytest.warns(UserWarning, match=r"columns left reveal sex: 'personal_status_sex' \(each "
                                         r"of its values belongs to one group\)"):
        objective = FairObjective(data, "random_forest", limits="dsp<=0.1",
                                  use_sensitive_feature=False)
    assert "sex" not in objective.X.columns and "sex" in data.data.columns
    # Without the proxy, nothing to warn about.
    X = data.data.drop(columns="personal_status_sex")
    FairObjective((X, data.target, data.sensitive_features), "random_forest",
                  limits="dsp<=0.1", use_sensitive_feature=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dropped = FairObjective(data, "random_forest", limits="dsp<=0.1",
                                use_sensitive_feature=False, drop_columns=["personal_status_sex"])
    assert "personal_status_sex" not in dropped.X.columns and "sex" not in dropped.X.columns
    assert dropped.setup["dataset"] == (
        "german (sensitive: sex, hidden from the model, without personal_status_sex)"
    )
    assert dropped.sensitive.equals(data.sensitive_features)  # the limits still read the group

    def stump(trial: optuna.Trial):
        from sklearn.tree import DecisionTreeClassifier

        return DecisionTreeClassifier(max_depth=trial.suggest_int("depth", 1, 2), random_state=0)

    custom = FairObjective(data, stump, limits="dsp<=0.1", metric="balanced_accuracy")
    study = optuna.create_study(direction="maximize")
    study.optimize(custom, n_trials=2)
    assert {t.params["depth"] for t in study.trials} <= {1, 2}


def _role_data(husbands_in_b: int, n_other: int = 100) -> tuple:
    """60 + ``n_other`` rows; ``role`` is 'husband' (group a), 'wife' (group b) or a mixed
    'other', with ``husbands_in_b`` of the 50 husbands in group b."""
    rng = np.random.default_rng(0)
    role = ["husband"] * 50 + ["wife"] * 10 + ["other"] * n_other
    group = (["a"] * (50 - husbands_in_b) + ["b"] * husbands_in_b + ["b"] * 10
             + list(rng.choice(["a", "b"], n_other)))
    X = pd.DataFrame({"role": role, "x": rng.normal(size=len(role)), "g": group})
    y = pd.Series(rng.integers(0, 2, len(role)))
    return X, y, X["g"].rename("g")


def test_use_sensitive_feature_false_warns_of_a_column_that_names_the_group_on_many_rows() -> None:
    # 'husband' and 'wife' give the group on 60 of 160 rows, though 'other' does not: the model
    # reads the group there, and the user is told which values and how many rows.
    with pytest.warns(UserWarning) as caught:
        objective = FairObjective(_role_data(0), "linear", limits="dsp<=0.1",
                                  use_sensitive_feature=False)
    (message,) = [str(w.message) for w in caught]
    assert "drops ['g'] from the model's inputs, but columns left reveal g: " in message
    assert "'role' on 38% of the rows (values 'husband', 'wife')" in message
    assert message.endswith("drop them too: `drop_columns` role.")
    assert "g" not in objective.X.columns
    # A column of many such values lists the five most frequent.
    rng = np.random.default_rng(1)
    role = ["wife"] * 20 + [f"code{i}" for i in range(6) for _ in range(12)] + ["other"] * 120
    g = pd.Series(["b"] * 20 + ["a"] * 72 + list(rng.choice(["a", "b"], 120)), name="g")
    X = pd.DataFrame({"role": role, "x": rng.normal(size=len(role))})
    y = pd.Series(rng.integers(0, 2, len(role)))
    with pytest.warns(UserWarning, match=r"'role' on 43% of the rows \(values 'wife', "
                                         r"'code0', 'code1', 'code2', 'code3' and 2 more\)"):
        FairObjective((X, y, g), "linear", limits="dsp<=0.1", use_sensitive_feature=False)
    # One husband in group b of 50 (98 %) no longer names the group; nor do values on fewer
    # than a tenth of the rows, or of fewer than 10 rows each (nine rows of one group say
    # little), nor the model that is allowed to read the group anyway.
    few = X.assign(role=[f"c{i // 9}" if i < 92 else "other" for i in range(len(X))])
    for data, kwargs in [
        ((few, y, g), {"use_sensitive_feature": False}),
        (_role_data(1), {"use_sensitive_feature": False}),
        (_role_data(0, n_other=600), {"use_sensitive_feature": False}),
        (_role_data(0), {}),
        (_role_data(0), {"use_sensitive_feature": False, "drop_columns": ["role"]}),
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            FairObjective(data, "linear", limits="dsp<=0.1", **kwargs)


def test_use_sensitive_feature_false_names_adults_relationship() -> None:
    # Husband (men, but for one) and Wife (women, but for one) give sex on 46 % of Adult's rows.
    with pytest.warns(UserWarning, match=r"'relationship' on 46% of the rows \(values 'Husband', "
                                         r"'Wife'\)"):
        FairObjective("adult", "linear", limits="dsp<=0.05", use_sensitive_feature=False)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dataset": "mnist"}, r"`dataset` must be one of \['adult', 'german', 'compas'\]"),
        ({"model": "svm"}, r"`model` must be one of"),
        ({"model": 3}, "`model` must be a space name or a callable"),
        ({"limits": "dsp<0.1"}, "`limits` must be strings like"),
        ({"metric": "precision"}, r"`metric` must be one of \["),
        ({"validation_size": 1.5}, r"`validation_size` must be a float in \(0, 1\)"),
        ({"test_size": 0.0}, r"`test_size` must be a float in \(0, 1\), but got test_size=0.0"),
        ({"cv": 1}, r"`cv` must be None or an integer >= 2, but got cv=1"),
        ({"drop_columns": "age"}, r"`drop_columns` must be a list of column names, but got "
                                  r"drop_columns='age'"),
        ({"drop_columns": ["age", "agee"]}, r"`drop_columns` must name columns of X, but got "
                                            r"drop_columns=\['age', 'agee'\] and X has no column "
                                            r"\['agee'\]"),
        ({"dataset": (pd.DataFrame({"a": range(4)}), [0, 1] * 2, ["x", "y"] * 2),
          "drop_columns": ["a"]}, r"`drop_columns` must leave the model at least one column"),
        ({"cv": True}, r"`cv` must be None or an integer >= 2, but got cv=True"),
        ({"cv": 2.5}, r"`cv` must be None or an integer >= 2, but got cv=2.5"),
        ({"cv": 3, "validation_size": 0.2}, "`validation_size` and `cv` cannot be combined"),
        (
            {"dataset": (pd.DataFrame({"a": range(8)}), [0, 0, 0, 0, 0, 0, 1, 1], ["x", "y"] * 4),
             "cv": 3},
            r"`cv` must be at most the number of tuning rows of the smaller class \(2\), but got cv=3",
        ),
        ({"dataset": (pd.DataFrame({"a": [1, 2]}), [0, 1], ["x"])},
         r"`dataset` \(X, y, sensitive\): `sensitive` must have one entry per row of X \(2\), "
         r"but got 1"),
        ({"dataset": (pd.DataFrame({"a": [1, 2, 3]}), [0, 1], ["x", "y", "x"])},
         r"`y` must have one entry per row of X \(3\), but got 2"),
        ({"dataset": (pd.DataFrame({"a": [1, 2]}), ["no", "yes"], ["x", "y"])},
         r"`dataset` labels must be 0/1 \(1 = the favourable outcome\) or booleans, or "
         r"`pos_label` must name the favourable one, but got the labels \['no', 'yes'\] and "
         r"pos_label=None"),
        ({"dataset": (pd.DataFrame({"a": [1, 2, 3]}), [0, 1, 2], ["x", "y", "x"])},
         r"must hold two distinct labels \(a binary decision\), but got 3: \[0, 1, 2\]"),
        ({"dataset": (pd.DataFrame({"a": [1, 2]}), ["no", "yes"], ["x", "y"]),
          "pos_label": "Yes"},
         r"`pos_label` must be one of the labels of `dataset` labels \['no', 'yes'\], but got "
         r"pos_label='Yes'"),
    ],
)
def test_bad_arguments(kwargs: dict, match: str) -> None:
    args = {"dataset": "german", "model": "random_forest", "limits": "dsp<=0.1"}
    args.update(kwargs)
    dataset, model = args.pop("dataset"), args.pop("model")
    with pytest.raises(ValueError, match=match):
        FairObjective(dataset, model, **args)


_FITTED_ON: list[int] = []


class _CountingForest(RandomForestClassifier):
    """A random forest that records how many rows it was fitted on."""

    def fit(self, X, y, sample_weight=None):
        _FITTED_ON.append(len(X))
        return super().fit(X, y, sample_weight)


def _forest(trial: optuna.Trial, random_state: int = 0) -> _CountingForest:
    return _CountingForest(
        n_estimators=trial.suggest_int("n_estimators", 2, 8),
        max_depth=trial.suggest_int("max_depth", 1, 4),
        random_state=random_state,
    )


@pytest.mark.parametrize("metric", ["accuracy", "roc_auc"])
def test_cv_scores_the_pooled_out_of_fold_predictions(metric: str) -> None:
    from sklearn import metrics
    from sklearn.model_selection import StratifiedKFold

    objective = FairObjective("german", _forest, limits="dsp<=0.05", metric=metric, cv=4,
                              random_state=2)
    assert objective.X_train is None and objective.X_valid is None
    params = {"n_estimators": 5, "max_depth": 3}
    _FITTED_ON.clear()
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial(params)
    study.optimize(objective, n_trials=1)
    assert _FITTED_ON == [750] * 4  # four models, each on 3/4 of 1,000 rows

    y_pred = np.empty(1000, dtype=int)
    y_score = np.empty(1000)
    folds = StratifiedKFold(4, shuffle=True, random_state=2).split(objective.X, objective.y)
    for fit_rows, valid_rows in folds:
        pipeline = objective.make_pipeline(optuna.trial.FixedTrial(params)).fit(
            objective.X.iloc[fit_rows], objective.y.iloc[fit_rows]
        )
        y_pred[valid_rows] = pipeline.predict(objective.X.iloc[valid_rows])
        y_score[valid_rows] = pipeline.predict_proba(objective.X.iloc[valid_rows])[:, 1]
    trial = study.trials[0]
    expected = (
        metrics.accuracy_score(objective.y, y_pred) if metric == "accuracy"
        else metrics.roc_auc_score(objective.y, y_score)
    )
    assert trial.value == pytest.approx(expected)
    assert trial.user_attrs["fairtune:demographic_parity"] == pytest.approx(
        demographic_parity_difference(objective.y, y_pred, sensitive_features=objective.sensitive)
    )
    assert trial.user_attrs[VALIDATION_ERROR_KEY] == pytest.approx(np.mean(y_pred != objective.y))


def test_test_split_is_never_used_for_tuning_and_evaluate_scores_it() -> None:
    objective = FairObjective("german", _forest, limits=["dsp<=0.05", "di>=0.8"], test_size=0.2,
                              random_state=1)
    assert len(objective.X_test) == 200 and len(objective.X_dev) == 800
    assert not set(objective.X_test.index) & set(objective.X_dev.index)
    assert len(objective.X_valid) == 240 and set(objective.X_valid.index) <= set(objective.X_dev.index)
    assert objective.y_test.mean() == pytest.approx(objective.y.mean(), abs=0.01)  # stratified

    _FITTED_ON.clear()
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(objective, n_trials=5)
    assert _FITTED_ON == [560] * 5
    pipeline = objective.refit_best(study)
    assert _FITTED_ON[-1] == 800  # training + validation rows, not the test rows

    report = objective.evaluate(pipeline)
    y_pred = pipeline.predict(objective.X_test)
    assert report["accuracy"] == pytest.approx(np.mean(y_pred == objective.y_test.to_numpy()))
    dsp = demographic_parity_difference(objective.y_test, y_pred, sensitive_features=objective.s_test)
    assert report["demographic_parity"] == pytest.approx(dsp)
    assert "disparate_impact" in report
    assert report["fair"] == (dsp <= 0.05 and report["disparate_impact"] >= 0.8)
    assert "intervals" not in report
    # With a level, every fairness metric's bootstrap interval on the same test predictions.
    with_intervals = objective.evaluate(pipeline, confidence_level=0.9)
    assert with_intervals["intervals"] == {
        name: metric_interval(name, objective.y_test, y_pred, sensitive_features=objective.s_test,
                              confidence_level=0.9, random_state=1)
        for name in ("demographic_parity", "disparate_impact")
    }
    assert {k: v for k, v in with_intervals.items() if k != "intervals"} == report
    low, high = with_intervals["intervals"]["demographic_parity"]
    assert low < high and high - low > 0.05  # 200 test rows
    with pytest.raises(ValueError, match=r"`confidence_level` must be a float in \(0, 1\).*got "
                                         r"confidence_level=95"):
        objective.evaluate(pipeline, confidence_level=95)

    # A limit that no classifier meets on the test split is reported as unfair.
    strict = FairObjective("german", _forest, limits="dsp<=0.0", test_size=0.2, random_state=1)
    assert report["demographic_parity"] > 0
    assert strict.evaluate(pipeline)["fair"] is False


def test_evaluate_without_a_test_split_raises() -> None:
    objective = FairObjective("german", "random_forest", limits="dsp<=0.05", cv=3)
    with pytest.raises(ValueError, match="`evaluate` needs a test split.*test_size=None"):
        objective.evaluate(None)


def test_refit_on_the_training_split_rebuilds_the_validated_model() -> None:
    objective = FairObjective("german", _forest, limits="dsp<=0.1", test_size=0.2, random_state=4)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=2))
    study.optimize(objective, n_trials=4)
    _FITTED_ON.clear()
    pipeline = objective.refit_best(study, on="training")
    assert _FITTED_ON == [560]
    y_pred = pipeline.predict(objective.X_valid)
    best = study.best_trial
    assert np.mean(y_pred == objective.y_valid.to_numpy()) == pytest.approx(best.value)
    assert demographic_parity_difference(
        objective.y_valid, y_pred, sensitive_features=objective.s_valid
    ) == pytest.approx(best.user_attrs["fairtune:demographic_parity"])
    with pytest.raises(ValueError, match=r"`on` must be one of \['tuning', 'training'\], but got on='all'"):
        objective.refit_best(study, on="all")


def test_refit_on_the_training_split_needs_a_validation_split() -> None:
    objective = FairObjective("german", _forest, limits="dsp<=0.1", cv=3)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=2))
    study.optimize(objective, n_trials=2)
    with pytest.raises(ValueError, match="`on='training'` needs a single validation split.*cv=3"):
        objective.refit_best(study, on="training")


@pytest.mark.parametrize("labels", [[True, False] * 10, [1.0, 0.0] * 10, ["1", "0"] * 10])
def test_boolean_float_and_digit_string_labels_become_0_1(labels: list) -> None:
    X = pd.DataFrame({"a": range(20)})
    objective = FairObjective((X, labels, ["x", "x", "y", "y"] * 5), "linear",
                              limits="dsp<=0.9")
    assert objective.y.tolist() == [1, 0] * 10 and objective.y.dtype.kind == "i"


def test_custom_models_get_random_state_only_if_they_take_it_and_are_called_once() -> None:
    X = pd.DataFrame({"a": range(40)})
    data = (X, [0, 1] * 20, ["x", "x", "y", "y"] * 10)
    seen: list[object] = []

    def seeded(trial: optuna.Trial, *, random_state: int):
        from sklearn.tree import DecisionTreeClassifier

        seen.append(random_state)
        return DecisionTreeClassifier(max_depth=trial.suggest_int("depth", 1, 2))

    FairObjective(data, seeded, limits="dsp<=0.5", random_state=7).make_pipeline(
        optuna.trial.FixedTrial({"depth": 1})
    )
    assert seen == [7]

    def broken(trial: optuna.Trial, random_state: int = 0):
        seen.append("called")
        trial.suggest_int("depth", 1, 2)
        raise TypeError("a bug inside the user's model function")

    seen.clear()
    objective = FairObjective(data, broken, limits="dsp<=0.5")
    with pytest.raises(TypeError, match="a bug inside the user's model function"):
        objective.make_pipeline(optuna.trial.FixedTrial({"depth": 1}))
    assert seen == ["called"]  # not retried without random_state


# Issue 24 ---------------------------------------------------------------------------------


def _toy(sensitive: list, n: int = 240) -> tuple[pd.DataFrame, np.ndarray, list]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"x": rng.normal(size=n)})
    y = (X["x"] > 0).astype(int).to_numpy()
    return X, y, (sensitive * n)[:n]


def test_one_class_models_are_recognised_and_rates_recorded_per_group() -> None:
    from sklearn.dummy import DummyClassifier

    from fairtune.tuning import POSITIVE_RATE_KEY, POSITIVE_RATES_KEY, predicts_one_class

    def build(trial: optuna.Trial) -> object:
        if trial.suggest_categorical("kind", ["constant", "forest"]) == "constant":
            return DummyClassifier(strategy="most_frequent")
        return RandomForestClassifier(n_estimators=5, random_state=0)

    objective = FairObjective("german", build, limits="dsp<=0.05")
    study = optuna.create_study(direction="maximize")
    for kind in ("constant", "forest"):
        study.enqueue_trial({"kind": kind})
    study.optimize(objective, n_trials=2)
    constant, forest = study.trials
    # German: 70 % good credit, so the constant model predicts 1 (good) for everyone.
    assert predicts_one_class(constant) == 1 and constant.user_attrs[POSITIVE_RATE_KEY] == 1.0
    assert constant.user_attrs[POSITIVE_RATES_KEY] == {"Male": 1.0, "Female": 1.0}
    assert constant.user_attrs["fairtune:demographic_parity"] == 0.0
    assert predicts_one_class(forest) is None
    rates = forest.user_attrs[POSITIVE_RATES_KEY]
    s_valid = objective.s_valid.astype(str).to_numpy()
    y_pred = objective.make_pipeline(optuna.trial.FixedTrial({"kind": "forest"})).fit(
        objective.X_train, objective.y_train).predict(objective.X_valid)
    assert rates == pytest.approx({g: float(np.mean(y_pred[s_valid == g])) for g in set(s_valid)})
    assert forest.user_attrs[POSITIVE_RATE_KEY] == pytest.approx(float(np.mean(y_pred)))


@pytest.mark.parametrize(
    ("sensitive", "match"),
    [
        (["a"], "`dataset` sensitive features must define at least two groups to compare, but "
                "got a single group 'a'."),
        (["a", "b", None], "`dataset` sensitive features must not contain NaN or missing values, "
                           "but got 20 of them."),
    ],
)
def test_bad_sensitive_features_are_refused_at_construction(sensitive: list, match: str) -> None:
    X, y, s = _toy(sensitive, n=60)
    with pytest.raises(ValueError, match=re.escape(match)):
        FairObjective((X, y, s), "linear", limits="dsp<=0.1")


def test_a_group_missing_from_the_validation_split_is_refused_at_construction() -> None:
    X, y, _ = _toy(["a"], n=60)
    s = ["a"] * 59 + ["b"]
    # One row of 'b', which the training split drew: the data, not the share, is named.
    with pytest.raises(ValueError, match=re.escape(
            "`dataset` sensitive features gives the group 'b' 0 rows, the group 'a' 6 rows in "
            "the validation split; the limit demographic_parity<=0.1 needs at least 11 rows of "
            "each group there: more rows of the group, or merging it into another.")):
        FairObjective((X, y, s), "linear", limits="dsp<=0.1", random_state=1,
                      validation_size=0.1)


@pytest.mark.parametrize("limit", ["dsp<=2", "demographic_parity<=1", "di>=0"])
def test_a_limit_that_cannot_bind_warns(limit: str) -> None:
    X, y, s = _toy(["a", "b"])
    with pytest.warns(UserWarning, match=re.escape("holds for every model")):
        FairObjective((X, y, s), "linear", limits=limit)


def test_a_minimizing_study_is_refused_at_the_first_trial() -> None:
    X, y, s = _toy(["a", "b"])
    objective = FairObjective((X, y, s), "linear", limits="dsp<=0.1")
    study = optuna.create_study(direction="minimize")
    with pytest.raises(ValueError, match=re.escape(
            "`study` must maximize one value: FairObjective returns its accuracy, to be "
            "maximized, but got directions=['MINIMIZE']")):
        study.optimize(objective, n_trials=1)
    assert study.trials[0].state == optuna.trial.TrialState.FAIL


def test_a_study_remembers_its_setup_and_refuses_another() -> None:
    X, y, s = _toy(["a", "b"])
    first = FairObjective((X, y, s), "linear", limits=["dsp<=0.1", "deo<=0.3"])
    study = optuna.create_study(direction="maximize")
    study.optimize(first, n_trials=1)
    assert study.user_attrs["fairtune:setup"]["limits"] == ["demographic_parity<=0.1",
                                                            "equal_opportunity<=0.3"]
    assert study.user_attrs["fairtune:setup"]["dataset"] == "data (sensitive: sensitive)"
    assert study.user_attrs["fairtune:setup"]["model"] == "linear"
    assert study.user_attrs["fairtune:setup"]["metric"] == "accuracy"
    again = FairObjective((X, y, s), "linear", limits=["deo<=0.3", "dsp<=0.1"])
    study.optimize(again, n_trials=1)  # the same limits in another order
    other = FairObjective((X, y, s), "linear", limits="dsp<=0.2", metric="f1")
    with pytest.raises(ValueError, match=re.escape(
            "was tuned with `metric` 'accuracy', but this run asks for 'f1'; `limits` "
            "'demographic_parity<=0.1, equal_opportunity<=0.3', but this run asks for "
            "'demographic_parity<=0.2': its trials were scored another way and are not comparable with "
            "this run's; use the same `metric` and `limits` as before, or another "
            "`study_name`.")):
        study.optimize(other, n_trials=1)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE", "FAIL"]


def test_bundled_datasets_with_known_issues_warn_through_fair_objective(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The docs say German and COMPAS warn when loaded; FairObjective must not silence it.
    from fairtune.datasets import FairtuneDatasetWarning, _base

    monkeypatch.setattr(_base, "_WARNED", set())
    with pytest.warns(FairtuneDatasetWarning, match="German credit"):
        FairObjective("german", "linear", limits="dsp<=0.1")


def test_refit_best_uses_the_best_fair_trial_of_the_study_limits() -> None:
    # A trial without constraints is feasible for Optuna's best_trial, not fair for fairtune.
    objective = FairObjective("german", "linear", limits="dsp<=0.2")
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(objective, n_trials=3)
    study.add_trial(optuna.trial.create_trial(
        params=study.trials[0].params, distributions=study.trials[0].distributions, value=2.0))
    assert study.best_trial.number == 3
    from fairtune.fairness import best_fair_trial

    best = best_fair_trial(study)
    assert best is not None and best.number < 3
    fitted = objective.refit_best(study)
    expected = objective.make_pipeline(optuna.trial.FixedTrial(best.params)).fit(
        objective.X_dev, objective.y_dev)
    np.testing.assert_array_equal(fitted.predict(objective.X), expected.predict(objective.X))

def test_multi_objective_form_returns_the_metric_and_the_gaps() -> None:
    from fairtune.fairness import demographic_parity_difference
    from fairtune.samplers import MTKBSampler

    objective = FairObjective("german", "linear", objectives=["accuracy", "dsp", "di"])
    assert objective.objectives == ["accuracy", "demographic_parity", "disparate_impact"]
    assert objective.directions == ["maximize", "minimize", "maximize"]
    study = optuna.create_study(directions=objective.directions, sampler=MTKBSampler(seed=0))
    study.optimize(objective, n_trials=3)
    trial = study.trials[0]
    accuracy, gap, ratio = trial.values
    pipeline = objective.make_pipeline(optuna.trial.FixedTrial(trial.params))
    y_pred = pipeline.fit(objective.X_train, objective.y_train).predict(objective.X_valid)
    assert accuracy == pytest.approx(float((y_pred == objective.y_valid.to_numpy()).mean()))
    assert gap == pytest.approx(demographic_parity_difference(
        objective.y_valid, y_pred, sensitive_features=objective.s_valid))
    assert trial.user_attrs["fairtune:demographic_parity"] == gap
    assert 0.0 <= ratio <= 1.0 and not trial.constraints  # no limits: no constraints


def test_multi_objective_form_refits_a_chosen_trial_and_scores_every_objective() -> None:
    from fairtune.fairness import demographic_parity_difference, disparate_impact_ratio

    objective = FairObjective("german", "linear", objectives=["accuracy", "dsp", "di"],
                              test_size=0.2)
    study = optuna.create_study(directions=objective.directions,
                                sampler=optuna.samplers.RandomSampler(seed=1))
    study.optimize(objective, n_trials=4)
    front = sorted(t.number for t in study.best_trials)
    assert len(front) > 1  # no single best trial: the error names the Pareto-optimal ones
    with pytest.raises(ValueError, match=re.escape(f"{len(front)} Pareto-optimal trials {front}")):
        objective.refit_best(study)
    chosen = study.trials[front[0]]
    fitted = objective.refit_best(study, trial=chosen.number, on="training")
    expected = objective.make_pipeline(optuna.trial.FixedTrial(chosen.params)).fit(
        objective.X_train, objective.y_train)
    y_pred = expected.predict(objective.X_test)
    np.testing.assert_array_equal(fitted.predict(objective.X_test), y_pred)
    report = objective.evaluate(fitted)
    # Every objective on the test split; no limits, so no verdict on fairness.
    assert set(report) == {"accuracy", "demographic_parity", "disparate_impact"}
    assert report["accuracy"] == pytest.approx(float((y_pred == objective.y_test.to_numpy()).mean()))
    assert report["demographic_parity"] == pytest.approx(demographic_parity_difference(
        objective.y_test, y_pred, sensitive_features=objective.s_test))
    assert report["disparate_impact"] == pytest.approx(disparate_impact_ratio(
        objective.y_test, y_pred, sensitive_features=objective.s_test))
    assert objective.refit_best(study, trial=chosen).predict(objective.X).shape == (
        len(objective.X),)
    for bad in (99, -1, "0", True):
        with pytest.raises(ValueError, match=rf"`trial` must be the number of a completed trial.*trial={bad!r}"):
            objective.refit_best(study, trial=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "`limits` must be given"),
        ({"objectives": ["accuracy"]}, "two or more metric names"),
        ({"objectives": "accuracy,dsp"}, "two or more metric names"),
        ({"objectives": ["accuracy", "f1"]}, "at most one of"),
        ({"objectives": ["accuracy", "dsp", "demographic_parity"]}, "each metric once"),
        ({"objectives": ["accuracy", "unfairness"]}, "unfairness"),
    ],
)
def test_multi_objective_form_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        FairObjective("german", "linear", **kwargs)


@pytest.mark.parametrize("metric", ["accuracy", "balanced_accuracy", "f1"])
def test_a_randomized_predictors_score_is_the_weighted_score_of_both_outcomes(metric: str) -> None:
    from sklearn import metrics

    from fairtune.tuning._trial import metric_score

    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 400)
    p = np.clip(0.25 + 0.5 * y + rng.normal(scale=0.25, size=400), 0.0, 1.0)
    both = np.concatenate([y, y])
    outcome = np.concatenate([np.ones(400, int), np.zeros(400, int)])
    weight = np.concatenate([p, 1.0 - p])
    function = {"accuracy": metrics.accuracy_score, "f1": metrics.f1_score,
                "balanced_accuracy": metrics.balanced_accuracy_score}[metric]
    assert metric_score(metric, y, p, None) == pytest.approx(
        function(both, outcome, sample_weight=weight), abs=1e-12)
    assert metric_score(metric, y, (p > 0.5).astype(int), None) == pytest.approx(
        function(y, (p > 0.5).astype(int)), abs=1e-12)
    if metric == "balanced_accuracy":  # one label only: the recall of that label
        ones = np.ones(10, int)
        assert metric_score(metric, ones, np.full(10, 0.7), None) == pytest.approx(0.7)
