"""fairtune against what practitioners use instead: fairlearn's mitigations on a default model.

Every method runs on the same stratified splits: 25 % of the rows are a test split that no
method sees; the other 75 % are the tuning rows (the tuned methods validate on 30 % of them,
``FairObjective``'s default). Each method ends with one model fitted on the tuning rows, scored
on the test split: accuracy, the limit's fairness gap, whether the limit holds, whether the
model predicts one class for everyone, and whether it needs the sensitive feature at
prediction time.

Methods (``--methods``):

* ``default``: the default model (``XGBClassifier()``, ``RandomForestClassifier()``), no
  mitigation (``--models random_forest_deep``, the forest space of full-depth trees, has the
  same default model as ``random_forest``: the summaries give it that space's rows of the
  methods on the default model where it has none of its own); ``tpe_accuracy``: the search
  space tuned for validation accuracy alone (Optuna's ``TPESampler``, ``--n-trials`` trials),
  refitted on the tuning rows;
* ``threshold_default`` / ``threshold_tuned``: fairlearn's ``ThresholdOptimizer`` on the
  default / the accuracy-tuned model (constraint of the limit, ``tol`` = the bound where
  fairlearn supports it), fitted on the tuning rows as fairlearn's ``prefit=False`` does;
* ``reduction_default`` / ``reduction_tuned``: fairlearn's ``ExponentiatedGradient`` (the
  limit's moment with ``difference_bound`` = the bound, its defaults otherwise);
  ``reduction_default_between`` / ``reduction_tuned_between``: the same with the bound on the
  difference between the groups, as the limit measures it (fairlearn's moments bound each
  group's distance to the overall rate; ``ReductionClassifier(difference="between_groups")``
  gives the moment the bound that keeps every two groups within the limit on the training
  rows);
* ``fairbo`` and ``gp``: ``FairObjective`` without mitigation tuned by ``FairBOSampler`` and by
  Optuna's ``GPSampler`` (which reads Optuna 5's constraints), the best fair trial refitted with
  ``refit_best``;
* ``fairbo_threshold``, ``fairbo_reduction``, ``fairbo_correlation_remover``, ``fairbo_auto``:
  ``FairObjective(mitigation=...)`` (``auto`` = the list of all three) tuned by FairBOSampler;
  ``fairbo_threshold_cv3``: the threshold search scored by 3-fold cross-validation of the tuning
  rows (``cv=3``: the pooled out-of-fold predictions of every tuning row) instead of one 30 %
  validation split; ``fairbo_threshold_margin``: the threshold search tuned for the bound
  minus ``MARGIN`` (0.01) on validation, and checked on test against the bound;
  ``fairbo_threshold_holdout``: the threshold search with the thresholds fitted on ``HOLDOUT``
  (30 %) of the training rows that the model does not train on, instead of the model's own
  rows; ``fairbo_reduction_hidden``: the reduction search with the sensitive feature kept out
  of the model's inputs (``use_sensitive_feature=False``, and on German credit
  ``personal_status_sex``, which determines ``sex``, with it: ``PROXIES``), whose models need
  no sensitive feature at prediction, and ``fairbo_reduction_hidden_margin`` the same with
  ``MARGIN``; ``fairbo_reduction_blind``: the hidden search with the columns whose values give
  the sensitive feature on many rows kept out too (Adult's ``relationship``: ``NAMING``);
  ``fairbo_reduction_staged``: the model tuned for validation accuracy first (``tpe_accuracy``'s
  search), then ``STAGED_TRIALS`` (20) FairBOSampler trials over the reduction's settings
  alone around it, the first one ExponentiatedGradient as set up for the limit
  (``FairObjective(lambda trial: clone(tuned_model), mitigation="reduction")``);
* ``<search>_draw`` (the searches with ``threshold`` or ``reduction``): the same search with
  every trial scored by one draw of the mitigation's randomized predictions instead of their
  expectation (``FairObjective``'s default: the probability of predicting 1 per row).

``SWEEP`` (``threshold_tuned_<b>``, ``reduction_tuned_between_<b>``, the same with
``default``; ``b`` in ``SWEEP_BOUNDS``): the baselines aimed at other bounds than the limit, for
``frontier`` (not methods a practitioner would pick: they map fairlearn's trade-off around the
default and the accuracy-tuned model).

The FairBOSampler methods start, as ``fairtune tune`` does, from the untuned model
(``FairObjective.enqueue_defaults``: trial 0 is the default model with the mitigation aimed at
the bound); ``fairbo_threshold_cold`` and ``fairbo_reduction_cold`` are the same searches
without that first trial, and ``gp`` is Optuna's sampler as a user runs it, without it too.

The fairtune methods with a validation split also record the model the study validated
(``refit_best(on="training")``, columns ``validated_*``) next to the refit on all tuning rows.

Usage (rows already in ``--out`` are skipped, so a run can be resumed or extended; ``headline``
prints one row per dataset, model and limit, the table of the README; ``frontier`` prints,
from ``SWEEP`` rows, the accuracy and gap of fairlearn's mitigations at each bound and the most
accurate of them that meets the limit on the test split (chosen with the test split); ``settle``
counts, from rows with the test gap's 95 % bootstrap interval (columns ``test_gap_low``,
``test_gap_high``, which ``run`` records), the verdicts that one test split settles; ``noise``
draws the test gap of a model that meets the limit exactly on the population (rates equal across
the groups), on each split's test rows, and counts how often it is within the bound, next to the
counts the methods of the CSVs given reached; ``timing``
shows where the time of ``fairtune tune --mitigation ...`` goes, with no thread variable set
and with ``OMP_NUM_THREADS=1``, each in a fresh process):
    OMP_NUM_THREADS=1 python -m benchmarks.vs_mitigation run --datasets compas adult \\
        --models xgboost --limits demographic_parity --splits 20 \\
        --out benchmarks/results/vs_mitigation.csv
    python -m benchmarks.vs_mitigation summarize benchmarks/results/vs_mitigation.csv \\
        --plot docs/images/vs_mitigation.png
    python -m benchmarks.vs_mitigation headline benchmarks/results/vs_mitigation.csv
    python -m benchmarks.vs_mitigation frontier benchmarks/results/vs_mitigation.csv \
        benchmarks/results/vs_mitigation_sweep.csv
    python -m benchmarks.vs_mitigation settle benchmarks/results/vs_mitigation_intervals.csv
    python -m benchmarks.vs_mitigation noise benchmarks/results/vs_mitigation.csv
    python -m benchmarks.vs_mitigation timing --datasets compas german --n-trials 50
"""

