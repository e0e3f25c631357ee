"""Which sampler for the fair-model job? The README's search under each sampler, on real data.

The README's search (``FairObjective(dataset, "xgboost", limits="demographic_parity<=0.05",
mitigation="threshold", test_size=0.25)``, ``create_study(sampler=..., seed=split)``) and the
same search without the mitigation, run with FairBOSampler, Optuna's GPSampler, TPESampler and
random search on the same splits of COMPAS, German credit and Adult. Every search starts, as
``create_study`` prepares it, from the untuned model. After 10, 20 and 50 trials the best fair
trial so far is refitted on the tuning rows (``refit_best(study, trial=...)``) and scored on
the test split, which no sampler sees.

A search's "fair accuracy" is its model's test accuracy when the model keeps the limit on the
test split, and otherwise the accuracy of predicting the test split's majority class (what a
reviewer falls back to); a search with no fair trial scores the majority class too. The split
seeds start at 200, which no other benchmark uses. ``seconds`` is the wall time of the search
up to that trial (fits, predictions and the sampler), as ``study.optimize`` runs it.

Usage (rows already in ``--out`` are skipped, so a run can be resumed or extended)::

    OMP_NUM_THREADS=1 python -m benchmarks.fair_job run --datasets compas german adult \\
        --splits 20 --out benchmarks/results/fair_job.csv
    python -m benchmarks.fair_job summarize benchmarks/results/fair_job.csv
    python -m benchmarks.fair_job headline benchmarks/results/fair_job.csv.gz  # the page's table
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from benchmarks._common import append_rows, done_keys, paired, read_rows
from fairtune.fairness import is_fair, study_limits
from fairtune.tuning import FairObjective

LIMIT = "demographic_parity<=0.05"
SAMPLERS = ("fairbo", "gp", "tpe", "random")
MITIGATIONS = ("threshold", "none")
CHECKPOINTS = (10, 20, 50)
FIRST_SPLIT = 200
FIELDS = ["dataset", "mitigation", "split", "sampler", "n_trials", "best_trial",
          "valid_accuracy", "test_accuracy", "test_gap", "fair", "majority", "fair_accuracy",
          "seconds"]
KEY = ("dataset", "mitigation", "split", "sampler", "n_trials")


def job_objective(dataset: str, mitigation: str, split: int) -> FairObjective:
    """The README's search (without the mitigation when ``mitigation == "none"``) on a split."""
    return FairObjective(dataset, "xgboost", limits=LIMIT, test_size=0.25,
                         mitigation=None if mitigation == "none" else mitigation,
                         random_state=split)


def _journal(path: Path) -> optuna.storages.BaseStorage:
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return JournalStorage(JournalFileBackend(str(path)))


def _majority(objective: FairObjective) -> float:
    """The accuracy of predicting the test split's majority class."""
    y_test = np.asarray(objective.y_test)
    return float(max(np.mean(y_test == 1), np.mean(y_test == 0)))


def _on_test(objective: FairObjective, study: optuna.Study, trial: optuna.trial.FrozenTrial,
             majority: float) -> dict[str, Any]:
    """The trial refitted on the tuning rows and scored on the test split."""
    scores = objective.evaluate(objective.refit_best(study, trial=trial))
    accuracy = float(scores[objective.metric])
    return {"test_accuracy": round(accuracy, 5),
            "test_gap": round(float(scores["demographic_parity"]), 5),
            "fair": int(scores["fair"]),
            "fair_accuracy": round(accuracy if scores["fair"] else majority, 5)}


