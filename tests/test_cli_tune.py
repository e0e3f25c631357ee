from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from fairtune._storage import stored_task_correlation
from fairtune.cli import main
from fairtune.tuning import get_space


def _tune(tmp_path: Path, *extra: str, n_trials: int = 4) -> list[str]:
    return [
        "tune", "--dataset", "german", "--model", "random_forest",
        "--limit", "demographic_parity<=0.05", "--limit", "deo<=0.2",
        "--n-trials", str(n_trials), "--sampler", "fairbo", "--seed", "0", "--no-progress",
        "--storage", f"sqlite:///{tmp_path / 'ft.db'}", "--study-name", "s", *extra,
    ]


def test_tune_end_to_end_writes_plot_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plot = tmp_path / "tradeoff.png"
    assert main(_tune(tmp_path, "--plot", str(plot))) == 0
    out = capsys.readouterr().out
    assert "Study s: 4 trials" in out and "demographic_parity" in out and "equal_opportunity" in out
    assert plot.exists() and plot.stat().st_size > 10_000
    # Resume: a second call adds trials to the same stored study.
    assert main(_tune(tmp_path, n_trials=2)) == 0
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}")
    assert len(study.trials) == 6
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    assert len({tuple(sorted(t.params.items())) for t in study.trials}) == 6
    # The first trial is the untuned forest, the space's defaults; the resume did not repeat it.
    assert study.trials[0].params == get_space("random_forest").defaults
    # report prints the same best trial and can plot.
    capsys.readouterr()
    plot2 = tmp_path / "report.png"
    assert main(["report", "--storage", f"sqlite:///{tmp_path / 'ft.db'}", "--plot", str(plot2)]) == 0
    report = capsys.readouterr().out
    if any(all(v <= 0 for v in t.constraints.values()) for t in study.trials):
        assert f"Best fair trial: #{study.best_trial.number}" in report
    # The stored study remembers which metric it maximizes, and report names it.
    assert any(line.split()[:1] == ["accuracy"] for line in report.splitlines())
    assert plot2.exists()


@pytest.mark.parametrize(
    ("flag", "old", "new", "shown"),
    [
        ("--metric", "accuracy", "f1", ("'accuracy'", "'f1'")),
        ("--dataset", "german", "compas", ("'german'", "'compas'")),
        ("--model", "random_forest", "linear", ("'random_forest'", "'linear'")),
        ("--limit", "deo<=0.2", "deo<=0.1",
         ("'demographic_parity<=0.05, equal_opportunity<=0.2'",
          "'demographic_parity<=0.05, equal_opportunity<=0.1'")),
    ],
)
def test_resuming_with_another_setup_is_refused_naming_the_flag_and_both_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, old: str, new: str,
    shown: tuple[str, str],
) -> None:
    # Found by hand: another --dataset, --limit or --model was accepted on resume and mixed
    # trials that are not comparable (or failed every new trial and exited 0).
    assert main(_tune(tmp_path, n_trials=1)) == 0
    capsys.readouterr()
    args = _tune(tmp_path, n_trials=1)
    if flag == "--metric":
        args += ["--metric", new]
    else:
        args[len(args) - 1 - args[::-1].index(old)] = new
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"was tuned with {flag} {shown[0]}, but this run asks for {shown[1]}" in err
    assert f"use the same {flag} as before" in err
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}")
    assert len(study.trials) == 1  # nothing was added under the other setup
    assert study.user_attrs["fairtune:setup"]["limits"] == [
        "demographic_parity<=0.05", "equal_opportunity<=0.2"
    ]


def test_limits_in_another_order_resume_the_study(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_tune(tmp_path, n_trials=1)) == 0
    args = _tune(tmp_path, n_trials=1)
    i = args.index("demographic_parity<=0.05")
    args[i], args[i + 2] = "equal_opportunity<=0.2", "dsp<=0.05"
    assert main(args) == 0
    assert len(optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}").trials) == 2


def test_a_run_whose_every_trial_failed_exits_1_with_the_first_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairtune.tuning import FairObjective

    calls: list[int] = []

    def broken(self: FairObjective, trial: optuna.trial.BaseTrial) -> None:
        calls.append(1)
        raise ValueError(f"model {len(calls)} cannot be built")

    monkeypatch.setattr(FairObjective, "make_pipeline", broken)
    assert main(_tune(tmp_path, n_trials=3)) == 1
    err = capsys.readouterr().err
    assert err.startswith("fairtune: error: every trial of this run failed (3 of 3); the first: "
                          "trial 0 failed: model 1 cannot be built")
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.FAIL] * 3


