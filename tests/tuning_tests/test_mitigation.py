from __future__ import annotations

import pickle
import re

import numpy as np
import optuna
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from fairtune.fairness import demographic_parity_difference, equalized_odds_difference
from fairtune.samplers import FairBOSampler
from fairtune.tuning._setup import read_setup
from fairtune.tuning import (
    MITIGATIONS,
    FairObjective,
    ReductionClassifier,
    ThresholdClassifier,
)
from fairtune.tuning.mitigation import parse_mitigation
from tests.conftest import biased_data as _biased_data


def biased_data(n: int = 600, seed: int = 0):
    return _biased_data(n, seed, group_column=True)

optuna.logging.set_verbosity(optuna.logging.WARNING)

ALL = ["threshold", "reduction", "correlation_remover"]


def linear_model(trial: optuna.Trial) -> LogisticRegression:
    return LogisticRegression(C=trial.suggest_float("C", 0.01, 10.0, log=True))


def objective(mitigation, **kwargs) -> FairObjective:
    kwargs.setdefault("limits", "demographic_parity<=0.05")
    return FairObjective(biased_data(), linear_model, mitigation=mitigation, test_size=0.25,
                         **kwargs)


def fit_trial(obj: FairObjective, params: dict, X, y, s):
    pipeline = obj.make_pipeline(optuna.trial.FixedTrial(params))
    if isinstance(pipeline, (ThresholdClassifier, ReductionClassifier)):
        return pipeline.fit(X, y, sensitive_features=s)
    return pipeline.fit(X, y)


def predict(pipeline, X, s) -> np.ndarray:
    if isinstance(pipeline, (ThresholdClassifier, ReductionClassifier)):
        return pipeline.predict(X, sensitive_features=s)
    return pipeline.predict(X)


PARAMS = {
    "threshold": {"C": 1.0, "threshold_tolerance": 0.0},
    "reduction": {"C": 1.0, "reduction_bound": 0.5, "reduction_max_iter": 20},
    "correlation_remover": {"C": 1.0, "correlation_alpha": 1.0},
}


@pytest.mark.parametrize("mitigation", ALL)
def test_the_constraint_is_measured_on_the_mitigated_validation_predictions(mitigation: str) -> None:
    obj = objective(mitigation)
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial(PARAMS[mitigation])
    study.optimize(obj, n_trials=1)
    trial = study.trials[0]
    assert trial.params == PARAMS[mitigation]
    assert trial.user_attrs["fairtune:mitigation_used"] == mitigation

    fitted = fit_trial(obj, PARAMS[mitigation], obj.X_train, obj.y_train, obj.s_train)
    y = obj.y_valid.to_numpy()
    if mitigation == "correlation_remover":
        p = predict(fitted, obj.X_valid, obj.s_valid).astype(float)
    else:
        # A randomized predictor is scored by its expected predictions, not one draw.
        p = fitted.predict_proba(obj.X_valid, sensitive_features=obj.s_valid)[:, 1]
        assert 0 < np.mean((p > 0) & (p < 1))
    rates = pd.Series(p).groupby(obj.s_valid.to_numpy()).mean()
    dsp = rates.max() - rates.min()
    assert trial.user_attrs["fairtune:demographic_parity"] == pytest.approx(dsp)
    assert trial.constraints["demographic_parity"] == pytest.approx(dsp - 0.05)
    assert trial.value == pytest.approx(float(np.mean(y * p + (1 - y) * (1 - p))))
    assert trial.user_attrs["fairtune:validation_error"] == pytest.approx(1 - trial.value)

    # The raw model (no mitigation) is far from fair on these rows: a constraint computed on
    # its predictions would be a different number.
    raw = FairObjective(biased_data(), linear_model, limits="dsp<=0.05", test_size=0.25)
    raw_pipeline = raw.make_pipeline(optuna.trial.FixedTrial({"C": 1.0})).fit(raw.X_train, raw.y_train)
    raw_dsp = demographic_parity_difference(
        raw.y_valid, raw_pipeline.predict(raw.X_valid), sensitive_features=raw.s_valid
    )
    assert raw_dsp > 0.4
    assert dsp < raw_dsp - 0.2


