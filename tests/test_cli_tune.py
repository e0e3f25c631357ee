from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from fairtune.cli import main


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


def test_resuming_with_another_metric_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_tune(tmp_path, n_trials=1)) == 0
    capsys.readouterr()
    assert main(_tune(tmp_path, "--metric", "f1", n_trials=1)) == 1
    err = capsys.readouterr().err
    assert "maximizes 'accuracy', but this run asks for 'f1'; use the same --metric" in err
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}")
    assert len(study.trials) == 1  # nothing was added under the other metric


def test_cv_and_test_split_are_reported_and_resuming_with_another_protocol_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_tune(tmp_path, "--cv", "3", "--test-size", "0.25", n_trials=4)) == 0
    out = capsys.readouterr().out
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}")
    assert study.user_attrs["fairtune:validation"] == (
        "3-fold cross-validation, 0.25 held out for testing, split seed 0"
    )
    assert any(all(v <= 0 for v in t.constraints.values()) for t in study.trials)
    lines = [line for line in out.splitlines() if line.startswith("Test split")]
    assert len(lines) == 1  # with cv there is no single validated model to report
    line = lines[0]
    assert line.startswith("Test split (250 rows), best fair trial refitted on the other rows: accuracy ")
    assert "demographic_parity" in line and "equal_opportunity" in line
    assert line.endswith("meets every limit.") or "violates demographic_parity<=0.05" in line
    # The same protocol resumes; another one (a holdout split, another seed) is refused.
    assert main(_tune(tmp_path, "--cv", "3", "--test-size", "0.25", n_trials=1)) == 0
    capsys.readouterr()
    assert main(_tune(tmp_path, "--test-size", "0.25", n_trials=1)) == 1
    err = capsys.readouterr().err
    assert "was validated with '3-fold cross-validation" in err and "use the same --cv" in err
    args = _tune(tmp_path, "--cv", "3", "--test-size", "0.25", n_trials=1)
    args[args.index("--seed") + 1] = "1"
    assert main(args) == 1
    assert len(optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'ft.db'}").trials) == 5


def test_holdout_with_a_test_split_reports_the_refitted_and_the_validated_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_tune(tmp_path, "--test-size", "0.2", n_trials=3)) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Test split")]
    assert [line.split(":")[0] for line in lines] == [
        "Test split (200 rows), best fair trial refitted on the other rows",
        "Test split (200 rows), the validated model (training split only)",
    ]


def test_bad_cv_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_tune(tmp_path, "--cv", "1", n_trials=1)) == 1
    assert "`cv` must be None or an integer >= 2, but got cv=1." in capsys.readouterr().err


def test_tune_via_subprocess(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fairtune.cli", *_tune(tmp_path, n_trials=2)[:-4], "--sampler", "random"],
        capture_output=True, text=True, env={"MPLBACKEND": "Agg", "PATH": "", "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr
    # Without --storage and --study-name: an in-memory study named dataset-model-sampler.
    assert "Study german-random_forest-random: 2 trials" in result.stdout


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        (["tune", "--dataset", "mnist", "--model", "random_forest", "--limit", "dsp<=0.1"], 1, "`dataset` must be one of"),
        (["tune", "--dataset", "german", "--model", "svm", "--limit", "dsp<=0.1"], 1, "`model` must be one of"),
        (["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<0.1"], 1, "`limits` must be strings like"),
        (["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.1", "--sampler", "bo"], 2, "invalid choice: 'bo'"),
        (["tune", "--dataset", "german", "--model", "linear"], 2, "--limit"),
        (["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.1", "--n-trials", "0"], 1, "--n-trials"),
        (["report", "--storage", "sqlite:///:memory:", "--study-name", "nope"], 1, "no study named 'nope'"),
        # Checked before any trial runs, so that a long study is not lost to a typo in the path.
        (["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.1", "--plot", "/no/such/dir/t.png"], 1, "--plot must be a file in an existing folder"),
        (["report", "--storage", "sqlite:///:memory:", "--plot", "/no/such/dir/t.png"], 1, "--plot must be a file in an existing folder"),
    ],
)
def test_bad_input_fails_with_one_line(argv: list[str], code: int, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("fairtune: error:")
    assert needle in err


@pytest.mark.parametrize("failures", [2, 5])
def test_workers_racing_to_create_the_study_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    failures: int,
) -> None:
    # Processes started together on a new database race to create its tables: the losers get
    # a unique-constraint error although the study then exists, and must load it instead.
    from sqlalchemy.exc import IntegrityError

    import fairtune.cli as cli

    create = optuna.create_study
    calls: list[int] = []

    def racing(*args: object, **kwargs: object) -> optuna.Study:
        calls.append(1)
        if len(calls) <= failures:
            raise IntegrityError("INSERT INTO alembic_version", {}, Exception("UNIQUE constraint"))
        return create(*args, **kwargs)

    monkeypatch.setattr(optuna, "create_study", racing)
    monkeypatch.setattr(cli.time, "sleep", lambda seconds: None)
    code = main(_tune(tmp_path, n_trials=1))
    if failures < cli._CREATE_ATTEMPTS:
        assert code == 0 and len(calls) == failures + 1
    else:  # a database that keeps failing is reported, not retried for ever
        assert code == 1 and len(calls) == cli._CREATE_ATTEMPTS
        assert "UNIQUE constraint" in capsys.readouterr().err


@pytest.mark.parametrize("sampler", ["fairbo", "gp", "random"])
def test_workers_with_one_seed_draw_different_random_trials(tmp_path: Path, sampler: str) -> None:
    # The same command in two terminals: one --seed, one storage. An ordinary seeded random
    # startup would give both workers the same first trials; draws seeded by trial number do not.
    from fairtune.cli import _make_sampler

    url = f"sqlite:///{tmp_path / 'w.db'}"
    dist = {"x": optuna.distributions.FloatDistribution(0.0, 1.0),
            "k": optuna.distributions.CategoricalDistribution(list(range(50)))}
    one = optuna.create_study(study_name="s", storage=url, sampler=_make_sampler(sampler, 0))
    two = optuna.load_study(study_name="s", storage=url, sampler=_make_sampler(sampler, 0))
    points = [(t.params["x"], t.params["k"]) for t in (one.ask(dist), two.ask(dist))]
    assert points[0] != points[1]
    # Still reproducible: a new study with the same seed draws the same first trial.
    again = optuna.create_study(sampler=_make_sampler(sampler, 0)).ask(dist)
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
    assert main(["report", "--storage", storage]) == 0
    assert "Pareto-optimal trials" in capsys.readouterr().out
    # Other objectives on the same study are refused; a single-objective run needs --limit.
    assert main([*args[:6], "accuracy,equal_opportunity", *args[7:]]) != 0
    assert "objectives" in capsys.readouterr().err
    assert main(["tune", "--dataset", "german", "--model", "linear", "--n-trials", "1"]) != 0
    assert "--limit is required" in capsys.readouterr().err