def test_cv_and_test_split_are_reported_and_resuming_with_another_protocol_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_tune(tmp_path, "--cv", "3", "--test-size", "0.25", n_trials=4)) == 0
    out = capsys.readouterr().out
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}")
    assert study.user_attrs["fairtune:setup"]["validation"] == (
        "3-fold cross-validation, 0.25 held out for testing, split seed 0"
    )
    assert any(all(v <= 0 for v in t.constraints.values()) for t in study.trials)
    lines = [line.strip() for line in out.splitlines() if line.strip().startswith("Test split")]
    assert len(lines) == 1  # with cv there is no single validated model to report
    line = lines[0]
    assert line.startswith("Test split (250 rows), best fair trial refitted on the other rows: accuracy ")
    assert "demographic_parity" in line and "equal_opportunity" in line
    assert "; meets every limit" in line or "; violates demographic_parity<=0.05" in line
    # Each fairness metric with its 95 % bootstrap interval on the test rows; a limit inside
    # its interval is one that 250 rows cannot settle, and the line says so.
    unresolved = []
    for metric, bound in (("demographic_parity", 0.05), ("equal_opportunity", 0.2)):
        match = re.search(rf"{metric} ([0-9.]+) \(95% interval ([0-9.]+)-([0-9.]+)\)", line)
        assert match, line
        value, low, high = map(float, match.groups())
        assert low < high and high - low > 0.05
        assert (f"{metric}<={bound:g}" in line.partition("cannot tell")[2]) == (low < bound < high)
        unresolved.append(low < bound < high)
    assert ("250 test rows cannot tell whether" in line) == any(unresolved)
    # The same protocol resumes; another one (a holdout split, another seed) is refused.
    assert main(_tune(tmp_path, "--cv", "3", "--test-size", "0.25", n_trials=1)) == 0
    capsys.readouterr()
    assert main(_tune(tmp_path, "--test-size", "0.25", n_trials=1)) == 2
    err = capsys.readouterr().err
    # Each flag changed is named by itself, with the values typed.
    assert "was tuned with --cv 3, but this run asks for none" in err
    assert "use the same --cv as before" in err and "--seed" not in err
    args = _tune(tmp_path, "--cv", "3", "--test-size", "0.25", n_trials=1)
    seed = args[args.index("--seed") + 1]
    args[args.index("--seed") + 1] = "1"
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"was tuned with --seed {seed}, but this run asks for 1" in err and "--cv" not in err
    assert len(optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}").trials) == 5


def test_holdout_with_a_test_split_reports_the_refitted_and_the_validated_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_tune(tmp_path, "--test-size", "0.2", n_trials=3)) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()
             if line.strip().startswith("Test split")]
    assert [line.split(":")[0] for line in lines] == [
        "Test split (200 rows), best fair trial refitted on the other rows",
        "Test split, the validated model (training split only)",
    ]


def test_bad_cv_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_tune(tmp_path, "--cv", "1", n_trials=1)) == 2
    assert "argument --cv: must be an integer >= 2, but got '1'" in capsys.readouterr().err