@pytest.mark.parametrize("mitigation", ALL)
def test_each_mitigation_tunes_refits_evaluates_and_pickles(mitigation: str) -> None:
    obj = objective(mitigation, limits="demographic_parity<=0.1")
    study = optuna.create_study(direction="maximize", sampler=FairBOSampler(seed=0, n_startup_trials=2))
    study.enqueue_trial(PARAMS[mitigation])
    study.optimize(obj, n_trials=3)
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    for t in study.trials:
        assert set(t.params) == set(PARAMS[mitigation])
    pipeline = obj.refit_best(study)
    report = obj.evaluate(pipeline)
    assert set(report) == {"accuracy", "demographic_parity", "fair"}
    y_pred = predict(pipeline, obj.X_test, obj.s_test)
    assert report["accuracy"] == pytest.approx(float(np.mean(y_pred == obj.y_test.to_numpy())))
    assert report["demographic_parity"] == pytest.approx(
        demographic_parity_difference(obj.y_test, y_pred, sensitive_features=obj.s_test)
    )
    restored = pickle.loads(pickle.dumps(pipeline))
    np.testing.assert_array_equal(predict(restored, obj.X_test, obj.s_test), y_pred)
    # Randomized predictors draw from a fixed random_state: the same rows, the same labels.
    np.testing.assert_array_equal(predict(pipeline, obj.X_test, obj.s_test), y_pred)
    validated = obj.refit_best(study, on="training")
    assert obj.evaluate(validated)["accuracy"] >= 0.0


def test_a_trial_is_reproducible() -> None:
    values = []
    for _ in range(2):
        obj = objective(["threshold", "reduction"])
        study = optuna.create_study(direction="maximize")
        study.enqueue_trial({**PARAMS["threshold"], **PARAMS["reduction"], "mitigation": "reduction"})
        study.enqueue_trial({**PARAMS["threshold"], **PARAMS["reduction"], "mitigation": "threshold"})
        study.optimize(obj, n_trials=2)
        values.append([(t.value, t.user_attrs["fairtune:demographic_parity"]) for t in study.trials])
    assert values[0] == values[1]


def test_threshold_predict_without_sensitive_features_is_a_clear_error() -> None:
    obj = objective("threshold")
    pipeline = fit_trial(obj, PARAMS["threshold"], obj.X_dev, obj.y_dev, obj.s_dev)
    with pytest.raises(ValueError, match=r"`sensitive_features` must be given to "
                                         r"ThresholdClassifier\.predict.*got sensitive_features=None"):
        pipeline.predict(obj.X_test)
    restored = pickle.loads(pickle.dumps(pipeline))
    with pytest.raises(ValueError, match="sensitive_features"):
        restored.predict(obj.X_test)
    assert obj.needs_sensitive_features() == "predict(X, sensitive_features=...)"


def test_what_a_deployed_pipeline_needs_at_prediction() -> None:
    X, y, s = biased_data()
    hidden = FairObjective((X.drop(columns="group"), y, s), linear_model, limits="dsp<=0.05",
                           mitigation=["threshold", "reduction"])
    assert hidden.needs_sensitive_features({"mitigation": "reduction"}) is None
    assert hidden.needs_sensitive_features({"mitigation": "threshold"}) == (
        "predict(X, sensitive_features=...)"
    )
    seen = objective("reduction")  # the model takes the group column as an input
    assert "columns of X" in seen.needs_sensitive_features()
    assert "columns of X" in objective("correlation_remover").needs_sensitive_features()
    # The reduction's pipeline predicts from X alone.
    params = {**PARAMS["threshold"], **PARAMS["reduction"], "mitigation": "reduction"}
    reduction = fit_trial(hidden, params, hidden.X_dev, hidden.y_dev, hidden.s_dev)
    assert isinstance(reduction, ReductionClassifier)
    assert reduction.predict(hidden.X_dev.head(5)).shape == (5,)


