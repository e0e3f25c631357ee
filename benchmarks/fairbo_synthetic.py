"""Quality of FairBOSampler vs Optuna's GPSampler, TPESampler and RandomSampler.

Problems (each with a known or reference constrained optimum):

* ``gardner``: Gardner et al. (2014), "Bayesian optimization with inequality constraints",
  simulation 1: minimize cos(2x) cos(y) + sin(x) s.t. cos(x) cos(y) - sin(x) sin(y) <= 0.5 on
  [0, 6]^2 (optimum -2 at (3 pi / 2, 0)).
* ``gramacy``: Gramacy et al. (2016), "Modeling an augmented Lagrangian for blackbox
  constrained optimization": minimize x1 + x2 s.t.
  1.5 - x1 - 2 x2 - 0.5 sin(2 pi (x1^2 - 2 x2)) <= 0 and x1^2 + x2^2 - 1.5 <= 0 on [0, 1]^2
  (optimum ~0.5998).
* ``german`` / ``compas``: random forest tuning (the Fair BO paper's 4-d space: trees 1-64 log,
  min split fraction 0.01-0.5 log, max depth 1-5, criterion) maximizing validation accuracy
  s.t. demographic parity difference <= 0.05 (70/30 stratified split, fixed).
* ``german_cv5``: the German forest scored by stratified 5-fold cross-validation instead, so
  that all 1,000 rows are validation rows (pooled out-of-fold accuracy and demographic parity).
* ``levy6``, ``levy10``, ``sphere8`` and ``sphere16``: more parameters than the problems above.
  Levy's function in 6 and 10 dimensions (unconstrained, minimum 0), and 8-d and 16-d
  quadratics with one linear constraint (minimum 0.03).

Every method gets the same 5 random initial trials for a seed (enqueued), then runs to
``--n-trials``. Constraints reach every sampler through ``trial.set_constraint`` (Optuna 5).
Reported: median (and interquartile range) of the best feasible value after 20 and 40 trials
over seeds, a seed without any feasible trial counting as the worst outcome, and the median
trial index at which the first feasible trial appeared (a seed without one counting as later
than the last trial).

Usage:
    OMP_NUM_THREADS=1 python -m benchmarks.fairbo_synthetic --problems gardner gramacy \\
        --seeds 10 --n-trials 40 --out benchmarks/results/fairbo_synthetic.csv
    OMP_NUM_THREADS=1 python -m benchmarks.fairbo_synthetic --problems german compas \\
        --seeds 10 --n-trials 40 --out benchmarks/results/fairbo_rf.csv
    OMP_NUM_THREADS=1 python -m benchmarks.fairbo_synthetic --problems german --seeds 60 \\
        --methods FairBO-cEI FairBO-cMES GPSampler TPESampler RandomSampler \\
        --out benchmarks/results/fairbo_german60.csv
    OMP_NUM_THREADS=1 python -m benchmarks.fairbo_synthetic \\
        --problems levy6 levy10 sphere8 sphere16 \\
        --methods FairBO-cEI GPSampler TPESampler RandomSampler --seeds 10 --n-trials 40 \\
        --out benchmarks/results/fairbo_highdim.csv
    OMP_NUM_THREADS=1 python -m benchmarks.fairbo_synthetic \\
        --problems levy6 levy10 sphere8 sphere16 --methods FairBO-cEI GPSampler \\
        --first-seed 10 --seeds 20 --n-trials 40 \\
        --out benchmarks/results/fairbo_highdim_seeds10_29.csv
    OMP_NUM_THREADS=1 python -m benchmarks.fairbo_synthetic --problems german_cv5 --seeds 30 \\
        --methods FairBO-cEI GPSampler TPESampler RandomSampler \\
        --out benchmarks/results/fairbo_german_cv5.csv
    (or in parallel: ``--first-seed 0 --seeds 20``, ``--first-seed 20 --seeds 20``, ... into
    separate files, then concatenated)
    python -m benchmarks.fairbo_synthetic --summarize benchmarks/results/fairbo_synthetic.csv \\
        benchmarks/results/fairbo_rf.csv --versus TPESampler
    python -m benchmarks.fairbo_synthetic --summarize benchmarks/results/fairbo_german_heldout.csv \\
        --versus TPESampler --subsets 10000 --level 0.745
    OMP_NUM_THREADS=1 python -m benchmarks.fairbo_synthetic --landscape 5000 --problems german \\
        --out benchmarks/results/german_landscape.csv

``--landscape N`` evaluates N uniformly random configurations of each problem (RandomSampler,
seed ``--first-seed``) and prints how rare each level of feasible value is: the share of random
trials that reach it, and the chance that at least one of 35 random trials (a 40-trial study
after its 5 initial ones) does. ``--resplit CSV`` re-trains the best fair forests of a German or
COMPAS landscape on other train/validation splits:

    OMP_NUM_THREADS=1 python -m benchmarks.fairbo_synthetic \\
        --resplit benchmarks/results/german_landscape.csv --splits 20 --top 15
    OMP_NUM_THREADS=1 python -m benchmarks.fairbo_synthetic \\
        --resplit benchmarks/results/german_landscape.csv --splits 20 --top 5 \\
        --where "n_estimators > 40 and max_depth == 5"

``--generalize SPLITS`` runs the German or COMPAS studies again and scores each study's best fair
forest (at 20 and 40 trials) on SPLITS other splits; ``--summarize CSV --generalize 1`` prints
its tables:

    OMP_NUM_THREADS=1 python -m benchmarks.fairbo_synthetic --problems german --first-seed 100 \\
        --seeds 60 --methods FairBO-cEI GPSampler TPESampler RandomSampler --generalize 20 \\
        --out benchmarks/results/fairbo_german_heldout_generalize.csv
    python -m benchmarks.fairbo_synthetic --generalize 1 --versus FairBO-cEI \\
        --summarize benchmarks/results/fairbo_german_heldout_generalize.csv
"""

