"""The safety test's verdict as every entrance presents it: no model is deployed under
``confidence`` before a current certificate, a verdict recorded before untested fair trials is
outdated, a refusal is recorded by every entrance, and test lines belong to their trial."""

from __future__ import annotations

import re

import numpy as np
import optuna
import pandas as pd
import pytest

from fairtune._keys import CERTIFICATE_KEY, SETUP_KEY, TEST_SCORES_KEY
from fairtune.report import render_test_scores, report
from fairtune.tuning import FairObjective, NotCertifiedError
from fairtune.tuning._deployment import ScoresOnTest, deployment, store_test_fits
from tests.test_report import _add


def _population(n: int = 4000, seed: int = 0) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    rng = np.random.default_rng(seed)
    group = rng.choice(["a", "b"], n, p=[0.4, 0.6])
    merit = rng.normal(size=n)
    y = (merit + 0.6 * (group == "a") + rng.normal(scale=0.7, size=n) > 0.4).astype(int)
    X = pd.DataFrame({"merit": merit + rng.normal(scale=0.5, size=n),
                      "proxy": (group == "a") + rng.normal(scale=0.8, size=n)})
    return X, pd.Series(y), pd.Series(group, name="group")


def _study(confidence: float | None = 0.9) -> optuna.Study:
    """Trials #0 (0.9, unfair), #1 (0.7, fair), #2 (0.8, fair), set up with ``confidence``."""
    study = optuna.create_study(direction="maximize")
    study.set_user_attr(SETUP_KEY, {"metric": "accuracy", "limits": ["demographic_parity<=0.1"],
                                    "confidence": confidence})
    for value, gap in ((0.9, 0.3), (0.7, 0.05), (0.8, 0.02)):
        _add(study, value, gap)
    return study


def _certified(study: optuna.Study, trial: int, tested: list[int],
               passed: list[int] | None = None) -> None:
    study.set_user_attr(CERTIFICATE_KEY, {"certified": True, "trial": trial,
                                          "tested_trials": tested,
                                          "passed_trials": tested if passed is None else passed,
                                          "message": f"Certified: trial #{trial} keeps ..."})


def test_a_study_set_up_with_confidence_deploys_nothing_before_its_safety_test() -> None:
    from optuna_dashboard import get_note

    from fairtune.dashboard import publish

    study = _study()
    assert deployment(study).why == "pending"
    page = report(study)
    assert page._verdict()[2][0].startswith("No model is certified yet: with confidence only a "
                                        "certified model is deployed")
    assert "`fairtune tune --confidence`" in page._verdict()[2][0]
    assert page._verdict()[2][1].startswith("The candidate: trial #2, the best fair trial")
    text = page.text()
    assert "Best fair trial: #2 (a candidate: no model is certified yet)" in text
    assert "No model is certified yet" in text and "Deploy trial" not in text
    html = page.html()
    assert "Deploy trial" not in html and "No model is certified yet" in html
    assert "The deployed model" not in html
    publish(study)  # what DashboardCallback writes in the middle of a run
    note = re.sub(r"\\(.)", r"\1", get_note(study))
    assert note.splitlines()[2] == ("### No model certified yet; the best fair trial, #2, is "
                                    "the candidate")
    assert "Deploy trial" not in note
    # Without confidence the same trials deploy the best fair one.
    assert report(_study(confidence=None))._verdict()[2][0].startswith(
        "Deploy trial #2, the best fair trial")


def test_a_verdict_recorded_before_untested_fair_trials_ranked_above_it_is_outdated() -> None:
    study = _study()
    _certified(study, 2, [1, 2])  # both passed: #2, the more accurate, is certified
    assert deployment(study).why == "certified"
    _add(study, 0.85, 0.01)  # #3: fair, above #2, never tested
    verdict = deployment(study)
    assert (verdict.why, verdict.untested, verdict.trial) == ("pending", (3,), None)
    page = report(study)
    assert page.certificate == {} and "Deploy trial" not in page.text()
    assert page._verdict()[2][0].startswith(
        "No model is certified for the trials as they stand: the certificate of trial #2 was "
        "recorded before trial #3, fair, ranked above it and not tested on the safety rows")
    assert "Certified: trial #2" not in page.text()
    # A fair trial below the certified one changes nothing the safety test would do.
    study = _study()
    _certified(study, 2, [2])
    _add(study, 0.6, 0.01)
    assert deployment(study).why == "certified"
    assert report(study)._verdict()[2][0].startswith("Deploy trial #2, the certified model")
    # Once a candidate of the sequence failed, no new trial can be tested: the verdict stands.
    study = _study()
    _certified(study, 1, [1, 2], passed=[1])
    _add(study, 0.85, 0.01)  # #3, the best fair trial now, which no safety test tried
    record = deployment(study)
    assert (record.why, record.trial.number, record.untested, record.failed) == (
        "certified", 1, (3,), (2,))
    # Every view says the new best fair trial was never tested, none that it failed.
    page = report(study)
    for shown in (page.text(), page.html(), page.markdown()):
        assert "did not pass" not in shown
        assert "#3, was never tested" in shown
    assert "Never tested on the safety rows: trial #3" in page.text()


