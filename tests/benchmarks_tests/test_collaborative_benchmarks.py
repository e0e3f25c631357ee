"""The collaborative (fair regret) benchmark runs end to end on tiny settings and summarizes."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tests._scripts import read_rows as _rows
from tests._scripts import run_benchmark as _run


def test_collaborative_hartmann_runs_resumes_and_summarizes(tmp_path: Path) -> None:
    args = ("hartmann", "--rhos", "0.5", "--seeds", "1", "--rounds", "3", "--startup", "2",
            "--out", "c.csv")
    out = _run(tmp_path, "collaborative_fair_regret.py", *args)
    assert "| CollaborativeUCBSampler, rho = 0.5 |" in out
    assert "| the same tenants tuning alone (a GP-UCB each) |" in out
    assert " nan" not in out and "np.float64" not in out
    rows = _rows(tmp_path / "c.csv")
    assert [(r["method"], r["seed"]) for r in rows] == [("rho=0.5", "0"), ("independent", "0")]
    # The inequality is compared with the tenants alone seed by seed (1 seed here).
    (row,) = [line for line in out.splitlines() if "rho = 0.5 |" in line]
    lower = float(rows[0]["inequality"]) < float(rows[1]["inequality"])
    assert f"| {int(lower)} / " in row and "(p = 1.000)" in row
    # A second run with a second seed runs seed 1 only; --summarize prints the tables alone.
    _run(tmp_path, "collaborative_fair_regret.py", *args[:4], "2", *args[5:])
    assert [r["seed"] for r in _rows(tmp_path / "c.csv")] == ["0", "0", "1", "1"]
    summary = _run(tmp_path, "collaborative_fair_regret.py", "hartmann", "--summarize",
                   "--out", "c.csv", "--plot", "c.png")
    assert "| 2 |" in summary and (tmp_path / "c.png").stat().st_size > 0


def test_collaborative_femnist_runs_in_pieces_and_summarizes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ("femnist", "--rhos", "0.5", "1", "--rounds", "1", "--startup", "1", "--epochs", "1",
            "--out", "f.csv")
    _run(tmp_path, "collaborative_fair_regret.py", *args, "--seeds", "1")
    rows = _rows(tmp_path / "f.csv")
    # rho = 0.5 in both settings; rho = 1 once (c1 scaling is 1 there).
    assert [(r["setting"], r["rho"], r["seed"]) for r in rows] == [
        ("fixed c1", "0.5", "0"), ("varying c1", "0.5", "0"), ("both", "1", "0")]
    for r in rows:
        # One round of 10 accuracies: R_T/n = 1 - mean accuracy, S_T >= R_T/n.
        assert r["data"] == "digits" and 0.0 <= float(r["R_T/n"]) <= 1.0
        assert float(r["S_T"]) >= float(r["R_T/n"]) - 1e-9 and float(r["inequality"]) >= 0
    # A second piece (seed 1) appends; the rows already there are not run again.
    out = _run(tmp_path, "collaborative_fair_regret.py", *args, "--seeds", "2")
    assert [r["seed"] for r in _rows(tmp_path / "f.csv")] == ["0"] * 3 + ["1"] * 3
    # One row per rho; rho = 0.5 is compared with rho = 1 seed by seed (2 seeds), per setting.
    lines = [line for line in out.splitlines() if line.startswith(("| 1 |", "| 0.5 |"))]
    assert len(lines) == 2 and all(line.endswith("| 2 |") for line in lines)
    assert lines[1].count("(p = ") == 2 and "(p = " not in lines[0] and " nan" not in out
    # --summarize prints the same tables from the CSV alone.
    module = importlib.import_module("benchmarks.collaborative_fair_regret")
    module.summarize_femnist(_rows(tmp_path / "f.csv"), None)
    summary = capsys.readouterr().out
    assert summary.strip().splitlines()[-5:] == out.strip().splitlines()[-5:]
