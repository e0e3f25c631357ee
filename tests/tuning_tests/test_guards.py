"""What a deployed model and the entrances refuse instead of answering wrongly.

Unseen groups and sensitive layouts at prediction, the caller's objects left unchanged, pandas
inputs matched by index label, the favourable label made explicit, and studies that refuse
trials scored on other data.
"""

from __future__ import annotations

import numpy as np
import optuna
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from fairtune.tuning import FairObjective, ReductionClassifier, ThresholdClassifier

optuna.logging.set_verbosity(optuna.logging.WARNING)


def data(n: int = 300, seed: int = 0) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    rng = np.random.default_rng(seed)
    sex = pd.Series(rng.choice(["female", "male"], size=n), name="sex")
    X = pd.DataFrame({"x1": rng.normal(size=n) + np.where(sex == "male", 0.8, -0.8),
                      "x2": rng.normal(size=n), "sex": sex})
    y = pd.Series((X["x1"] + rng.normal(scale=0.7, size=n) > 0).astype(int), name="y")
    return X, y, sex


def linear(trial: optuna.Trial) -> LogisticRegression:
    return LogisticRegression(C=trial.suggest_float("C", 0.1, 10.0, log=True))


def fitted_threshold(**kwargs) -> tuple[ThresholdClassifier, pd.DataFrame, pd.Series]:
    X, y, sex = data()
    model = ThresholdClassifier(LogisticRegression(), **kwargs).fit(
        X[["x1", "x2"]], y, sensitive_features=sex
    )
    return model, X[["x1", "x2"]].head(8), sex.head(8)


@pytest.mark.parametrize("method", ["predict", "predict_proba"])
@pytest.mark.parametrize(
    ("groups", "match"),
    [
        (pd.Series(["Female"] * 8, name="sex"), r"\['Female'\] \(known: \['female', 'male'\]\)"),
        (pd.Series(["female"] * 4 + ["Unknown"] * 4), r"\['Unknown'\] \(known: "),
        (pd.Series([None] * 8, dtype=object), r"\[None\] \(known: "),
    ],
)
def test_threshold_refuses_a_group_it_has_no_threshold_for(groups, match, method) -> None:
    model, X, _ = fitted_threshold()
    with pytest.raises(ValueError, match=rf"ThresholdClassifier\.{method} holds groups the "
                                         rf"model did not see at fit: {match}"):
        getattr(model, method)(X, sensitive_features=groups)


@pytest.mark.parametrize("method", ["predict", "predict_proba"])
def test_threshold_refuses_another_sensitive_layout(method: str) -> None:
    model, X, sex = fitted_threshold()
    two = pd.DataFrame({"sex": sex, "race": ["a"] * 8})
    with pytest.raises(ValueError, match=rf"given to ThresholdClassifier\.{method} must have the "
                                         r"layout seen at fit: 1 column \['sex'\], but got 2 "
                                         r"columns \['sex', 'race'\]"):
        getattr(model, method)(X, sensitive_features=two)
    with pytest.raises(ValueError, match=r"must have one entry per row of X \(8\), but got 3"):
        getattr(model, method)(X, sensitive_features=sex.head(3))


def test_threshold_names_the_method_called_when_groups_are_missing() -> None:
    model, X, sex = fitted_threshold()
    with pytest.raises(ValueError, match=r"must be given to ThresholdClassifier\.predict_proba:"):
        model.predict_proba(X)
    with pytest.raises(ValueError, match=r"must be given to ThresholdClassifier\.predict:"):
        model.predict(X)
    # Known groups, in another container, predict as before.
    np.testing.assert_array_equal(
        model.predict(X, sensitive_features=sex.to_numpy()),
        model.predict(X, sensitive_features=sex),
    )


@pytest.mark.parametrize("cls", [ThresholdClassifier, ReductionClassifier])
def test_mitigations_with_pos_label_predict_the_labels_as_given(cls) -> None:
    X, y, sex = data()
    words = np.where(y == 1, "approved", "denied")
    kwargs = {"max_iter": 5} if cls is ReductionClassifier else {}
    numeric = cls(LogisticRegression(), **kwargs).fit(X[["x1", "x2"]], y, sensitive_features=sex)
    named = cls(LogisticRegression(), pos_label="approved", **kwargs).fit(
        X[["x1", "x2"]], words, sensitive_features=sex
    )
    assert named.classes_.tolist() == ["approved", "denied"]
    expected = np.where(numeric.predict(X[["x1", "x2"]], sensitive_features=sex) == 1,
                        "approved", "denied")
    np.testing.assert_array_equal(named.predict(X[["x1", "x2"]], sensitive_features=sex), expected)
    # predict_proba's columns follow classes_: "approved" (favourable) first here.
    np.testing.assert_allclose(
        named.predict_proba(X[["x1", "x2"]], sensitive_features=sex)[:, 0],
        numeric.predict_proba(X[["x1", "x2"]], sensitive_features=sex)[:, 1],
    )
    with pytest.raises(ValueError, match=r"but got the labels \['approved', 'denied'\] and "
                                         r"pos_label=None"):
        cls(LogisticRegression(), **kwargs).fit(X[["x1", "x2"]], words, sensitive_features=sex)