from __future__ import annotations

import argparse
import csv
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pandas as pd

from benchmarks._common import wins_ties_losses

from fairtune import datasets
from fairtune.fairness import METRICS, best_fair_trial, metric_interval
from fairtune.samplers import FairBOSampler
from fairtune.tuning import FairObjective, ReductionClassifier, ThresholdClassifier

BOUND = 0.05
TEST_SIZE = 0.25
MITIGATION = {
    "fairbo_threshold": "threshold", "fairbo_threshold_cold": "threshold",
    "fairbo_threshold_cv3": "threshold",
    "fairbo_reduction": "reduction", "fairbo_reduction_cold": "reduction",
    "fairbo_correlation_remover": "correlation_remover",
    "fairbo_auto": ["threshold", "reduction", "correlation_remover"],
}
# The searches whose mitigation predicts at random, each also scored by one draw ("_draw").
DRAWN = tuple(
    f"{m}_draw" for m, names in MITIGATION.items() if {"threshold", "reduction"} & set(
        [names] if isinstance(names, str) else names)
)
MITIGATION.update({m: MITIGATION[m.removesuffix("_draw")] for m in DRAWN})
MITIGATION["fairbo_threshold_margin"] = "threshold"
MITIGATION["fairbo_threshold_holdout"] = "threshold"
MITIGATION["fairbo_reduction_hidden"] = "reduction"
MITIGATION["fairbo_reduction_hidden_margin"] = "reduction"
MITIGATION["fairbo_reduction_blind"] = "reduction"
MITIGATION["fairbo_reduction_staged"] = "reduction"
HOLDOUT = 0.3  # fairbo_threshold_holdout fits the thresholds on this fraction of the rows
# fairbo_reduction_staged: FairBOSampler's trials over the reduction's settings (bound and
# iterations) around the accuracy-tuned model, after the accuracy search's trials.
STAGED_TRIALS = 20
MARGIN = 0.01  # fairbo_threshold_margin validates against BOUND - MARGIN
METHODS = (
    "default", "tpe_accuracy", "threshold_default", "reduction_default",
    "reduction_default_between", "threshold_tuned", "reduction_tuned", "reduction_tuned_between",
    "fairbo", "gp", "fairbo_threshold", "fairbo_reduction", "fairbo_correlation_remover",
    "fairbo_auto", "fairbo_threshold_margin", "fairbo_threshold_cold", "fairbo_reduction_cold",
    "fairbo_threshold_cv3", "fairbo_threshold_holdout", "fairbo_reduction_hidden",
    "fairbo_reduction_hidden_margin", "fairbo_reduction_blind", "fairbo_reduction_staged", *DRAWN,
)
# The trade-off fairlearn's own mitigations reach around each model, bound by bound
# (``sweep``; ThresholdOptimizer's tolerance only where fairlearn has one).
SWEEP_BOUNDS = (0.01, 0.02, 0.03, 0.04, 0.06, 0.08)  # 0.05: threshold_tuned, ..._between
SWEEP = tuple(f"{kind}_{model}{between}_{b:g}" for model in ("tuned", "default")
              for kind, between in (("threshold", ""), ("reduction", "_between"))
              for b in SWEEP_BOUNDS)


def _aimed(method: str) -> tuple[str, float]:
    """A ``SWEEP`` method's baseline and bound (``reduction_tuned_between_0.02``:
    ``("reduction_tuned_between", 0.02)``); any other method aims at ``BOUND``."""
    if method in SWEEP:
        kind, bound = method.rsplit("_", 1)
        return kind, float(bound)
    return method, BOUND


FAIRLEARN = ("threshold_default", "reduction_default", "reduction_default_between",
             "threshold_tuned", "reduction_tuned", "reduction_tuned_between")
