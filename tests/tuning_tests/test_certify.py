"""A deployed model with a stated confidence that it keeps the limits on new data, or a refusal:
the bounds, the safety rows, the certified model and its records."""

from __future__ import annotations

import re
import types
import warnings
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest

from fairtune.cli import main
from fairtune.fairness.bounds import metric_bound_width
from fairtune.tuning import FairObjective, NotCertifiedError
from fairtune.fairness import parse_limits
from fairtune.tuning import _certify


def _population(n: int, seed: int) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Applicants whose base rate depends on the group, with a proxy of the group."""
    rng = np.random.default_rng(seed)
    group = rng.choice(["a", "b"], n, p=[0.4, 0.6])
    merit = rng.normal(size=n)
    proxy = (group == "a") + rng.normal(scale=0.8, size=n)
    y = (merit + 0.6 * (group == "a") + rng.normal(scale=0.7, size=n) > 0.4).astype(int)
    X = pd.DataFrame({"merit": merit + rng.normal(scale=0.5, size=n), "proxy": proxy})
    return X, pd.Series(y), pd.Series(group, name="group")


# -- the search -------------------------------------------------------------------------------


def _objective(n: int = 8000, **kwargs) -> FairObjective:
    kwargs.setdefault("limits", "demographic_parity<=0.1")
    kwargs.setdefault("confidence", 0.9)
    return FairObjective(_population(n, 0), "linear", test_size=0.2, **kwargs)


def test_the_safety_rows_are_never_seen_by_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    objective = _objective()
    safety = set(objective._rows.X_safe.index)
    assert safety and not safety & set(objective.X_dev.index)
    assert not safety & set(objective.X_test.index)
    seen: set = set()
    fit, predict = FairObjective._fit, FairObjective._predict
    monkeypatch.setattr(FairObjective, "_fit", staticmethod(
        lambda pipeline, X, y, s: (seen.update(X.index), fit(pipeline, X, y, s))[1]))
    monkeypatch.setattr(FairObjective, "_predict", lambda self, pipeline, X, s, **kw: (
        seen.update(X.index), predict(self, pipeline, X, s, **kw))[1])
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=3)
    assert seen and not seen & safety


def test_the_search_aims_at_the_limit_less_the_width_the_safety_rows_allow() -> None:
    objective = _objective()
    (limit,), (aimed,) = objective.limits, objective.tuning_limits
    groups = objective._rows.s_safe.value_counts()
    rate = objective._rows.y_safe.mean()
    width = metric_bound_width("demographic_parity", groups.to_numpy()[:, None], rate,
                               alpha=1 - 0.9, method="exact")
    assert aimed.bound == pytest.approx(limit.bound - width)
    assert objective.setup["confidence"] == 0.9 and objective.setup["safety_size"] == 0.5
    assert objective.setup["limits"] == [str(aimed)]


def test_the_deployed_model_comes_with_its_certificate() -> None:
    from fairtune.report import report

    objective = _objective()
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=6)
    pipeline = objective.refit_best(study)
    certificate = pipeline.certificate_
    assert certificate.level == 0.9 and certificate.rows == len(objective._rows.y_safe)
    assert certificate.bounds["demographic_parity"] <= 0.1
    assert certificate.values["demographic_parity"] <= certificate.bounds["demographic_parity"]
    # The certified model is the candidate's pipeline fitted on the search rows: its
    # predictions of the safety rows give the recorded value.
    again = objective.refit_best(study, trial=certificate.trial)
    assert np.array_equal(again.predict(objective._rows.X_safe),
                          pipeline.predict(objective._rows.X_safe))
    assert objective.evaluate(pipeline)["certificate"]["trial"] == certificate.trial
    stored = study.user_attrs["fairtune:certificate"]
    assert stored["certified"] and stored["bounds"] == certificate.bounds
    assert "Certified: trial #" in report(study).text()


def test_no_certifiable_model_is_a_refusal_that_names_the_bounds() -> None:
    objective = _objective(limits="demographic_parity<=0.12", confidence=0.6)
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=2)
    # Every trial of another study: nothing fair, nothing to test.
    empty = optuna.create_study(direction="maximize")
    objective.record_setup(empty)
    with pytest.raises(NotCertifiedError, match=r"found no fair trial to test"):
        objective.refit_best(empty)
    assert empty.user_attrs["fairtune:certificate"]["certified"] is False


def test_too_few_safety_rows_for_the_limit_are_refused_before_any_trial() -> None:
    with pytest.raises(ValueError, match=r"`confidence` 0.99 cannot be reached for "
                                         r"demographic_parity<=0.05 on \d+ safety rows.*"
                                         r"`safety_size`"):
        _objective(n=1000, limits="demographic_parity<=0.05", confidence=0.99)
    # A limit of 0 leaves no room: neither rows nor a lower level help, only a looser limit.
    with pytest.raises(ValueError, match=r"certified by no number of rows\)\. Give a looser "
                                         r"limit\.$"):
        _objective(n=1000, limits="demographic_parity<=0", confidence=0.95)
    with pytest.raises(ValueError, match=r"`safety_size` holds out rows for the safety test"):
        FairObjective(_population(1000, 0), "linear", limits="dsp<=0.1", safety_size=0.2)
    with pytest.raises(ValueError, match=r"`confidence` must be a level in \(0\.5, 1\)"):
        _objective(confidence=95)
    # At one half or less, a one-sided bound says nothing about new data.
    with pytest.raises(ValueError, match=r"level in \(0\.5, 1\).*got confidence=0\.5"):
        _objective(confidence=0.5)
    # A float32 0.95 is the level 0.95 (as a resume compares it), not 0.949999988.
    assert _objective(confidence=np.float32(0.95)).confidence == 0.95
    with pytest.raises(ValueError, match=r"a multi-objective study has no single best model"):
        _objective(objectives=["accuracy", "demographic_parity"])


def _rows_of(counts: dict[tuple[str, int], int]) -> tuple[np.ndarray, np.ndarray]:
    """Safety rows with ``counts[(group, label)]`` rows of each group and label."""
    groups = np.concatenate([[g] * n for (g, _), n in counts.items()])
    labels = np.concatenate([[y] * n for (_, y), n in counts.items()])
    return labels, groups


@pytest.mark.parametrize("text", ["demographic_parity<=0.1", "equalized_odds<=0.2",
                                  "disparate_impact>=0.8"])
def test_the_rows_a_refusal_asks_for_are_enough_and_the_rows_it_had_are_not(text: str) -> None:
    # One estimate for every kind of metric: a gap's room is its bound, a ratio's is one
    # minus its bound (a perfectly fair model has a ratio of 1).
    from fairtune.fairness import parse_limits
    from fairtune.tuning._certify import limits_for_search

    share = {("a", 0): 0.24, ("a", 1): 0.16, ("b", 0): 0.3, ("b", 1): 0.3}
    limits = parse_limits(text)
    y, s = _rows_of({key: round(200 * p) for key, p in share.items()})
    with pytest.raises(ValueError, match=r"on 200 safety rows") as refused:
        limits_for_search(limits, 0.99, y, s)
    needed = int(re.search(r"needs about ([\d,]+) safety rows", str(refused.value))
                 .group(1).replace(",", ""))
    assert needed > 200
    given = limits[0].bound if limits[0].sense == "upper" else 1 - limits[0].bound

    def room(scale: float) -> float:  # under the limit the search aims at
        y, s = _rows_of({key: round(needed * p * scale) for key, p in share.items()})
        (tightened,) = limits_for_search(limits, 0.99, y, s)
        return (tightened.bound if tightened.sense == "upper" else 1 - tightened.bound) / given

    # The same proportions on the rows asked for leave the search half the limit; a tenth
    # fewer leave it less.
    assert 0.5 <= room(1.01) < 0.52
    assert 0 < room(0.9) < 0.5


def test_a_group_without_a_label_in_the_safety_rows_is_named_not_counted() -> None:
    # Group b has no unfavourable safety row: its false positive rate is undefined, and no
    # number of rows of the other groups changes that.
    from fairtune.fairness import parse_limits
    from fairtune.tuning._certify import limits_for_search

    y, s = _rows_of({("a", 0): 3000, ("a", 1): 3000, ("b", 1): 500})
    with pytest.raises(ValueError, match=r"in the safety rows group 'b' has no row labelled 0 "
                                         r"\(unfavourable\) among its 500 rows: its false "
                                         r"positive rate is undefined, and "
                                         r"equalized_odds<=0\.2 needs it\..*a larger "
                                         r"`safety_size`") as refused:
        limits_for_search(parse_limits("equalized_odds<=0.2"), 0.9, y, s)
    assert "safety rows on" not in str(refused.value)
    # Demographic parity measures every row: the same rows are enough for it.
    assert limits_for_search(parse_limits("demographic_parity<=0.2"), 0.9, y, s)


def test_a_group_without_a_label_in_all_the_data_is_not_blamed_on_the_safety_rows() -> None:
    # Every row of group 'c' is labelled 1: no share of the data gives it a false positive
    # rate, so the refusal names the data and asks for more of it, not a larger safety_size.
    X, y, group = _population(6000, 0)
    group = group.where(np.arange(len(group)) % 20 != 0, "c").astype(str)
    y = y.where(group != "c", 1)
    with pytest.raises(ValueError, match=r"in the data group 'c' has no row labelled 0 "
                                         r"\(unfavourable\).*\(more data\)") as refused:
        FairObjective((X, y, group), "linear", limits="equalized_odds<=0.2", confidence=0.9)
    assert "safety_size" not in str(refused.value)


def test_a_resume_with_another_confidence_is_refused() -> None:
    objective = _objective()
    study = objective.create_study(seed=0)
    with pytest.raises(ValueError, match=r"`confidence` 0.9, but this run asks for 0.8"):
        _objective(confidence=0.8).prepare(study)


def test_the_command_line_prints_the_certificate_or_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    X, y, group = _population(8000, 1)
    path = tmp_path / "applicants.csv"
    X.assign(group=group, decision=y).to_csv(path, index=False)
    args = ["tune", "--data", str(path), "--target", "decision", "--sensitive", "group",
            "--model", "linear", "--limit", "demographic_parity<=0.1", "--n-trials", "4",
            "--test-size", "0.2", "--confidence", "0.9", "--no-progress"]
    storage = f"sqlite:///{tmp_path / 'c.db'}"
    assert main([*args, "--storage", storage, "--study-name", "c"]) == 0
    out = capsys.readouterr().out
    assert "Certified: trial #" in out and "with 90% confidence" in out
    assert "Test split (1600 rows), the certified model:" in out
    # Stored with the study, for the certified trial: the report's answer carries it.
    study = optuna.load_study(study_name="c", storage=storage)
    trial = study.user_attrs["fairtune:certificate"]["trial"]
    stored = study.user_attrs["fairtune:test_scores"]
    assert stored["trial"] == trial and [fit["fit"] for fit in stored["fits"]] == ["certified"]
    from fairtune.report import report

    page = report(study)
    answer = page._verdict()[2]
    assert answer[0].startswith(f"Deploy trial #{trial}, the certified model")
    assert page.test_lines[0] in answer and page.test_lines[0] in out
    assert main([*args[:-5], "--confidence", "0.999", "--safety-size", "0.05",
                 "--no-progress"]) == 2
    assert "--confidence 0.999 cannot be reached" in capsys.readouterr().err


def test_fair_search_cv_refits_only_a_certified_model() -> None:
    from optuna.distributions import FloatDistribution
    from sklearn.linear_model import LogisticRegression

    from fairtune.tuning import FairSearchCV

    X, y, group = _population(8000, 2)

    def search(**kwargs):
        return FairSearchCV(LogisticRegression(), {"C": FloatDistribution(1e-3, 10, log=True)},
                            limits="demographic_parity<=0.1", mitigation="threshold", cv=3,
                            n_trials=4, random_state=0, confidence=0.9, safety_size=0.3,
                            **kwargs)

    fitted = search().fit(X, y, sensitive_features=group)
    certificate = fitted.best_estimator_.certificate_
    assert fitted.certificate_ is certificate and certificate.rows == 2400
    assert certificate.bounds["demographic_parity"] <= 0.1
    assert fitted.best_trial_.number == certificate.trial
    assert fitted.study_.user_attrs["fairtune:certificate"]["certified"]
    with pytest.raises(ValueError, match=r"`confidence` certifies the refitted model"):
        search(refit=False).fit(X, y, sensitive_features=group)
    with pytest.raises(NotCertifiedError, match=r"No trial meets the fairness limit "
                                                r"demographic_parity<=0\.0\d+ \(the given "
                                                r"limits less the width of their bound at "
                                                r"`confidence`=0.9.*no model could be "
                                                r"certified"):  # the aimed-at limit
        FairSearchCV(LogisticRegression(), {"C": FloatDistribution(1e-3, 10, log=True)},
                     limits="demographic_parity<=0.1", cv=3, n_trials=2, random_state=0,
                     confidence=0.9).fit(X.assign(proxy=group.eq("a") * 3.0), y,
                                         sensitive_features=group)


def test_fair_search_cv_ranks_the_certified_trial_first(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """When the best fair trial fails the safety test, ``best_index_`` and
    ``rank_test_score == 1`` both name the certified trial, and the trial that failed ranks
    behind it."""
    from optuna.distributions import FloatDistribution
    from sklearn.linear_model import LogisticRegression

    from fairtune.tuning import FairSearchCV, _certify

    bounds = _certify.safety_bounds
    calls: list[int] = []

    def second_fails(limits, *args, **kwargs):  # the second candidate's bound breaks the limit
        calls.append(1)
        found = bounds(limits, *args, **kwargs)
        return {m: 1.0 for m in found} if len(calls) == 2 else found

    monkeypatch.setattr(_certify, "safety_bounds", second_fails)
    X, y, group = _population(8000, 2)
    fitted = FairSearchCV(LogisticRegression(), {"C": FloatDistribution(1e-3, 10, log=True)},
                          limits="demographic_parity<=0.1", mitigation="threshold", cv=3,
                          n_trials=4, random_state=0, confidence=0.9, safety_size=0.3).fit(
        X, y, sensitive_features=group)
    results = fitted.cv_results_
    ranks = results["rank_test_score"]
    assert fitted.best_trial_.number == fitted.certificate_.trial
    assert ranks[fitted.best_index_] == 1 and list(ranks).count(1) == 1
    assert results["trial_number"][fitted.best_index_] == fitted.certificate_.trial
    failed = fitted.study_.user_attrs["fairtune:certificate"]["tested_trials"][1]
    assert failed != fitted.certificate_.trial
    assert ranks[list(results["trial_number"]).index(failed)] > 1
    # When the first candidate fails, nothing is deployed, and no trial ranks first.
    calls.clear()
    monkeypatch.setattr(_certify, "safety_bounds", lambda *a, **k: {
        m: 1.0 for m in bounds(*a, **k)})
    refused = FairSearchCV(LogisticRegression(), {"C": FloatDistribution(1e-3, 10, log=True)},
                           limits="demographic_parity<=0.1", mitigation="threshold", cv=3,
                           n_trials=4, random_state=0, confidence=0.9, safety_size=0.3)
    with pytest.raises(NotCertifiedError):
        refused.fit(X, y, sensitive_features=group)
    assert 1 not in refused.cv_results_["rank_test_score"]
    # Nor is the candidate that failed left to predict with; the error says why.
    assert not hasattr(refused, "best_index_") and not hasattr(refused, "best_estimator_")
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match=r"certified no model, so it has no best estimator"):
        refused.predict(X, sensitive_features=group)


def _study(gaps: dict[int, tuple[float, float]], limit: str = "demographic_parity<=0.1"
           ) -> optuna.Study:
    """A study of trials ``{number: (accuracy, gap on the tuning rows)}`` under ``limit``,
    validated against the limit less 0.05."""
    from fairtune.fairness import FairnessLimit
    from fairtune.fairness.constraints import LIMITS_KEY

    given = FairnessLimit.parse(limit)
    study = optuna.create_study(direction="maximize")
    study.set_user_attr(LIMITS_KEY, [str(FairnessLimit(given.metric, given.bound - 0.05))])
    for number in range(max(gaps) + 1):
        value, gap = gaps.get(number, (0.1, 0.9))  # a filler trial, unfair
        study.add_trial(optuna.trial.create_trial(
            value=value, user_attrs={f"fairtune:{given.metric}": gap}))
    return study


def _certified(study, bounds, limit="demographic_parity<=0.1", monkeypatch=None):
    """``(seen, run)``: ``run()`` certifies ``study``, whose candidate #n has the bound
    ``bounds[n]`` (its model is its number, its predictions all 0); ``seen`` the candidates
    fitted."""
    seen: list[int] = []

    def fit_predict(trial):
        seen.append(trial.number)
        return types.SimpleNamespace(number=trial.number), np.zeros(40)

    metric = parse_limits(limit)[0].metric
    monkeypatch.setattr(_certify, "safety_bounds",
                        lambda *args, **kwargs: {metric: bounds[seen[-1]]})
    y, s = np.tile([0, 1], 20), np.repeat(["a", "b"], 20)
    return seen, lambda: _certify.certify(study, fit_predict, parse_limits(limit), 0.9, y, s)


def test_candidates_are_tested_in_a_fixed_sequence_furthest_inside_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Of the CANDIDATES most accurate fair trials, those that no other of them is both more
    accurate than and further inside the limit than, the one with most room under the limit on
    the tuning rows first, each more accurate than the one before; the most accurate that
    passed is certified; the first failure ends the sequence."""
    # Fair (gap <= 0.05): 1-7. By room: 3 (0.0), then 5 and 1 (0.01), 7 and 2 (0.02), 6, 4;
    # each more accurate than those before it: 3, 5, 7 (1, 2, 6 and 4 are dominated).
    gaps = {1: (0.60, 0.01), 2: (0.61, 0.02), 3: (0.70, 0.0), 4: (0.71, 0.045),
            5: (0.72, 0.01), 6: (0.73, 0.04), 7: (0.74, 0.02), 8: (0.99, 0.3)}
    study = _study(gaps)
    assert [t.number for t in _certify.sequence(
        study, parse_limits("demographic_parity<=0.1"), None, [])] == [3, 5, 7]
    # Of a longer front, only the CANDIDATES most accurate.
    front = _study({n: (0.6 + n / 100, n / 200) for n in range(9)})
    assert [t.number for t in _certify.sequence(
        front, parse_limits("demographic_parity<=0.1"), None, [])] == [4, 5, 6, 7, 8]
    seen, run = _certified(study, {3: 0.08, 5: 0.09, 7: 0.2, 6: 0.05, 4: 0.05},
                           monkeypatch=monkeypatch)
    with pytest.warns(UserWarning, match=r"^Never tested on the safety rows: trial #6, above "
                                         r"the certified trial: the sequence of tests stopped "
                                         r"at a candidate that failed"):
        model, certificate = run()
    assert seen == [3, 5, 7] and model.number == 5 and certificate.trial == 5
    assert certificate.tested_trials == [3, 5, 7] and certificate.passed_trials == [3, 5]
    # A later certification tests nothing more: the failure spent the safety rows.
    seen.clear()
    with pytest.warns(UserWarning, match=r"trial #6, above the certified trial"):
        model, again = run()
    assert (model.number, again.trial, again.tested_trials) == (5, 5, [3, 5, 7])
    assert seen == [5]


