"""The study report as a library object: its text is the command line's, its HTML one page."""

from __future__ import annotations

import re
from pathlib import Path

import optuna
import pytest

from fairtune.cli import main
from fairtune.report import StudyReport, report
from fairtune.tuning import FairObjective

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(scope="module")
def tuned() -> tuple[FairObjective, optuna.Study]:
    objective = FairObjective("german", "random_forest", limits="dsp<=0.1", test_size=0.25,
                              mitigation="threshold")
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=4)
    return objective, study


def test_the_report_of_a_study_holds_what_a_reviewer_signs_off_on(tuned) -> None:
    objective, study = tuned
    objective.conclude(study)
    page = report(study)
    assert isinstance(page, StudyReport) and page.best_is_fair
    text = page.text()
    assert text.startswith(f"Study {study.study_name}: 4 trials, 4 complete")
    assert f"Best fair trial: #{page.best.number}\n" in text
    assert re.search(r"demographic_parity +0\.\d{4}  ok", text)
    assert "  group Male" in text and "  group Female" in text  # per-group positive rates
    assert "Sensitive feature at prediction: needed, as predict(X, sensitive_features=...)" in text
    # The test split's scores, recorded by conclude: both fits, with intervals.
    assert f"Test scores for trial #{page.best.number}:" in text
    assert len(page.test_lines) == 3 and page.test_lines[2].startswith(
        "Which to deploy: refit_best(study) returns")
    assert all("(95% interval " in line for line in page.test_lines[:2])


def test_the_html_page_is_self_contained_with_the_plots_inline(tuned, tmp_path: Path) -> None:
    objective, study = tuned
    objective.conclude(study)
    page = report(study)
    path = tmp_path / "report.html"
    page.write_html(str(path))
    html = path.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    images = re.findall(r'<img alt="[^"]+" src="([^"]+)"', html)
    assert len(images) == 2 and all(src.startswith("data:image/png;base64,") for src in images)
    # Nothing to fetch: no link, script or stylesheet from elsewhere.
    assert not re.search(r"(href|src)=\"(?!data:)", html) and "<script" not in html
    for expected in ("Setup", "german (sensitive: sex)", f"Best fair trial: #{page.best.number}",
                     "group Female", "The deployed model", "Test split (trial #",
                     "Parameters", "threshold_tolerance"):
        assert expected in html, expected


def test_html_escapes_what_the_study_stores(tmp_path: Path) -> None:
    study = optuna.create_study(direction="maximize", study_name="<b>x</b> & y")
    study.set_user_attr("fairtune:dataset", "<script>alert(1)</script>")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    html = report(study).html()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "&lt;b&gt;x&lt;/b&gt; &amp; y" in html


def test_a_study_without_trials_and_a_multi_objective_one() -> None:
    empty = report(optuna.create_study(direction="maximize"))
    assert empty.best is None and "No completed trial yet." in empty.text()
    assert "<h2>No completed trial yet.</h2>" in empty.html()
    with pytest.raises(ValueError, match=r"`study` must have one objective for this report"):
        report(optuna.create_study(directions=["maximize", "minimize"]))


