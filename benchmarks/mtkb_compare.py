"""MTKBSampler against Optuna 5's multi-objective samplers: cumulative regret and hypervolume.

Methods, each with its defaults and the seed: MTKBSampler (MT-KB, learned task covariance,
Chebyshev scalarization, the paper's random weight prior), GPSampler (independent GPs, LogEHVI),
TPESampler, NSGAIISampler and RandomSampler; MTKBSampler-objectives is MTKBSampler with the
per-objective width (``width="objectives"``), measured and not adopted as the default. Problems (benchmarks/_mtkb_problems.py): the RKHS
functions with 2 and 20 tasks, the perturbed sine (4), the shifted Branin-Hoo (9), and accuracy /
demographic parity of a random forest on German credit (tabular: 5,000 evaluated configurations).

At 20 / 50 / 100 trials, per seed: the expected-Chebyshev-utility cumulative regret R_C(T) of the
evaluated points (what MT-KB optimizes; lower is better) and the hypervolume of their noise-free
values (what GPSampler optimizes; higher is better). The summary gives medians and means over the
seeds and MTKBSampler's paired wins / ties / losses against each method with a two-sided sign
test. A run appends to ``--out`` and skips the (problem, method, seed) runs already there.

Usage (docs/benchmarks/mtkb.md):
    OMP_NUM_THREADS=1 python -m benchmarks.mtkb_compare --problems sine4 --seeds 0 20 \\
        --out benchmarks/results/mtkb_compare.csv
    python -m benchmarks.mtkb_compare --summarize benchmarks/results/mtkb_compare.csv \\
        --plot mtkb.png
"""

from __future__ import annotations

import argparse
import time

import optuna

from benchmarks._common import append_rows, done_keys, figure, save_figure, wins_ties_losses
from benchmarks._mtkb_problems import PROBLEMS, run

from fairtune.samplers import MTKBSampler

CHECKPOINTS = (20, 50, 100)
METHODS = {
    "MTKBSampler": lambda seed: MTKBSampler(seed=seed),
    # The default until width="scalarized": the Chebyshev UCB's mean plus a weighted sd.
    "MTKBSampler-objectives": lambda seed: MTKBSampler(seed=seed, width="objectives"),
    "GPSampler": lambda seed: optuna.samplers.GPSampler(seed=seed),
    "TPESampler": lambda seed: optuna.samplers.TPESampler(seed=seed),
    "NSGAIISampler": lambda seed: optuna.samplers.NSGAIISampler(seed=seed),
    "RandomSampler": lambda seed: optuna.samplers.RandomSampler(seed=seed),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--seeds", nargs=2, type=int, default=[0, 20], metavar=("FROM", "TO"))
    parser.add_argument("--n-trials", type=int, default=100)
    parser.add_argument("--out", default="mtkb_compare.csv")
    parser.add_argument("--summarize", metavar="CSV")
    parser.add_argument("--plot", metavar="PNG",
                        help="with --summarize: median R_C against the trial count")
    args = parser.parse_args(argv)
    if args.summarize:
        summarize(args.summarize, args.plot)
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    checkpoints = tuple(c for c in CHECKPOINTS if c <= args.n_trials) or (args.n_trials,)
    done = done_keys(args.out, ("problem", "method", "seed"))
    for name in args.problems:
        for seed in range(*args.seeds):
            problem = PROBLEMS[name](seed)
            for method in args.methods:
                if (name, method, str(seed)) in done:
                    continue
                start = time.perf_counter()
                regrets, hv = run(problem, METHODS[method](seed), args.n_trials, seed,
                                  checkpoints)
                seconds = time.perf_counter() - start
                append_rows(args.out, [
                    {"problem": name, "method": method, "seed": seed, "trials": c,
                     "cum_regret": f"{regrets[:c].sum():.6g}", "hypervolume": f"{hv[c]:.6g}",
                     "seconds": f"{seconds:.2f}"} for c in checkpoints])
                print(f"{name} {method} seed {seed}: R_C = {regrets.sum():.3f}, "
                      f"HV = {hv[checkpoints[-1]]:.4f} ({seconds:.1f} s)", flush=True)


def summarize(path: str, plot: str | None = None) -> None:
    import pandas as pd

    df = pd.read_csv(path)
    ours = "MTKBSampler"
    print("| problem | trials | method | seeds | R_C median | R_C mean | MTKB W/T/L on R_C "
          "| HV median | HV mean | MTKB W/T/L on HV |")
    print("|---|---:|---|---:|---:|---:|---|---:|---:|---|")
    for (problem, trials), part in df.groupby(["problem", "trials"], sort=False):
        mine = part[part["method"] == ours].set_index("seed")
        for method in METHODS:
            rows = part[part["method"] == method].set_index("seed")
            if rows.empty:
                continue
            if method == ours or mine.empty:
                wtl_r = wtl_h = "-"
            else:
                # Regret: lower is better (sign -1); hypervolume: higher is better.
                _, wtl_r = wins_ties_losses(mine["cum_regret"], rows["cum_regret"], sign=-1.0)
                _, wtl_h = wins_ties_losses(mine["hypervolume"], rows["hypervolume"])
            r, h = rows["cum_regret"], rows["hypervolume"]
            print(f"| {problem} | {trials} | {method} | {len(rows)} | {r.median():.3f} | "
                  f"{r.mean():.3f} | {wtl_r} | {h.median():.4f} | {h.mean():.4f} | {wtl_h} |")


    if plot:
        _plot(df, plot)


TITLES = {"sine4": "perturbed sine, 4 objectives", "rkhs2": "RKHS function, 2 tasks",
          "german_rf": "German credit forest, 2 objectives", "branin9": "shifted Branin, 9 tasks",
          "rkhs20": "RKHS function, 20 tasks"}


def _plot(df, path: str) -> None:
    """Median cumulative regret R_C against the number of trials, one panel per problem (the
    panel after the last holds the legend)."""
    problems = list(dict.fromkeys(df["problem"]))
    columns = 3
    n_rows = len(problems) // columns + 1
    fig, axes = figure(n_rows, columns, figsize=(3.3 * columns, 2.9 * n_rows), squeeze=False)
    for ax, problem in zip(axes.ravel(), problems):
        part = df[df["problem"] == problem]
        for i, method in enumerate(METHODS):
            rows = part[part["method"] == method]
            if rows.empty:
                continue
            median = rows.groupby("trials")["cum_regret"].median()
            # NSGAIISampler's trials coincide with RandomSampler's on 1-parameter problems.
            style = "s--" if method == "NSGAIISampler" else "o-"
            ax.plot(median.index, median.values, style, color=f"C{i}", markersize=3,
                    label='MTKBSampler, width="objectives"'
                    if method == "MTKBSampler-objectives" else method)
        ax.set_yscale("log")
        ax.set_title(TITLES.get(problem, problem))
        ax.set_xlabel("trials")
        ax.set_ylabel("R_C, median over seeds")
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    for ax in axes.ravel()[len(problems):]:
        ax.axis("off")
    axes.ravel()[len(problems)].legend(handles, labels, loc="center")
    save_figure(fig, path)


if __name__ == "__main__":
    main()
