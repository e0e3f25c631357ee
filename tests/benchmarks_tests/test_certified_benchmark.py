"""benchmarks/certified.py on a tiny table: every method is run and scored against the
population, a refusal deploys nothing, and the summary and the figure are written."""

from __future__ import annotations

import csv
from pathlib import Path


from benchmarks import certified


def test_every_method_is_scored_on_the_population_and_summarized(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    population = certified.population(20_000, 7)
    rows = certified.run_one(4_000, "demographic_parity", "linear", 0, 2, population)
    assert [r["method"] for r in rows] == list(certified.METHODS)
    for row in rows:
        if row["refused"]:
            assert "true_gap" not in row
            continue
        assert 0.0 <= row["true_gap"] <= 1.0 and 0.5 < row["accuracy"] < 1.0
        assert row["fair"] == (row["true_gap"] <= certified.LIMIT)
    # The population's group shares and base rates are those the page describes.
    X, y, group = population
    assert abs((group == "A").mean() - 0.35) < 0.01
    assert y[group == "A"].mean() > y[group == "B"].mean()
    path = tmp_path / "c.csv"
    certified.append_rows(path, rows, certified.FIELDS)
    certified.main(["summarize", str(path), "--plot", str(tmp_path / "c.png")])
    out = capsys.readouterr().out
    assert "4,000 rows, demographic_parity <= 0.05" in out
    # 4,000 rows are too few to certify a 0.05 limit at 95 %: refused before any trial.
    assert next(r for r in rows if r["method"] == "certified")["refused"]
    assert (tmp_path / "c.png").stat().st_size > 0
    with open(path, newline="") as f:
        assert len(list(csv.DictReader(f))) == len(certified.METHODS)
