"""Multi-fidelity search against the full search under a fairness limit, on a large table.

For each seed: a full search (``FairObjective``, XGBoost with fairlearn's ThresholdOptimizer
inside, ``demographic_parity<=0.05``, FairBOSampler, ``--n-trials`` trials on all the training
rows) takes ``W`` seconds. The multi-fidelity searches then get ``W / 3`` (Optuna's
``timeout``; only the trials finished by then count): the same objective with
``budgets=(1/9, 1/3, 1)`` and successive halving, once with FairBOSampler as it is (it learns
from completed trials only) and once with a variant that also learns from pruned trials (each
enters the models with its last rung's validation value and fairness gap). The full search
stopped at ``W / 3`` is scored too (its best fair trial among those finished by then). Every
arm's best fair trial is refitted and scored on the test split (a fifth of the rows, never seen
by tuning). Default thread settings, as users run.

Usage:
    python -m benchmarks.multifidelity run --data synthetic --rows 200000 --seeds 0 1 2 \\
        --out benchmarks/results/multifidelity.csv
    python -m benchmarks.multifidelity run --data adult --seeds 0 1 2 \\
        --out benchmarks/results/multifidelity.csv
    python -m benchmarks.multifidelity summarize benchmarks/results/multifidelity.csv \\
        --plot docs/images/multifidelity.png
"""

from __future__ import annotations

import argparse
import datetime
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from benchmarks._common import append_rows, done_keys, figure, paired, read_rows, save_figure

LIMIT = "demographic_parity<=0.05"
BOUND = 0.05
BUDGETS = (1 / 9, 1 / 3, 1.0)
ARMS = ("full", "full, stopped at a third", "multi-fidelity", "multi-fidelity, pruned trials used")
FIELDS = ("data", "rows", "seed", "arm", "wall_s", "trials", "completed", "pruned",
          "best_trial", "valid_accuracy", "test_accuracy", "test_gap", "test_fair",
          "smallest_budget_spearman", "smallest_budget_drop")


def _data(name: str, rows: int, seed: int) -> tuple[Any, int]:
    """The table (synthetic with ``rows`` rows, or Adult) and its number of rows."""
    if name == "synthetic":
        from benchmarks.scaling import synthetic

        table = synthetic(rows, seed)
        return table, len(table[1])
    import warnings

    from fairtune import datasets

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        adult = datasets.load_adult()
    return adult, len(adult.target)


def pruned_trials_sampler(seed: int, bound: float) -> Any:
    """FairBOSampler that also learns from pruned trials: each enters the objective's model
    with its last rung's validation value and the fairness constraint's model with that rung's
    gap, and counts towards the random start-up trials."""
    import optuna
    from optuna.trial import TrialState

    from fairtune.samplers import FairBOSampler
    from fairtune.tuning._trial import RUNGS_KEY

    class UsesPrunedTrials(FairBOSampler):
        def _pruned(self, study: optuna.Study, names: Any) -> list[Any]:
            found = []
            for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,)):
                rungs = t.user_attrs.get(RUNGS_KEY)
                if not rungs or not names <= t.params.keys():
                    continue
                last = rungs[-1]
                constraints = {m: float(last[m]) - bound for m in last
                               if m not in ("budget", "value")}
                found.append(optuna.trial.create_trial(
                    value=float(last["value"]), params=t.params, distributions=t.distributions,
                    constraints=constraints))
            return found

        def sample_relative(self, study: optuna.Study, trial: Any, search_space: Any) -> Any:
            # The start-up phase counts the pruned trials too.
            n_pruned = len(self._pruned(study, search_space.keys())) if search_space else 0
            startup = self._n_startup_trials
            self._n_startup_trials = max(1, startup - n_pruned)
            try:
                return super().sample_relative(study, trial, search_space)
            finally:
                self._n_startup_trials = startup

        def _sample_relative_impl(self, study: optuna.Study, search_space: Any,
                                  complete: Sequence[Any], pending: Any) -> Any:
            extra = self._pruned(study, search_space.keys())
            return super()._sample_relative_impl(study, search_space, [*complete, *extra],
                                                 pending)

    return UsesPrunedTrials(seed=seed)


