"""Certified models on COMPAS, Adult and German credit: fair on the test split, and how accurate?

The methods of ``benchmarks/certified.py`` (fairtune's search with the ThresholdOptimizer
inside it, with a margin of 0.01, aimed at a gap of 0.005, certified at 95 %; fairlearn's
ThresholdOptimizer on a default model and on the model tuned for accuracy alone) on COMPAS,
Adult and German credit under ``<metric> <= 0.05``. Each split seed draws another test split
(a quarter of the rows, which no method sees); every deployed model is scored on it by its
expected predictions (a randomized model's probabilities of predicting 1, so its rates, not
one draw's). There is no population here: the test split is the only judge, and a few hundred
rows judge a gap of 0.05 loosely.

A method's "fair accuracy" on a split is the test accuracy of its model when that model keeps
the limit on the test split, and otherwise the accuracy of predicting the majority class of
the test split: what a reviewer falls back to when the model breaks the limit, or when nothing
is deployed (a refusal).

Usage:
    OMP_NUM_THREADS=1 python -m benchmarks.certified_real run --datasets compas german \\
        --model xgboost --n-trials 50 --splits 0..19 --out benchmarks/results/certified_real.csv
    OMP_NUM_THREADS=1 python -m benchmarks.certified_real run --datasets adult \\
        --model linear --n-trials 10 --splits 0..19 --out benchmarks/results/certified_real.csv
    python -m benchmarks.certified_real summarize benchmarks/results/certified_real.csv \\
        --plot docs/images/certified_real.png
"""

from __future__ import annotations

import argparse
import warnings
from collections import defaultdict

import numpy as np

from benchmarks._common import (
    append_rows,
    done_keys,
    figure,
    read_rows,
    save_figure,
    sign_test,
)
from benchmarks.certified import LIMIT, METHODS, NAMES, _scores, deployed_models

DATASETS = ("compas", "adult", "german")
FIELDS = ["dataset", "metric", "model", "split", "method", "refused", "refused_before_trials",
          "test_accuracy", "test_gap", "fair", "fair_accuracy", "majority", "n_trials",
          "seconds", "refusal"]


def run_one(dataset: str, metric: str, model: str, split: int, n_trials: int,
            methods=METHODS, limit: float = LIMIT, safety_size=None) -> list[dict]:
    """Every method on one split of ``dataset``, judged on its test split; rows of the
    result file."""
    from fairtune.datasets import FairtuneDatasetWarning
    from fairtune.tuning import FairObjective

    out = []
    with warnings.catch_warnings():
        # German and COMPAS warn about their known issues; the benchmark page says them.
        warnings.simplefilter("ignore", FairtuneDatasetWarning)
        # The test split is the same for every method (the split seed decides it before any
        # safety rows); the baselines' objective gives it and its majority-class rate.
        base = FairObjective(dataset, model, limits=f"{metric}<={limit}", test_size=0.25,
                             random_state=split)
        test = (base.X_test, base.y_test, base.s_test)
        rate = float(np.mean(base.y_test))
        majority = max(rate, 1.0 - rate)
        for d in deployed_models(dataset, model, metric, split, n_trials, methods,
                                 safety_size, limit=limit):
            row = {"dataset": dataset, "metric": metric, "model": model, "split": split,
                   "method": d.method, "refused": d.model is None,
                   "refused_before_trials": d.model is None and d.n_trials == 0,
                   "fair_accuracy": majority, "majority": majority, "n_trials": d.n_trials,
                   "seconds": round(d.seconds, 2), "refusal": d.refusal}
            if d.model is not None:
                gap, accuracy = _scores(d.model, test, metric)
                row.update(test_accuracy=accuracy, test_gap=gap, fair=gap <= limit,
                           fair_accuracy=accuracy if gap <= limit else majority)
            out.append(row)
    return out


def _splits(text: str) -> list[int]:
    """``"7"`` or an inclusive range ``"0..19"``."""
    low, _, high = text.partition("..")
    return list(range(int(low), int(high or low) + 1))