FIELDS = [
    "dataset", "model", "limit", "split", "method", "test_accuracy", "test_gap", "test_fair",
    "one_class", "sensitive_at_prediction", "valid_accuracy", "valid_gap", "best_trial",
    "mitigation_used", "validated_test_accuracy", "validated_test_gap", "seconds",
    "tuning_seconds", "n_trials", "test_gap_low", "test_gap_high",
]
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


# The columns that determine a dataset's sensitive feature exactly, kept out of the model's
# inputs with it by the hidden searches.
PROXIES = {"german": ["personal_status_sex"]}
# The columns whose values give a dataset's sensitive feature on a large share of the rows
# (FairObjective(use_sensitive_feature=False) warns of both kinds), kept out too by the blind
# search: Adult's relationship is Husband or Wife, each one sex but for one row, on 46 % of them.
NAMING = {"adult": ["relationship"]}


def _hidden_columns(dataset: str, method: str) -> list[str]:
    """The columns of ``dataset`` that ``method`` keeps out of the model's inputs with the
    sensitive feature (none for a method that reads it)."""
    if "_blind" in method:
        return PROXIES.get(dataset, []) + NAMING.get(dataset, [])
    return PROXIES.get(dataset, []) if "_hidden" in method else []


def _objective(dataset: str, model: Any, limit: str, split: int, bound: float = BOUND,
               **kwargs: Any) -> FairObjective:
    return FairObjective(
        _dataset(dataset), model, limits=f"{limit}<={bound}", test_size=TEST_SIZE,
        random_state=split, **kwargs,
    )


def _score(objective: FairObjective, pipeline: Any, limit: str) -> dict[str, Any]:
    """Test accuracy, gap and verdict of a fitted pipeline, and whether it is one-class."""
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


def _fixed_model(estimator: Any) -> Any:
    """A ``FairObjective`` model that builds an unfitted copy of ``estimator`` in every trial."""
    from sklearn.base import clone

    def tuned_model(trial: optuna.Trial) -> Any:
        return clone(estimator)

    return tuned_model


def run_one(dataset: str, model: str, limit: str, split: int, method: str, n_trials: int) -> dict:
    row: dict[str, Any] = {"dataset": dataset, "model": model, "limit": limit, "split": split,
                           "method": method, "n_trials": ""}
    start = time.perf_counter()
    tuning_seconds: float | None = None
    staged_seconds = 0.0  # the accuracy search before fairbo_reduction_staged's trials
    method_kind, bound = _aimed(method)
    between = method_kind.endswith("_between")
    if method_kind in ("default", "threshold_default", "reduction_default",
                       "reduction_default_between"):
        objective = _objective(dataset, lambda trial: _default_model(model, split), limit, split)
        pipeline = objective.make_pipeline(optuna.trial.FixedTrial({}))
        if method != "default":
            pipeline = _mitigate(method.split("_")[0], pipeline, limit, split, between, bound)
        fitted = _fit(pipeline, objective)
    elif method_kind in ("tpe_accuracy", "threshold_tuned", "reduction_tuned",
                         "reduction_tuned_between"):
        objective, pipeline, study, tuning_seconds = _tuned(dataset, model, limit, split,
                                                            n_trials)
        if method != "tpe_accuracy":
            pipeline = _mitigate(method.split("_")[0], pipeline, limit, split, between, bound)
        row["n_trials"] = n_trials
        fitted = _fit(pipeline, objective)
    else:
        cv = {"cv": 3} if "_cv3" in method else {}
        space: Any = model
        if method == "fairbo_reduction_staged":
            # The model's hyperparameters fixed at the accuracy search's best; the trials
            # tune the reduction's settings only.
            _, tuned, _, staged_seconds = _tuned(dataset, model, limit, split, n_trials)
            space = _fixed_model(tuned.named_steps["model"])
            start = time.perf_counter()  # the accuracy search counts once, as staged_seconds
        objective = _objective(dataset, space, limit, split, mitigation=MITIGATION.get(method),
                               bound=BOUND - MARGIN if "_margin" in method else BOUND,
                               use_sensitive_feature="_hidden" not in method
                               and "_blind" not in method,
                               drop_columns=_hidden_columns(dataset, method), **cv)
        # The trials' scores of one draw of the randomized predictions instead of their
        # expectation (FairObjective's default).
        objective._score_expected = not method.endswith("_draw")
        if "_holdout" in method:  # the thresholds fitted on rows the model did not train on
            objective._threshold_holdout = HOLDOUT
        sampler = (optuna.samplers.GPSampler(seed=split) if method == "gp"
                   else FairBOSampler(seed=split))
        study = optuna.create_study(direction="maximize", sampler=sampler)
        if method == "fairbo_reduction_staged":
            # Trial 0: ExponentiatedGradient as set up for the limit (the bound, 50
            # iterations) around the tuned model.
            study.enqueue_trial({"reduction_bound": 1.0, "reduction_max_iter": 50})
            study.optimize(objective, n_trials=STAGED_TRIALS)
        else:
            if method != "gp" and "_cold" not in method:
                objective.enqueue_defaults(study)
            study.optimize(objective, n_trials=n_trials)
        tuning_seconds = time.perf_counter() - start + staged_seconds
        row["n_trials"] = n_trials
        best = best_fair_trial(study)
        if best is None:  # no fair trial: the method delivers nothing under the limit
            row["seconds"] = round(time.perf_counter() - start + staged_seconds, 1)
            row["tuning_seconds"] = round(tuning_seconds, 1)
            return {**{k: "" for k in FIELDS}, **row}
        row.update({
            "best_trial": best.number, "valid_accuracy": round(best.value, 5),
            "valid_gap": round(best.user_attrs[f"fairtune:{limit}"], 5),
            "mitigation_used": best.user_attrs.get("fairtune:mitigation_used", "none"),
        })
        fitted = objective.refit_best(study)
        if not cv:  # with cv, every tuning row trained some fold's model: no validated model
            validated = _score(objective, objective.refit_best(study, on="training"), limit)
            row["validated_test_accuracy"] = validated["test_accuracy"]
            row["validated_test_gap"] = validated["test_gap"]
        row["sensitive_at_prediction"] = objective.needs_sensitive_features(best.params) or "no"
    row.update(_score(objective, fitted, limit))
    row.setdefault("sensitive_at_prediction", _needs(method, objective))
    row["seconds"] = round(time.perf_counter() - start + staged_seconds + (tuning_seconds or 0.0)
                           * method.startswith(("threshold_tuned", "reduction_tuned")), 1)
    row["tuning_seconds"] = "" if tuning_seconds is None else round(tuning_seconds, 1)
    return {**{k: "" for k in FIELDS}, **row}