def test_a_list_makes_the_mitigation_a_categorical_hyperparameter() -> None:
    obj = objective(ALL)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(obj, n_trials=6)
    distribution = study.trials[0].distributions["mitigation"]
    assert isinstance(distribution, optuna.distributions.CategoricalDistribution)
    assert list(distribution.choices) == ALL
    every_setting = {"C", "mitigation", "threshold_tolerance", "reduction_bound",
                     "reduction_max_iter", "correlation_alpha"}
    for t in study.trials:
        assert set(t.params) == every_setting  # a fixed dimension, whichever is used
        assert t.user_attrs["fairtune:mitigation_used"] == t.params["mitigation"]
    assert read_setup(study)["mitigation"] == ALL


def test_correlation_remover_decorrelates_and_drops_the_sensitive_columns() -> None:
    obj = objective("correlation_remover")
    pipeline = fit_trial(obj, PARAMS["correlation_remover"], obj.X_dev, obj.y_dev, obj.s_dev)
    assert list(pipeline.named_steps) == ["check_groups", "preprocess", "decorrelate", "model"]
    encoded = pipeline.named_steps["preprocess"].transform(obj.X_dev)
    decorrelated = pipeline.named_steps["decorrelate"].transform(encoded)
    assert encoded.shape[1] == 4  # group_a, group_b, x1, x2
    assert decorrelated.shape[1] == 2  # the group's two columns removed
    is_a = (obj.s_dev == "a").to_numpy().astype(float)
    assert abs(np.corrcoef(encoded[:, 2], is_a)[0, 1]) > 0.5  # x1 follows the group ...
    assert abs(np.corrcoef(decorrelated[:, 0], is_a)[0, 1]) < 1e-8  # ... and the decorrelated column does not


def test_threshold_follows_the_limit_and_its_tolerance() -> None:
    obj = objective("threshold", limits="equalized_odds<=0.1")
    study = optuna.create_study(direction="maximize")
    study.optimize(obj, n_trials=1)
    # Equalized odds is fitted exactly (fairlearn cannot relax it): no tolerance to tune.
    assert set(study.trials[0].params) == {"C"}
    pipeline = obj.make_pipeline(optuna.trial.FixedTrial({"C": 1.0}))
    assert pipeline.constraint == "equalized_odds" and pipeline.tolerance is None
    fitted = pipeline.fit(obj.X_dev, obj.y_dev, sensitive_features=obj.s_dev)
    gap = equalized_odds_difference(
        obj.y_dev, fitted.predict(obj.X_dev, sensitive_features=obj.s_dev),
        sensitive_features=obj.s_dev,
    )
    assert gap < 0.1
    relaxed = objective("threshold").make_pipeline(
        optuna.trial.FixedTrial({"C": 1.0, "threshold_tolerance": 0.4})
    )
    assert relaxed.constraint == "demographic_parity"
    assert relaxed.tolerance == pytest.approx(0.4 * 0.05)


def test_threshold_holdout_fits_thresholds_on_rows_the_model_did_not_train_on() -> None:
    X, y, s = biased_data(400)
    model = ThresholdClassifier(LogisticRegression(), tolerance=0.0, holdout=0.5).fit(
        X[["x1", "x2"]], y, sensitive_features=s
    )
    inner = model.threshold_optimizer_.estimator.estimator
    assert inner.n_features_in_ == 2
    # The estimator saw half of the rows (refitting on them gives the same coefficients).
    from sklearn.model_selection import train_test_split

    fit_rows, _ = train_test_split(np.arange(400), test_size=0.5, stratify=y, random_state=0)
    again = LogisticRegression().fit(X[["x1", "x2"]].iloc[fit_rows], y.iloc[fit_rows])
    np.testing.assert_allclose(inner.coef_, again.coef_)
    with pytest.raises(ValueError, match=r"`holdout` must be in \[0, 0.9\], but got holdout=1.5"):
        ThresholdClassifier(LogisticRegression(), holdout=1.5).fit(X[["x1"]], y, sensitive_features=s)


