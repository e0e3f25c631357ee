"""fairtune's view in optuna-dashboard without a server: what :mod:`fairtune.dashboard` writes
into a study (read back with optuna-dashboard's own readers), its refusals, and ``tune
--dashboard``'s checks before any trial. tests/test_dashboard.py reads the same view through
a real dashboard server and looks at it in Chromium."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import optuna
import pytest
from optuna.artifacts import FileSystemArtifactStore
from optuna_dashboard import get_note
from optuna_dashboard._custom_plot_data import get_plotly_graph_objects

from fairtune._text import markdown_text
from fairtune.cli import main
from fairtune.dashboard import DashboardCallback, publish
from fairtune.fairness import best_fair_trial
from tests.test_report import _add, tenant_study


def _figures(study: optuna.Study) -> dict[str, dict]:
    attrs = study._storage.get_study_system_attrs(study._study_id)
    return {key: json.loads(text) for key, text in get_plotly_graph_objects(attrs).items()}


def _plain(markdown: str) -> str:
    return re.sub(r"\\(.)", r"\1", markdown)


def _small_study(name: str = "s") -> optuna.Study:
    """Trials #0 (0.9, unfair: 0.3 against 0.1), #1 (0.7, fair), #2 (0.8, fair)."""
    from fairtune._keys import SETUP_KEY

    study = optuna.create_study(direction="maximize", study_name=name)
    study.set_user_attr(SETUP_KEY, {"metric": "accuracy", "limits": ["demographic_parity<=0.1"]})
    for value, gap in ((0.9, 0.3), (0.7, 0.05), (0.8, 0.02)):
        _add(study, value, gap)
    return study


@pytest.mark.parametrize("name", ["<b>bold</b>", "**x** _y_ `z` [a](b) | c", "# h\n- x",
                                  "a\x1b[2Jb", "$5 & <i>"])
def test_markdown_text_shows_every_name_as_typed(name: str) -> None:
    text = markdown_text(name)
    assert "\n" not in text and "\x1b" not in text
    assert not re.search(r"(?<!\\)[<*_`\[|#&$]", text)  # every markup character escaped
    assert _plain(text).replace("\\n", "\n").replace("\\x1b", "\x1b") == name


def test_the_note_names_the_best_fair_trial_not_the_best_value() -> None:
    study = _small_study("team <b>x</b>")
    publish(study)
    note = _plain(get_note(study))
    assert "### Deploy trial #2, the best fair trial\n" in note
    assert "Trial #2, the best fair trial, on validation:" in note
    assert "Deploy trial #2, the best fair trial (accuracy 0.8000 on validation)." in note
    assert "Study team <b>x</b>: 3 trials, 3 complete, 2 fair." in note
    assert "<b>" not in get_note(study)
    figures = _figures(study)
    star = figures["fairtune-tradeoff"]["data"][1]
    assert (star["x"], star["y"]) == ([0.02], [0.8])
    # The best-fair curve starts at the first fair trial (#1) and ends at #2's value.
    curve = figures["fairtune-best-fair"]["data"][0]
    assert (curve["x"], curve["y"]) == ([1, 2], [0.7, 0.8])


def test_a_study_without_a_fair_trial_says_so_and_draws_an_empty_curve() -> None:
    from fairtune._keys import SETUP_KEY

    study = optuna.create_study(direction="maximize")
    study.set_user_attr(SETUP_KEY, {"metric": "accuracy", "limits": ["demographic_parity<=0.1"]})
    _add(study, 0.9, 0.3)
    _add(study, 0.7, 0.2)
    publish(study)
    note = _plain(get_note(study))
    assert "No trial meets every limit yet; the least unfair one is #1." in note
    assert "Deploy" not in note
    assert _figures(study)["fairtune-best-fair"]["data"][0]["x"] == []


def test_a_study_shared_by_tenants_has_a_figure_pair_per_tenant_and_no_best_across() -> None:
    study = tenant_study()
    publish(study)
    note = _plain(get_note(study))
    assert "Best fair trial" not in note.split("### Tenant a")[0]  # none across tenants
    assert "### Tenant a" in note and "### Tenant b" in note
    assert "Deploy trial #0" in note and "Deploy trial #3" in note
    figures = _figures(study)
    assert set(figures) == {"fairtune-tradeoff-0", "fairtune-best-fair-0",
                            "fairtune-tradeoff-1", "fairtune-best-fair-1"}
    assert figures["fairtune-tradeoff-1"]["data"][1]["name"] == "best fair trial (#3)"