def test_a_model_that_reads_the_sensitive_column_refuses_unseen_values() -> None:
    X, y, sex = data()
    objective = FairObjective((X, y, sex), linear, limits="dsp<=0.2", test_size=0.25)
    pipeline = objective.make_pipeline(optuna.trial.FixedTrial({"C": 1.0}))
    pipeline.fit(objective.X_dev, objective.y_dev)
    rows = objective.X_test.head(6).copy()
    assert pipeline.predict(rows).shape == (6,)
    rows["sex"] = ["Female", "male", "female", "Female", "male", "male"]
    with pytest.raises(ValueError, match=r"`X\['sex'\]` given to the fitted pipeline holds "
                                         r"values the model did not see at fit: \['Female'\] "
                                         r"\(known: \['female', 'male'\]\)"):
        pipeline.predict(rows)
    with pytest.raises(ValueError, match=r"must have the sensitive columns \['sex'\]"):
        pipeline.predict(rows.drop(columns="sex"))


def test_objective_leaves_the_callers_objects_unchanged() -> None:
    X, y, sex = data()
    X = X.set_axis([10, 11, 12], axis=1)  # integer column names
    sex = sex.set_axis(np.arange(len(sex)) + 1000)  # another index than X's
    X_before, sex_before, y_before = X.copy(), sex.copy(), y.copy()
    with pytest.raises(ValueError, match=r"`sensitive` is matched to the rows of X by index "
                                         r"label, but its index lacks 300 of X's labels"):
        FairObjective((X, y, sex), linear, limits="dsp<=0.2")
    FairObjective((X, y.to_numpy(), sex.to_numpy()), linear, limits="dsp<=0.2")
    pd.testing.assert_frame_equal(X, X_before)
    pd.testing.assert_series_equal(sex, sex_before)
    pd.testing.assert_series_equal(y, y_before)
    assert list(X.columns) == [10, 11, 12]


def test_objective_matches_pandas_inputs_by_index_label() -> None:
    X, y, sex = data()
    order = np.random.default_rng(1).permutation(len(X))
    shuffled = FairObjective((X, y.iloc[order], sex.iloc[order]), linear, limits="dsp<=0.2")
    straight = FairObjective((X, y, sex), linear, limits="dsp<=0.2")
    pd.testing.assert_series_equal(shuffled.sensitive, straight.sensitive)
    pd.testing.assert_series_equal(shuffled.y, straight.y)
    assert shuffled.data_fingerprint == straight.data_fingerprint
    # Arrays are matched by position: the shuffled groups are then other rows' groups.
    by_position = FairObjective((X, y.to_numpy()[order], sex.to_numpy()[order]), linear,
                                limits="dsp<=0.2")
    assert by_position.data_fingerprint != straight.data_fingerprint


def test_objective_pos_label_scores_the_favourable_label() -> None:
    X, y, sex = data()
    words = pd.Series(np.where(y == 1, "approved", "denied"))
    named = FairObjective((X, words, sex), linear, limits="dsp<=0.2", pos_label="approved")
    numeric = FairObjective((X, y, sex), linear, limits="dsp<=0.2")
    pd.testing.assert_series_equal(named.y, numeric.y)
    flipped = FairObjective((X, words, sex), linear, limits="dsp<=0.2", pos_label="denied")
    np.testing.assert_array_equal(flipped.y.to_numpy(), 1 - numeric.y.to_numpy())