def test_cross_validation_scores_each_folds_expected_predictions() -> None:
    obj = FairObjective(biased_data(), linear_model, limits="dsp<=0.05", cv=3,
                        mitigation="threshold")
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial(PARAMS["threshold"])
    study.optimize(obj, n_trials=1)
    y = obj.y_dev.to_numpy()
    p = np.full(len(y), np.nan)
    for fit_rows, valid_rows in obj._rows.splits.folds:  # each fold's own sensitive features
        fitted = fit_trial(obj, PARAMS["threshold"], obj.X_dev.iloc[fit_rows],
                           obj.y_dev.iloc[fit_rows], obj.s_dev.iloc[fit_rows])
        p[valid_rows] = fitted.predict_proba(
            obj.X_dev.iloc[valid_rows], sensitive_features=obj.s_dev.iloc[valid_rows])[:, 1]
    assert not np.isnan(p).any()
    rates = pd.Series(p).groupby(obj.s_dev.to_numpy()).mean()
    trial = study.trials[0]
    assert trial.user_attrs["fairtune:demographic_parity"] == pytest.approx(rates.max() - rates.min())
    assert trial.value == pytest.approx(float(np.mean(y * p + (1 - y) * (1 - p))))


def test_a_study_refuses_another_mitigation() -> None:
    study = optuna.create_study(direction="maximize")
    study.optimize(objective("threshold"), n_trials=1)
    with pytest.raises(ValueError, match="was tuned with `mitigation` 'threshold', but this run asks for 'reduction'"):
        study.optimize(objective("reduction"), n_trials=1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mitigation": "bogus"}, r"`mitigation` must be None, one of \['threshold', 'reduction', "
                                  r"'correlation_remover'\].*got mitigation='bogus'"),
        ({"mitigation": []}, r"`mitigation` must be None.*got mitigation=\[\]"),
        ({"mitigation": 3}, r"`mitigation` must be None.*got mitigation=3"),
        ({"mitigation": "threshold", "metric": "roc_auc"},
         r"`mitigation` 'threshold' predicts randomized labels.*`metric` must not be 'roc_auc'"),
        ({"mitigation": "threshold", "limits": None, "objectives": ["accuracy", "dsp"]},
         r"`limits` must be given with it"),
    ],
)
def test_bad_mitigation_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        objective(**kwargs)


def test_correlation_remover_needs_the_sensitive_columns_in_X() -> None:
    X, y, s = biased_data()
    # Kept out of the model's inputs: refused as a contradiction, naming both arguments.
    with pytest.raises(ValueError, match=r"'correlation_remover' decorrelates the model's inputs "
                                         r"from the sensitive columns.*use_sensitive_feature="
                                         r"False"):
        FairObjective((X, y, s), linear_model, limits="dsp<=0.05", use_sensitive_feature=False,
                      mitigation="correlation_remover")
    # Not among the columns of X at all: refused naming them.
    with pytest.raises(ValueError, match=r"'correlation_remover'.*must be columns of X.*"
                                         r"\['group'\]"):
        FairObjective((X.drop(columns="group", errors="ignore"), y, s), linear_model,
                      limits="dsp<=0.05", mitigation="correlation_remover")


def test_parse_mitigation_and_the_spec_table() -> None:
    assert parse_mitigation(None) == []
    assert parse_mitigation("reduction") == ["reduction"]
    assert parse_mitigation(["threshold", "threshold", "reduction"]) == ["threshold", "reduction"]
    assert list(MITIGATIONS) == ALL
    assert MITIGATIONS["reduction"].sensitive_at_prediction is None
    assert MITIGATIONS["threshold"].stage == "post"


