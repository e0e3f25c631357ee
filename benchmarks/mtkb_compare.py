"""MTKBSampler against Optuna 5's multi-objective samplers: cumulative regret and hypervolume.

Methods, each with its defaults and the seed: MTKBSampler (MT-KB, learned task covariance,
Chebyshev scalarization, the paper's random weight prior), GPSampler (independent GPs, LogEHVI),
TPESampler, NSGAIISampler and RandomSampler; MTKBSampler-objectives (the per-objective
width, ``width="objectives"``) and MTKBSampler-lhs (a Latin-hypercube startup, measured and not
adopted) are MTKBSampler variants. Problems (benchmarks/_mtkb_problems.py): the RKHS
functions with 2 and 20 tasks, the perturbed sine (4), the shifted Branin-Hoo (9), and accuracy /
demographic parity of a random forest on German credit (tabular: 5,000 evaluated configurations).

At 20 / 50 / 100 trials, per seed: the expected-Chebyshev-utility cumulative regret R_C(T) of the
evaluated points (what MT-KB optimizes; lower is better) and the hypervolume of their noise-free
values (what GPSampler optimizes; higher is better). The summary gives medians and means over the
seeds and MTKBSampler's paired wins / ties / losses against each method with a two-sided sign
test.

Usage (append in pieces, then summarize):
    OMP_NUM_THREADS=1 python -m benchmarks.mtkb_compare --problems sine4 --seeds 0 20 \\
        --out benchmarks/results/mtkb_compare.csv
    python -m benchmarks.mtkb_compare --summarize benchmarks/results/mtkb_compare.csv
"""

from __future__ import annotations

import argparse
import csv
import os
import time

import numpy as np
import optuna

from benchmarks._common import wins_ties_losses
from benchmarks._mtkb_problems import PROBLEMS, run

from fairtune._gp.search_space import SearchSpace
from fairtune.collaboration import sliced_lhs_value
from fairtune.samplers import MTKBSampler
from fairtune.samplers._base import name_code


class _LatinHypercubeStartup(MTKBSampler):
    """MTKBSampler whose startup trials form a Latin hypercube (a candidate default)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed=seed)
        self._lhs_seed = seed

    def sample_independent(self, study, trial, param_name, param_distribution):  # type: ignore[no-untyped-def]
        if trial.number < self._n_startup_trials:
            u = sliced_lhs_value(self._lhs_seed, name_code(param_name), 1,
                                 self._n_startup_trials, 0, trial.number)
            single = SearchSpace({param_name: param_distribution})
            return single.decode(single.round(np.array([u])))[param_name]
        return super().sample_independent(study, trial, param_name, param_distribution)

CHECKPOINTS = (20, 50, 100)
METHODS = {
    "MTKBSampler": lambda seed: MTKBSampler(seed=seed),
    # The default until width="scalarized": the Chebyshev UCB's mean plus a weighted sd.
    "MTKBSampler-objectives": lambda seed: MTKBSampler(seed=seed, width="objectives"),
    # Startup trials from a Latin hypercube instead of at random.
    "MTKBSampler-lhs": lambda seed: _LatinHypercubeStartup(seed),
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
    args = parser.parse_args(argv)
    if args.summarize:
        summarize(args.summarize)
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    checkpoints = tuple(c for c in CHECKPOINTS if c <= args.n_trials) or (args.n_trials,)
    new = not os.path.exists(args.out)
    with open(args.out, "a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(["problem", "method", "seed", "trials", "cum_regret", "hypervolume",
                             "seconds"])
        for name in args.problems:
            for seed in range(*args.seeds):
                problem = PROBLEMS[name](seed)
                for method in args.methods:
                    start = time.perf_counter()
                    regrets, hv = run(problem, METHODS[method](seed), args.n_trials, seed,
                                      checkpoints)
                    seconds = time.perf_counter() - start
                    for c in checkpoints:
                        writer.writerow([name, method, seed, c, f"{regrets[:c].sum():.6g}",
                                         f"{hv[c]:.6g}", f"{seconds:.2f}"])
                    f.flush()
                    print(f"{name} {method} seed {seed}: R_C = {regrets.sum():.3f}, "
                          f"HV = {hv[checkpoints[-1]]:.4f} ({seconds:.1f} s)", flush=True)


def summarize(path: str) -> None:
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


if __name__ == "__main__":
    main()
