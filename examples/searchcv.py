"""Tune your own scikit-learn pipeline under a fairness limit with FairSearchCV
============================================================================

A scikit-learn pipeline of one's own: a ``ColumnTransformer`` that one-hot encodes Adult's
categorical columns, then ``HistGradientBoostingClassifier``. ``FairSearchCV`` tunes it as
``RandomizedSearchCV`` would, but under ``demographic_parity <= 0.05`` between women and men:
every trial is scored by 3-fold cross-validation, the accuracy and the demographic parity
difference computed on the pooled out-of-fold predictions, and the most accurate configuration
that meets the limit is refitted on all the training rows. There is no Optuna objective to
write: the data are plain ``X, y, A`` (fairtune's loader only supplies the rows).

The script prints ``cv_results_`` as a pandas frame sorted by score, with the fairness column,
then the chosen model's accuracy and demographic parity difference on a test split (25 % of
Adult) that the search never saw. The figure shows every trial's CV accuracy against its gap.

Run::

    python examples/searchcv.py                          # 16 trials on 6,000 training rows
    python examples/searchcv.py --n-trials 40 --n-rows 0 # all 33,916 training rows
    python examples/searchcv.py --mitigation threshold   # fairlearn's ThresholdOptimizer in
                                                         # every trial (more accurate fair models)
    python examples/searchcv.py --plot searchcv.png      # save the figure

Times at default settings (no thread variable set) on 2 cores: about 20 s on an idle
machine (19 s of CPU time: the models train on one thread), 33 s on a busy one (two other
single-threaded jobs running).
"""

from __future__ import annotations

import argparse

import numpy as np
import optuna
import pandas as pd
from optuna.distributions import FloatDistribution, IntDistribution
from sklearn.compose import make_column_selector, make_column_transformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder

from fairtune import FairSearchCV
from fairtune.datasets import load_adult
from fairtune.fairness import demographic_parity_difference

LIMIT = "demographic_parity<=0.05"


def main(n_trials: int = 16, n_rows: int = 6_000, seed: int = 0,
         mitigation: str | None = None) -> dict:
    X, y, sex = load_adult(return_X_y=True)  # a DataFrame, 0/1 labels, each person's sex
    X_train, X_test, y_train, y_test, sex_train, sex_test = train_test_split(
        X, y, sex, test_size=0.25, stratify=y, random_state=seed
    )
    if n_rows and n_rows < len(y_train):  # a stratified subsample keeps the example quick
        X_train, _, y_train, _, sex_train, _ = train_test_split(
            X_train, y_train, sex_train, train_size=n_rows, stratify=y_train, random_state=seed
        )

    pipeline = Pipeline([
        ("encode", make_column_transformer(
            (OneHotEncoder(handle_unknown="ignore", sparse_output=False),
             make_column_selector(dtype_include="category")),
            remainder="passthrough",  # the numeric columns as they are
        )),
        ("model", HistGradientBoostingClassifier(early_stopping=False, random_state=seed)),
    ])
    # Optuna distributions keyed by the pipeline's parameter names, as in GridSearchCV.
    param_distributions = {
        "model__learning_rate": FloatDistribution(0.01, 1.0, log=True),
        "model__max_iter": IntDistribution(10, 100, log=True),
        "model__max_leaf_nodes": IntDistribution(2, 64, log=True),
        "model__min_samples_leaf": IntDistribution(5, 500, log=True),
        "model__l2_regularization": FloatDistribution(1e-4, 10.0, log=True),
    }
    search = FairSearchCV(pipeline, param_distributions, limits=LIMIT, cv=3,
                          n_trials=n_trials, random_state=seed, mitigation=mitigation)
    search.fit(X_train, y_train, sensitive_features=sex_train)

    frame = pd.DataFrame(search.cv_results_)
    shown = frame[["trial_number", "mean_test_score", "std_test_score", "demographic_parity",
                   "fair", "rank_test_score"]
                  + [c for c in frame if c.startswith("param_")]]
    shown = shown.rename(columns=lambda c: c.replace("param_model__", "").replace("param_", ""))
    shown = shown.sort_values("mean_test_score", ascending=False)
    with pd.option_context("display.width", 200, "display.max_columns", 20,
                           "display.float_format", "{:.4g}".format):
        print(f"{len(frame)} trials, 3-fold CV on {len(y_train):,} rows, sorted by accuracy "
              "(demographic_parity: on the pooled out-of-fold predictions):")
        print(shown.to_string(index=False))

    best = search.best_trial_
    print(f"\nBest fair configuration: trial #{best.number}, CV accuracy {search.best_score_:.4f}, "
          f"CV demographic parity {frame['demographic_parity'][search.best_index_]:.4f} "
          f"(limit {LIMIT})")
    # A threshold mitigation applies one threshold per group: it needs each person's group.
    needs = {"sensitive_features": sex_test} if mitigation == "threshold" else {}
    y_pred = np.asarray(search.predict(X_test, **needs))
    accuracy = float(np.mean(y_pred == y_test.to_numpy()))
    gap = float(demographic_parity_difference(y_test, y_pred, sensitive_features=sex_test))
    print(f"Test split ({len(y_test):,} rows): accuracy {accuracy:.4f}, demographic parity "
          f"{gap:.4f} ({'fair' if gap <= 0.05 else 'over the limit'} on test)")
    print("Sensitive feature at prediction: "
          + ("predict(X, sensitive_features=...)" if needs
             else "the model reads the 'sex' column of X (one of its inputs)"))
    return {"search": search, "frame": shown, "test_accuracy": accuracy, "test_gap": gap}


def plot(result: dict):
    """Every trial's CV accuracy against its demographic parity difference, and the limit."""
    import matplotlib.pyplot as plt

    frame, search = result["frame"], result["search"]
    fig, ax = plt.subplots(figsize=(6, 4.2))
    fair = frame["fair"].to_numpy(bool)
    ax.scatter(frame["demographic_parity"][fair], frame["mean_test_score"][fair], label="fair")
    ax.scatter(frame["demographic_parity"][~fair], frame["mean_test_score"][~fair],
               color="tab:gray", label="over the limit")
    ax.scatter([search.cv_results_["demographic_parity"][search.best_index_]],
               [search.best_score_], s=150, facecolors="none", edgecolors="tab:red",
               label="best fair (refitted)")
    ax.axvline(0.05, color="k", ls="--", lw=0.8)
    ax.set_xlabel("demographic parity difference (pooled out-of-fold)")
    ax.set_ylabel("3-fold CV accuracy")
    ax.set_title(f"FairSearchCV on Adult, {LIMIT}")
    ax.legend()
    return fig


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-trials", type=int, default=16)
    parser.add_argument("--n-rows", type=int, default=6_000, help="training rows; 0 = all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mitigation", choices=["threshold", "reduction"])
    parser.add_argument("--plot", metavar="PNG", help="save the figure there (else: show it)")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    result = main(n_trials=args.n_trials, n_rows=args.n_rows, seed=args.seed,
                  mitigation=args.mitigation)

    try:
        import matplotlib.pyplot as plt
    except ImportError:  # the figure needs matplotlib: pip install "fairtune[plot]"
        print("(install matplotlib to see the figure)")
    else:
        figure = plot(result)
        if args.plot:
            figure.savefig(args.plot, bbox_inches="tight")
        elif plt.get_backend().lower() != "agg":  # a window, where there is a display
            plt.show()