from __future__ import annotations

import argparse
import csv
import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import optuna

from benchmarks._common import checkpoints, wins_ties_losses

from fairtune.fairness import is_feasible
from fairtune.samplers import FairBOSampler

N_INITIAL = 5


def gardner(trial: optuna.Trial) -> float:
    x = trial.suggest_float("x", 0.0, 6.0)
    y = trial.suggest_float("y", 0.0, 6.0)
    trial.set_constraint("c", math.cos(x) * math.cos(y) - math.sin(x) * math.sin(y) - 0.5)
    return math.cos(2 * x) * math.cos(y) + math.sin(x)


def gramacy(trial: optuna.Trial) -> float:
    x1 = trial.suggest_float("x1", 0.0, 1.0)
    x2 = trial.suggest_float("x2", 0.0, 1.0)
    trial.set_constraint(
        "c1", 1.5 - x1 - 2 * x2 - 0.5 * math.sin(2 * math.pi * (x1**2 - 2 * x2))
    )
    trial.set_constraint("c2", x1**2 + x2**2 - 1.5)
    return x1 + x2


def make_levy(dim: int) -> Callable[[optuna.Trial], float]:
    """Levy's function in ``dim`` dimensions on [-10, 10]^dim (minimum 0 at (1, ..., 1))."""

    def levy(trial: optuna.Trial) -> float:
        x = np.array([trial.suggest_float(f"x{i}", -10.0, 10.0) for i in range(dim)])
        w = 1.0 + (x - 1.0) / 4.0
        return float(
            np.sin(np.pi * w[0]) ** 2
            + np.sum((w[:-1] - 1.0) ** 2 * (1.0 + 10.0 * np.sin(np.pi * w[:-1] + 1.0) ** 2))
            + (w[-1] - 1.0) ** 2 * (1.0 + np.sin(2.0 * np.pi * w[-1]) ** 2)
        )

    return levy


def make_sphere(dim: int) -> Callable[[optuna.Trial], float]:
    """A ``dim``-d quadratic with one linear constraint: minimize sum_i (x_i - 0.3)^2 on
    [0, 1]^dim s.t. x0 + x1 + x2 >= 1.2 (minimum 0.03 at x0 = x1 = x2 = 0.4, the other
    x_i = 0.3)."""

    def sphere(trial: optuna.Trial) -> float:
        x = np.array([trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(dim)])
        trial.set_constraint("c", 1.2 - float(x[:3].sum()))
        return float(np.sum((x - 0.3) ** 2))

    return sphere


levy10 = make_levy(10)
sphere16 = make_sphere(16)


