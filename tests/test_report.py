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
    page = report(study, objective=objective)
    assert isinstance(page, StudyReport) and page.best_is_fair
    text = page.text()
    assert text.startswith(f"Study {study.study_name}: 4 trials, 4 complete")
    assert f"Best fair trial: #{page.best.number}\n" in text
    assert re.search(r"demographic_parity +0\.\d{4}  ok", text)
    assert "  group Male" in text and "  group Female" in text  # per-group positive rates
    assert "Sensitive feature at prediction: needed, as predict(X, sensitive_features=...)" in text
    # The test split's scores, computed for this report: both fits, with intervals.
    assert f"Test scores for trial #{page.best.number}:" in text
    assert len(page.test_lines) == 2
    assert all("(95% interval " in line for line in page.test_lines)


def test_the_html_page_is_self_contained_with_the_plots_inline(tuned, tmp_path: Path) -> None:
    objective, study = tuned
    page = report(study, objective=objective)
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
