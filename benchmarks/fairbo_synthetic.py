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
* ``branin_disk``, ``hartmann_ball``, ``log_two``, ``mixed_space`` and ``thin_band``: constrained
  problems for the comparison with Optuna's GPSampler (each function's docstring): optima on a
  disk's or a ball's edge, a log-scaled input with two binding constraints, integer,
  categorical and float dimensions together, and a feasible band 0.04 wide.
* ``levy6``, ``levy10``, ``sphere8`` and ``sphere16``: more parameters than the problems above.
  Levy's function in 6 and 10 dimensions (unconstrained, minimum 0), and 8-d and 16-d
  quadratics with one linear constraint (minimum 0.03).

Every method gets the same 5 random initial trials for a seed (enqueued), then runs to
``--n-trials``. Constraints reach every sampler through ``trial.set_constraint`` (Optuna 5).
Reported: median (and interquartile range) of the best feasible value after 20, 40 and 80 trials
over seeds, a seed without any feasible trial counting as the worst outcome, the median
trial index at which the first feasible trial appeared (a seed without one counting as later
than the last trial), the median seconds per sampled trial and, with ``--versus``, seed-by-seed
sign tests. A run appends to ``--out`` and skips the (problem, method, seed) studies already there.

Usage (docs/benchmarks/fairbo.md gives the commands behind each number):
    OMP_NUM_THREADS=1 python -m benchmarks.fairbo_synthetic --problems gardner gramacy \\
        --seeds 10 --n-trials 40 --out benchmarks/results/fairbo_synthetic.csv.gz
    python -m benchmarks.fairbo_synthetic --summarize benchmarks/results/fairbo_synthetic.csv.gz \\
        --versus FairBO-cEI --plot fairbo.png

``--landscape N`` evaluates N uniformly random configurations of each problem (RandomSampler,
seed ``--first-seed``), saves them to ``--out`` and prints how rare each level of feasible value
is: the share of random trials that reach it, and the chance that at least one of 35 random
trials (a 40-trial study after its 5 initial ones) does. ``--summarize`` of such a file prints
the same table again.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import optuna

from benchmarks._common import (append_rows, checkpoints, done_keys, figure, read_rows,
                                save_figure, wins_ties_losses)

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


def branin_disk(trial: optuna.Trial) -> float:
    """Branin's function on [-5, 10] x [0, 15] inside a disk of radius 4 around (2.5, 7.5),
    which holds none of its three minima: the optimum lies on the disk's edge."""
    x = trial.suggest_float("x", -5.0, 10.0)
    y = trial.suggest_float("y", 0.0, 15.0)
    trial.set_constraint("c", (x - 2.5) ** 2 + (y - 7.5) ** 2 - 16.0)
    b, c = 5.1 / (4 * math.pi**2), 5 / math.pi
    return (y - b * x**2 + c * x - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x) + 10


_HARTMANN_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
                        [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]])
_HARTMANN_P = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886],
                               [2329, 4135, 8307, 3736, 1004, 9991],
                               [2348, 1451, 3522, 2883, 3047, 6650],
                               [4047, 8828, 8732, 5743, 1091, 381]])
_HARTMANN_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def hartmann_ball(trial: optuna.Trial) -> float:
    """Hartmann's 6-d function inside the ball of radius 0.5 around the cube's centre (its
    global minimum, -3.32, lies outside)."""
    x = np.array([trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(6)])
    trial.set_constraint("c", float(np.sum((x - 0.5) ** 2)) - 0.25)
    inner = np.sum(_HARTMANN_A * (x - _HARTMANN_P) ** 2, axis=1)
    return float(-np.sum(_HARTMANN_ALPHA * np.exp(-inner)))


def log_two(trial: optuna.Trial) -> float:
    """3-d, one log-scaled input (a learning-rate-like ``lr`` in [1e-4, 1]), two constraints
    that both bind at the optimum."""
    lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
    a = trial.suggest_float("a", 0.0, 1.0)
    b = trial.suggest_float("b", 0.0, 1.0)
    u = (math.log10(lr) + 4.0) / 4.0  # 0..1
    trial.set_constraint("c1", a + b - 1.0)
    trial.set_constraint("c2", 0.6 - u - 0.5 * a)
    return (u - 0.3) ** 2 + (a - 0.9) ** 2 + (b - 0.7) ** 2 + 0.3 * math.sin(5 * u)