def _needs(method: str, objective: FairObjective) -> str:
    if method.startswith("threshold"):
        return "predict(X, sensitive_features=...)"
    return objective.needs_sensitive_features() or "no"


def run(args: argparse.Namespace) -> None:
    path = Path(args.out)
    done = set()
    fields = FIELDS
    if path.exists():
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            done = {(r["dataset"], r["model"], r["limit"], int(r["split"]), r["method"])
                    for r in reader}
            # A file begun without some columns (the test gap's interval) is extended as is.
            fields = list(reader.fieldnames or FIELDS)
    new = not path.exists()
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        if new:
            writer.writeheader()
        for dataset in args.datasets:
            for model in args.models:
                for limit in args.limits:
                    for split in range(args.first_split, args.first_split + args.splits):
                        for method in args.methods:
                            if (dataset, model, limit, split, method) in done or (
                                    method.startswith(("threshold_tuned_",
                                                       "threshold_default_"))
                                    and limit == "equalized_odds"):  # fitted exactly
                                continue
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore")  # xgboost / sklearn chatter
                                row = run_one(dataset, model, limit, split, method, args.n_trials)
                            writer.writerow(row)
                            f.flush()
                            print(f"{dataset} {model} {limit} split {split:2d} {method:27s} "
                                  f"acc {row['test_accuracy']} gap {row['test_gap']} "
                                  f"({row['seconds']} s)", flush=True)
                        _TUNED_CACHE.clear()


# ---------------------------------------------------------------------------------------------
# Summary


VALIDATED = "@validated"


# Methods that never read the search space: with one default model, two spaces share them.
UNTUNED = ("default", "threshold_default", "reduction_default", "reduction_default_between")
# The spaces whose default model is the same (``_default_model``): ``RandomForestClassifier()``.
SAME_DEFAULT = {"random_forest_deep": "random_forest"}


def _load(paths: list[str]) -> pd.DataFrame:
    """The rows, and for each tuned fairtune method a method ``<name>@validated``: the model
    the study validated (``refit_best(on="training")``) instead of the refit. A space of
    ``SAME_DEFAULT`` gets the ``UNTUNED`` rows it lacks from the space whose default model is
    the same (the same model on the same split: the same predictions)."""
    frame = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    key = ["dataset", "model", "limit", "split", "method"]
    frame = frame.drop_duplicates(key, keep="last")
    for space, same in SAME_DEFAULT.items():
        cells = frame.loc[frame["model"] == space, ["dataset", "limit"]].drop_duplicates()
        shared = frame[(frame["model"] == same) & frame["method"].isin(UNTUNED)].merge(cells)
        shared = shared.assign(model=space)
        frame = pd.concat([frame, shared], ignore_index=True).drop_duplicates(key, keep="first")
    validated = frame[frame["validated_test_accuracy"].notna()].copy()
    validated["method"] = validated["method"] + VALIDATED
    validated["test_accuracy"] = validated["validated_test_accuracy"]
    validated["test_gap"] = validated["validated_test_gap"]
    validated["test_fair"] = (validated["test_gap"] <= BOUND).astype(int)
    validated["one_class"] = np.nan  # not recorded for the validated model
    return pd.concat([frame, validated], ignore_index=True)


def _methods(present: Any) -> list[str]:
    order = [m for base in METHODS for m in (base, base + VALIDATED)]
    return [m for m in order if m in present]


def _utility(frame: pd.DataFrame, margin: float = 0.0) -> pd.Series:
    """Test accuracy; a model over the limit (+ margin) on test, or none at all, is -inf."""
    fair = frame["test_gap"] <= BOUND + margin
    return frame["test_accuracy"].where(fair & frame["test_accuracy"].notna(), -np.inf)


