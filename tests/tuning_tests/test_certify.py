"""A deployed model with a stated confidence that it keeps the limits on new data, or a refusal:
the bounds, the safety rows, the certified model and its records."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest

from fairtune.cli import main
from fairtune.fairness.bounds import kl_lower, kl_upper, metric_bound, metric_bound_width
from fairtune.tuning import FairObjective, NotCertifiedError
from fairtune.tuning._certify import CANDIDATES


def _population(n: int, seed: int) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Applicants whose base rate depends on the group, with a proxy of the group."""
    rng = np.random.default_rng(seed)
    group = rng.choice(["a", "b"], n, p=[0.4, 0.6])
    merit = rng.normal(size=n)
    proxy = (group == "a") + rng.normal(scale=0.8, size=n)
    y = (merit + 0.6 * (group == "a") + rng.normal(scale=0.7, size=n) > 0.4).astype(int)
    X = pd.DataFrame({"merit": merit + rng.normal(scale=0.5, size=n), "proxy": proxy})
    return X, pd.Series(y), pd.Series(group, name="group")


# -- the bounds -------------------------------------------------------------------------------


def test_a_bound_holds_for_a_randomized_classifier_at_least_at_its_level() -> None:
    # A fixed randomized classifier whose rates on the population are known: each group's
    # probabilities of 1 are Beta-distributed with known means, a gap of 1/3 - 2/7.
    true_gap, delta, misses, runs = 2 / 6 - 2 / 7, 0.2, 0, 400
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        group = rng.choice(["a", "b"], 300)
        p = np.where(group == "a", rng.beta(2, 5, 300), rng.beta(2, 4, 300))
        y = rng.integers(0, 2, 300)
        bound = metric_bound("demographic_parity", y, p, sensitive_features=group, delta=delta)
        misses += bound < true_gap
        assert bound >= abs(p[group == "a"].mean() - p[group == "b"].mean())
    assert misses / runs <= delta


def test_bounds_are_tight_where_they_can_be_and_shrink_with_rows() -> None:
    # The Chernoff bound of a rate lies around the observed one, inside [0, 1], and narrows
    # as rows are added; the width a search plans with is that of equal rates.
    for p_hat in (0.0, 0.05, 0.3, 1.0):
        low, high = kl_lower(p_hat, 400, 0.01), kl_upper(p_hat, 400, 0.01)
        assert 0.0 <= low <= p_hat <= high <= 1.0
    assert kl_upper(0.3, 4000, 0.01) - 0.3 < kl_upper(0.3, 400, 0.01) - 0.3
    narrow = metric_bound_width("demographic_parity", [[5000], [5000]], 0.3, delta=0.01)
    wide = metric_bound_width("demographic_parity", [[500], [500]], 0.3, delta=0.01)
    assert 0 < narrow < wide
    # Two groups of n rows: sqrt(log(1 / d) (2 / n) / 2), d = delta / 2 ordered pairs.
    assert narrow == pytest.approx(np.sqrt(np.log(2 / 0.01) * (2 / 5000) / 2))