def test_a_sequence_that_passed_goes_on_with_new_trials_after_a_resume(
        monkeypatch: pytest.MonkeyPatch) -> None:
    study = _study({0: (0.7, 0.0), 1: (0.71, 0.01)})
    seen, run = _certified(study, {0: 0.05, 1: 0.06, 2: 0.07, 3: 0.5},
                           monkeypatch=monkeypatch)
    assert run()[1].trial == 1 and seen == [0, 1]
    # Two better fair trials, #2 and #3, and #4, fair and furthest inside but no more accurate
    # than the certified #1: testing it could only stop the sequence.
    for value, gap in ((0.8, 0.02), (0.9, 0.03), (0.71, 0.0)):
        study.add_trial(optuna.trial.create_trial(
            value=value, user_attrs={"fairtune:demographic_parity": gap}))
    seen.clear()
    _certify.forget_verdict(study)
    assert study.user_attrs["fairtune:certificate"] == {"tested_trials": [0, 1],
                                                        "passed_trials": [0, 1]}
    model, certificate = run()
    assert seen == [2, 3] and model.number == 2 and certificate.tested_trials == [0, 1, 2, 3]


def test_a_refusal_names_the_smallest_limit_the_failed_candidate_would_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    study = _study({0: (0.7, 0.04), 1: (0.8, 0.01)})
    seen, run = _certified(study, {1: 0.1234, 0: 0.01}, monkeypatch=monkeypatch)
    with pytest.raises(NotCertifiedError, match=r"the sequence of tests stopped at trial #1, "
                                                r"which would pass only demographic_parity <= "
                                                r"0\.1234 on 40 safety rows \(by an exact "
                                                r"test\).*More safety rows") as caught:
        run()
    assert seen == [1] and caught.value.tested_trials == [1]
    # Asked again (refit_best after conclude, a resume): nothing is tested, and the refusal
    # still names what the failed candidate would pass, from the record.
    _certify.forget_verdict(study)
    with pytest.raises(NotCertifiedError) as again:
        run()
    assert seen == [1] and str(again.value) == str(caught.value)
    assert study.user_attrs["fairtune:certificate"]["message"] == str(caught.value)
    # A record of an older version kept no bounds: the refusal says the rows are spent.
    study.set_user_attr("fairtune:certificate", {"tested_trials": [1], "passed_trials": []})
    with pytest.raises(NotCertifiedError, match=r"stopped at trial #1, which failed"):
        run()


