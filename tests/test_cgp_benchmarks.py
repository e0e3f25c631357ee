"""The CGP benchmark scripts run end to end on tiny settings (their real runs are in the README)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
import pytest

from tests._scripts import run_script

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _run(tmp_path: Path, script: str, *args: str) -> str:
    return run_script(BENCHMARKS / script, *args, cwd=tmp_path)


def test_cgp_paper_runs_every_kind_of_method_and_summarizes(tmp_path: Path) -> None:
    _run(tmp_path, "cgp_paper.py", "fig3", "--functions", "hartmann6", "--methods", "CGP-UCB",
         "UCB", "FTS", "FTS-DE", "--n-agents", "4", "--rounds", "2", "--reps", "0", "--n-init", "3",
         "--n-raw-samples", "200", "--out", "f.csv")
    with open(tmp_path / "f.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    # Rounds 0 (after the initial designs), 1 and 2, for 4 agents and 4 methods.
    assert len(rows) == 3 * 4 * 4
    for row in rows:
        assert float(row["gap"]) >= -1e-9 and float(row["regret"]) >= -0.5
    first = {(r["method"], r["agent"]): r["gap"] for r in rows if r["round"] == "0"}
    # Every method but FTS-DE starts from the same collaborative Latin hypercube.
    assert all(first[("CGP-UCB", a)] == first[("UCB", a)] == first[("FTS", a)]
               for a in "0123")
    # The paper's gap (at argmax of the posterior mean) at round 0 and at the last round only
    # (--rec-every defaults to 10), never below 0.
    assert {r["round"] for r in rows if r["rec_gap"] != ""} == {"0", "2"}
    assert all(float(r["rec_gap"]) >= -1e-9 for r in rows if r["rec_gap"] != "")
    for agent in "0123":  # the gap never grows: it is the best design so far
        gaps = [float(r["gap"]) for r in rows if r["method"] == "CGP-UCB" and r["agent"] == agent]
        assert gaps == sorted(gaps, reverse=True)
    out = _run(tmp_path, "cgp_paper.py", "summarize", "f.csv", "--plot", "f.png")
    assert "| CGP-UCB |" in out and "| FTS-DE |" in out and "round 2, 1 reps" in out
    assert (tmp_path / "f.png").stat().st_size > 0
    gap = {m: sum(float(r["gap"]) for r in rows if r["method"] == m and r["round"] == "2") / 4
           for m in ("CGP-UCB", "UCB", "FTS-DE")}
    assert (f"CGP-UCB below UCB in {int(gap['CGP-UCB'] < gap['UCB'])} of 1 (sign test "
            f"p = 1.000); CGP-UCB below FTS-DE in {int(gap['CGP-UCB'] < gap['FTS-DE'])} of 1 "
            "(sign test p = 1.000)") in out
    # --metric rec_gap: the same tables on the paper's gap.
    paper = _run(tmp_path, "cgp_paper.py", "summarize", "f.csv", "--metric", "rec_gap")
    rec = sum(float(r["rec_gap"]) for r in rows if r["method"] == "UCB" and r["round"] == "2") / 4
    assert "argmax of the posterior mean" in paper and f"| UCB | {rec:.3f} |" in paper
    # --round: the tables at an earlier round, from the same rows.
    early = _run(tmp_path, "cgp_paper.py", "summarize", "f.csv", "--round", "1")
    assert "round 1, 1 reps" in early and "round 2" not in early
    ucb1 = [float(r["gap"]) for r in rows if r["method"] == "UCB" and r["round"] == "1"]
    assert f"| UCB | {sum(ucb1) / 4:.3f} |" in early
    # --override: its runs replace the same method's rows; the other methods stay.
    _run(tmp_path, "cgp_paper.py", "fig3", "--functions", "hartmann6", "--methods", "CGP-UCB",
         "--n-agents", "4", "--rounds", "2", "--reps", "0", "--n-init", "3",
         "--n-raw-samples", "50", "--out", "o.csv")
    with open(tmp_path / "o.csv", newline="") as f:
        other = [r for r in csv.DictReader(f) if r["round"] == "2"]
    mixed = _run(tmp_path, "cgp_paper.py", "summarize", "f.csv", "--override", "o.csv")
    new_gap = sum(float(r["gap"]) for r in other) / 4
    assert f"{new_gap:.3f}" != f"{gap['CGP-UCB']:.3f}"  # S_raw changed the run
    assert f"| CGP-UCB | {new_gap:.3f} |" in mixed
    assert f"| UCB | {gap['UCB']:.3f} |" in mixed and f"| FTS-DE | {gap['FTS-DE']:.3f} |" in mixed
    assert "round 2, 1 reps" in mixed and mixed.count("| CGP-UCB |") == 1
    # Several CSVs are pooled (more replications run later); --override replaces the same
    # replications only.
    _run(tmp_path, "cgp_paper.py", "fig3", "--functions", "hartmann6", "--methods", "CGP-UCB",
         "UCB", "--n-agents", "4", "--rounds", "2", "--reps", "1", "--n-init", "3",
         "--n-raw-samples", "200", "--out", "g.csv")
    with open(tmp_path / "g.csv", newline="") as f:
        rep1 = [r for r in csv.DictReader(f) if r["round"] == "2"]
    pooled = _run(tmp_path, "cgp_paper.py", "summarize", "f.csv", "g.csv", "--override", "o.csv")
    cgp_ucb = (sum(float(r["gap"]) for r in other)
               + sum(float(r["gap"]) for r in rep1 if r["method"] == "CGP-UCB")) / 8
    assert "round 2, 2 reps" in pooled and f"| CGP-UCB | {cgp_ucb:.3f} |" in pooled
    assert "CGP-UCB below UCB in" in pooled and " of 2 (sign test p = " in pooled


def test_posterior_mean_maximizer_finds_the_peak_of_a_smooth_function() -> None:
    import optuna

    sys.path.insert(0, str(BENCHMARKS))
    try:
        import cgp_paper
    finally:
        sys.path.remove(str(BENCHMARKS))
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(lambda t: -(t.suggest_float("a", 0, 1) - 0.3) ** 2
                   - (t.suggest_float("b", 0, 1) - 0.7) ** 2, n_trials=25)
    best = max(study.trials, key=lambda t: t.value).params
    x = cgp_paper.posterior_mean_maximizer(study, ["a", "b"], seed=0)
    # Closer to the peak (0.3, 0.7) than the best of the 25 random trials.
    assert np.abs(x - [0.3, 0.7]).max() < 0.03
    assert np.linalg.norm(x - [0.3, 0.7]) < np.linalg.norm([best["a"] - 0.3, best["b"] - 0.7])
    with pytest.raises(ValueError, match="no rec_gap column"):
        path = BENCHMARKS / "results" / "cgp_fig3.csv"
        cgp_paper.summarize(path, None, metric="rec_gap")


def test_cgp_speed_runs(tmp_path: Path) -> None:
    out = _run(tmp_path, "cgp_speed.py", "--acquisitions", "ucb", "--raw-samples", "100",
               "--agents", "4", "8", "--repeats", "1", "--out", "s.csv")
    # Measured at default thread settings and pinned, each in its own process.
    for label in ("default (no variable set)", "OMP_NUM_THREADS=1"):
        lines = [line for line in out.splitlines() if line.startswith(f"| {label} | ucb |")]
        assert len(lines) == 3  # 4 agents with both kinds of peers' designs, then 8 agents
        assert all(line.split("|")[6].strip() == "3" for line in lines)  # 3 borrowed designs
        kept = [float(line.split("|")[7]) for line in lines if "near its kappa" in line]
        assert kept and all(k >= 1 for k in kept)  # designs next to its own optimum are kept
    assert (tmp_path / "s_default.csv").exists() and (tmp_path / "s_pinned.csv").exists()


def test_hetero_yardstick_is_ucb_alone_with_another_seed(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import cgp_paper
    finally:
        sys.path.remove(str(BENCHMARKS))
    kwargs = {"radius_factor": 5.0, "n_init": 3}
    ucb = cgp_paper.run("hartmann6", "UCB", 0, 3, 2, **kwargs)
    other = cgp_paper.run("hartmann6", cgp_paper.CONTROL, 0, 3, 2, **kwargs)
    # Same agents, shifts and initial designs (round 0), chosen by a differently seeded UCB.
    assert [r["gap"] for r in ucb if r["round"] == 0] == [
        r["gap"] for r in other if r["round"] == 0]
    assert [r["regret"] for r in ucb if r["round"] > 0] != [
        r["regret"] for r in other if r["round"] > 0]
    path = tmp_path / "h.csv"
    cgp_paper._append(path, ucb + other + cgp_paper.run("hartmann6", "CGP-UCB", 0, 3, 2,
                                                        n_raw_samples=200, **kwargs))
    out = cgp_paper.summarize(path, None)
    assert "paired CGP-UCB gap - UCB gap over 3 agent x rep pairs" in out
    assert f"paired {cgp_paper.CONTROL} gap - UCB gap over 3 agent x rep pairs" in out
    # The same rows appended in two pieces to a gzip-compressed CSV summarize the same.
    gz = tmp_path / "h.csv.gz"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    cgp_paper._append(gz, rows[:5])
    cgp_paper._append(gz, rows[5:])
    assert gz.read_bytes()[:2] == b"\x1f\x8b"
    assert cgp_paper.summarize(gz, None) == out


def test_cgp_diagnose_counts_leaders_and_kept_designs(tmp_path: Path) -> None:
    out = _run(tmp_path, "cgp_diagnose.py", "--function", "hartmann6", "--rounds", "2",
               "--n-agents", "4", "--n-init", "3")
    assert "agent-rounds with a kept design:" in out
    total = int(out.split("agent-rounds with a kept design:")[1].split("of")[1].split()[0])
    assert total == 4 * 2  # every agent in each of the 2 rounds after its initial designs
