"""The CGP benchmark scripts run end to end on tiny settings (their real runs are in the README)."""

from __future__ import annotations

import csv
import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks._common import append_rows, read_rows
from tests._scripts import run_benchmark

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


_run = run_benchmark


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
    # Several CSVs are pooled (more replications run later).
    _run(tmp_path, "cgp_paper.py", "fig3", "--functions", "hartmann6", "--methods", "CGP-UCB",
         "UCB", "FTS-DE", "--n-agents", "4", "--rounds", "2", "--reps", "1", "--n-init", "3",
         "--n-raw-samples", "200", "--record-every", "2", "--out", "g.csv.gz")
    rep1 = read_rows(tmp_path / "g.csv.gz")
    # --record-every 2: round 0 and the last round only.
    assert {r["round"] for r in rep1} == {"0", "2"}
    pooled = _run(tmp_path, "cgp_paper.py", "summarize", "f.csv", "g.csv.gz")
    cgp_ucb = (sum(float(r["gap"]) for r in rows if r["method"] == "CGP-UCB" and r["round"] == "2")
               + sum(float(r["gap"]) for r in rep1 if r["method"] == "CGP-UCB"
                     and r["round"] == "2")) / 8
    assert "round 2, 2 reps" in pooled and f"| CGP-UCB | {cgp_ucb:.3f} |" in pooled
    assert "CGP-UCB below UCB in" in pooled and " of 2 (sign test p = " in pooled
    # The page's table: one row per function, in plain words.
    assert "| function | CGPSampler on a board (CGP-UCB) | the same agents tuning alone (UCB) |" \
        in pooled
    (row,) = [line for line in pooled.splitlines() if line.startswith("| Hartmann-6 |")]
    assert row.split("|")[2].strip() == f"{cgp_ucb:#.3g}".rstrip(".")
    assert " of 2 (p = " in row


def test_posterior_mean_maximizer_finds_the_peak_of_a_smooth_function() -> None:
    import optuna

    from benchmarks import cgp_paper
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(lambda t: -(t.suggest_float("a", 0, 1) - 0.3) ** 2
                   - (t.suggest_float("b", 0, 1) - 0.7) ** 2, n_trials=25)
    best = max(study.trials, key=lambda t: t.value).params
    x = cgp_paper.posterior_mean_maximizer(study, ["a", "b"], seed=0)
    # Closer to the peak (0.3, 0.7) than the best of the 25 random trials.
    assert np.abs(x - [0.3, 0.7]).max() < 0.03
    assert np.linalg.norm(x - [0.3, 0.7]) < np.linalg.norm([best["a"] - 0.3, best["b"] - 0.7])

def test_summarize_refuses_the_papers_gap_of_a_file_without_it(tmp_path: Path) -> None:
    from benchmarks import cgp_paper
    path = tmp_path / "old.csv"
    path.write_text("function,method,rep,n_agents,radius_factor,adversarial,agent,round,"
                    "regret,gap\nhartmann6,UCB,0,2,1.0,0,0,0,1.0,1.0\n")
    with pytest.raises(ValueError, match="no rec_gap column"):
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
    # --summarize prints the same rows from the files.
    summary = _run(tmp_path, "cgp_speed.py", "--summarize", "s_default.csv", "s_pinned.csv")
    measured = [line.rsplit("|", 3)[0] for line in out.splitlines() if line.startswith("| ")]
    printed = [line.rsplit("|", 3)[0] for line in summary.splitlines() if line.startswith("| ")]
    assert sorted(printed) == sorted(measured) and "seconds per suggestion: " in summary