def test_a_ratio_bound_is_below_the_observed_ratio() -> None:
    rng = np.random.default_rng(0)
    group = rng.choice(["a", "b"], 2000)
    y_pred = (rng.random(2000) < np.where(group == "a", 0.3, 0.4)).astype(int)
    observed = y_pred[group == "a"].mean() / y_pred[group == "b"].mean()
    bound = metric_bound("disparate_impact", y_pred, y_pred, sensitive_features=group,
                         delta=0.05)
    assert 0 < bound < observed


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
    width = metric_bound_width("demographic_parity", groups.to_numpy()[:, None], 0.5,
                               delta=(1 - 0.9) / CANDIDATES)
    assert aimed.bound == pytest.approx(limit.bound - width)
    assert objective.setup["confidence"] == 0.9 and objective.setup["safety_size"] == 0.3
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
    with pytest.raises(ValueError, match=r"`safety_size` holds out rows for the safety test"):
        FairObjective(_population(1000, 0), "linear", limits="dsp<=0.1", safety_size=0.2)
    with pytest.raises(ValueError, match=r"`confidence` must be a level in \(0, 1\)"):
        _objective(confidence=95)
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
    y, s = _rows_of({key: round(600 * p) for key, p in share.items()})
    with pytest.raises(ValueError, match=r"on 600 safety rows") as refused:
        limits_for_search(limits, 0.9, y, s)
    needed = int(re.search(r"from about ([\d,]+) safety rows on", str(refused.value))
                 .group(1).replace(",", ""))
    assert needed > 600
    # The same proportions on the rows asked for leave room under the limit ...
    y, s = _rows_of({key: round(needed * p * 1.01) for key, p in share.items()})
    (tightened,) = limits_for_search(limits, 0.9, y, s)
    room = tightened.bound if tightened.sense == "upper" else 1 - tightened.bound
    assert 0 < room < 0.05 * (limits[0].bound if limits[0].sense == "upper" else
                              1 - limits[0].bound)
    # ... and a tenth fewer do not.
    y, s = _rows_of({key: round(needed * p * 0.9) for key, p in share.items()})
    with pytest.raises(ValueError, match=r"cannot be reached"):
        limits_for_search(limits, 0.9, y, s)


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
    answer = page._answer()
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
                            n_trials=4, random_state=0, confidence=0.9, **kwargs)

    fitted = search().fit(X, y, sensitive_features=group)
    certificate = fitted.best_estimator_.certificate_
    assert fitted.certificate_ is certificate and certificate.rows == 2400
    assert certificate.bounds["demographic_parity"] <= 0.1
    assert fitted.best_trial_.number == certificate.trial
    assert fitted.study_.user_attrs["fairtune:certificate"]["certified"]
    with pytest.raises(ValueError, match=r"`confidence` certifies the refitted model"):
        search(refit=False).fit(X, y, sensitive_features=group)
    with pytest.raises(NotCertifiedError, match=r"No trial meets the fairness limit "
                                                r"demographic_parity<=0\.03\d* \(the given "
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

    def first_fails(limits, *args, **kwargs):  # the first candidate's bound breaks the limit
        calls.append(1)
        found = bounds(limits, *args, **kwargs)
        return {m: 1.0 for m in found} if len(calls) == 1 else found

    monkeypatch.setattr(_certify, "safety_bounds", first_fails)
    X, y, group = _population(8000, 2)
    fitted = FairSearchCV(LogisticRegression(), {"C": FloatDistribution(1e-3, 10, log=True)},
                          limits="demographic_parity<=0.1", mitigation="threshold", cv=3,
                          n_trials=4, random_state=0, confidence=0.9).fit(
        X, y, sensitive_features=group)
    results = fitted.cv_results_
    ranks = results["rank_test_score"]
    assert fitted.best_trial_.number == fitted.certificate_.trial
    assert ranks[fitted.best_index_] == 1 and list(ranks).count(1) == 1
    assert results["trial_number"][fitted.best_index_] == fitted.certificate_.trial
    failed = fitted.study_.user_attrs["fairtune:certificate"]["tested_trials"][0]
    assert failed != fitted.certificate_.trial
    assert ranks[list(results["trial_number"]).index(failed)] == 2


def test_a_refused_model_that_selects_no_one_is_not_told_to_add_rows() -> None:
    from fairtune.fairness import parse_limits
    from fairtune.tuning._certify import first_certified

    limits = parse_limits("disparate_impact>=0.8")

    def bounds_of(trial):  # selects no one: its lower bound of the ratio is 0
        return trial, {"disparate_impact": 0.0}, {"disparate_impact": 1.0}, [0.0] * 50

    with pytest.raises(NotCertifiedError, match=r"selected no one") as caught:
        first_certified([_Trial(3)], bounds_of, limits, 0.9, 50)
    assert "More safety rows" not in str(caught.value)


# -- the safety rows' budget, the deployed model's records ------------------------------------


class _Trial:
    def __init__(self, number: int) -> None:
        self.number = number


def test_the_candidate_budget_holds_across_certifications() -> None:
    """Every certification of a study spends the same safety rows: trials tested before count
    against the CANDIDATES the error probability is split among; they may be tested again,
    new ones only while the budget lasts."""
    from fairtune.fairness import parse_limits
    from fairtune.tuning._certify import first_certified

    limits = parse_limits("demographic_parity<=0.1")
    seen: list[int] = []

    def bounds_of(trial):  # every candidate fails but #7
        seen.append(trial.number)
        bound = 0.05 if trial.number == 7 else 0.2
        return trial.number, {"demographic_parity": bound}, {"demographic_parity": bound}, [0, 1]

    spent = list(range(CANDIDATES))  # trials 0-4, tested by earlier certifications
    with pytest.raises(NotCertifiedError, match=r"safety rows have been spent on 5 candidates "
                                                r"\(trials #0, #1, #2, #3, #4\)") as caught:
        first_certified([_Trial(7), _Trial(8)], bounds_of, limits, 0.9, 1000, spent)
    assert seen == [] and caught.value.tested_trials == spent
    # A trial tested before may be tested again; a new one while the budget lasts.
    model, certificate = first_certified([_Trial(3), _Trial(7)], bounds_of, limits, 0.9, 1000,
                                         [3])
    assert (model, certificate.tested_trials, certificate.tested) == (7, [3, 7], 2)
    seen.clear()
    with pytest.raises(NotCertifiedError, match=r"5 of 5 candidates tested"):
        first_certified([_Trial(n) for n in (9, 10, 11, 12, 13, 7)], bounds_of, limits, 0.9,
                        1000)
    assert seen == [9, 10, 11, 12, 13]  # #7 comes sixth: never tested
    # A certified trial below one the spent budget never tested comes with a warning that
    # names the untested trial (it is not said to have failed).
    with pytest.warns(UserWarning, match=r"Trial #8, fair and ranked above the certified "
                                         r"trial #7, was never tested"):
        model, _ = first_certified([_Trial(8), _Trial(7)], bounds_of, limits, 0.9, 1000,
                                   [0, 1, 2, 3, 7])
    assert model == 7
    # A refusal with the budget spent names the fair trial it never tested, never as failing,
    # and asks for new safety rows (not a larger share of the same study's rows).
    with pytest.raises(NotCertifiedError, match=r"Trial #8, fair, was never tested: the safety "
                                                r"rows' 5 candidates are spent") as caught:
        first_certified([_Trial(8), _Trial(0)], bounds_of, limits, 0.9, 1000, [0, 1, 2, 3, 4])
    assert "in a new study" in str(caught.value)


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
        "tested_trials": certificate.tested_trials}
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
    assert page._answer() == ["Deploy no model: No model."]
    assert not any(line in page._answer() for line in page.test_lines)


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
    with pytest.raises(ValueError, match=r"cannot be reached for demographic_parity<=0\.05 "
                                         r"\(the limit as given less `margin` 0.15\).*or a "
                                         r"smaller `margin`"):
        _objective(n=4000, limits="demographic_parity<=0.2", margin=0.15)


