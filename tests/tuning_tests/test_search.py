"""FairSearchCV: scikit-learn's estimator contract, the fairness of what it selects, the routing
of the sensitive features, its errors and its place in scikit-learn's tooling."""

from __future__ import annotations

import pickle
import re

import numpy as np
import optuna
import pandas as pd
import pytest
import sklearn
from optuna.distributions import (
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from sklearn.base import clone
from sklearn.exceptions import FitFailedWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import ShuffleSplit, StratifiedKFold, cross_validate
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import fairtune
from fairtune.fairness import best_fair_trial, demographic_parity_difference
from fairtune.samplers import FairBOSampler
from fairtune.tuning import FairSearchCV, ThresholdClassifier
from fairtune.tuning.objective import MITIGATION_USED_KEY
from tests.conftest import biased_data as _biased_data


def biased_data(n: int = 400, seed: int = 0):
    # Positives a minority (about a quarter): strong regularization predicts 0 for everyone.
    return _biased_data(n, seed, separation=1.0, noise=1.0, threshold=0.7)

optuna.logging.set_verbosity(optuna.logging.WARNING)
# Under the tight limit of these tests, the data below make a constant model (strong
# regularization) the best fair one in many searches: fit warns so (asserted in `fitted`).
pytestmark = pytest.mark.filterwarnings("ignore:The best fair trial .* predicts:UserWarning")

LIMIT = "demographic_parity<=0.05"
C_RANGE = {"C": FloatDistribution(1e-4, 10.0, log=True)}


def search(estimator=None, params=None, **kwargs) -> FairSearchCV:
    kwargs.setdefault("limits", LIMIT)
    kwargs.setdefault("cv", 3)
    kwargs.setdefault("n_trials", 6)
    kwargs.setdefault("random_state", 0)
    return FairSearchCV(
        LogisticRegression() if estimator is None else estimator,
        C_RANGE if params is None else params,
        **kwargs,
    )


@pytest.fixture(scope="module")
def fitted() -> tuple[FairSearchCV, pd.DataFrame, pd.Series, pd.Series]:
    X, y, group = biased_data()
    # Under this tight limit the most accurate fair trial is a constant model, and fit says so.
    with pytest.warns(UserWarning, match=r"The best fair trial \(trial \d+\) predicts 0 for "
                                         r"every out-of-fold row: its accuracy 0\.\d+ is that "
                                         r"of a constant model") as record:
        fitted = search().fit(X, y, sensitive_features=group)
    assert record[0].filename == __file__  # at the caller's fit
    assert fitted.cv_results_["predicts_one_class"][fitted.best_index_]
    return fitted, X, y, group


# --------------------------------------------------------------- scikit-learn's estimator checks


class _RowParityGroups(FairSearchCV):
    """FairSearchCV as scikit-learn's estimator checks can call it.

    The checks call ``fit(X, y)``, while FairSearchCV requires the group of every row: this
    subclass gives the rows two groups at random (a fixed shuffle, so that no check's labels
    line up with them: groups that are the labels are refused), nothing else. The checks test the estimator API
    (cloning, parameters, fitted state, delegation, input validation, pickling...); the tests
    below test fairness with real groups, and that fit without ``sensitive_features`` fails.
    The checks' labels are arbitrary pairs ("one"/"two", -1/1): the greater one stands for the
    favourable label that a user would name with ``pos_label`` (restored after fit, which must
    not change the parameters).
    """

    def fit(self, X, y=None, **fit_params):  # type: ignore[override]
        from sklearn.utils.validation import _num_samples

        try:
            n = _num_samples(X)
        except TypeError:  # not array-like: let the search's own validation fail on X
            n = 0
        labels = np.unique(np.asarray(y)) if y is not None else []
        given = self.pos_label
        if given is None and 1 <= len(labels) <= 2 and not set(labels.tolist()) <= {0, 1}:
            self.pos_label = labels[-1]
        try:
            groups = np.random.default_rng(0).permutation(n) % 2
            return super().fit(X, y, sensitive_features=groups, **fit_params)
        finally:
            self.pos_label = given


def _check_instance(**kwargs) -> _RowParityGroups:
    # A loose limit: the checks' synthetic problems must have fair models (rows split by
    # parity are not a real protected group); the fairness tests below use tight limits.
    return _RowParityGroups(
        LogisticRegression(), {"C": FloatDistribution(0.1, 10.0, log=True)},
        limits="demographic_parity<=0.9", cv=2, n_trials=3, **kwargs,
    )


# Checks that cannot apply, and why:
# - the multiclass checks: FairSearchCV is for binary classification (the fairness metrics compare
#   rates of the favourable outcome), so its tag multi_class is False and scikit-learn runs
#   check_classifier_not_supporting_multiclass instead (fit must refuse three classes);
# - the sample_weight checks (check_sample_weight_equivalence_*, check_sample_weights_*): fit has
#   no sample_weight argument of its own; sample weights are the estimator's fit parameters
#   (**fit_params, or metadata routing), so scikit-learn does not yield them;
# - check_array_api_input: skipped by scikit-learn unless SCIPY_ARRAY_API is set;
# - with the default error_score=np.nan, check_dtype_object: it expects the estimator's own
#   TypeError for an object array holding a dict, but the search records every failing trial
#   (error_score) and, when all of them failed, raises a ValueError quoting the first error, as
#   GridSearchCV does. scikit-learn checks its own searches with error_score="raise", as the first
#   instance here does, and then the TypeError surfaces.
@parametrize_with_checks(
    [_check_instance(error_score="raise"), _check_instance()],
    expected_failed_checks=lambda estimator: (
        {} if estimator.error_score == "raise" else {
            "check_dtype_object": "every trial fails: a ValueError quotes the first TypeError",
        }
    ),
)
# The checks' random data often leave a constant model as the best fair one: the warning that
# says so is not what the checks test.
@pytest.mark.filterwarnings("ignore:The best fair trial .* predicts:UserWarning")
def test_scikit_learn_estimator_checks(estimator, check) -> None:
    check(estimator)


# --------------------------------------------------------------------------- results and fairness


def test_cv_results_has_scikit_learns_layout_and_the_fairness_columns(fitted) -> None:
    model, X, y, _ = fitted
    results = model.cv_results_
    splits = [f"split{k}_test_score" for k in range(3)]
    assert set(results) == {
        "params", "param_C", *splits, "mean_test_score", "std_test_score", "rank_test_score",
        "mean_fit_time", "std_fit_time", "mean_score_time", "std_score_time",
        "demographic_parity", "fair", "predicts_one_class", "trial_number",
    }
    assert model.n_trials_ == 6 and model.n_splits_ == 3
    assert all(len(results[key]) == model.n_trials_ for key in results)
    frame = pd.DataFrame(results)  # as scikit-learn users read it
    assert list(frame["param_C"]) == [p["C"] for p in results["params"]]
    assert (frame["mean_fit_time"] > 0).all() and (frame["mean_score_time"] > 0).all()
    # The score is the accuracy of the pooled out-of-fold predictions: the mean of the folds'
    # accuracies weighted by their sizes.
    sizes = [len(test) for _, test in StratifiedKFold(3).split(X, y)]
    np.testing.assert_allclose(
        frame["mean_test_score"], np.average(frame[splits], axis=1, weights=sizes)
    )
    np.testing.assert_allclose(frame["std_test_score"], frame[splits].std(axis=1, ddof=0))
    # fair <=> the limit holds; rank 1 is the best fair trial, the fair trials rank first.
    np.testing.assert_array_equal(frame["fair"], frame["demographic_parity"] <= 0.05)
    assert frame["fair"].any() and not frame["fair"].all()  # the limit binds on this data
    assert frame["rank_test_score"][model.best_index_] == 1
    assert model.best_score_ == frame.loc[frame["fair"], "mean_test_score"].max()
    assert frame.loc[frame["fair"], "rank_test_score"].max() < frame.loc[
        ~frame["fair"], "rank_test_score"].min()
    assert model.best_params_ == results["params"][model.best_index_]
    assert model.best_trial_.number == results["trial_number"][model.best_index_]


def test_the_best_configuration_is_fair_on_its_own_out_of_fold_predictions(fitted) -> None:
    model, X, y, group = fitted
    # Rebuild the chosen configuration's out-of-fold predictions without FairSearchCV.
    pooled = np.empty(len(y), dtype=int)
    for train, test in StratifiedKFold(3).split(X, y):  # what cv=3 means for a classifier
        fold_model = clone(model.estimator).set_params(**model.best_params_)
        pooled[test] = fold_model.fit(X.iloc[train], y.iloc[train]).predict(X.iloc[test])
    gap = demographic_parity_difference(y, pooled, sensitive_features=group)
    assert gap <= 0.05
    assert gap == pytest.approx(model.cv_results_["demographic_parity"][model.best_index_])
    assert np.mean(pooled == y) == pytest.approx(model.best_score_)
    # The refitted best estimator is that configuration fitted on all the rows.
    again = clone(model.estimator).set_params(**model.best_params_).fit(X, y)
    np.testing.assert_array_equal(model.predict(X), again.predict(X))


def test_constraints_are_recorded_for_fairbo_and_best_fair_trial(fitted) -> None:
    model = fitted[0]
    assert isinstance(model.study_.sampler, FairBOSampler)  # the default sampler
    for trial in model.study_.trials:
        gap = trial.user_attrs["fairtune:demographic_parity"]
        assert trial.constraints["demographic_parity"] == pytest.approx(gap - 0.05)
    assert model.study_.user_attrs["fairtune:setup"]["limits"] == [LIMIT]
    # fairtune's own reader of a study finds the same best fair trial.
    assert best_fair_trial(model.study_).number == model.best_trial_.number


def test_fairbo_models_the_constraints_after_its_startup_trials() -> None:
    X, y, group = biased_data(300)
    model = search(n_trials=7, cv=2).fit(X, y, sensitive_features=group)
    trials = model.study_.trials
    assert len(trials) == 7 and all(t.state.name == "COMPLETE" for t in trials)
    assert model.cv_results_["fair"][model.best_index_]


def test_delegates_predictions_and_score_to_the_best_estimator(fitted) -> None:
    model, X, y, _ = fitted
    best = model.best_estimator_
    np.testing.assert_array_equal(model.predict_proba(X), best.predict_proba(X))
    np.testing.assert_array_equal(model.decision_function(X), best.decision_function(X))
    np.testing.assert_array_equal(model.classes_, [0, 1])
    assert model.score(X, y) == pytest.approx(np.mean(best.predict(X) == y))
    assert model.n_features_in_ == 2 and list(model.feature_names_in_) == ["x1", "x2"]


@pytest.mark.parametrize("mitigation", [None, "threshold"])
def test_pos_label_names_the_favourable_label_and_the_labels_keep_their_values(mitigation) -> None:
    X, y, group = biased_data(300)
    labels = np.where(y == 1, "granted", "denied")
    kwargs = {"cv": 2, "n_trials": 3, "limits": "demographic_parity<=0.5",
              "mitigation": mitigation}
    with pytest.raises(ValueError, match=r"`y` must be 0/1 \(1 = the favourable outcome\) or "
                                         r"booleans, or `pos_label` must name the favourable "
                                         r"one, but got the labels \['denied', 'granted'\]"):
        search(**kwargs).fit(X, labels, sensitive_features=group)
    model = search(pos_label="granted", **kwargs).fit(X, labels, sensitive_features=group)
    numeric = search(**kwargs).fit(X, y, sensitive_features=group)
    extra = {"sensitive_features": group} if mitigation else {}
    assert set(model.predict(X, **extra)) <= {"granted", "denied"}
    for column in ("mean_test_score", "demographic_parity"):
        np.testing.assert_allclose(model.cv_results_[column], numeric.cv_results_[column])
    assert model.score(X, labels, **extra) == pytest.approx(numeric.score(X, y, **extra))
    # The other label as the favourable one measures the other outcome's rates (exactly the
    # complement without a mitigation; a threshold is fitted for the favourable label itself).
    flipped = search(pos_label="denied", **kwargs).fit(X, labels, sensitive_features=group)
    first = flipped.study_.trials[0]
    assert first.params == numeric.study_.trials[0].params
    rate = numeric.study_.trials[0].user_attrs["fairtune:positive_rate"]
    if mitigation is None:
        assert first.user_attrs["fairtune:positive_rate"] == pytest.approx(1 - rate)
    else:
        assert first.user_attrs["fairtune:positive_rate"] != pytest.approx(rate)
    with pytest.raises(ValueError, match=r"`pos_label` must be one of the labels of `y` "
                                         r"\['denied', 'granted'\], but got pos_label='Granted'"):
        search(pos_label="Granted", **kwargs).fit(X, labels, sensitive_features=group)


def test_roc_auc_scores_the_pooled_probabilities() -> None:
    from sklearn.metrics import roc_auc_score

    X, y, group = biased_data(300)
    model = search(cv=2, n_trials=3, scoring="roc_auc", limits="demographic_parity<=0.5").fit(
        X, y, sensitive_features=group)
    pooled = np.empty(len(y))
    for train, test in StratifiedKFold(2).split(X, y):
        fold_model = clone(model.estimator).set_params(**model.best_params_)
        fold_model.fit(X.iloc[train], y.iloc[train])
        pooled[test] = fold_model.predict_proba(X.iloc[test])[:, 1]
    assert model.best_score_ == pytest.approx(roc_auc_score(y, pooled))


def test_a_fairtune_space_name_builds_the_final_step() -> None:
    from sklearn.ensemble import RandomForestClassifier

    X, y, group = biased_data(300)
    pipeline = Pipeline([("scale", StandardScaler()), ("model", RandomForestClassifier())])
    model = search(pipeline, "random_forest", cv=2, n_trials=2, random_state=3,
                   limits="demographic_parity<=0.5").fit(X, y, sensitive_features=group)
    assert set(model.best_params_) == {"n_estimators", "min_samples_split", "max_depth",
                                       "criterion"}
    forest = model.best_estimator_.named_steps["model"]
    assert forest.n_estimators == model.best_params_["n_estimators"]
    assert forest.random_state == 3
    with pytest.raises(ValueError, match=r"`param_distributions` 'random_forest' builds a "
                                         r"RandomForestClassifier.*but got LogisticRegression"):
        search(params="random_forest").fit(X, y, sensitive_features=group)


def test_threshold_mitigation_wraps_every_trial_and_needs_the_groups_to_predict() -> None:
    X, y, group = biased_data(300)
    model = search(cv=2, n_trials=4, mitigation="threshold").fit(X, y, sensitive_features=group)
    assert isinstance(model.best_estimator_, ThresholdClassifier)
    assert "param_threshold_tolerance" in model.cv_results_
    assert all(t.user_attrs[MITIGATION_USED_KEY] == "threshold" for t in model.study_.trials)
    # The probabilities with which the randomized predictor predicts each label.
    assert not hasattr(model, "decision_function")
    np.testing.assert_allclose(
        model.predict_proba(X, sensitive_features=group),
        model.best_estimator_.predict_proba(X, sensitive_features=group),
    )
    with pytest.raises(ValueError, match="sensitive_features"):
        model.predict(X)
    y_pred = model.predict(X, sensitive_features=group)
    assert model.score(X, y, sensitive_features=group) == pytest.approx(np.mean(y_pred == y))


def test_margin_holds_the_trials_to_the_tightened_limit_and_aims_the_threshold_there() -> None:
    X, y, group = biased_data(300)
    model = search(cv=2, n_trials=5, mitigation="threshold", margin=0.02).fit(
        X, y, sensitive_features=group
    )
    assert model.study_.user_attrs["fairtune:setup"]["limits"] == ["demographic_parity<=0.03"]
    gaps = model.cv_results_["demographic_parity"]
    np.testing.assert_array_equal(model.cv_results_["fair"], gaps <= 0.03)
    for trial in model.study_.trials:
        assert trial.constraints["demographic_parity"] == pytest.approx(
            trial.user_attrs["fairtune:demographic_parity"] - 0.03
        )
    assert model.cv_results_["demographic_parity"][model.best_index_] <= 0.03
    # ThresholdOptimizer's tolerance is the tuned fraction of the tightened bound.
    fraction = model.best_params_["threshold_tolerance"]
    assert model.best_estimator_.tolerance == pytest.approx(fraction * 0.03)


def test_no_fair_trial_under_a_margin_names_the_tightened_limit_and_the_margin() -> None:
    X, y, group = biased_data(300)
    model = search(params={"C": FloatDistribution(0.5, 10.0)}, n_trials=2, cv=2,
                   margin=0.04)
    with pytest.raises(ValueError, match=r"No trial meets the fairness limit "
                       r"demographic_parity<=0.01 \(the given limits less `margin`=0.04\)"):
        model.fit(X, y, sensitive_features=group)


# ---------------------------------------------------------------- sensitive features and routing


def _exponentiated_gradient():
    from fairlearn.reductions import DemographicParity, ExponentiatedGradient

    return ExponentiatedGradient(LogisticRegression(), DemographicParity(difference_bound=0.01),
                                 max_iter=10)


@pytest.mark.parametrize(
    ("routing", "in_pipeline"),
    # With routing, a Pipeline routes only what its steps request, and ExponentiatedGradient
    # (fit(X, y, **kwargs)) cannot request: as a step it needs routing disabled.
    [(False, False), (True, False), (False, True)],
)
def test_exponentiated_gradient_receives_the_sensitive_features(
    routing: bool, in_pipeline: bool
) -> None:
    X, y, group = biased_data(300)
    estimator, params = _exponentiated_gradient(), {"eps": FloatDistribution(0.005, 0.05)}
    if in_pipeline:  # the step gets them as fair__sensitive_features
        estimator = Pipeline([("scale", StandardScaler()), ("fair", estimator)])
        params = {"fair__eps": params["eps"]}
    with sklearn.config_context(enable_metadata_routing=routing):
        # A trial scores one draw of the reduction's randomized predictions on 150-row folds,
        # a gap within some 0.07 of what it aims at: a limit of 0.15 binds no trial of it.
        model = search(estimator, params, limits="demographic_parity<=0.15", cv=2, n_trials=2)
        model.fit(X, y, sensitive_features=group)
    # The refitted reduction balanced exactly these groups (fairlearn keeps them in its
    # constraint's tags), and every fold's reduction got its rows' groups: fit fails without
    # them, and the pooled gaps are those of a demographic-parity reduction.
    reduction = model.best_estimator_[-1] if in_pipeline else model.best_estimator_
    tags = reduction.constraints_.tags
    np.testing.assert_array_equal(tags["group_id"].to_numpy(), group.to_numpy())
    assert all(t.state.name == "COMPLETE" for t in model.study_.trials)
    unconstrained = search(cv=2, n_trials=2, params={"C": FloatDistribution(1.0, 10.0)},
                           refit=False, limits="demographic_parity<=0.9")
    unconstrained.fit(X, y, sensitive_features=group)
    # Each trial's gap is of one draw of the randomized mixture on 150-row folds: noisy, so
    # the reduction's best trial is compared (about half the unconstrained gap or less; its
    # first trial is fairlearn's default eps).
    assert model.cv_results_["demographic_parity"].min() < 0.6 * (
        unconstrained.cv_results_["demographic_parity"].min()
    )


def test_a_bare_randomized_fairlearn_estimator_is_scored_reproducibly() -> None:
    # fairlearn's ExponentiatedGradient predicts at random, from numpy's global generator
    # unless predict gets a random_state: the search gives it one, so the global state before
    # the fit changes nothing.
    X, y, group = biased_data(300)
    results = []
    for global_seed in (1, 2):
        np.random.seed(global_seed)
        model = search(_exponentiated_gradient(), {"eps": FloatDistribution(0.005, 0.05)},
                       limits="demographic_parity<=0.2", cv=2, n_trials=3, refit=False)
        model.fit(X, y, sensitive_features=group)
        results.append((model.cv_results_["mean_test_score"],
                        model.cv_results_["demographic_parity"]))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_routing_passes_the_groups_where_the_estimator_requests_them() -> None:
    from fairlearn.postprocessing import ThresholdOptimizer
    from sklearn.exceptions import UnsetMetadataPassedError

    X, y, group = biased_data(300)
    params = {"estimator__C": FloatDistribution(0.1, 10.0, log=True)}
    # A trial scores one draw of ThresholdOptimizer's randomized predictions, so a gap aimed
    # at 0 lands a few points either side of it: a limit of 0.15 always binds the
    # unthresholded model (gap about 0.35) and never the thresholded one.
    limit = "demographic_parity<=0.15"
    with sklearn.config_context(enable_metadata_routing=True):
        optimizer = ThresholdOptimizer(estimator=LogisticRegression(),
                                       predict_method="predict_proba")
        # Not requested: scikit-learn refuses to guess.
        with pytest.raises(UnsetMetadataPassedError, match="sensitive_features"):
            search(optimizer, params, cv=2, n_trials=2, limits=limit).fit(X, y, sensitive_features=group)
        requested = optimizer.set_fit_request(sensitive_features=True).set_predict_request(
            sensitive_features=True)
        model = search(requested, params, cv=2, n_trials=2, limits=limit).fit(
            X, y, sensitive_features=group)
        assert model.predict(X, sensitive_features=group).shape == (len(y),)
    # Without routing, fairlearn's ThresholdOptimizer takes them by its signature (its fit and
    # predict refuse to run without them, so every trial would fail).
    model = search(ThresholdOptimizer(estimator=LogisticRegression(),
                                      predict_method="predict_proba"),
                   params, cv=2, n_trials=2, limits=limit).fit(X, y, sensitive_features=group)
    assert all(t.state.name == "COMPLETE" for t in model.study_.trials)
    # Its thresholds equalize the groups' selection rates on the rows they were fitted on.
    unconstrained = search(params={"C": params["estimator__C"]}, cv=2, n_trials=2, refit=False,
                           limits="demographic_parity<=0.9")
    unconstrained.fit(X, y, sensitive_features=group)
    assert model.cv_results_["demographic_parity"].max() < (
        unconstrained.cv_results_["demographic_parity"].min())


# ------------------------------------------------------------------------------------ bad inputs


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"params": {"c": FloatDistribution(0.1, 1.0)}},
         r"`param_distributions` names a parameter that LogisticRegression does not have: 'c' "
         r"\(valid names are those of estimator.get_params\(\), e.g. \['C', "),
        ({"params": {"C": [0.1, 1.0]}},
         r"`param_distributions\['C'\]` must be an Optuna distribution.*but got \[0.1, 1.0\] "
         r"\(list\)\.$"),
        ({"params": "bogus"},
         r"`param_distributions` must be a dict of Optuna distributions or one of \['linear', "
         r"'mlp', 'random_forest', 'random_forest_deep', 'xgboost'\], but got "
         r"param_distributions='bogus'"),
        ({"limits": "demographic_parity=0.05"}, r"`limits` must be strings like"),
        ({"limits": "fairness<=0.05"}, r"`limits` names an unknown metric"),
        ({"scoring": "precision"},
         r"`scoring` must be one of \['accuracy', 'balanced_accuracy', 'f1', 'roc_auc'\], "
         r"but got scoring='precision'"),
        ({"n_trials": 0}, r"`n_trials` must be None or an integer >= 1, but got n_trials=0"),
        ({"n_trials": None}, r"`n_trials` or `timeout` must be given"),
        ({"margin": 1.5}, r"`margin` must be a number in \[0, 1\), but got margin=1.5"),
        ({"margin": 0.05}, r"`margin` must leave room under the limit demographic_parity<=0.05"),
        ({"error_score": "skip"}, r"`error_score` must be a number or 'raise', but got "
                                  r"error_score='skip'"),
        ({"mitigation": "correlation_remover"},
         r"`mitigation` must be 'threshold', 'reduction'.*CorrelationRemover is a step"),
        ({"mitigation": "bogus"}, r"`mitigation` must be None, one of"),
        ({"sampler": optuna.samplers.RandomSampler(), "study": optuna.create_study()},
         r"`sampler` and `study` cannot both be given"),
        ({"cv": ShuffleSplit(3, test_size=0.5, random_state=0)},
         r"`cv` must give test folds that do not overlap"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(kwargs: dict, match: str) -> None:
    X, y, group = biased_data(100)
    params = kwargs.pop("params", None)
    model = search(params=params, n_trials=kwargs.pop("n_trials", 2), **kwargs)
    with pytest.raises(ValueError, match=match):
        model.fit(X, y, sensitive_features=group)


def test_a_scipy_distribution_is_refused_naming_the_optuna_distributions() -> None:
    from scipy.stats import loguniform

    X, y, group = biased_data(100)
    with pytest.raises(ValueError, match=r"`param_distributions\['C'\]` must be an Optuna "
                                         r"distribution \(optuna.distributions.FloatDistribution, "
                                         r"IntDistribution or CategoricalDistribution\), but got "
                                         r"<scipy"):
        search(params={"C": loguniform(0.1, 10)}).fit(X, y, sensitive_features=group)


@pytest.mark.parametrize(
    ("sensitive", "match"),
    [
        (None, r"`sensitive_features` must be given to FairSearchCV.fit.*but got "
               r"sensitive_features=None"),
        ("short", r"`sensitive_features` must have one entry per row of X \(100\), but got 99"),
        ("one group", r"^`sensitive_features` must define at least two groups to compare, but "
                      r"got a single group 'a'\.$"),
        ("missing", r"^`sensitive_features` must not contain NaN or missing values, but got 1 "
                    r"of them\.$"),
    ],
)
def test_bad_sensitive_features_raise(sensitive, match: str) -> None:
    X, y, group = biased_data(100)
    value = {
        None: None, "short": group[:99], "one group": ["a"] * 100,
        "missing": group.where(group.index > 0),
    }[sensitive]
    with pytest.raises(ValueError, match=match):
        search(n_trials=2).fit(X, y, sensitive_features=value)
    with pytest.raises(ValueError, match=r"`sensitive_features` must be given"):
        search(n_trials=2).fit(X, y)  # the argument forgotten altogether


def test_a_limit_that_cannot_bind_warns_as_in_fair_objective() -> None:
    from fairtune.tuning import FairObjective

    X, y, group = biased_data(100)
    message = (r"`limits`: demographic_parity<=1.5 holds for every model \(demographic_parity "
               r"lies in \[0, 1\]\), so it does not constrain the study")
    with pytest.warns(UserWarning, match=message) as caught:
        search(n_trials=1, limits="demographic_parity<=1.5").fit(X, y, sensitive_features=group)
    assert caught[0].filename == __file__  # the warning points at the caller's fit
    with pytest.warns(UserWarning, match=message):
        FairObjective((X, y, group), "linear", limits="demographic_parity<=1.5")


def test_labels_must_be_binary() -> None:
    X, y, group = biased_data(100)
    with pytest.raises(ValueError, match=r"Only binary classification is supported: `y` must "
                                         r"have two classes.*got 3 classes \[0, 1, 2\]"):
        search(n_trials=2).fit(X, np.arange(100) % 3, sensitive_features=group)
    with pytest.raises(ValueError, match=r"`y` must be 0/1.*but got the labels \['no', 'yes'\]"):
        search(n_trials=2, mitigation="threshold").fit(
            X, np.where(y == 1, "yes", "no"), sensitive_features=group)
    with pytest.raises(ValueError, match=r"`y` must be 0/1.*but got the labels \[-1, 1\]"):
        search(n_trials=2).fit(X, np.where(y == 1, 1, -1), sensitive_features=group)


def test_no_fair_trial_names_the_limit_and_the_closest_trial() -> None:
    X, y, group = biased_data(300)
    model = search(params={"C": FloatDistribution(0.5, 10.0)}, n_trials=3, cv=2,
                   limits="demographic_parity<=0.01")
    expected = r"No trial meets the fairness limit demographic_parity<=0.01.*the closest is trial"
    with pytest.raises(ValueError, match=expected) as info:
        model.fit(X, y, sensitive_features=group)
    closest = int(re.search(r"the closest is trial (\d+)", str(info.value)).group(1))
    gaps = model.cv_results_["demographic_parity"]
    assert closest == model.cv_results_["trial_number"][np.argmin(gaps)]
    assert f"demographic_parity={gaps.min():.4f}" in str(info.value)
    assert 1 not in model.cv_results_["rank_test_score"]  # nothing to deploy ranks first
    # refit=False keeps the results, warns, and has no best estimator.
    kept = clone(model).set_params(refit=False)
    with pytest.warns(UserWarning, match="No trial meets the fairness limit"):
        kept.fit(X, y, sensitive_features=group)
    assert not kept.cv_results_["fair"].any() and not hasattr(kept, "best_params_")
    assert 1 not in kept.cv_results_["rank_test_score"]
    with pytest.raises(AttributeError, match="has no attribute 'predict'") as info:
        kept.predict(X)
    assert "refit=False" in str(info.value.__cause__)


# ------------------------------------------------------------------------------- failing trials


class _FailsAboveOne(LogisticRegression):
    """A classifier that cannot fit with C > 1 (a stand-in for any configuration that fails)."""

    def fit(self, X, y, sample_weight=None):
        if self.C > 1:
            raise RuntimeError(f"cannot fit with C={self.C}")
        return super().fit(X, y, sample_weight=sample_weight)


def _study_with(*values: float) -> optuna.Study:
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(0))
    for value in values:
        study.enqueue_trial({"C": value})
    return study


