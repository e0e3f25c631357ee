"""`fairtune report` and `fairtune tune` as a user meets them: one rule for "fair", stored
setups, storage errors, Ctrl-C, one-class models, broken pipes (issue 24)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import optuna  # noqa: E402
import pytest  # noqa: E402
from optuna.trial import TrialState  # noqa: E402

from fairtune.cli import main  # noqa: E402
from fairtune.fairness import USER_ATTR_PREFIX  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _tune(tmp_path: Path, *extra: str, n_trials: int = 3) -> list[str]:
    return [
        "tune", "--dataset", "german", "--model", "random_forest",
        "--limit", "demographic_parity<=0.1", "--n-trials", str(n_trials), "--sampler", "random",
        "--seed", "0", "--no-progress", "--storage", f"sqlite:///{tmp_path / 'ft.db'}",
        "--study-name", "s", *extra,
    ]


def _add(study: optuna.Study, value: float, **constraints: tuple[float, float]) -> None:
    """A trial with fairness values and constraints: ``metric=(value, bound it was told)``."""
    trial = study.ask()
    for metric, (fairness, bound) in constraints.items():
        trial.set_user_attr(USER_ATTR_PREFIX + metric, fairness)
        trial.set_constraint(metric, fairness - bound)
    study.tell(trial, value)


@pytest.mark.parametrize("stored", [True, False])
def test_report_and_plot_agree_on_the_best_fair_trial_of_a_mixed_study(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stored: bool
) -> None:
    # The study of issue 24: trials told DSP - 0.10 next to trials told DSP - 0.05, trials with
    # an equal_opportunity constraint the others lack, and one trial without any constraint.
    url = f"sqlite:///{tmp_path / 'mixed.db'}"
    study = optuna.create_study(study_name="mixed", storage=url, direction="maximize")
    if stored:
        study.set_user_attr("fairtune:limits", ["demographic_parity<=0.05", "equal_opportunity<=0.2"])
        study.set_user_attr("fairtune:metric", "accuracy")
    _add(study, 0.70, demographic_parity=(0.03, 0.05), equal_opportunity=(0.1, 0.2))  # fair
    _add(study, 0.80, demographic_parity=(0.0743, 0.10), equal_opportunity=(0.1, 0.2))
    _add(study, 0.90)  # no fairness value at all: feasible for Optuna
    _add(study, 0.85, demographic_parity=(0.01, 0.05), equal_opportunity=(0.3, 0.2))
    _add(study, 0.75, demographic_parity=(0.02, 0.05))  # equal_opportunity not measured
    assert study.best_trial.number == 2  # Optuna's rule: what the old report printed
    plot = tmp_path / "t.png"
    assert main(["report", "--storage", url, "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "5 trials, 5 complete, 1 fair." in out and "Best fair trial: #0\n" in out
    # The plot written by the same command stars the same trial and draws the study's limit.
    from fairtune.visualization import plot_tradeoff

    ax = plot_tradeoff(optuna.load_study(study_name="mixed", storage=url))
    star = [c for c in ax.collections if len(c.get_offsets()) == 1][0].get_offsets()[0]
    assert tuple(star) == pytest.approx((0.03, 0.70))
    limit_lines = [list(line.get_xdata()) for line in ax.get_lines()]
    assert limit_lines == [[0.05, 0.05]]
    assert ax.get_ylabel() == ("accuracy" if stored else "objective value")


def test_report_prints_the_stored_setup_test_scores_and_draws_the_curve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_tune(tmp_path, "--test-size", "0.2", "--metric", "roc_auc")) == 0
    tuned = capsys.readouterr().out
    url = f"sqlite:///{tmp_path / 'ft.db'}"
    curve = tmp_path / "curve.png"
    assert main(["report", "--storage", url, "--curve", str(curve)]) == 0
    out = capsys.readouterr().out
    assert "Dataset     german (sensitive: sex)\n" in out
    assert "Model       random_forest\n" in out and "Metric      roc_auc\n" in out
    assert "Limits      demographic_parity<=0.1\n" in out
    assert "Validation  a 30% validation split, 0.2 held out for testing, split seed 0\n" in out
    assert "roc_auc scores the probabilities; the fairness values are measured on the 0/1" in out
    tests = [line for line in tuned.splitlines() if line.startswith("Test split")]
    if tests:  # a fair trial was found: its test scores are stored and shown again
        assert all(f"  {line}" in out.splitlines() for line in tests)
    assert re.search(r"predicted positive rate +0\.\d{4}", out)
    assert re.search(r"  group (Fe)?male +[01]\.\d{4}", out)
    assert curve.exists() and "Best-fair curve written to" in out


def test_report_reads_a_study_without_writing_the_storage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "doesnotexist.db"
    assert main(["report", "--storage", f"sqlite:///{missing}"]) == 1
    err = capsys.readouterr().err
    assert f"--storage 'sqlite:///{missing}': no such file '{missing}'." in err
    assert not missing.exists()
    journal = tmp_path / "tune.log"
    assert main(["report", "--storage", f"journal:{journal}"]) == 1
    assert f"--storage 'journal:{journal}': no such file '{journal}'." in capsys.readouterr().err
    assert not journal.exists()
    empty = tmp_path / "empty.db"
    empty.touch()
    assert main(["report", "--storage", f"sqlite:///{empty}"]) == 1
    assert "holds no Optuna study" in capsys.readouterr().err
    assert empty.stat().st_size == 0


@pytest.mark.parametrize("command", ["tune", "report"])
def test_storage_problems_name_the_storage_and_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    assert main(_tune(tmp_path, n_trials=1)) == 0
    capsys.readouterr()
    good = tmp_path / "ft.db"
    url = f"sqlite:///{good}"

    def run() -> tuple[int, str]:
        argv = _tune(tmp_path, n_trials=1) if command == "tune" else ["report", "--storage", url]
        code = main(argv)
        return code, capsys.readouterr().err

    # Damaged: a page of the file overwritten.
    data = bytearray(good.read_bytes())
    backup = bytes(data)
    data[len(data) // 2:] = b"\xff" * (len(data) - len(data) // 2)
    good.write_bytes(bytes(data))
    code, err = run()
    assert code == 1 and f"--storage '{url}': '{good}' is damaged" in err
    # Not SQLite at all.
    good.write_text("trial,value\n0,0.7\n")
    code, err = run()
    assert code == 1 and f"'{good}' is not an SQLite database." in err
    good.write_bytes(backup)
    # Read-only (simulated: the tests may run as root, who can write anything).
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: mode != os.W_OK and real_access(p, mode))
    code, err = run()
    if command == "tune":
        assert code == 1 and f"'{good}' is read-only" in err
        assert len(optuna.load_study(study_name="s", storage=url).trials) == 1
    else:  # report only reads
        assert code == 0, err


def _ctrl_c_in_trial(monkeypatch: pytest.MonkeyPatch, number: int) -> None:
    """Send this process Ctrl-C while FairObjective scores its ``number``-th trial."""
    from fairtune.tuning import FairObjective

    call = FairObjective.__call__
    calls: list[int] = []

    def objective(self: FairObjective, trial: optuna.Trial) -> float:
        calls.append(1)
        if len(calls) == number:
            os.kill(os.getpid(), signal.SIGINT)
        return call(self, trial)

    monkeypatch.setattr(FairObjective, "__call__", objective)


def test_ctrl_c_in_a_trial_stores_it_as_failed_prints_the_best_so_far_and_exits_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _ctrl_c_in_trial(monkeypatch, 3)  # while the third model trains
    assert main(_tune(tmp_path, n_trials=10)) == 130
    captured = capsys.readouterr()
    # (A dataset warning may come first: German warns once per process, in whichever test.)
    lines = [line for line in captured.err.splitlines()
             if not line.startswith("fairtune: warning: The German credit")]
    assert len(lines) == 1
    assert lines[0].startswith("fairtune: interrupted after 3 trials of this run; to resume, "
                               "run the same command again (the study is stored in sqlite:///")
    assert "Best fair trial: #" in captured.out or "the least unfair one is #" in captured.out
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}")
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 2 + [TrialState.FAIL]


@pytest.mark.parametrize("where", ["tell", "ask"])
def test_ctrl_c_outside_the_objective_never_breaks_optuna_nor_leaves_a_running_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    # Optuna 5.0.0 finishes a trial outside the objective: Ctrl-C while it tells the storage
    # ended in "cannot access local variable 'updated_state'" (exit 1); while it asks the
    # sampler, the new trial stayed RUNNING for ever.
    import optuna.study._optimize as optimize_module

    calls: list[int] = []
    if where == "tell":
        original = optimize_module._tell_with_warning

        def patched(*args: object, **kwargs: object) -> object:
            calls.append(1)
            if len(calls) == 2:
                os.kill(os.getpid(), signal.SIGINT)
            return original(*args, **kwargs)

        monkeypatch.setattr(optimize_module, "_tell_with_warning", patched)
    else:
        original_ask = optuna.Study.ask

        def patched_ask(self: optuna.Study, *args: object, **kwargs: object) -> optuna.Trial:
            trial = original_ask(self, *args, **kwargs)
            calls.append(1)
            if len(calls) == 2:
                os.kill(os.getpid(), signal.SIGINT)
            return trial

        monkeypatch.setattr(optuna.Study, "ask", patched_ask)
    assert main(_tune(tmp_path, n_trials=6)) == 130
    err = capsys.readouterr().err
    assert "interrupted after" in err and "updated_state" not in err
    states = [t.state for t in optuna.load_study(
        study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}").trials]
    assert TrialState.RUNNING not in states and len(states) <= 3
    assert states[0] == TrialState.COMPLETE and states[-1] in (TrialState.FAIL, TrialState.COMPLETE)


def _completed_trials(path: Path) -> int:
    """The COMPLETE trials of the Optuna SQLite file at ``path``, read on a read-only
    connection (0 while the file or its tables do not exist yet). Polling with
    ``optuna.load_study`` instead opens an RDB storage each time, whose setup contends for
    the file's locks with the tuning process's writes."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            row = db.execute("SELECT COUNT(*) FROM trials WHERE state = 'COMPLETE'").fetchone()
    except sqlite3.Error:
        return 0
    return int(row[0])