def test_the_report_artifact_is_replaced_in_place(tmp_path: Path) -> None:
    store = FileSystemArtifactStore(str(tmp_path))
    study = _small_study()
    publish(study, artifact_store=store)
    (first,) = optuna.artifacts.get_all_artifact_meta(study)
    _add(study, 0.85, 0.01)
    publish(study, artifact_store=store)
    (again,) = optuna.artifacts.get_all_artifact_meta(study)
    assert again.artifact_id == first.artifact_id and again.filename == "fairtune-report.html"
    page = (tmp_path / first.artifact_id).read_text(encoding="utf-8")
    assert "4 trials" in page and "Deploy trial #3" in page


def test_refusals() -> None:
    with pytest.raises(ValueError, match=r"`every` must be a positive integer, but got every=0"):
        DashboardCallback(every=0)
    with pytest.raises(ValueError, match=r"`every` must be a positive integer.*every=True"):
        DashboardCallback(every=True)
    with pytest.raises(ValueError, match=r"`artifact_store` must be an Optuna artifact store.*"
                                         r"'artifacts'"):
        DashboardCallback(artifact_store="artifacts")
    two = optuna.create_study(directions=["maximize", "minimize"])
    with pytest.raises(ValueError, match=r"`study` must have one objective.*got 2 directions"):
        publish(two)
    two.optimize(lambda t: (t.suggest_float("x", 0, 1), 0.0), n_trials=1)
    with pytest.raises(ValueError, match="got 2 directions"):
        DashboardCallback()(two, two.trials[0])


def test_without_the_extra_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    with pytest.raises(ImportError, match=r"pip install 'fairtune\[dashboard\]'"):
        DashboardCallback()


def test_a_failed_update_is_a_warning_and_the_search_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import fairtune.dashboard as dashboard

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("database is locked")

    monkeypatch.setattr(dashboard, "publish", broken)
    study = optuna.create_study(direction="maximize")
    with pytest.warns(RuntimeWarning, match=r"update after trial #1 failed \(OSError: database "
                                            r"is locked\); the search goes on"):
        study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3,
                       callbacks=[DashboardCallback(every=2)])
    assert len(study.trials) == 3
    # The update at the end of a search too: a warning, and False (not updated).
    with pytest.warns(RuntimeWarning, match=r"view was not updated \(OSError: database is "
                                            r"locked\)"):
        assert DashboardCallback().after_search(study) is False


@pytest.mark.parametrize(("extra", "message"), [
    (["--dashboard"], "--dashboard writes the fair search's view into the study for "
                      "optuna-dashboard to show, so it needs a --storage"),
    (["--artifacts", "art"], "--artifacts writes the fair search's view into the study"),
    (["--dashboard", "--storage", "sqlite:///x.db", "--objectives", "accuracy,dsp",
      "--limit", ""], "--dashboard shows a single-objective study's best fair trial"),
    (["--dashboard", "--storage", "sqlite:///x.db", "--artifacts", "x.db"],
     "--artifacts must be a directory, but 'x.db' is a file"),
])
def test_tune_refuses_a_dashboard_it_cannot_write_before_any_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    extra: list[str], message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.db").write_bytes(b"")
    args = ["tune", "--dataset", "german", "--model", "linear", "--n-trials", "2",
            "--no-progress", *extra]
    if "--objectives" not in extra:
        args += ["--limit", "dsp<=0.05"]
    assert main(args) == 2
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]  # nothing written


def test_best_fair_trial_is_the_one_the_note_names(tmp_path: Path) -> None:
    """The CLI's view with --artifacts in a new directory: created, the report in it."""
    storage = f"sqlite:///{tmp_path / 'f.db'}"
    assert main(["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.05",
                 "--n-trials", "3", "--no-progress", "--storage", storage, "--study-name",
                 "g", "--artifacts", str(tmp_path / "new" / "dir")]) == 0
    study = optuna.load_study(study_name="g", storage=storage)
    best = best_fair_trial(study)
    assert best is not None
    assert f"Deploy trial #{best.number}" in _plain(get_note(study))
    (meta,) = optuna.artifacts.get_all_artifact_meta(study)
    assert (tmp_path / "new" / "dir" / meta.artifact_id).exists()


# -- the answer: the certified model, a refusal, test lines of another trial ------------------


def test_the_note_deploys_the_certified_model_not_the_best_fair_trial() -> None:
    from fairtune._keys import CERTIFICATE_KEY

    study = _small_study()  # best fair trial #2; #1 passed the safety test
    study.set_user_attr(CERTIFICATE_KEY, {"certified": True, "trial": 1,
                                          "message": "Certified: trial #1 keeps ..."})
    publish(study)
    note = _plain(get_note(study))
    assert ("- Deploy trial #1, the certified model (the best fair trial, #2, did not pass the "
            "safety test) (accuracy 0.7000 on validation).") in note
    assert "Trial #1, the certified model, on validation:" in note
    assert "- Certified: trial #1 keeps ..." in note
    assert note.splitlines()[2] == "### Deploy trial #1, certified"
    assert "Deploy trial #2" not in note and "the model to deploy is the one this note" in note


