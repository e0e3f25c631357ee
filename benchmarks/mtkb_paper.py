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

Usage (append to one CSV in pieces, then summarize):
    OMP_NUM_THREADS=1 python -m benchmarks.mtkb_paper --problems rkhs2 --seeds 0 10 \\
        --n-trials 60 --out benchmarks/results/mtkb_paper.csv
    python -m benchmarks.mtkb_paper --summarize benchmarks/results/mtkb_paper.csv
"""

from __future__ import annotations

import argparse
import csv
import os
import time

import numpy as np
import optuna

from benchmarks._mtkb_problems import PROBLEMS, Problem, run

from fairtune._gp.multitask import WIDTHS, sample_weights
from fairtune.samplers import MTKBSampler

METHODS = ("MT-KB", "MT-BKB", "IT-KB", "IT-BKB", "MOBO")
KERNELS = ("known", "learned")
N_STARTUP = 5


def make_sampler(
    method: str, kernel: str, problem: Problem, seed: int, width: str = "objectives",
    q: float | None | str = "default",
) -> MTKBSampler:
    """q: a number, None (the paper's theorem 3) or "default" (MTKBSampler's)."""
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
        **({} if q == "default" else {"q": q}),
    )
    sampler._n_preliminary_samples = 256  # discrete 1-d / 2-d domains: searched exhaustively
    return sampler


def _parse_q(value: str) -> float | None | str:
    return value if value == "default" else None if value == "theorem" else float(value)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=["rkhs2", "rkhs20", "sine4", "branin9"])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--widths", nargs="+", default=["scalarized"], choices=WIDTHS)
    parser.add_argument("--q", type=_parse_q,
                        default="default",
                        help="MT-BKB / IT-BKB's q: a number or 'theorem' (the paper's theorem "
                             "3); default: MTKBSampler's")
    parser.add_argument("--seeds", nargs=2, type=int, default=[0, 10], metavar=("FROM", "TO"))
    parser.add_argument("--n-trials", type=int, default=60)
    parser.add_argument("--out", default="mtkb_paper.csv")
    parser.add_argument("--summarize", metavar="CSV")
    parser.add_argument("--plot", metavar="PNG", help="with --summarize: R_C(t)/t curves")
    args = parser.parse_args(argv)
    if args.summarize:
        summarize(args.summarize, args.plot)
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    new = not os.path.exists(args.out)
    with open(args.out, "a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(["problem", "kernel", "width", "method", "seed", "trial", "regret",
                             "seconds"])
        for name in args.problems:
            for seed in range(*args.seeds):
                problem = PROBLEMS[name](seed)
                for kernel in args.kernels:
                    for width in args.widths:
                        for method in args.methods:
                            if problem.known_task_covariance is None and kernel == "known":
                                continue
                            sampler = make_sampler(method, kernel, problem, seed, width, args.q)
                            start = time.perf_counter()
                            regrets, _ = run(problem, sampler, args.n_trials, seed)
                            seconds = time.perf_counter() - start
                            for t, r in enumerate(regrets, 1):
                                writer.writerow([name, kernel, width, method, seed, t, f"{r:.6g}",
                                                 f"{seconds:.2f}"])
                            f.flush()
                            avg = regrets.sum() / len(regrets)
                            print(f"{name} {kernel} {width} {method} seed {seed}: "
                                  f"R_C(T)/T = {avg:.4f} ({seconds:.1f} s)", flush=True)


def summarize(path: str, plot: str | None = None) -> None:
    import pandas as pd

    from benchmarks._common import wins_ties_losses

    df = pd.read_csv(path)
    if "width" not in df:  # CSVs written before the width option: the paper's width, L = 1
        df["width"] = "norm (L = 1)"
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
    if plot:
        _plot(df, plot)


def _plot(df, path: str) -> None:
    """Mean R_C(t)/t against t, one panel per problem and kernel (+- one sd shaded)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = df.assign(avg=df["cum"] / df["trial"])
    widths = list(df["width"].unique())
    panels = list(df.groupby(["problem", "kernel"], sort=False).groups)
    fig, axes = plt.subplots(2, (len(panels) + 1) // 2, figsize=(4 * ((len(panels) + 1) // 2), 6.5),
                             squeeze=False)
    for ax, (problem, kernel) in zip(axes.T.ravel(), panels):
        part = df[(df["problem"] == problem) & (df["kernel"] == kernel)]
        for width, style in zip(widths, ("-", "--", ":")):
            for i, method in enumerate(METHODS):
                rows = part[(part["method"] == method) & (part["width"] == width)]
                curve = rows.groupby("trial")["avg"]
                if curve.ngroups == 0:
                    continue
                mean, sd = curve.mean(), curve.std()
                label = method if len(widths) == 1 else f"{method}, {width}"
                ax.plot(mean.index, mean.values, style, color=f"C{i}", label=label)
                ax.fill_between(mean.index, mean - sd, mean + sd, color=f"C{i}", alpha=0.1)
        ax.set_title(f"{problem}, {kernel} kernel")
        ax.set_xlabel("t")
        ax.set_ylabel("R_C(t) / t")
    for ax in axes.T.ravel()[len(panels):]:
        ax.axis("off")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


if __name__ == "__main__":
    main()