def mixed_space(trial: optuna.Trial) -> float:
    """Integer, log-scaled integer, categorical and float dimensions, one constraint."""
    depth = trial.suggest_int("depth", 1, 12)
    trees = trial.suggest_int("trees", 1, 1000, log=True)
    kind = trial.suggest_categorical("kind", ["a", "b", "c"])
    rate = trial.suggest_float("rate", 0.0, 1.0)
    t = math.log10(trees) / 3.0
    offset = {"a": 0.3, "b": 0.0, "c": 0.6}[kind]
    trial.set_constraint("c", depth / 12.0 + t - 1.1 + 0.2 * rate)
    return -(depth / 12.0) - t - 0.5 * math.sin(3 * rate) + offset + (rate - 0.6) ** 2


def thin_band(trial: optuna.Trial) -> float:
    """2-d, feasible only within 0.02 of a curve (about 4 % of the square), two constraints."""
    x = trial.suggest_float("x", 0.0, 1.0)
    y = trial.suggest_float("y", 0.0, 1.0)
    g = 0.5 + 0.3 * math.sin(4.0 * x)
    trial.set_constraint("above", g - 0.02 - y)
    trial.set_constraint("below", y - g - 0.02)
    return (x - 0.9) ** 2 + (y - 0.2) ** 2

sphere16 = make_sphere(16)


def make_rf_objective(
    dataset: str, drop_sensitive: bool = True, split_seed: int = 0
) -> Callable[[optuna.Trial], float]:
    """Validation accuracy of the random forest under ``demographic_parity <= 0.05``: it trains
    on 70 % of the rows and is scored on the other 30 % (one fixed stratified split)."""
    import pandas as pd
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import train_test_split

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
    X_tr, X_va, y_tr, y_va, _, s_va = train_test_split(
        X, y, s, test_size=0.3, stratify=y, random_state=split_seed
    )
    y_va, s_va = y_va.to_numpy(), s_va.to_numpy()

    def objective(trial: optuna.Trial) -> float:
        params = dict(
            n_estimators=trial.suggest_int("n_estimators", 1, 64, log=True),
            min_samples_split=trial.suggest_float("min_samples_split", 0.01, 0.5, log=True),
            max_depth=trial.suggest_int("max_depth", 1, 5),
            criterion=trial.suggest_categorical("criterion", ["gini", "entropy"]),
        )
        forest = RandomForestClassifier(**params, random_state=0, n_jobs=1).fit(X_tr, y_tr)
        y_pred = forest.predict(X_va)
        set_fairness_constraints(
            trial, y_va, y_pred, sensitive_features=s_va, limits="demographic_parity<=0.05"
        )
        return float((y_pred == y_va).mean())

    return objective


