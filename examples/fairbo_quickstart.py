"""Tune XGBoost on Adult for accuracy under a demographic parity limit with FairBOSampler
======================================================================================

Each trial trains an XGBoost classifier with hyperparameters proposed by FairBOSampler, measures
validation accuracy, and records the demographic parity difference between women and men as
an Optuna constraint (``demographic_parity <= 0.05``). ``study.best_trial`` is then the most
accurate *fair* model. The figure shows every trial's accuracy against its demographic parity
difference, the limit and the best fair trial.

Run::

    python examples/fairbo_quickstart.py            # 30 trials on 12,000 rows
    python examples/fairbo_quickstart.py --n-trials 60 --n-rows 0   # all 45,222 rows
    python examples/fairbo_quickstart.py --plot tradeoff.png        # save the figure

Times at default settings (no thread variable set) on 2 cores: about 14 s on an idle
machine, 22 s on a busy one (two other single-threaded jobs running).
"""

from __future__ import annotations

import argparse

import optuna
import pandas as pd
from sklearn.model_selection import train_test_split

from fairtune.datasets import load_adult
from fairtune.fairness import set_fairness_constraints
from fairtune.samplers import FairBOSampler
from fairtune.tuning.spaces import xgboost as xgboost_space

LIMIT = "demographic_parity<=0.05"


def main(n_trials: int = 30, n_rows: int = 12_000, seed: int = 0) -> optuna.Study:
    X, y, sex = load_adult(return_X_y=True)
    if n_rows:  # a stratified subsample keeps the example quick
        X, _, y, _, sex, _ = train_test_split(
            X, y, sex, train_size=n_rows, stratify=y, random_state=seed
        )
    X = pd.get_dummies(X, dtype=float)  # XGBoost wants numbers: one-hot the categories
    X_train, X_valid, y_train, y_valid, _, sex_valid = train_test_split(
        X, y, sex, test_size=0.3, stratify=y, random_state=seed
    )

    def objective(trial: optuna.Trial) -> float:
        # The XGBoost search space of the Fair BO paper (appendix A): n_estimators, learning_rate,
        # gamma, reg_alpha, reg_lambda, subsample and max_depth.
        model = xgboost_space(trial, random_state=seed)
        model.fit(X_train, y_train)
        y_pred = model.predict(X_valid)
        # Stores "fairtune:demographic_parity" and the constraint dsp - 0.05 on the trial.
        set_fairness_constraints(
            trial, y_valid, y_pred, sensitive_features=sex_valid, limits=LIMIT
        )
        return float((y_pred == y_valid.to_numpy()).mean())

    study = optuna.create_study(direction="maximize", sampler=FairBOSampler(seed=seed))
    study.optimize(objective, n_trials=n_trials)

    best = study.best_trial  # Optuna 5: the best trial among those meeting every constraint
    print(f"Best fair trial: #{best.number}")
    print(f"  validation accuracy:           {best.value:.4f}")
    print(f"  demographic parity difference: {best.user_attrs['fairtune:demographic_parity']:.4f}"
          f"  (limit {LIMIT})")
    print("  parameters:")
    for name, value in best.params.items():
        print(f"    {name} = {value:.4g}" if isinstance(value, float) else f"    {name} = {value}")
    most_accurate = max(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)),
                        key=lambda t: t.value)
    print(f"Most accurate trial overall: #{most_accurate.number}, accuracy {most_accurate.value:.4f},"
          f" demographic parity {most_accurate.user_attrs['fairtune:demographic_parity']:.4f}")
    return study


def plot(study: optuna.Study):
    """Every trial's accuracy against its demographic parity difference, the limit, the best."""
    from fairtune.visualization import plot_tradeoff

    ax = plot_tradeoff(study)
    ax.set_title(f"FairBOSampler, XGBoost on Adult, {LIMIT}")
    return ax.figure


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-trials", type=int, default=30)
    parser.add_argument("--n-rows", type=int, default=12_000, help="0 = all rows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", metavar="PNG", help="save the figure there (else: show it)")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = main(n_trials=args.n_trials, n_rows=args.n_rows, seed=args.seed)

    try:
        import matplotlib.pyplot as plt
    except ImportError:  # the figure needs matplotlib: pip install "fairtune[plot]"
        print("(install matplotlib to see the trade-off plot)")
    else:
        figure = plot(study)
        if args.plot:
            figure.savefig(args.plot, bbox_inches="tight")
        elif plt.get_backend().lower() != "agg":  # a window, where there is a display
            plt.show()
