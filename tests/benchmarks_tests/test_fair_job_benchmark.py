"""benchmarks/fair_job.py on one split of German credit: each sampler's search is scored at
every checkpoint on the test split, fair accuracy falls back to the majority class, a resumed
run adds nothing, and the summary pairs FairBOSampler with each other sampler."""

from __future__ import annotations

from pathlib import Path

from benchmarks import fair_job
from benchmarks._common import read_rows


def test_every_sampler_is_scored_at_each_checkpoint_and_summarized(tmp_path: Path,
                                                                   capsys) -> None:
    path = tmp_path / "j.csv"
    command = ["run", "--datasets", "german", "--splits", "1", "--checkpoints", "2", "4",
               "--samplers", "fairbo", "random", "--out", str(path),
               "--studies", str(tmp_path / "studies")]
    fair_job.main(command)
    rows = read_rows(path)
    assert [(r["mitigation"], r["sampler"], r["n_trials"]) for r in rows] == [
        (m, s, k) for m in fair_job.MITIGATIONS for s in ("fairbo", "random") for k in "24"]
    for row in rows:
        assert row["split"] == str(fair_job.FIRST_SPLIT)
        majority = float(row["majority"])
        assert 0.5 <= majority < 1.0
        if row["best_trial"] == "":  # no fair trial yet: the majority class
            assert float(row["fair_accuracy"]) == majority and row["fair"] == "0"
            continue
        assert int(row["best_trial"]) < int(row["n_trials"])
        accuracy, gap = float(row["test_accuracy"]), float(row["test_gap"])
        assert row["fair"] == str(int(gap <= 0.05))
        assert float(row["fair_accuracy"]) == (accuracy if gap <= 0.05 else majority)
    for first, second in zip(rows[::2], rows[1::2], strict=True):  # the same search, later
        assert 0 < float(first["seconds"]) <= float(second["seconds"])
    fair_job.main(command)  # resumed: nothing to add
    assert len(read_rows(path)) == len(rows)
    capsys.readouterr()
    fair_job.main(["summarize", str(path)])
    out = capsys.readouterr().out
    assert "german, mitigation threshold, 4 trials" in out
    assert "| random | 1 |" in out and "/" in out.split("| random | 1 |")[1].splitlines()[0]
    # The page's table: no 10-, 20- or 50-trial checkpoints here, so no row.
    assert fair_job.headline_rows([str(path)]) == []
    # The kept studies: the choice that allows for noise, scored at each spread.
    chosen = tmp_path / "c.csv"
    fair_job.main(["choose", str(tmp_path / "studies"), "--out", str(chosen),
                   "--checkpoints", "2", "4"])
    picks = {(r["mitigation"], r["sampler"], r["n_trials"], r["spread"]): r
             for r in read_rows(chosen)}
    assert len(picks) == len(rows) * len(fair_job.SPREADS)
    for row in rows:
        key = (row["mitigation"], row["sampler"], row["n_trials"])
        best = picks[(*key, "0.0")]
        assert best["valid_accuracy"] == row["valid_accuracy"]  # the best fair trial's value
        for spread in fair_job.SPREADS[1:]:
            pick = picks[(*key, str(spread))]
            assert (pick["trial"] == "") == (best["trial"] == "")
            if pick["trial"]:  # never a larger gap, never a better validation accuracy
                assert abs(float(pick["valid_gap"])) <= abs(float(best["valid_gap"]))
                assert float(pick["valid_accuracy"]) <= float(best["valid_accuracy"])
    fair_job.main(["summarize-choice", str(chosen)])
    assert "| german | threshold | 4 | 2.0 | 2 |" in capsys.readouterr().out