@pytest.mark.parametrize("mitigation", [None, "threshold", "reduction", ALL])
def test_a_study_starts_from_the_untuned_model_once(mitigation) -> None:
    from fairtune.tuning import SPACES, register_space

    register_space("logistic_with_defaults", linear_model, defaults={"C": 1.0})
    try:
        obj = FairObjective(biased_data(), "logistic_with_defaults", mitigation=mitigation,
                            limits="demographic_parity<=0.05", test_size=0.25)
        # The mitigation as a practitioner sets it up: aimed at the bound, fairlearn's defaults.
        expected = {"C": 1.0, **{
            None: {},
            "threshold": {"threshold_tolerance": 1.0},
            "reduction": {"reduction_bound": 1.0, "reduction_max_iter": 50},
        }.get(mitigation if isinstance(mitigation, (str, type(None))) else "list", {
            "mitigation": "threshold", "threshold_tolerance": 1.0, "reduction_bound": 1.0,
            "reduction_max_iter": 50, "correlation_alpha": 1.0,
        })}
        assert obj.default_params() == expected
        study = optuna.create_study(direction="maximize", sampler=FairBOSampler(seed=0))
        assert obj.enqueue_defaults(study)
        assert not obj.enqueue_defaults(study)  # already waiting
        study.optimize(obj, n_trials=2)
        assert study.trials[0].params == expected and study.trials[1].params != expected
        assert not obj.enqueue_defaults(study)  # already run: a resumed study does not repeat it
        assert len(study.trials) == 2
        if mitigation == "threshold":
            # threshold_tolerance 1: fairlearn's tol is the limit's bound itself.
            assert obj.make_pipeline(optuna.trial.FixedTrial(expected)).tolerance == 0.05
    finally:
        SPACES.pop("logistic_with_defaults", None)


def test_a_space_without_defaults_enqueues_nothing() -> None:
    obj = objective("threshold")  # a callable model: no defaults
    study = optuna.create_study(direction="maximize")
    assert obj.default_params() is None and not obj.enqueue_defaults(study)
    assert study.trials == []


@pytest.mark.parametrize("limit", ["demographic_parity", "equalized_odds"])
def test_threshold_probabilities_are_the_mean_of_its_draws(limit: str) -> None:
    X, y, s = biased_data(n=800)
    X = X[["x1", "x2"]]
    constraint = "equalized_odds" if limit == "equalized_odds" else "demographic_parity"
    model = ThresholdClassifier(LogisticRegression(), constraint=constraint, tolerance=0.02)
    model.fit(X, y, sensitive_features=s)
    p = model.predict_proba(X, sensitive_features=s)
    assert p.shape == (len(y), 2)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    # fairlearn's own (private) probability mass function, and the average of many draws.
    reference = model.threshold_optimizer_._pmf_predict(X, sensitive_features=s.to_numpy())
    np.testing.assert_allclose(p, reference)
    draws = np.mean([model.set_params(random_state=r).predict(X, sensitive_features=s)
                     for r in range(300)], axis=0)
    assert np.abs(draws - p[:, 1]).mean() < 0.03
    if limit == "equalized_odds":  # equalized odds randomizes many rows
        assert np.mean((p[:, 1] > 0) & (p[:, 1] < 1)) > 0.1
    with pytest.raises(ValueError, match="`sensitive_features` must be given"):
        model.predict_proba(X)


def test_threshold_probabilities_with_intersectional_groups() -> None:
    X, y, s = biased_data(n=800)
    X = X[["x1", "x2"]]
    groups = pd.DataFrame({"group": s, "half": np.where(np.arange(len(s)) % 2, "odd", "even")})
    model = ThresholdClassifier(LogisticRegression(), tolerance=0.0).fit(
        X, y, sensitive_features=groups)
    p = model.predict_proba(X, sensitive_features=groups)[:, 1]
    labels = groups["group"] + groups["half"]
    rates = pd.Series(p).groupby(labels.to_numpy()).mean()
    assert len(rates) == 4 and rates.max() - rates.min() < 0.02  # exact parity on its rows
    draws = np.mean([model.set_params(random_state=r).predict(X, sensitive_features=groups)
                     for r in range(200)], axis=0)
    assert np.abs(draws - p).mean() < 0.03


