"""Multi-fidelity search under fairness limits: trials fitted on growing shares of the training
rows, reported to Optuna's pruners, fairness recorded at every budget, and only full-budget
trials completed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest

from fairtune.cli import main
from fairtune.fairness import is_feasible
from fairtune.fairness.constraints import parse_limits
from fairtune.tuning import FairObjective, make_pruner
from fairtune.tuning._data import budget_rows
from fairtune.tuning._trial import RUNGS_KEY, report_rung
from tests.conftest import biased_data


def test_budget_rows_are_nested_stratified_and_the_same_for_a_seed() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 900)
    groups = pd.Series(rng.choice(["a", "b", "c"], 900, p=[0.6, 0.39, 0.01]))
    small, middle = budget_rows(y, groups, (0.1, 0.5, 1.0), seed=3)
    assert set(small) < set(middle) and len(middle) == pytest.approx(450, abs=6)
    for key in {(label, g) for label, g in zip(y, groups)}:  # every stratum, rare ones too
        rows = (y == key[0]) & (groups == key[1]).to_numpy()
        assert rows[small].any()
        assert rows[middle].sum() == pytest.approx(rows.sum() / 2, abs=1)
    again = budget_rows(y, groups, (0.1, 0.5, 1.0), seed=3)
    other = budget_rows(y, groups, (0.1, 0.5, 1.0), seed=4)
    assert np.array_equal(small, again[0]) and not np.array_equal(small, other[0])


class _Trial:
    """What report_rung needs of a trial: user attributes, report and should_prune."""

    def __init__(self, prune: bool) -> None:
        self.user_attrs: dict = {}
        self.reported: list[tuple[float, int]] = []
        self.prune = prune

    def set_user_attr(self, key: str, value: object) -> None:
        self.user_attrs[key] = value

    def report(self, value: float, step: int) -> None:
        self.reported.append((value, step))

    def should_prune(self) -> bool:
        return self.prune


@pytest.mark.parametrize("prune_unfair", [False, True])
def test_a_rung_reports_the_metric_and_never_the_gap_unless_asked(prune_unfair: bool) -> None:
    y_true = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    unfair = np.array([1, 1, 1, 1, 0, 0, 0, 0])  # group a selected, group b not: a gap of 1
    groups = np.array(list("aaaabbbb"))
    limits = parse_limits("demographic_parity<=0.1")
    trial = _Trial(prune=False)
    report_rung(trial, 0, 0.25, 0.5, y_true, unfair, groups, limits, prune_unfair)
    assert trial.reported == [(0.5 - prune_unfair, 1)]  # steps count budgets from 1
    assert trial.user_attrs[RUNGS_KEY] == [
        {"budget": 0.25, "value": 0.5, "demographic_parity": 1.0}]
    with pytest.raises(optuna.TrialPruned, match="after the budget 0.25"):
        report_rung(_Trial(prune=True), 0, 0.25, 0.5, y_true, unfair, groups, limits, False)


def test_pruned_trials_record_their_rungs_and_the_best_fair_trial_ran_the_full_budget() -> None:
    objective = FairObjective(biased_data(1200, separation=1.0), "random_forest",
                              limits="dsp<=0.2", mitigation="threshold",
                              budgets=(1 / 9, 1 / 3, 1.0))
    study = objective.create_study(seed=0, pruner="successive_halving")
    assert isinstance(study.pruner, optuna.pruners.SuccessiveHalvingPruner)
    study.optimize(objective, n_trials=12)
    states = [t.state for t in study.trials]
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert pruned and complete and len(states) == 12
    for trial in pruned:  # fairness at each budget it reached, no constraint
        assert not trial.constraints
        assert all("demographic_parity" in rung for rung in trial.user_attrs[RUNGS_KEY])
    for trial in complete:  # both smaller budgets, then the full one with its constraints
        assert [r["budget"] for r in trial.user_attrs[RUNGS_KEY]] == [1 / 9, 1 / 3]
        assert set(trial.intermediate_values) == {1, 2, 3}
        assert "demographic_parity" in trial.constraints
    best = study.best_trial
    assert best.state == optuna.trial.TrialState.COMPLETE and is_feasible(best)


def test_budgets_under_cross_validation_fit_every_fold_on_its_share() -> None:
    objective = FairObjective(biased_data(600), "linear", limits="dsp<=0.3", cv=3,
                              budgets=(0.25, 1.0))
    study = objective.create_study(seed=0, pruner="median")
    study.optimize(objective, n_trials=2)
    for trial in study.trials:
        (rung,) = trial.user_attrs[RUNGS_KEY]
        assert rung["budget"] == 0.25 and 0.0 <= rung["value"] <= 1.0


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"budgets": (0.5,)}, "`budgets` must be two or more increasing fractions"),
    ({"budgets": (0.5, 0.2, 1.0)}, "`budgets` must be two or more increasing fractions"),
    ({"budgets": (0.2, 0.9)}, "the last 1.0"),
    ({"budgets": (0.2, 1.0), "objectives": ["accuracy", "demographic_parity"]},
     "Optuna's pruners do not stop multi-objective trials"),
])
def test_bad_budgets_are_refused_naming_them(kwargs: dict, needle: str) -> None:
    kwargs.setdefault("limits", "dsp<=0.2")
    with pytest.raises(ValueError, match=needle):
        FairObjective(biased_data(300), "linear", **kwargs)


def test_a_pruner_needs_budgets_and_a_known_name() -> None:
    objective = FairObjective(biased_data(300), "linear", limits="dsp<=0.2")
    with pytest.raises(ValueError, match="`budgets` must be given with it"):
        objective.create_study(pruner="hyperband")
    with pytest.raises(ValueError, match="`pruner` must be one of"):
        make_pruner("early", (0.5, 1.0))
    assert make_pruner("hyperband", (0.1, 0.3, 1.0))._max_resource == 3


def test_the_command_line_prunes_with_budgets_and_reports_the_full_budget_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'ft.db'}"
    argv = ["tune", "--dataset", "adult", "--model", "xgboost", "--limit",
            "demographic_parity<=0.05", "--mitigation", "threshold", "--n-trials", "8",
            "--pruner", "successive_halving", "--budgets", "0.05,0.2,1", "--no-progress",
            "--storage", storage, "--study-name", "s"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    study = optuna.load_study(study_name="s", storage=storage)
    assert any(t.state == optuna.trial.TrialState.PRUNED for t in study.trials)
    assert f"Best fair trial: #{study.best_trial.number}" in out
    assert study.best_trial.user_attrs[RUNGS_KEY][0]["budget"] == 0.05
    assert main([*argv[:-4], "--budgets", "0.5,0.2,1"]) == 2
    assert "--budgets must be two or more increasing fractions" in capsys.readouterr().err


def test_the_command_line_takes_boosting_rounds_as_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'ft.db'}"
    argv = ["tune", "--dataset", "german", "--model", "xgboost", "--limit",
            "demographic_parity<=0.1", "--mitigation", "threshold", "--n-trials", "6",
            "--pruner", "successive_halving", "--resource", "n_estimators", "--no-progress",
            "--storage", storage, "--study-name", "s"]
    assert main(argv) == 0
    study = optuna.load_study(study_name="s", storage=storage)
    assert any(t.state == optuna.trial.TrialState.PRUNED for t in study.trials)
    assert [r["budget"] for r in study.best_trial.user_attrs[RUNGS_KEY]] == [1 / 9, 1 / 3]
    capsys.readouterr()
    assert main(["tune", "--dataset", "german", "--model", "xgboost", "--limit", "dsp<=0.1",
                 "--resource", "n_estimators"]) == 2
    assert ("--resource is what a --pruner's budgets cut, so --pruner must be given with it"
            in capsys.readouterr().err)


def test_fairsearchcv_prunes_with_budgets_and_keeps_full_budget_trials_in_its_results() -> None:
    from optuna.distributions import FloatDistribution, IntDistribution
    from sklearn.ensemble import RandomForestClassifier

    from fairtune.tuning import FairSearchCV

    X, y, group = biased_data(1200, separation=1.0)
    search = FairSearchCV(
        RandomForestClassifier(n_estimators=10, random_state=0),
        {"max_depth": IntDistribution(1, 12), "min_samples_leaf": IntDistribution(1, 60),
         "max_features": FloatDistribution(0.2, 1.0)},
        limits="dsp<=0.2", mitigation="threshold", cv=3, n_trials=10, random_state=0,
        budgets=(0.2, 1.0), pruner="successive_halving",
    ).fit(X, y, sensitive_features=group)
    states = [t.state for t in search.study_.trials]
    assert optuna.trial.TrialState.PRUNED in states
    complete = [t for t in search.study_.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(search.cv_results_["params"]) == len(complete)  # pruned trials left out
    best = search.study_.trials[search.cv_results_["trial_number"][search.best_index_]] \
        if "trial_number" in search.cv_results_ else None
    assert all(t.user_attrs[RUNGS_KEY][0]["budget"] == 0.2 for t in complete)
    assert best is None or best.state == optuna.trial.TrialState.COMPLETE
    with pytest.raises(ValueError, match="`budgets` must be given with it"):
        FairSearchCV(RandomForestClassifier(), {"max_depth": IntDistribution(1, 3)},
                     limits="dsp<=0.2", n_trials=1, pruner="median").fit(
            X, y, sensitive_features=group)


def _record_fits(monkeypatch: pytest.MonkeyPatch, cls: type) -> list[tuple[int, int]]:
    """(n_estimators, training rows) of every fit of ``cls``."""
    fits: list[tuple[int, int]] = []
    original = cls.fit

    def fit(self, X, y, *args, **kwargs):
        fits.append((self.n_estimators, len(X)))
        return original(self, X, y, *args, **kwargs)

    monkeypatch.setattr(cls, "fit", fit)
    return fits


def test_boosting_rounds_as_the_budget_fit_a_share_of_the_trees_on_all_training_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from xgboost import XGBClassifier

    fits = _record_fits(monkeypatch, XGBClassifier)
    objective = FairObjective(biased_data(600), "xgboost", limits="dsp<=0.2",
                              mitigation="threshold", budgets=(0.25, 1.0),
                              resource="n_estimators")
    study = objective.create_study(seed=0, pruner="successive_halving")
    study.optimize(objective, n_trials=6)
    rows = len(objective.y_train)
    assert {n_rows for _, n_rows in fits} == {rows}  # every budget on all the training rows
    by_trial = iter(fits)
    for trial in study.trials:
        trees = trial.params.get("n_estimators", 100)  # the first trial is the default model
        assert next(by_trial)[0] == max(1, round(0.25 * trees))
        if trial.state == optuna.trial.TrialState.COMPLETE:
            assert next(by_trial)[0] == trees
            assert trial.user_attrs[RUNGS_KEY][0]["budget"] == 0.25
    assert optuna.trial.TrialState.PRUNED in [t.state for t in study.trials]
    assert next(by_trial, None) is None


def test_fairsearchcv_takes_a_parameter_of_the_estimator_as_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from optuna.distributions import IntDistribution
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    from fairtune.tuning import FairSearchCV

    fits = _record_fits(monkeypatch, RandomForestClassifier)
    X, y, group = biased_data(600, separation=1.0)
    pipeline = Pipeline([("scale", StandardScaler()),
                         ("forest", RandomForestClassifier(random_state=0))])
    search = FairSearchCV(
        pipeline, {"forest__n_estimators": IntDistribution(8, 40),
                   "forest__max_depth": IntDistribution(1, 8)},
        limits="dsp<=0.2", mitigation="threshold", cv=2, n_trials=5, random_state=0,
        budgets=(0.25, 1.0), resource="forest__n_estimators", pruner="successive_halving",
    ).fit(X, y, sensitive_features=group)
    # Trial by trial: both folds at a quarter of the trees, then (if not pruned) at all of
    # them; the refit of the best at all of them.
    expected = []
    for trial in search.study_.trials:
        trees = trial.params.get("forest__n_estimators", 100)
        expected += [max(1, round(trees / 4))] * 2
        if trial.state == optuna.trial.TrialState.COMPLETE:
            expected += [trees] * 2
    expected.append(search.best_params_.get("forest__n_estimators", 100))
    assert [n for n, _ in fits] == expected
    assert optuna.trial.TrialState.PRUNED in [t.state for t in search.study_.trials]


def test_a_resource_that_is_no_integer_parameter_of_the_model_is_refused() -> None:
    with pytest.raises(ValueError, match="`budgets` must be given with it, but got "
                                         "resource='n_estimators' and budgets=None"):
        FairObjective(biased_data(200), "xgboost", limits="dsp<=0.2", resource="n_estimators")
    # Refused when the objective is made, before any trial.
    with pytest.raises(ValueError, match=r"`resource` must name one positive integer parameter "
                                         r"of the model, but got resource='n_trees', which "
                                         r"matches none; the model's positive integer "
                                         r"parameters: \[.*'n_estimators'"):
        FairObjective(biased_data(300), "xgboost", limits="dsp<=0.2", budgets=(0.5, 1.0),
                      resource="n_trees")