def test_a_refused_study_deploys_no_model() -> None:
    from fairtune._keys import CERTIFICATE_KEY

    study = _small_study()
    refusal = "No model could be certified: the best candidate's bound is 0.12."
    study.set_user_attr(CERTIFICATE_KEY, {"certified": False, "message": refusal})
    publish(study)
    note = _plain(get_note(study))
    assert f"- Deploy no model: {refusal}" in note
    assert note.splitlines()[2] == "### Deploy no model: the safety test certified none"
    assert "Deploy trial" not in note and note.count(refusal) == 1


def test_test_lines_of_another_trial_are_not_put_under_the_deployed_one() -> None:
    from fairtune.tuning._deployment import ScoresOnTest, store_test_fits

    study = _small_study()  # best fair trial #2
    store_test_fits(study, 1, [ScoresOnTest("tuning", 250, {"accuracy": 0.61}, {}, True, [])])
    publish(study)
    note = _plain(get_note(study))
    answer = note.split("|")[0]
    assert "Deploy trial #2" in answer and "0.6100" not in answer
    assert ("Test split, trial #1 (not the model to deploy):\n\n- Test split (250 rows), trial "
            "#1 refitted on the other rows: accuracy 0.6100; meets every limit.") in note


def test_the_certified_search_says_its_limits_are_tightened() -> None:
    from fairtune._keys import SETUP_KEY
    from fairtune.report import report

    study = _small_study()
    study.set_user_attr(SETUP_KEY, {**study.user_attrs[SETUP_KEY], "confidence": 0.95,
                                    "limits": ["demographic_parity<=0.0349"],
                                    "limits_given": ["demographic_parity<=0.1"]})
    (limits,) = [value for what, value in report(study).setup if what == "Limits"]
    # The limit as given and the one the trials were validated against, each named as such.
    assert limits.startswith("demographic_parity<=0.1 as given; the trials were validated "
                             "against demographic_parity<=0.0349 (tightened by the width of "
                             "their 95% bound on the safety rows")


# -- one report artifact, whoever publishes ---------------------------------------------------


def test_workers_that_publish_at_once_write_one_report_artifact(tmp_path: Path) -> None:
    """Two workers (two Study objects on one storage) that both publish before either saw the
    other's artifact: one artifact, under the id the study determines."""
    from fairtune.dashboard import report_artifact_id

    storage = f"sqlite:///{tmp_path / 'w.db'}"
    first = optuna.create_study(direction="maximize", study_name="w", storage=storage)
    for value, gap in ((0.9, 0.3), (0.7, 0.05)):
        _add(first, value, gap)
    second = optuna.load_study(study_name="w", storage=storage)
    store = FileSystemArtifactStore(str(tmp_path))
    publish(first, artifact_store=store)
    publish(second, artifact_store=store)
    (meta,) = optuna.artifacts.get_all_artifact_meta(second)
    assert meta.artifact_id == report_artifact_id(first) == report_artifact_id(second)
    other = optuna.create_study(direction="maximize", study_name="v", storage=storage)
    assert report_artifact_id(other) != meta.artifact_id


# -- refusals that name the argument ------------------------------------------------------------


def test_publish_and_the_figures_refuse_what_they_cannot_show() -> None:
    from optuna.artifacts import FileSystemArtifactStore as Store

    from fairtune.dashboard import best_fair_figure, tradeoff_figure

    study = _small_study()
    with pytest.raises(ValueError, match=r"`artifact_store` must be an Optuna artifact store"):
        publish(study, artifact_store=Store)  # the class, not a store
    with pytest.raises(ValueError, match=r"`study` must be an optuna.Study.*'s'"):
        publish("s")
    for after in (-1, 3, "x", 1.5, True):
        with pytest.raises(ValueError, match=r"`after` must be the number of one of the "
                                             r"study's 3 trials"):
            publish(study, after=after)
    two = optuna.create_study(directions=["maximize", "minimize"])
    for draw in (tradeoff_figure, best_fair_figure):
        with pytest.raises(ValueError, match="got 2 directions"):
            draw(two)
    shared = tenant_study()
    for draw in (tradeoff_figure, best_fair_figure):
        with pytest.raises(ValueError, match=r"`tenant` must be one of \['a', 'b'\].*'nobody'"):
            draw(shared, tenant="nobody")
        with pytest.raises(ValueError, match=r"draw one tenant's trials.*give `tenant`"):
            draw(shared)  # never one figure across tenants