def summarize(args: argparse.Namespace) -> None:
    frame = _load(args.paths)
    for (dataset, model, limit), group in _settings(frame):
        splits = sorted(group["split"].unique())
        print(f"\n### {dataset}, {model}, {limit} <= {BOUND} ({len(splits)} splits)\n")
        best = args.fairtune
        by = {m: g.set_index("split") for m, g in group.groupby("method")}
        print("| method | splits | test accuracy mean (median) | test gap mean [max] | fair on "
              "test | fair on test +0.01 | one-class | seconds (median) | sensitive feature "
              f"at prediction | {best}'s test accuracy against it: wins / ties / losses (p) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
        for method in _methods(by):
            g = by[method]
            acc, gap = g["test_accuracy"], g["test_gap"]
            versus = "-"
            if method != best and best in by:
                _, versus = wins_ties_losses(by[best]["test_accuracy"], acc)
            sens = g["sensitive_at_prediction"].dropna()
            print(
                f"| {method} | {len(g)} | {acc.mean():.4f} ({acc.median():.4f}) | "
                f"{gap.mean():.4f} [{gap.max():.4f}] | {int((gap <= BOUND).sum())} / {len(g)} | "
                f"{int((gap <= BOUND + 0.01).sum())} / {len(g)} | "
                f"{'-' if g['one_class'].isna().all() else int(g['one_class'].sum())} | "
                f"{g['seconds'].median():.1f} | {sens.mode().iloc[0] if len(sens) else '-'} | "
                f"{versus} |"
            )
        if best in by:
            print(f"\n{best}'s fair accuracy (test accuracy, or the worst outcome when the "
                  "model is over the limit, or the limit + 0.01, on the test split) against each "
                  "method's, split by split: wins / ties / losses (p):\n")
            for method in [m for m in _methods(by) if m != best]:
                for margin in (0.0, 0.01):
                    _, text = wins_ties_losses(_utility(by[best], margin), _utility(by[method], margin))
                    print(f"- vs {method} (limit +{margin:g}): {text}")
    if args.plot:
        _plot(frame, args.plot)


def _settings(frame: pd.DataFrame, by_dataset: bool = True) -> list[tuple[tuple, pd.DataFrame]]:
    """The rows by (dataset, model, limit): COMPAS, Adult, German credit; XGBoost before the
    forest; demographic parity first (``by_dataset=False``: model and limit first)."""
    order = {name: i for i, name in enumerate(
        ["compas", "adult", "german", "xgboost", "random_forest", "random_forest_deep",
         "demographic_parity"])}

    def key(item: tuple) -> tuple:
        dataset, model, limit = (order.get(part, len(order)) for part in item[0])
        return (dataset, model, limit) if by_dataset else (model, limit, dataset)

    return sorted(frame.groupby(["dataset", "model", "limit"], sort=False), key=key)


_NAMES = {"compas": "COMPAS", "adult": "Adult", "german": "German credit",
          "xgboost": "XGBoost", "random_forest": "random forest",
          "random_forest_deep": "deep random forest"}


def headline(args: argparse.Namespace) -> None:
    """One row per dataset, model and limit: the search without mitigation, the threshold
    search (``--fairtune``) with and without the margin, the most accurate fairlearn baseline
    and the one that meets the limit on test most often, each as mean test accuracy (splits
    fair on test), with the search's wins / ties / losses against the two baselines."""
    frame = _load(args.paths)
    best = args.fairtune
    n_splits = frame["split"].nunique()
    margin = f"{best}_margin" in set(frame["method"])  # the margin column only where measured
    print(f"| data, model, limit | FairBO, no mitigation | FairBO + {best.removeprefix('fairbo_')} "
          f"|{f' the same, margin {MARGIN:g} |' if margin else ''} most accurate fairlearn "
          f"baseline | {best} against it | fairlearn baseline fair on test most often | {best} "
          "against it |")
    print(f"|---|---:|---:|{'---:|' if margin else ''}---|---|---|---|")
    for (dataset, model, limit), group in _settings(frame):
        by = {m: g.set_index("split") for m, g in group.groupby("method")}
        if best not in by:
            continue

        def cell(method: str) -> str:
            if method not in by:
                return "-"
            g = by[method]
            none = int(g["test_accuracy"].isna().sum())  # no fair trial: no model delivered
            return (f"{g['test_accuracy'].mean():.3f} ({int((g['test_gap'] <= BOUND).sum())} "
                    f"/ {len(g)}{f'; no model in {none}' if none else ''})")

        baselines = [m for m in FAIRLEARN if m in by]
        accurate = max(baselines, key=lambda m: by[m]["test_accuracy"].mean())
        fair = max(baselines, key=lambda m: ((by[m]["test_gap"] <= BOUND).sum(),
                                             by[m]["test_accuracy"].mean()))
        versus = [wins_ties_losses(by[best]["test_accuracy"], by[m]["test_accuracy"])[1]
                  for m in (accurate, fair)]
        print(f"| {_NAMES.get(dataset, dataset)}, {_NAMES.get(model, model)}, "
              f"{limit.replace('_', ' ')} | "
              f"{cell('fairbo')} | {cell(best)} | "
              f"{cell(f'{best}_margin') + ' | ' if margin else ''}"
              f"{accurate}: {cell(accurate)} | {versus[0]} | {fair}: {cell(fair)} | "
              f"{versus[1]} |")
    print(f"\nMean test accuracy (splits of {n_splits} where the model meets "
          f"the limit of {BOUND:g} on the test split; \"no model\": splits where the search "
          "found no trial that met the limit on validation, left out of the mean); wins / ties / "
          "losses: test accuracy split by split (a split without a model counts as a loss), "
          "two-sided sign test.")


def settle(args: argparse.Namespace) -> None:
    """How many of each method's test verdicts one test split settles.

    Per setting and method with the test gap's 95 % bootstrap interval recorded
    (``test_gap_low``, ``test_gap_high``: :func:`fairtune.fairness.metric_interval` on the test
    rows): the splits fair on test, those whose whole interval lies under the limit (the
    test split settles that the model keeps it) or over it (that the model breaks it), those
    whose interval holds the limit (the test split cannot tell), and the interval's mean
    half-width.
    """
    frame = pd.concat([pd.read_csv(p) for p in args.paths], ignore_index=True)
    if "test_gap_low" not in frame:
        raise SystemExit("no row has the test gap's interval (columns test_gap_low, "
                         "test_gap_high): run the methods again with this script")
    frame = frame[frame["test_gap_low"].notna()]
    print("| data, model, limit | method | splits | fair on test | settled under the limit | "
          "settled over the limit | the limit inside the interval | half-width (mean) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    order = {m: i for i, m in enumerate(METHODS)}
    for (dataset, model, limit), group in _settings(frame):
        for method, g in sorted(group.groupby("method"), key=lambda x: order.get(x[0], 99)):
            under = int((g["test_gap_high"] <= BOUND).sum())
            over = int((g["test_gap_low"] > BOUND).sum())
            print(f"| {_NAMES.get(dataset, dataset)}, {model}, {limit} | {method} | {len(g)} | "
                  f"{int((g['test_gap'] <= BOUND).sum())} | {under} | {over} | "
                  f"{len(g) - under - over} | "
                  f"{((g['test_gap_high'] - g['test_gap_low']) / 2).mean():.3f} |")


def _noise_gaps(y: np.ndarray, groups: np.ndarray, rates: dict[int, float], limit: str,
                draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws`` test gaps of a classifier that meets ``limit`` exactly on the population.

    Each test row of group ``g`` and label ``l`` is predicted 1 with the same probability in
    every group (``rates[l]``; under demographic parity one rate, ``rates[-1]``), as the rows of a
    random test split are by a model whose rates are equal across the groups: the gap measured
    on the split is sampling noise alone. The group and label counts are those of the split.
    """
    labels = (0, 1) if limit == "equalized_odds" else (-1,)
    gaps = np.zeros(draws)
    for label in labels:
        shares = []
        for group in np.unique(groups):
            n = int(np.sum((groups == group) & ((y == label) if label >= 0 else True)))
            if n:
                shares.append(rng.binomial(n, rates[label], draws) / n)
        shares_ = np.array(shares)
        gaps = np.maximum(gaps, shares_.max(axis=0) - shares_.min(axis=0))
    return gaps


def noise(args: argparse.Namespace) -> None:
    """How often a model that meets the limit exactly on the population meets it on test.

    For each dataset and limit, over the benchmark's splits: a classifier whose rates are the
    same in every group (the positive rate, or under equalized odds the true- and
    false-positive rates, of the default XGBoost on that split's test rows, pooled over the
    groups) has a test gap that is sampling noise alone. ``_noise_gaps`` draws it on the split's
    own group and label counts: its mean, the chance that it is within the bound (and the bound
    + 0.01), and the number of splits of ``--splits`` such a model is expected to be fair on
    test in, with the range that holds 90 % of the draws. With result CSVs, the best counts
    the fairlearn baselines and the fairtune searches reached, for comparison.
    """
    rng = np.random.default_rng(0)
    draws = 20_000
    observed = _load(args.paths) if args.paths else None
    print("| data, limit | test rows | rates (mean) | mean test gap | "
          "fair on test: chance per split | "
          f"expected splits of {args.splits} (90 % of draws) | within the bound + 0.01 "
          "| most splits fair on test, fairlearn baselines | the same, fairtune searches |")
    print("|---|---:|---|---:|---:|---:|---:|---|---|")
    for dataset in args.datasets:
        for limit in args.limits:
            fair, fair_margin, mean_gap, rows, used = [], [], [], 0, []
            for split in range(args.first_split, args.first_split + args.splits):
                objective = _objective(dataset, lambda trial: _default_model("xgboost", split),
                                       limit, split)
                fitted = _fit(objective.make_pipeline(optuna.trial.FixedTrial({})), objective)
                y = objective.y_test.to_numpy().astype(int)
                y_pred = np.asarray(fitted.predict(objective.X_test)).astype(int)
                groups = np.asarray(objective.s_test).astype(str)
                rates = {-1: float(y_pred.mean())}
                rates.update({label: float(y_pred[y == label].mean()) for label in (0, 1)})
                used.append(rates)
                gaps = _noise_gaps(y, groups, rates, limit, draws, rng)
                fair.append(float(np.mean(gaps <= BOUND)))
                fair_margin.append(float(np.mean(gaps <= BOUND + 0.01)))
                mean_gap.append(float(gaps.mean()))
                rows = len(y)
            counts = (rng.random((draws, len(fair))) < np.array(fair)).sum(axis=1)
            low, high = np.quantile(counts, [0.05, 0.95])
            best = ["-", "-"]
            if observed is not None:
                setting = observed[(observed["dataset"] == dataset)
                                   & (observed["limit"] == limit)
                                   & ~observed["method"].str.endswith(VALIDATED)]
                for i, chosen in enumerate((setting["method"].isin(FAIRLEARN),
                                            setting["method"].str.startswith("fairbo"))):
                    counts_ = (setting[chosen].groupby(["model", "method"])["test_gap"]
                               .agg(lambda g: f"{int((g <= BOUND).sum())} of {len(g)}"))
                    if len(counts_):
                        top = max(counts_.items(), key=lambda kv: int(kv[1].split()[0]))
                        best[i] = f"{top[1]} ({top[0][1]}, {top[0][0]})"
            mean_rate = {k: np.mean([r[k] for r in used]) for k in (-1, 0, 1)}
            shown = (f"true positives {mean_rate[1]:.2f}, false positives {mean_rate[0]:.2f}"
                     if limit == "equalized_odds" else f"positive {mean_rate[-1]:.2f}")
            print(f"| {_NAMES.get(dataset, dataset)}, {limit} | {rows} | {shown} | "
                  f"{np.mean(mean_gap):.3f} | {np.mean(fair):.2f} | "
                  f"{np.sum(fair):.1f} ({low:.0f}-{high:.0f}) | {np.sum(fair_margin):.1f} | "
                  f"{best[0]} | {best[1]} |")


def frontier(args: argparse.Namespace) -> None:
    """fairlearn's trade-off around the default and the accuracy-tuned model, and what it allows
    on new data.

    Per setting with ``SWEEP`` rows: each bound's mean test accuracy and gap and the splits
    fair on test; then, split by split, the most accurate of those models (with the baselines
    aimed at the limit itself: ``threshold_*``, ``reduction_*_between``) that meets the limit on
    the test split. That choice reads the test split, which no method can do: it is the most a
    fairlearn mitigation of those models offers under the limit on new data, compared with the
    most accurate fairlearn baseline and with the searches.
    """
    frame = _load(args.paths)
    for (dataset, model, limit), group in _settings(frame):
        by = {m: g.set_index("split") for m, g in group.groupby("method")}
        swept = [m for m in SWEEP if m in by]
        if not swept:
            continue
        print(f"\n### {_NAMES.get(dataset, dataset)}: {dataset}, {model}, {limit} <= {BOUND} "
              f"({group['split'].nunique()} splits)\n")
        print("| fairlearn mitigation | of the model | aimed at | test accuracy mean | "
              "test gap mean | fair on test |")
        print("|---|---|---:|---:|---:|---:|")
        family = []
        for kind in ("threshold_default", "reduction_default_between", "threshold_tuned",
                     "reduction_tuned_between"):
            rows = [(_aimed(m)[1], m) for m in swept if _aimed(m)[0] == kind]
            if not rows:
                continue
            rows = sorted(rows + ([(BOUND, kind)] if kind in by else []))
            for aim, m in rows:
                g = by[m]
                family.append(m)
                name = "ThresholdOptimizer" if kind.startswith("threshold") else (
                    "ExponentiatedGradient (between groups)")
                print(f"| {name} | {'accuracy-tuned' if '_tuned' in kind else 'default'} "
                      f"| {aim:g} | {g['test_accuracy'].mean():.4f} | {g['test_gap'].mean():.4f} "
                      f"| {int((g['test_gap'] <= BOUND).sum())} / {len(g)} |")
        accuracy = pd.concat({m: by[m]["test_accuracy"] for m in family}, axis=1)
        gap = pd.concat({m: by[m]["test_gap"] for m in family}, axis=1)
        oracle = accuracy.where(gap <= BOUND).max(axis=1)  # NaN: none of them fair on test
        baselines = [m for m in FAIRLEARN if m in by]
        accurate = max(baselines, key=lambda m: by[m]["test_accuracy"].mean())
        print(f"\nThe most accurate of these models that meets the limit on the test split "
              f"(chosen with the test split): {oracle.mean():.4f} (a model in "
              f"{int(oracle.notna().sum())} of {len(oracle)} splits; mean over those).\n")
        print(f"- against the most accurate fairlearn baseline, {accurate} "
              f"({by[accurate]['test_accuracy'].mean():.4f}, fair on test in "
              f"{int((by[accurate]['test_gap'] <= BOUND).sum())}): "
              f"{wins_ties_losses(oracle, by[accurate]['test_accuracy'])[1]}")
        for search in ("fairbo_threshold", "fairbo_reduction", "fairbo_auto"):
            if search in by:
                fair = by[search]["test_accuracy"].where(by[search]["test_gap"] <= BOUND)
                print(f"- {search} ({by[search]['test_accuracy'].mean():.4f}) against it: "
                      f"{wins_ties_losses(by[search]['test_accuracy'], oracle)[1]}; counting "
                      f"only its splits fair on test: {wins_ties_losses(fair, oracle)[1]}")


def _plot(frame: pd.DataFrame, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _settings(frame, by_dataset=False)  # a row per model and limit, a column per dataset
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.5 * ncols, 4.8 * nrows + 0.9),
                             squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    # The fairlearn baselines (circles; squares: the reduction bounded between the groups),
    # the searches without mitigation (triangles) and fairtune's threshold searches (stars);
    # one point per split.
    styles = {
        "default": ("tab:gray", "o"), "threshold_default": ("tab:blue", "o"),
        "reduction_default": ("tab:cyan", "o"), "threshold_tuned": ("tab:green", "o"),
        "reduction_tuned": ("tab:olive", "o"), "fairbo": ("tab:red", "^"),
        "reduction_default_between": ("tab:cyan", "s"), "gp": ("tab:brown", "^"),
        "fairbo_threshold": ("tab:purple", "*"), "fairbo_threshold_margin": ("tab:orange", "*"),
        "fairbo_threshold_cv3": ("tab:pink", "*"),
    }
    for ax, ((dataset, model, limit), group) in zip(axes.flat, panels):
        for method, (color, marker) in styles.items():
            g = group[group["method"] == method]
            if len(g):
                ax.scatter(g["test_gap"], g["test_accuracy"], s=60 if marker == "*" else 16,
                           color=color, marker=marker, label=method, alpha=0.75)
        ax.axvline(BOUND, color="k", lw=0.8, ls="--")
        ax.set_xlabel(f"test {limit} gap (limit {BOUND})")
        ax.set_ylabel("test accuracy")
        ax.set_title(f"{dataset}, {model}, {limit}: {group['split'].nunique()} splits", fontsize=10)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=8)
    fig.tight_layout(rect=(0, 0.9 / (4.8 * nrows + 0.9), 1, 1))
    fig.savefig(path, dpi=110)
    print(f"\nplot written to {path}")


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

            def timed(owner: Any, name: str, bucket: str) -> Any:
                import inspect

                raw = inspect.getattr_static(owner, name)  # restored as it was afterwards
                static = isinstance(raw, staticmethod)
                original = getattr(owner, name)

                def wrapper(*a: Any, **k: Any) -> Any:
                    t0 = time.perf_counter()
                    try:
                        return original(*a, **k)
                    finally:
                        spent[bucket] += time.perf_counter() - t0

                setattr(owner, name, staticmethod(wrapper) if static else wrapper)
                return raw

            originals = [
                (FairBOSampler, "sample_relative", timed(FairBOSampler, "sample_relative", "sampler")),
                (FairObjective, "_fit", timed(FairObjective, "_fit", "fit")),
                (FairObjective, "_predict", timed(FairObjective, "_predict", "predict")),
            ]
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
            for owner, name, original in originals:
                setattr(owner, name, original)
            rest = total - sum(spent.values())
            print(f"| {THREAD_LABELS[args.threads]} | {mitigation} | {dataset} | "
                  f"{args.n_trials} | {end_to_end:.1f} | {spent['sampler']:.1f} | "
                  f"{spent['fit']:.1f} | {spent['predict']:.1f} | {rest:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command",
                        choices=["run", "summarize", "headline", "frontier", "settle", "noise",
                                 "timing"])
    parser.add_argument("paths", nargs="*", help="CSV files to summarize")
    parser.add_argument("--datasets", nargs="+", default=["compas", "adult", "german"])
    parser.add_argument("--models", nargs="+", default=["xgboost", "random_forest"])
    parser.add_argument("--limits", nargs="+", default=["demographic_parity", "equalized_odds"],
                        choices=["demographic_parity", "equalized_odds"])
    parser.add_argument("--methods", nargs="+", default=list(METHODS),
                        choices=list(METHODS) + list(SWEEP))
    parser.add_argument("--splits", type=int, default=20)
    parser.add_argument("--first-split", type=int, default=0)
    parser.add_argument("--n-trials", type=int, default=50)
    parser.add_argument("--fairtune", default="fairbo_threshold",
                        help="with summarize: the fairtune method compared with every other")
    parser.add_argument("--plot", metavar="PNG", help="with summarize: the accuracy / gap plot")
    parser.add_argument("--out", default="vs_mitigation.csv")
    parser.add_argument("--timing-mitigations", nargs="+", default=["none", "threshold"],
                        help="with timing: the --mitigation values to time ('none' for none)")
    parser.add_argument("--threads", choices=["default", "pinned"],
                        help=argparse.SUPPRESS)  # set by `timing` for its child processes
    parser.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_intermixed_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    if args.command == "run":
        run(args)
    elif args.command == "timing":
        timing(args)
    else:
        if args.command != "noise":  # whose result CSVs are optional
            args.paths = args.paths or [args.out]
        {"headline": headline, "frontier": frontier, "settle": settle, "noise": noise,
         "summarize": summarize}[args.command](args)


if __name__ == "__main__":
    main()