def make_rf_objective(
    dataset: str, drop_sensitive: bool = True, split_seed: int = 0, cv: int | None = None
) -> Callable[[optuna.Trial], float]:
    """Validation accuracy of the random forest under ``demographic_parity <= 0.05``.

    By default the forest trains on 70 % of the rows and is scored on the other 30 % (one fixed
    split). With ``cv=k`` every row is a validation row: stratified k-fold cross-validation,
    accuracy and demographic parity computed on the pooled out-of-fold predictions (as
    ``FairObjective(cv=k)`` does).
    """
    import pandas as pd
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import StratifiedKFold, train_test_split

    from fairtune import datasets
    from fairtune.fairness import set_fairness_constraints

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", datasets.FairtuneDatasetWarning)
        X, y, s = getattr(datasets, f"load_{dataset}")(return_X_y=True)
    if drop_sensitive:
        # The model does not see the sensitive attribute ("unawareness"); fairness must still be
        # enforced, because other features correlate with it.
        X = X.drop(columns=[c for c in ("race", "sex", "personal_status_sex") if c in X.columns])
    X = pd.get_dummies(X, dtype=float)
    if cv is None:
        X_tr, X_va, y_tr, y_va, _, s_va = train_test_split(
            X, y, s, test_size=0.3, stratify=y, random_state=split_seed
        )
        folds = [(X_tr, y_tr, X_va)]
        y_va, s_va = y_va.to_numpy(), s_va.to_numpy()
    else:
        splitter = StratifiedKFold(n_splits=cv, shuffle=True, random_state=split_seed)
        index = list(splitter.split(X, y))
        folds = [(X.iloc[tr], y.iloc[tr], X.iloc[va]) for tr, va in index]
        order = np.concatenate([va for _, va in index])
        y_va, s_va = y.to_numpy()[order], s.to_numpy()[order]

    def objective(trial: optuna.Trial) -> float:
        params = dict(
            n_estimators=trial.suggest_int("n_estimators", 1, 64, log=True),
            min_samples_split=trial.suggest_float("min_samples_split", 0.01, 0.5, log=True),
            max_depth=trial.suggest_int("max_depth", 1, 5),
            criterion=trial.suggest_categorical("criterion", ["gini", "entropy"]),
        )
        y_pred = np.concatenate([
            RandomForestClassifier(**params, random_state=0, n_jobs=1).fit(X_f, y_f).predict(X_v)
            for X_f, y_f, X_v in folds
        ])
        set_fairness_constraints(
            trial, y_va, y_pred, sensitive_features=s_va, limits="demographic_parity<=0.05"
        )
        return float((y_pred == y_va).mean())

    return objective


PROBLEMS: dict[str, tuple[str, Callable[[], Callable[[optuna.Trial], float]]]] = {
    "gardner": ("minimize", lambda: gardner),
    "gramacy": ("minimize", lambda: gramacy),
    "german": ("maximize", lambda: make_rf_objective("german")),
    "german_cv5": ("maximize", lambda: make_rf_objective("german", cv=5)),
    "compas": ("maximize", lambda: make_rf_objective("compas")),
    "levy6": ("minimize", lambda: make_levy(6)),
    "levy10": ("minimize", lambda: levy10),
    "sphere8": ("minimize", lambda: make_sphere(8)),
    "sphere16": ("minimize", lambda: sphere16),
}

METHODS: dict[str, Callable[[int], optuna.samplers.BaseSampler]] = {
    "FairBO-cEI": lambda s: FairBOSampler(seed=s, n_startup_trials=N_INITIAL),
    "FairBO-cMES": lambda s: FairBOSampler(acquisition="cmes", seed=s, n_startup_trials=N_INITIAL),
    # The same problems with satisfied / violated feedback only (GP classification).
    "FairBO-cEI-binary": lambda s: FairBOSampler(
        seed=s, n_startup_trials=N_INITIAL, binary_constraints=True
    ),
    "GPSampler": lambda s: optuna.samplers.GPSampler(seed=s, n_startup_trials=N_INITIAL),
    "TPESampler": lambda s: optuna.samplers.TPESampler(seed=s, n_startup_trials=N_INITIAL),
    "RandomSampler": lambda s: optuna.samplers.RandomSampler(seed=s),
}


def initial_params(objective: Callable[[optuna.Trial], float], direction: str, seed: int) -> list:
    """The shared random initial trials of a seed (the same for every method)."""
    study = optuna.create_study(
        direction=direction, sampler=optuna.samplers.RandomSampler(seed=10_000 + seed)
    )
    study.optimize(objective, n_trials=N_INITIAL)
    return [t.params for t in study.trials]