@pytest.mark.parametrize(("extra", "message"), [
    (["--artifacts", "art"], "--artifacts writes the fair search's view into the study"),
    (["--dashboard", "--storage", "sqlite:///:memory:"],
     "needs a --storage the dashboard can read (a database file or server), but got --storage "
     "sqlite:///:memory:"),
    (["--dashboard", "--storage", "sqlite://"], "but got --storage sqlite://."),
    (["--dashboard", "--storage", "sqlite:///x.db", "--artifacts", " "],
     "--artifacts must name a directory, but got ' '"),
])
def test_tune_names_the_flag_the_user_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    extra: list[str], message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.05",
                 "--n-trials", "2", "--no-progress", *extra]) == 2
    assert message in capsys.readouterr().err


def test_tune_prints_the_artifact_directory_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.05",
                 "--n-trials", "1", "--no-progress", "--storage", "sqlite:///x.db",
                 "--artifacts", "ar\nt"]) == 0
    (line,) = [out for out in capsys.readouterr().out.splitlines() if "optuna-dashboard" in out]
    assert line.endswith("the HTML report in --artifacts ar\\nt.")


# -- the note and figures render the one deployment record ------------------------------------


def test_nothing_deployed_yet_is_what_the_note_and_figure_say() -> None:
    """A study set up with confidence whose safety test has not run: the note names no model
    to deploy (its footer too), and the figure stars the candidate as a candidate, beside
    both the limit as given and the tightened one the trials were validated against."""
    from fairtune._keys import SETUP_KEY
    from fairtune.dashboard import tradeoff_figure

    study = _small_study()
    study.set_user_attr(SETUP_KEY, {"metric": "accuracy", "confidence": 0.95,
                                    "limits": ["demographic_parity<=0.06"],
                                    "limits_given": ["demographic_parity<=0.1"]})
    publish(study)
    note = _plain(get_note(study))
    assert "the model to deploy is the one this note names first" not in note
    assert "this note names no model to deploy yet" in note
    figure = tradeoff_figure(study).to_dict()
    star = next(trace for trace in figure["data"] if trace["marker"].get("symbol") == "star")
    assert star["name"] == "candidate, not certified (#2)"
    lines = {shape["x0"] for shape in figure["layout"]["shapes"]}
    assert lines == {0.1, 0.06}
    labels = [a["text"] for a in figure["layout"]["annotations"]]
    assert "limit demographic_parity&lt;=0.1" in labels and "validated against 0.06" in labels


def test_the_figure_stars_the_certified_model() -> None:
    from fairtune._keys import CERTIFICATE_KEY
    from fairtune.dashboard import tradeoff_figure

    study = _small_study()  # best fair trial #2; #1 certified
    study.set_user_attr(CERTIFICATE_KEY, {"certified": True, "trial": 1, "tested_trials": [2, 1],
                                          "message": "Certified: trial #1 keeps ..."})
    figure = tradeoff_figure(study).to_dict()
    star = next(trace for trace in figure["data"] if trace["marker"].get("symbol") == "star")
    assert (star["name"], list(star["y"])) == ("certified, to deploy (#1)", [0.7])


def test_a_study_without_limits_deploys_its_best_trial_not_a_fair_one() -> None:
    study = optuna.create_study(direction="maximize")
    for value in (0.6, 0.8, 0.7):
        study.enqueue_trial({"x": value})
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    publish(study)
    note = _plain(get_note(study))
    assert note.splitlines()[2] == "### Deploy trial #1, the best trial"
    assert "fair trial" not in note.split("The dashboard's")[0]
    # Nothing measured fairness or validated the values: neither is claimed.
    assert " fair." not in note and "on validation" not in note


def test_fair_search_cv_publishes_its_certified_model_at_the_end() -> None:
    from optuna.distributions import FloatDistribution
    from sklearn.linear_model import LogisticRegression

    from fairtune.tuning import FairSearchCV
    from tests.tuning_tests.test_certify import _population

    X, y, group = _population(8000, 2)
    study = optuna.create_study(direction="maximize", storage="sqlite:///:memory:",
                                sampler=optuna.samplers.RandomSampler(seed=0))
    search = FairSearchCV(LogisticRegression(), {"C": FloatDistribution(1e-3, 10, log=True)},
                          limits="demographic_parity<=0.15", mitigation="threshold", cv=3,
                          n_trials=3, random_state=0, confidence=0.9, study=study,
                          callbacks=[DashboardCallback(every=1)])
    search.fit(X, y, sensitive_features=group)
    note = _plain(get_note(study))
    assert note.splitlines()[2].startswith(f"### Deploy trial #{search.certificate_.trial}, "
                                           "certified")
    assert "No model certified yet" not in note
