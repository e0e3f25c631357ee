"""The fairness benchmarks (fairlearn comparison, new-data generalization, SearchCV, Optuna's
sampler suite, the PostgreSQL load) run end to end on tiny settings and summarize."""

from __future__ import annotations

import csv
import importlib
import subprocess
from pathlib import Path

import pytest

from tests._scripts import module_command
from tests._scripts import read_rows as _rows
from tests._scripts import run_benchmark as _run

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.processes
def test_postgres_load_counts_lost_and_repeated_trials(
    tmp_path: Path, postgres_server: object
) -> None:
    # postgres_server: skipped with its reason where PostgreSQL is not installed (the script
    # starts a server of its own).
    out = _run(tmp_path, "postgres_load.py", "--workers", "2", "--trials", "3",
               "--samplers", "FairBOSampler", "--through", "direct", "grpc")
    rows = [line for line in out.splitlines() if line.startswith("| FairBOSampler |")]
    assert [row.split("|")[2].strip() for row in rows] == ["direct", "gRPC proxy"]
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert float(cells[2]) > 0 and 0 < float(cells[3]) <= float(cells[4])
        assert cells[5:8] == ["0", "0", "0"]  # nothing lost, recorded twice or repeated


def test_fair_generalization_runs_both_protocols_and_summarizes(tmp_path: Path) -> None:
    _run(tmp_path, "fair_generalization.py", "run", "--models", "random_forest", "--seeds", "2",
         "--n-trials", "3", "--tuning-rows", "1000", "--out", "g.csv")
    rows = _rows(tmp_path / "g.csv")
    assert [(r["protocol"], r["seed"]) for r in rows] == [
        ("holdout", "0"), ("cv5", "0"), ("holdout", "1"), ("cv5", "1")
    ]
    for r in rows:
        assert int(r["tuning_rows"]) == 1000 and int(r["tuning_rows"]) + int(r["test_rows"]) == 45222
        if r["test_fair"] != "":  # the verdict is the test DSP against the limit
            assert int(r["test_fair"]) == (float(r["test_dsp"]) <= 0.05)
            assert float(r["valid_dsp"]) <= 0.05  # the best trial is fair on validation
    out = _run(tmp_path, "fair_generalization.py", "summarize", "g.csv", "--plot", "g.png")
    assert (tmp_path / "g.png").stat().st_size > 10_000
    for label in ("30 % validation split, refitted on all tuning rows",
                  "30 % validation split, the validated model",
                  "5-fold cross-validation, refitted on all tuning rows"):
        assert f"| random forest | {label} | 2 |" in out
    assert "random forest, 2 seeds: cross-validation wins / ties / losses" in out
    # A tighter tuning limit: the test verdict stays DSP <= 0.05, and the summary adds rows.
    _run(tmp_path, "fair_generalization.py", "run", "--models", "random_forest", "--seeds", "1",
         "--n-trials", "3", "--tuning-rows", "1000", "--protocols", "holdout", "--tuning-limit",
         "0.03", "--out", "margin.csv")
    (margin,) = _rows(tmp_path / "margin.csv")
    assert float(margin["tuning_limit"]) == 0.03
    if margin["valid_dsp"] != "":
        assert float(margin["valid_dsp"]) <= 0.03
        assert int(margin["test_fair"]) == (float(margin["test_dsp"]) <= 0.05)
    with_margin = _run(tmp_path, "fair_generalization.py", "summarize", "g.csv", "margin.csv")
    assert ("| random forest | 30 % validation split, refitted on all tuning rows, margin 0.02 "
            "| 1 |") in with_margin
    assert with_margin.startswith(out.split("\n\n")[0])  # the 0.05 rows are unchanged


def _suite_module() -> object:
    return importlib.import_module("benchmarks.optuna_sampler_suite")