def test_a_study_refuses_an_objective_scored_on_other_rows() -> None:
    X, y, sex = data()
    study = optuna.create_study(direction="maximize")
    study.optimize(FairObjective((X, y, sex), linear, limits="dsp<=0.2"), n_trials=1)
    same = FairObjective((X, y, sex), linear, limits="dsp<=0.2")
    study.optimize(same, n_trials=1)  # the same data: the study goes on
    other = FairObjective((X.iloc[:-10], y.iloc[:-10], sex.iloc[:-10]), linear,
                          limits="dsp<=0.2")
    with pytest.raises(ValueError, match=r"holds trials scored on other data \(data fingerprint "
                                         r"'[0-9a-f]{16}' there, '[0-9a-f]{16}' here.*create a "
                                         r"new study for this data"):
        study.optimize(other, n_trials=1)
    with pytest.raises(ValueError, match=r"holds trials scored on other data"):
        other.refit_best(study)  # nor does it pick the best of them for other rows
    assert same.refit_best(study, trial=0).predict(X.head(2)).shape == (2,)
    resplit = FairObjective((X, y, sex), linear, limits="dsp<=0.2", cv=3)
    assert resplit.data_fingerprint != same.data_fingerprint
    assert len(study.trials) == 3 and study.trials[-1].state.name == "FAIL"


def _search(**kwargs):
    from optuna.distributions import FloatDistribution

    from fairtune.tuning import FairSearchCV

    kwargs.setdefault("limits", "dsp<=0.9")
    return FairSearchCV(LogisticRegression(), {"C": FloatDistribution(0.1, 10.0, log=True)},
                        cv=2, n_trials=2, random_state=0, **kwargs)


def test_search_in_a_stored_study_refuses_trials_scored_on_other_rows(tmp_path) -> None:
    import sklearn
    from sklearn.model_selection import cross_validate

    X, y, sex = data()
    X = X[["x1", "x2"]]
    storage = f"sqlite:///{tmp_path / 'search.db'}"
    study = optuna.create_study(direction="maximize", storage=storage, study_name="search")
    search = _search(study=study)
    search.fit(X, y, sensitive_features=sex)
    search.fit(X, y, sensitive_features=sex)  # the same rows: the search goes on there
    assert len(study.trials) == 4
    with pytest.raises(ValueError, match=r"`study` 'search' holds trials scored on other data.*"
                                         r"A clone of the search.*shares a database study"):
        search.fit(X.iloc[:200], y.iloc[:200], sensitive_features=sex.iloc[:200])
    # Outer cross-validation clones the search: on a database storage the clones share the
    # study, and the second outer fold refuses the first fold's trials.
    sklearn.set_config(enable_metadata_routing=True)
    try:
        fresh = optuna.create_study(direction="maximize", storage=storage, study_name="outer")
        outer = _search(study=fresh).set_fit_request(sensitive_features=True)
        with pytest.raises(ValueError, match=r"holds trials scored on other data"):
            cross_validate(outer, X, y, cv=2, params={"sensitive_features": sex},
                           error_score="raise")
        # Without a study, each outer fold searches on its own.
        scores = cross_validate(_search().set_fit_request(sensitive_features=True), X, y, cv=2,
                                params={"sensitive_features": sex}, error_score="raise")
        assert len(scores["test_score"]) == 2
    finally:
        sklearn.set_config(enable_metadata_routing=False)


def test_search_refuses_groups_it_never_saw_at_prediction() -> None:
    X, y, sex = data()
    threshold = _search(mitigation="threshold").fit(X[["x1", "x2"]], y, sensitive_features=sex)
    unseen = pd.Series(["Female"] * 5 + ["male"] * 5, name="sex")
    with pytest.raises(ValueError, match=r"`sensitive_features` given to FairSearchCV\.predict "
                                         r"holds groups the model did not see at fit: "
                                         r"\['Female'\] \(known: \['female', 'male'\]\)"):
        threshold.predict(X[["x1", "x2"]].head(10), sensitive_features=unseen)
    with pytest.raises(ValueError, match=r"ThresholdClassifier\.predict_proba holds groups"):
        threshold.best_estimator_.predict_proba(X[["x1", "x2"]].head(10),
                                                sensitive_features=unseen)
    # A model that reads the sensitive column of X.
    from sklearn.compose import make_column_transformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    from fairtune.tuning import FairSearchCV
    from optuna.distributions import FloatDistribution

    pipeline = make_pipeline(
        make_column_transformer((OneHotEncoder(handle_unknown="ignore"), ["sex"]),
                                remainder="passthrough"),
        LogisticRegression(),
    )
    reads = FairSearchCV(pipeline, {"logisticregression__C": FloatDistribution(0.1, 10.0)},
                         limits="dsp<=0.9", cv=2, n_trials=2, random_state=0)
    reads.fit(X, y, sensitive_features=sex)
    rows = X.head(10).assign(sex=unseen.to_numpy())
    for method in ("predict", "predict_proba", "decision_function"):
        with pytest.raises(ValueError, match=rf"`X\['sex'\]` given to FairSearchCV\.{method} "
                                             r"holds values the model did not see at fit: "
                                             r"\['Female'\] \(known: \['female', 'male'\]\)"):
            getattr(reads, method)(rows)
    with pytest.raises(ValueError, match=r"FairSearchCV\.score holds values"):
        reads.score(rows, y.head(10))
    assert reads.predict(X.head(10)).shape == (10,)