@pytest.mark.processes
def test_tune_via_subprocess(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fairtune.cli", *_tune(tmp_path, n_trials=2)[:-4], "--sampler", "random"],
        capture_output=True, text=True, env={"MPLBACKEND": "Agg", "PATH": "", "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr
    # The dataset's known-issue warning, as the README and `fairtune datasets` say, in one line.
    assert result.stderr.startswith("fairtune: warning: The German credit data set has known issues")
    assert len(result.stderr.splitlines()) == 1
    # Without --storage and --study-name: an in-memory study named dataset-model-sampler.
    assert "Study german-random_forest-random: 2 trials" in result.stdout


_G = ["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.1"]


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        # Usage errors (exit 2) name the flag the user typed, not FairObjective's argument.
        (["tune", "--dataset", "mnist", "--model", "random_forest", "--limit", "dsp<=0.1"], 2, "argument --dataset: invalid choice: 'mnist'"),
        (["tune", "--dataset", "german", "--model", "svm", "--limit", "dsp<=0.1"], 2, "argument --model: invalid choice: 'svm'"),
        (["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<0.1"], 2, "--limit must be strings like 'demographic_parity<=0.05'"),
        ([*_G, "--limit", "demographic_parity<=0.2"], 2, "--limit must limit each metric once, but got demographic_parity twice"),
        ([*_G, "--sampler", "bo"], 2, "invalid choice: 'bo'"),
        ([*_G, "--metric", "auc"], 2, "argument --metric: invalid choice: 'auc'"),
        (["tune", "--dataset", "german", "--model", "linear"], 2, "--limit"),
        ([*_G, "--n-trials", "0"], 2, "argument --n-trials: must be an integer >= 1, but got '0'"),
        ([*_G, "--test-size", "1.5"], 2, "--test-size must be a float in (0, 1), but got --test-size 1.5."),
        # Numbers are named as typed, not as Python prints the float.
        ([*_G, "--test-size", "2"], 2, "--test-size must be a float in (0, 1), but got --test-size 2."),
        ([*_G, "--confidence", "95"], 2, "--confidence must be a level in (0.5, 1), e.g. 0.95, but got --confidence 95."),
        ([*_G, "--confidence", ".9", "--safety-size", "1"], 2, "but got --safety-size 1."),
        ([*_G, "--confidence", "95%"], 2, "argument --confidence: invalid number value: '95%'"),
        ([*_G, "--cv", "400"], 2, "--cv must be at most the number of tuning rows of the smaller class (300), but got --cv 400."),
        ([*_G, "--storage", "fairtune.db"], 2, "--storage must be a database URL (e.g. sqlite:///fairtune.db"),
        ([*_G, "--storage", "sqlte:///x.db"], 2, "--storage 'sqlte:///x.db' has an unknown scheme 'sqlte'"),
        (["report", "--storage", "sqlite:///:memory:", "--study-name", "nope"], 1, "no study named 'nope'"),
        # Checked before any trial runs, so that a long study is not lost to a typo in the path.
        ([*_G, "--plot", "/no/such/dir/t.png"], 2, "--plot must be a file in an existing folder"),
        ([*_G, "--plot", "/proc/t.png"], 2, "--plot '/proc/t.png' cannot be written"),
        ([*_G, "--plot", "tradeoff.pgn"], 2, "--plot must be a file name ending in one of ["),
        (["report", "--storage", "sqlite:///:memory:", "--plot", "/no/such/dir/t.png"], 2, "--plot must be a file in an existing folder"),
        (["report", "--storage", "sqlite:///:memory:", "--plot", "t.png", "--metric", "foo"], 2, "--metric must be one of ['demographic_parity'"),
        (["report", "--storage", "sqlite:///:memory:", "--metric", "dsp"], 2, "--metric picks the x axis of the trade-off plot: add --plot PNG."),
    ],
)
def test_bad_input_fails_with_one_line(argv: list[str], code: int, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("fairtune: error:")
    assert needle in err


@pytest.mark.parametrize("failures", [2, 5])
@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_workers_racing_to_create_the_study_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    failures: int, database: str,
) -> None:
    # Processes started together on a new database race to create its tables: the losers get
    # a unique-constraint error (SQLite) or "relation already exists" (PostgreSQL, seen in CI
    # with 3 CLI workers) although the tables then exist, and must load the study instead.
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    import fairtune._storage

    def race_error() -> Exception:
        if database == "sqlite":
            return IntegrityError("INSERT INTO alembic_version", {}, Exception("UNIQUE constraint"))
        return ProgrammingError(
            "CREATE TABLE alembic_version", {},
            Exception('relation "alembic_version" already exists (UNIQUE constraint)'),
        )

    create = optuna.create_study
    calls: list[int] = []

    def racing(*args: object, **kwargs: object) -> optuna.Study:
        calls.append(1)
        if len(calls) <= failures:
            raise race_error()
        return create(*args, **kwargs)

    monkeypatch.setattr(optuna, "create_study", racing)
    monkeypatch.setattr(fairtune._storage.time, "sleep", lambda seconds: None)
    code = main(_tune(tmp_path, n_trials=1))
    if failures < fairtune._storage.CREATE_ATTEMPTS:
        assert code == 0 and len(calls) == failures + 1
    else:  # a database that keeps failing is reported, not retried for ever
        assert code == 1 and len(calls) == fairtune._storage.CREATE_ATTEMPTS
        assert "UNIQUE constraint" in capsys.readouterr().err


def test_other_database_errors_are_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    # Only the races of creating the tables are retried: a refused permission is reported at once.
    from sqlalchemy.exc import ProgrammingError

    import fairtune._storage

    calls: list[int] = []

    def refused(*args: object, **kwargs: object) -> optuna.Study:
        calls.append(1)
        raise ProgrammingError("CREATE TABLE studies", {},
                               Exception("permission denied for schema public"))

    monkeypatch.setattr(optuna, "create_study", refused)
    monkeypatch.setattr(fairtune._storage.time, "sleep", lambda seconds: None)
    assert main(_tune(tmp_path, n_trials=1)) == 1
    assert len(calls) == 1
    assert "permission denied for schema public" in capsys.readouterr().err


def test_a_storage_error_storing_a_trial_is_reported_not_optunas_internal_assertion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    # A database that fails while a finished trial is stored leaves the trial RUNNING, and
    # Optuna then stops on its own `assert False, "Should not reach."`: the CLI must name the
    # database's error instead.
    import sqlite3

    from sqlalchemy.exc import OperationalError

    store = optuna.storages.RDBStorage.set_trial_state_values

    def locked(self: optuna.storages.RDBStorage, trial_id: int, state: optuna.trial.TrialState,
               values: object = None) -> bool:
        if state.is_finished():
            raise OperationalError("UPDATE trials", {},
                                   sqlite3.OperationalError("database is locked"))
        return store(self, trial_id, state, values)

    monkeypatch.setattr(optuna.storages.RDBStorage, "set_trial_state_values", locked)
    assert main(_tune(tmp_path, n_trials=1)) == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("fairtune: error:")]
    assert errors == [line for line in err.splitlines() if "database is locked" in line]
    assert len(errors) == 1 and "Should not reach" not in err and "--storage 'sqlite:" in errors[0]