def _scored(objective: Any, study: Any, trials: list[Any]) -> dict[str, Any]:
    """The best fair trial among ``trials`` (the best trial when none is fair), refitted and
    scored on the test split."""
    from fairtune.fairness import is_feasible

    complete = [t for t in trials if t.state.name == "COMPLETE"]
    if not complete:  # none finished in time: no model, the worst outcome of a comparison
        return dict.fromkeys(("best_trial", "valid_accuracy", "test_accuracy", "test_gap",
                              "test_fair"), float("nan"))
    fair = [t for t in complete if is_feasible(t)] or complete
    best = max(fair, key=lambda t: t.value)
    report = objective.evaluate(objective.refit_best(study, trial=best))
    gap = report["demographic_parity"]
    return {"best_trial": best.number, "valid_accuracy": round(best.value, 5),
            "test_accuracy": round(report["accuracy"], 5), "test_gap": round(gap, 5),
            "test_fair": int(gap <= BOUND)}


def _rung_agreement(trials: list[Any]) -> dict[str, Any]:
    """Over the completed trials of a multi-fidelity search: the rank correlation between a
    trial's validation value at the smallest budget and at the full budget, and the mean drop
    from the full budget's value to the smallest's."""
    from scipy.stats import spearmanr

    from fairtune.tuning._trial import RUNGS_KEY

    pairs = [(t.user_attrs[RUNGS_KEY][0]["value"], t.value) for t in trials
             if t.state.name == "COMPLETE" and t.user_attrs.get(RUNGS_KEY)]
    if len(pairs) < 3:
        return {"smallest_budget_spearman": float("nan"), "smallest_budget_drop": float("nan")}
    small, full = np.array(pairs).T
    return {"smallest_budget_spearman": round(float(spearmanr(small, full).statistic), 4),
            "smallest_budget_drop": round(float(np.mean(full - small)), 5)}


def run_seed(data: str, rows: int, seed: int, n_trials: int) -> list[dict[str, Any]]:
    """Every arm of one seed, in this process."""
    import optuna

    from fairtune.tuning import FairObjective

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    table, n_rows = _data(data, rows, seed)

    def objective(**kwargs: Any) -> FairObjective:
        return FairObjective(table, "xgboost", limits=LIMIT, mitigation="threshold",
                             test_size=0.2, random_state=seed, **kwargs)

    def counts(trials: Any) -> dict[str, int]:
        states = [t.state.name for t in getattr(trials, "trials", trials)]
        return {"trials": len(states), "completed": states.count("COMPLETE"),
                "pruned": states.count("PRUNED")}

    base = {"data": data, "rows": n_rows, "seed": seed}
    full = objective()
    study = full.create_study(seed=seed)
    started = datetime.datetime.now()
    start = time.perf_counter()
    study.optimize(full, n_trials=n_trials)
    wall = time.perf_counter() - start
    out = [{**base, "arm": ARMS[0], "wall_s": round(wall, 2), **counts(study),
            **_scored(full, study, study.trials)}]
    early, seconds = _finished_within(study, started, wall / 3)
    out.append({**base, "arm": ARMS[1], "wall_s": round(seconds, 2), "trials": len(early),
                "completed": len(early), "pruned": 0, **_scored(full, study, early)})
    for arm, sampler in ((ARMS[2], None), (ARMS[3], pruned_trials_sampler(seed, BOUND))):
        multi = objective(budgets=BUDGETS)
        study = multi.create_study(seed=seed, pruner="successive_halving")
        if sampler is not None:
            study.sampler = sampler
        started = datetime.datetime.now()
        # Optuna's timeout starts no trial after the deadline but lets the last one finish:
        # only the trials finished by the deadline count.
        study.optimize(multi, n_trials=100 * n_trials, timeout=wall / 3)
        within, seconds = _finished_within(study, started, wall / 3)
        out.append({**base, "arm": arm, "wall_s": round(seconds, 2), **counts(within),
                    **_scored(multi, study, within), **_rung_agreement(within)})
    return out


def _finished_within(study: Any, started: datetime.datetime, seconds: float
                     ) -> tuple[list[Any], float]:
    """The trials of ``study`` finished within ``seconds`` of ``started``, and the seconds to
    the last of them."""
    ends = [((t.datetime_complete - started).total_seconds(), t) for t in study.trials
            if t.datetime_complete is not None]
    within = [(end, t) for end, t in ends if end <= seconds]
    return [t for _, t in within], max((end for end, _ in within), default=0.0)


def run(args: argparse.Namespace) -> None:
    done = done_keys(args.out, ("data", "seed"))
    for seed in args.seeds:
        if (args.data, str(seed)) in done:
            continue
        rows = run_seed(args.data, args.rows, seed, args.n_trials)
        append_rows(args.out, rows, FIELDS)
        for row in rows:
            print(f"{row['data']} seed {seed} {row['arm']:<34} {row['wall_s']:>7.1f} s "
                  f"{row['trials']:>4} trials  test accuracy {row['test_accuracy']:.4f}  "
                  f"gap {row['test_gap']:.4f}", flush=True)