def test_a_refusal_is_outdated_by_an_untested_fair_trial_until_a_candidate_failed() -> None:
    study = _study()
    study.set_user_attr(CERTIFICATE_KEY, {"certified": False, "tested_trials": [2],
                                          "message": "No model could be certified: ..."})
    assert report(study)._verdict()[2][0] == "Deploy no model: No model could be certified: ..."
    _add(study, 0.6, 0.01)  # #3, fair and never tested; #2 failed, so the refusal stands
    record = deployment(study)
    assert (record.why, record.failed, record.untested, record.spent) == (
        "refused", (2,), (1, 3), True)
    # A refusal for want of a fair trial tested none: a fair trial makes it outdated.
    study.set_user_attr(CERTIFICATE_KEY, {"certified": False, "tested_trials": [],
                                          "message": "No model could be certified: ..."})
    assert deployment(study).untested == (2, 1, 3)
    assert report(study)._verdict()[2][0].startswith(
        "No model is certified for the trials as they stand: the safety test's refusal was "
        "recorded before trials #1, #2, #3")


def test_python_report_and_publish_with_a_confidence_objective_answer_as_the_cli_does(
) -> None:
    from optuna_dashboard import get_note

    from fairtune.dashboard import publish

    objective = FairObjective(_population(), "linear", limits="demographic_parity<=0.15",
                              test_size=0.25, confidence=0.9)
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=3)
    page = report(study)
    text = page.text()
    # Nothing certified yet: no deploy advice, no test line of an uncertified model, and the
    # report never runs the safety test itself (that would spend the safety rows' candidates).
    assert "Which to deploy" not in text and "Deploy trial" not in text
    assert page.test_lines == [] and "No model is certified yet" in text
    publish(study)
    assert "No model certified yet" in get_note(study).splitlines()[2]
    assert CERTIFICATE_KEY not in study.user_attrs
    record = objective.conclude(study)  # what `fairtune tune` runs after its search
    page = report(study)
    assert page.test_lines[0].startswith(
        f"Test split ({len(objective.X_test)} rows), the certified model: ")
    assert "(95% interval " in page.test_lines[0]
    assert record.why == "certified" and page.test_trial == record.trial.number
    assert page.certificate["trial"] == record.trial.number
    assert page.text().count(page.test_lines[0]) == 1


_CERTIFIED = ScoresOnTest("certified", 250, {"accuracy": 0.7, "demographic_parity": 0.02},
                          {"demographic_parity": [0.0, 0.06]}, True,
                          ["demographic_parity<=0.1"])


def test_the_certified_models_test_line_has_the_interval_and_the_warning_of_every_other() -> None:
    fit = ScoresOnTest("certified", 300, {"accuracy": 0.7, "demographic_parity": 0.08},
                       {"demographic_parity": [0.03, 0.13]}, True, ["demographic_parity<=0.1"],
                       ["demographic_parity<=0.1"])
    assert render_test_scores(1, [fit]) == [
        "Test split (300 rows), the certified model: accuracy 0.7000, demographic_parity "
        "0.0800 (95% interval 0.0300-0.1300); meets every limit, but 300 test rows cannot "
        "tell whether demographic_parity<=0.1 holds on new data (the limit lies inside the "
        "interval)."]


