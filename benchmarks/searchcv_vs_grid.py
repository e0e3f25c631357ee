"""FairSearchCV against GridSearchCV + a post-hoc fairness filter, at equal numbers of fits.

A scikit-learn user who must meet ``demographic_parity <= 0.05`` without fairtune runs
``GridSearchCV`` over a grid and keeps the most accurate configuration among those that meet
the limit. ``FairSearchCV`` runs as many trials as the grid has points, over the box the grid
spans, with FairBOSampler, which models the limit while it searches. Both see the same rows,
the same folds and fit the same number of models (grid points x folds, plus one refit).

Per seed (``--seeds``; each seed is its own subsample, folds and sampler seed):

1. Adult: a stratified subsample of ``--n-rows`` tuning rows and ``--test-rows`` test rows that
   no method sees; the model is ``ColumnTransformer`` (one-hot categories) +
   ``HistGradientBoostingClassifier``; the sensitive feature is ``sex``.
2. Folds: ``StratifiedKFold(--cv, shuffle=True, random_state=seed)``, given to both methods.
3. ``grid``: ``GridSearchCV`` over :data:`GRID` with those folds; a scorer records each
   fold's predictions (by row), so that every grid point gets the pooled out-of-fold accuracy
   and demographic-parity gap; the filter keeps the points that meet the limit and picks the
   most accurate (the same yardstick as FairSearchCV's); that point is refitted on all the
   tuning rows.
4. ``fairsearchcv``: ``FairSearchCV`` over :data:`BOX` (each parameter from the grid's smallest
   to its largest value, log scale), ``n_trials`` = the number of grid points, the same folds,
   ``FairBOSampler(seed=seed)``; its ``best_estimator_``.
5. Both chosen models are scored on the test rows: accuracy and demographic-parity gap.

The summary compares, seed by seed, the best fair CV score (a seed where a method found no fair
configuration counts as its worst outcome) and the test accuracy: wins / ties / losses with a
two-sided sign test (``benchmarks._common.paired``), with medians and means.

Usage (rows already in ``--out`` are skipped, so a run can be resumed or extended):
    nice -n 10 python -m benchmarks.searchcv_vs_grid run --seeds 20 \\
        --out benchmarks/results/searchcv_vs_grid.csv
    python -m benchmarks.searchcv_vs_grid summarize benchmarks/results/searchcv_vs_grid.csv \\
        --plot docs/images/searchcv_vs_grid.png
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
import warnings
from typing import Any

import numpy as np
import optuna
import pandas as pd

from benchmarks._common import (
    COLUMN_INCHES,
    append_rows,
    done_keys,
    figure,
    paired,
    save_figure,
)
from fairtune import FairSearchCV
from fairtune.datasets import load_adult
from fairtune.fairness import demographic_parity_difference
from fairtune.tuning import limit_training_threads

LIMIT = "demographic_parity<=0.05"
BOUND = 0.05
STEP = "histgradientboostingclassifier"
# 3 x 3 x 3 = 27 configurations: from weak, near-constant models to flexible ones.
GRID = {
    f"{STEP}__learning_rate": [0.01, 0.05, 0.25],
    f"{STEP}__max_leaf_nodes": [2, 8, 32],
    f"{STEP}__min_samples_leaf": [10, 100, 1000],
}
MAX_ITER = 50
METHODS = ("grid", "fairsearchcv")
FIELDS = [
    "seed", "method", "n_rows", "test_rows", "cv", "n_fits", "n_candidates", "n_fair_candidates",
    "cv_score", "cv_gap",
    "test_accuracy", "test_gap", "test_fair", "params", "seconds",
]


def grid(values: int = 3) -> dict[str, list[Any]]:
    """:data:`GRID`, or with ``values=2`` its smallest and largest value of each parameter (a
    smaller grid for quick runs)."""
    if values == 3:
        return dict(GRID)
    if values == 2:
        return {name: [min(v), max(v)] for name, v in GRID.items()}
    raise ValueError(f"`values` must be 2 or 3, but got values={values!r}.")


def box() -> dict[str, Any]:
    """The box the grid spans, as Optuna distributions (log scale; integers where the grid has
    integers)."""
    from optuna.distributions import FloatDistribution, IntDistribution

    space: dict[str, Any] = {}
    for name, values in GRID.items():
        low, high = min(values), max(values)
        if all(isinstance(v, int) for v in values):
            space[name] = IntDistribution(low, high, log=True)
        else:
            space[name] = FloatDistribution(low, high, log=True)
    return space


def pipeline(seed: int) -> Any:
    from sklearn.compose import make_column_selector, make_column_transformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    encode = make_column_transformer(
        (OneHotEncoder(handle_unknown="ignore", sparse_output=False),
         make_column_selector(dtype_include="category")),
        remainder="passthrough",
    )
    return make_pipeline(encode, HistGradientBoostingClassifier(
        max_iter=MAX_ITER, early_stopping=False, random_state=seed,
    ))


_ADULT: list[Any] = []


def split(seed: int, n_rows: int, test_rows: int) -> tuple[Any, ...]:
    """(X, y, sex) of the tuning rows and of the test rows, stratified on the label."""
    from sklearn.model_selection import train_test_split

    if not _ADULT:
        _ADULT.extend(load_adult(return_X_y=True))
    X, y, sex = _ADULT
    X, X_test, y, y_test, sex, sex_test = train_test_split(
        X, y, sex, train_size=n_rows, test_size=test_rows, stratify=y, random_state=seed
    )
    # Positional indices: the grid's scorer finds each validation row by its index.
    frames = [X, y, sex, X_test, y_test, sex_test]
    return tuple(f.reset_index(drop=True) for f in frames)


def _test(model: Any, X: Any, y: Any, sex: Any) -> dict[str, Any]:
    y_pred = np.asarray(model.predict(X))
    gap = float(demographic_parity_difference(y, y_pred, sensitive_features=sex))
    return {"test_accuracy": round(float(np.mean(y_pred == y.to_numpy())), 5),
            "test_gap": round(gap, 5), "test_fair": int(gap <= BOUND)}


def run_grid(seed: int, data: tuple[Any, ...], folds: Any, points: dict[str, list[Any]]
             ) -> dict[str, Any]:
    """GridSearchCV, then the post-hoc filter on every point's pooled out-of-fold predictions."""
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    X, y, sex, X_test, y_test, sex_test = data
    names = list(points)
    predictions: dict[tuple, np.ndarray] = {}

    def recorder(estimator: Any, X_valid: pd.DataFrame, y_valid: pd.Series) -> float:
        # GridSearchCV calls the scorer once per (grid point, fold) on that fold's rows.
        key = tuple(estimator.get_params()[name] for name in names)
        pooled = predictions.setdefault(key, np.full(len(y), -1))
        y_pred = np.asarray(estimator.predict(X_valid))
        pooled[X_valid.index.to_numpy()] = y_pred
        return float(np.mean(y_pred == y_valid.to_numpy()))

    start = time.perf_counter()
    search = GridSearchCV(pipeline(seed), points, scoring=recorder, cv=folds, refit=False,
                          n_jobs=1, error_score="raise")
    # One training thread, as FairSearchCV trains (fairtune.tuning.training_threads): the same
    # cost per fit for both methods, and no oversubscription on a shared machine.
    with limit_training_threads():
        search.fit(X, y)
    candidates = []
    for params in search.cv_results_["params"]:
        pooled = predictions[tuple(params[name] for name in names)]
        assert (pooled >= 0).all()  # every row was validated once
        candidates.append({
            "params": params,
            "cv_score": float(np.mean(pooled == y.to_numpy())),
            "cv_gap": float(demographic_parity_difference(y, pooled, sensitive_features=sex)),
        })
    fair = [c for c in candidates if c["cv_gap"] <= BOUND]
    row: dict[str, Any] = {
        "n_fits": len(candidates) * folds.get_n_splits() + bool(fair),
        "n_candidates": len(candidates), "n_fair_candidates": len(fair),
    }
    if fair:
        best = max(fair, key=lambda c: c["cv_score"])  # the first of ties, in grid order
        with limit_training_threads():
            model = clone(pipeline(seed)).set_params(**best["params"]).fit(X, y)
        row.update({"cv_score": round(best["cv_score"], 5), "cv_gap": round(best["cv_gap"], 5),
                    "params": json.dumps(best["params"]), **_test(model, X_test, y_test, sex_test)})
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def run_fairsearchcv(seed: int, data: tuple[Any, ...], folds: Any,
                     points: dict[str, list[Any]]) -> dict[str, Any]:
    """FairSearchCV over the box the grid spans, one trial per grid point."""
    X, y, sex, X_test, y_test, sex_test = data
    n_trials = int(np.prod([len(v) for v in points.values()]))
    start = time.perf_counter()
    search = FairSearchCV(pipeline(seed), box(), limits=LIMIT, cv=folds, n_trials=n_trials,
                          random_state=seed, error_score="raise")
    results: dict[str, Any] = {}
    try:
        search.fit(X, y, sensitive_features=sex)
    except ValueError as error:
        if "No trial meets" not in str(error):
            raise
    fair = search.cv_results_["fair"]
    row: dict[str, Any] = {
        "n_fits": n_trials * folds.get_n_splits() + bool(fair.any()),
        "n_candidates": n_trials, "n_fair_candidates": int(fair.sum()),
    }
    if hasattr(search, "best_estimator_"):
        i = search.best_index_
        results = {
            "cv_score": round(search.best_score_, 5),
            "cv_gap": round(float(search.cv_results_["demographic_parity"][i]), 5),
            "params": json.dumps({k: (round(v, 6) if isinstance(v, float) else v)
                                  for k, v in search.best_params_.items()}),
            **_test(search.best_estimator_, X_test, y_test, sex_test),
        }
    row.update(results)
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def run(args: argparse.Namespace) -> None:
    from sklearn.model_selection import StratifiedKFold

    done = done_keys(args.out, ("seed", "method"))
    for seed, method in itertools.product(
        range(args.first_seed, args.first_seed + args.seeds), args.methods
    ):
        if (str(seed), method) in done:
            continue
        data = split(seed, args.n_rows, args.test_rows)
        folds = StratifiedKFold(args.cv, shuffle=True, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # dataset notes
            runner = run_grid if method == "grid" else run_fairsearchcv
            row = {"seed": seed, "method": method, "n_rows": args.n_rows,
                   "test_rows": args.test_rows, "cv": args.cv,
                   **runner(seed, data, folds, grid(args.values))}
        append_rows(args.out, [{k: row.get(k, "") for k in FIELDS}], FIELDS)
        print(f"seed {seed:2d} {method:13s} cv {row.get('cv_score', '-')} gap "
              f"{row.get('cv_gap', '-')}  test {row.get('test_accuracy', '-')} gap "
              f"{row.get('test_gap', '-')}  ({row['n_fits']} fits, {row['seconds']} s)",
              flush=True)


# ---------------------------------------------------------------------------------------------
# Summary

NAMES = {"grid": "GridSearchCV + a fairness filter", "fairsearchcv": "FairSearchCV (FairBOSampler)"}


def _paired(mine: pd.Series, theirs: pd.Series) -> tuple[int, int, int, float]:
    """Wins / ties / losses of ``mine`` over ``theirs`` on the seeds both ran (NaN = no fair
    model = the worst outcome), and the two-sided sign test's p-value."""
    seeds = mine.index.intersection(theirs.index)
    return paired(mine[seeds].to_numpy(float), theirs[seeds].to_numpy(float))


def _fair_accuracy(g: pd.DataFrame, margin: float) -> pd.Series:
    """Test accuracy where the test gap meets the limit (+ margin), else NaN (the worst)."""
    return g["test_accuracy"].where(g["test_gap"] <= BOUND + margin)


def summarize(args: argparse.Namespace) -> str:
    frame = pd.concat([pd.read_csv(p) for p in args.paths], ignore_index=True)
    frame = frame.drop_duplicates(["seed", "method"], keep="last")
    by = {m: g.set_index("seed").sort_index() for m, g in frame.groupby("method")}
    mine, grid = by["fairsearchcv"], by["grid"]
    n = len(mine.index.intersection(grid.index))
    cv = _paired(mine["cv_score"], grid["cv_score"])
    test = _paired(mine["test_accuracy"], grid["test_accuracy"])
    fits = sorted(set(frame["n_fits"]))

    def stat(g: pd.DataFrame, column: str) -> str:
        values = g[column].dropna()
        return f"{values.median():.4f} ({values.mean():.4f})" if len(values) else "-"

    lines = [
        "| method | seeds | seeds with a fair configuration | fair configurations per seed, "
        "median | best fair CV accuracy | its CV gap | test accuracy | test gap | fair on "
        "test | seconds per seed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for method in METHODS:
        g = by[method]
        lines.append(
            f"| {NAMES[method]} | {len(g)} | {int(g['cv_score'].notna().sum())} | "
            f"{g['n_fair_candidates'].median():g} | {stat(g, 'cv_score')} | {stat(g, 'cv_gap')} | "
            f"{stat(g, 'test_accuracy')} | {stat(g, 'test_gap')} | "
            f"{int(g['test_fair'].sum())} / {len(g)} | {g['seconds'].median():.1f} |"
        )
    comparisons = (
        ("best fair CV accuracy", cv),
        ("test accuracy of the refitted best fair model", test),
        ("the same, a model over the limit on test counting as the worst",
         _paired(_fair_accuracy(mine, 0.0), _fair_accuracy(grid, 0.0))),
        ("the same, over the limit + 0.01",
         _paired(_fair_accuracy(mine, 0.01), _fair_accuracy(grid, 0.01))),
    )
    lines += ["", f"FairSearchCV against the grid, seed by seed ({n} seeds; wins / ties / losses, "
              "two-sided sign test):", ""]
    lines += [f"- {label}: {w} / {t} / {lo} (p = {p:.2g})" for label, (w, t, lo, p) in comparisons]
    lines += [
        "",
        f"Setup: Adult ({_describe(frame)}), {LIMIT}; GridSearchCV over {_grid_text(frame)}; "
        f"{'/'.join(map(str, sorted(set(frame['n_candidates']))))} configurations, "
        f"{'/'.join(map(str, fits))} fits per seed and method.",
    ]
    text = "\n".join(lines) + "\n"
    if args.plot:
        _plot(mine, grid, args.plot)
    print(text, end="")
    return text


def _plot(mine: pd.DataFrame, grid: pd.DataFrame, path: str) -> None:
    """Seed by seed: the best fair CV accuracy of both methods, and the chosen models' test
    accuracy against their test gap."""
    seeds = mine.index.intersection(grid.index)
    fig, (left, right) = figure(1, 2, figsize=(COLUMN_INCHES, 3.8))
    x, y = grid.loc[seeds, "cv_score"], mine.loc[seeds, "cv_score"]
    left.scatter(x, y, s=22, color="tab:purple")
    low, high = min(x.min(), y.min()), max(x.max(), y.max())
    left.plot([low, high], [low, high], color="gray", lw=1, ls="--")
    left.set_xlabel("GridSearchCV + fairness filter")
    left.set_ylabel("FairSearchCV")
    left.set_title("best fair CV accuracy, one point per seed", fontsize=10)
    for frame, label, color in ((grid, NAMES["grid"], "tab:blue"),
                                (mine, NAMES["fairsearchcv"], "tab:purple")):
        right.scatter(frame.loc[seeds, "test_gap"], frame.loc[seeds, "test_accuracy"], s=22,
                      color=color, label=label)
    right.axvline(BOUND, color="gray", lw=1, ls="--", label=f"limit {BOUND}")
    right.set_xlabel("test demographic parity difference")
    right.set_ylabel("test accuracy")
    right.set_title("the refitted best fair models on test", fontsize=10)
    right.legend(loc="lower right", fontsize=8)
    save_figure(fig, path)


def _grid_text(frame: pd.DataFrame) -> str:
    values = sorted(set(frame["n_candidates"]))
    full = int(np.prod([len(v) for v in GRID.values()]))
    shown = {name.split("__")[-1]: v for name, v in GRID.items()}
    return f"{shown}" + ("" if values == [full] else " (or its corners)")


def _describe(frame: pd.DataFrame) -> str:
    settings = frame[["n_rows", "test_rows", "cv"]].drop_duplicates()
    return "; ".join(
        f"{r.n_rows} tuning rows and {r.test_rows} test rows per seed, {r.cv}-fold "
        "cross-validation" for r in settings.itertuples()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["run", "summarize"])
    parser.add_argument("paths", nargs="*", help="CSV files to summarize")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--n-rows", type=int, default=4000, help="tuning rows per seed")
    parser.add_argument("--test-rows", type=int, default=10_000)
    parser.add_argument("--cv", type=int, default=3)
    parser.add_argument("--values", type=int, default=3, choices=[2, 3],
                        help="grid values per parameter (2: the smallest and the largest)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--out", default="searchcv_vs_grid.csv")
    parser.add_argument("--plot", metavar="PNG", help="with summarize: the per-seed plot")
    args = parser.parse_intermixed_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    if args.command == "run":
        run(args)
    else:
        args.paths = args.paths or [args.out]
        summarize(args)


if __name__ == "__main__":
    main()