def run(problem: str, method: str, seed: int, n_trials: int, initial: list) -> list[dict]:
    """One study of ``method`` on ``problem``: a CSV row per trial (best feasible so far)."""
    return _run_study(problem, method, seed, n_trials, initial)[0]


def _run_study(
    problem: str, method: str, seed: int, n_trials: int, initial: list
) -> tuple[list[dict], optuna.Study]:
    direction, factory = PROBLEMS[problem]
    objective = factory()
    study = optuna.create_study(direction=direction, sampler=METHODS[method](seed))
    for params in initial:
        study.enqueue_trial(params)
    rows = []
    sign = 1.0 if direction == "maximize" else -1.0
    best = -math.inf
    for i in range(n_trials):
        start = time.perf_counter()
        study.optimize(objective, n_trials=1)
        elapsed = time.perf_counter() - start
        t = study.trials[i]  # trial i ran in the i-th call (enqueued trials come first)
        feasible = t.state == optuna.trial.TrialState.COMPLETE and is_feasible(t)
        if feasible:
            best = max(best, sign * t.value)
        rows.append(
            {
                "problem": problem, "method": method, "seed": seed, "trial": i + 1,
                "value": t.value, "feasible": int(feasible),
                "best_feasible": sign * best if math.isfinite(best) else "",
                "seconds": round(elapsed, 4),
            }
        )
    return rows, study


def _quantiles(values: np.ndarray, sign: float) -> str:
    """Median [IQR] of best feasible values over seeds; a seed without a feasible trial counts
    as the worst outcome (so a median can itself be "none feasible")."""
    worst_first = np.where(np.isnan(values), -np.inf, sign * values)
    with np.errstate(invalid="ignore"):
        q1, med, q3 = np.percentile(worst_first, [25, 50, 75])
    cells = [f"{sign * v:.4f}" if np.isfinite(v) else "none" for v in (q1, med, q3)]
    low, high = (cells[0], cells[2]) if sign > 0 else (cells[2], cells[0])
    return f"{cells[1]} [{low}, {high}]"


def summarize(paths: list[str]) -> None:
    import pandas as pd

    df = pd.concat([pd.read_csv(p) for p in paths])
    ks = checkpoints(int(df.trial.max()), (20, 40))
    print(f"| problem | method | best feasible @{ks[0]}: median [IQR] | "
          + "".join(f"@{k}: median [IQR] | " for k in ks[1:])
          + "first feasible trial (median) | seeds without feasible "
          + " / ".join(f"@{k}" for k in ks) + " |")
    print("|---|---|" + "---|" * len(ks) + "---|---|")
    for (problem, method), g in df.groupby(["problem", "method"], sort=False):
        sign = 1.0 if PROBLEMS[problem][0] == "maximize" else -1.0
        cells = []
        for k in ks:
            at = g[g.trial == k].sort_values("seed").best_feasible.astype(float).to_numpy()
            cells.append(_quantiles(at, sign))
        first = g[g.feasible == 1].groupby("seed").trial.min()
        n_seeds = g.seed.nunique()
        missing = n_seeds - len(first)
        missing_at = [n_seeds - int((first <= k).sum()) for k in ks[:-1]]
        # Seeds without a feasible trial count as "after the last trial" in the median.
        firsts = np.concatenate([first.to_numpy(float), np.full(missing, np.inf)])
        med_first = np.median(firsts)
        first_text = f"{med_first:.0f}" if np.isfinite(med_first) else f"> {g.trial.max()}"
        print(f"| {problem} | {method} | {' | '.join(cells)} | {first_text} | "
              + " / ".join(str(m) for m in [*missing_at, missing]) + " |")


def _versus(df, reference: str, ks: list[int]):
    """Per (problem, method) other than ``reference``: the sign of the problem's direction and,
    per checkpoint k, the method's and the reference's best feasible values (Series by seed)."""
    for (problem, method), g in df.groupby(["problem", "method"], sort=False):
        if method == reference:
            continue
        sign = 1.0 if PROBLEMS[problem][0] == "maximize" else -1.0
        ref = df[(df.problem == problem) & (df.method == reference)]
        values = [
            (g[g.trial == k].set_index("seed").best_feasible.astype(float),
             ref[ref.trial == k].set_index("seed").best_feasible.astype(float))
            for k in ks
        ]
        yield problem, method, sign, values


