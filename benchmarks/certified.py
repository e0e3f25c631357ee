"""Is a certified model fair on the population as often as its certificate says, and at what price?

A synthetic population where the truth is known: a sensitive group (35 % of the rows) with a
higher base rate, a feature that is a noisy proxy of the group, and features that carry the
label. Each seed draws a table of ``--rows`` rows (a quarter kept as a test split, which no
method uses) and tunes XGBoost (or ``--model``) with fairlearn's ThresholdOptimizer inside the
search under ``<metric> <= 0.05``; every deployed model's true gap and accuracy are then computed
on a million fresh rows of the same generator (a randomized model's expected predictions, so
the true rates, not one draw's). The methods, on the same table and seed:

* ``search``: fairtune's best fair trial, refitted on the tuning rows (the README's quickstart);
* ``margin``: the same, validated against the limit less 0.01 (``margin=0.01``);
* ``gap0``: the same, aimed at a gap of 0.005 (``margin=0.045``), what buys reliability today;
* ``certified``: ``confidence=0.95``: the certified model, or a refusal (the exact test, the
  default); ``certified_score`` and ``certified_hoeffding`` with ``bound="score"`` and
  ``bound="hoeffding"``; ``certified_bonferroni`` rows are the test before the
  intersection-union test (Hoeffding's bound split by Bonferroni over pairs, signs and five
  candidates), kept from its runs;
* ``threshold``: fairlearn's ThresholdOptimizer (exact parity on the tuning rows) on a default
  model;
* ``accuracy_then_threshold``: the model tuned for accuracy alone (Optuna's TPE), then the
  ThresholdOptimizer.

Usage:
    OMP_NUM_THREADS=1 python -m benchmarks.certified run --rows 20000 100000 \\
        --metrics demographic_parity equalized_odds --seeds $(seq 0 39) \\
        --out benchmarks/results/certified.csv
    python -m benchmarks.certified summarize benchmarks/results/certified.csv \\
        --plot docs/images/certified.png
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import optuna
import pandas as pd

from benchmarks._common import (
    COLUMN_INCHES,
    append_rows,
    done_keys,
    figure,
    read_rows,
    save_figure,
    sign_test,
)

LIMIT = 0.05
POPULATION_ROWS = 1_000_000
METHODS = ("search", "margin", "gap0", "certified", "certified_score", "certified_hoeffding",
           "threshold", "accuracy_then_threshold")
CERTIFIED = ("certified_bonferroni", "certified_hoeffding", "certified_score", "certified")
FIELDS = ["rows", "metric", "model", "seed", "method", "refused", "true_gap", "fair",
          "accuracy", "test_gap", "test_accuracy", "n_trials", "seconds"]


def population(n: int, seed: int) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """``n`` rows of the population: features (with the group and its proxy), labels, groups."""
    rng = np.random.default_rng(seed)
    member = rng.random(n) < 0.35
    merit = rng.normal(size=n)
    other = rng.normal(size=n)
    proxy = member + rng.normal(scale=0.8, size=n)
    logit = 1.2 * merit + 0.5 * other + 0.8 * member - 0.6
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(int)
    group = pd.Series(np.where(member, "A", "B"), name="group")
    X = pd.DataFrame({"merit": merit + rng.normal(scale=0.6, size=n), "other": other,
                      "proxy": proxy, "group": pd.Categorical(group)})
    return X, pd.Series(y, name="y"), group


def _expected(model, X, group) -> np.ndarray:
    """The deployed model's probability of predicting 1 for each row (0/1 for a model that
    does not randomize)."""
    from fairtune.tuning import ReductionClassifier, ThresholdClassifier

    if isinstance(model, (ThresholdClassifier, ReductionClassifier)):
        return model.predict_proba(X, sensitive_features=group)[:, 1]
    return np.asarray(model.predict(X), dtype=float)


def _scores(model, data, metric) -> tuple[float, float]:
    from fairtune.tuning._trial import fairness_value, metric_score

    X, y, group = data
    p = _expected(model, X, group)
    return (fairness_value(metric, y.to_numpy(), p, group),
            metric_score("accuracy", y.to_numpy(), p, None))


def _threshold_on(model_params, objective, metric):
    """fairlearn's ThresholdOptimizer (through fairtune's wrapper, exact parity) around the
    pipeline of ``model_params``, fitted on the tuning rows."""
    from fairtune.tuning import ThresholdClassifier

    pipeline = objective.make_pipeline(optuna.trial.FixedTrial(model_params))
    wrapped = ThresholdClassifier(pipeline, constraint=metric, tolerance=None,
                                  random_state=objective.random_state)
    return wrapped.fit(objective.X_dev, objective.y_dev, sensitive_features=objective.s_dev)


class Deployed(NamedTuple):
    """What one method deploys on one table."""

    method: str
    model: Any
    """The deployed model, or None for a refusal."""
    refusal: str
    """Why nothing is deployed ("" when a model is)."""
    n_trials: int
    """The trials run (0 for a refusal before any trial and for the default model)."""
    seconds: float
    objective: Any
    """The FairObjective the model was tuned with (its test split), None if refused before."""


def deployed_models(data, model: str, metric: str, seed: int, n_trials: int,
                    methods=METHODS, safety_size=None, test_size=0.25, limit=LIMIT
                    ) -> Iterator[Deployed]:
    """The ``methods`` of :data:`METHODS` on one table (a dataset's name or ``(X, y, group)``),
    in that order: the searches, then the two ThresholdOptimizer baselines."""
    from fairtune.tuning import FairObjective, NotCertifiedError

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    limit = f"{metric}<={limit}"
    searches = {"search": {}, "margin": {"margin": 0.01}, "gap0": {"margin": 0.045},
                "certified": {"confidence": 0.95, "safety_size": safety_size},
                "certified_score": {"confidence": 0.95, "bound": "score",
                                    "safety_size": safety_size},
                "certified_hoeffding": {"confidence": 0.95, "bound": "hoeffding",
                                        "safety_size": safety_size}}
    for method, extra in searches.items():
        if method not in methods:
            continue
        start = time.perf_counter()
        try:
            objective = FairObjective(data, model, limits=limit, mitigation="threshold",
                                      test_size=test_size, random_state=seed, **extra)
        # Too few rows for the limit (safety rows to certify it, or validation rows per group
        # for a limit tightened to 0.005): refused before any trial.
        except ValueError as refusal:
            yield Deployed(method, None, str(refusal), 0, time.perf_counter() - start, None)
            continue
        study = objective.create_study(seed=seed)
        study.optimize(objective, n_trials=n_trials)
        try:
            deployed, refusal = objective.refit_best(study), ""
        except (NotCertifiedError, ValueError) as error:  # or no fair trial at all
            deployed, refusal = None, str(error)
        yield Deployed(method, deployed, refusal, n_trials, time.perf_counter() - start,
                       objective)
    # The baselines: a default model, and the model tuned for accuracy alone, each with the
    # ThresholdOptimizer fitted on the tuning rows.
    if "threshold" not in methods and "accuracy_then_threshold" not in methods:
        return
    start = time.perf_counter()
    base = FairObjective(data, model, limits=limit, test_size=test_size, random_state=seed)
    if "threshold" in methods:
        yield Deployed("threshold", _threshold_on(base.default_params(), base, metric), "", 0,
                       time.perf_counter() - start, base)
    if "accuracy_then_threshold" not in methods:
        return
    start = time.perf_counter()
    accurate = optuna.create_study(direction="maximize",
                                   sampler=optuna.samplers.TPESampler(seed=seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no limit binds: accuracy alone decides
        loose = FairObjective(data, model, limits=f"{metric}<=1", test_size=test_size,
                              random_state=seed)
    accurate.optimize(loose, n_trials=n_trials)
    yield Deployed("accuracy_then_threshold",
                   _threshold_on(accurate.best_trial.params, loose, metric), "", n_trials,
                   time.perf_counter() - start, loose)


def run_one(rows: int, metric: str, model: str, seed: int, n_trials: int,
            population_data, methods=METHODS, safety_size=None) -> list[dict]:
    """The ``methods`` on one table, judged on the population; rows of the result file."""
    out = []
    for d in deployed_models(population(rows, seed), model, metric, seed, n_trials, methods,
                             safety_size):
        row = {"rows": rows, "metric": metric, "model": model, "seed": seed,
               "method": d.method, "refused": d.model is None, "n_trials": d.n_trials,
               "seconds": round(d.seconds, 2)}
        if d.model is not None:
            gap, accuracy = _scores(d.model, population_data, metric)
            test_gap, test_accuracy = _scores(
                d.model, (d.objective.X_test, d.objective.y_test, d.objective.s_test), metric)
            row.update(true_gap=gap, fair=gap <= LIMIT, accuracy=accuracy,
                       test_gap=test_gap, test_accuracy=test_accuracy)
        out.append(row)
    return out


def run(args: argparse.Namespace) -> None:
    done = {key[:4] for key in done_keys(args.out, ["rows", "metric", "model", "seed", "method"])
            if key[4] in args.methods} if args.out else set()
    for rows in args.rows:
        for metric in args.metrics:
            population_data = None
            for seed in args.seeds:
                if (str(rows), metric, args.model, str(seed)) in done:
                    continue
                if population_data is None:  # one million fresh rows, shared by the seeds
                    population_data = population(POPULATION_ROWS, 10**6 + rows)
                result = run_one(rows, metric, args.model, seed, args.n_trials, population_data,
                                 args.methods, args.safety_size)
                append_rows(args.out, result, FIELDS)
                shown = ", ".join(f"{r['method']} {'refused' if r['refused'] else round(float(r['true_gap']), 4)}"
                                  for r in result)
                print(f"rows {rows} {metric} seed {seed}: {shown}", flush=True)


NAMES = {
    "search": "fairtune, threshold inside",
    "margin": "the same, margin 0.01",
    "gap0": "the same, aimed at a gap of 0.005",
    "certified": "certified at 95 %, exact test",
    "certified_score": "certified at 95 %, score test",
    "certified_hoeffding": "certified at 95 %, Hoeffding",
    "certified_bonferroni": "certified at 95 %, Hoeffding split by Bonferroni",
    "threshold": "ThresholdOptimizer on a default model",
    "accuracy_then_threshold": "tuned for accuracy, then ThresholdOptimizer",
}


def summarize(args: argparse.Namespace) -> None:
    """A table per size and metric (refusals, models over the limit on the population, mean
    accuracy, the certified model's paired wins / ties / losses with a sign test), and the three
    curves of the certified models against the rows."""
    by = defaultdict(dict)
    for row in read_rows(args.files):
        by[(int(row["rows"]), row["metric"])].setdefault(row["method"], {})[row["seed"]] = row
    curves = []
    for (size, metric), methods in sorted(by.items()):
        certified = methods.get("certified", {})
        # A refusal deploys nothing: it counts as the accuracy of the majority class (what a
        # reviewer falls back to), on the same population.
        _, labels, _ = population(POPULATION_ROWS, 10**6 + size)
        fallback = max(labels.mean(), 1 - labels.mean())
        # A model that predicts one class for everyone has the accuracy of that class.
        constant = (labels.mean(), 1 - labels.mean())
        print(f"\n{size:,} rows, {metric} <= {LIMIT}:")
        print(f"{'method':<52} {'seeds':>5} {'refused':>7} {'constant':>8} "
              f"{'broke the limit':>15} {'accuracy':>8}  {'certified w/t/l (p)':>24}")
        for method in [m for m in NAMES if m in methods]:
            runs = methods[method]
            deployed = [r for r in runs.values() if r["refused"] != "True"]
            broke = sum(r["fair"] != "True" for r in deployed)
            trivial = sum(np.isclose(float(r["accuracy"]), constant, atol=1e-9).any()
                          for r in deployed)
            accuracy = np.mean([float(r["accuracy"]) for r in deployed]) if deployed else np.nan
            paired = ""
            if method != "certified" and certified:
                score = {seed: float(r["accuracy"]) if r["refused"] != "True" else fallback
                         for seed, r in runs.items()}
                mine = {seed: float(r["accuracy"]) if r["refused"] != "True" else fallback
                        for seed, r in certified.items()}
                common = sorted(set(score) & set(mine))
                wins = sum(mine[k] > score[k] for k in common)
                losses = sum(mine[k] < score[k] for k in common)
                ties = len(common) - wins - losses
                paired = f"{wins}/{ties}/{losses} ({sign_test(wins, losses):.2g})"
            print(f"{NAMES[method]:<52} {len(runs):>5} {len(runs) - len(deployed):>7} "
                  f"{trivial:>8} {broke:>6} of {len(deployed):<6} {accuracy:>8.4f}  "
                  f"{paired:>24}")
            if method.startswith("certified") or method == "margin":
                curves.append((metric, method, size, accuracy, len(deployed) / len(runs),
                               broke / len(runs)))
    if args.plot:
        _plot(curves, args.plot)


def _plot(curves, path) -> None:
    """The Seldonian Toolkit's three curves against the rows: the certified model's accuracy
    on the population, the share of seeds certified, the share over the limit there."""
    metrics = sorted({c[0] for c in curves})
    fig, axes = figure(len(metrics), 3, figsize=(COLUMN_INCHES, 2.3 * len(metrics) + 0.5),
                       squeeze=False, sharex=True)
    titles = ("accuracy (certified)", "share certified", "share over the limit")
    for row, metric in enumerate(metrics):
        shown = ("margin", *CERTIFIED)
        for method in [m for m in shown if any(c[:2] == (metric, m) for c in curves)]:
            points = sorted(c[2:] for c in curves if c[:2] == (metric, method))
            sizes = [p[0] for p in points]
            style = dict(marker="o", label=NAMES[method].replace("certified at 95 %, ", ""),
                         linestyle="--" if method == "certified_bonferroni" else "-")
            if method == "margin":  # the reference: no certificate, a margin of 0.01
                style.update(color="0.6", label="margin 0.01, not certified")
            for column in range(3):
                axes[row, column].plot(sizes, [p[column + 1] for p in points], **style)
        for column, ax in enumerate(axes[row]):
            ax.set_xscale("log")
            ax.set_title(f"{metric.replace('_', ' ')}: {titles[column]}", fontsize=8)
            if column:
                ax.set_ylim(-0.03, 1.03)
        axes[row, 2].axhline(0.05, color="tab:red", linestyle=":", linewidth=1)
    for ax in axes[-1]:
        ax.set_xlabel("rows", fontsize=8)
    axes[0, 2].legend(fontsize=7, loc="upper right")
    save_figure(fig, path)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--rows", type=int, nargs="+", default=[20000, 100000])
    r.add_argument("--metrics", nargs="+", default=["demographic_parity", "equalized_odds"])
    r.add_argument("--model", default="xgboost")
    r.add_argument("--seeds", type=int, nargs="+", default=list(range(40)))
    r.add_argument("--n-trials", type=int, default=50)
    r.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    r.add_argument("--safety-size", type=float)
    r.add_argument("--out", required=True)
    s = sub.add_parser("summarize")
    s.add_argument("files", nargs="+")
    s.add_argument("--plot")
    args = parser.parse_args(argv)
    (run if args.command == "run" else summarize)(args)


if __name__ == "__main__":
    main()