def run_one(dataset: str, mitigation: str, split: int, sampler: str,
            checkpoints: tuple[int, ...] = CHECKPOINTS,
            studies: str | None = None) -> list[dict[str, Any]]:
    """One search of ``max(checkpoints)`` trials: a row per checkpoint. With ``studies`` (a
    folder) the study is kept there as an Optuna journal file, so that other choices of the
    trial to deploy can be scored later without searching again."""
    objective = job_objective(dataset, mitigation, split)
    storage = None
    if studies is not None:
        path = Path(studies) / f"{dataset}-{mitigation}-{split}-{sampler}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)  # a search cut off earlier starts again
        storage = _journal(path)
    study = objective.create_study(sampler=sampler, seed=split, storage=storage)
    start = time.perf_counter()
    finished: list[float] = []
    study.optimize(objective, n_trials=max(checkpoints),
                   callbacks=[lambda s, t: finished.append(time.perf_counter() - start)])
    limits = study_limits(study)
    majority = _majority(objective)
    rows = []
    for k in checkpoints:
        trials = [t for t in study.trials[:k] if t.value is not None and is_fair(t, limits)]
        row: dict[str, Any] = {"dataset": dataset, "mitigation": mitigation, "split": split,
                               "sampler": sampler, "n_trials": k, "majority": round(majority, 5),
                               "seconds": round(finished[k - 1], 2)}
        if not trials:
            rows.append({**dict.fromkeys(FIELDS, ""), **row, "fair": 0,
                         "fair_accuracy": row["majority"]})
            continue
        best = max(trials, key=lambda t: (t.value, -t.number))
        rows.append({**row, "best_trial": best.number, "valid_accuracy": round(best.value, 5),
                     **_on_test(objective, study, best, majority)})
    return rows


def run(args: argparse.Namespace) -> None:
    done = done_keys(args.out, KEY)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for dataset in args.datasets:
        for split in range(args.first_split, args.first_split + args.splits):
            for mitigation in args.mitigations:
                for sampler in args.samplers:
                    if (dataset, mitigation, str(split), sampler,
                            str(max(args.checkpoints))) in done:
                        continue
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # dataset notes, xgboost chatter
                        rows = run_one(dataset, mitigation, split, sampler,
                                       tuple(args.checkpoints), args.studies)
                    append_rows(args.out, rows, FIELDS)
                    last = rows[-1]
                    print(f"{dataset} {mitigation:9s} split {split} {sampler:6s} "
                          f"fair acc {last['fair_accuracy']} ({last['seconds']} s)", flush=True)


SPREADS = (0.0, 0.5, 1.0, 2.0)
CHOICE_FIELDS = ["dataset", "mitigation", "split", "sampler", "n_trials", "spread", "trial",
                 "valid_accuracy", "valid_gap", "test_accuracy", "test_gap", "fair",
                 "fair_accuracy"]