def run(args: argparse.Namespace) -> None:
    done = {key[:4] for key in done_keys(args.out, ["dataset", "metric", "model", "split",
                                                    "method"]) if key[4] in args.methods}
    splits = [s for chunk in args.splits for s in chunk]
    for dataset in args.datasets:
        for metric in args.metrics:
            for split in splits:
                if (dataset, metric, args.model, str(split)) in done:
                    continue
                result = run_one(dataset, metric, args.model, split, args.n_trials,
                                 args.methods, args.limit, args.safety_size)
                append_rows(args.out, result, FIELDS)
                shown = ", ".join(
                    f"{r['method']} " + ("refused" if r["refused"] else
                                         f"{r['test_gap']:.3f}/{r['test_accuracy']:.3f}")
                    for r in result)
                seconds = sum(r["seconds"] for r in result)
                print(f"{dataset} {metric} split {split} ({seconds:.0f} s; gap/accuracy): "
                      f"{shown}", flush=True)


SAMPLE_FIELDS = ["rows", "metric", "model", "sample", "safety_size", "method", "refused",
                 "refused_before_trials", "population_gap", "fair", "population_accuracy",
                 "n_trials", "seconds", "refusal"]


def samples(args: argparse.Namespace) -> None:
    """Certified models on ``--rows``-row samples of Adult, judged on the other rows."""
    from fairtune.datasets import load_adult

    adult = load_adult()
    X, y, group = adult.data, adult.target, adult.sensitive_features
    done = done_keys(args.out, ["rows", "metric", "sample", "safety_size"])
    for metric in args.metrics:
        for sample in [s for chunk in args.samples for s in chunk]:
            key = (str(args.rows), metric, str(sample), str(args.safety_size))
            if key in done:
                continue
            rng = np.random.default_rng(10_000 + sample)
            inside = np.zeros(len(y), dtype=bool)
            inside[rng.choice(len(y), size=args.rows, replace=False)] = True
            table = (X[inside].reset_index(drop=True), y[inside].reset_index(drop=True),
                     group[inside].reset_index(drop=True))
            rest = (X[~inside], y[~inside], group[~inside])
            out = []
            for d in deployed_models(table, args.model, metric, sample, args.n_trials,
                                     args.methods, args.safety_size, test_size=None):
                row = {"rows": args.rows, "metric": metric, "model": args.model,
                       "sample": sample, "safety_size": args.safety_size, "method": d.method,
                       "refused": d.model is None,
                       "refused_before_trials": d.model is None and d.n_trials == 0,
                       "n_trials": d.n_trials, "seconds": round(d.seconds, 2),
                       "refusal": d.refusal}
                if d.model is not None:
                    gap, accuracy = _scores(d.model, rest, metric)
                    row.update(population_gap=gap, fair=gap <= LIMIT,
                               population_accuracy=accuracy)
                out.append(row)
            append_rows(args.out, out, SAMPLE_FIELDS)
            shown = ", ".join(f"{r['method']} " + ("refused" if r["refused"] else
                              f"{r['population_gap']:.3f}/{r['population_accuracy']:.3f}")
                              for r in out)
            print(f"adult {args.rows} rows {metric} sample {sample}: {shown}", flush=True)