@pytest.mark.parametrize("sampler", ["fairbo", "gp", "random"])
def test_workers_with_one_seed_draw_different_random_trials(tmp_path: Path, sampler: str) -> None:
    # The same command in two terminals: one --seed, one storage. An ordinary seeded random
    # startup would give both workers the same first trials; draws seeded by trial number do not.
    from fairtune.samplers import make_sampler

    url = f"sqlite:///{tmp_path / 'w.db'}"
    dist = {"x": optuna.distributions.FloatDistribution(0.0, 1.0),
            "k": optuna.distributions.CategoricalDistribution(list(range(50)))}
    one = optuna.create_study(study_name="s", storage=url, sampler=make_sampler(sampler, seed=0))
    two = optuna.load_study(study_name="s", storage=url, sampler=make_sampler(sampler, seed=0))
    points = [(t.params["x"], t.params["k"]) for t in (one.ask(dist), two.ask(dist))]
    assert points[0] != points[1]
    # Still reproducible: a new study with the same seed draws the same first trial.
    again = optuna.create_study(sampler=make_sampler(sampler, seed=0)).ask(dist)
    assert (again.params["x"], again.params["k"]) == points[0]


def test_report_shows_constraints_set_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    study = optuna.create_study(study_name="hand", storage=url)
    for x in (0.2, 0.7):
        trial = study.ask()
        trial.set_constraint("budget", x - 0.5)
        study.tell(trial, x)
    assert main(["report", "--storage", url]) == 0
    out = capsys.readouterr().out
    assert "2 complete, 1 fair" in out and "Best fair trial: #0" in out
    assert re.search(r"constraint budget +-0\.3 +ok", out)


def test_tune_and_report_on_a_journal_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --storage journal:<file> is Optuna's Journal file storage (several processes, one machine).
    log = tmp_path / "tune.log"
    argv = _tune(tmp_path, n_trials=2)
    argv[argv.index("--storage") + 1] = f"journal:{log}"
    assert main(argv) == 0
    assert main(argv) == 0  # resumed from the file
    assert log.stat().st_size > 0
    study = optuna.load_study(study_name="s", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(log))))
    assert len(study.trials) == 4
    capsys.readouterr()
    assert main(["report", "--storage", f"journal:{log}", "--study-name", "s"]) == 0
    assert "4 trials" in capsys.readouterr().out


def test_rdb_storages_get_a_heartbeat_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fairtune._storage as storage
    import fairtune.cli as cli

    opened: list[optuna.storages.BaseStorage | str] = []
    real = storage.open_storage

    def spy(*args: object, **kwargs: object) -> optuna.storages.BaseStorage | str:
        opened.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return opened[-1]

    monkeypatch.setattr(storage, "open_storage", spy)
    assert main(_tune(tmp_path, n_trials=1)) == 0
    assert isinstance(opened[-1], optuna.storages.RDBStorage)
    assert opened[-1].get_heartbeat_interval() == cli._DEFAULT_HEARTBEAT
    assert main(_tune(tmp_path, "--heartbeat", "0", n_trials=1)) == 0
    assert isinstance(opened[-1], optuna.storages.RDBStorage)
    assert opened[-1].get_heartbeat_interval() is None