def test_reduction_probabilities_are_the_mixture_of_its_models() -> None:
    X, y, s = biased_data(n=800)
    X = X[["x1", "x2"]]
    model = ReductionClassifier(LogisticRegression(), bound=0.02, max_iter=20).fit(
        X, y, sensitive_features=s)
    p = model.predict_proba(X)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    reference = model.exponentiated_gradient_._pmf_predict(X)
    np.testing.assert_allclose(p, np.asarray(reference), atol=1e-12)
    draws = np.mean([model.set_params(random_state=r).predict(X) for r in range(300)], axis=0)
    assert np.abs(draws - p[:, 1]).mean() < 0.03


@pytest.mark.parametrize("mitigation", ["threshold", "reduction"])
def test_trials_are_scored_by_expected_not_drawn_predictions(mitigation: str) -> None:
    """The expected score does not depend on the draw's seed; one draw's score does."""
    obj = objective(mitigation, limits="equalized_odds<=0.05")
    params = {k: v for k, v in PARAMS[mitigation].items() if k != "threshold_tolerance"}
    fitted = fit_trial(obj, params, obj.X_train, obj.y_train, obj.s_train)
    p = fitted.predict_proba(obj.X_valid, sensitive_features=obj.s_valid)[:, 1]
    y = obj.y_valid.to_numpy()
    values = {}
    for expected in (True, False):
        obj._score_expected = expected
        study = optuna.create_study(direction="maximize")
        study.enqueue_trial(params)
        study.optimize(obj, n_trials=1)
        values[expected] = study.trials[0]
    assert values[True].value == pytest.approx(float(np.mean(y * p + (1 - y) * (1 - p))))
    drawn = predict(fitted, obj.X_valid, obj.s_valid)
    assert values[False].value == pytest.approx(float(np.mean(drawn == y)))
    assert values[False].user_attrs["fairtune:equalized_odds"] == pytest.approx(
        equalized_odds_difference(obj.y_valid, drawn, sensitive_features=obj.s_valid))
    # The expected equalized-odds gap: the larger of the TPR and FPR gaps of the mean p.
    frame = pd.DataFrame({"p": p, "y": y, "g": obj.s_valid.to_numpy()})
    by = frame.groupby(["y", "g"])["p"].mean()
    gap = max(by[1].max() - by[1].min(), by[0].max() - by[0].min())
    assert values[True].user_attrs["fairtune:equalized_odds"] == pytest.approx(gap)