@pytest.mark.processes
def test_optuna_sampler_suite_runs_optunas_own_tests_on_fairtune_samplers(tmp_path: Path) -> None:
    # Optuna's test file comes from the installed version's source distribution, cached under
    # benchmarks/results/tmp/ and fetched with pip the first time (CI has PyPI access).
    tests = ["test_reseed_rng_change_sampling", "test_sampler_reseed_rng",
             "test_raise_error_for_samplers_during_multi_objectives"]
    samplers = ["CollaborativeUCBSampler", "FairBOSampler"]
    command, env = module_command("benchmarks.optuna_sampler_suite", "--samplers", *samplers,
                                  "-k", " or ".join(tests), "--out", str(tmp_path / "suite.csv"))
    result = subprocess.run(command, cwd=tmp_path, env={**env, "OMP_NUM_THREADS": "1"},
                            capture_output=True, text=True, timeout=300)
    if result.returncode == _suite_module().EXIT_NO_SDIST:
        pytest.skip(f"Optuna's sdist is not cached and PyPI is unreachable: {result.stderr}")
    assert result.returncode == 0, result.stderr
    rows = _rows(tmp_path / "suite.csv")
    # Each selected test of Optuna's file ran once per sampler (and nothing else ran) ...
    ran = sorted((r["sampler"], r["test"].split("::")[-1].split("[")[0]) for r in rows)
    assert ran == sorted((s, t) for s in samplers for t in tests)
    # ... and passed: before reseed_rng() forgot the seed, CollaborativeUCBSampler failed
    # test_reseed_rng_change_sampling (the same draws after reseeding).
    assert [r for r in rows if r["outcome"] != "passed"] == []
    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert table[0] == "| sampler | passed | failed | skipped | failed tests |"
    assert table[1:] == [f"| {s} | 3 | 0 | 0 | - |" for s in samplers]


def test_optuna_sampler_suite_covers_every_public_sampler_and_lists_failures() -> None:
    import fairtune.samplers

    suite = _suite_module()
    labels = suite.all_samplers()
    samplers = [name for name in fairtune.samplers.__all__ if name.endswith("Sampler")]
    assert len(samplers) == 4
    for name in samplers:  # a new sampler gets at least a default entry
        assert any(label == name or label.startswith(f"{name}(") or label.startswith(f"{name} ")
                   for label in labels)
    outcomes = {
        "f.py::TestBasicSampler::test_float[A-d0]": {"sampler": "A", "outcome": "failed"},
        "f.py::TestBasicSampler::test_float[A-d1]": {"sampler": "A", "outcome": "failed"},
        "f.py::test_reproducible[A-x]": {"sampler": "A", "outcome": "failed"},
        "f.py::test_reproducible[B-x]": {"sampler": "B", "outcome": "skipped"},
        "f.py::test_sampler_reseed_rng[B]": {"sampler": "B", "outcome": "passed"},
    }
    table = suite.summarize(outcomes, ["A", "B"]).splitlines()
    assert table[2] == "| A | 0 | 3 | 0 | `TestBasicSampler::test_float` (x2), `test_reproducible` |"
    assert table[3] == "| B | 1 | 0 | 1 | - |"