def summarize(args: argparse.Namespace) -> None:
    frame = pd.DataFrame(read_rows(args.results))
    for column in ("wall_s", "trials", "completed", "test_accuracy", "test_gap", "test_fair",
                   "smallest_budget_spearman", "smallest_budget_drop"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    print("| Table | Search | Wall time | Trials (completed) | Test accuracy | Fair on test "
          "| Accuracy vs full: wins / ties / losses (p) |")
    print("|---|---|---:|---:|---:|---:|---|")
    for data, part in frame.groupby("data", sort=False):
        reference = part[part.arm == ARMS[0]].set_index("seed")
        for arm in ARMS:
            rows = part[part.arm == arm].set_index("seed").loc[reference.index]
            text = "" if arm == ARMS[0] else "{} / {} / {} ({:.2f})".format(
                *paired(rows.test_accuracy.to_numpy(), reference.test_accuracy.to_numpy()))
            print(f"| {_TABLE[data]} ({int(part.rows.iloc[0]):,} rows) | {arm} "
                  f"| {rows.wall_s.mean():.0f} s | {rows.trials.mean():.0f} "
                  f"({rows.completed.mean():.0f}) | {rows.test_accuracy.mean():.4f} "
                  f"| {int(rows.test_fair.sum())} of {len(rows)} | {text} |")
        used = part[part.arm == ARMS[3]].set_index("seed").loc[reference.index]
        ignored = part[part.arm == ARMS[2]].set_index("seed").loc[reference.index]
        print("\n{}: FairBOSampler learning from pruned trials against ignoring them, test "
              "accuracy: {} / {} / {} (p = {:.2f})".format(
                  _TABLE[data], *paired(used.test_accuracy.to_numpy(),
                                        ignored.test_accuracy.to_numpy())))
        multi = part[part.arm.str.startswith("multi")].dropna(
            subset=["smallest_budget_spearman", "smallest_budget_drop"])
        if len(multi):  # searches with three or more completed trials
            print(f"\n{_TABLE[data]}: the smallest budget's validation accuracy against the "
                  f"full budget's, over the completed trials: rank correlation "
                  f"{multi.smallest_budget_spearman.median():.2f} (median over seeds and "
                  f"arms), {multi.smallest_budget_drop.mean():.4f} lower on average.\n")
    if args.plot:
        _plot(frame, args.plot)


_TABLE = {"synthetic": "Synthetic", "adult": "Adult"}


def _plot(frame: pd.DataFrame, path: str) -> None:
    """Per table, each arm's test accuracy less the full search's, seed by seed (all three
    arms ran in a third of the full search's time), and the median."""
    datas = list(dict.fromkeys(frame.data))
    fig, axes = figure(1, len(datas), figsize=(5.0 * len(datas), 3.6), squeeze=False)
    labels = ("full search,\nstopped at a third", "multi-fidelity", "multi-fidelity,\n"
              "pruned trials used")
    jitter = np.random.default_rng(0)
    for ax, data in zip(axes[0], datas):
        part = frame[frame.data == data]
        reference = part[part.arm == ARMS[0]].set_index("seed")
        for x, (arm, color) in enumerate(zip(ARMS[1:], ("#999999", "#1f77b4", "#ff7f0e"))):
            rows = part[part.arm == arm].set_index("seed").loc[reference.index]
            difference = (rows.test_accuracy - reference.test_accuracy).to_numpy()
            ax.scatter(x + jitter.uniform(-0.12, 0.12, len(difference)), difference, s=18,
                       color=color, alpha=0.8)
            if np.isfinite(difference).any():  # an arm that finished no trial in time has none
                ax.plot([x - 0.25, x + 0.25], [np.nanmedian(difference)] * 2, color="black",
                        lw=1.5)
        ax.axhline(0.0, color="black", lw=0.6, ls=":")
        ax.set_xticks(range(3), labels, fontsize=8)
        ax.set_title(f"{_TABLE[data]} ({int(part.rows.iloc[0]):,} rows)")
        ax.set_ylabel("test accuracy - the full search's")
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run")
    one.add_argument("--data", choices=sorted(_TABLE), default="synthetic")
    one.add_argument("--rows", type=int, default=200_000, help="rows of the synthetic table")
    one.add_argument("--seeds", type=int, nargs="+", default=list(range(12)))
    one.add_argument("--n-trials", type=int, default=50)
    one.add_argument("--out", required=True)
    one.set_defaults(func=run)
    summary = sub.add_parser("summarize")
    summary.add_argument("results", nargs="+")
    summary.add_argument("--plot")
    summary.set_defaults(func=summarize)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