def _unequal_groups(n: int = 1500) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Biased labels with one group about 70 % of the rows."""
    rng = np.random.default_rng(0)
    group = pd.Series(np.where(rng.random(n) < 0.7, "a", "b"))
    shift = np.where(group == "a", 1.0, -1.0)
    X = pd.DataFrame({"x1": rng.normal(size=n) + shift, "x2": rng.normal(size=n)})
    y = pd.Series((X["x1"] + 0.5 * X["x2"] + rng.normal(scale=0.5, size=n) > 0).astype(int))
    return X, y, group


@pytest.mark.parametrize("constraint", ["DemographicParity", "EqualizedOdds"])
def test_reduction_between_groups_bounds_the_gap_the_limit_measures(constraint: str) -> None:
    """fairlearn's moment bounds each group's distance to the overall rate, which lets the two
    groups differ by bound / (larger share); between_groups bounds the difference itself."""
    X, y, s = _unequal_groups()
    metric = "dp" if constraint == "DemographicParity" else "eo"

    def expected_gap(model: ReductionClassifier) -> float:
        frame = pd.DataFrame({"p": model.predict_proba(X)[:, 1], "g": s, "y": y})
        if metric == "dp":
            rates = frame.groupby("g")["p"].mean()
            return float(rates.max() - rates.min())
        rates = frame.groupby(["y", "g"])["p"].mean()
        return float(max(rates[0].max() - rates[0].min(), rates[1].max() - rates[1].min()))

    gaps = {}
    for difference in ("to_overall", "between_groups"):
        model = ReductionClassifier(LogisticRegression(), constraint=constraint, bound=0.05,
                                    difference=difference).fit(X, y, sensitive_features=s)
        gaps[difference] = expected_gap(model)
    assert gaps["to_overall"] > 0.065  # about 0.05 / 0.7
    assert gaps["between_groups"] <= 0.055


def test_reduction_moment_bound_follows_the_group_shares() -> None:
    y = np.array([0] * 10 + [1] * 10)
    X = pd.DataFrame({"x": np.arange(20.0)})
    two = np.array(["a"] * 6 + ["b"] * 4 + ["a"] * 8 + ["b"] * 2)  # 60 % / 80 % "a" by label
    three = np.array(["a", "b", "c", "a"] * 5)
    fitted = {
        (constraint, len(set(groups))): ReductionClassifier(
            LogisticRegression(), constraint=constraint, bound=0.1, max_iter=2,
            difference="between_groups",
        ).fit(X, y, sensitive_features=groups).moment_bound_
        for constraint in ("DemographicParity", "EqualizedOdds", "TruePositiveRateParity")
        for groups in (two, three)
    }
    assert fitted[("DemographicParity", 2)] == pytest.approx(0.1 * 14 / 20)
    assert fitted[("EqualizedOdds", 2)] == pytest.approx(0.1 * 0.6)  # the label with 60 %
    assert fitted[("TruePositiveRateParity", 2)] == pytest.approx(0.1 * 0.8)
    assert all(fitted[(c, 3)] == pytest.approx(0.05) for c in (
        "DemographicParity", "EqualizedOdds", "TruePositiveRateParity"))
    plain = ReductionClassifier(LogisticRegression(), bound=0.1, max_iter=2).fit(
        X, y, sensitive_features=two)
    assert plain.moment_bound_ == 0.1
    assert plain.exponentiated_gradient_.constraints.eps == 0.1


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"difference": "overall"}, "difference='overall'"),
    ({"difference": "between_groups", "ratio": True}, "ratio=True"),
])
def test_reduction_difference_errors_name_the_argument(kwargs: dict, message: str) -> None:
    X, y, s = _unequal_groups(100)
    with pytest.raises(ValueError, match=message):
        ReductionClassifier(LogisticRegression(), **kwargs).fit(X, y, sensitive_features=s)


def test_margin_tightens_validation_and_the_mitigation_but_not_the_verdict() -> None:
    plain = objective(None, limits="demographic_parity<=0.5")
    fitted = plain.make_pipeline(optuna.trial.FixedTrial({"C": 1.0})).fit(
        plain.X_dev, plain.y_dev)
    gap = plain.evaluate(fitted)["demographic_parity"]
    assert gap > 0.1  # the unmitigated model is unfair on these rows
    # A limit just above the test gap, validated with a margin that puts it below.
    limit = f"demographic_parity<={round(gap + 0.02, 3)}"
    obj = objective(None, limits=limit, margin=0.04)
    assert obj.tuning_limits[0].bound == pytest.approx(round(gap + 0.02, 3) - 0.04)
    assert obj.setup["limits"] == [str(obj.tuning_limits[0])]
    assert obj.evaluate(fitted)["fair"] is True  # judged against the limit itself
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial({"C": 1.0})
    study.optimize(obj, n_trials=1)
    trial = study.trials[0]
    valid_gap = trial.user_attrs["fairtune:demographic_parity"]
    assert trial.constraints["demographic_parity"] == pytest.approx(
        valid_gap - obj.tuning_limits[0].bound)
    # The mitigation aims at the tightened bound.
    threshold = objective("threshold", limits="demographic_parity<=0.05", margin=0.01)
    pipeline = threshold.make_pipeline(optuna.trial.FixedTrial(
        {"C": 1.0, "threshold_tolerance": 1.0}))
    assert pipeline.tolerance == pytest.approx(0.04)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"margin": -0.01}, "`margin` must be a number in [0, 1), but got margin=-0.01"),
    ({"margin": "0.01"}, "but got margin='0.01'"),
    ({"margin": 0.05}, "`margin` must leave room under the limit demographic_parity<=0.05"),
    ({"margin": 0.01, "limits": None, "objectives": ["accuracy", "demographic_parity"]},
     "`margin` tightens the fairness limits, so `limits` must be given with it"),
])
def test_bad_margin_names_the_argument(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        objective(None, **kwargs)
