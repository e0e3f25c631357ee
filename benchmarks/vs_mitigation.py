"""fairtune against what practitioners use instead: fairlearn's mitigations on a default model.

Every method runs on the same stratified splits: 25 % of the rows are a test split that no
method sees; the other 75 % are the tuning rows (the tuned methods validate on 30 % of them,
``FairObjective``'s default). Each method ends with one model fitted on the tuning rows, scored
on the test split: accuracy, the limit's fairness gap and its 95 % bootstrap interval, whether
the limit holds, whether the model predicts one class for everyone, and whether it needs the
sensitive feature at prediction time.

Methods (``--methods``):

* ``default``: the default model (``XGBClassifier()``, ``RandomForestClassifier()``), no
  mitigation; ``tpe_accuracy``: the search space tuned for validation accuracy alone (Optuna's
  ``TPESampler``, ``--n-trials`` trials), refitted on the tuning rows;
* ``threshold_default`` / ``threshold_tuned``: fairlearn's ``ThresholdOptimizer`` on the
  default / the accuracy-tuned model (constraint of the limit, ``tol`` = the bound where
  fairlearn supports it), fitted on the tuning rows as fairlearn's ``prefit=False`` does;
* ``reduction_default`` / ``reduction_tuned``: fairlearn's ``ExponentiatedGradient`` (the
  limit's moment with ``difference_bound`` = the bound, its defaults otherwise);
  ``reduction_default_between`` / ``reduction_tuned_between``: the same with the bound on the
  difference between the groups, as the limit measures it
  (``ReductionClassifier(difference="between_groups")``);
* ``fairbo`` and ``gp``: ``FairObjective`` without mitigation tuned by ``FairBOSampler`` and by
  Optuna's ``GPSampler``, the best fair trial refitted with ``refit_best``;
* ``fairbo_threshold``, ``fairbo_reduction``, ``fairbo_correlation_remover``, ``fairbo_auto``:
  ``FairObjective(mitigation=...)`` (``auto`` = the list of all three) tuned by FairBOSampler,
  starting, as ``fairtune tune`` does, from the untuned model
  (``FairObjective.enqueue_defaults``); ``fairbo_threshold_margin``: the threshold search with
  ``margin=MARGIN`` (validated against the bound minus 0.01, checked on test against the bound).

The fairtune methods also record the model the study validated (``refit_best(on="training")``,
columns ``validated_*``) next to the refit on all tuning rows.

Usage (rows already in ``--out`` are skipped, so a run can be resumed or extended; ``headline``
prints the page's table, one row per method and a column pair per dataset, and with ``--plot``
its figure; ``settle`` counts the test verdicts whose bootstrap interval lies wholly on one side
of the limit; ``timing`` shows where the time of ``fairtune tune --mitigation ...`` goes, each
setting in a fresh process)::

    OMP_NUM_THREADS=1 python -m benchmarks.vs_mitigation run --datasets compas adult \\
        --models xgboost --limits demographic_parity --splits 20 \\
        --out benchmarks/results/vs_mitigation.csv
    python -m benchmarks.vs_mitigation headline benchmarks/results/vs_mitigation.csv.gz \\
        --limits demographic_parity equalized_odds --plot docs/images/vs_mitigation.png
    python -m benchmarks.vs_mitigation settle benchmarks/results/vs_mitigation_intervals.csv
    python -m benchmarks.vs_mitigation timing --datasets compas --n-trials 50
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pandas as pd

from benchmarks._common import (
    COLUMN_INCHES,
    add_timer,
    append_rows,
    done_keys,
    figure,
    legend_row,
    paired,
    read_rows,
    save_figure,
)
from fairtune import datasets
from fairtune.fairness import METRICS, best_fair_trial, metric_interval
from fairtune.samplers import FairBOSampler
from fairtune.tuning import FairObjective, ReductionClassifier, ThresholdClassifier
from fairtune.tuning.search import FIT_TIMES_KEY, SCORE_TIMES_KEY

BOUND = 0.05
TEST_SIZE = 0.25
MARGIN = 0.01  # fairbo_threshold_margin validates against BOUND - MARGIN
MITIGATION: dict[str, Any] = {
    "fairbo_threshold": "threshold", "fairbo_threshold_margin": "threshold",
    "fairbo_reduction": "reduction", "fairbo_correlation_remover": "correlation_remover",
    "fairbo_auto": ["threshold", "reduction", "correlation_remover"],
}
FAIRLEARN = ("threshold_default", "reduction_default", "reduction_default_between",
             "threshold_tuned", "reduction_tuned", "reduction_tuned_between")
METHODS = ("default", "tpe_accuracy", *FAIRLEARN, "fairbo", "gp", *MITIGATION)
FIELDS = [
    "dataset", "model", "limit", "split", "method", "test_accuracy", "test_gap", "test_fair",
    "one_class", "sensitive_at_prediction", "valid_accuracy", "valid_gap", "best_trial",
    "mitigation_used", "validated_test_accuracy", "validated_test_gap", "seconds",
    "tuning_seconds", "n_trials", "test_gap_low", "test_gap_high",
]
KEY = ("dataset", "model", "limit", "split", "method")
_DATA: dict[str, Any] = {}


def _dataset(name: str) -> Any:
    if name not in _DATA:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # German / COMPAS known-issue notes
            _DATA[name] = getattr(datasets, f"load_{name}")()
    return _DATA[name]


def _default_model(model: str, seed: int) -> Any:
    if model == "xgboost":
        from xgboost import XGBClassifier

        return XGBClassifier(random_state=seed)
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(random_state=seed)


def _objective(dataset: str, model: Any, limit: str, split: int, bound: float = BOUND,
               **kwargs: Any) -> FairObjective:
    return FairObjective(
        _dataset(dataset), model, limits=f"{limit}<={bound}", test_size=TEST_SIZE,
        random_state=split, **kwargs,
    )


def _score(objective: FairObjective, pipeline: Any, limit: str) -> dict[str, Any]:
    """Test accuracy, gap (with its 95 % bootstrap interval) and verdict of a fitted pipeline,
    and whether it is one-class."""
    needs = getattr(pipeline, "needs_sensitive_features_at_prediction", False)
    X, y, s = objective.X_test, objective.y_test, objective.s_test
    y_pred = np.asarray(
        pipeline.predict(X, sensitive_features=s) if needs else pipeline.predict(X)
    ).astype(int)
    gap = float(METRICS[limit].function(y, y_pred, sensitive_features=s))
    low, high = metric_interval(limit, y, y_pred, sensitive_features=s,
                                random_state=objective.random_state)
    return {
        "test_accuracy": round(float(np.mean(y_pred == y.to_numpy())), 5),
        "test_gap": round(gap, 5), "test_fair": int(gap <= BOUND),
        "one_class": int(len(np.unique(y_pred)) == 1),
        "test_gap_low": round(low, 5), "test_gap_high": round(high, 5),
    }


def _mitigate(kind: str, pipeline: Any, limit: str, seed: int, between: bool = False,
              bound: float = BOUND) -> Any:
    """fairlearn's ThresholdOptimizer / ExponentiatedGradient as a practitioner sets them up
    (``between``: ExponentiatedGradient's bound on the difference between the groups), aimed
    at ``bound``."""
    if kind == "threshold":
        constraint = {"demographic_parity": "demographic_parity",
                      "equalized_odds": "equalized_odds"}[limit]
        return ThresholdClassifier(
            pipeline, constraint=constraint,
            tolerance=None if limit == "equalized_odds" else bound, random_state=seed,
        )
    moment = {"demographic_parity": "DemographicParity", "equalized_odds": "EqualizedOdds"}[limit]
    return ReductionClassifier(
        pipeline, constraint=moment, bound=bound, random_state=seed,
        difference="between_groups" if between else "to_overall",
    )


def _fit(pipeline: Any, objective: FairObjective) -> Any:
    if isinstance(pipeline, (ThresholdClassifier, ReductionClassifier)):
        return pipeline.fit(objective.X_dev, objective.y_dev, sensitive_features=objective.s_dev)
    return pipeline.fit(objective.X_dev, objective.y_dev)


def _tpe_accuracy(dataset: str, model: str, limit: str, split: int, n_trials: int) -> tuple[Any, Any, Any]:
    """The space tuned for validation accuracy alone: (objective, unfitted best pipeline, study)."""
    objective = _objective(dataset, model, limit, split)

    def accuracy(trial: optuna.Trial) -> float:
        pipeline = objective.make_pipeline(trial).fit(objective.X_train, objective.y_train)
        return float(np.mean(pipeline.predict(objective.X_valid) == objective.y_valid.to_numpy()))

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=split))
    study.optimize(accuracy, n_trials=n_trials)
    best = max((t for t in study.trials if t.value is not None), key=lambda t: t.value)
    return objective, objective.make_pipeline(optuna.trial.FixedTrial(best.params)), study


_TUNED_CACHE: dict[tuple, Any] = {}


def _tuned(dataset: str, model: str, limit: str, split: int, n_trials: int) -> tuple:
    """The accuracy search of ``tpe_accuracy``, run once per setting and split: (objective,
    unfitted best pipeline, study, seconds)."""
    key = (dataset, model, limit, split, n_trials)
    if key not in _TUNED_CACHE:
        t0 = time.perf_counter()
        _TUNED_CACHE[key] = (*_tpe_accuracy(dataset, model, limit, split, n_trials),
                             time.perf_counter() - t0)
    return _TUNED_CACHE[key]


def run_one(dataset: str, model: str, limit: str, split: int, method: str, n_trials: int) -> dict:
    row: dict[str, Any] = {"dataset": dataset, "model": model, "limit": limit, "split": split,
                           "method": method, "n_trials": ""}
    start = time.perf_counter()
    tuning_seconds: float | None = None
    between = method.endswith("_between")
    if method in ("default", "threshold_default", "reduction_default",
                  "reduction_default_between"):
        objective = _objective(dataset, lambda trial: _default_model(model, split), limit, split)
        pipeline = objective.make_pipeline(optuna.trial.FixedTrial({}))
        if method != "default":
            pipeline = _mitigate(method.split("_")[0], pipeline, limit, split, between)
        fitted = _fit(pipeline, objective)
    elif method in ("tpe_accuracy", "threshold_tuned", "reduction_tuned",
                    "reduction_tuned_between"):
        objective, pipeline, study, tuning_seconds = _tuned(dataset, model, limit, split,
                                                            n_trials)
        if method != "tpe_accuracy":
            pipeline = _mitigate(method.split("_")[0], pipeline, limit, split, between)
        row["n_trials"] = n_trials
        fitted = _fit(pipeline, objective)
    else:
        objective = _objective(dataset, model, limit, split, mitigation=MITIGATION.get(method),
                               bound=BOUND - MARGIN if method.endswith("_margin") else BOUND)
        sampler = (optuna.samplers.GPSampler(seed=split) if method == "gp"
                   else FairBOSampler(seed=split))
        study = optuna.create_study(direction="maximize", sampler=sampler)
        if method != "gp":  # Optuna's sampler as a user runs it, without the first trial
            objective.enqueue_defaults(study)
        study.optimize(objective, n_trials=n_trials)
        tuning_seconds = time.perf_counter() - start
        row["n_trials"] = n_trials
        best = best_fair_trial(study)
        if best is None:  # no fair trial: the method delivers nothing under the limit
            row["seconds"] = row["tuning_seconds"] = round(tuning_seconds, 1)
            return {**{k: "" for k in FIELDS}, **row}
        row.update({
            "best_trial": best.number, "valid_accuracy": round(best.value, 5),
            "valid_gap": round(best.user_attrs[f"fairtune:{limit}"], 5),
            "mitigation_used": best.user_attrs.get("fairtune:mitigation_used", "none"),
        })
        fitted = objective.refit_best(study)
        validated = _score(objective, objective.refit_best(study, on="training"), limit)
        row["validated_test_accuracy"] = validated["test_accuracy"]
        row["validated_test_gap"] = validated["test_gap"]
        row["sensitive_at_prediction"] = objective.needs_sensitive_features(best.params) or "no"
    row.update(_score(objective, fitted, limit))
    row.setdefault("sensitive_at_prediction", _needs(method, objective))
    row["seconds"] = round(time.perf_counter() - start + (tuning_seconds or 0.0)
                           * method.startswith(("threshold_tuned", "reduction_tuned")), 1)
    row["tuning_seconds"] = "" if tuning_seconds is None else round(tuning_seconds, 1)
    return {**{k: "" for k in FIELDS}, **row}


def _needs(method: str, objective: FairObjective) -> str:
    if method.startswith("threshold"):
        return "predict(X, sensitive_features=...)"
    return objective.needs_sensitive_features() or "no"


def run(args: argparse.Namespace) -> None:
    done = done_keys(args.out, KEY)
    existing = read_rows(args.out)
    # A file begun without some columns (the test gap's interval) is extended as is.
    fields = list(existing[0]) if existing else FIELDS
    for dataset in args.datasets:
        for model in args.models:
            for limit in args.limits:
                for split in range(args.first_split, args.first_split + args.splits):
                    for method in args.methods:
                        if (dataset, model, limit, str(split), method) in done:
                            continue
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")  # xgboost / sklearn chatter
                            row = run_one(dataset, model, limit, split, method, args.n_trials)
                        append_rows(args.out, [row], fields)
                        print(f"{dataset} {model} {limit} split {split:2d} {method:27s} "
                              f"acc {row['test_accuracy']} gap {row['test_gap']} "
                              f"({row['seconds']} s)", flush=True)
                    _TUNED_CACHE.clear()


# ---------------------------------------------------------------------------------------------
# Summary

_MODELS = {"xgboost": "XGBoost", "random_forest": "random forest"}
_DATASETS = {"compas": "COMPAS", "adult": "Adult", "german": "German credit"}
# The page's table: a row per method, in this order, named as a practitioner names it.
NAMES = {
    "default": "the default {model}, no limit",
    "tpe_accuracy": "{model} tuned for accuracy alone, no limit",
    "fairbo": "fairtune, hyperparameters alone (FairBOSampler)",
    "fairbo_threshold": "fairtune, ThresholdOptimizer inside the search",
    "fairbo_threshold_margin": "the same with margin=0.01",
    "fairbo_reduction": "fairtune, ExponentiatedGradient inside the search",
    "threshold_default": "fairlearn's ThresholdOptimizer on a default {model}",
    "threshold_tuned": "fairlearn's ThresholdOptimizer on an accuracy-tuned {model}",
    "reduction_default": "fairlearn's ExponentiatedGradient on a default {model}",
    "reduction_tuned": "fairlearn's ExponentiatedGradient on an accuracy-tuned {model}",
}
_OTHER_NAMES = {
    "reduction_default_between": "fairlearn's ExponentiatedGradient on a default {model}, "
                                 "bounded between the groups",
    "reduction_tuned_between": "fairlearn's ExponentiatedGradient on an accuracy-tuned "
                               "{model}, bounded between the groups",
    "gp": "Optuna's GPSampler, hyperparameters alone",
    "fairbo_correlation_remover": "fairtune, CorrelationRemover inside the search",
    "fairbo_auto": "fairtune, the three mitigations inside the search",
}


def _name(method: str, model: str) -> str:
    return {**NAMES, **_OTHER_NAMES}.get(method, method).format(model=_MODELS.get(model, model))


def _load(paths: list[str]) -> pd.DataFrame:
    """The rows of the result files (``.csv`` or ``.csv.gz``; a ``.csv`` that is not there is
    read from its ``.gz``), the last row of a split and method kept."""
    found = [p if Path(p).exists() or not Path(p + ".gz").exists() else p + ".gz"
             for p in map(str, paths)]
    frame = pd.concat([pd.read_csv(p) for p in found], ignore_index=True)
    return frame.drop_duplicates(list(KEY), keep="last")


def _cells(frame: pd.DataFrame, dataset: str, model: str, limit: str) -> dict[str, tuple]:
    """Per method of one setting: (mean test accuracy, splits fair on test, splits)."""
    setting = frame[(frame["dataset"] == dataset) & (frame["model"] == model)
                    & (frame["limit"] == limit)]
    return {m: (g["test_accuracy"].mean(), int((g["test_gap"] <= BOUND).sum()), len(g))
            for m, g in setting.groupby("method")}


def headline(args: argparse.Namespace) -> None:
    """The page's table: per model and limit, a row per method of ``NAMES`` and, per dataset,
    its mean test accuracy and the splits whose model meets the limit on the test split (a
    search without a fair trial delivers no model: not fair, left out of the mean). Below it,
    the fairtune searches against each fairlearn baseline, split by split, and each dataset's
    test split: its rows per group and the standard error of a demographic-parity gap on it."""
    frame = _load(args.paths)
    for model in args.models:
        for limit in args.limits:
            cells = {d: _cells(frame, d, model, limit) for d in args.datasets}
            print(f"\n{_MODELS.get(model, model)}, {limit.replace('_', ' ')} <= {BOUND:g}\n")
            print("| method | " + " | ".join(f"{_DATASETS.get(d, d)}: test accuracy | fair on "
                                              "test" for d in args.datasets) + " |")
            print("|---|" + "---:|---:|" * len(args.datasets))
            for method in NAMES:
                if any(method in cells[d] for d in args.datasets):
                    row = [f"{c[0]:.3f} | {c[1]} of {c[2]}" if (c := cells[d].get(method))
                           else "- | -" for d in args.datasets]
                    print(f"| {_name(method, model)} | " + " | ".join(row) + " |")
            _versus(frame, model, limit, args.datasets)
    _test_rows(args.datasets)
    if args.plot:
        _plot(frame, args.models[0], args.limits, args.datasets, args.plot)


def _versus(frame: pd.DataFrame, model: str, limit: str, datasets_: list[str]) -> None:
    """Each fairtune search's test accuracy against each fairlearn baseline's, split by split:
    wins / ties / losses and the sign test's p (no model counts as the worst outcome)."""
    print()
    for dataset in datasets_:
        setting = frame[(frame["dataset"] == dataset) & (frame["model"] == model)
                        & (frame["limit"] == limit)]
        by = {m: g.set_index("split")["test_accuracy"] for m, g in setting.groupby("method")}
        for search in ("fairbo_threshold", "fairbo_threshold_margin", "fairbo_reduction"):
            if search not in by:
                continue
            parts = []
            for baseline in ("threshold_default", "threshold_tuned", "reduction_default",
                             "reduction_tuned", "fairbo_threshold"):
                if baseline in by and baseline != search:
                    common = by[search].index.intersection(by[baseline].index)
                    w, t, l, p = paired(by[search][common], by[baseline][common])
                    parts.append(f"{baseline} {w} / {t} / {l} (p = {p:.2g})")
            print(f"- {_DATASETS.get(dataset, dataset)}, {search} against: " + "; ".join(parts))


def _test_rows(datasets_: list[str]) -> None:
    """Each dataset's test split (split 0): its rows per group, and the standard error of a
    demographic-parity gap measured on it for a model that predicts 1 at the test labels'
    base rate in every group (``sqrt(p (1 - p) (1/n_a + 1/n_b))`` for the two largest groups)."""
    print()
    for dataset in datasets_:
        objective = _objective(dataset, "xgboost", "demographic_parity", 0)
        counts = objective.s_test.value_counts()
        p = float(objective.y_test.mean())
        se = np.sqrt(p * (1 - p) * (1 / counts.iloc[0] + 1 / counts.iloc[1]))
        groups = ", ".join(f"{n} {g}" for g, n in counts.items())
        print(f"- {_DATASETS.get(dataset, dataset)}: {len(objective.y_test)} test rows "
              f"({groups}); a demographic-parity gap measured on them has a standard error of "
              f"{se:.3f} at the base rate {p:.2f}")


_STYLES = {  # fairtune's searches as stars, fairlearn's baselines as circles, no limit as x
    "default": ("tab:gray", "x"), "tpe_accuracy": ("k", "x"), "fairbo": ("tab:red", "^"),
    "fairbo_threshold": ("tab:purple", "*"), "fairbo_threshold_margin": ("tab:orange", "*"),
    "fairbo_reduction": ("tab:green", "*"), "threshold_default": ("tab:blue", "o"),
    "threshold_tuned": ("tab:cyan", "o"), "reduction_default": ("tab:olive", "s"),
    "reduction_tuned": ("tab:brown", "s"),
}


def _plot(frame: pd.DataFrame, model: str, limits: list[str], datasets_: list[str],
          path: str) -> None:
    """Mean test accuracy against the share of splits whose model meets the limit on the test
    split, one point per method: a row of panels per limit, a column per dataset, the legend
    in one column below them (two panels and the long method names side by side would not fit
    the documentation's column)."""
    rows, legend_height = len(limits), 0.18 * len(_STYLES)
    fig, axes = figure(rows + 1, len(datasets_), squeeze=False,
                       figsize=(min(3.6 * len(datasets_), COLUMN_INCHES),
                                2.9 * rows + legend_height),
                       gridspec_kw={"height_ratios": [2.9] * rows + [legend_height]})
    handles: dict[str, Any] = {}
    for i, limit in enumerate(limits):
        for j, dataset in enumerate(datasets_):
            ax = axes[i][j]
            cells = _cells(frame, dataset, model, limit)
            for method, (color, marker) in _STYLES.items():
                if method in cells:
                    accuracy, fair, n = cells[method]
                    handles[method] = ax.scatter(fair / n, accuracy, color=color, marker=marker,
                                                 s=110 if marker == "*" else 40)
            ax.set_xlim(-0.05, 1.05)
            ax.set_title(f"{_DATASETS.get(dataset, dataset)}, {limit.replace('_', ' ')} <= "
                         f"{BOUND:g}", fontsize=10)
            ax.set_xlabel("share of splits fair on test")
            if j == 0:
                ax.set_ylabel("test accuracy (mean)")
    methods = [m for m in _STYLES if m in handles]
    legend_row(axes, [handles[m] for m in methods], [_name(m, model) for m in methods])
    save_figure(fig, path)


def settle(args: argparse.Namespace) -> None:
    """How many of each method's test verdicts one test split settles.

    Per setting and method with the test gap's 95 % bootstrap interval recorded
    (``test_gap_low``, ``test_gap_high``: :func:`fairtune.fairness.metric_interval` on the test
    rows): the splits fair on test, those whose whole interval lies under the limit (the
    test split settles that the model keeps it) or over it (that the model breaks it), those
    whose interval holds the limit (the test split cannot tell), and the interval's mean
    half-width.
    """
    frame = _load(args.paths)
    if "test_gap_low" not in frame:
        raise SystemExit("no row has the test gap's interval (columns test_gap_low, "
                         "test_gap_high): run the methods again with this script")
    frame = frame[frame["test_gap_low"].notna()]
    print("| data, model, limit | method | splits | fair on test | settled under the limit | "
          "settled over the limit | the limit inside the interval | half-width (mean) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    order = {m: i for i, m in enumerate(METHODS)}
    settings = sorted(frame.groupby(["dataset", "model", "limit"]), key=lambda item: (
        list(_DATASETS).index(item[0][0]), item[0][1] != "xgboost",
        item[0][2] != "demographic_parity"))
    for (dataset, model, limit), group in settings:
        for method, g in sorted(group.groupby("method"), key=lambda x: order.get(x[0], 99)):
            under = int((g["test_gap_high"] <= BOUND).sum())
            over = int((g["test_gap_low"] > BOUND).sum())
            print(f"| {_DATASETS.get(dataset, dataset)}, {_MODELS.get(model, model)}, "
                  f"{limit.replace('_', ' ')} | {_name(method, model)} | {len(g)} | "
                  f"{int((g['test_gap'] <= BOUND).sum())} | {under} | {over} | "
                  f"{len(g) - under - over} | "
                  f"{((g['test_gap_high'] - g['test_gap_low']) / 2).mean():.3f} |")


def timing(args: argparse.Namespace) -> None:
    """Where the time of ``fairtune tune --mitigation ...`` goes, at default threads and pinned.

    Each setting runs in a fresh process (thread pools are sized when the libraries load):
    the command end to end, then the same study from Python with timers around the sampler,
    the pipelines' fits and their predictions.
    """
    if args.threads is None:
        from benchmarks._common import run_in_both_thread_settings

        print("| threads | mitigation | dataset | trials | `fairtune tune` end to end (s) | "
              "sampler (s) | fitting model + mitigation (s) | predicting (s) | the rest (s) |")
        print("|---|---|---|---:|---:|---:|---:|---:|---:|")
        run_in_both_thread_settings("benchmarks.vs_mitigation", [
            "timing", "--datasets", *args.datasets, "--n-trials", str(args.n_trials),
            "--timing-mitigations", *args.timing_mitigations,
        ])
        return
    import subprocess
    import sys

    from benchmarks._common import THREAD_LABELS

    for dataset in args.datasets:
        for mitigation in args.timing_mitigations:
            command = [
                sys.executable, "-m", "fairtune.cli", "tune", "--dataset", dataset, "--model",
                "xgboost", "--limit", f"demographic_parity<={BOUND}", "--n-trials",
                str(args.n_trials), "--test-size", str(TEST_SIZE), "--no-progress",
            ] + ([] if mitigation == "none" else ["--mitigation", mitigation])
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            end_to_end = time.perf_counter() - start
            spent = {"sampler": 0.0, "fit": 0.0, "predict": 0.0}
            # The sampler's public method is timed; fits and predictions are recorded by the
            # trials themselves (FIT_TIMES_KEY, SCORE_TIMES_KEY).
            original = add_timer(FairBOSampler, "sample_relative", spent, "sampler")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                objective = FairObjective(
                    dataset, "xgboost", limits=f"demographic_parity<={BOUND}",
                    test_size=TEST_SIZE, mitigation=None if mitigation == "none" else mitigation,
                )
            study = optuna.create_study(direction="maximize", sampler=FairBOSampler(seed=0))
            start = time.perf_counter()
            study.optimize(objective, n_trials=args.n_trials)
            total = time.perf_counter() - start
            FairBOSampler.sample_relative = original  # type: ignore[method-assign]
            for trial in study.trials:
                spent["fit"] += sum(trial.user_attrs.get(FIT_TIMES_KEY, []))
                spent["predict"] += sum(trial.user_attrs.get(SCORE_TIMES_KEY, []))
            rest = total - sum(spent.values())
            print(f"| {THREAD_LABELS[args.threads]} | {mitigation} | {dataset} | "
                  f"{args.n_trials} | {end_to_end:.1f} | {spent['sampler']:.1f} | "
                  f"{spent['fit']:.1f} | {spent['predict']:.1f} | {rest:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["run", "headline", "settle", "timing"])
    parser.add_argument("paths", nargs="*", help="CSV files to summarize")
    parser.add_argument("--datasets", nargs="+", default=None,
                        help="run: compas adult german; headline: compas adult")
    parser.add_argument("--models", nargs="+", default=None,
                        help="run: xgboost random_forest; headline: xgboost")
    parser.add_argument("--limits", nargs="+", default=None,
                        choices=["demographic_parity", "equalized_odds"],
                        help="run: both; headline: demographic_parity")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--splits", type=int, default=20)
    parser.add_argument("--first-split", type=int, default=0)
    parser.add_argument("--n-trials", type=int, default=50)
    parser.add_argument("--plot", metavar="PNG", help="with headline: the page's figure")
    parser.add_argument("--out", default="vs_mitigation.csv")
    parser.add_argument("--timing-mitigations", nargs="+", default=["none", "threshold"],
                        help="with timing: the --mitigation values to time ('none' for none)")
    parser.add_argument("--threads", choices=["default", "pinned"],
                        help=argparse.SUPPRESS)  # set by `timing` for its child processes
    parser.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_intermixed_args()
    summary = args.command == "headline"
    args.datasets = args.datasets or (["compas", "adult"] if summary
                                      else ["compas", "adult", "german"])
    args.models = args.models or (["xgboost"] if summary else ["xgboost", "random_forest"])
    args.limits = args.limits or (["demographic_parity"] if summary
                                  else ["demographic_parity", "equalized_odds"])
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    if args.command == "run":
        run(args)
    elif args.command == "timing":
        timing(args)
    else:
        args.paths = args.paths or [args.out]
        {"headline": headline, "settle": settle}[args.command](args)


if __name__ == "__main__":
    main()