def test_search_refuses_labels_or_groups_indexed_otherwise_than_X() -> None:
    X, y, sex = data()
    order = np.random.default_rng(0).permutation(len(X))
    with pytest.raises(ValueError, match=r"`sensitive_features` must have the index of X: "
                                         r"FairSearchCV matches rows by position"):
        _search().fit(X[["x1", "x2"]], y, sensitive_features=sex.iloc[order])
    with pytest.raises(ValueError, match=r"`y` must have the index of X"):
        _search().fit(X[["x1", "x2"]], y.iloc[order], sensitive_features=sex)
    # Reindexed, or as arrays, the rows match.
    _search().fit(X[["x1", "x2"]], y, sensitive_features=sex.iloc[order].loc[X.index])
    _search().fit(X[["x1", "x2"]], y, sensitive_features=sex.iloc[order].to_numpy()[np.argsort(order)])


def test_search_starts_from_the_untuned_configuration_once_per_study() -> None:
    from optuna.distributions import FloatDistribution, IntDistribution

    from fairtune.tuning import FairSearchCV

    X, y, sex = data()
    params = {"C": FloatDistribution(0.01, 0.5), "max_iter": IntDistribution(10, 500, step=10)}
    study = optuna.create_study(direction="maximize")
    search = FairSearchCV(LogisticRegression(), params, limits="dsp<=0.9", cv=2, n_trials=2,
                          random_state=0, study=study, mitigation="threshold")
    search.fit(X[["x1", "x2"]], y, sensitive_features=sex)
    # LogisticRegression()'s C=1.0 clipped into [0.01, 0.5], max_iter=100 on the step, and
    # ThresholdOptimizer aimed at the bound.
    assert study.trials[0].params == {"C": 0.5, "max_iter": 100, "threshold_tolerance": 1.0}
    search.fit(X[["x1", "x2"]], y, sensitive_features=sex)  # resumed: not run again
    assert [t.params == study.trials[0].params for t in study.trials] == [True] + [False] * 3
    # A fairtune space starts from its defaults.
    from fairtune.tuning import get_space

    from sklearn.ensemble import RandomForestClassifier

    spaced = FairSearchCV(RandomForestClassifier(), "random_forest", limits="dsp<=0.9", cv=2,
                          n_trials=1, random_state=0)
    spaced.fit(X[["x1", "x2"]], y, sensitive_features=sex)
    assert spaced.study_.trials[0].params == get_space("random_forest").defaults


def test_create_study_resumes_a_stored_study_without_repeating_the_untuned_model(tmp_path) -> None:
    X, y, sex = data()
    objective = FairObjective((X, y, sex), "random_forest", limits="dsp<=0.5")
    storage = f"sqlite:///{tmp_path / 's.db'}"
    study = objective.create_study(storage=storage, study_name="s", seed=3)
    study.optimize(objective, n_trials=2)
    again = objective.create_study(storage=storage, study_name="s", seed=3)
    again.optimize(objective, n_trials=1)
    params = [t.params for t in again.trials]
    assert params[0] == objective.default_params() and len(params) == 3
    assert params.count(objective.default_params()) == 1
    # Another objective's data is refused by the stored study.
    other = FairObjective((X.iloc[:100], y.iloc[:100], sex.iloc[:100]), "random_forest",
                          limits="dsp<=0.5")
    with pytest.raises(ValueError, match=r"holds trials scored on other data"):
        other.create_study(storage=storage, study_name="s")


def _rare_value_data(n: int = 2000, rare: int = 3) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """A sensitive column the model reads (``race``) whose values are finer than the groups,
    one of them on ``rare`` rows only (COMPAS's 11 'Native American' rows)."""
    rng = np.random.default_rng(1)
    race = pd.Series(rng.choice(["w", "b", "h"], size=n), name="race")
    race.iloc[:rare] = "n"
    X = pd.DataFrame({"x1": rng.normal(size=n), "race": race})
    y = pd.Series((X["x1"] + rng.normal(size=n) > 0).astype(int), name="y")
    return X, y, (race == "w").map({True: "W", False: "other"}).rename("race")