def test_hetero_yardstick_is_ucb_alone_with_another_seed(tmp_path: Path) -> None:
    from benchmarks import cgp_paper
    kwargs = {"radius_factor": 5.0, "n_init": 3}
    ucb = cgp_paper.run("hartmann6", "UCB", 0, 3, 2, **kwargs)
    other = cgp_paper.run("hartmann6", cgp_paper.CONTROL, 0, 3, 2, **kwargs)
    # Same agents, shifts and initial designs (round 0), chosen by a differently seeded UCB.
    assert [r["gap"] for r in ucb if r["round"] == 0] == [
        r["gap"] for r in other if r["round"] == 0]
    assert [r["regret"] for r in ucb if r["round"] > 0] != [
        r["regret"] for r in other if r["round"] > 0]
    path = tmp_path / "h.csv"
    append_rows(path, ucb + other + cgp_paper.run("hartmann6", "CGP-UCB", 0, 3, 2,
                                                  n_raw_samples=200, **kwargs))
    out = cgp_paper.summarize(path, None)
    assert "paired CGP-UCB gap - UCB gap over 3 agent x rep pairs" in out
    assert f"paired {cgp_paper.CONTROL} gap - UCB gap over 3 agent x rep pairs" in out
    # The same rows appended in two pieces to a gzip-compressed CSV summarize the same.
    gz = tmp_path / "h.csv.gz"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    append_rows(gz, rows[:5])
    append_rows(gz, rows[5:])
    assert gz.read_bytes()[:2] == b"\x1f\x8b"
    assert cgp_paper.summarize(gz, None) == out


def _import_benchmark(name: str) -> Any:
    return importlib.import_module(f"benchmarks.{name}")