def test_optuna_sampler_suite_summarizes_and_plots_a_stored_run(tmp_path: Path) -> None:
    rows = [{"sampler": "FairBOSampler", "test": f"TestBasicSampler::test_float[{i}]",
             "outcome": "passed", "message": ""} for i in range(3)]
    rows.append({"sampler": "FairBOSampler", "test": "test_reproducible[x]", "outcome": "failed",
                 "message": "boom"})
    with open(tmp_path / "suite.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    suite = _suite_module()
    assert suite.main(["--summarize", str(tmp_path / "suite.csv"),  # type: ignore[attr-defined]
                       "--plot", str(tmp_path / "s.png")]) == 0
    assert (tmp_path / "s.png").stat().st_size > 10_000
    outcomes = suite.read_outcomes(tmp_path / "suite.csv")  # type: ignore[attr-defined]
    table = suite.summarize(outcomes, ["FairBOSampler"]).splitlines()  # type: ignore[attr-defined]
    assert table[2] == "| FairBOSampler | 3 | 1 | 0 | `test_reproducible` |"


def test_vs_mitigation_runs_resumes_and_summarizes(tmp_path: Path) -> None:
    methods = ["default", "threshold_default", "fairbo_threshold", "fairbo_reduction"]
    args = ["run", "--datasets", "german", "--models", "xgboost", "--limits",
            "demographic_parity", "--splits", "2", "--n-trials", "2", "--out", "v.csv",
            "--methods", *methods]
    out = _run(tmp_path, "vs_mitigation.py", *args)
    rows = _rows(tmp_path / "v.csv")
    assert [(r["split"], r["method"]) for r in rows] == [
        (str(s), m) for s in range(2) for m in methods
    ]
    assert _run(tmp_path, "vs_mitigation.py", *args) == ""  # every row is there: nothing to do
    for r in rows:
        if r["test_accuracy"]:
            assert 0.0 < float(r["test_accuracy"]) <= 1.0
            assert r["test_fair"] == str(int(float(r["test_gap"]) <= 0.05))
    by = {(r["split"], r["method"]): r for r in rows}
    assert by[("0", "threshold_default")]["sensitive_at_prediction"] == (
        "predict(X, sensitive_features=...)"
    )
    # The same split for every method: the default model's and fairlearn's rows share it, and
    # the threshold on the default model changes its predictions.
    assert by[("0", "default")]["test_gap"] != by[("0", "threshold_default")]["test_gap"]
    assert "split  1 fairbo_threshold" in out
    # A search also scores the model it validated next to the refit.
    searched = [r for r in rows if r["method"].startswith("fairbo") and r["test_accuracy"]]
    assert searched and all(r["validated_test_accuracy"] for r in searched)
    summary = _run(tmp_path, "vs_mitigation.py", "headline", "v.csv", "--datasets", "german",
                   "--plot", "p.png")
    assert "| fairtune, ThresholdOptimizer inside the search | " in summary
    assert "| fairlearn's ThresholdOptimizer on a default XGBoost | " in summary
    assert "German credit: 250 test rows" in summary
    assert (tmp_path / "p.png").stat().st_size > 10_000
    # Every row has its test gap's 95 % interval; `settle` counts the verdicts it settles.
    for r in rows:
        if r["test_accuracy"] and r["one_class"] == "0":  # a constant model's gap is 0 exactly
            low, gap, high = (float(r[k]) for k in ("test_gap_low", "test_gap", "test_gap_high"))
            assert low <= gap <= high and high - low > 0.1  # 250 test rows
    settled = _run(tmp_path, "vs_mitigation.py", "settle", "v.csv")
    line = next(x for x in settled.splitlines()
                if "| fairlearn's ThresholdOptimizer on a default XGBoost |" in x)
    r = by[("0", "threshold_default")], by[("1", "threshold_default")]
    fair = sum(float(x["test_gap"]) <= 0.05 for x in r)
    under = sum(float(x["test_gap_high"]) <= 0.05 for x in r)
    over = sum(float(x["test_gap_low"]) > 0.05 for x in r)
    assert line.startswith(f"| German credit, XGBoost, demographic parity | fairlearn's "
                           f"ThresholdOptimizer on a default XGBoost | 2 | {fair} | {under} | "
                           f"{over} | {2 - under - over} | ")


def test_vs_mitigation_resumes_a_file_begun_without_the_interval_columns(tmp_path: Path) -> None:
    args = ["run", "--datasets", "german", "--models", "xgboost", "--limits",
            "demographic_parity", "--splits", "1", "--out", "v.csv"]
    _run(tmp_path, "vs_mitigation.py", *args, "--methods", "default")
    path = tmp_path / "v.csv"
    rows = _rows(path)
    old = [name for name in rows[0] if not name.startswith("test_gap_")]
    with open(path, "w", newline="") as f:  # the file as it was before the interval columns
        writer = csv.DictWriter(f, fieldnames=old, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    _run(tmp_path, "vs_mitigation.py", *args, "--methods", "default", "threshold_default")
    rows = _rows(path)
    assert [r["method"] for r in rows] == ["default", "threshold_default"]
    # The new row has the file's columns, no more (a value past the header would be under None).
    assert list(rows[1]) == old and float(rows[1]["seconds"]) > 0 and rows[1]["test_gap"]


def test_vs_mitigation_between_groups_baseline_and_margin_search(tmp_path: Path) -> None:
    methods = ["reduction_default", "reduction_default_between", "fairbo_threshold_margin",
               "fairbo_threshold"]
    _run(tmp_path, "vs_mitigation.py", "run", "--datasets", "compas", "--models", "xgboost",
         "--limits", "demographic_parity", "--splits", "1", "--n-trials", "3", "--out", "v.csv",
         "--methods", *methods)
    by = {r["method"]: r for r in _rows(tmp_path / "v.csv")}
    assert list(by) == methods
    # The bound on the gap between the groups is a tighter moment than fairlearn's, so the
    # two ExponentiatedGradient models differ.
    assert by["reduction_default"]["test_gap"] != by["reduction_default_between"]["test_gap"]
    # The margin search validates its trials against the bound minus the margin and is
    # judged on test against the bound.
    margin = by["fairbo_threshold_margin"]
    assert margin["valid_gap"] and float(margin["valid_gap"]) <= 0.04
    assert margin["test_fair"] == str(int(float(margin["test_gap"]) <= 0.05))
    assert by["fairbo_threshold"]["sensitive_at_prediction"] == (
        "predict(X, sensitive_features=...)")


def _write_results(path: Path, table: list, dataset: str = "compas", model: str = "xgboost",
                   limit: str = "demographic_parity") -> None:
    """A vs_mitigation.py results CSV of one setting by hand: ``table`` holds (method, test
    accuracy per split, test gap per split), None where the search delivered no model."""
    fields = ["dataset", "model", "limit", "split", "method", "test_accuracy", "test_gap",
              "test_fair", "one_class", "sensitive_at_prediction", "validated_test_accuracy",
              "validated_test_gap", "seconds"]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for method, accuracies, gaps in table:
            for split, (accuracy, gap) in enumerate(zip(accuracies, gaps)):
                writer.writerow({"dataset": dataset, "model": model, "limit": limit,
                                 "split": split, "method": method, "test_accuracy": accuracy,
                                 "test_gap": gap,
                                 "test_fair": "" if gap is None else int(gap <= 0.05),
                                 "seconds": 1.0})


def test_vs_mitigation_headline_names_the_methods_and_compares_split_by_split(
    tmp_path: Path,
) -> None:
    # (method, accuracy per split, gap per split): the search beats threshold_default in
    # every split and loses to reduction_default in every split; fairbo has no model in split 2.
    table = [
        ("fairbo", [0.60, 0.62, None], [0.01, 0.09, None]),
        ("fairbo_threshold", [0.70, 0.71, 0.72], [0.04, 0.03, 0.06]),
        ("threshold_default", [0.65, 0.66, 0.67], [0.05, 0.04, 0.07]),
        ("reduction_default", [0.75, 0.76, 0.77], [0.08, 0.09, 0.10]),
    ]
    _write_results(tmp_path / "v.csv", table)
    out = _run(tmp_path, "vs_mitigation.py", "headline", "v.csv", "--datasets", "compas")
    rows = {line.split(" | ")[0].lstrip("| "): [c.strip() for c in line.strip("|").split("|")[1:]]
            for line in out.splitlines() if line.startswith("| ") and "---" not in line}
    assert rows["fairtune, hyperparameters alone (FairBOSampler)"] == ["0.610", "1 of 3"]
    assert rows["fairtune, ThresholdOptimizer inside the search"] == ["0.710", "2 of 3"]
    assert rows["fairlearn's ThresholdOptimizer on a default XGBoost"] == ["0.660", "2 of 3"]
    assert rows["fairlearn's ExponentiatedGradient on a default XGBoost"] == ["0.760", "0 of 3"]
    assert ("COMPAS, fairbo_threshold against: threshold_default 3 / 0 / 0 (p = 0.25); "
            "reduction_default 0 / 0 / 3 (p = 0.25)") in out
    # The stored results are read from their .csv.gz when the .csv is not there.
    import gzip

    (tmp_path / "v.csv.gz").write_bytes(gzip.compress((tmp_path / "v.csv").read_bytes()))
    (tmp_path / "v.csv").unlink()
    again = _run(tmp_path, "vs_mitigation.py", "headline", "v.csv", "--datasets", "compas")
    assert again == out


def test_vs_mitigation_timing_splits_a_search_into_sampler_fit_and_predict(tmp_path: Path) -> None:
    out = _run(tmp_path, "vs_mitigation.py", "timing", "--datasets", "german", "--n-trials", "2",
               "--timing-mitigations", "threshold", "--threads", "pinned", "--no-header")
    (row,) = [line for line in out.splitlines() if line.startswith("| OMP_NUM_THREADS=1 |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == ["threshold", "german", "2"]
    end_to_end, *parts = map(float, cells[4:])
    assert end_to_end > 0 and all(p >= 0 for p in parts) and parts[1] > 0  # models were fitted