def test_tune_objectives_with_mtkb_reports_the_pareto_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'mo.db'}"
    args = ["tune", "--dataset", "german", "--model", "random_forest", "--objectives",
            "accuracy,demographic_parity", "--sampler", "mtkb", "--n-trials", "6", "--seed", "0",
            "--no-progress", "--storage", storage, "--study-name", "mo"]
    plot = tmp_path / "front.png"
    assert main([*args, "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    study = optuna.load_study(study_name="mo", storage=storage)
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    assert len(study.trials) == 6 and "Pareto-optimal trials" in out
    for t in study.best_trials:
        assert re.search(rf"#{t.number}\s+{t.values[0]:.4f}\s+{t.values[1]:.4f}", out)
    assert plot.exists() and plot.stat().st_size > 10_000
    assert "Test split" not in out  # no --test-size, no test scores
    # The learned task correlation, in the objectives' own signs, as Python gives it.
    stored = stored_task_correlation(study)
    assert stored is not None and abs(stored[0, 1]) > 0.005
    assert "Task correlation learned by MTKBSampler" in out
    assert re.search(rf"\naccuracy\s+\+1\.00\s+{re.escape(f'{stored[0, 1]:+.2f}')}\n", out), out
    assert main(["report", "--storage", storage]) == 0
    reported = capsys.readouterr().out
    assert "Pareto-optimal trials" in reported and "Task correlation learned" in reported
    # Other objectives on the same study are refused; a single-objective run needs --limit.
    assert main([*args[:6], "accuracy,equal_opportunity", *args[7:]]) != 0
    assert "objectives" in capsys.readouterr().err
    assert main(["tune", "--dataset", "german", "--model", "linear", "--n-trials", "1"]) != 0
    assert "--limit must be given for a single-objective" in capsys.readouterr().err


def test_tune_objectives_with_a_test_split_scores_each_pareto_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairtune.tuning import FairObjective

    storage = f"sqlite:///{tmp_path / 'mo.db'}"
    assert main(["tune", "--dataset", "german", "--model", "linear", "--objectives",
                 "accuracy,demographic_parity", "--sampler", "random", "--n-trials", "5",
                 "--seed", "0", "--test-size", "0.2", "--no-progress", "--storage", storage,
                 "--study-name", "mo"]) == 0
    out = capsys.readouterr().out
    assert "each Pareto-optimal trial refitted on the tuning rows" in out
    study = optuna.load_study(study_name="mo", storage=storage)
    objective = FairObjective("german", "linear", objectives=["accuracy", "demographic_parity"],
                              test_size=0.2, random_state=0)
    for t in study.best_trials:
        scores = objective.evaluate(objective.refit_best(study, trial=t), confidence_level=0.95)
        low, high = scores["intervals"]["demographic_parity"]
        assert re.search(rf"#{t.number}\s+{scores['accuracy']:.4f}\s+"
                         rf"{scores['demographic_parity']:.4f} \({low:.4f}-{high:.4f}\)", out), out


@pytest.mark.parametrize(
    ("mitigation", "used", "needs"),
    [
        ("threshold", ["threshold"], "needed, as predict(X, sensitive_features=...)"),
        ("correlation_remover", ["correlation_remover"], "needed, as the sensitive columns of X"),
        ("auto", ["threshold", "reduction", "correlation_remover"], None),
    ],
)
def test_tune_with_a_mitigation_says_which_and_what_prediction_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mitigation: str, used: list[str],
    needs: str | None,
) -> None:
    argv = _tune(tmp_path, "--mitigation", mitigation, "--test-size", "0.2", n_trials=3)
    argv[argv.index("deo<=0.2") - 1: argv.index("deo<=0.2") + 1] = []  # one limit
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"Mitigation  {', '.join(used)}" in out  # the study's setup
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}")
    # The first trial is the untuned forest with the (first) mitigation aimed at the bound.
    assert study.trials[0].params["n_estimators"] == get_space("random_forest").defaults[
        "n_estimators"]
    assert study.trials[0].params.get("mitigation", used[0]) == used[0]
    assert study.trials[0].params.get("threshold_tolerance", 1.0) == 1.0
    shown = study.best_trial if "Best fair trial" in out else None
    if shown is not None:
        chosen = shown.user_attrs["fairtune:mitigation_used"]
        assert chosen in used
        assert f"Mitigation: {chosen} (fairlearn." in out
        assert ("validation values are their expected values" in out) == (
            chosen in ("threshold", "reduction"))
        expected = needs or ("needed, as predict(X, sensitive_features=...)" if chosen == "threshold"
                             else "needed, as the sensitive columns of X")
        assert f"Sensitive feature at prediction: {expected}." in out
        assert "Test split (" in out
    # report says the same from the storage alone.
    assert main(["report", "--storage", f"sqlite:///{tmp_path / 'ft.db'}"]) == 0
    report = capsys.readouterr().out
    assert f"Mitigation  {', '.join(used)}" in report
    if shown is not None:
        assert "Sensitive feature at prediction: needed" in report
    # Resuming with another mitigation (or none) is refused, naming the flag.
    other = "reduction" if mitigation != "reduction" else "threshold"
    for extra in (["--mitigation", other], []):
        argv = _tune(tmp_path, *extra, "--test-size", "0.2", n_trials=1)
        argv[argv.index("deo<=0.2") - 1: argv.index("deo<=0.2") + 1] = []
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"was tuned with --mitigation '{', '.join(used)}'" in err


