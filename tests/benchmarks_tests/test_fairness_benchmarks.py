"""The fairness benchmarks (fairlearn comparison, new-data generalization, SearchCV, Optuna's
sampler suite, the PostgreSQL load) run end to end on tiny settings and summarize."""

from __future__ import annotations

import csv
import importlib
import subprocess
import warnings
from pathlib import Path
from typing import Any

import optuna
import pytest

from tests._scripts import module_command, read_rows as _rows, run_benchmark as _run

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _vs_mitigation(monkeypatch: pytest.MonkeyPatch) -> Any:
    """benchmarks.vs_mitigation as a module."""
    return importlib.import_module("benchmarks.vs_mitigation")


@pytest.mark.processes
def test_postgres_load_counts_lost_and_repeated_trials(
    tmp_path: Path, postgres_server: object
) -> None:
    # postgres_server: skipped with its reason where PostgreSQL is not installed (the script
    # starts a server of its own).
    out = _run(tmp_path, "postgres_load.py", "--workers", "2", "--trials", "3",
               "--samplers", "FairBOSampler")
    row = next(line for line in out.splitlines() if line.startswith("| FairBOSampler |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[1]) > 0 and 0 < float(cells[2]) <= float(cells[3])
    assert cells[4:7] == ["0", "0", "0"]  # nothing lost, recorded twice or repeated


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
    for label in ("holdout, refitted on all tuning rows", 'holdout, the validated model (`on="training"`)',
                  "cv5, refitted on all tuning rows"):
        assert f"| random_forest | {label} | 2 |" in out
    assert "random_forest, 2 seeds: cv5 wins / ties / losses" in out
    # Another sampler on the same splits, compared seed by seed with FairBO.
    _run(tmp_path, "fair_generalization.py", "run", "--models", "random_forest", "--seeds", "2",
         "--n-trials", "3", "--tuning-rows", "1000", "--protocols", "holdout", "--sampler",
         "TPESampler", "--out", "tpe.csv")
    tpe = _rows(tmp_path / "tpe.csv")
    assert [(r["sampler"], r["protocol"], r["seed"]) for r in tpe] == [
        ("TPESampler", "holdout", "0"), ("TPESampler", "holdout", "1")
    ]
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
    assert "| random_forest | holdout, refitted on all tuning rows, tuned for DSP <= 0.03 | 1 |" in with_margin
    assert with_margin.startswith(out.split("\n\n")[0])  # the 0.05 rows are unchanged
    table = _run(tmp_path, "fair_generalization.py", "summarize", "--compare-samplers", "g.csv",
                 "tpe.csv", "margin.csv")
    assert "| random_forest | holdout | FairBO | 2 |" in table
    assert "| random_forest | holdout | TPESampler | 2 |" in table and "cv5" not in table


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


def test_vs_mitigation_runs_resumes_and_summarizes(tmp_path: Path) -> None:
    methods = ["default", "threshold_default", "fairbo_threshold", "fairbo_threshold_cv3",
               "fairbo_threshold_draw"]
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
    # A search with a validation split also scores the model it validated; with cv=3 there is
    # none (every tuning row trained some fold's model), only the refit.
    searched = [r for r in rows if r["method"].startswith("fairbo") and r["test_accuracy"]]
    assert {r["method"] for r in searched} == {
        "fairbo_threshold", "fairbo_threshold_cv3", "fairbo_threshold_draw"}
    for r in searched:
        assert (r["validated_test_accuracy"] == "") == (r["method"] == "fairbo_threshold_cv3")
    summary = _run(tmp_path, "vs_mitigation.py", "summarize", "v.csv", "--plot", "p.png")
    assert "### german, xgboost, demographic_parity <= 0.05 (2 splits)" in summary
    assert "| fairbo_threshold | 2 |" in summary and "vs threshold_default (limit +0.01)" in summary
    assert (tmp_path / "p.png").stat().st_size > 10_000
    # Every row has its test gap's 95 % interval; `settle` counts the verdicts it settles.
    for r in rows:
        if r["test_accuracy"]:
            low, gap, high = (float(r[k]) for k in ("test_gap_low", "test_gap", "test_gap_high"))
            assert low <= gap <= high and high - low > 0.1  # 250 test rows
    settled = _run(tmp_path, "vs_mitigation.py", "settle", "v.csv")
    line = next(x for x in settled.splitlines() if "| threshold_default |" in x)
    r = by[("0", "threshold_default")], by[("1", "threshold_default")]
    fair = sum(float(x["test_gap"]) <= 0.05 for x in r)
    under = sum(float(x["test_gap_high"]) <= 0.05 for x in r)
    over = sum(float(x["test_gap_low"]) > 0.05 for x in r)
    assert line.startswith(f"| German credit, xgboost, demographic_parity | threshold_default | 2 | "
                           f"{fair} | {under} | {over} | {2 - under - over} | ")


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
               "fairbo_threshold", "fairbo_threshold_holdout", "fairbo_reduction_hidden",
               "fairbo_reduction_hidden_margin"]
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
    # Thresholds fitted on rows the model did not train on are other thresholds; a model
    # without the sensitive inputs, under the reduction, needs no group at prediction.
    assert by["fairbo_threshold_holdout"]["test_gap"] != by["fairbo_threshold"]["test_gap"]
    assert by["fairbo_reduction_hidden"]["sensitive_at_prediction"] == "no"
    hidden_margin = by["fairbo_reduction_hidden_margin"]
    assert hidden_margin["sensitive_at_prediction"] == "no"
    assert hidden_margin["valid_gap"] and float(hidden_margin["valid_gap"]) <= 0.04
    assert by["fairbo_threshold"]["sensitive_at_prediction"] == (
        "predict(X, sensitive_features=...)")


def test_vs_mitigation_hidden_and_blind_searches_keep_the_proxies_of_sex_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # personal_status_sex determines sex on German credit: the hidden search drops it with sex
    # (PROXIES), and PROXIES holds exactly the columns FairObjective warns of there.
    module = _vs_mitigation(monkeypatch)
    seen: list[list[str]] = []

    class Recording(module.FairObjective):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            seen.append(list(self.X.columns))

    monkeypatch.setattr(module, "FairObjective", Recording)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the proxy warning
        warnings.filterwarnings("ignore", "The German credit data set has known issues")
        row = module.run_one("german", "xgboost", "demographic_parity", 0,
                             "fairbo_reduction_hidden", 2)
    assert seen and all("sex" not in c and "personal_status_sex" not in c for c in seen)
    assert row["sensitive_at_prediction"] == "no" and row["test_accuracy"]
    with pytest.warns(UserWarning, match=r"the columns \['personal_status_sex'\] determine sex"):
        module._objective("german", "xgboost", "demographic_parity", 0,
                          use_sensitive_feature=False)
    # On Adult relationship gives sex on 46 % of the rows: the hidden search keeps it (and is
    # warned), the blind one drops it (NAMING) and leaves nothing to warn of.
    with pytest.warns(UserWarning, match=r"'relationship' on 46% of the rows"):
        module._objective("adult", "xgboost", "demographic_parity", 0, use_sensitive_feature=False,
                          drop_columns=module._hidden_columns("adult", "fairbo_reduction_hidden"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        blind = module._objective("adult", "xgboost", "demographic_parity", 0,
                                  use_sensitive_feature=False,
                                  drop_columns=module._hidden_columns("adult", "fairbo_reduction_blind"))
    assert "relationship" not in blind.X.columns and "sex" not in blind.X.columns
    assert module._hidden_columns("german", "fairbo_reduction_blind") == ["personal_status_sex"]
    assert module._hidden_columns("adult", "fairbo_reduction") == []


def test_vs_mitigation_staged_search_tunes_the_reduction_around_the_accuracy_tuned_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = _vs_mitigation(monkeypatch)
    monkeypatch.setattr(module, "STAGED_TRIALS", 3)
    studies: list[optuna.Study] = []
    create = optuna.create_study

    def recording(*args: Any, **kwargs: Any) -> optuna.Study:
        studies.append(create(*args, **kwargs))
        return studies[-1]

    monkeypatch.setattr(module.optuna, "create_study", recording)
    # The accuracy search seems to take 100 s more than it does: the row counts them once.
    clock, search, lag = module.time.perf_counter, module._tpe_accuracy, [0.0]

    def slow_search(*args: Any) -> Any:
        result = search(*args)
        lag[0] += 100.0
        return result

    monkeypatch.setattr(module, "_tpe_accuracy", slow_search)
    monkeypatch.setattr(module.time, "perf_counter", lambda: clock() + lag[0])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The German credit data set has known issues")
        row = module.run_one("german", "xgboost", "demographic_parity", 0,
                             "fairbo_reduction_staged", 2)
    monkeypatch.setattr(module.time, "perf_counter", clock)
    assert 100 < row["tuning_seconds"] <= row["seconds"] < 200
    accuracy, staged = studies
    assert len(accuracy.trials) == 2 and len(staged.trials) == 3
    # The second study tunes the reduction's settings only, starting from fairlearn's set-up
    # for the limit; the model is the accuracy search's best in every trial.
    assert all(set(t.params) == {"reduction_bound", "reduction_max_iter"} for t in staged.trials)
    assert staged.trials[0].params == {"reduction_bound": 1.0, "reduction_max_iter": 50}
    _, tuned, _, _ = module._tuned("german", "xgboost", "demographic_parity", 0, 2)
    objective = module._objective("german", module._fixed_model(tuned.named_steps["model"]),
                                  "demographic_parity", 0, mitigation="reduction")
    pipeline = objective.make_pipeline(optuna.trial.FixedTrial(staged.trials[1].params))
    assert pipeline.estimator.named_steps["model"].get_params() == (
        tuned.named_steps["model"].get_params())
    assert pipeline.max_iter == staged.trials[1].params["reduction_max_iter"]
    assert row["method"] == "fairbo_reduction_staged" and row["n_trials"] == 2


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


def test_vs_mitigation_headline_picks_the_baselines_and_compares_split_by_split(
    tmp_path: Path,
) -> None:
    # (method, accuracy per split, gap per split): reduction_default is the most accurate
    # baseline and never fair; threshold_default is fair in 2 of 3 splits; the search beats
    # threshold_default in every split and loses to reduction_default in every split.
    table = [
        ("fairbo", [0.60, 0.62, None], [0.01, 0.09, None]),  # no fair trial in split 2
        ("fairbo_threshold", [0.70, 0.71, 0.72], [0.04, 0.03, 0.06]),
        ("fairbo_threshold_margin", [0.69, 0.70, 0.71], [0.03, 0.02, 0.04]),
        ("threshold_default", [0.65, 0.66, 0.67], [0.05, 0.04, 0.07]),
        ("reduction_default", [0.75, 0.76, 0.77], [0.08, 0.09, 0.10]),
    ]
    _write_results(tmp_path / "v.csv", table)
    out = _run(tmp_path, "vs_mitigation.py", "headline", "v.csv")
    row = next(line for line in out.splitlines() if line.startswith("| COMPAS, XGBoost"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells == [
        "COMPAS, XGBoost, demographic parity", "0.610 (1 / 3; no model in 1)", "0.710 (2 / 3)",
        "0.700 (3 / 3)", "reduction_default: 0.760 (0 / 3)", "0 / 0 / 3 (p = 0.250)",
        "threshold_default: 0.660 (2 / 3)", "3 / 0 / 0 (p = 0.250)",
    ]


def test_vs_mitigation_frontier_finds_the_most_accurate_model_fair_on_test(tmp_path: Path) -> None:
    # (method, accuracy per split, gap per split). The most accurate fair on test: split 0
    # threshold_tuned (0.71, gap exactly the bound), split 1 reduction_tuned_between (0.73),
    # split 2 only the default model's threshold aimed at 0.02 (0.60).
    table = [
        ("threshold_default_0.02", [0.60, 0.60, 0.60], [0.01, 0.01, 0.01]),
        ("reduction_tuned_between_0.02", [0.70, 0.71, 0.70], [0.03, 0.04, 0.06]),
        ("reduction_tuned_between", [0.72, 0.73, 0.72], [0.06, 0.04, 0.07]),
        ("threshold_tuned_0.02", [0.69, 0.68, 0.69], [0.02, 0.01, 0.06]),
        ("threshold_tuned", [0.71, 0.70, 0.70], [0.05, 0.07, 0.08]),
        ("reduction_tuned", [0.75, 0.76, 0.77], [0.08, 0.09, 0.10]),
        ("fairbo_threshold", [0.72, 0.72, 0.70], [0.04, 0.04, 0.04]),
    ]
    _write_results(tmp_path / "v.csv", table)
    out = _run(tmp_path, "vs_mitigation.py", "frontier", "v.csv")
    assert "| ThresholdOptimizer | accuracy-tuned | 0.02 | 0.6867 | 0.0300 | 2 / 3 |" in out
    assert ("| ExponentiatedGradient (between groups) | accuracy-tuned | 0.05 | 0.7233 | 0.0567 "
            "| 1 / 3 |") in out
    assert "| ThresholdOptimizer | default | 0.02 | 0.6000 | 0.0100 | 3 / 3 |" in out
    assert "(chosen with the test split): 0.6800 (a model in 3 of 3 splits" in out
    # The oracle loses every split to the unfair baseline; the search beats it in splits 0
    # and 2 and loses split 1.
    assert "reduction_tuned (0.7600, fair on test in 0): 0 / 0 / 3 (p = 0.250)" in out
    assert "fairbo_threshold (0.7133) against it: 2 / 0 / 1 (p = 1.000)" in out


def test_vs_mitigation_sweep_aims_fairlearn_at_each_bound(tmp_path: Path) -> None:
    methods = ["reduction_tuned_between", "reduction_tuned_between_0.01", "threshold_tuned_0.01"]
    _run(tmp_path, "vs_mitigation.py", "run", "--datasets", "german", "--models", "xgboost",
         "--limits", "equalized_odds", "demographic_parity", "--splits", "1", "--n-trials", "2",
         "--out", "v.csv", "--methods", *methods)
    rows = _rows(tmp_path / "v.csv")
    # ThresholdOptimizer fits equalized odds exactly: no tolerance to sweep there.
    assert [(r["limit"], r["method"]) for r in rows] == [
        ("equalized_odds", methods[0]), ("equalized_odds", methods[1]),
        *[("demographic_parity", m) for m in methods]]
    by = {(r["limit"], r["method"]): r for r in rows}
    # The same accuracy-tuned model, aimed at 0.01 instead of 0.05: another model.
    assert by[("equalized_odds", methods[0])]["test_gap"] != (
        by[("equalized_odds", methods[1])]["test_gap"])


def test_vs_mitigation_headline_of_a_search_without_a_margin_variant_has_no_margin_column(
    tmp_path: Path,
) -> None:
    table = [("fairbo", [0.60, 0.62], [0.03, 0.03]),
             ("fairbo_reduction", [0.70, 0.69], [0.03, 0.03]),
             ("threshold_default", [0.65, 0.71], [0.03, 0.03])]
    _write_results(tmp_path / "v.csv", table, "adult", "random_forest", "equalized_odds")
    out = _run(tmp_path, "vs_mitigation.py", "headline", "v.csv", "--fairtune",
               "fairbo_reduction")
    lines = out.splitlines()
    assert "margin" not in lines[0] and lines[1] == "|---|---:|---:|---|---|---|---|"
    row = next(line for line in lines if line.startswith("| Adult, random forest"))
    assert [c.strip() for c in row.strip("|").split("|")] == [
        "Adult, random forest, equalized odds", "0.610 (2 / 2)", "0.695 (2 / 2)",
        "threshold_default: 0.680 (2 / 2)", "1 / 0 / 1 (p = 1.000)",
        "threshold_default: 0.680 (2 / 2)", "1 / 0 / 1 (p = 1.000)",
    ]


def test_vs_mitigation_summarize_lists_settings_in_the_documented_order(tmp_path: Path) -> None:
    table = [("default", [0.7, 0.7], [0.1, 0.1]), ("fairbo_threshold", [0.6, 0.6], [0.0, 0.0])]
    settings = [("german", "random_forest", "equalized_odds"),
                ("adult", "xgboost", "equalized_odds"),
                ("compas", "random_forest", "demographic_parity"),
                ("compas", "xgboost", "equalized_odds"),
                ("compas", "xgboost", "demographic_parity")]
    for i, (dataset, model, limit) in enumerate(settings):
        _write_results(tmp_path / f"{i}.csv", table, dataset, model, limit)
    out = _run(tmp_path, "vs_mitigation.py", "summarize", *[f"{i}.csv" for i in range(5)])
    headings = [line.split(" <=")[0] for line in out.splitlines() if line.startswith("### ")]
    # COMPAS, Adult, German credit; XGBoost before the forest; demographic parity first.
    assert headings == ["### compas, xgboost, demographic_parity",
                        "### compas, xgboost, equalized_odds",
                        "### compas, random_forest, demographic_parity",
                        "### adult, xgboost, equalized_odds",
                        "### german, random_forest, equalized_odds"]


def test_vs_mitigation_deep_forest_shares_the_default_forests_baselines(tmp_path: Path) -> None:
    # random_forest_deep's default model is random_forest's: the headline of the deep cell
    # takes the baselines on the default model from the random_forest rows where it has none
    # of its own (its own threshold_default wins), and nothing tuned in the other space.
    forest = [("reduction_default", [0.80, 0.81], [0.09, 0.10]),
              ("threshold_default", [0.50, 0.50], [0.00, 0.00]),
              ("reduction_tuned", [0.90, 0.90], [0.00, 0.00])]
    deep = [("fairbo_threshold", [0.79, 0.82], [0.03, 0.04]),
            ("threshold_default", [0.70, 0.71], [0.08, 0.02])]
    _write_results(tmp_path / "f.csv", forest, "adult", "random_forest", "equalized_odds")
    _write_results(tmp_path / "d.csv", deep, "adult", "random_forest_deep", "equalized_odds")
    out = _run(tmp_path, "vs_mitigation.py", "headline", "f.csv", "d.csv")
    row = next(line for line in out.splitlines() if line.startswith("| Adult, deep random forest"))
    assert [c.strip() for c in row.strip("|").split("|")] == [
        "Adult, deep random forest, equalized odds", "-", "0.805 (2 / 2)",
        "reduction_default: 0.805 (0 / 2)", "1 / 0 / 1 (p = 1.000)",
        "threshold_default: 0.705 (1 / 2)", "2 / 0 / 0 (p = 0.500)",
    ]


def test_vs_mitigation_noise_draws_the_test_gap_of_a_model_fair_on_the_population(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import numpy as np
    from scipy.stats import binom

    module = _vs_mitigation(monkeypatch)
    rng = np.random.default_rng(0)
    # Two groups; under equalized odds each label's rows carry their own rate.
    y = np.array([1] * 60 + [0] * 40 + [1] * 30 + [0] * 70)
    groups = np.array(["a"] * 100 + ["b"] * 100)

    def within(n1: int, n2: int, rate: float, bound: float) -> float:
        """P(|K1 / n1 - K2 / n2| <= bound) for independent binomial counts, exactly (the gap in
        floating point, as the benchmark compares every test gap with the bound)."""
        p1, p2 = binom.pmf(np.arange(n1 + 1), n1, rate), binom.pmf(np.arange(n2 + 1), n2, rate)
        diff = np.abs(np.arange(n1 + 1)[:, None] / n1 - np.arange(n2 + 1)[None, :] / n2)
        return float((np.outer(p1, p2) * (diff <= bound)).sum())

    rates = {-1: 0.5, 1: 0.7, 0: 0.2}
    dp = module._noise_gaps(y, groups, rates, "demographic_parity", 200_000, rng)
    assert abs(np.mean(dp <= 0.05) - within(100, 100, 0.5, 0.05)) < 0.005
    eo = module._noise_gaps(y, groups, rates, "equalized_odds", 200_000, rng)
    # The larger of the two labels' gaps, independent draws: the chances multiply.
    exact = within(60, 30, 0.7, 0.05) * within(40, 70, 0.2, 0.05)
    assert abs(np.mean(eo <= 0.05) - exact) < 0.005
    assert np.mean(eo <= 0.05) < np.mean(dp <= 0.05)  # fewer rows per rate, more noise


def test_vs_mitigation_noise_reports_each_setting_with_the_counts_reached(
    tmp_path: Path,
) -> None:
    table = [("threshold_default", [0.65, 0.66, 0.67], [0.05, 0.04, 0.07]),
             ("reduction_default", [0.75, 0.76, 0.77], [0.08, 0.09, 0.10]),
             ("fairbo_threshold", [0.70, 0.71, 0.72], [0.04, 0.03, 0.02])]
    _write_results(tmp_path / "v.csv", table, dataset="german")
    out = _run(tmp_path, "vs_mitigation.py", "noise", "v.csv", "--datasets", "german",
               "--limits", "demographic_parity", "--splits", "3")
    row = next(line for line in out.splitlines() if line.startswith("| German credit"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:2] == ["German credit, demographic_parity", "250"]
    chance = float(cells[4])
    expected = cells[5].split(" ", 1)[0]
    assert 0.2 < chance < 0.95  # 250 rows: a fair model is often over 0.05 on test
    assert float(expected) == pytest.approx(3 * chance, abs=0.06)
    assert float(cells[6]) >= float(expected)  # within the bound + 0.01 at least as often
    assert cells[7:] == ["2 of 3 (threshold_default, xgboost)",
                         "3 of 3 (fairbo_threshold, xgboost)"]