def test_a_refused_model_that_selects_no_one_is_not_told_to_add_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    study = _study({0: (0.7, 0.9)}, limit="disparate_impact>=0.8")
    study.set_user_attr("fairtune:limits", ["disparate_impact>=0.85"])
    seen, run = _certified(study, {0: 0.0}, limit="disparate_impact>=0.8",
                           monkeypatch=monkeypatch)
    with pytest.raises(NotCertifiedError, match=r"selected no one") as caught:
        run()
    assert "More safety rows" not in str(caught.value)


def test_a_resume_keeps_the_budget_and_forgets_the_old_verdict() -> None:
    from fairtune.tuning._certify import forget_verdict

    objective = _objective()
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=4)
    certificate = objective.refit_best(study).certificate_
    stored = study.user_attrs["fairtune:certificate"]
    assert stored["tested_trials"] == certificate.tested_trials and certificate.trial in (
        certificate.tested_trials)
    forget_verdict(study)
    assert study.user_attrs["fairtune:certificate"] == {
        "tested_trials": certificate.tested_trials,
        "passed_trials": certificate.passed_trials}
    again = objective.refit_best(study).certificate_
    assert again.trial == certificate.trial and again.tested_trials[:len(
        certificate.tested_trials)] == certificate.tested_trials


def test_the_report_of_a_certified_study_scores_the_certified_model() -> None:
    from fairtune.report import report

    objective = _objective()
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=4)
    record = objective.conclude(study)
    pipeline = objective.refit_best(study)
    page = report(study)
    assert page.test_trial == pipeline.certificate_.trial == record.trial.number
    scores = objective.evaluate(pipeline, confidence_level=0.95)
    assert len(page.test_lines) == 1 and page.test_lines[0].startswith(
        f"Test split (1600 rows), the certified model: accuracy {scores['accuracy']:.4f}")
    assert not any("Which to deploy" in line for line in page.test_lines)
    # After a refusal: no test line of a model nobody may deploy.
    study.set_user_attr("fairtune:certificate", {"certified": False, "message": "No model."})
    page = report(study)
    assert page._verdict()[2] == ["Deploy no model: No model."]
    assert not any(line in page._verdict()[2] for line in page.test_lines)