@pytest.mark.parametrize("kwargs", [
    {"test_size": 0.95},
    {"confidence": 0.6, "safety_size": 0.95, "limits": "dsp<=0.9"},
    {"validation_size": 0.95},
])
def test_every_value_a_model_reads_stays_in_the_rows_it_is_fitted_on(kwargs: dict) -> None:
    # A held-out share that takes every row of a value would give a model a value it never
    # saw at fit: one such row moves to the rows the model is fitted on.
    kwargs.setdefault("limits", "dsp<=0.3")
    objective = FairObjective(_rare_value_data(), linear, **kwargs)
    rows = objective._rows
    (fit, valid), = rows.splits.folds
    # The share drew all three rows of 'n' into the held-out rows; one came back.
    assert list(rows.X_dev.iloc[fit]["race"]).count("n") == 1
    held = {"test_size": rows.X_test, "safety_size": rows.X_safe,
            "validation_size": rows.X_dev.iloc[valid]}[next(k for k in kwargs if k in (
                "test_size", "safety_size", "validation_size"))]
    assert list(held["race"]).count("n") == 2
    assert not set(held.index) & set(rows.X_dev.iloc[fit].index)
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=1)
    assert study.trials[0].state == optuna.trial.TrialState.COMPLETE
    if "test_size" in kwargs:
        assert set(objective.evaluate(objective.refit_best(study, trial=0))) >= {"accuracy"}


def test_a_split_that_keeps_every_value_is_drawn_as_before() -> None:
    from sklearn.model_selection import train_test_split

    X, y, group = _rare_value_data(rare=40)
    objective = FairObjective((X, y, group), linear, limits="dsp<=0.3", test_size=0.25)
    _, X_test = train_test_split(X, test_size=0.25, stratify=y, random_state=0)
    assert list(objective.X_test.index) == list(X_test.index)


def test_cross_validation_that_leaves_a_value_out_of_a_fold_is_refused_before_any_trial() -> None:
    with pytest.raises(ValueError, match=r"cv=3 leaves the training rows of fold \d without "
                                         r"the value 'n' \(1 row\) of the sensitive column "
                                         r"'race'.*`validation_size`"):
        FairObjective(_rare_value_data(rare=1), linear, limits="dsp<=0.3", cv=3)


def _one_sided(n: int = 600) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Group 'B' has favourable labels only: its false positive rate has no row to be
    measured on."""
    rng = np.random.default_rng(0)
    group = pd.Series(np.where(rng.random(n) < 0.3, "B", "A"), name="g")
    X = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n)})
    y = pd.Series((X["x1"] + rng.normal(scale=0.5, size=n) > 0).astype(int), name="y")
    y[group == "B"] = 1
    return X, y, group


_NO_NEGATIVES = (r"group 'B' has no row labelled 0 \(unfavourable\) among its \d+ rows: its "
                 r"false positive rate is undefined, and equalized_odds<=0\.1 needs it\. The "
                 r"data has no unfavourable rows of the group\. Give it unfavourable rows there "
                 r"\(more data\)")


def test_a_limit_on_a_rate_a_group_has_no_rows_for_is_refused_before_any_trial(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    from optuna.distributions import FloatDistribution

    from fairtune.cli import main
    from fairtune.tuning import FairSearchCV

    X, y, group = _one_sided()
    with pytest.raises(ValueError, match=r"`dataset` sensitive features .*" + _NO_NEGATIVES):
        FairObjective((X, y, group), linear, limits="equalized_odds<=0.1")
    search = FairSearchCV(LogisticRegression(), {"C": FloatDistribution(0.1, 10, log=True)},
                          limits="equalized_odds<=0.1", n_trials=2, cv=3)
    with pytest.raises(ValueError, match=r"`sensitive_features` .*" + _NO_NEGATIVES):
        search.fit(X, y, sensitive_features=group)
    assert not hasattr(search, "study_")  # no trial ran
    path = tmp_path / "one_sided.csv"
    X.assign(g=group, y=y).to_csv(path, index=False)
    storage = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["tune", "--data", str(path), "--target", "y", "--sensitive", "g", "--model",
                 "linear", "--limit", "equalized_odds<=0.1", "--n-trials", "2", "--no-progress",
                 "--storage", storage, "--study-name", "s"]) == 2
    assert "group 'B' has no row labelled 0" in capsys.readouterr().err
    assert optuna.get_all_study_names(storage) == []
    # Demographic parity and equal opportunity measure rows group 'B' has: they run.
    FairObjective((X, y, group), linear, limits=["dsp<=0.1", "equal_opportunity<=0.1"])