def paired(paths: list[str], reference: str) -> None:
    """Per-seed comparison of every method with ``reference`` at 20 and 40 trials.

    A seed counts as a win when the method's best feasible value is strictly better than the
    reference's on the same seed (same shared initial trials), a tie when equal; a seed without
    a feasible trial counts as the worst outcome. The p-value is the two-sided sign test on the
    seeds that are not ties (scipy.stats.binomtest), a check of whether one method is better
    more often than chance would give.
    """
    import pandas as pd
    df = pd.concat([pd.read_csv(p) for p in paths])
    ks = checkpoints(int(df.trial.max()), (20, 40))
    print("| problem | method | seeds | " + "".join(
        f"@{k} vs {reference}: wins / ties / losses (sign test p) | " for k in ks).rstrip())
    print("|---|---|---|" + "---|" * len(ks))
    for problem, method, sign, values in _versus(df, reference, ks):
        cells = []
        for mine, theirs in values:
            n_seeds, cell = wins_ties_losses(mine, theirs, sign)
            cells.append(cell)
        print(f"| {problem} | {method} | {n_seeds} | {' | '.join(cells)} |")


def _draw_subsets(rng: np.random.Generator, n: int, size: int, n_subsets: int) -> np.ndarray:
    """``n_subsets`` random sets of ``size`` of the indices 0..n-1 (rows, without replacement)."""
    return np.array([rng.choice(n, size, replace=False) for _ in range(n_subsets)])