@pytest.mark.parametrize("error_score", [np.nan, 0.0])
def test_a_failing_trial_scores_error_score_and_the_search_goes_on(error_score: float) -> None:
    X, y, group = biased_data(200)
    model = search(_FailsAboveOne(), {"C": FloatDistribution(1e-4, 10.0, log=True)},
                   study=_study_with(5.0, 1e-4), n_trials=2, cv=2, error_score=error_score)
    with pytest.warns(FitFailedWarning, match=r"1 of 2 trials failed .*RuntimeError: cannot "
                                              r"fit with C=5.0") as record:
        model.fit(X, y, sensitive_features=group)
    assert record[0].filename == __file__
    results = model.cv_results_
    assert results["params"][0] == {"C": 5.0}
    np.testing.assert_array_equal(
        [results["split0_test_score"][0], results["mean_test_score"][0]], [error_score] * 2
    )
    assert not results["fair"][0] and np.isnan(results["demographic_parity"][0])
    assert list(results["rank_test_score"]) == [2, 1]
    assert model.best_params_ == {"C": 1e-4}
    assert model.study_.trials[0].state.name == "FAIL"


def test_error_score_raise_and_all_trials_failing() -> None:
    X, y, group = biased_data(200)
    with pytest.raises(RuntimeError, match="cannot fit with C=5.0"):
        search(_FailsAboveOne(), study=_study_with(5.0), n_trials=1, cv=2,
               error_score="raise").fit(X, y, sensitive_features=group)
    with pytest.raises(ValueError, match=r"All 2 trials of the search failed.*RuntimeError: "
                                         r"cannot fit with C=5.0"):
        search(_FailsAboveOne(), study=_study_with(5.0, 6.0), n_trials=2, cv=2).fit(
            X, y, sensitive_features=group)