def test_tune_and_report_write_the_html_page(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    storage = f"sqlite:///{tmp_path / 'r.db'}"
    tuned_page, reported_page = tmp_path / "tune.html", tmp_path / "report.html"
    assert main(["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.1",
                 "--n-trials", "3", "--test-size", "0.25", "--no-progress", "--storage",
                 storage, "--html", str(tuned_page)]) == 0
    assert f"HTML report written to {tuned_page}" in capsys.readouterr().out
    assert main(["report", "--storage", storage, "--html", str(reported_page)]) == 0
    for page in (tuned_page, reported_page):
        html = page.read_text(encoding="utf-8")
        assert "linear" in html and html.count("data:image/png;base64,") == 2
    # The test scores tune recorded are on the page report writes.
    assert "Test split (1000" not in reported_page.read_text()
    assert "Test split (250 rows)" in reported_page.read_text()
    capsys.readouterr()
    assert main(["report", "--storage", storage, "--html", str(tmp_path / "r.txt")]) == 2
    assert "--html must be a file name ending in one of ['.html']" in capsys.readouterr().err
    assert main(["tune", "--dataset", "german", "--model", "linear", "--objectives",
                 "accuracy,dsp", "--n-trials", "2", "--html", str(tmp_path / "m.html")]) == 2
    assert "--html writes the report of a single-objective study" in capsys.readouterr().err


# -- the setup record, pruned trials, tenants, text from the data ----------------------------


def _add(study: optuna.Study, value: float, dsp: float, *, tenant: str | None = None,
         **attrs: object) -> optuna.trial.FrozenTrial:
    """A trial (``tenant``'s) with its demographic parity told against the bound 0.1."""
    from fairtune.fairness import USER_ATTR_PREFIX
    from fairtune.tenancy import ask

    trial = study.ask() if tenant is None else ask(study, tenant)
    trial.suggest_categorical("kind", [str(attrs.pop("kind", "tree"))])
    trial.set_user_attr(USER_ATTR_PREFIX + "demographic_parity", dsp)
    trial.set_constraint("demographic_parity", dsp - 0.1)
    for key, attr in attrs.items():
        trial.set_user_attr(key, attr)
    return study.tell(trial, value)


def tenant_study(storage: str | None = None) -> optuna.Study:
    """Tenants a and b, each scored on its own file: the best fair value of all (0.95, #0) is
    a's; b's own best fair trial is #3 (0.61)."""
    from fairtune._keys import SETUP_KEY, TENANT_SETUP_PREFIX

    study = optuna.create_study(direction="maximize", study_name="shared", storage=storage)
    study.set_user_attr(SETUP_KEY, {"tenants": ["a", "b"]})
    for tenant, metric in (("a", "accuracy"), ("b", "balanced_accuracy")):
        study.set_user_attr(TENANT_SETUP_PREFIX + tenant, {
            "entrance": "FairObjective", "dataset": f"{tenant}.csv (sensitive: gender)",
            "model": "linear", "metric": metric, "limits": ["demographic_parity<=0.1"],
            "margin": 0.0, "mitigation": [], "budgets": None, "resource": "n_samples",
            "pruner": None, "validation": "a 30% validation split, split seed 0",
        })
    _add(study, 0.95, 0.05, tenant="a")
    _add(study, 0.99, 0.30, tenant="a")  # a's unfair trial
    _add(study, 0.70, 0.40, tenant="b")  # b's unfair trial
    _add(study, 0.61, 0.02, tenant="b")
    _add(study, 0.55, 0.01, tenant="b")
    return study


def test_a_tenant_study_names_each_tenants_own_best_and_no_best_across_tenants() -> None:
    study = tenant_study()
    page = report(study)
    text = page.text()
    assert page.best is None and "Best fair trial" not in text, text
    assert text.startswith("Study shared: 5 trials of 2 tenants, 5 complete, 3 fair.\n")
    assert "Tenants     a, b\n" in text
    assert [(row.tenant, row.trials, row.fair, row.best.number) for row in page.tenants] == [
        ("a", 2, 1, 0), ("b", 3, 2, 3)]
    assert re.search(r"\na +2 +0 +1 +#0 0\.9500 +1\.9400\n", text), text
    assert re.search(r"\nb +3 +0 +2 +#3 0\.6100 +1\.8600\n", text), text
    # A tenant asked for: its own setup and its best fair trial among its own trials.
    text_b = report(study, tenant="b").text()
    assert "Tenant b: 3 trials, 3 complete, 2 fair.\n" in text_b
    assert "Dataset     b.csv (sensitive: gender)\n" in text_b
    assert "Metric      balanced_accuracy\n" in text_b
    assert "Best fair trial: #3\n" in text_b and "Best fair trial: #0" not in text_b
    assert re.search(r"\nbalanced_accuracy +0\.6100\n", text_b), text_b
    # The page: the table, then one section per tenant (or the one asked for).
    html = page.html()
    assert "Best fair trial: #0</h3>" in html and "Best fair trial: #3</h3>" in html
    assert html.count("<section>") == 2 and "b.csv (sensitive: gender)" in html
    html_b = report(study, tenant="b").html()
    assert html_b.count("<section>") == 1 and "<h2>Tenant b</h2>" in html_b
    assert "Best fair trial: #3</h3>" in html_b and "Best fair trial: #0" not in html_b
    assert "a.csv" not in html_b
    with pytest.raises(ValueError, match=r"`tenant` must be one of \['a', 'b'\] \(the tenants "
                                         r"of study 'shared'\), but got tenant='c'"):
        report(study, tenant="c")


def test_a_tenant_without_limits_of_its_own_is_judged_by_the_studys_everywhere() -> None:
    from fairtune._keys import SETUP_KEY
    from fairtune.fairness import USER_ATTR_PREFIX
    from fairtune.tenancy import ask

    study = optuna.create_study(direction="maximize", study_name="shared")
    study.set_user_attr(SETUP_KEY, {"tenants": ["a"], "limits": ["demographic_parity<=0.1"]})
    for value, dsp in ((0.9, 0.3), (0.8, 0.05)):  # values recorded, no constraint set
        trial = ask(study, "a")
        trial.set_user_attr(USER_ATTR_PREFIX + "demographic_parity", dsp)
        study.tell(trial, value)
    page = report(study)
    assert page.tenants[0].fair == page.sections[0].counts[3] == 1
    assert page.tenants[0].best.number == page.sections[0].best.number == 1


def test_pruned_trials_are_counted_and_a_multi_fidelity_setup_shown() -> None:
    from optuna.trial import TrialState

    from fairtune._keys import SETUP_KEY

    study = optuna.create_study(direction="maximize", study_name="mf")
    study.set_user_attr(SETUP_KEY, {
        "entrance": "FairObjective", "dataset": "german (sensitive: sex)", "model": "xgboost",
        "metric": "accuracy", "limits": ["demographic_parity<=0.09"], "margin": 0.01,
        "mitigation": ["threshold"], "objectives": None, "budgets": [1 / 3, 1.0],
        "resource": "n_estimators", "pruner": "SuccessiveHalvingPruner(min_resource=1, "
        "reduction_factor=3)", "prune_unfair": True, "tenants": None,
        "validation": "3-fold cross-validation, split seed 0",
    })
    _add(study, 0.74, 0.05)
    _add(study, 0.78, 0.20)
    for _ in range(2):  # stopped at the first budget
        trial = study.ask()
        trial.report(0.6, 1)
        study.tell(trial, state=TrialState.PRUNED)
    page = report(study)
    assert page.pruned == 2 and page.counts == (4, 2, 0, 1)
    text = page.text()
    assert text.startswith("Study mf: 4 trials, 2 complete, 2 pruned, 1 fair.\n"), text
    for row in ("Dataset     german (sensitive: sex)", "Model       xgboost",
                "Limits      demographic_parity<=0.09 (the limits the trials were validated "
                "against: less a margin of 0.01)",
                "Validation  3-fold cross-validation, split seed 0",
                "Mitigation  threshold",
                "Budgets     0.333, 1 (fractions of n_estimators)",
                "Resource    n_estimators",
                "Pruner      SuccessiveHalvingPruner(min_resource=1, reduction_factor=3); it "
                "also stops trials that break a limit at a smaller budget"):
        assert row + "\n" in text, row
    html = page.html()
    assert "2 pruned" in html
    assert "<th>Budgets</th><td>0.333, 1 (fractions of n_estimators)" in html
    # A search of one budget has nothing to prune: no pruned count, no budgets.
    assert "pruned" not in report(tenant_study(), tenant="a").sections[0].text()


def test_text_from_the_data_prints_its_control_characters_escaped() -> None:
    from fairtune._keys import POSITIVE_RATE_KEY, POSITIVE_RATES_KEY, SETUP_KEY, TEST_SCORES_KEY

    evil = "\x1b[2J\r\n"
    study = optuna.create_study(direction="maximize", study_name=f"s{evil}")
    study.set_user_attr(SETUP_KEY, {"dataset": f"d{evil}.csv (sensitive: g{evil})",
                                    "metric": "accuracy", "limits": ["demographic_parity<=0.1"]})
    trial = _add(study, 0.8, 0.05, kind=f"k{evil}", **{
        POSITIVE_RATE_KEY: 0.5, POSITIVE_RATES_KEY: {f"g{evil}1": 0.4, "g2": 0.6}})
    study.set_user_attr(TEST_SCORES_KEY, {"trial": trial.number, "lines": [f"t{evil}"]})
    text = report(study).text()
    assert not any(c in text for c in "\x1b\r"), repr(text)
    escaped = r"\x1b[2J\r\n"
    for shown in (f"Study s{escaped}: 1 trials", f"Dataset     d{escaped}.csv (sensitive: "
                  f"g{escaped})\n", f"  group 'g{escaped}1' ", "kind  ", f"k{escaped}  param",
                  f"  t{escaped}\n"):
        assert shown in text, (shown, text)
    # Every line is one of the report's: none broken by a newline from the data.
    assert len(text.splitlines()) == 16, text
    html = report(study).html()
    assert not any(c in html for c in "\x1b\r") and f"d{escaped}.csv" in html
    # The table of tenants escapes the tenants' names.
    tenants = optuna.create_study(direction="maximize", study_name="t")
    _add(tenants, 0.5, 0.05, tenant=f"x{evil}")
    table = report(tenants).text()
    assert "\x1b" not in table and f"x{escaped}" in table


def test_the_html_report_opens_with_the_answer() -> None:

    from fairtune.report import report
    from fairtune.tuning import FairObjective

    objective = FairObjective("german", "linear", limits="demographic_parity<=0.2",
                              mitigation="threshold", test_size=0.25)
    study = objective.create_study(seed=0)
    study.optimize(objective, n_trials=3)
    objective.conclude(study)
    html = report(study).html()
    answer = html.index("<h2>The answer</h2>")
    assert answer < html.index("<h2>Setup</h2>")
    items = html[answer:html.index("</ul>", answer)]
    best = study.best_trial.number
    assert f"Deploy trial #{best}, the best fair trial" in items
    assert "Test split (250 rows), best fair trial refitted on the other rows:" in items
    assert "Sensitive feature at prediction: needed" in items
    # Each line is said once: the sections below the answer leave out what it says.
    for line in ("Test split (250 rows), best", "Sensitive feature at prediction"):
        assert html.count(line) == 1, line


# -- the model to deploy: the certified one when the best fair trial did not pass ------------


def _certified_below_the_best(**certificate: object) -> optuna.Study:
    """Trials #0 (0.9, unfair), #1 (0.7, fair, positive rate 0.4), #2 (0.8, fair, predicts 0 for
    every validation row); the safety test certified #1, the best fair trial #2 did not pass."""
    from fairtune._keys import CERTIFICATE_KEY, POSITIVE_RATE_KEY, SETUP_KEY

    study = optuna.create_study(direction="maximize", study_name="c")
    study.set_user_attr(SETUP_KEY, {"metric": "accuracy", "limits": ["demographic_parity<=0.1"],
                                    "confidence": 0.95})
    _add(study, 0.9, 0.3, **{POSITIVE_RATE_KEY: 0.5})
    _add(study, 0.7, 0.05, **{POSITIVE_RATE_KEY: 0.4})
    _add(study, 0.8, 0.0, **{POSITIVE_RATE_KEY: 0.0})
    study.set_user_attr(CERTIFICATE_KEY, {"certified": True, "trial": 1, "tested_trials": [2, 1],
                                          "message": "Certified: trial #1 keeps ...",
                                          **certificate})
    return study


def test_every_report_names_the_certified_model_to_deploy_and_shows_its_scores() -> None:
    from tests.test_dashboard_view import _plain

    page = report(_certified_below_the_best())
    deploy = ("Deploy trial #1, the certified model (the best fair trial, #2, did not pass the "
              "safety test) (accuracy 0.7000 on validation).")
    text = page.text()
    assert text.splitlines()[1] == deploy, text
    assert ("Trial #1, the certified model (the best fair trial, #2, did not pass the safety "
            "test)\n") in text
    assert "Best fair trial" not in text
    # The table is the deployed trial's, not the best fair trial's.
    assert re.search(r"accuracy +0\.7000\n", text) and re.search(r"positive rate +0\.4000", text)
    assert not re.search(r"accuracy +0\.8000", text), text
    # The best fair trial predicts one class on validation; it is not deployed: no warning
    # names it.
    assert "Warning: trial #2" not in text
    assert deploy in page.html() and deploy in _plain(page.markdown())


def test_a_certified_constant_model_is_said_to_be_one_wherever_it_is_named() -> None:
    from fairtune.tuning._certify import one_class_text
    from tests.test_dashboard_view import _plain

    warning = one_class_text(1, 1, 9600)
    page = report(_certified_below_the_best(
        one_class=1, message=f"Certified: trial #1 keeps ... {warning}"))
    text, html, note = page.text(), page.html(), _plain(page.markdown())
    deploy = ("Deploy trial #1, the certified model (the best fair trial, #2, did not pass the "
              "safety test) (accuracy 0.7000 on validation; a constant model: it predicted 1 "
              "for every safety row).")
    assert text.splitlines()[1] == deploy
    assert ("predicted 1 (the favourable outcome) for every one of the 9600 safety rows"
            in warning)
    for shown in (text, html, note):
        assert deploy in shown and warning in shown
    assert note.splitlines()[0] == ("### Deploy trial #1, certified: a constant model, it "
                                    "predicted 1 for every safety row")