@pytest.mark.processes
def test_ctrl_c_of_a_real_process(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "fairtune.cli", *_tune(tmp_path, n_trials=500)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"},
    )
    url = f"sqlite:///{tmp_path / 'ft.db'}"
    try:
        # Wait until a trial completed, then press Ctrl-C (the deadline only guards a hang).
        deadline = time.monotonic() + 300
        while process.poll() is None and time.monotonic() < deadline:
            if _completed_trials(tmp_path / "ft.db"):
                break
            time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate()
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert "fairtune: interrupted after" in err and "Traceback" not in err
    states = [t.state for t in optuna.load_study(study_name="s", storage=url).trials]
    assert TrialState.RUNNING not in states and len(states) < 500
    assert out.startswith("Study s: ")


_DATABASE_READ_INTERRUPTED = """
import sqlite3, sys
import optuna, sqlalchemy
from fairtune._interrupts import optimize_guarded

class BrokenCursor:
    def close(self):
        raise sqlite3.ProgrammingError("Cannot operate on a closed database.")

engine = sqlalchemy.create_engine("sqlite://")

def objective(trial):
    with engine.connect() as connection:
        connection._safe_close_cursor(BrokenCursor())  # not the interrupt's doing
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            connection._safe_close_cursor(BrokenCursor())  # the interrupt's doing
            raise

optuna.logging.set_verbosity(optuna.logging.ERROR)
study = optuna.create_study()
guard, run = optimize_guarded(study, objective, n_trials=3)
print(guard.interrupted, [t.state.name for t in run], len(study.trials))
"""