def choose(args: argparse.Namespace) -> None:
    """Score a choice of the trial that allows for the validation rows' noise, on the studies
    kept by ``run --studies``: of the fair trials whose validation accuracy is within
    ``spread`` standard errors (sqrt(a (1 - a) / validation rows)) of the best one's, the one
    with the smallest gap. A spread of 0 is the best fair trial (the smallest gap among ties)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    done = done_keys(args.out, ("dataset", "mitigation", "split", "sampler"))
    for path in sorted(Path(args.studies).glob("*.log")):
        dataset, mitigation, split, sampler = path.stem.split("-")
        if (dataset, mitigation, split, sampler) in done:
            continue
        study = optuna.load_study(study_name=None, storage=_journal(path))
        if len(study.trials) < max(args.checkpoints):
            continue  # a search still running, or cut off
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            objective = job_objective(dataset, mitigation, int(split))
            rows, scored = [], {}
            majority, limits = _majority(objective), study_limits(study)
            rows_valid = len(objective.y_valid)
            for k, spread in ((k, s) for k in args.checkpoints for s in SPREADS):
                key = {"dataset": dataset, "mitigation": mitigation, "split": split,
                       "sampler": sampler, "n_trials": k, "spread": spread}
                fair = [t for t in study.trials[:k] if t.value is not None and is_fair(t, limits)]
                if not fair:
                    rows.append({**dict.fromkeys(CHOICE_FIELDS, ""), **key, "fair": 0,
                                 "fair_accuracy": round(majority, 5)})
                    continue
                best = max(t.value for t in fair)
                floor = best - spread * np.sqrt(best * (1 - best) / rows_valid)
                pick = min((t for t in fair if t.value >= floor), key=lambda t: (
                    abs(t.user_attrs["fairtune:demographic_parity"]), -t.value, t.number))
                if pick.number not in scored:
                    scored[pick.number] = _on_test(objective, study, pick, majority)
                rows.append({**key, "trial": pick.number, "valid_accuracy": round(pick.value, 5),
                             "valid_gap": round(pick.user_attrs["fairtune:demographic_parity"], 5),
                             **scored[pick.number]})
        append_rows(args.out, rows, CHOICE_FIELDS)
        print(path.stem, flush=True)


def summarize_choice(args: argparse.Namespace) -> None:
    """Per dataset, mitigation and checkpoint: each spread's mean fair accuracy and splits
    fair on test over the samplers' searches, with its paired wins / ties / losses against the
    best fair trial (spread 0)."""
    cells: dict[tuple, dict[str, dict[tuple, float]]] = {}
    fair: dict[tuple, int] = {}
    for r in read_rows(args.paths):
        cell = (r["dataset"], r["mitigation"], int(r["n_trials"]))
        cells.setdefault(cell, {}).setdefault(r["spread"], {})[(r["split"], r["sampler"])] = \
            float(r["fair_accuracy"])
        fair[(*cell, r["spread"])] = fair.get((*cell, r["spread"]), 0) + int(r["fair"])
    print("| dataset | mitigation | trials | spread | searches | fair on test | fair accuracy "
          "| W/T/L against the best fair trial (p) |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for cell, by_spread in sorted(cells.items()):
        base = by_spread[str(SPREADS[0])]
        for spread, runs in by_spread.items():
            common = sorted(set(runs) & set(base))
            w, t, lo, p = paired([runs[c] for c in common], [base[c] for c in common])
            print(f"| {' | '.join(map(str, cell))} | {spread} | {len(runs)} | "
                  f"{fair[(*cell, spread)]} | {np.mean(list(runs.values())):.4f} | "
                  f"{w}/{t}/{lo} ({p:.2g}) |")


def summarize(args: argparse.Namespace) -> None:
    """A table per dataset and mitigation: per sampler and checkpoint the mean test accuracy,
    the splits fair on test, the mean fair accuracy and seconds, and FairBOSampler's paired
    wins / ties / losses in fair accuracy against each other sampler with the sign test."""
    rows = read_rows(args.paths)
    cells: dict[tuple, dict[str, dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["dataset"], r["mitigation"], int(r["n_trials"])), {}) \
             .setdefault(r["sampler"], {})[r["split"]] = r
    for (dataset, mitigation, k), by_sampler in sorted(cells.items()):
        fairbo = by_sampler.get("fairbo", {})
        print(f"\n{dataset}, mitigation {mitigation}, {k} trials")
        print("| sampler | splits | test accuracy | fair on test | fair accuracy | seconds "
              "| FairBO W/T/L (p) |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for sampler in SAMPLERS:
            runs = by_sampler.get(sampler, {})
            if not runs:
                continue
            accuracy = np.mean([float(r["test_accuracy"] or r["majority"]) for r in runs.values()])
            fair = sum(int(r["fair"]) for r in runs.values())
            fair_accuracy = np.mean([float(r["fair_accuracy"]) for r in runs.values()])
            seconds = np.median([float(r["seconds"]) for r in runs.values()])
            versus = ""
            common = sorted(set(runs) & set(fairbo))
            if sampler != "fairbo" and common:
                w, t, lo, p = paired([float(fairbo[s]["fair_accuracy"]) for s in common],
                                     [float(runs[s]["fair_accuracy"]) for s in common])
                versus = f"{w}/{t}/{lo} ({p:.2g})"
            print(f"| {sampler} | {len(runs)} | {accuracy:.4f} | {fair} of {len(runs)} | "
                  f"{fair_accuracy:.4f} | {seconds:.1f} | {versus} |")


_NAMES = {"fairbo": "FairBOSampler", "gp": "GPSampler", "tpe": "TPESampler",
          "random": "random search"}
_DATASETS = {"compas": "COMPAS", "german": "German credit", "adult": "Adult"}


def headline_rows(paths: list[str], seconds: list[str] | None = None) -> list[list[str]]:
    """The page's table: per dataset and sampler, the mean fair accuracy with the threshold
    inside the search after 10, 20 and 50 trials, the splits fair on test at 50, the median
    seconds of a 50-trial search (from ``seconds``, runs made alone on the machine, when
    given), the mean fair accuracy at 50 without the mitigation (blank where not run), and
    the number of splits."""
    runs: dict[tuple, list[dict[str, str]]] = {}
    for r in read_rows(paths):
        runs.setdefault((r["dataset"], r["sampler"], r["mitigation"], r["n_trials"]), []).append(r)
    timed: dict[tuple, list[float]] = {}
    for r in read_rows(seconds or paths):
        if r["mitigation"] == "threshold" and r["n_trials"] == "50":
            timed.setdefault((r["dataset"], r["sampler"]), []).append(float(r["seconds"]))

    def mean(key: tuple) -> str:
        return f"{np.mean([float(r['fair_accuracy']) for r in runs[key]]):.3f}" \
            if key in runs else ""

    table = []
    for dataset in _DATASETS:
        for sampler in SAMPLERS:
            last = runs.get((dataset, sampler, "threshold", "50"))
            if not last:
                continue
            took = timed.get((dataset, sampler))
            table.append([
                _DATASETS[dataset], _NAMES[sampler],
                *(mean((dataset, sampler, "threshold", k)) for k in ("10", "20", "50")),
                f"{sum(int(r['fair']) for r in last)} of {len(last)}",
                f"{np.median(took):.1f}" if took else "",
                mean((dataset, sampler, "none", "50")),
            ])
    return table


def headline(args: argparse.Namespace) -> None:
    print("| dataset | sampler | fair accuracy @10 | @20 | @50 | fair on test @50 | seconds @50 "
          "| without mitigation @50 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for row in headline_rows(args.paths, args.seconds):
        print("| " + " | ".join(row) + " |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    go = commands.add_parser("run")
    go.add_argument("--datasets", nargs="+", default=["compas", "german", "adult"])
    go.add_argument("--mitigations", nargs="+", default=list(MITIGATIONS), choices=MITIGATIONS)
    go.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    go.add_argument("--splits", type=int, default=20)
    go.add_argument("--first-split", type=int, default=FIRST_SPLIT)
    go.add_argument("--checkpoints", type=int, nargs="+", default=list(CHECKPOINTS))
    go.add_argument("--out", default="benchmarks/results/fair_job.csv")
    go.add_argument("--studies", default=None,
                    help="a folder to keep each search's study in, as a journal file")
    go.set_defaults(func=run)
    show = commands.add_parser("summarize")
    show.add_argument("paths", nargs="+")
    show.set_defaults(func=summarize)
    page = commands.add_parser("headline")
    page.add_argument("paths", nargs="+")
    page.add_argument("--seconds", nargs="+", default=None,
                      help="results of runs made alone, for the seconds column")
    page.set_defaults(func=headline)
    pick = commands.add_parser("choose")
    pick.add_argument("studies")
    pick.add_argument("--out", default="benchmarks/results/fair_job_choice.csv")
    pick.add_argument("--checkpoints", type=int, nargs="+", default=list(CHECKPOINTS))
    pick.set_defaults(func=choose)
    picked = commands.add_parser("summarize-choice")
    picked.add_argument("paths", nargs="+")
    picked.set_defaults(func=summarize_choice)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