def test_refit_best_with_confidence_returns_only_certified_models_unless_a_trial_is_named(
) -> None:
    objective = _objective()
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=3)
    with pytest.raises(ValueError, match=r"`on='training'` refits a model no certificate "
                                         r"covers"):
        objective.refit_best(study, on="training")
    named = objective.refit_best(study, trial=0, on="training")  # asked for by number
    assert not hasattr(named, "certificate_")


def test_confidence_of_numpy_types_and_a_margin_named_in_the_refusal() -> None:
    assert _objective(confidence=np.float32(0.9), safety_size=np.float64(0.3)).confidence == (
        pytest.approx(0.9))
    with pytest.raises(ValueError, match=r"cannot be reached for demographic_parity<=0\.02 "
                                         r"\(the limit as given less `margin` 0.18\).*or a "
                                         r"smaller `margin`"):
        _objective(n=4000, limits="demographic_parity<=0.2", margin=0.18)


def test_a_resume_with_another_confidence_names_it_and_not_the_limits_it_tightens() -> None:
    objective = _objective()
    study = objective.create_study(seed=0)
    with pytest.raises(ValueError, match=r"was tuned with `confidence` 0.9, but this run asks "
                                         r"for 0.8: .*use the same `confidence` as "
                                         r"before") as error:
        _objective(confidence=0.8).prepare(study)
    assert "`limits`" not in str(error.value)  # typed the same: the tightened ones follow


