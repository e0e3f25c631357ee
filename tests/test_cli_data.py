"""``fairtune tune --data FILE``: a user's own CSV or parquet file from the command line, and
:func:`fairtune.datasets.read_table` under it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest

from fairtune.cli import main
from fairtune.datasets import read_table
from fairtune.tuning import FairObjective


def _applicants(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """Applicants with an income that depends on gender and a decision that depends on it."""
    rng = np.random.default_rng(seed)
    gender = rng.choice(["female", "male"], n)
    income = rng.normal(50, 15, n) + np.where(gender == "male", 6, 0)
    age = rng.integers(20, 65, n)
    score = 0.05 * (income - 52) + 0.02 * (age - 42) + rng.normal(0, 1, n)
    return pd.DataFrame({"income": income.round(1), "age": age,
                         "region": rng.choice(["north", "south"], n), "gender": gender,
                         "decision": np.where(score > 0, "approved", "denied")})


def _tune(path: Path, *extra: str, n_trials: int = 3, storage: Path | None = None) -> list[str]:
    args = ["tune", "--data", str(path), "--target", "decision", "--sensitive", "gender",
            "--positive", "approved", "--model", "linear", "--limit", "demographic_parity<=0.1",
            "--n-trials", str(n_trials), "--no-progress", *extra]
    if storage is not None:
        args += ["--storage", f"sqlite:///{storage}", "--study-name", "own"]
    return args


def test_a_csv_is_tuned_resumed_reported_and_another_file_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "applicants.csv"
    _applicants().to_csv(csv, index=False)
    db = tmp_path / "ft.db"
    assert main(_tune(csv, "--mitigation", "threshold", "--test-size", "0.25", storage=db)) == 0
    out = capsys.readouterr().out
    study = optuna.load_study(study_name="own", storage=f"sqlite:///{db}")
    # The study records the file: its name, row count and the start of its checksum.
    dataset = study.user_attrs["fairtune:setup"]["dataset"]
    assert dataset.startswith("applicants.csv, 400 rows, sha256 ") and "(sensitive: gender)" in dataset
    assert f"Dataset     {dataset}" in out and "group female" in out and "group male" in out
    assert "Test split (100 rows)" in out
    # The favourable outcome is "approved": the positive rate counts approvals.
    approved = (_applicants()["decision"] == "approved").mean()
    first = study.trials[0]
    assert abs(first.user_attrs["fairtune:positive_rate"] - approved) < 0.25
    # The same file resumes the study.
    assert main(_tune(csv, "--mitigation", "threshold", "--test-size", "0.25", n_trials=2,
                      storage=db)) == 0
    assert len(optuna.load_study(study_name="own", storage=f"sqlite:///{db}").trials) == 5
    # Another file (one row less) is refused, naming the flag and both files.
    other = tmp_path / "other.csv"
    _applicants().iloc[1:].to_csv(other, index=False)
    capsys.readouterr()
    assert main(_tune(other, "--mitigation", "threshold", "--test-size", "0.25",
                      storage=db)) == 2
    err = capsys.readouterr().err
    assert "was tuned with --data 'applicants.csv, 400 rows" in err
    assert "but this run asks for 'other.csv, 399 rows" in err and "another --study-name" in err
    assert len(optuna.load_study(study_name="own", storage=f"sqlite:///{db}").trials) == 5
    # `report` reads the stored study.
    assert main(["report", "--storage", f"sqlite:///{db}"]) == 0
    out = capsys.readouterr().out  # the favourable outcome a positive rate counts
    assert f"Dataset     {dataset}\nFavourable  decision = approved\n" in out


def test_a_parquet_file_and_several_sensitive_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "applicants.parquet"
    _applicants().to_parquet(path)
    argv = _tune(path, "--hide-sensitive", "--drop-columns", "region")
    argv[argv.index("gender")] = "gender,region"
    argv.remove("--drop-columns")
    argv.remove("region")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "(sensitive: gender, region, hidden from the model)" in out
    assert "group female, north" in out


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("fairtune: error: ")
    return err


@pytest.mark.parametrize(("change", "needle"), [
    (lambda f: f.drop(columns="decision"),
     "--target must name a column of the file, but got --target 'decision': no column "
     "['decision']"),
    (lambda f: f.drop(columns="gender"), "--sensitive must name a column of the file"),
    (lambda f: f.assign(decision=f["decision"].where(f.index != 3)),
     "--target columns must have a value in every row, but"),
    (lambda f: f.assign(gender=f["gender"].where(f.index % 50 != 0)),
     "--sensitive columns must have a value in every row"),
    (lambda f: f.assign(gender=np.where(f.index < 1, "other", f["gender"])),
     "--data sensitive features gives the group 'other' 0 rows in the validation split; the "
     "limit demographic_parity<=0.1 needs at least 11 rows of each group there"),
])
def test_a_file_the_search_cannot_use_is_refused_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change, needle: str
) -> None:
    path = tmp_path / "applicants.csv"
    change(_applicants()).to_csv(path, index=False)
    err = _error(_tune(path), capsys)
    assert needle in err, err


def test_labels_without_a_known_favourable_value_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "applicants.csv"
    frame = _applicants()
    frame.to_csv(path, index=False)
    argv = _tune(path)
    i = argv.index("--positive")
    del argv[i:i + 2]
    err = _error(argv, capsys)
    assert ("--target 'decision' has the values ['approved', 'denied']: name the favourable "
            "one with --positive") in err
    # Three values need --positive, which then sets one against the others.
    frame.loc[:9, "decision"] = "pending"
    frame.to_csv(path, index=False)
    err = _error(argv, capsys)
    assert "--target 'decision' must have two values" in err and "but it has 3" in err
    assert main(_tune(path)) == 0
    capsys.readouterr()
    # A --positive that is not one of the values.
    argv = _tune(path)
    argv[argv.index("approved")] = "Approved"
    assert "--positive must be one of the values of --target 'decision'" in _error(argv, capsys)


def test_unreadable_and_unsupported_files_and_misused_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.csv"
    broken.write_text('a,b\n1,2\n"x,3\n')
    assert "--data '" in (err := _error(_tune(broken), capsys)) and "could not be read as csv" in err
    assert "--data must be a file ending in one of ['.csv', '.csv.gz', '.parquet', '.pq'], but " \
           "got" in _error(_tune(tmp_path / "applicants.xlsx"), capsys)
    assert "(no such file)" in _error(_tune(tmp_path / "missing.csv"), capsys)
    path = tmp_path / "applicants.csv"
    _applicants().to_csv(path, index=False)
    argv = _tune(path)
    del argv[argv.index("--target"):argv.index("--target") + 2]
    assert "--data needs --target" in _error(argv, capsys)
    argv = ["tune", "--dataset", "german", "--target", "credit", "--model", "linear",
            "--limit", "dsp<=0.1"]
    assert "--target describe the columns of --data FILE" in _error(argv, capsys)
    argv = [*_tune(path), "--dataset", "german"]
    assert "not allowed with argument" in _error(argv, capsys)


def test_read_table_keeps_the_callers_values_and_records_the_file(tmp_path: Path) -> None:
    path = tmp_path / "applicants.csv"
    frame = _applicants()
    frame.to_csv(path, index=False)
    data = read_table(path, target="decision", sensitive=["gender", "region"],
                      positive="approved")
    assert data.target.tolist() == (frame["decision"] == "approved").astype(int).tolist()
    assert list(data.data.columns) == ["income", "age", "region", "gender"]  # not the target
    assert isinstance(data.sensitive_features, pd.DataFrame)
    assert data.data["region"].dtype == "category"
    assert data.name.startswith("applicants.csv, 400 rows, sha256 ")
    # 0/1 targets need no positive value; 1 is the favourable outcome.
    frame.assign(decision=(frame["decision"] == "approved").astype(int)).to_csv(path, index=False)
    zero_one = read_table(path, target="decision", sensitive="gender")
    assert zero_one.target.sum() == (frame["decision"] == "approved").sum()
    assert zero_one["favourable"] == 1  # what the study's setup and report name
    with pytest.raises(ValueError, match="`sensitive` must not include the `target` column"):
        read_table(path, target="decision", sensitive="decision")


def test_a_file_written_with_comma_space_separators_is_read_as_the_user_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its lines are "decision, gender, ...": read without the space after each comma, names
    # and values alike; either spelling names a column and the favourable value.
    frame = _applicants(400)
    path = tmp_path / "spaced.csv"
    path.write_text(", ".join(frame.columns) + "\n" + "\n".join(
        ", ".join(str(v) for v in row) for row in frame.itertuples(index=False)) + "\n")
    for sensitive, positive in (("gender", "approved"), (" gender", " approved")):
        data = read_table(path, target="decision", sensitive=sensitive, positive=positive)
        assert data.sensitive_features.name == "gender"
        assert set(data.sensitive_features) == {"female", "male"}
        assert set(data.data["region"].cat.categories) == {"north", "south"}
        assert int(data.target.sum()) == int((frame["decision"] == "approved").sum())
    for spaced in ("", " "):
        assert main(["tune", "--data", str(path), "--target", f"{spaced}decision",
                     "--sensitive", f"{spaced}gender", "--positive", f"{spaced}approved",
                     "--model", "linear", "--limit", "demographic_parity<=0.2", "--n-trials",
                     "1", "--no-progress"]) == 0


def test_a_file_whose_columns_were_reordered_is_refused_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "applicants.csv"
    frame = _applicants(200)
    frame.to_csv(path, index=False)
    db = tmp_path / "ft.db"
    assert main(_tune(path, n_trials=1, storage=db)) == 0
    frame[list(reversed(frame.columns))].to_csv(path, index=False)
    err = _error(_tune(path, n_trials=1, storage=db), capsys)
    assert "was tuned with --data 'applicants.csv" in err
    assert "use the same --data as before" in err


def test_the_same_rows_under_another_file_name_or_drop_order_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The data are what the trials were scored on: a copy of the file under another name,
    or the same columns dropped in another order, resumes; another value does not."""
    path, copy = tmp_path / "applicants.csv", tmp_path / "copy.csv"
    frame = _applicants(200)
    frame.to_csv(path, index=False)
    frame.to_csv(copy, index=False)
    db = tmp_path / "ft.db"
    assert main(_tune(path, "--drop-columns", "age,region", n_trials=1, storage=db)) == 0
    assert main(_tune(copy, "--drop-columns", "region,age", n_trials=1, storage=db)) == 0
    assert len(optuna.load_study(study_name="own", storage=f"sqlite:///{db}").trials) == 2
    frame.assign(income=frame["income"] + 1).to_csv(copy, index=False)
    assert "was tuned with --data" in _error(
        _tune(copy, "--drop-columns", "region,age", n_trials=1, storage=db), capsys)


def test_tune_seed_is_the_same_search_as_create_study_with_that_random_state(
    tmp_path: Path
) -> None:
    # --seed seeds the splits and the sampler; FairObjective's random_state seeds the splits,
    # and create_study's sampler seed defaults to it.
    path = tmp_path / "applicants.csv"
    _applicants(200).to_csv(path, index=False)
    db = tmp_path / "ft.db"
    assert main(_tune(path, "--seed", "3", storage=db)) == 0
    shell = optuna.load_study(study_name="own", storage=f"sqlite:///{db}").trials
    data = read_table(path, target="decision", sensitive="gender", positive="approved")
    objective = FairObjective(data, "linear", limits="demographic_parity<=0.1", random_state=3)
    study = objective.create_study()
    study.optimize(objective, n_trials=3)
    assert [t.params for t in study.trials] == [t.params for t in shell]
    assert [t.value for t in study.trials] == [t.value for t in shell]