def test_recorded_test_lines_of_another_trial_are_labelled_by_their_trial() -> None:
    certified = ("Test split (250 rows), the certified model: accuracy 0.7000, "
                 "demographic_parity 0.0200 (95% interval 0.0000-0.0600); meets every limit.")
    study = _study()
    _certified(study, 2, [2])
    store_test_fits(study, 1, [_CERTIFIED])  # #1 was the certified model before a resume
    text = report(study).text()
    assert "Test scores for trial #1 (not the model to deploy):" in (
        text)
    assert ("Test split (250 rows), trial #1 refitted on the search rows (certified when its "
            "scores were recorded): accuracy 0.7000") in text
    assert "the certified model:" not in text
    store_test_fits(study, 2, [_CERTIFIED])  # the certified trial's own line reads as it is
    assert f"  {certified}\n" in report(study).text()
    # Without confidence: the scores of an older best fair trial, and no deploy advice of
    # theirs.
    study = _study(confidence=None)
    fits = [ScoresOnTest(fit, 250, {"accuracy": 0.7}, {}, True, []) for fit in
            ("tuning", "training")]
    store_test_fits(study, 2, fits)
    assert report(study).test_lines[-1].startswith("Which to deploy:")
    store_test_fits(study, 1, fits)
    page = report(study)
    assert page.test_lines == [
        "Test split (250 rows), trial #1 refitted on the other rows: accuracy 0.7000; meets "
        "every limit.",
        "Test split, trial #1's validated model (training split only): accuracy 0.7000; meets "
        "every limit."]
    assert "(not the model to deploy)" in page.html()
    # A study of an older version stored sentences: shown as stored, under their trial.
    study.set_user_attr(TEST_SCORES_KEY, {"trial": 1, "lines": ["Test split (250 rows), x."]})
    assert report(study).test_lines == ["Test split (250 rows), x."]


def test_a_fair_search_cv_refusal_is_recorded_and_reported_like_the_clis() -> None:
    from optuna.distributions import FloatDistribution
    from sklearn.linear_model import LogisticRegression

    from fairtune.tuning import FairSearchCV

    X, y, group = _population(8000, 1)
    search = FairSearchCV(LogisticRegression(), {"C": FloatDistribution(1e-3, 10, log=True)},
                          limits="demographic_parity<=0.1", cv=3, n_trials=2, random_state=0,
                          confidence=0.9)
    with pytest.raises(NotCertifiedError) as refusal:
        search.fit(X.assign(proxy=group.eq("a") * 3.0), y, sensitive_features=group)
    stored = search.study_.user_attrs[CERTIFICATE_KEY]
    assert stored == {"certified": False, "message": str(refusal.value), "tested_trials": [],
                      "passed_trials": []}
    page = report(search.study_)
    text = page.text()  # the answer first, as the page and the note give it; once
    assert f"\nDeploy no model: {refusal.value!s}\n" in text
    assert text.count(str(refusal.value)) == 1
    assert page._verdict()[1] == "Deploy no model: the safety test certified none"


def test_conclude_records_a_refusal_and_no_test_scores() -> None:
    objective = FairObjective(_population(), "linear", limits="demographic_parity<=0.15",
                              test_size=0.25, confidence=0.9)
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=3)
    study.set_user_attr(CERTIFICATE_KEY, {"tested_trials": [10]})  # #10 failed: spent
    record = objective.conclude(study)
    assert (record.why, record.trial) == ("refused", None)
    assert "stopped at trial #10, which failed" in study.user_attrs[CERTIFICATE_KEY]["message"]
    assert TEST_SCORES_KEY not in study.user_attrs
    assert report(study)._verdict()[2][0].startswith("Deploy no model:")


def test_a_tenant_set_up_with_confidence_has_its_own_pending_verdict() -> None:
    from fairtune._keys import TENANT_SETUP_PREFIX
    from tests.test_report import tenant_study

    study = tenant_study()  # b's best fair trial is #3
    key = TENANT_SETUP_PREFIX + "b"
    study.set_user_attr(key, {**study.user_attrs[key], "confidence": 0.9})
    assert (deployment(study, "a").why, deployment(study, "b").why) == ("best_fair", "pending")
    b, a = report(study, tenant="b").sections[0], report(study, tenant="a").sections[0]
    assert b._verdict()[1] == ("No model certified yet; the best fair trial, #3, is the "
                                   "candidate")
    assert a._verdict()[1] == "Deploy trial #0, the best fair trial"
    study.set_user_attr(CERTIFICATE_KEY + ":b", {"certified": True, "trial": 4,
                                                 "tested_trials": [3, 4], "message": "Cert b"})
    assert report(study, tenant="b").sections[0]._verdict()[1] == (
        "Deploy trial #4, certified")