def test_a_certified_constant_model_says_so_in_its_certificate() -> None:
    """The certificate summarizes what it measured: the certified model's rate of predicting 1
    on the safety rows, and the class it predicted for every one of them, if one."""
    limits = parse_limits("disparate_impact>=0.9")
    y, s = np.tile([0, 1], 200), np.repeat(["a", "b"], 200)
    for predicted, constant in ((np.ones(400), 1), (np.r_[0.0, np.ones(399)], None)):
        study = _study({6: (0.7, 1.0)}, limit="disparate_impact>=0.9")
        study.set_user_attr("fairtune:limits", ["disparate_impact>=0.95"])
        _, certificate = _certify.certify(study, lambda trial: (types.SimpleNamespace(), predicted),
                                          limits, 0.6, y, s, method="hoeffding")
        assert certificate.one_class == constant
        assert certificate.positive_rate == np.mean(predicted)
        assert ("Warning: the certified model (trial #6 refitted on the search rows) predicted "
                "1 (the favourable outcome) for every one of the 400 safety rows"
                in certificate.text()) == (constant == 1)


def test_fair_search_cv_maps_folds_given_by_position_to_the_search_rows() -> None:
    """Folds given as positions of the rows given to fit keep naming those rows once the
    safety rows are held out: no fold reads a safety row, none an IndexError."""
    from optuna.distributions import FloatDistribution
    from sklearn.linear_model import LogisticRegression

    from fairtune.tuning import FairSearchCV
    from fairtune.tuning._search_checks import cv_folds

    kept = np.array([0, 2, 3, 5, 7])  # rows 1, 4, 6 are safety rows
    folds = cv_folds([([0, 1, 2, 3], [4, 5, 6, 7]), ([4, 5, 6, 7], [0, 1, 2, 3])],
                     np.zeros((5, 1)), np.array([0, 1, 0, 1, 0]), {}, kept=kept)
    assert [(list(kept[tr]), list(kept[te])) for tr, te in folds] == [
        ([0, 2, 3], [5, 7]), ([5, 7], [0, 2, 3])]
    X, y, group = _population(8000, 2)
    positions = np.arange(len(y))
    given = [(positions[positions % 3 != k], positions[positions % 3 == k]) for k in range(3)]
    search = FairSearchCV(LogisticRegression(), {"C": FloatDistribution(1e-3, 10, log=True)},
                          limits="demographic_parity<=0.15", mitigation="threshold", cv=given,
                          n_trials=3, random_state=0, confidence=0.9)
    search.fit(X, y, sensitive_features=group)
    assert search.n_splits_ == 3 and search.certificate_.rows == 4000


