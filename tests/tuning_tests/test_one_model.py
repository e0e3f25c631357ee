"""One model of a search: the data, the setup and the evaluation written once, every entrance
thin. Each test is a case where two parts of the library once held their own idea of the same
fact and gave a plausible wrong answer."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler

from fairtune.cli import main
from fairtune.samplers import CollaborativeUCBSampler
from fairtune.tuning import FairObjective, FairSearchCV, make_pruner

PACKAGE = Path(__file__).resolve().parents[2] / "fairtune"


def _data(n: int = 400, seed: int = 0, groups: tuple[str, ...] = ("a", "b")
          ) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    rng = np.random.default_rng(seed)
    group = pd.Series(rng.choice(list(groups), n), name="group")
    x1 = rng.normal(size=n) + (group == groups[0]).to_numpy()
    x2 = rng.normal(size=n)
    y = pd.Series((x1 + 0.5 * x2 + rng.normal(scale=0.8, size=n) > 0.5).astype(int))
    return pd.DataFrame({"x1": x1, "x2": x2}), y, group


def _search(estimator=None, **kwargs) -> FairSearchCV:
    kwargs.setdefault("limits", "demographic_parity<=0.4")
    return FairSearchCV(
        estimator if estimator is not None else make_pipeline(StandardScaler(),
                                                              LogisticRegression()),
        {"logisticregression__C": FloatDistribution(0.01, 10.0, log=True)},
        cv=2, n_trials=2, random_state=0, **kwargs)


# -- the data ---------------------------------------------------------------------------------


def test_budget_subsets_keep_every_value_the_unseen_value_guard_checks() -> None:
    # COMPAS's groups (Caucasian / Other) are coarser than its race column, which the model
    # reads and whose unseen values the deployed pipeline refuses.
    objective = FairObjective("compas", "linear", limits="demographic_parity<=0.1",
                              budgets=(1 / 9, 1 / 3, 1.0))
    study = objective.create_study(pruner="successive_halving", seed=0)
    study.optimize(objective, n_trials=3)
    states = [t.state for t in study.trials]
    assert TrialState.FAIL not in states and TrialState.COMPLETE in states
    races = set(objective.X_dev["race"])
    for folds in objective._rows.splits.budget_folds:
        for fit, valid in folds:
            assert set(objective.X_dev["race"].iloc[fit]) == races


@pytest.mark.parametrize("dataset", ["compas", "german", "adult"])
def test_the_command_line_runs_a_multi_fidelity_search_on_every_bundled_dataset(
    dataset: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["tune", "--dataset", dataset, "--model", "linear", "--limit",
                 "demographic_parity<=0.1", "--pruner", "successive_halving", "--n-trials", "2",
                 "--no-progress"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "Best fair trial" in out.out or "fair" in out.out


def test_twins_of_a_sensitive_value_are_named_in_a_warning() -> None:
    X, y, _ = _data(600)
    group = pd.Series(np.resize(["F", "f ", "M"], 600), name="sex")
    with pytest.warns(UserWarning, match=r"'F'.*'f '"):
        FairObjective((X, y, group), "linear", limits="demographic_parity<=0.2")


def test_a_group_too_small_to_measure_is_refused_naming_it_and_the_minimum() -> None:
    X, y, group = _data(400)
    group = group.copy()
    group.iloc[:3] = "tiny"
    # One rule, one message: the argument as each entrance spells it, the group's rows where a
    # trial is validated, and the limit that needs more.
    needle = (r" gives the group 'tiny' 3 rows in the cross-validation folds; the limit "
              r"demographic_parity<=0\.05 needs at least 21 rows of each group there")
    with pytest.raises(ValueError, match=r"^`dataset` sensitive features" + needle):
        FairObjective((X, y, group), "linear", limits="demographic_parity<=0.05", cv=3)
    with pytest.raises(ValueError, match=r"^`sensitive_features`" + needle):
        _search(limits="demographic_parity<=0.05").fit(X, y, sensitive_features=group)


# -- the setup --------------------------------------------------------------------------------


def test_a_stored_search_refuses_another_mitigation_or_another_pipeline() -> None:
    X, y, group = _data()
    study = optuna.create_study(direction="maximize")
    _search(mitigation="threshold", study=study).fit(X, y, sensitive_features=group)
    with pytest.raises(ValueError, match=r"`mitigation` 'threshold', but this run asks for "
                                         r"'none'"):
        _search(study=study).fit(X, y, sensitive_features=group)
    other = optuna.create_study(direction="maximize")
    _search(study=other).fit(X, y, sensitive_features=group)
    with pytest.raises(ValueError, match=r"`estimator` and `param_distributions` "
                                         r"'Pipeline\(StandardScaler, LogisticRegression\) #"):
        _search(make_pipeline(MinMaxScaler(), LogisticRegression()), study=other).fit(
            X, y, sensitive_features=group)
    # The starting value of a tuned parameter is not part of the setup.
    _search(make_pipeline(StandardScaler(), LogisticRegression(C=3.0)), study=other).fit(
        X, y, sensitive_features=group)


def test_a_resumed_multi_fidelity_study_refuses_other_budgets_or_no_pruner(
    tmp_path: Path
) -> None:
    X, y, group = _data()
    storage = f"sqlite:///{tmp_path / 'mf.db'}"

    def objective(budgets):
        return FairObjective((X, y, group), "linear", limits="demographic_parity<=0.2",
                             budgets=budgets)

    first = objective((1 / 3, 1.0)).create_study(storage=storage, study_name="mf",
                                                 pruner="successive_halving")
    first.optimize(objective((1 / 3, 1.0)), n_trials=2)
    with pytest.raises(ValueError, match=r"`budgets` '0.333333333333, 1', but this run asks for "
                                         r"'0.5, 1'"):
        objective((0.5, 1.0)).create_study(storage=storage, study_name="mf",
                                           pruner="successive_halving")
    with pytest.raises(ValueError, match=r"`pruner` 'successive_halving', but this run asks "
                                         r"for 'hyperband'"):
        objective((1 / 3, 1.0)).create_study(storage=storage, study_name="mf",
                                             pruner="hyperband")
    # Without budgets there is no pruner: the pruner is named, not the budgets it cuts.
    with pytest.raises(ValueError, match=r"`pruner` 'successive_halving', but this run asks "
                                         r"for none") as refused:
        objective(None).create_study(storage=storage, study_name="mf")
    assert "`budgets`" not in str(refused.value)


def test_the_command_line_names_the_flags_of_a_changed_multi_fidelity_setup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "data.csv"
    X, y, group = _data()
    X.assign(group=group, outcome=y).to_csv(path, index=False)
    base = ["tune", "--data", str(path), "--target", "outcome", "--sensitive", "group",
            "--model", "linear", "--limit", "demographic_parity<=0.2", "--n-trials", "1",
            "--no-progress", "--storage", f"sqlite:///{tmp_path / 'cli.db'}",
            "--study-name", "mf"]
    assert main([*base, "--pruner", "successive_halving", "--budgets", "0.5,1"]) == 0
    capsys.readouterr()
    assert main([*base, "--pruner", "successive_halving"]) == 2
    assert "--budgets '0.5, 1', but this run asks for '0.111111111111, 0.333333333333, 1'" in (
        capsys.readouterr().err)
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "--pruner 'successive_halving', but this run asks for none" in err
    assert main([*base, "--budgets", "0.5,1"]) == 2  # budgets without a pruner
    assert "--budgets" in (err := capsys.readouterr().err) and "--pruner" in err
    # The default budgets, typed as --help shows them, resume a study tuned with the default.
    other = [*base[:-1], "default", "--pruner", "successive_halving"]
    assert main(other) == 0
    assert main([*other, "--budgets", "1/9,1/3,1"]) == 0


def test_a_shared_study_refuses_tenants_in_another_order_or_another_tenant() -> None:
    X, y, group = _data()
    study = optuna.create_study(direction="maximize",
                                sampler=CollaborativeUCBSampler(tenants=["a", "b"], seed=0))
    FairObjective((X, y, group), "linear", limits="demographic_parity<=0.2",
                  tenant="a").prepare(study)
    assert study.user_attrs["fairtune:setup"]["tenants"] == ["a", "b"]
    for tenants in (["b", "a"], ["a", "b", "c"]):
        study.sampler = CollaborativeUCBSampler(tenants=tenants, seed=0)
        with pytest.raises(ValueError, match=r"`tenants` 'a, b', but this run asks for"):
            FairObjective((X, y, group), "linear", limits="demographic_parity<=0.2",
                          tenant="b").prepare(study)


def test_a_pruner_without_budgets_and_budgets_without_a_pruner_are_refused() -> None:
    X, y, group = _data()
    objective = FairObjective((X, y, group), "linear", limits="demographic_parity<=0.2")
    study = optuna.create_study(direction="maximize",
                                pruner=optuna.pruners.SuccessiveHalvingPruner())
    with pytest.raises(ValueError, match=r"`pruner` stops trials at smaller budgets, so "
                                         r"`budgets` must be given"):
        study.optimize(objective, n_trials=1)
    with pytest.raises(ValueError, match=r"`pruner` stops trials at smaller budgets"):
        _search(study=optuna.create_study(
            direction="maximize", pruner=optuna.pruners.SuccessiveHalvingPruner())).fit(
            X, y, sensitive_features=group)
    with pytest.raises(ValueError, match=r"`pruner` stops trials at smaller budgets"):
        _search(pruner=optuna.pruners.HyperbandPruner()).fit(X, y, sensitive_features=group)
    budgeted = FairObjective((X, y, group), "linear", limits="demographic_parity<=0.2",
                             budgets=(0.5, 1.0))
    with pytest.raises(ValueError, match=r"a pruner must be given with them"):
        optuna.create_study(direction="maximize").optimize(budgeted, n_trials=1)
    with pytest.raises(ValueError, match=r"a pruner must be given with them"):
        _search(budgets=(0.5, 1.0)).fit(X, y, sensitive_features=group)
    # An explicit median rule is a pruner, although it has the default's settings.
    _search(budgets=(0.5, 1.0), pruner=make_pruner("median", (0.5, 1.0))).fit(
        X, y, sensitive_features=group)


# -- study preparation ------------------------------------------------------------------------


def test_an_interrupted_untuned_trial_is_run_again_on_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'resume.db'}"
    objective = FairObjective("german", "linear", limits="demographic_parity<=0.1")
    study = objective.create_study(storage=storage, study_name="german-linear-fairbo")
    trial = study.ask()  # the enqueued untuned model; Ctrl-C while it fits
    objective.make_pipeline(trial)
    study.tell(trial, state=TrialState.FAIL)
    assert study.trials[0].params == objective.default_params()
    assert main(["tune", "--dataset", "german", "--model", "linear", "--limit",
                 "demographic_parity<=0.1", "--n-trials", "1", "--no-progress",
                 "--storage", storage]) == 0
    resumed = optuna.load_study(study_name="german-linear-fairbo", storage=storage)
    assert resumed.trials[1].params == objective.default_params()
    assert resumed.trials[1].state == TrialState.COMPLETE


# -- the evaluation and the layout ------------------------------------------------------------


def _functions_calling(path: Path, name: str) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and (
                    getattr(call.func, "attr", None) == name
                    or getattr(call.func, "id", None) == name
                ):
                    found.add(node.name)
    return found


def test_both_entrances_call_the_one_evaluation_and_no_second_trial_loop() -> None:
    tuning = PACKAGE / "tuning"
    callers = {path.name: _functions_calling(path, "run_trial") for path in tuning.glob("*.py")}
    # FairObjective.__call__ and FairSearchCV's objective (_estimators._SearchObjective).
    assert {name: found for name, found in callers.items() if found} == {
        "objective.py": {"__call__"}, "_estimators.py": {"__call__"}}
    for path in tuning.glob("*.py"):
        if path.name == "_trial.py":
            continue
        for private in ("out_of_fold_predictions", "record_validation", "report_rung",
                        "fit_and_score", "budget_rows"):
            if path.name == "_data.py" and private == "budget_rows":
                continue  # budget_folds cuts each fold with it
            assert not _functions_calling(path, private), (path.name, private)
    for module in ("objective.py", "search.py"):
        assert len((tuning / module).read_text().splitlines()) <= 700, module


# -- cases a probe from the docs alone found --------------------------------------------------


def test_sensitive_features_that_are_the_labels_are_refused_by_both_entrances() -> None:
    X, y, _ = _data()
    decision = y.map({1: "approved", 0: "denied"})
    with pytest.raises(ValueError, match=r"must not determine the labels.*'approved': every "
                                         r"row favourable"):
        FairObjective((X, decision, decision), "linear", limits="demographic_parity<=0.2",
                      pos_label="approved")
    with pytest.raises(ValueError, match=r"`sensitive_features` must not determine the labels"):
        _search().fit(X, y, sensitive_features=y.astype(str))


def _tenant(study, tenant, **kwargs):
    X, y, group = _data(seed={"a": 0, "b": 1}[tenant])
    objective = FairObjective((X, y, group), "linear", tenant=tenant, **kwargs)
    objective.prepare(study)
    return objective


def test_each_tenant_is_judged_by_its_own_limits() -> None:
    from fairtune.fairness import best_fair_trial, is_fair, study_limits
    from fairtune.report import report
    from fairtune.tenancy import ask

    study = optuna.create_study(direction="maximize",
                                sampler=CollaborativeUCBSampler(tenants=["a", "b"], seed=0))
    strict = _tenant(study, "a", limits="demographic_parity<=0.02")
    loose = _tenant(study, "b", limits="demographic_parity<=0.5")
    for objective in (strict, loose, strict, loose):
        trial = ask(study, objective.tenant)
        study.tell(trial, objective(trial))
    assert str(study_limits(study, "a")["demographic_parity"]) == "demographic_parity<=0.02"
    assert str(study_limits(study, "b")["demographic_parity"]) == "demographic_parity<=0.5"
    for tenant in ("a", "b"):
        limits = study_limits(study, tenant)
        mine = [t for t in study.trials if t.user_attrs["fairtune:tenant"] == tenant]
        fair = [t for t in mine if is_fair(t, limits)]
        best = best_fair_trial(study, tenant=tenant)
        assert best == (max(fair, key=lambda t: t.value) if fair else None)
        row = next(r for r in report(study).tenants if r.tenant == tenant)
        assert row.fair == len(fair)


def test_a_shared_study_refuses_budgets_and_another_model_space() -> None:
    study = optuna.create_study(direction="maximize",
                                sampler=CollaborativeUCBSampler(tenants=["a", "b"], seed=0))
    with pytest.raises(ValueError, match=r"`budgets` let a pruner stop.*tenant='a'"):
        _tenant(study, "a", limits="demographic_parity<=0.2", budgets=(0.5, 1.0))
    _tenant(study, "a", limits="demographic_parity<=0.2")
    with pytest.raises(ValueError, match=r"`model` 'linear', but this run asks for "
                                         r"'random_forest'"):
        X, y, group = _data(seed=1)
        FairObjective((X, y, group), "random_forest", tenant="b",
                      limits="demographic_parity<=0.2").prepare(study)


def test_another_positive_value_of_a_file_is_named_on_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y, group = _data()
    path = tmp_path / "decisions.csv"
    X.assign(group=group, outcome=np.where(y == 1, "yes", "no")).to_csv(path, index=False)
    base = ["tune", "--data", str(path), "--target", "outcome", "--sensitive", "group",
            "--model", "linear", "--limit", "demographic_parity<=0.4", "--n-trials", "1",
            "--no-progress", "--storage", f"sqlite:///{tmp_path / 'p.db'}", "--study-name", "p"]
    assert main([*base, "--positive", "yes"]) == 0
    capsys.readouterr()
    assert main([*base, "--positive", "no"]) == 2
    assert "--positive 'yes', but this run asks for 'no'" in capsys.readouterr().err


def test_groups_that_print_alike_are_told_apart_in_the_report() -> None:
    from fairtune.report import report

    X, y, _ = _data(600)
    group = pd.Series(np.resize(["F", "F\r", "F "], 600), name="sex")
    with pytest.warns(UserWarning):
        objective = FairObjective((X, y, group), "linear", limits="demographic_parity<=0.4")
    study = optuna.create_study(direction="maximize")
    study.optimize(objective, n_trials=1)
    page = report(study)
    text, html = page.text(), page.html()
    names = [re.match(r"\s*(group .*?)\s+[0-9.]+$", line).group(1)
             for line in text.splitlines() if line.strip().startswith("group ")]
    assert sorted(names) == sorted(["group F", "group 'F\\r'", "group 'F '"])
    assert "group &#x27;F\\r&#x27;" in html and "group &#x27;F &#x27;" in html


def test_search_names_label_twins_in_its_two_classes_message() -> None:
    X, _, group = _data(300)
    labels = np.resize(["approved", "Approved", "denied"], 300)
    with pytest.raises(ValueError, match=r"differ only in case.*'Approved' \(100 rows\), "
                                         r"'approved' \(100 rows\)"):
        _search(pos_label="approved").fit(X, labels, sensitive_features=group)


def test_a_resource_the_model_lacks_is_refused_before_any_trial(
    capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match=r"`resource` must name one positive integer "
                                         r"parameter"):
        FairObjective("german", "linear", limits="demographic_parity<=0.1",
                      budgets=(0.5, 1.0), resource="n_estimators")
    assert main(["tune", "--dataset", "german", "--model", "linear", "--limit",
                 "demographic_parity<=0.1", "--resource", "n_estimators", "--n-trials", "1",
                 "--no-progress"]) == 2
    assert "--pruner must be given with it" in capsys.readouterr().err


def test_a_tenants_test_scores_are_stored_and_reported_as_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    for tenant, seed in (("a", 0), ("b", 1)):
        X, y, group = _data(seed=seed)
        path = tmp_path / f"{tenant}.csv"
        X.assign(group=group, outcome=y).to_csv(path, index=False)
        assert main(["tune", "--data", str(path), "--target", "outcome", "--sensitive", "group",
                     "--model", "linear", "--limit", "demographic_parity<=0.4", "--n-trials",
                     "2", "--no-progress", "--test-size", "0.25", "--tenant", tenant,
                     "--tenants", "a,b", "--storage", storage, "--study-name", "shared"]) == 0
    printed = [line.strip() for line in capsys.readouterr().out.splitlines()
               if line.strip().startswith("Test split")]
    for tenant in ("a", "b"):
        assert main(["report", "--storage", storage, "--study-name", "shared",
                     "--tenant", tenant]) == 0
        shown = [line.strip() for line in capsys.readouterr().out.splitlines()
                 if line.strip().startswith("Test split")]
        assert shown and set(shown) <= set(printed)
    study = optuna.load_study(study_name="shared", storage=storage)
    assert (study.user_attrs["fairtune:test_scores:a"]["fits"]
            != study.user_attrs["fairtune:test_scores:b"]["fits"])


def test_missing_values_for_a_model_that_needs_complete_rows_are_refused_before_any_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y, group = _data()
    X = X.copy()
    X.loc[:6, "x1"] = np.nan
    with pytest.raises(ValueError, match=r"`model` 'linear' needs complete rows, but the "
                                         r"columns \{'x1': 7\} have missing values"):
        FairObjective((X, y, group), "linear", limits="demographic_parity<=0.4")
    FairObjective((X, y, group), "xgboost", limits="demographic_parity<=0.4")  # handles them
    path = tmp_path / "gaps.csv"
    X.assign(group=group, outcome=y).to_csv(path, index=False)
    assert main(["tune", "--data", str(path), "--target", "outcome", "--sensitive", "group",
                 "--model", "mlp", "--limit", "demographic_parity<=0.4", "--n-trials", "1",
                 "--no-progress"]) == 2
    assert "--model 'mlp' needs complete rows" in capsys.readouterr().err


def test_text_columns_one_hot_encoding_would_read_badly_are_named_in_a_warning() -> None:
    X, y, group = _data(700)
    X = X.assign(app=[f"APP-{i:05d}" for i in range(700)],
                 amount=X["x1"].round(2).astype(str).where(np.arange(700) != 3, "?"))
    with pytest.warns(UserWarning) as caught:
        FairObjective((X, y, group), "xgboost", limits="demographic_parity<=0.4")
    messages = [str(w.message) for w in caught]
    assert any("column 'app' has 700 distinct values in 700 rows" in m
               and "`drop_columns` app" in m for m in messages)
    assert any("column 'amount' holds numbers but is read as text because of 1 value that is "
               "not one, e.g. ['?']" in m for m in messages)
    # Dropped, the identifier is not warned of.
    with pytest.warns(UserWarning) as caught:
        FairObjective((X, y, group), "xgboost", limits="demographic_parity<=0.4",
                      drop_columns=["app"])
    assert not any("'app'" in str(w.message) for w in caught)


def test_a_fair_objective_trial_records_what_its_fits_took() -> None:
    """Each trial records the seconds of each fit and prediction (one per fold), as a
    FairSearchCV trial does, so that benchmarks read them instead of patching the objective."""
    from fairtune.tuning.search import FIT_TIMES_KEY, SCORE_TIMES_KEY

    objective = FairObjective("german", "linear", limits="demographic_parity<=0.2", cv=3)
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=2)
    for trial in study.trials:
        for key in (FIT_TIMES_KEY, SCORE_TIMES_KEY):
            times = trial.user_attrs[key]
            assert len(times) == 3 and all(t > 0 for t in times)