def test_a_mitigation_without_a_limit_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["tune", "--dataset", "german", "--model", "linear", "--objectives",
            "accuracy,demographic_parity", "--mitigation", "threshold", "--n-trials", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--mitigation aims at a fairness limit, so --limit must be given with it" in err
    argv = ["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.05",
            "--metric", "roc_auc", "--mitigation", "reduction", "--n-trials", "1"]
    assert main(argv) == 2
    assert "--metric must not be 'roc_auc' with it, but got --metric 'roc_auc' and --mitigation " \
           "'reduction'" in capsys.readouterr().err


_MO = ["tune", "--dataset", "german", "--model", "linear", "--n-trials", "2", "--no-progress"]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--objectives", "accuracy,demographic_parity", "--sampler", "fairbo"],
         "--sampler fairbo cannot tune several --objectives (FairBOSampler is single-objective "
         "with constraints); use one of mtkb, gp, tpe, random"),
        (["--objectives", "accuracy,bogus"],
         "--objectives must name performance metrics ['accuracy', 'balanced_accuracy', 'f1', "
         "'roc_auc'] or fairness metrics ['demographic_parity', 'disparate_impact', "
         "'equal_opportunity', 'equalized_odds', 'false_positive_rate'] (or their aliases), "
         "but got 'bogus' in --objectives ['accuracy', 'bogus']"),
        (["--objectives", "accuracy,dsp", "--metric", "f1"],
         "--metric does not apply with --objectives: name the performance metric among the "
         "objectives instead (e.g. --objectives f1,demographic_parity), but got --metric f1."),
    ],
)
def test_multi_objective_usage_errors_name_the_flag(
    extra: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_MO, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_multi_objective_defaults_to_mtkb_warns_in_one_line_and_report_refuses_what_does_not_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import warnings

    from fairtune.datasets._base import _WARNED  # the once-per-process registry

    url = f"sqlite:///{tmp_path / 'mo.db'}"
    _WARNED.discard("german")  # so that this run warns whichever test loaded German first
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a raw Python warning would fail the run
        assert main([*_MO, "--objectives", "accuracy,dsp", "--storage", url]) == 0
    captured = capsys.readouterr()
    assert "Study german-linear-mtkb: 2 trials, 2 complete." in captured.out
    warning_lines = [line for line in captured.err.splitlines() if "German credit" in line]
    assert len(warning_lines) == 1 and warning_lines[0].startswith("fairtune: warning: ")
    for flag in (["--curve", str(tmp_path / "c.png")], ["--plot", str(tmp_path / "p.png"),
                                                        "--metric", "dsp"]):
        assert main(["report", "--storage", url, *flag]) == 2
        err = capsys.readouterr().err
        assert f"{flag[0] if flag[0] == '--curve' else '--metric'} does not apply to study " in err
        assert "2 objectives" in err


def test_a_multi_objective_run_whose_every_trial_failed_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairtune.tuning import FairObjective

    def broken(self: FairObjective, trial: optuna.trial.BaseTrial) -> None:
        raise RuntimeError("no model today")

    monkeypatch.setattr(FairObjective, "make_pipeline", broken)
    assert main([*_MO, "--objectives", "accuracy,dsp"]) == 1
    err = capsys.readouterr().err
    assert "every trial of this run failed (2 of 2); the first: trial 0 failed: no model today" in err


def test_margin_validates_tighter_and_judges_the_test_split_against_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.3",
            "--margin", "0.25", "--test-size", "0.25", "--n-trials", "3", "--no-progress",
            "--storage", f"sqlite:///{tmp_path / 'ft.db'}", "--study-name", "s"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert ("Trials validated against demographic_parity<=0.05 (the limits tightened by a "
            "margin of 0.25); the test split is judged against demographic_parity<=0.3.") in out
    # Without a test split, no word of one.
    assert main([*args[:9], *args[11:-2], "--study-name", "t"]) == 0
    assert ("Trials validated against demographic_parity<=0.05 (the limits tightened by a "
            "margin of 0.25).\n") in capsys.readouterr().out
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}")
    assert study.user_attrs["fairtune:setup"]["limits"] == ["demographic_parity<=0.05"]
    for t in study.trials:
        gap = t.user_attrs["fairtune:demographic_parity"]
        assert t.constraints["demographic_parity"] == pytest.approx(gap - 0.05)
    # Each test line's verdict is the limit's (0.3), not the validation's (0.05).
    for line in (l for l in out.splitlines() if l.startswith("Test split")):
        gap = float(re.search(r"demographic_parity ([0-9.]+)", line).group(1))
        assert line.endswith(
            "meets every limit." if gap <= 0.3 else "violates demographic_parity<=0.3.")
    # Another margin is another setup: refused, naming --margin as typed; --limit (typed the
    # same) is not named, nor the limits the margin derives.
    assert main([*args[:-4], "--margin", "0.2", *args[-4:]]) == 2
    err = capsys.readouterr().err
    assert "was tuned with --margin 0.25, but this run asks for 0.2: " in err
    assert "--limit" not in err and "use the same --margin as before" in err