# ---------------------------------------------------------------------- scikit-learn's tooling


def test_clone_get_params_set_params_and_pickle(fitted) -> None:
    model, X = fitted[:2]
    copy = clone(model)
    assert not hasattr(copy, "cv_results_")
    assert copy.get_params()["limits"] == LIMIT and copy.get_params()["estimator__C"] == 1.0
    copy.set_params(n_trials=2, estimator__max_iter=50)
    assert copy.n_trials == 2 and copy.estimator.max_iter == 50
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
    assert restored.best_params_ == model.best_params_
    assert len(restored.study_.trials) == len(model.study_.trials)


def test_nested_in_a_pipeline_and_in_cross_validate() -> None:
    X, y, group = biased_data(300)
    inner = search(cv=2, n_trials=3, limits="demographic_parity<=0.4")
    pipeline = Pipeline([("scale", StandardScaler()), ("search", inner)])
    pipeline.fit(X, y, search__sensitive_features=group)
    assert pipeline.named_steps["search"].cv_results_["fair"][
        pipeline.named_steps["search"].best_index_]
    # An outer loop: each outer training part gets its rows' groups.
    outer = cross_validate(inner, X, y, cv=2, params={"sensitive_features": group},
                           return_estimator=True)
    assert len(outer["test_score"]) == 2 and all(0.5 < s <= 1 for s in outer["test_score"])
    assert all(e.study_.trials[0].user_attrs["fairtune:positive_rate_by_group"]
               for e in outer["estimator"])
    with sklearn.config_context(enable_metadata_routing=True):
        routed = clone(inner).set_fit_request(sensitive_features=True)
        outer = cross_validate(routed, X, y, cv=2, params={"sensitive_features": group})
    assert len(outer["test_score"]) == 2


