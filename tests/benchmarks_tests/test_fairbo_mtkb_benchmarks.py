"""The FairBOSampler and MTKBSampler benchmarks run end to end on tiny settings and summarize."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import numpy as np
import optuna
import pytest

from benchmarks._common import read_rows as _read_rows
from tests._scripts import read_rows as _rows, run_benchmark as _run

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_fairbo_synthetic_runs_and_summarizes_fewer_trials_than_its_checkpoints(
    tmp_path: Path,
) -> None:
    _run(tmp_path, "fairbo_synthetic.py", "--problems", "gardner", "german", "--methods",
         "FairBO-cEI", "RandomSampler", "--seeds", "2", "--n-trials", "7", "--out", "s.csv")
    rows = _rows(tmp_path / "s.csv")
    assert len(rows) == 2 * 2 * 2 * 7
    for problem, sign in (("gardner", -1.0), ("german", 1.0)):
        for seed in ("0", "1"):
            best = [sign * float(r["best_feasible"]) for r in rows
                    if r["problem"] == problem and r["seed"] == seed
                    and r["method"] == "FairBO-cEI" and r["best_feasible"]]
            assert best == sorted(best)  # the best feasible value never gets worse
    # Both methods start from the same initial trials of a seed.
    first = {(r["method"], r["seed"]): r["value"] for r in rows
             if r["problem"] == "german" and r["trial"] == "1"}
    assert first[("FairBO-cEI", "0")] == first[("RandomSampler", "0")]

    out = _run(tmp_path, "fairbo_synthetic.py", "--summarize", "s.csv", "--versus",
               "RandomSampler")
    lines = out.splitlines()
    assert "best feasible @7" in lines[0] and "@20" not in lines[0]
    assert lines[0].endswith("| seconds per trial (median) |")
    assert sum(line.startswith("| gardner |") for line in lines) == 3  # 2 methods + versus
    assert any("@7 vs RandomSampler" in line for line in lines)
    assert len({line.count("|") for line in lines[:6]}) == 1  # header, rule, rows agree

    # A second run skips the studies already in the file; the figure has a panel per problem.
    _run(tmp_path, "fairbo_synthetic.py", "--problems", "gardner", "--methods", "FairBO-cEI",
         "--seeds", "2", "--n-trials", "7", "--out", "s.csv")
    assert len(_rows(tmp_path / "s.csv")) == 2 * 2 * 2 * 7
    out = _run(tmp_path, "fairbo_synthetic.py", "--summarize", "s.csv", "--methods",
               "RandomSampler", "--plot", "fig.png")
    assert "FairBO-cEI" not in out and (tmp_path / "fig.png").stat().st_size > 0


def test_fairbo_synthetic_gp_comparison_problems_are_feasible_where_stated() -> None:
    import importlib

    from fairtune.fairness import is_feasible

    bench = importlib.import_module("benchmarks.fairbo_synthetic")

    def feasible(problem: str, params: dict) -> bool:
        study = optuna.create_study(direction=bench.PROBLEMS[problem][0])
        study.enqueue_trial(params)
        study.optimize(bench.PROBLEMS[problem][1](), n_trials=1)
        return is_feasible(study.trials[0])

    assert feasible("branin_disk", {"x": 2.5, "y": 7.5})
    assert not feasible("branin_disk", {"x": 3.14159, "y": 2.275})  # a minimum of Branin
    centre = {f"x{i}": 0.5 for i in range(6)}
    hartmann_minimum = dict(zip(centre, (0.2017, 0.15, 0.4769, 0.2753, 0.3117, 0.6573),
                                strict=True))
    assert feasible("hartmann_ball", centre) and not feasible("hartmann_ball", hartmann_minimum)
    assert feasible("thin_band", {"x": 0.0, "y": 0.5})
    assert not feasible("thin_band", {"x": 0.0, "y": 0.53})
    assert feasible("log_two", {"lr": 1e-1, "a": 0.5, "b": 0.4})
    assert not feasible("log_two", {"lr": 1e-4, "a": 0.5, "b": 0.4})  # c2: 0.6 - 0 - 0.25 > 0
    assert feasible("mixed_space", {"depth": 1, "trees": 1, "kind": "a", "rate": 0.5})
    assert not feasible("mixed_space", {"depth": 12, "trees": 1000, "kind": "b", "rate": 0.5})


def test_fairbo_synthetic_higher_dimensional_problems_have_their_stated_optima() -> None:
    import importlib


    bench = importlib.import_module("benchmarks.fairbo_synthetic")
    sphere = {f"x{i}": 0.3 for i in range(16)} | {"x0": 0.4, "x1": 0.4, "x2": 0.4}
    study = optuna.create_study()
    study.enqueue_trial({f"x{i}": 1.0 for i in range(10)})
    study.enqueue_trial({f"x{i}": 0.0 for i in range(10)})
    study.optimize(bench.levy10, n_trials=2)
    assert study.trials[0].value == pytest.approx(0.0, abs=1e-12)
    assert study.trials[1].value > 0.5
    study = optuna.create_study()
    study.enqueue_trial(sphere)
    study.enqueue_trial({f"x{i}": 0.3 for i in range(16)})  # better value, but infeasible
    study.optimize(bench.sphere16, n_trials=2)
    best, unconstrained = study.trials
    assert best.value == pytest.approx(0.03) and bench.is_feasible(best)
    assert unconstrained.value == pytest.approx(0.0) and not bench.is_feasible(unconstrained)
    # The 6-d and 8-d versions have the same optima.
    for name, dim, optimum, value in [
        ("levy6", 6, {f"x{i}": 1.0 for i in range(6)}, 0.0),
        ("sphere8", 8, {f"x{i}": 0.4 if i < 3 else 0.3 for i in range(8)}, 0.03),
    ]:
        study = optuna.create_study()
        study.enqueue_trial(optimum)
        study.optimize(bench.PROBLEMS[name][1](), n_trials=1)
        (trial,) = study.trials
        assert len(trial.params) == dim and bench.is_feasible(trial)
        assert trial.value == pytest.approx(value, abs=1e-12)


def test_fairbo_synthetic_landscape_counts_how_rare_each_feasible_value_is(
    tmp_path: Path,
) -> None:
    out = _run(tmp_path, "fairbo_synthetic.py", "--landscape", "40", "--problems", "gardner",
               "gramacy", "--out", "land.csv")
    for problem, sign in (("gardner", -1.0), ("gramacy", -1.0)):
        rows = _rows(tmp_path / f"land_{problem}.csv")
        assert len(rows) == 40 and {r["problem"] for r in rows} == {problem}
        feasible = sorted(
            sign * float(r["value"]) for r in rows if r["feasible"] == "1"
        )[::-1]
        for r in rows:  # the feasibility column agrees with the stored constraint values
            constraints = [float(r[k]) for k in r if k.startswith("c")]
            assert r["feasible"] == str(int(all(c <= 0 for c in constraints)))
        block = out.split(f"{problem}: 40 random trials")[1].split("random trials")[0]
        table = [line.split("|") for line in block.splitlines() if line.startswith("| ")]
        levels = [float(cells[1]) for cells in table[1:]]  # skip the header row
        shares = [float(cells[2].strip(" %")) / 100 for cells in table[1:]]
        # The table lists the best feasible values in order, with the share reaching each.
        assert levels == [round(sign * v, 4) for v in feasible[: len(levels)]]
        assert shares == [round((k + 1) / 40, 4) for k in range(len(levels))]
    # Summarizing a landscape file prints its table again.
    again = _run(tmp_path, "fairbo_synthetic.py", "--summarize", "land_gardner.csv")
    assert again.strip() == out.split("gramacy: 40 random trials")[0].strip()


def test_fairbo_paper_runs_its_experiments_and_summarizes(tmp_path: Path) -> None:
    _run(tmp_path, "fairbo_paper.py", "rf", "--datasets", "german", "--methods", "FairBO", "BO",
         "--first-seed", "3", "--seeds", "1", "--n-trials", "6", "--out", "rf.csv.gz")
    _run(tmp_path, "fairbo_paper.py", "linear", "--datasets", "german", "--seeds", "1",
         "--n-trials", "6", "--out", "lin.csv")
    rows = _read_rows(tmp_path / "rf.csv.gz")
    assert {r["seed"] for r in rows} == {"3"} and len(rows) == 2 * 6
    for r in rows:  # feasibility is recomputed from the stored DSP, also for BO
        assert r["feasible"] == str(int(float(r["dsp"]) <= 0.05))
    # A second run skips the studies already in the file.
    _run(tmp_path, "fairbo_paper.py", "rf", "--datasets", "german", "--methods", "FairBO", "BO",
         "--first-seed", "3", "--seeds", "1", "--n-trials", "6", "--out", "rf.csv.gz")
    assert len(_read_rows(tmp_path / "rf.csv.gz")) == 2 * 6
    out = _run(tmp_path, "fairbo_paper.py", "summarize", "rf.csv.gz", "lin.csv", "--versus", "BO")
    assert "| german | FairBO | 1 | 6 |" in out and "| german | BO | 1 | 6 |" in out
    assert "vs BO @6" in out
    assert "| german | 0.196 |" in out  # the linear experiment next to the paper's table 2


def test_fairbo_speed_prints_its_table(tmp_path: Path) -> None:
    out = _run(tmp_path, "fairbo_speed.py", "--n-trials", "8", "--repeats", "1")
    rows = [line for line in out.splitlines() if line.startswith("| ") and " | 8 | " in line]
    # Measured at default thread settings and pinned, each in its own process.
    assert [r.split("|")[1].strip() for r in rows] == [
        "default (no variable set)", "OMP_NUM_THREADS=1"
    ]
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 7  # threads, n, FairBO, GPSampler, ratio, binary, repeated outcome
        assert all(float(c) > 0 for c in cells[2:])
    # Which of GPSampler's code paths was timed is part of the result.
    assert ("GPSampler's acquisition starts: batched (greenlet installed)" in out) == (
        importlib.util.find_spec("greenlet") is not None
    )


@pytest.mark.processes
def test_fairbo_parallel_runs_workers_on_one_journal_file_and_counts_repeats(tmp_path: Path) -> None:
    out = _run(tmp_path, "fairbo_parallel.py", "--studies", "1", "--workers", "2",
               "--trials-per-worker", "4")
    header, _, row = out.strip().splitlines()
    assert header.startswith("| workers | studies | trials |")
    workers, studies, trials, repeated, with_repeat = (int(c) for c in row.strip("| ").split(" | "))
    assert (workers, studies, trials) == (2, 1, 8)
    assert 0 <= repeated < trials and with_repeat in (0, 1)


def test_mtkb_paper_runs_and_summarizes(tmp_path: Path) -> None:
    _run(tmp_path, "mtkb_paper.py", "--problems", "sine4", "--methods", "MT-KB", "IT-KB", "MOBO",
         "--kernels", "known", "--widths", "objectives", "norm", "--seeds", "0", "2",
         "--n-trials", "7", "--out", "p.csv")
    rows = _rows(tmp_path / "p.csv")
    assert len(rows) == 2 * 2 * 3 * 7
    # The first 5 trials are the shared random startup of the seed: same regrets.
    first = {(r["method"], r["width"], r["seed"]): r["regret"] for r in rows if r["trial"] == "3"}
    assert first[("MT-KB", "objectives", "0")] == first[("MOBO", "norm", "0")]
    assert all(float(r["regret"]) >= 0 for r in rows)
    _run(tmp_path, "mtkb_paper.py", "--problems", "sine4", "--methods", "MT-KB", "--kernels",
         "known", "--widths", "norm", "--seeds", "0", "2", "--n-trials", "7", "--out", "p.csv")
    assert len(_rows(tmp_path / "p.csv")) == 2 * 2 * 3 * 7  # the runs already there: skipped
    out = _run(tmp_path, "mtkb_paper.py", "--summarize", "p.csv")
    for width in ("objectives", "norm"):
        assert f"| sine4 | known | {width} | MOBO | 2 |" in out
        # MT-KB is paired with IT-KB, seed by seed.
        assert re.search(rf"\| sine4 \| known \| {width} \| MT-KB \| 2 \|.*\(p = ", out)


def test_mtkb_compare_runs_and_summarizes(tmp_path: Path) -> None:
    _run(tmp_path, "mtkb_compare.py", "--problems", "rkhs2", "german_rf", "--methods",
         "MTKBSampler", "RandomSampler", "--seeds", "0", "2", "--n-trials", "8", "--out", "c.csv")
    rows = _rows(tmp_path / "c.csv")
    assert len(rows) == 2 * 2 * 2  # one checkpoint (8 < 20) per run
    assert all(0.0 <= float(r["hypervolume"]) <= 1.0 and float(r["cum_regret"]) >= 0
               for r in rows)
    # A second run skips the runs already in the file.
    _run(tmp_path, "mtkb_compare.py", "--problems", "rkhs2", "--methods", "RandomSampler",
         "--seeds", "0", "2", "--n-trials", "8", "--out", "c.csv")
    assert len(_rows(tmp_path / "c.csv")) == 2 * 2 * 2
    out = _run(tmp_path, "mtkb_compare.py", "--summarize", "c.csv", "--plot", "fig.png")
    assert "| rkhs2 | 8 | RandomSampler | 2 |" in out and "(p = " in out
    assert (tmp_path / "fig.png").stat().st_size > 0


def test_mtkb_speed_runs(tmp_path: Path) -> None:
    out = _run(tmp_path, "mtkb_speed.py", "--objectives", "2", "--n-trials", "12", "16",
               "--repeats", "1", "--gp-max-objectives", "0")
    assert out.count("| 2 | 1") == 4 and "not run" in out and out.count("t^") == 2
    # Measured at default thread settings and pinned, each in its own process.
    assert out.count("| default (no variable set) | 2 |") == 2
    assert out.count("| OMP_NUM_THREADS=1 | 2 |") == 2
    assert "MT-BKB time per suggestion ~ t^" in out
    header, rule, *rows = [line for line in out.splitlines() if line.startswith("|")]
    assert {line.count("|") for line in (header, rule, *rows)} == {header.count("|")}


def test_mtkb_hypervolume_and_regret_by_hand() -> None:
    import numpy as np

    from benchmarks._mtkb_problems import hypervolume, sine4, utility
    problem = sine4(0)
    # The box's top corner dominates everything; its bottom corner nothing.
    assert hypervolume(problem, problem.top[None]) == 1.0
    assert hypervolume(problem, problem.z[None]) == 0.0
    # One point at the middle of the box dominates 1/2^n of it (Monte Carlo, 2^14 points).
    middle = (problem.z + problem.top) / 2
    assert abs(hypervolume(problem, middle[None]) - 0.5**problem.n) < 0.02
    w = np.array([[0.5, 0.5], [0.25, 0.75]])
    assert np.allclose(utility(np.array([[1.0, 3.0]]), w, np.array([0.0, 1.0])), [0.5 * (0.5 + 0.25)])


def test_scaling_splits_a_search_into_its_parts_and_summarizes(tmp_path: Path) -> None:
    from benchmarks.scaling import synthetic

    X, y, group = synthetic(4000, seed=1)
    assert abs((group == "b").mean() - 0.4) < 0.03
    assert y[group == "b"].mean() > y[group == "a"].mean() + 0.1  # a group-dependent base rate
    assert np.corrcoef(X["proxy"], group == "b")[0, 1] > 0.4  # the proxy reveals the group
    _run(tmp_path, "scaling.py", "rows", "--rows", "3000", "--n-trials", "2", "--out", "r.csv")
    _run(tmp_path, "scaling.py", "trials", "--checkpoints", "6", "12", "--samplers",
         "FairBOSampler", "TPESampler", "--out", "t.csv")
    (row,) = _rows(tmp_path / "r.csv")
    parts = [float(row[k]) for k in ("model_fit_s", "mitigation_s", "scoring_s", "suggestion_s")]
    assert all(p >= 0 for p in parts) and sum(parts) <= float(row["wall_s"]) * 1.05
    assert float(row["peak_memory_mb"]) > 50
    assert [r["trials"] for r in _rows(tmp_path / "t.csv")] == ["6", "12", "6", "12"]
    _run(tmp_path, "scaling.py", "scoring", "--rows", "5000", "--out", "c.csv")
    fairtune_row, replaced = _rows(tmp_path / "c.csv")
    assert fairtune_row["scoring"].startswith("fairtune") and replaced["scoring"].startswith("each")
    # Per-group sums take less memory than the rows copied once per outcome.
    assert float(fairtune_row["peak_above_inputs_mb"]) < float(replaced["peak_above_inputs_mb"])
    out = _run(tmp_path, "scaling.py", "summarize", "r.csv", "t.csv", "c.csv", "--plot", "s.png")
    assert "| 3,000 | 2 |" in out and "| TPESampler |" in out and (tmp_path / "s.png").exists()
    assert "| fairtune (per-group sums) | 5,000 |" in out


def test_multifidelity_runs_every_arm_within_its_time_and_summarizes(tmp_path: Path) -> None:
    _run(tmp_path, "multifidelity.py", "run", "--rows", "3000", "--seeds", "0", "--n-trials",
         "6", "--out", "m.csv")
    rows = {r["arm"]: r for r in _rows(tmp_path / "m.csv")}
    full = rows["full"]
    assert int(full["trials"]) == int(full["completed"]) == 6
    for arm in ("full, stopped at a third", "multi-fidelity", "multi-fidelity, pruned trials used"):
        row = rows[arm]  # only the trials finished within a third of the full search's time
        assert float(row["wall_s"]) <= float(full["wall_s"]) / 3
        assert int(row["completed"]) + int(row["pruned"]) == int(row["trials"])
        assert row["test_gap"] == "nan" or 0.0 <= float(row["test_gap"]) <= 1.0
    assert int(rows["full, stopped at a third"]["trials"]) < 6
    out = _run(tmp_path, "multifidelity.py", "summarize", "m.csv", "--plot", "m.png")
    assert "| Synthetic (3,000 rows) | multi-fidelity |" in out and (tmp_path / "m.png").exists()
    # A resumed run skips the seeds it has.
    _run(tmp_path, "multifidelity.py", "run", "--rows", "3000", "--seeds", "0", "--n-trials",
         "6", "--out", "m.csv")
    assert len(_rows(tmp_path / "m.csv")) == 4


def test_multifidelity_scores_the_best_fair_trial_finished_in_time() -> None:
    import datetime

    from benchmarks.multifidelity import _data, _finished_within, _scored, pruned_trials_sampler
    from benchmarks.scaling import synthetic
    from fairtune.tuning import FairObjective

    assert _data("adult", 0, 0)[1] == 45222 and _data("synthetic", 3000, 0)[1] == 3000
    objective = FairObjective(synthetic(3000, 0), "xgboost", limits="demographic_parity<=0.05",
                              mitigation="threshold", test_size=0.2, budgets=(1 / 3, 1.0))
    study = objective.create_study(seed=0, pruner="successive_halving")
    study.sampler = pruned_trials_sampler(0, 0.05)
    started = datetime.datetime.now()
    study.optimize(objective, n_trials=8)
    every, seconds = _finished_within(study, started, 1e6)
    assert len(every) == 8 and seconds > 0
    assert _finished_within(study, started, 0.0) == ([], 0.0)
    row = _scored(objective, study, every)
    best = study.trials[row["best_trial"]]
    assert best.state == optuna.trial.TrialState.COMPLETE and best.value == max(
        t.value for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE
        and all(v <= 0 for v in t.constraints.values()))
    assert 0.5 < row["test_accuracy"] < 1.0 and row["test_fair"] == int(row["test_gap"] <= 0.05)
    # The variant's models see the pruned trials: each with its last rung's value and gap.
    pruned = study.sampler._pruned(study, {"n_estimators"})
    assert len(pruned) == sum(t.state == optuna.trial.TrialState.PRUNED for t in study.trials) > 0
    assert all(set(t.constraints) == {"demographic_parity"} for t in pruned)