@pytest.mark.parametrize(("margin", "needle"), [
    ("0.3", "--margin must leave room under the limit demographic_parity<=0.3"),
    ("-0.1", "--margin must be a number in [0, 1), but got --margin -0.1"),
])
def test_bad_margin_is_a_one_line_error(
    margin: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.3",
                 "--margin", margin, "--n-trials", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_hide_sensitive_keeps_the_group_out_of_the_inputs_and_auto_drops_correlation_remover(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'ft.db'}"
    argv = ["tune", "--dataset", "german", "--model", "random_forest", "--limit",
            "demographic_parity<=0.3", "--n-trials", "2", "--seed", "0", "--no-progress",
            "--storage", storage, "--study-name", "s", "--test-size", "0.2"]
    assert main([*argv, "--mitigation", "auto", "--hide-sensitive"]) == 0
    out = capsys.readouterr().out
    assert "Mitigation  threshold, reduction" in out
    study = optuna.load_study(study_name="s", storage=storage)
    assert study.user_attrs["fairtune:setup"]["dataset"] == "german (sensitive: sex, hidden from the model)"
    best = study.best_trial  # the loose limit holds for the first trials
    chosen = best.user_attrs["fairtune:mitigation_used"]
    expected = ("needed, as predict(X, sensitive_features=...)" if chosen == "threshold"
                else "not needed")
    assert f"Sensitive feature at prediction: {expected}." in out
    # A resume that shows the model the group is another setup.
    assert main([*argv, "--mitigation", "auto"]) == 2
    err = capsys.readouterr().err
    assert ("was tuned with --hide-sensitive 'on', but this run asks for 'off'") in err


def test_drop_columns_hides_a_column_that_reveals_the_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'ft.db'}"
    argv = ["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.3",
            "--n-trials", "1", "--no-progress", "--storage", storage, "--study-name", "s",
            "--hide-sensitive"]
    # personal_status_sex determines sex: hiding sex alone is flagged, with the flag that helps.
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert ("--hide-sensitive drops ['sex'] from the model's inputs, but columns left reveal "
            "sex: 'personal_status_sex' (each of its values belongs to one group)") in err
    assert "to hide it, drop them too: --drop-columns personal_status_sex." in err
    argv[argv.index("s")] = "t"
    assert main([*argv, "--drop-columns", "personal_status_sex"]) == 0
    out, err = capsys.readouterr()
    assert "reveal sex" not in err
    assert "german (sensitive: sex, hidden from the model, without personal_status_sex)" in out
    study = optuna.load_study(study_name="t", storage=storage)
    assert study.user_attrs["fairtune:setup"]["dataset"].endswith("without personal_status_sex)")
    # Unknown columns and empty names are one-line errors naming the flag.
    assert main([*argv, "--drop-columns", "personal_status_sex,savngs"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--drop-columns must name columns of X" in err and "no column ['savngs']" in err
    assert main([*argv, "--drop-columns", "savings,"]) == 2
    assert "argument --drop-columns: expected column names separated by commas, but got " \
           "'savings,'" in capsys.readouterr().err


def test_hide_sensitive_with_reduction_deploys_a_model_that_needs_no_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["tune", "--dataset", "german", "--model", "linear", "--limit",
            "demographic_parity<=0.3", "--n-trials", "1", "--no-progress", "--test-size", "0.2",
            "--mitigation", "reduction", "--hide-sensitive"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Mitigation: reduction (fairlearn." in out
    assert "Sensitive feature at prediction: not needed." in out
    # Without --hide-sensitive the model takes the sensitive columns as inputs.
    assert main(argv[:-1]) == 0
    assert "Sensitive feature at prediction: needed, as the sensitive columns of X (model " \
           "inputs)." in capsys.readouterr().out


def test_hide_sensitive_with_the_correlation_remover_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.3",
                 "--mitigation", "correlation_remover", "--hide-sensitive",
                 "--n-trials", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--mitigation 'correlation_remover' decorrelates the model's inputs from the " \
           "sensitive columns, which --hide-sensitive removes" in err


def test_ctrl_c_while_the_library_is_imported_is_one_line_and_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import builtins

    real_import = builtins.__import__

    def interrupted(name, *args, **kwargs):
        # Ctrl-C lands while the command line imports the library's modules.
        if name.startswith("fairtune.tuning"):
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    code = main(["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.1"])
    monkeypatch.setattr(builtins, "__import__", real_import)
    assert code == 130
    err = capsys.readouterr().err
    assert err == "fairtune: interrupted\n"


def test_a_dataset_warning_gives_shell_users_no_python_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairtune.datasets import _base

    monkeypatch.setattr(_base, "_WARNED", set())  # German warns once per process
    assert main(_tune(tmp_path, n_trials=1)) == 0
    err = capsys.readouterr().err
    assert "fairtune: warning: The German credit data set has known issues" in err
    assert "load_german().DESCR" in err and "filterwarnings" not in err
    # In Python the advice stays.
    monkeypatch.setattr(_base, "_WARNED", set())
    with pytest.warns(_base.FairtuneDatasetWarning, match=r"Silence with warnings\.filterwarnings"):
        _base._warn_once("german", "Known issues.")


def test_the_documented_python_snippet_runs_the_same_search_as_the_first_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from tests._scripts import run_code
    from tests.test_readme import ROOT, python_blocks

    snippet = python_blocks(ROOT / "docs" / "index.md")[0]
    assert "objective.create_study(seed=0)" in snippet and "n_trials=50" in snippet
    code = snippet.replace("n_trials=50", "n_trials=6") + (
        "import json\nprint(json.dumps([[t.params, t.values] for t in study.trials]))\n"
    )
    python = json.loads(run_code(code, tmp_path).splitlines()[-1])
    storage = f"sqlite:///{tmp_path / 'first.db'}"
    assert main(["tune", "--dataset", "compas", "--model", "xgboost", "--limit",
                 "demographic_parity<=0.05", "--mitigation", "threshold", "--n-trials", "6",
                 "--test-size", "0.25", "--seed", "0", "--no-progress", "--storage", storage,
                 "--study-name", "first"]) == 0
    capsys.readouterr()
    shell = [[t.params, t.values] for t in optuna.load_study(study_name="first",
                                                             storage=storage).trials]
    assert len(python) == len(shell) == 6
    for (p_params, p_values), (s_params, s_values) in zip(python, shell):
        assert p_params == pytest.approx(s_params)
        assert p_values == pytest.approx(s_values)


def test_the_command_lines_sampler_names_are_the_librarys() -> None:
    from fairtune import cli
    from fairtune.samplers import SAMPLER_NAMES

    assert cli._SAMPLERS == SAMPLER_NAMES


def test_a_resume_on_other_data_is_refused_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_tune(tmp_path, n_trials=1)) == 0
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}")
    setup = study.user_attrs["fairtune:setup"]
    study.set_user_attr("fairtune:setup", {**setup, "data": "0123456789abcdef"})  # elsewhere
    capsys.readouterr()
    assert main(_tune(tmp_path, n_trials=1)) == 2
    err = capsys.readouterr().err
    assert "study 's' holds trials scored on other data (data fingerprint '0123456789abcdef'" in err
    assert "create a new study for this data (another --study-name)" in err


@pytest.mark.parametrize("model", [["random_forest"], ["xgboost", "--mitigation", "threshold"]])
def test_a_refused_resource_suggests_only_parameters_it_accepts(
    model: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from fairtune.tuning import FairObjective

    argv = ["tune", "--dataset", "german", "--model", *model, "--limit", "dsp<=0.2",
            "--pruner", "median", "--resource", "n_trees", "--n-trials", "1", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    suggested = re.search(r"positive integer parameters: \[(.*?)\]", err)
    assert suggested is not None, err
    names = re.findall(r"'([^']+)'", suggested[1])
    assert "n_estimators" in names
    mitigation = model[2] if len(model) > 1 else None
    for name in names:  # each one is accepted
        FairObjective("german", model[0], limits="dsp<=0.2", budgets=(0.5, 1.0),
                      resource=name, mitigation=mitigation)


def test_a_resume_refusal_names_the_flags_as_typed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pandas as pd

    path = tmp_path / "people.csv"
    pd.DataFrame({"x": range(200), "group": ["a", "b"] * 100,
                  "outcome": ["yes", "no", "no", "yes"] * 50}).to_csv(path, index=False)
    run = ["--model", "linear", "--limit", "dsp<=0.3", "--n-trials", "1", "--no-progress",
           "--storage", f"sqlite:///{tmp_path / 'ft.db'}", "--study-name", "s"]
    assert main(["tune", "--data", str(path), "--target", "outcome", "--sensitive", "group",
                 "--positive", "yes", *run]) == 0
    capsys.readouterr()
    # Resumed with a bundled dataset: the file's --target is named as the flag.
    assert main(["tune", "--dataset", "german", *run]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert "--target 'outcome', but this run asks for none" in err and "`" not in err
    # --pruner typed (its budgets by default): named as typed, not as --budgets and a repr.
    run[-1] = "pruned"
    assert main(["tune", "--dataset", "german", *run]) == 0
    capsys.readouterr()
    assert main(["tune", "--dataset", "german", *run, "--pruner", "median"]) == 2
    err = capsys.readouterr().err
    assert "was tuned with --pruner none, but this run asks for 'median':" in err
    assert "--budgets" not in err and "MedianPruner(" not in err


@pytest.mark.parametrize(("storage", "output"), [
    ("sqlite:///{}", "--html"), ("journal:{}", "--html"), ("journal:{}", "--plot"),
])
def test_an_output_that_is_the_storage_file_is_refused_before_any_trial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], storage: str, output: str
) -> None:
    name = "study.html" if output == "--html" else "study.png"
    path = tmp_path / name
    url = storage.format(path)
    argv = ["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.1",
            "--n-trials", "1", "--no-progress", "--storage", url]
    assert main([*argv, output, str(tmp_path / "." / name)]) == 2
    err = capsys.readouterr().err
    assert f"{output} must be another file than the study's storage" in err
    assert "--storage" in err and repr(str(path.resolve())) in err
    assert not path.exists()  # no trial ran
    # report (which reads the storage) refuses it too.
    assert main(argv) == 0
    size = path.stat().st_size
    flag = "--html" if output == "--html" else "--curve"
    assert main(["report", "--storage", url, flag, str(path)]) == 2
    assert f"{flag} must be another file than the study's storage" in capsys.readouterr().err
    assert path.stat().st_size == size


def test_a_warning_of_the_safety_test_is_one_line_of_the_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The pinned run whose sequence of tests stopped before a better fair trial: the warning
    # is the command line's own line, not Python's (with a source path), nor an error.
    from tests.test_pinned_trials import cli_confidence_sequence

    assert cli_confidence_sequence(tmp_path)["exit_code"] == 0
    err = capsys.readouterr().err
    assert ("fairtune: warning: Never tested on the safety rows: trial #3, above the "
            "certified trial") in err
    assert ".py:" not in err