def test_trials_run_in_parallel_and_a_study_can_be_resumed() -> None:
    X, y, group = biased_data(200)
    model = search(cv=2, n_trials=4, n_jobs=2, limits="demographic_parity<=0.4")
    model.fit(X, y, sensitive_features=group)
    assert model.n_trials_ == 4
    assert all(t.state.name == "COMPLETE" for t in model.study_.trials)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(0))
    resumed = search(cv=2, n_trials=2, study=study, limits="demographic_parity<=0.4")
    resumed.fit(X, y, sensitive_features=group)
    resumed.fit(X, y, sensitive_features=group)
    assert resumed.n_trials_ == 4 and resumed.study_ is study
    with pytest.raises(ValueError, match=r"`study` 'no-name-.*' was tuned with `limits` "
                                         r"'demographic_parity<=0.4', but this run asks for "
                                         r"'demographic_parity<=0.05'"):
        search(cv=2, n_trials=1, study=study).fit(X, y, sensitive_features=group)


def test_exported_from_the_package() -> None:
    assert fairtune.FairSearchCV is FairSearchCV
    assert "FairSearchCV" in fairtune.__all__ and "FairSearchCV" in fairtune.tuning.__all__
    int_and_choice = {"max_iter": IntDistribution(50, 100),
                      "fit_intercept": CategoricalDistribution([True, False])}
    X, y, group = biased_data(100)
    model = search(params=int_and_choice, n_trials=2, cv=2, limits="demographic_parity<=0.5")
    model.fit(X, y, sensitive_features=group)
    assert set(model.best_params_) == {"max_iter", "fit_intercept"}
