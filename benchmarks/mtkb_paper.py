"""Chowdhury & Gopalan 2021, figures 1-2: time-average cumulative regret R_C(T)/T of MT-KB, MT-BKB,
IT-KB, IT-BKB and MOBO under the Chebyshev scalarization.

Methods (all MTKBSampler, Chebyshev scalarization, the paper's weight prior, 5 shared random
startup trials per seed):
    MT-KB   task_covariance = the paper's kernel (known) or "learned"
    MT-BKB  the same, budgeted=True (Nystrom dictionary)
    IT-KB   independent tasks: B = I (known) or "independent" (learned diagonal)
    IT-BKB  the same, budgeted=True
    MOBO    independent tasks and one random weight vector per step (Paria et al. 2020's random
            scalarization UCB), in place of the expectation over the prior
Confidence width (--widths): "norm" is the paper's eq. 3, L ||Gamma_t(x, x)||^1/2 (L the
scalarizations' Lipschitz constant); "objectives" weighs each objective's own posterior sd;
"scalarized" (MTKBSampler's default) scalarizes the objectives' upper confidence bounds
(fairtune._gp.multitask). Every method runs with each width given.
The paper's known kernel is the true task correlation for the RKHS functions and the omega kernel
(omega = 0.4 for the perturbed sine, 0.5 for Branin) for the others; lengthscales are always
fitted (fairtune's Matern-5/2, not the paper's squared exponential with a known lengthscale).
Problems: benchmarks/_mtkb_problems.py.

A run appends to ``--out`` and skips the (problem, kernel, width, method, seed) runs already
there.

Usage (docs/benchmarks/mtkb.md):
    OMP_NUM_THREADS=1 python -m benchmarks.mtkb_paper --methods MT-KB IT-KB \\
        --widths scalarized objectives norm --seeds 0 10 --n-trials 100 \\
        --out benchmarks/results/mtkb_paper.csv.gz
    python -m benchmarks.mtkb_paper --summarize benchmarks/results/mtkb_paper.csv.gz
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import optuna

from benchmarks._common import append_rows, done_keys, wins_ties_losses
from benchmarks._mtkb_problems import PROBLEMS, Problem, run

from fairtune._gp.multitask import WIDTHS, sample_weights
from fairtune.samplers import MTKBSampler

METHODS = ("MT-KB", "MT-BKB", "IT-KB", "IT-BKB", "MOBO")
KERNELS = ("known", "learned")
N_STARTUP = 5


def make_sampler(
    method: str, kernel: str, problem: Problem, seed: int, width: str = "objectives"
) -> MTKBSampler:
    """The MTKBSampler that plays ``method`` with the ``kernel`` and ``width`` given."""
    multi = method.startswith("MT")
    if kernel == "known":
        task_covariance = problem.known_task_covariance if multi else 1.0
    else:
        task_covariance = "learned" if multi else "independent"
    weights = None
    if method == "MOBO":
        n = problem.n

        def weights(rng: np.random.RandomState) -> np.ndarray:
            return sample_weights(n, 1, "chebyshev", rng)

    sampler = MTKBSampler(
        scalarization="chebyshev", weights=weights, task_covariance=task_covariance,
        budgeted=method.endswith("BKB"), width=width, n_startup_trials=N_STARTUP,  # type: ignore[arg-type]
        independent_sampler=optuna.samplers.RandomSampler(seed=seed), seed=seed,
    )
    sampler._n_preliminary_samples = 256  # discrete 1-d / 2-d domains: searched exhaustively
    return sampler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=["rkhs2", "rkhs20", "sine4", "branin9"])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--widths", nargs="+", default=["scalarized"], choices=WIDTHS)
    parser.add_argument("--seeds", nargs=2, type=int, default=[0, 10], metavar=("FROM", "TO"))
    parser.add_argument("--n-trials", type=int, default=60)
    parser.add_argument("--out", default="mtkb_paper.csv")
    parser.add_argument("--summarize", metavar="CSV")
    args = parser.parse_args(argv)
    if args.summarize:
        summarize(args.summarize)
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    done = done_keys(args.out, ("problem", "kernel", "width", "method", "seed"))
    for name in args.problems:
        for seed in range(*args.seeds):
            problem = PROBLEMS[name](seed)
            for kernel in args.kernels:
                for width in args.widths:
                    for method in args.methods:
                        if problem.known_task_covariance is None and kernel == "known":
                            continue
                        if (name, kernel, width, method, str(seed)) in done:
                            continue
                        sampler = make_sampler(method, kernel, problem, seed, width)
                        start = time.perf_counter()
                        regrets, _ = run(problem, sampler, args.n_trials, seed)
                        seconds = time.perf_counter() - start
                        append_rows(args.out, [
                            {"problem": name, "kernel": kernel, "width": width,
                             "method": method, "seed": seed, "trial": t, "regret": f"{r:.6g}"}
                            for t, r in enumerate(regrets, 1)])
                        avg = regrets.sum() / len(regrets)
                        print(f"{name} {kernel} {width} {method} seed {seed}: "
                              f"R_C(T)/T = {avg:.4f} ({seconds:.1f} s)", flush=True)


def summarize(path: str) -> None:
    import pandas as pd

    df = pd.read_csv(path)
    keys = ["problem", "kernel", "width", "method", "seed"]
    df = df.sort_values(keys + ["trial"])
    df["cum"] = df.groupby(keys)["regret"].cumsum()
    T = int(df["trial"].max())
    half = T // 2
    print(f"| problem | kernel | width | method | seeds | R_C/T @{half} mean ± sd "
          f"| R_C/T @{T} mean ± sd | MT vs IT @{T} (W / T / L) |")
    print("|---|---|---|---|---:|---:|---:|---|")
    for (problem, kernel, width), part in df.groupby(["problem", "kernel", "width"], sort=False):
        final = part[part["trial"] == T].set_index(["method", "seed"])["cum"]
        for method in METHODS:
            rows = part[part["method"] == method]
            if rows.empty:
                continue
            cells = []
            for t in (half, T):
                at = rows[rows["trial"] == t]["cum"] / t
                cells.append(f"{at.mean():.3f} ± {at.std():.3f}")
            n_seeds = rows["seed"].nunique()
            paired = "-"
            twin = "IT" + method[2:]
            if method.startswith("MT") and twin in final.index.get_level_values(0):
                _, paired = wins_ties_losses(final[method], final[twin], sign=-1.0)
            print(f"| {problem} | {kernel} | {width} | {method} | {n_seeds} | {cells[0]} | "
                  f"{cells[1]} | {paired} |")


if __name__ == "__main__":
    main()
