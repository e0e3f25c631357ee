"""The setup record on resume (fairtune.tuning._setup): each refusal names what the user chose
differently, by the argument or flag they set it with, and nothing a refused run does changes the
stored records."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
from optuna.distributions import FloatDistribution
from sklearn.linear_model import LogisticRegression

from fairtune import tenancy
from fairtune._names import argument_names
from fairtune.cli import _DATA_FLAGS, _FLAGS, main
from fairtune.datasets import read_table
from fairtune.fairness import study_limits
from fairtune.samplers import CollaborativeUCBSampler
from fairtune.tuning import FairObjective, FairSearchCV
from fairtune.tuning._setup import setup_message

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _data(n: int = 300, seed: int = 0) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    rng = np.random.default_rng(seed)
    group = pd.Series(rng.choice(["a", "b"], n), name="group")
    x1 = rng.normal(size=n) + (group == "a").to_numpy()
    x2 = rng.normal(size=n)
    y = pd.Series((x1 + 0.5 * x2 + rng.normal(scale=0.8, size=n) > 0.5).astype(int), name="y")
    return pd.DataFrame({"x1": x1, "x2": x2}), y, group


def _objective(X, y, s, **kwargs) -> FairObjective:
    kwargs.setdefault("limits", "demographic_parity<=0.3")
    return FairObjective((X, y, s), "linear", test_size=0.25, **kwargs)


def test_a_changed_row_of_the_test_split_is_refused_and_named() -> None:
    X, y, s = _data()
    first = _objective(X, y, s)
    study = optuna.create_study(direction="maximize")
    study.optimize(first, n_trials=1)
    test_row = first.X_test.index[0]
    changed = X.copy()
    changed.loc[test_row, "x1"] += 1.0
    with pytest.raises(ValueError, match=r"holds trials scored on other data \(the held-out "
                                         r"rows of the test split \(`test_size`\) changed"):
        study.optimize(_objective(changed, y, s), n_trials=1)
    with pytest.raises(ValueError, match=r"the held-out rows of the test split"):
        _objective(changed, y, s).refit_best(study)
    # A changed tuning row is still refused, as before, with the fingerprint message.
    tuning = X.copy()
    tuning.loc[first.X_dev.index[0], "x1"] += 1.0
    with pytest.raises(ValueError, match=r"other data \(data fingerprint"):
        study.optimize(_objective(tuning, y, s), n_trials=1)
    assert len(study.trials) == 3 and study.trials[0].state.name == "COMPLETE"


def test_reordered_columns_are_refused_as_other_data_that_may_be_reordered() -> None:
    X, y, s = _data()
    study = optuna.create_study(direction="maximize")
    study.optimize(_objective(X, y, s), n_trials=1)
    with pytest.raises(ValueError, match=r"other data \(the tuning rows .* changed: a value, "
                                         r"label or group differs, or the rows or columns are "
                                         r"in another order"):
        study.optimize(_objective(X[["x2", "x1"]], y, s), n_trials=1, catch=())


def test_a_study_of_the_previous_version_without_held_out_digests_resumes() -> None:
    X, y, s = _data()
    study = optuna.create_study(direction="maximize")
    study.optimize(_objective(X, y, s), n_trials=1)
    old = dict(study.user_attrs["fairtune:setup"])
    del old["rows"], old["limits_given"]  # what the previous version stored
    study.set_user_attr("fairtune:setup", old)
    changed = X.copy()
    changed.loc[_objective(X, y, s).X_test.index[0], "x1"] += 1.0
    study.optimize(_objective(changed, y, s), n_trials=1)  # its held-out rows were not stored
    stored = study.user_attrs["fairtune:setup"]
    assert stored["rows"]["test"] is not None and stored["limits_given"] == [
        "demographic_parity<=0.3"]
    # From then on they are part of the setup.
    with pytest.raises(ValueError, match=r"the held-out rows of the test split"):
        study.optimize(_objective(X, y, s), n_trials=1)


def test_another_margin_is_named_and_not_the_limits_it_derives() -> None:
    X, y, s = _data()
    study = optuna.create_study(direction="maximize")
    study.optimize(_objective(X, y, s), n_trials=1)
    with pytest.raises(ValueError) as error:
        study.optimize(_objective(X, y, s, margin=0.05), n_trials=1)
    message = str(error.value)
    assert "was tuned with `margin` 0.0, but this run asks for 0.05: " in message
    assert "use the same `margin` as before" in message and "`limits`" not in message
    assert "demographic_parity<=0.25" not in message  # the limit the margin derives
    # study_limits still reads the validated limits.
    assert str(study_limits(study)["demographic_parity"]) == "demographic_parity<=0.3"


def _certified_records() -> tuple[dict, dict]:
    stored = {"limits_given": ["demographic_parity<=0.2"], "limits": ["demographic_parity<=0.11395"],
              "margin": 0.0, "confidence": 0.9, "safety_size": 0.3, "bound": "exact",
              "data": "d1",
              "rows": {"tuning": "t1", "test": None, "safety": "s1"}}
    return stored, copy.deepcopy(stored)


@pytest.mark.parametrize(("change", "named", "unnamed"), [
    ({"confidence": 0.95, "limits": ["demographic_parity<=0.107701"]},
     "--confidence 0.9, but this run asks for 0.95", "--safety-size"),
    ({"confidence": None, "safety_size": None, "bound": None,
      "limits": ["demographic_parity<=0.2"]},
     "--confidence 0.9, but this run asks for none", "--safety-size"),
    ({"confidence": None, "safety_size": None, "bound": None,
      "limits": ["demographic_parity<=0.2"]},
     "--confidence 0.9, but this run asks for none", "--bound"),
    ({"bound": "score", "limits": ["demographic_parity<=0.12"]},
     "--bound 'exact', but this run asks for 'score'", "--confidence"),
    ({"safety_size": 0.4, "limits": ["demographic_parity<=0.125546"]},
     "--safety-size 0.3, but this run asks for 0.4", "--confidence"),
    ({"data": "d2", "rows": {"tuning": "t1", "test": None, "safety": "s2"},
      "limits": ["demographic_parity<=0.12"]},
     "the held-out safety rows (--confidence) changed", "--safety-size"),
])
def test_a_certified_study_names_the_choice_and_not_the_tightened_limits(
    change: dict, named: str, unnamed: str
) -> None:
    study = optuna.create_study(study_name="cert")
    stored, record = _certified_records()
    record.update(change)
    names = [n for n in record if record[n] != stored[n]]
    with argument_names({**_FLAGS, **_DATA_FLAGS}):
        message = setup_message(study, stored, record, names)
    assert named in message and unnamed not in message
    assert "--limit" not in message and "demographic_parity<=0.11395" not in message
    # Another --limit as typed is named with the values typed.
    record = {**stored, "limits_given": ["demographic_parity<=0.1"],
              "limits": ["demographic_parity<=0.01"]}
    with argument_names(_FLAGS):
        message = setup_message(study, stored, record, ["limits_given", "limits"])
    assert ("--limit 'demographic_parity<=0.2', but this run asks for 'demographic_parity<=0.1'"
            in message)


def test_a_record_without_the_limits_as_given_names_the_validated_limits_when_nothing_else_differs(
) -> None:
    study = optuna.create_study(study_name="old")
    stored = {"limits": ["demographic_parity<=0.2"], "margin": 0.0}
    record = {"limits": ["demographic_parity<=0.1"], "margin": 0.0,
              "limits_given": ["demographic_parity<=0.1"]}
    message = setup_message(study, stored, record, ["limits"])
    assert "`limits` 'demographic_parity<=0.2', but this run asks for 'demographic_parity<=0.1'" \
        in message


def _file(tmp_path: Path) -> Path:
    X, y, s = _data(n=400)
    path = tmp_path / "people.csv"
    X.assign(sex=np.where(X.x2 > 0, "f", "m"), group=s, y=y, y2=1 - y).to_csv(path, index=False)
    return path


@pytest.mark.parametrize(("changed", "named"), [
    (["--sensitive", "sex"], "--sensitive 'group', but this run asks for 'sex'"),
    (["--sensitive", "group,sex"], "--sensitive 'group', but this run asks for 'group, sex'"),
    (["--hide-sensitive"], "--hide-sensitive 'off', but this run asks for 'on'"),
    (["--target", "y2", "--drop-columns", "y"], "--target 'y', but this run asks for 'y2'"),
    (["--positive", "0"], "--positive 1, but this run asks for '0'"),
])
def test_the_command_line_names_the_flag_of_each_part_of_the_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changed: list[str], named: str
) -> None:
    path = _file(tmp_path)
    base = {"--target": "y", "--sensitive": "group", "--drop-columns": "y2"}
    for flag, value in zip(changed[::2], changed[1::2]):
        base[flag] = value
    run = ["tune", "--data", str(path), "--model", "linear", "--limit", "dsp<=0.5",
           "--n-trials", "1", "--no-progress", "--storage", f"sqlite:///{tmp_path / 's.db'}",
           "--study-name", "s"]
    first = [*run, "--target", "y", "--sensitive", "group", "--drop-columns", "y2"]
    assert main(first) == 0
    again = [*run, *(x for kv in base.items() for x in kv)]
    if changed == ["--hide-sensitive"]:
        again.append("--hide-sensitive")
    capsys.readouterr()
    assert main(again) == 2
    err = capsys.readouterr().err
    assert named in err and "(and --hide-sensitive" not in err
    assert "another --study-name" in err


def test_read_tables_positive_is_named_as_typed(tmp_path: Path) -> None:
    path = _file(tmp_path)
    study = optuna.create_study(direction="maximize")
    plain = read_table(path, target="y", sensitive="group")
    FairObjective(plain, "linear", limits="dsp<=0.5", drop_columns=["y2"]).prepare(study)
    positive = read_table(path, target="y", sensitive="group", positive=0)
    with pytest.raises(ValueError, match=r"was tuned with `positive` 1, but this run asks "
                                         r"for 0: .*use the same `positive` as before"):
        FairObjective(positive, "linear", limits="dsp<=0.5", drop_columns=["y2"]).prepare(study)


def test_pos_label_1_on_0_1_labels_resumes_the_default_scoring(tmp_path: Path) -> None:
    X, y, s = _data()
    study = optuna.create_study(direction="maximize")
    study.optimize(_objective(X, y, s), n_trials=1)
    for favourable in (1, True):  # the same scoring
        study.optimize(_objective(X, y, s, pos_label=favourable), n_trials=1)
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3
    # A file's --positive 1, the same way.
    path = _file(tmp_path)
    run = ["tune", "--data", str(path), "--target", "y", "--sensitive", "group",
           "--drop-columns", "y2", "--model", "linear", "--limit", "dsp<=0.5", "--n-trials", "1",
           "--no-progress", "--storage", f"sqlite:///{tmp_path / 's.db'}", "--study-name", "s"]
    assert main(run) == 0
    assert main([*run, "--positive", "1"]) == 0
    with pytest.raises(ValueError, match=r"was tuned with `pos_label` none, but this run asks "
                                         r"for 0"):
        study.optimize(_objective(X, y, s, pos_label=0), n_trials=1)


def _search(limits: str, study: optuna.Study) -> FairSearchCV:
    return FairSearchCV(LogisticRegression(), {"C": FloatDistribution(1e-2, 1e2, log=True)},
                        limits=limits, cv=2, n_trials=1, random_state=0, study=study,
                        refit=False)


def test_fair_search_cv_names_its_own_study_and_what_tuned_the_study() -> None:
    X, y, s = _data()
    study = optuna.create_study(direction="maximize")
    _search("demographic_parity<=0.9", study).fit(X, y, sensitive_features=s)
    with pytest.raises(ValueError) as error:
        _search("demographic_parity<=0.8", study).fit(X, y, sensitive_features=s)
    assert "`limits` 'demographic_parity<=0.9', but this run asks for " \
           "'demographic_parity<=0.8'" in str(error.value)
    assert "or a new `study` or study=None." in str(error.value)
    assert "study_name" not in str(error.value)
    objective = _objective(X, y, s)
    other = objective.create_study()
    with pytest.raises(ValueError, match=r"was tuned by FairObjective \(or `fairtune tune`\), "
                                         r"which FairSearchCV cannot resume") as error:
        _search("demographic_parity<=0.9", other).fit(X, y, sensitive_features=s)
    assert "entrance" not in str(error.value)
    with pytest.raises(ValueError, match=r"was tuned by FairSearchCV, which FairObjective "
                                         r"cannot resume.*another `study_name`"):
        objective.prepare(study)


def _shared() -> tuple[optuna.Study, FairObjective]:
    X, y, s = _data()
    study = optuna.create_study(direction="maximize", sampler=CollaborativeUCBSampler(
        tenants=["alpha", "beta"], seed=0))
    beta = FairObjective((X, y, s), "linear", limits="dsp<=0.3", tenant="beta")
    tenancy.optimize(study, "beta", beta, n_trials=1)
    return study, beta


def test_a_shared_study_refuses_an_objective_without_its_tenant_and_keeps_its_records() -> None:
    study, _ = _shared()
    records = copy.deepcopy(study.user_attrs)
    X, y, s = _data(seed=1)
    alone = FairObjective((X, y, s), "linear", limits="dsp<=0.05")
    with pytest.raises(ValueError, match=r"`tenant` 'beta' must be the tenant whose data the "
                                         r"objective scores, but the objective was made with "
                                         r"tenant=None"):
        tenancy.optimize(study, "beta", alone, n_trials=1)
    with pytest.raises(ValueError, match=r"`tenant` must be one of \['alpha', 'beta'\]: "
                                         r"`study` '.*' is shared by these tenants.*tenant=None"):
        study.optimize(alone, n_trials=1)
    with pytest.raises(ValueError, match=r"`tenant` must be one of \['alpha', 'beta'\]"):
        alone.prepare(study)
    assert study.user_attrs == records
    assert [t.state.name for t in study.trials] == ["COMPLETE", "FAIL"]


def test_an_objective_refuses_a_trial_of_another_tenant() -> None:
    study, beta = _shared()
    X, y, s = _data(seed=1)
    alpha = FairObjective((X, y, s), "linear", limits="dsp<=0.3", tenant="alpha")
    with pytest.raises(ValueError, match=r"must be the tenant whose data the objective scores, "
                                         r"but the objective was made with tenant='alpha'"):
        tenancy.optimize(study, "beta", alpha, n_trials=1)
    alpha.prepare(study)
    records = copy.deepcopy(study.user_attrs)
    trial = tenancy.ask(study, "beta")
    with pytest.raises(ValueError, match=r"`tenant` 'alpha' scores its own data, but trial #1 "
                                         r"of `study` '.*' is tenant 'beta''s"):
        alpha(trial)
    assert study.user_attrs == records
    # An untagged trial of a tenant's objective is that tenant's.
    study.optimize(alpha, n_trials=1)
    assert tenancy.tenant_of(study.trials[-1]) == "alpha"
    assert study.trials[-1].state.name == "COMPLETE"


# -- refits: the same comparison as a resume, before anything is stored ---------------------------


def _certifiable(**kwargs) -> FairObjective:
    X, y, s = _data(n=2000)
    kwargs = {"limits": "demographic_parity<=0.6", "confidence": 0.9, **kwargs}
    return _objective(X, y, s, **kwargs)


@pytest.mark.parametrize(("change", "named"), [
    ({"confidence": 0.8}, "`confidence` 0.9, but this run asks for 0.8"),
    ({"limits": "demographic_parity<=0.5"},
     "`limits` 'demographic_parity<=0.6', but this run asks for 'demographic_parity<=0.5'"),
    ({"margin": 0.01}, "`margin` 0.0, but this run asks for 0.01"),
])
def test_refit_best_and_conclude_refuse_another_setup_as_a_resume_does_and_store_nothing(
    change: dict, named: str
) -> None:
    objective = _certifiable()
    study = objective.create_study(seed=0)  # the untuned model first: fair, and certified
    study.optimize(objective, n_trials=1)
    objective.refit_best(study)  # the certificate is stored
    records = copy.deepcopy(study.user_attrs)
    other = _certifiable(**change)
    with pytest.raises(ValueError) as resumed:
        study.optimize(other, n_trials=1)
    for refit in (other.refit_best, other.conclude, lambda st: other.refit_best(st, trial=0)):
        with pytest.raises(ValueError) as refused:
            refit(study)
        assert str(refused.value) == str(resumed.value) and named in str(refused.value)
    assert study.user_attrs == records
    # The same setup still refits and certifies.
    assert objective.refit_best(study).certificate_.trial == records[
        "fairtune:certificate"]["trial"]


def test_a_refit_of_a_study_stored_by_an_older_version_is_not_refused() -> None:
    objective = _certifiable()
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=1)
    old = dict(study.user_attrs["fairtune:setup"])
    for entry in ("rows", "limits_given", "confidence", "safety_size"):
        del old[entry]
    study.set_user_attr("fairtune:setup", old)
    assert objective.refit_best(study).certificate_.trial == 0


def test_refit_best_on_a_shared_study_refuses_an_objective_without_a_tenant_or_with_other_data(
) -> None:
    study, beta = _shared()
    records = copy.deepcopy(study.user_attrs)
    X, y, s = _data(seed=1)
    alone = FairObjective((X, y, s), "linear", limits="dsp<=0.3")
    with pytest.raises(ValueError, match=r"`tenant` must be one of \['alpha', 'beta'\]: "
                                         r"`study` '.*' is shared by these tenants"):
        alone.refit_best(study)
    other = FairObjective((X, y, s), "linear", limits="dsp<=0.3", tenant="beta")
    with pytest.raises(ValueError, match=r"\(tenant 'beta'\) holds trials scored on other data"):
        other.refit_best(study)
    assert study.user_attrs == records
    assert beta.refit_best(study).predict(X.head(2)).shape == (2,)


def test_tenancy_optimize_refuses_before_any_trial_or_record_is_written() -> None:
    study, beta = _shared()
    records = copy.deepcopy(study.user_attrs)
    X, y, s = _data(seed=1)
    gamma = FairObjective((X, y, s), "linear", limits="dsp<=0.3", tenant="gamma")
    with pytest.raises(ValueError, match=r"`tenant` must be one of the sampler's `tenants` "
                                         r"\['alpha', 'beta'\] .*but got tenant='gamma'"):
        tenancy.optimize(study, "gamma", gamma, n_trials=1)
    with pytest.raises(ValueError, match=r"`tenant` must be one of \['alpha', 'beta'\] \(the "
                                         r"tenants of `study` .*\), but got tenant='gamma'"):
        gamma.prepare(study)  # the same tenant, checked by the objective itself
    other = FairObjective((X, y, s), "linear", limits="dsp<=0.3", tenant="beta")
    with pytest.raises(ValueError, match=r"\(tenant 'beta'\) holds trials scored on other data"):
        tenancy.optimize(study, "beta", other, n_trials=1)
    margin = FairObjective(_data(), "linear", limits="dsp<=0.3", tenant="beta", margin=0.1)
    with pytest.raises(ValueError, match=r"`margin` 0.0, but this run asks for 0.1"):
        tenancy.optimize(study, "beta", margin, n_trials=1)
    assert study.user_attrs == records and len(study.trials) == 1
    tenancy.optimize(study, "beta", beta, n_trials=1)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]


# -- the command line names the file whose rows changed and the validation flag ---------------


def _run(path: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["tune", "--data", str(path), "--target", "y", "--sensitive", "group",
            "--drop-columns", "y2", "--model", "linear", "--limit", "dsp<=0.5", "--n-trials", "1",
            "--no-progress", "--storage", f"sqlite:///{tmp_path / 's.db'}", "--study-name", "s",
            "--test-size", "0.25", *extra]


@pytest.mark.parametrize("part", ["test", "safety"])
def test_the_command_line_refuses_a_changed_held_out_row_of_the_file_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], part: str
) -> None:
    path = _file(tmp_path)
    confidence = ["--confidence", "0.6"] if part == "safety" else []
    assert main(_run(path, tmp_path, *confidence)) == 0
    rows = FairObjective(read_table(path, target="y", sensitive="group"), "linear",
                         limits="dsp<=0.5", drop_columns=["y2"], test_size=0.25,
                         confidence=0.6 if confidence else None)._rows
    row = (rows.X_test if part == "test" else rows.X_safe).index[0]
    # The same file with one value of that row edited in place: only its line is rewritten
    # (a round trip through pandas can write the other floats back in other last digits).
    lines = path.read_text().splitlines(keepends=True)
    column = lines[0].rstrip("\n").split(",").index("x1")
    fields = lines[row + 1].rstrip("\n").split(",")
    fields[column] = repr(float(fields[column]) + 1.0)
    lines[row + 1] = ",".join(fields) + "\n"
    path.write_text("".join(lines))
    capsys.readouterr()
    assert main(_run(path, tmp_path, *confidence)) == 2
    err = capsys.readouterr().err
    shown = re.search(r"was tuned with --data ('people\.csv, 400 rows, sha256 \w+'), but this "
                      r"run asks for ('people\.csv, 400 rows, sha256 \w+')", err)
    assert shown is not None and shown[1] != shown[2]
    assert "use the same --data as before" in err


@pytest.mark.parametrize(("extra", "named", "unnamed"), [
    (["--test-size", "0.3"], "--test-size 0.25, but this run asks for 0.3", "--seed"),
    (["--seed", "1"], "--seed 0, but this run asks for 1", "--test-size"),
    (["--cv", "3"], "--cv none, but this run asks for 3", "--seed"),
])
def test_the_command_line_names_the_validation_flag_changed_with_the_values_typed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], named: str,
    unnamed: str
) -> None:
    path = _file(tmp_path)
    assert main(_run(path, tmp_path)) == 0
    capsys.readouterr()
    assert main(_run(path, tmp_path, *extra)) == 2
    err = capsys.readouterr().err
    assert f"was tuned with {named}" in err and "held out for testing" not in err
    assert unnamed not in err.split(":")[1] and f"use the same {named.split()[0]} as" in err


def _validation(text: str, cv: int | None, size: float | None, test: float | None,
                seed: int) -> dict:
    return {"validation": text, "parts": {"validation": {
        "cv": cv, "validation_size": size, "test_size": test, "random_state": seed}}}


def test_validation_entries_are_compared_part_by_part_and_other_texts_as_a_whole() -> None:
    """The record's structured parts name each differing argument, never a parse of its
    text; a record without them (an older version's) is named as a whole."""
    study = optuna.create_study(study_name="v")
    stored = _validation("a 30% split", None, 0.3, 0.2, 0)
    both = _validation("3 folds", 3, None, None, 2)
    message = setup_message(study, stored, both, ["validation"])
    assert "`cv` none, but this run asks for 3" in message
    assert "`test_size` 0.2, but this run asks for none" in message
    assert "`random_state` 0, but this run asks for 2" in message
    split = _validation("a 20% split", None, 0.2, 0.2, 0)
    assert "`validation_size` 0.3, but this run asks for 0.2" in setup_message(
        study, stored, split, ["validation"])
    older = {"validation": "a 30% validation split, 0.2 held out for testing, split seed 0"}
    assert "'a 30% validation split, 0.2 held out for testing, split seed 0', but this run " \
           "asks for '3 folds'" in setup_message(study, older, both, ["validation"])
    # FairSearchCV's description of its splitter is named by its own argument, as a whole.
    search = setup_message(study, {"validation": "StratifiedKFold(n_splits=3)"},
                           {"validation": "StratifiedKFold(n_splits=5)"}, ["validation"],
                           arguments={"validation": ("cv",)})
    assert "`cv` 'StratifiedKFold(n_splits=3)', but this run asks for " in search