def test_a_resume_with_another_confidence_names_what_tightened_the_limits() -> None:
    objective = _objective()
    study = objective.create_study(seed=0)
    with pytest.raises(ValueError, match=r"was tuned with `confidence` 0.9, but this run asks "
                                         r"for 0.8, which validates the trials against '.*' "
                                         r"instead of '.*': .*use the same `confidence` as "
                                         r"before") as error:
        _objective(confidence=0.8).prepare(study)
    assert "`limits`" not in str(error.value)  # typed the same: the tightened ones follow


def test_a_certified_constant_model_says_so_in_its_certificate() -> None:
    """The certificate summarizes what it measured: the certified model's rate of predicting 1
    on the safety rows, and the class it predicted for every one of them, if one."""
    from fairtune.fairness import parse_limits
    from fairtune.tuning._certify import first_certified

    limits = parse_limits("disparate_impact>=0.9")
    for predicted, constant in (([1.0] * 4, 1), ([0.0, 1.0, 1.0, 1.0], None)):
        _, certificate = first_certified(
            [_Trial(6)], lambda trial: (trial.number, {"disparate_impact": 0.999},
                                        {"disparate_impact": 1.0}, predicted),
            limits, 0.95, 4)
        assert certificate.one_class == constant
        assert certificate.positive_rate == np.mean(predicted)
        assert ("Warning: the certified model (trial #6 refitted on the search rows) predicted "
                "1 (the favourable outcome) for every one of the 4 safety rows"
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
    assert search.n_splits_ == 3 and search.certificate_.rows == 2400
