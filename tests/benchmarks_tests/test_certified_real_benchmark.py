"""benchmarks/certified_real.py on one split of German credit: every method is scored on the
test split, fair accuracy falls back to the majority class, a refusal deploys nothing, a
resumed run adds nothing, and the summary and the figure are written."""

from __future__ import annotations

from pathlib import Path

from benchmarks import certified_real
from benchmarks._common import read_rows

METRICS = ("demographic_parity", "equalized_odds")


def test_every_method_is_scored_on_the_test_split_and_summarized(
    tmp_path: Path, capsys
) -> None:
    path = tmp_path / "c.csv"
    command = ["run", "--datasets", "german", "--model", "linear", "--n-trials", "2",
               "--splits", "0", "--metrics", *METRICS, "--out", str(path)]
    certified_real.main(command)
    rows = read_rows(path)
    for metric in METRICS:
        assert [r["method"] for r in rows if r["metric"] == metric] == list(
            certified_real.METHODS)
    for row in rows:
        assert (row["dataset"], row["model"], row["split"]) == ("german", "linear", "0")
        majority = float(row["majority"])
        assert 0.5 <= majority < 1.0
        if row["refused"] == "True":
            assert row["test_accuracy"] == row["test_gap"] == row["fair"] == ""
            assert float(row["fair_accuracy"]) == majority and row["refusal"]
            continue
        assert row["refused_before_trials"] == "False"
        accuracy, gap = float(row["test_accuracy"]), float(row["test_gap"])
        assert 0.0 <= gap <= 1.0 and 0.5 < accuracy < 1.0
        assert row["fair"] == str(gap <= certified_real.LIMIT)
        expected = accuracy if row["fair"] == "True" else majority
        assert float(row["fair_accuracy"]) == expected
    # 375 safety rows are far too few to certify a 0.05 limit at 95 %: refused before any
    # trial, with the error that says so.
    for row in (r for r in rows if r["method"] == "certified"):
        assert row["refused_before_trials"] == "True" and row["n_trials"] == "0"
        assert "375 safety rows" in row["refusal"]
    certified_real.main(command)  # resumed: every split is done
    assert len(read_rows(path)) == len(rows) == 2 * len(certified_real.METHODS)
    capsys.readouterr()
    certified_real.main(["summarize", str(path), "--plot", str(tmp_path / "c.png")])
    out = capsys.readouterr().out
    for metric in METRICS:
        assert f"german, {metric} <= 0.05, linear (2 trials):" in out
    assert "certified at 95 %, exact test" in out
    assert (tmp_path / "c.png").stat().st_size > 0
