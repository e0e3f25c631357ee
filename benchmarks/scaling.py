"""How a search under a fairness limit grows with rows and with trials.

``rows``: ``FairObjective`` (XGBoost with fairlearn's ThresholdOptimizer inside, under
``demographic_parity<=0.05``, FairBOSampler, ``--n-trials`` trials) on 10k, 100k and 1M rows of
:func:`synthetic`, each size in a fresh process: the wall time split into fitting the model,
fitting the mitigation (``ThresholdOptimizer.fit``), scoring (predicting the validation rows
and measuring the metric and the limit) and the sampler's suggestions, and the process's peak
resident memory. ``trials``: the time per suggestion of FairBOSampler, Optuna's GPSampler and
TPESampler after 50, 200 and 500 trials of a cheap constrained objective (the model's cost
taken out), each sampler in a fresh process. ``scoring``: the memory and time of scoring a
million validation rows of a randomized classifier (:func:`run_scoring`). Default thread
settings, as users run.

Usage:
    python -m benchmarks.scaling rows --rows 10000 100000 1000000 --n-trials 5 \\
        --out benchmarks/results/scaling_rows.csv
    python -m benchmarks.scaling trials --checkpoints 50 200 500 \\
        --out benchmarks/results/scaling_trials.csv
    python -m benchmarks.scaling scoring --rows 1000000 \\
        --out benchmarks/results/scaling_scoring.csv
    python -m benchmarks.scaling summarize benchmarks/results/scaling_rows.csv \\
        benchmarks/results/scaling_trials.csv benchmarks/results/scaling_scoring.csv \\
        --plot docs/images/scaling.png
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from benchmarks._common import add_timer, append_rows, figure, read_rows, save_figure

SAMPLERS = ("FairBOSampler", "GPSampler", "TPESampler")


def synthetic(n_rows: int, seed: int = 0) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """``(X, y, group)``: a sensitive group (40 % "b"), a proxy feature that reveals it in part
    (the group plus noise of standard deviation 0.8), four features, one of them
    categorical, and a base rate that depends on the group (about 0.35 for "a", 0.55 for
    "b") as well as on the features."""
    rng = np.random.default_rng(seed)
    b = rng.random(n_rows) < 0.4
    x = rng.normal(size=(n_rows, 3))
    region = rng.choice(["north", "south", "east", "west"], n_rows)
    logit = (0.9 * x[:, 0] - 0.6 * x[:, 1] + 0.4 * x[:, 0] * x[:, 2] + np.where(b, 0.2, -0.6)
             + np.where(region == "east", 0.3, 0.0))
    y = (rng.random(n_rows) < 1.0 / (1.0 + np.exp(-logit))).astype(int)
    X = pd.DataFrame({"x0": x[:, 0], "x1": x[:, 1], "x2": x[:, 2],
                      "proxy": b + rng.normal(scale=0.8, size=n_rows),
                      "region": pd.Categorical(region)})
    return X, pd.Series(y, name="y"), pd.Series(np.where(b, "b", "a"), name="group")


def _peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kilobytes


def _suggestion_timers(sampler: Any, totals: dict[str, float]) -> None:
    for name in ("infer_relative_search_space", "sample_relative", "sample_independent"):
        add_timer(sampler, name, totals, "suggestion")


def run_rows(n_rows: int, n_trials: int, seed: int) -> dict[str, Any]:
    """One size of the rows axis, in this process."""
    import optuna
    from fairlearn.postprocessing import ThresholdOptimizer

    from fairtune.tuning import FairObjective
    from fairtune.tuning.search import FIT_TIMES_KEY

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    totals = {"fit and mitigation": 0.0, "mitigation": 0.0, "objective": 0.0, "suggestion": 0.0}
    add_timer(ThresholdOptimizer, "fit", totals, "mitigation")
    objective = FairObjective(synthetic(n_rows, seed), "xgboost", limits="demographic_parity<=0.05",
                              mitigation="threshold", random_state=seed)
    study = objective.create_study(seed=seed)
    _suggestion_timers(study.sampler, totals)

    def timed(trial: optuna.Trial) -> float:
        start = time.perf_counter()
        try:
            return objective(trial)
        finally:
            totals["objective"] += time.perf_counter() - start

    start = time.perf_counter()
    study.optimize(timed, n_trials=n_trials)
    wall = time.perf_counter() - start
    # Each trial records what its fits took (with the mitigation's, which is timed apart).
    totals["fit and mitigation"] = sum(sum(t.user_attrs.get(FIT_TIMES_KEY, []))
                                       for t in study.trials)
    return {"rows": n_rows, "trials": n_trials, "wall_s": wall,
            "model_fit_s": totals["fit and mitigation"] - totals["mitigation"],
            "mitigation_s": totals["mitigation"],
            "scoring_s": totals["objective"] - totals["fit and mitigation"],
            "suggestion_s": totals["suggestion"], "peak_memory_mb": _peak_mb()}


def run_trials(sampler_name: str, checkpoints: Sequence[int], seed: int) -> list[dict[str, Any]]:
    """The suggestion time of one sampler at each checkpoint, in this process."""
    import optuna

    from fairtune.samplers import FairBOSampler

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    sampler = {"FairBOSampler": lambda: FairBOSampler(seed=seed),
               "GPSampler": lambda: optuna.samplers.GPSampler(seed=seed),
               "TPESampler": lambda: optuna.samplers.TPESampler(seed=seed)}[sampler_name]()
    totals = {"suggestion": 0.0}
    _suggestion_timers(sampler, totals)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    per_trial: list[float] = []

    def objective(trial: optuna.Trial) -> float:
        before = totals["suggestion"]
        x = [trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(4)]
        per_trial.append(totals["suggestion"] - before)
        trial.set_constraint("gap", x[0] + x[1] - 1.2)  # a limit on two of the parameters
        return -sum((v - 0.3) ** 2 for v in x)

    rows = []
    start = time.perf_counter()
    for checkpoint in checkpoints:
        study.optimize(objective, n_trials=checkpoint - len(study.trials))
        recent = per_trial[-10:]
        rows.append({"sampler": sampler_name, "trials": checkpoint,
                     "suggestion_s": float(np.median(recent)),
                     "cumulative_suggestion_s": float(sum(per_trial)),
                     "wall_s": time.perf_counter() - start, "peak_memory_mb": _peak_mb()})
    return rows


def run_scoring(n_rows: int, seed: int) -> list[dict[str, Any]]:
    """Scoring ``n_rows`` validation rows of a randomized classifier (the probabilities a
    ThresholdOptimizer inside the search predicts), in this process: fairtune's scoring (the
    accuracy and the trial's record of a demographic parity limit, from per-group sums) and the
    scoring it replaced (each row twice, predicted 1 with weight p and 0 with weight 1 - p,
    through fairlearn's MetricFrame and scikit-learn's weighted accuracy). Peak memory traced
    above the inputs, and seconds."""
    import tracemalloc

    import optuna
    from sklearn.metrics import accuracy_score

    from fairtune.fairness import METRICS, parse_limits
    from fairtune.tuning._trial import metric_score, record_validation

    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n_rows)
    group = pd.Series(np.where(rng.random(n_rows) < 0.4, "b", "a"))
    p = np.clip(0.3 + 0.4 * y + rng.normal(scale=0.2, size=n_rows), 0.0, 1.0)
    inputs_mb = (y.nbytes + p.nbytes + group.memory_usage(deep=True)) / 2**20

    def fairtune_scoring() -> float:
        trial = optuna.trial.create_trial(value=0.0)
        record_validation(trial, y, p, group, parse_limits("demographic_parity<=0.05"))
        return metric_score("accuracy", y, p, None)

    def each_row_twice() -> float:
        both = np.concatenate([y, y])
        outcome = np.concatenate([np.ones(n_rows, dtype=int), np.zeros(n_rows, dtype=int)])
        weight = np.concatenate([p, 1.0 - p])
        twice = pd.concat([group, group], ignore_index=True)
        METRICS["demographic_parity"].function(both, outcome, sensitive_features=twice,
                                               sample_weight=weight)
        return float(accuracy_score(both, outcome, sample_weight=weight))

    rows = []
    for name, score in (("fairtune (per-group sums)", fairtune_scoring),
                        ("each row twice, weighted (replaced)", each_row_twice)):
        tracemalloc.start()
        start = time.perf_counter()
        score()
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        rows.append({"scoring": name, "scored_rows": n_rows, "seconds": round(seconds, 3),
                     "peak_above_inputs_mb": round(peak, 1), "inputs_mb": round(inputs_mb, 1)})
    return rows


def _in_a_fresh_process(argv: list[str]) -> Any:
    import os

    from benchmarks._common import ROOT

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    result = subprocess.run([sys.executable, "-m", "benchmarks.scaling", *argv],
                            capture_output=True, text=True, check=False, env=env)
    if result.returncode:
        raise RuntimeError(f"benchmarks.scaling {' '.join(argv)} failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def summarize(paths: Sequence[str], plot: str | None) -> None:
    rows = [r for r in read_rows(paths) if "rows" in r and r.get("rows")]
    trials = [r for r in read_rows(paths) if r.get("sampler")]
    if rows:
        print("| rows | trials | wall s | model fit s | mitigation s | scoring s | "
              "suggestion s | peak memory MB |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in sorted(rows, key=lambda r: int(r["rows"])):
            print(f"| {int(r['rows']):,} | {r['trials']} | {float(r['wall_s']):.1f} | "
                  f"{float(r['model_fit_s']):.1f} | {float(r['mitigation_s']):.1f} | "
                  f"{float(r['scoring_s']):.1f} | {float(r['suggestion_s']):.2f} | "
                  f"{float(r['peak_memory_mb']):.0f} |")
    if trials:
        print("\n| sampler | " + " | ".join(f"s per suggestion at {c}" for c in
                                             sorted({int(r['trials']) for r in trials})) + " |")
        checkpoints = sorted({int(r["trials"]) for r in trials})
        print("|---|" + "---:|" * len(checkpoints))
        for name in SAMPLERS:
            cells = {int(r["trials"]): float(r["suggestion_s"]) for r in trials
                     if r["sampler"] == name}
            if cells:
                print(f"| {name} | " + " | ".join(f"{cells.get(c, float('nan')):.3f}"
                                                  for c in checkpoints) + " |")
    scoring = [r for r in read_rows(paths) if r.get("scoring")]
    if scoring:
        print("\n| scoring of a randomized classifier | rows | seconds | peak memory above the "
              "inputs, MB | inputs, MB |")
        print("|---|---:|---:|---:|---:|")
        for r in scoring:
            print(f"| {r['scoring']} | {int(r['scored_rows']):,} | {float(r['seconds']):.2f} | "
                  f"{float(r['peak_above_inputs_mb']):.0f} | {float(r['inputs_mb']):.0f} |")
    if plot and rows and trials:
        fig, (left, right) = figure(1, 2, figsize=(9, 3.4))
        ordered = sorted(rows, key=lambda r: int(r["rows"]))
        sizes = [int(r["rows"]) for r in ordered]
        for key, label in (("model_fit_s", "model fit"), ("mitigation_s", "mitigation"),
                           ("scoring_s", "scoring"), ("suggestion_s", "suggestion")):
            left.plot(sizes, [max(float(r[key]), 1e-3) for r in ordered], marker="o", label=label)
        left.set(xscale="log", yscale="log", xlabel="rows", ylabel="seconds (whole search)",
                 title="Growth with rows")
        left.legend()
        for name in SAMPLERS:
            points = sorted((int(r["trials"]), float(r["suggestion_s"])) for r in trials
                            if r["sampler"] == name)
            if points:
                right.plot(*zip(*points), marker="o", label=name)
        right.set(yscale="log", xlabel="trials so far", ylabel="seconds per suggestion",
                  title="Growth with trials")
        right.legend()
        save_figure(fig, plot)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    rows = sub.add_parser("rows")
    rows.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    rows.add_argument("--n-trials", type=int, default=5)
    rows.add_argument("--seed", type=int, default=0)
    rows.add_argument("--out")
    rows.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    trials = sub.add_parser("trials")
    trials.add_argument("--checkpoints", type=int, nargs="+", default=[50, 200, 500])
    trials.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    trials.add_argument("--seed", type=int, default=0)
    trials.add_argument("--out")
    trials.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    scoring = sub.add_parser("scoring")
    scoring.add_argument("--rows", type=int, default=1_000_000)
    scoring.add_argument("--seed", type=int, default=0)
    scoring.add_argument("--out")
    summary = sub.add_parser("summarize")
    summary.add_argument("paths", nargs="+")
    summary.add_argument("--plot")
    args = parser.parse_args(argv)
    if args.mode == "summarize":
        summarize(args.paths, args.plot)
        return
    if args.mode == "scoring":
        results = run_scoring(args.rows, args.seed)
        if args.out:
            append_rows(args.out, results)
            summarize([args.out], None)
        else:
            print(json.dumps(results))
        return
    if args.one:  # the child process of one measurement
        result = (run_rows(args.rows[0], args.n_trials, args.seed) if args.mode == "rows"
                  else run_trials(args.samplers[0], args.checkpoints, args.seed))
        print(json.dumps(result))
        return
    results: list[dict[str, Any]] = []
    if args.mode == "rows":
        for n in args.rows:
            results.append(_in_a_fresh_process(["rows", "--one", "--rows", str(n), "--n-trials",
                                                str(args.n_trials), "--seed", str(args.seed)]))
            print(json.dumps(results[-1]), flush=True)
    else:
        for name in args.samplers:
            results += _in_a_fresh_process(
                ["trials", "--one", "--samplers", name, "--seed", str(args.seed),
                 "--checkpoints", *map(str, args.checkpoints)])
            print(json.dumps(results[-1]), flush=True)
    if args.out:
        append_rows(args.out, results)
    summarize_from = [args.out] if args.out else []
    if summarize_from:
        summarize(summarize_from, None)


if __name__ == "__main__":
    main()