def test_a_bound_is_shown_rounded_away_from_the_limit() -> None:
    # A refusal's "would pass only <= b" must be a limit that passes, and a certificate must
    # not state a tighter bound than the test gave: gaps round up, ratios down.
    from fairtune.tuning._certify import Certificate, bounds_text

    assert bounds_text({"demographic_parity": 0.18954}) == "demographic_parity <= 0.1896"
    assert bounds_text({"disparate_impact": 0.85669}) == "disparate_impact >= 0.8566"
    assert bounds_text({"equalized_odds": 0.0007}) == "equalized_odds <= 0.0007"
    certificate = Certificate(trial=1, level=0.95, bounds={"demographic_parity": 0.03831},
                              limits=["demographic_parity<=0.05"], rows=100, method="exact",
                              tested=1)
    assert "demographic_parity <= 0.0384 on the population" in certificate.text()


def test_a_trial_tied_with_the_model_to_deploy_ranks_behind_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Two trials of the same score (a resumed search) both rank 1 in the scores alone; rank 1
    # must still name the model to deploy only.
    from types import SimpleNamespace

    from sklearn.linear_model import LogisticRegression

    from fairtune.tuning import FairSearchCV
    from fairtune.tuning import search as search_module

    trials = [optuna.trial.create_trial(value=v, params={}, distributions={})
              for v in (0.72, 0.70, 0.72)]
    for number, trial in enumerate(trials):
        trial.number = number
    monkeypatch.setattr(search_module, "deployment",
                        lambda study: SimpleNamespace(trial=trials[2]))
    search = FairSearchCV(LogisticRegression(), {}, limits="demographic_parity<=0.1")
    search.cv_results_ = {"rank_test_score": np.array([1, 3, 1])}
    search._deploy(None, trials)
    assert list(search.cv_results_["rank_test_score"]) == [2, 3, 1]
    assert search.best_index_ == 2