def summarize(args: argparse.Namespace) -> None:
    by = defaultdict(dict)
    for row in read_rows(args.files):
        key = (row["dataset"], row["metric"], row["model"])
        by[key].setdefault(row["method"], {})[row["split"]] = row
    lines = []
    for (dataset, metric, model), methods in sorted(by.items()):
        certified = methods.get("certified", {})
        trials = sorted({r["n_trials"] for runs in methods.values() for r in runs.values()
                         if r["n_trials"] != "0"})
        print(f"\n{dataset}, {metric} <= {LIMIT}, {model} ({'/'.join(trials) or 0} trials):")
        print(f"{'method':<44} {'splits':>6} {'refused':>12} {'fair on test':>12} "
              f"{'accuracy':>8} {'fair acc.':>9}  {'certified w/t/l (p)':>20}")
        for method in [m for m in NAMES if m in methods]:
            runs = methods[method]
            deployed = [r for r in runs.values() if r["refused"] != "True"]
            before = sum(r["refused_before_trials"] == "True" for r in runs.values())
            fair = sum(r["fair"] == "True" for r in deployed)
            accuracy = np.mean([float(r["test_accuracy"]) for r in deployed]) \
                if deployed else np.nan
            fair_accuracy = np.mean([float(r["fair_accuracy"]) for r in runs.values()]) \
                if runs else np.nan
            paired = ""
            if method != "certified" and certified:
                wins = ties = losses = 0
                for split, mine in certified.items():
                    if split in runs:
                        a, b = float(mine["fair_accuracy"]), float(runs[split]["fair_accuracy"])
                        wins, ties, losses = wins + (a > b), ties + (a == b), losses + (a < b)
                paired = f"{wins}/{ties}/{losses} ({sign_test(wins, losses):.2g})"
            refused = f"{len(runs) - len(deployed)} ({before} pre)"
            print(f"{NAMES[method]:<44} {len(runs):>6} {refused:>12} "
                  f"{f'{fair} of {len(deployed)}':>12} {accuracy:>8.4f} {fair_accuracy:>9.4f}  "
                  f"{paired:>20}")
            lines.append((dataset, metric, method, fair, len(deployed), fair_accuracy))
        majority = np.mean([float(r["majority"]) for r in next(iter(methods.values())).values()])
        print(f"(pre: refused before any trial; fair on test: of the "
              f"deployed models; fair acc.: a refusal or a model over the limit on the test "
              f"split counts as the majority class, {majority:.4f} on average)")
    if args.plot:
        _plot(lines, args.plot)


def _plot(lines, path) -> None:
    panels = sorted({(dataset, metric) for dataset, metric, *_ in lines})
    fig, axes = figure(1, len(panels), figsize=(2.4 * len(panels) + 3.4, 3.2), squeeze=False)
    for ax, (dataset, metric) in zip(axes[0], panels):
        mine = [l for l in lines if (l[0], l[1]) == (dataset, metric)]
        ax.barh([NAMES[l[2]] for l in mine], [l[5] for l in mine], color=[
            "tab:green" if l[2] == "certified" else "tab:gray" for l in mine])
        for position, line in enumerate(mine):
            ax.text(0.51, position, f"fair on test {line[3]} of {line[4]}", va="center",
                    fontsize=7)
        ax.set_xlim(0.5, 1.0)
        ax.set_title(f"{dataset}, {metric.replace('_', ' ')}", fontsize=9)
        ax.set_xlabel("mean fair accuracy\n(over the limit or refused: majority class)")
        if ax is not axes[0][0]:
            ax.set_yticklabels([])
    save_figure(fig, path)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    r.add_argument("--metrics", nargs="+", default=["demographic_parity", "equalized_odds"])
    r.add_argument("--model", default="xgboost")
    r.add_argument("--splits", type=_splits, nargs="+", default=[list(range(20))],
                   help="split seeds: numbers or inclusive ranges such as 0..19")
    r.add_argument("--n-trials", type=int, default=50)
    r.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    r.add_argument("--limit", type=float, default=LIMIT)
    r.add_argument("--safety-size", type=float)
    r.add_argument("--out", required=True)
    a = sub.add_parser("samples")
    a.add_argument("--rows", type=int, default=5000)
    a.add_argument("--metrics", nargs="+", default=["demographic_parity"])
    a.add_argument("--model", default="linear")
    a.add_argument("--samples", type=_splits, nargs="+", default=[list(range(10))])
    a.add_argument("--n-trials", type=int, default=10)
    a.add_argument("--methods", nargs="+", choices=METHODS, default=["certified", "margin"])
    a.add_argument("--safety-size", type=float)
    a.add_argument("--out", required=True)
    s = sub.add_parser("summarize")
    s.add_argument("files", nargs="+")
    s.add_argument("--plot")
    args = parser.parse_args(argv)
    {"run": run, "samples": samples, "summarize": summarize}[args.command](args)


if __name__ == "__main__":
    main()