def _subset_medians(values: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """The median of ``values`` over each row of index sets ``draws`` (-inf for no feasible)."""
    with np.errstate(invalid="ignore"):
        return np.median(values[draws], axis=1)


def median_subsets(
    paths: list[str], reference: str, n_subsets: int, size: int = 10, seed: int = 0,
    level: float | None = None,
) -> None:
    """How often a method's median over ``size`` seeds beats ``reference``'s median.

    The benchmark's tables compare medians over 10 seeds. Where best values are discrete (German
    accuracy moves in steps of 1/300), whether one 10-seed median is strictly above another
    depends on which 10 seeds were drawn. This draws ``n_subsets`` random sets of ``size`` seeds
    (without replacement, from the seeds both methods ran) and prints, per method, the share of
    draws in which its median is strictly better than the reference's, and at least as good. A
    seed without a feasible trial counts as the worst outcome, as in the tables. With ``level``,
    a second table gives for every method the share of draws whose median is at least as good
    as ``level`` and strictly better than it.
    """
    import pandas as pd

    df = pd.concat([pd.read_csv(p) for p in paths])
    ks = checkpoints(int(df.trial.max()), (20, 40))
    rng = np.random.default_rng(seed)
    print(f"| problem | method | seeds | " + "".join(
        f"@{k}: {size}-seed median better than {reference} / at least as good "
        f"(share of {n_subsets} draws) | " for k in ks).rstrip())
    print("|---|---|---|" + "---|" * len(ks))
    for problem, method, sign, values in _versus(df, reference, ks):
        cells = []
        for mine, theirs in values:
            seeds = mine.index.intersection(theirs.index)
            if len(seeds) < size:
                raise ValueError(
                    f"`--subset-size` must be at most the {len(seeds)} seeds that {method} and "
                    f"{reference} share on {problem}, but got {size}."
                )
            a = np.nan_to_num(sign * mine[seeds].to_numpy(), nan=-np.inf)
            b = np.nan_to_num(sign * theirs[seeds].to_numpy(), nan=-np.inf)
            draws = _draw_subsets(rng, len(seeds), size, n_subsets)
            med_a, med_b = _subset_medians(a, draws), _subset_medians(b, draws)
            cells.append(f"{np.mean(med_a > med_b):.2f} / {np.mean(med_a >= med_b):.2f}")
        print(f"| {problem} | {method} | {len(seeds)} | {' | '.join(cells)} |")
    if level is None:
        return
    print()
    print(f"| problem | method | seeds | " + "".join(
        f"@{k}: {size}-seed median at least as good as {level:g} / better "
        f"(share of {n_subsets} draws) | " for k in ks).rstrip())
    print("|---|---|---|" + "---|" * len(ks))
    for (problem, method), g in df.groupby(["problem", "method"], sort=False):
        sign = 1.0 if PROBLEMS[problem][0] == "maximize" else -1.0
        cells = []
        for k in ks:
            values = g[g.trial == k].sort_values("seed").best_feasible.astype(float).to_numpy()
            values = np.nan_to_num(sign * values, nan=-np.inf)
            if len(values) < size:
                raise ValueError(
                    f"`--subset-size` must be at most the {len(values)} seeds of {method} on "
                    f"{problem}, but got {size}."
                )
            med = _subset_medians(values, _draw_subsets(rng, len(values), size, n_subsets))
            # Medians are averages of grid values: compare with a tolerance for rounding.
            tol = 1e-9 * max(1.0, abs(level))
            cells.append(f"{np.mean(med >= sign * level - tol):.3f} / "
                         f"{np.mean(med > sign * level + tol):.3f}")
        print(f"| {problem} | {method} | {len(values)} | {' | '.join(cells)} |")


def landscape(problem: str, n: int, seed: int, out: str) -> None:
    """Sample ``n`` random trials of ``problem``, save them to ``out`` and print a rarity table."""
    direction, factory = PROBLEMS[problem]
    sign = 1.0 if direction == "maximize" else -1.0
    study = optuna.create_study(
        direction=direction, sampler=optuna.samplers.RandomSampler(seed=seed)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study.optimize(factory(), n_trials=n)
    trials = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    names = sorted({k for t in trials for k in t.params})
    constraint_names = sorted({k for t in trials for k in t.constraints})
    feasible = [is_feasible(t) for t in trials]
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["problem", "trial", *names, "value", *constraint_names, "feasible"])
        for t, ok in zip(trials, feasible):
            writer.writerow([problem, t.number, *(t.params[k] for k in names), t.value,
                             *(t.constraints.get(k, "") for k in constraint_names), int(ok)])
    values = np.array([sign * t.value if ok else -np.inf for t, ok in zip(trials, feasible)])
    levels = np.unique(values[np.isfinite(values)])[::-1][:8]
    print(f"{problem}: {len(trials)} random trials, {np.isfinite(values).mean():.1%} feasible")
    print("| feasible value at least | share of random trials | P(one of 35 random trials "
          "reaches it) |")
    print("|---:|---:|---:|")
    for level in levels:
        share = float((values >= level - 1e-12).mean())
        print(f"| {sign * level:.4f} | {share:.2%} | {1 - (1 - share) ** 35:.0%} |")


def _score_on_other_splits(
    problem: str, configs: list[dict], n_splits: int
) -> tuple[np.ndarray, np.ndarray]:
    """Validation accuracy and fairness of each forest configuration (same forest seed) on the
    stratified 70/30 splits with seeds 1, ..., n_splits; two arrays (len(configs), n_splits)."""
    accuracy = np.zeros((len(configs), n_splits))
    fair = np.zeros((len(configs), n_splits), dtype=bool)
    for j in range(n_splits):
        study = optuna.create_study(direction="maximize")
        for params in configs:
            study.enqueue_trial(params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study.optimize(make_rf_objective(problem, split_seed=j + 1), n_trials=len(configs))
        for i, t in enumerate(study.trials):
            accuracy[i, j] = t.value
            fair[i, j] = is_feasible(t)
    return accuracy, fair


def _out_path(out: str, problem: str, problems: list[str]) -> str:
    """``out``, or ``<stem>_<problem><suffix>`` when several problems write their own file."""
    path = Path(out)
    if len(problems) > 1:
        path = path.with_name(f"{path.stem}_{problem}{path.suffix}")
    return str(path)


def resplit(landscape_csv: str, n_splits: int, top: int, where: str | None = None) -> None:
    """Score the ``top`` best feasible forests of a landscape sample on ``n_splits`` other splits.

    The benchmark validates on one fixed 70/30 split. A forest that is the best on that split
    may only be lucky on those validation rows: this re-trains the same configurations (same
    forest seed) on the splits with seeds 1, ..., n_splits and reports their mean validation
    accuracy and how often they stay fair there. ``where`` (a pandas query on the landscape's
    columns, e.g. ``"n_estimators > 40 and max_depth == 5"``) restricts the candidates first.
    """
    import pandas as pd

    df = pd.read_csv(landscape_csv)
    problem = str(df.problem.iloc[0])
    if problem not in ("german", "compas"):
        raise ValueError(f"resplit needs a german or compas landscape, but got {problem!r}.")
    names = ["n_estimators", "min_samples_split", "max_depth", "criterion"]
    if where:
        df = df.query(where)
    # Fractions that print the same are one forest here (a sample count of the split).
    df = df.assign(_split=df.min_samples_split.round(4))
    best = (df[df.feasible == 1]
            .drop_duplicates(subset=["n_estimators", "_split", "max_depth", "criterion"])
            .sort_values("value", ascending=False, kind="stable").head(top))
    configs = [{k: (row[k].item() if hasattr(row[k], "item") else row[k]) for k in names}
               for _, row in best.iterrows()]
    accuracy, fair = _score_on_other_splits(problem, configs, n_splits)
    print(f"{problem}: the {len(configs)} best fair configurations of {landscape_csv}"
          + (f" with {where}" if where else "") + f", re-trained on {n_splits} other splits")
    print("| trees | depth | criterion | min_samples_split | accuracy on the benchmark's split "
          "| other splits: mean accuracy (sd) | fair on other splits |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    for i, (params, value) in enumerate(zip(configs, best.value)):
        print(f"| {params['n_estimators']} | {params['max_depth']} | {params['criterion']} | "
              f"{params['min_samples_split']:.4f} | {value:.4f} | {accuracy[i].mean():.4f} "
              f"({accuracy[i].std():.4f}) | {fair[i].sum()} / {n_splits} |")


def generalize(
    problem: str, methods: list[str], seeds: range, n_trials: int, n_splits: int, out: str
) -> None:
    """Score each study's chosen forest on other splits: is a better benchmark value a better model?

    For every seed and method the study of the quality benchmark is run again (the same
    trials: samplers are seeded and the initial trials shared). At each checkpoint its best fair
    trial (the earliest, among equal values) is the forest a user would deploy. That
    configuration is re-trained, with the same forest seed, on the stratified 70/30 splits with
    seeds 1, ..., ``n_splits`` (the benchmark validates on split 0). Its mean validation accuracy
    and the share of those splits on which it met the limit are saved to ``out``.
    """
    if problem not in ("german", "compas"):
        raise ValueError(f"--generalize needs german or compas, but got problem {problem!r}.")
    direction, factory = PROBLEMS[problem]
    ks = checkpoints(n_trials, (20, 40))
    picks = []
    for seed in seeds:
        initial = initial_params(factory(), direction, seed)
        for method in methods:
            _, study = _run_study(problem, method, seed, n_trials, initial)
            for k in ks:
                fair = [t for t in study.trials[:k]
                        if t.state == optuna.trial.TrialState.COMPLETE and is_feasible(t)]
                best = max(fair, key=lambda t: t.value) if fair else None  # first of the best
                picks.append({"problem": problem, "method": method, "seed": seed, "trials": k,
                              "value": best.value if best else "",
                              "params": dict(best.params) if best else None})
            print(f"{problem} seed={seed} {method}: best fair={picks[-1]['value']}", flush=True)
    configs = {tuple(sorted(p["params"].items())) for p in picks if p["params"]}
    configs = sorted(configs)
    accuracy, fair = _score_on_other_splits(problem, [dict(c) for c in configs], n_splits)
    index = {config: i for i, config in enumerate(configs)}
    names = ["n_estimators", "min_samples_split", "max_depth", "criterion"]
    with open(out, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["problem", "method", "seed", "trials", "value", *names,
                         "other_accuracy", "other_fair_share"])
        for p in picks:
            if p["params"] is None:
                writer.writerow([p["problem"], p["method"], p["seed"], p["trials"], "",
                                 *[""] * len(names), "", ""])
                continue
            i = index[tuple(sorted(p["params"].items()))]
            writer.writerow([p["problem"], p["method"], p["seed"], p["trials"], p["value"],
                             *(p["params"][n] for n in names), accuracy[i].mean(),
                             fair[i].mean()])
    summarize_generalization([out], methods[0])


def summarize_generalization(paths: list[str], reference: str) -> None:
    """Tables of a --generalize CSV: the chosen forests on the benchmark's split and elsewhere."""
    import pandas as pd

    df = pd.concat([pd.read_csv(p) for p in paths])
    print("| problem | method | trials | seeds | best fair accuracy, benchmark split: median "
          "(mean) | the same forest on other splits: mean accuracy, median (mean) over seeds "
          "| fair on other splits (mean share) | other-split accuracy vs "
          f"{reference}: wins / ties / losses (p) |")
    print("|---|---|---:|---:|---|---|---:|---|")
    for (problem, method, k), g in df.groupby(["problem", "method", "trials"], sort=False):
        g = g.set_index("seed")
        ref = df[(df.problem == problem) & (df.method == reference) & (df.trials == k)]
        versus = "-"
        if method != reference:
            _, versus = wins_ties_losses(g.other_accuracy.astype(float),
                                         ref.set_index("seed").other_accuracy.astype(float))
        chosen = g.dropna(subset=["other_accuracy"])
        missing = len(g) - len(chosen)
        print(f"| {problem} | {method} | {k} | {len(g)}"
              + (f" ({missing} without a fair trial)" if missing else "")
              + f" | {chosen.value.median():.4f} ({chosen.value.mean():.4f}) | "
              f"{chosen.other_accuracy.median():.4f} ({chosen.other_accuracy.mean():.4f}) | "
              f"{chosen.other_fair_share.mean():.2f} | {versus} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--seeds", type=int, default=10, help="number of seeds")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds are first-seed, ..., first-seed + seeds - 1")
    parser.add_argument("--n-trials", type=int, default=40)
    parser.add_argument("--out", default="benchmarks/results/fairbo_synthetic.csv")
    parser.add_argument("--summarize", nargs="+", metavar="CSV")
    parser.add_argument("--versus", metavar="METHOD",
                        help="with --summarize: per-seed wins / ties / losses against METHOD")
    parser.add_argument("--subsets", type=int, metavar="N",
                        help="with --summarize and --versus: in N random draws of "
                             "--subset-size seeds, how often each method's median beats "
                             "METHOD's")
    parser.add_argument("--subset-size", type=int, default=10,
                        help="with --subsets: seeds per draw")
    parser.add_argument("--level", type=float,
                        help="with --subsets: also how often each method's median reaches "
                             "this value")
    parser.add_argument("--generalize", type=int, metavar="SPLITS",
                        help="german or compas: re-run the studies and score each one's best "
                             "fair forest on SPLITS other splits (saved to --out); with "
                             "--summarize, read such CSVs instead")
    parser.add_argument("--landscape", type=int, metavar="N",
                        help="evaluate N random trials of each problem and print how rare "
                             "each feasible value is (saved to --out)")
    parser.add_argument("--resplit", metavar="CSV",
                        help="score the best fair forests of a --landscape CSV of german or "
                             "compas on other train/validation splits")
    parser.add_argument("--splits", type=int, default=20, help="with --resplit: other splits")
    parser.add_argument("--top", type=int, default=15,
                        help="with --resplit: how many of the best configurations")
    parser.add_argument("--where", metavar="QUERY",
                        help="with --resplit: only configurations matching this pandas query")
    args = parser.parse_args()
    if args.resplit:
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        resplit(args.resplit, args.splits, args.top, args.where)
        return
    if args.landscape:
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        for problem in args.problems:
            landscape(problem, args.landscape, args.first_seed,
                      _out_path(args.out, problem, args.problems))
        return
    if args.summarize and args.generalize:
        summarize_generalization(args.summarize, args.versus or "FairBO-cEI")
        return
    if args.generalize:
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        for problem in args.problems:
            generalize(problem, args.methods, range(args.first_seed, args.first_seed + args.seeds),
                       args.n_trials, args.generalize,
                       _out_path(args.out, problem, args.problems))
        return
    if args.summarize:
        summarize(args.summarize)
        if args.versus:
            print()
            paired(args.summarize, args.versus)
            if args.subsets:
                print()
                median_subsets(args.summarize, args.versus, args.subsets, args.subset_size,
                               level=args.level)
        elif args.subsets:
            parser.error("--subsets needs --versus METHOD")
        return
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = None
        for problem in args.problems:
            direction, factory = PROBLEMS[problem]
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                initial = initial_params(factory(), direction, seed)
                for method in args.methods:
                    rows = run(problem, method, seed, args.n_trials, initial)
                    if writer is None:
                        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
                        writer.writeheader()
                    writer.writerows(rows)
                    f.flush()
                    last = rows[-1]
                    print(f"{problem} seed={seed} {method}: best feasible={last['best_feasible']}"
                          f" ({sum(r['seconds'] for r in rows):.1f}s)", flush=True)
    summarize([args.out])


if __name__ == "__main__":
    main()