def test_a_trial_as_accurate_as_the_certified_one_is_not_a_better_model_passed_over(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from fairtune.tuning._deployment import deployment

    # #0 ranks first by number; #1, as accurate and further inside, dominates it: only #1 is
    # tested, and the certificate speaks for the trials as they stand.
    study = _study({0: (0.7, 0.04), 1: (0.7, 0.0)})
    seen, run = _certified(study, {0: 0.2, 1: 0.05}, monkeypatch=monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run()[1].trial == 1 and seen == [1]
    record = deployment(study)
    assert (record.why, record.trial.number, record.best.number) == ("certified", 1, 0)
    assert record.untested == () and record.passed_over == (
        "as accurate as the best fair trial, #0, and further inside the limits on the tuning rows")


def test_under_disparate_impact_a_model_that_selected_no_one_is_tested_last() -> None:
    # Selecting no one validates as a ratio of 1 (the furthest inside), but the ratio of two
    # rates of 0 can be anything on new data: the sequence must not start, and stop, there.
    from fairtune.fairness import FairnessLimit
    from fairtune.fairness.constraints import LIMITS_KEY

    study = optuna.create_study(direction="maximize")
    study.set_user_attr(LIMITS_KEY, ["disparate_impact>=0.85"])
    for value, ratio, rate in ((0.70, 1.0, 0.0), (0.72, 0.95, 0.3), (0.75, 0.9, 0.4),
                               (0.76, 1.0, 0.0)):
        study.add_trial(optuna.trial.create_trial(value=value, user_attrs={
            "fairtune:disparate_impact": ratio, "fairtune:positive_rate": rate}))
    limits = [FairnessLimit.parse("disparate_impact>=0.8")]
    assert [t.number for t in _certify.sequence(study, limits, None, [])] == [1, 2, 3]


def test_a_candidate_that_cannot_be_refitted_is_named_and_nothing_is_recorded() -> None:
    study = _study({0: (0.7, 0.0)})

    def fit_predict(trial):
        raise RuntimeError("cannot fit on these rows")

    with pytest.raises(RuntimeError, match="cannot fit on these rows") as caught:
        _certify.certify(study, fit_predict, parse_limits("demographic_parity<=0.1"), 0.9,
                         np.tile([0, 1], 20), np.repeat(["a", "b"], 20))
    assert "Refitting trial #0 for the safety test failed" in " ".join(caught.value.__notes__)
    assert "fairtune:certificate" not in study.user_attrs  # a fixed model can be concluded
