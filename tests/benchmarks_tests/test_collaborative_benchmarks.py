"""The collaborative (fair regret) benchmark runs end to end on tiny settings and summarizes."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tests._scripts import read_rows as _rows, run_benchmark as _run

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize("case", ["hartmann", "hpo"])
def test_collaborative_fair_regret_runs(tmp_path: Path, case: str) -> None:
    out = _run(tmp_path, "collaborative_fair_regret.py", case, "--rhos", "0.5", "--seeds", "1",
               "--rounds", "3", "--startup", "2", "--out", "c.csv")
    assert "| rho=0.5 |" in out and "| independent |" in out
    assert " nan" not in out and "np.float64" not in out


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
    assert "| digits | fixed c1 | 1 |" in out and "| digits | varying c1 | 0.5 |" in out
    # rho = 0.5 is compared with rho = 1 seed by seed (2 seeds).
    assert sum(" / " in line and "(p = " in line for line in out.splitlines()) == 2
    assert out.count("| 2 |") == 4 and " nan" not in out  # 2 settings x 2 rhos, 2 seeds each
    # --summarize prints the same tables from the CSV alone.
    module = importlib.import_module("benchmarks.collaborative_fair_regret")
    module.summarize_femnist(_rows(tmp_path / "f.csv"), None)
    summary = capsys.readouterr().out
    assert summary.strip().splitlines()[-6:] == out.strip().splitlines()[-6:]