def test_ctrl_c_inside_a_database_read_leaves_no_sqlalchemy_traceback() -> None:
    # Ctrl-C while the objective reads the study's SQLite file makes SQLAlchemy fail to close
    # the cursor and log "Error closing cursor" with a traceback to stderr; the CLI drops that
    # record (it reports the interrupt in one line) and still writes any other one.
    done = subprocess.run([sys.executable, "-c", _DATABASE_READ_INTERRUPTED],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True ['FAIL'] 1"
    assert done.stderr.count("Error closing cursor") == 1, done.stderr
    assert "ProgrammingError" in done.stderr and "KeyboardInterrupt" not in done.stderr


def test_broken_pipe_exits_quietly() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "fairtune.cli", "datasets"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before the table is written (`| head -0`)
    with process.stderr:
        err = process.stderr.read().decode()
    process.wait()
    assert process.returncode == 141 and err == ""


def test_one_class_models_are_flagged_and_rates_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sklearn.dummy import DummyClassifier

    from fairtune.tuning import spaces

    def constant(trial: optuna.Trial) -> DummyClassifier:
        return DummyClassifier(strategy=trial.suggest_categorical("strategy", ["most_frequent"]))

    monkeypatch.setitem(spaces.SPACES, "constant", spaces.Space("constant", constant))
    args = _tune(tmp_path, n_trials=2)
    args[args.index("random_forest")] = "constant"
    assert main(args) == 0
    out = capsys.readouterr().out
    assert ("Warning: trial #0 predicts one class (1) for everyone: its accuracy is that of a "
            "constant guess") in out
    assert "(2 of 2 complete trials do so)" in out
    assert main(["report", "--storage", f"sqlite:///{tmp_path / 'ft.db'}"]) == 0
    assert "predicts one class (1) for everyone" in capsys.readouterr().out


def test_pareto_report_marks_the_trials_that_predict_one_class(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sklearn.dummy import DummyClassifier
    from sklearn.linear_model import LogisticRegression

    from fairtune.tuning import spaces

    def constant_or_linear(trial: optuna.Trial) -> DummyClassifier | LogisticRegression:
        if trial.suggest_categorical("kind", ["constant", "linear"]) == "constant":
            return DummyClassifier(strategy="most_frequent")
        return LogisticRegression(C=trial.suggest_float("C", 1e-3, 1e3, log=True), max_iter=500)

    monkeypatch.setitem(spaces.SPACES, "mixed", spaces.Space("mixed", constant_or_linear))
    storage = f"sqlite:///{tmp_path / 'mo.db'}"
    args = ["tune", "--dataset", "german", "--model", "mixed", "--objectives",
            "accuracy,demographic_parity", "--sampler", "random", "--n-trials", "8", "--seed", "0",
            "--no-progress", "--storage", storage, "--study-name", "mo"]
    assert main(args) == 0
    out = capsys.readouterr().out
    study = optuna.load_study(study_name="mo", storage=storage)
    constant = [t for t in study.trials if t.params["kind"] == "constant"]
    front = study.best_trials
    assert constant and any(t.params["kind"] == "constant" for t in front)
    for t in front:
        line = next(line for line in out.splitlines() if line.startswith(f"#{t.number} "))
        assert ("predicts 1 for everyone" in line) == (t.params["kind"] == "constant"), line
    assert f"{len(constant)} of 8 complete trials predict one class for everyone" in out
    assert main(["report", "--storage", storage]) == 0
    assert "predicts 1 for everyone" in capsys.readouterr().out


def test_a_limit_that_cannot_bind_is_a_one_line_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _tune(tmp_path, n_trials=1)
    args[args.index("demographic_parity<=0.1")] = "dsp<=2"
    assert main(args) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "--limit" in line]
    assert lines == [
        "fairtune: warning: --limit: demographic_parity<=2 holds for every model "
        "(demographic_parity lies in [0, 1]), so it does not constrain the study; did you mean "
        "a smaller bound?"
    ]


def test_report_names_the_running_trials_and_their_age(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import datetime

    assert main(_tune(tmp_path, n_trials=2)) == 0
    url = f"sqlite:///{tmp_path / 'ft.db'}"
    study = optuna.load_study(study_name="s", storage=url)
    template = optuna.trial.create_trial(state=TrialState.RUNNING)
    template.datetime_start = datetime.datetime.now() - datetime.timedelta(minutes=5)
    study._storage.create_new_trial(study._study_id, template_trial=template)
    capsys.readouterr()
    assert main(["report", "--storage", url]) == 0
    out = capsys.readouterr().out
    assert "Study s: 3 trials, 2 complete" in out
    assert re.search(r"Running     #2 \(started [45] min ago\): still in progress, or their "
                     r"worker died", out), out


def test_report_of_a_tenant_study_is_by_tenant_and_each_names_its_own_best(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.test_report import tenant_study

    url = f"sqlite:///{tmp_path / 'shared.db'}"
    tenant_study(url)  # a's best is #0 (0.95), b's own #3 (0.61): their values are not comparable
    assert main(["report", "--storage", url]) == 0
    out = capsys.readouterr().out
    assert "Study shared: 5 trials of 2 tenants" in out and "Best fair trial" not in out
    assert re.search(r"\na +2 +0 +1 +#0 0\.9500 ", out) and re.search(r"\nb +3 +0 +2 +#3 ", out)
    page, plot, curve = tmp_path / "b.html", tmp_path / "b.png", tmp_path / "c.png"
    assert main(["report", "--storage", url, "--tenant", "b", "--html", str(page),
                 "--plot", str(plot), "--curve", str(curve)]) == 0
    out = capsys.readouterr().out
    assert "Tenant b: 3 trials" in out and "Best fair trial: #3\n" in out
    assert "Best fair trial: #0" not in out and plot.exists() and curve.exists()
    html = page.read_text(encoding="utf-8")
    assert "<h2>Tenant b</h2>" in html and "<h2>Tenant a</h2>" not in html
    assert "Best fair trial: #3</h3>" in html and html.count("data:image/png;base64,") == 2
    # A plot draws one tenant's trials; a tenant must be one of the study's.
    assert main(["report", "--storage", url, "--plot", str(plot)]) == 2
    assert ("the plots of study 'shared' draw one tenant's trials (its tenants ['a', 'b'] "
            "score on their own data, so their values are not comparable): give --tenant."
            ) in capsys.readouterr().err
    assert main(["report", "--storage", url, "--tenant", "c"]) == 2
    assert ("--tenant must be one of ['a', 'b'] (the tenants of study 'shared'), but got "
            "--tenant 'c'.") in capsys.readouterr().err
    assert main(_tune(tmp_path, n_trials=1)) == 0
    capsys.readouterr()
    assert main(["report", "--storage", f"sqlite:///{tmp_path / 'ft.db'}", "--tenant", "a"]) == 2
    assert ("--tenant must name a tenant of a study shared by tenants, but study 's' has none"
            in capsys.readouterr().err)


def test_report_counts_pruned_trials_and_shows_the_budgets_and_pruner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _tune(tmp_path, "--pruner", "successive_halving", "--budgets", "0.333,1",
                 n_trials=8)
    args[args.index("random_forest")] = "linear"
    assert main(args) == 0
    capsys.readouterr()
    url = f"sqlite:///{tmp_path / 'ft.db'}"
    study = optuna.load_study(study_name="s", storage=url)
    pruned = sum(t.state == TrialState.PRUNED for t in study.trials)
    assert pruned > 0
    assert main(["report", "--storage", url]) == 0
    out = capsys.readouterr().out
    assert f", {pruned} pruned, " in out.splitlines()[0], out
    assert "Budgets     0.333, 1 (fractions of the training rows)\n" in out
    assert re.search(r"Pruner      (successive_halving|SuccessiveHalvingPruner\(.*\))\n", out), out


def test_an_interrupted_confidence_run_is_reported_with_no_model_certified_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _ctrl_c_in_trial(monkeypatch, 3)  # before the safety test ran
    storage = f"sqlite:///{tmp_path / 'c.db'}"
    where = ["--storage", storage, "--study-name", "c"]
    assert main(["tune", "--dataset", "compas", "--model", "linear", "--limit",
                 "demographic_parity<=0.2", "--confidence", "0.9", "--n-trials", "10",
                 "--no-progress", *where]) == 130
    capsys.readouterr()
    page = tmp_path / "c.html"
    assert main(["report", *where, "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "No model is certified yet: with confidence only a certified model" in out
    html = page.read_text()
    assert "Deploy trial" not in html and "No model is certified yet" in html
    assert re.search(r"The candidate: trial #\d+, the best fair trial", html)