def test_cgp_paper_passes_every_tuning_argument_of_the_paper(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """The figures do not depend on CGPSampler's defaults: every sampler the script builds
    (FTS's included) gets every tuning argument, at the paper's values."""
    import inspect

    from fairtune.samplers import CGPSampler

    cgp_paper = _import_benchmark("cgp_paper")
    tuning = set(inspect.signature(CGPSampler.__init__).parameters) - {
        "self", "board", "agent", "seed", "independent_sampler", "warn_independent_sampling"}
    calls: list[dict[str, Any]] = []
    original = CGPSampler.__init__

    def recording_init(self: CGPSampler, **kwargs: Any) -> None:
        calls.append(kwargs)
        original(self, **kwargs)

    monkeypatch.setattr(CGPSampler, "__init__", recording_init)
    for method in (*cgp_paper.METHODS, cgp_paper.CONTROL):
        calls.clear()
        cgp_paper.run("hartmann6", method, 0, 2, 1, n_init=2, n_raw_samples=50, rec_every=0)
        assert len(calls) == 2
        for kwargs in calls:
            assert tuning <= set(kwargs), (method, tuning - set(kwargs))
            for name in ("group_size", "eta", "beta", "quorum", "share_without_comparison",
                         "design_noise"):
                assert kwargs[name] == CGPSampler.PAPER_SETTINGS[name], (method, name)
            assert kwargs["n_startup_trials"] == 2
            # FTS agents borrow nothing, so S_raw is unused there.
            assert kwargs["n_raw_samples"] == (100000 if method.startswith("FTS") else 50)
            expected = "ts" if method.startswith("FTS") else method.split("-")[-1].split()[0]
            assert kwargs["acquisition"] == expected.lower()


def test_cgp_defaults_runs_resumes_and_summarizes(tmp_path: Path) -> None:
    import gzip

    args = ("run", "--families", "camel2-low", "--seeds", "0", "--settings", "ei,startup=2",
            "--rounds", "3", "--light", "--out", "d.csv.gz")
    out = _run(tmp_path, "cgp_defaults.py", *args)
    assert out.count("camel2-low seed 0") == 4  # board, alone, alone (other seed), GPSampler
    with gzip.open(tmp_path / "d.csv.gz", "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 * 4 * 3  # 4 methods x 4 agents x 3 trials
    for method in ("board", "alone", "alone (other seed)", "GPSampler"):
        for agent in "0123":
            regret = [float(r["regret"]) for r in rows
                      if r["method"] == method and r["agent"] == agent]
            assert len(regret) == 3 and regret == sorted(regret, reverse=True)
            assert all(r >= 0 for r in regret)
    # The same command again finds every run in the CSV and adds nothing.
    assert _run(tmp_path, "cgp_defaults.py", *args) == ""
    with gzip.open(tmp_path / "d.csv.gz", "rt", newline="") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    summary = _run(tmp_path, "cgp_defaults.py", "summarize", "d.csv.gz", "--setting",
                   "ei,startup=2", "--plot", "d.png")
    board = [float(r["regret"]) for r in rows if r["method"] == "board" and r["round"] == "3"]
    assert "development families, setting 'ei,startup=2', 1 seeds" in summary
    assert f"| 3 | {np.mean(board):.3f} ({np.median(board):.3f}) |" in summary
    assert (tmp_path / "d.png").stat().st_size > 0
    assert "| ei,startup=2 | 3 | 1 |" in _run(tmp_path, "cgp_defaults.py", "screen", "d.csv.gz")
    # The page's table: the held-out families only, the board against alone by agent and by
    # board.
    _run(tmp_path, "cgp_defaults.py", "run", "--families", "hartmann3-high", "--seeds", "100",
         "--settings", "ei,startup=2", "--methods", "board", "alone", "--rounds", "3", "--light",
         "--out", "h.csv.gz")
    headline = _run(tmp_path, "cgp_defaults.py", "headline", "d.csv.gz", "h.csv.gz",
                    "--setting", "ei,startup=2")
    assert headline.startswith("| held-out families | trials | CGPSampler on a board |")
    (row,) = headline.strip().splitlines()[2:]
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[0].startswith("Hartmann-3") and cells[1] == "3" and cells[4] == "-"
    assert " of 4 (p = " in cells[5] and " of 1 (p = " in cells[6]  # 4 agents, 1 board
    # screen: one setting at one budget.
    one = _run(tmp_path, "cgp_defaults.py", "screen", "d.csv.gz", "--settings", "ei,startup=2",
               "--trials", "3", "--seeds", "0")
    assert len(one.strip().splitlines()) == 3 and "| ei,startup=2 | 3 | 1 |" in one


def test_cgp_defaults_agents_share_optimal_values_at_different_designs() -> None:
    cgp_defaults = _import_benchmark("cgp_defaults")
    agents = cgp_defaults.make_agents("hartmann3-high", 0)
    for n in range(2):
        assert agents.true(n, agents.x_opt[n]) < 1e-9
        assert agents.true(n, agents.x_opt[1 - n]) > 0.0
    with pytest.raises(ValueError, match="setting='sgd'"):
        cgp_defaults.parse_setting("sgd")
    assert cgp_defaults.parse_setting("ucb,beta=1,startup=5,group=8") == {
        "acquisition": "ucb", "beta": 1.0, "n_startup_trials": 5, "group_size": 8}
    assert cgp_defaults.parse_setting("ei,share,eta=1,quorum=3") == {
        "acquisition": "ei", "share_without_comparison": True, "eta": 1.0, "quorum": 3}
    with pytest.raises(ValueError, match="'shared'"):
        cgp_defaults.parse_setting("ei,shared")
    # Items that act only through the board do not change a sampler alone.
    assert cgp_defaults.alone_setting("ei,share,eta=1,startup=5,group=8") == "ei,startup=5"
    assert cgp_defaults.alone_setting("ucb,beta=1") == "ucb,beta=1"


def test_cgp_defaults_pairs_a_board_only_setting_with_the_runs_alone_without_it(
        tmp_path: Path) -> None:
    import gzip

    base = ("run", "--families", "camel2-low", "--seeds", "0", "--rounds", "3", "--light",
            "--out", "d.csv.gz")
    _run(tmp_path, "cgp_defaults.py", *base, "--settings", "ei,startup=2",
         "--methods", "board", "alone")
    out = _run(tmp_path, "cgp_defaults.py", *base, "--settings", "ei,startup=2,share",
               "--methods", "board", "alone")
    assert out.count("camel2-low seed 0") == 1  # the board only: its runs alone exist
    with gzip.open(tmp_path / "d.csv.gz", "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["setting"] for r in rows if r["method"] == "alone"} == {"ei,startup=2"}
    screen = _run(tmp_path, "cgp_defaults.py", "screen", "d.csv.gz")
    assert "| ei,startup=2,share | 3 | 1 |" in screen