PROBLEMS: dict[str, tuple[str, Callable[[], Callable[[optuna.Trial], float]]]] = {
    "gardner": ("minimize", lambda: gardner),
    "gramacy": ("minimize", lambda: gramacy),
    "branin_disk": ("minimize", lambda: branin_disk),
    "hartmann_ball": ("minimize", lambda: hartmann_ball),
    "log_two": ("minimize", lambda: log_two),
    "mixed_space": ("minimize", lambda: mixed_space),
    "thin_band": ("minimize", lambda: thin_band),
    "german": ("maximize", lambda: make_rf_objective("german")),
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
    return rows


def _quantiles(values: np.ndarray, sign: float) -> str:
    """Median [IQR] of best feasible values over seeds; a seed without a feasible trial counts
    as the worst outcome (so a median can itself be "none feasible")."""
    worst_first = np.where(np.isnan(values), -np.inf, sign * values)
    with np.errstate(invalid="ignore"):
        q1, med, q3 = np.percentile(worst_first, [25, 50, 75])
    cells = [f"{sign * v:.4f}" if np.isfinite(v) else "none" for v in (q1, med, q3)]
    low, high = (cells[0], cells[2]) if sign > 0 else (cells[2], cells[0])
    return f"{cells[1]} [{low}, {high}]"


def summarize(paths: list[str], plot: str | None = None,
              methods: list[str] | None = None) -> None:
    """The quality table of result files (a landscape file: its rarity table); with ``plot``,
    the figure of docs/benchmarks/fairbo.md."""
    import pandas as pd

    landscapes = [p for p in paths if "method" not in pd.read_csv(p, nrows=0).columns]
    for path in landscapes:
        rarity(read_rows(path))
    paths = [p for p in paths if p not in landscapes]
    if not paths:
        return
    df = pd.concat([pd.read_csv(p) for p in paths])
    if methods:
        df = df[df.method.isin(methods)]
    ks = checkpoints(int(df.trial.max()), (20, 40, 80))
    print(f"| problem | method | best feasible @{ks[0]}: median [IQR] | "
          + "".join(f"@{k}: median [IQR] | " for k in ks[1:])
          + "first feasible trial (median) | seeds without feasible "
          + " / ".join(f"@{k}" for k in ks) + " | seconds per trial (median) |")
    print("|---|---|" + "---|" * len(ks) + "---|---|---:|")
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
        # The sampler's share: the initial trials are enqueued, not sampled.
        seconds = g[g.trial > N_INITIAL].seconds.median()
        print(f"| {problem} | {method} | {' | '.join(cells)} | {first_text} | "
              + " / ".join(str(m) for m in [*missing_at, missing]) + f" | {seconds:.3f} |")
    if plot:
        plot_best(df, plot)


LABELS = {"FairBO-cEI": "FairBOSampler", "FairBO-cMES": "FairBOSampler, cMES",
          "FairBO-cEI-binary": "FairBOSampler, binary constraints"}
TITLES = {"german": "German credit forest, DSP <= 0.05", "compas": "COMPAS forest, DSP <= 0.05"}


def plot_best(df, path: str) -> None:
    """One panel per problem against the trial number: the median best feasible value (shaded
    between the quartiles), or, where some study has no feasible trial at the end, the share of
    seeds with a feasible trial so far."""
    problems = list(dict.fromkeys(df.problem))
    fig, axes = figure(1, len(problems), figsize=(4.2 * len(problems), 3.4), squeeze=False)
    for ax, problem in zip(axes[0], problems):
        part = df[df.problem == problem]
        sign = 1.0 if PROBLEMS[problem][0] == "maximize" else -1.0
        last = part[part.trial == part.trial.max()]
        rare = last.best_feasible.isna().any()
        for method, g in part.groupby("method", sort=False):
            color = f"C{list(METHODS).index(method)}"  # the same in every panel
            curves = g.pivot(index="trial", columns="seed", values="best_feasible").astype(float)
            if rare:
                ax.step(curves.index, curves.notna().mean(axis=1), where="post",
                        color=color, label=LABELS.get(method, method))
                continue
            worst_first = np.where(np.isnan(curves), -np.inf, sign * curves)
            with np.errstate(invalid="ignore"):
                q1, med, q3 = sign * np.percentile(worst_first, [25, 50, 75], axis=1)
            ax.plot(curves.index, med, color=color, label=LABELS.get(method, method))
            ax.fill_between(curves.index, q1, q3, color=color, alpha=0.12)
        ax.set_title(f"{TITLES.get(problem, problem)}, {part.seed.nunique()} seeds")
        ax.set_xlabel("trial")
        ax.set_ylabel("share of seeds with a feasible trial" if rare
                      else "best feasible value (median, IQR)")
    axes[0][0].legend(fontsize="small")
    save_figure(fig, path)


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


def versus_table(paths: list[str], reference: str) -> None:
    """Per-seed comparison of every method with ``reference`` at 20 and 40 trials.

    A seed counts as a win when the method's best feasible value is strictly better than the
    reference's on the same seed (same shared initial trials), a tie when equal; a seed without
    a feasible trial counts as the worst outcome. The p-value is the two-sided sign test on the
    seeds that are not ties (scipy.stats.binomtest), a check of whether one method is better
    more often than chance would give.
    """
    import pandas as pd
    df = pd.concat([pd.read_csv(p) for p in paths])
    ks = checkpoints(int(df.trial.max()), (20, 40, 80))
    print("| problem | method | seeds | " + "".join(
        f"@{k} vs {reference}: wins / ties / losses (sign test p) | " for k in ks).rstrip())
    print("|---|---|---|" + "---|" * len(ks))
    for problem, method, sign, values in _versus(df, reference, ks):
        cells = []
        for mine, theirs in values:
            n_seeds, cell = wins_ties_losses(mine, theirs, sign)
            cells.append(cell)
        print(f"| {problem} | {method} | {n_seeds} | {' | '.join(cells)} |")


def landscape(problem: str, n: int, seed: int, out: str) -> None:
    """Sample ``n`` random trials of ``problem``, save them to ``out`` and print a rarity table."""
    direction, factory = PROBLEMS[problem]
    study = optuna.create_study(
        direction=direction, sampler=optuna.samplers.RandomSampler(seed=seed)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study.optimize(factory(), n_trials=n)
    trials = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    names = sorted({k for t in trials for k in t.params})
    constraint_names = sorted({k for t in trials for k in t.constraints})
    rows = [{"problem": problem, "trial": t.number, **{k: t.params[k] for k in names},
             "value": t.value, **{k: t.constraints.get(k, "") for k in constraint_names},
             "feasible": int(is_feasible(t))} for t in trials]
    Path(out).unlink(missing_ok=True)
    append_rows(out, rows)
    rarity(read_rows(out))


def rarity(rows: list[dict[str, str]]) -> None:
    """How rare each of the best feasible values of a landscape file is among its trials."""
    problem = rows[0]["problem"]
    sign = 1.0 if PROBLEMS[problem][0] == "maximize" else -1.0
    values = np.array([sign * float(r["value"]) if r["feasible"] == "1" else -np.inf
                       for r in rows])
    levels = np.unique(values[np.isfinite(values)])[::-1][:8]
    print(f"{problem}: {len(rows)} random trials, {np.isfinite(values).mean():.1%} feasible")
    print("| feasible value at least | share of random trials | P(one of 35 random trials "
          "reaches it) |")
    print("|---:|---:|---:|")
    for level in levels:
        share = float((values >= level - 1e-12).mean())
        print(f"| {sign * level:.4f} | {share:.2%} | {1 - (1 - share) ** 35:.0%} |")


def _out_path(out: str, problem: str, problems: list[str]) -> str:
    """``out``, or ``<stem>_<problem><suffixes>`` when several problems write their own file."""
    if len(problems) == 1:
        return out
    path = Path(out)
    suffixes = "".join(path.suffixes)
    return str(path.with_name(f"{path.name[: len(path.name) - len(suffixes)]}_{problem}{suffixes}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS),
                        help="the methods to run, or with --summarize to show")
    parser.add_argument("--seeds", type=int, default=10, help="number of seeds")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds are first-seed, ..., first-seed + seeds - 1")
    parser.add_argument("--n-trials", type=int, default=40)
    parser.add_argument("--out", default="benchmarks/results/fairbo_synthetic.csv.gz")
    parser.add_argument("--summarize", nargs="+", metavar="CSV")
    parser.add_argument("--versus", metavar="METHOD",
                        help="with --summarize: per-seed wins / ties / losses against METHOD")
    parser.add_argument("--plot", metavar="PNG",
                        help="with --summarize: best feasible value against the trial number")
    parser.add_argument("--landscape", type=int, metavar="N",
                        help="evaluate N random trials of each problem and print how rare "
                             "each feasible value is (saved to --out)")
    args = parser.parse_args()
    if args.summarize:
        summarize(args.summarize, args.plot, args.methods)
        if args.versus:
            print()
            versus_table(args.summarize, args.versus)
        return
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    if args.landscape:
        for problem in args.problems:
            landscape(problem, args.landscape, args.first_seed,
                      _out_path(args.out, problem, args.problems))
        return
    done = done_keys(args.out, ("problem", "method", "seed"))
    for problem in args.problems:
        direction, factory = PROBLEMS[problem]
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            todo = [m for m in args.methods if (problem, m, str(seed)) not in done]
            if not todo:
                continue
            initial = initial_params(factory(), direction, seed)
            for method in todo:
                rows = run(problem, method, seed, args.n_trials, initial)
                append_rows(args.out, rows)
                print(f"{problem} seed={seed} {method}: best feasible="
                      f"{rows[-1]['best_feasible']} ({sum(r['seconds'] for r in rows):.1f}s)",
                      flush=True)
    summarize([args.out])


if __name__ == "__main__":
    main()
