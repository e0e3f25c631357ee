"""Problems and metrics shared by the MTKBSampler benchmarks (not a benchmark itself).

Problems (Chowdhury & Gopalan 2021, section 5), every objective maximized:
    rkhs2, rkhs20: f = sum_{i<=50} Gamma(., x_i) c_i on the 0.01-net of [0, 1], Gamma = k B, k the
        squared exponential kernel with lengthscale 0.2, B = A^T A with A_ij ~ U[0, 1],
        c_i ~ U[-1, 1]^n; noise N(0, 0.1^2 I). A new function per seed.
    sine4: f_i(x) = sin(2 pi x) + 0.6 f_i^pert(x) on the 0.01-net of [0, 1], f_i^pert a weighted
        sum of Gaussians of width 0.1 at 0.05, 0.4 and 0.7 (the weights ``SINE_WEIGHTS``: the
        paper does not list its own); noise variance 0.01.
    branin9: 9 translations of the (negated, standardized) Branin-Hoo function on a 41 x 41 grid
        of its domain, task i shifted by i % of the range along x1 (odd i) or x2 (even i);
        noise N(0, 0.1^2).
    german_rf: accuracy and -|demographic parity| of a random forest on German credit, looked
        up in the 5,000 random configurations of benchmarks/results/german_landscape.csv.gz (the
        nearest one in the encoded space to a suggested point): a tabular benchmark, noise-free.

Metrics:
    Expected Chebyshev utility U(y) = mean_k min_i lambda_k,i (y_i - z_i) over 1,000 weight
    vectors from the paper's prior (fixed per problem), z_i = min over the domain of f_i;
    regret of a trial = max over the domain of U(f(x)) - U(f(x_t)) (noise-free f);
    cumulative regret R_C(T) = sum of the regrets of the first T trials.
    Hypervolume of the evaluated points' noise-free values in the box [z, max f] (each
    objective scaled to [0, 1]), estimated on 2^14 fixed Sobol points (the same for every method
    of a problem, so that paired comparisons see the same estimator).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from scipy.stats import qmc

from fairtune._gp.multitask import sample_weights
from fairtune._gp.search_space import SearchSpace

RESULTS = Path(__file__).resolve().parent / "results"
SINE_WEIGHTS = np.array(
    [[1.0, -1.0, 0.5], [-1.0, 1.0, 0.5], [0.5, 0.5, -1.0], [-0.5, -0.5, 1.0]]
)


@dataclass
class Problem:
    name: str
    space: dict[str, BaseDistribution]
    grid: np.ndarray  # (G, n) noise-free values at every domain point
    locate: Callable[[dict], int]  # params -> index of the domain point
    noise: float
    known_task_covariance: object  # the paper's kernel: a matrix, an omega, or None

    @property
    def n(self) -> int:
        return self.grid.shape[1]

    def __post_init__(self) -> None:
        self.z = self.grid.min(0)
        self.top = self.grid.max(0)
        self.weights = sample_weights(self.n, 1000, "chebyshev", np.random.RandomState(12345))
        self.utilities = utility(self.grid, self.weights, self.z)
        self.best_utility = float(self.utilities.max())
        self.sobol = qmc.Sobol(self.n, scramble=True, seed=7).random(1 << 14)


def utility(Y: np.ndarray, weights: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Expected Chebyshev utility of each row of Y (m, n), shape (m,)."""
    return (weights[None, :, :] * (Y[:, None, :] - z)).min(-1).mean(-1)


def hypervolume(problem: Problem, Y: np.ndarray) -> float:
    """Monte Carlo hypervolume (fraction of the box [z, top]) dominated by the rows of Y."""
    scaled = (Y - problem.z) / np.maximum(problem.top - problem.z, 1e-12)
    dominated = np.zeros(len(problem.sobol), dtype=bool)
    for y in scaled:
        dominated |= (problem.sobol <= y).all(1)
    return float(dominated.mean())


def _net_locate(name: str = "x") -> Callable[[dict], int]:
    return lambda params: int(params[name])


def _se(a: np.ndarray, b: np.ndarray, lengthscale: float) -> np.ndarray:
    return np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / lengthscale**2)


def rkhs(n: int, seed: int) -> Problem:
    rng = np.random.RandomState(1000 + seed)
    net = np.linspace(0.0, 1.0, 101)
    centres = rng.choice(net, 50)
    A = rng.uniform(size=(n, n))
    B = A.T @ A
    C = rng.uniform(-1.0, 1.0, size=(50, n))
    grid = _se(net, centres, 0.2) @ C @ B  # (101, n): sum_i k(., x_i) B c_i
    d = np.sqrt(np.diag(B))
    return Problem(f"rkhs{n}", {"x": IntDistribution(0, 100)}, grid, _net_locate(), 0.1,
                   B / np.outer(d, d))


def sine4(seed: int) -> Problem:
    net = np.linspace(0.0, 1.0, 101)
    bumps = np.exp(-0.5 * (net[:, None] - np.array([0.05, 0.4, 0.7])) ** 2 / 0.1**2)  # (101, 3)
    grid = np.sin(2 * np.pi * net)[:, None] + 0.6 * bumps @ SINE_WEIGHTS.T
    return Problem("sine4", {"x": IntDistribution(0, 100)}, grid, _net_locate(), 0.1, 0.4)


def _branin(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    b, c, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - t) * np.cos(x1) + 10


def branin9(seed: int) -> Problem:
    g1, g2 = np.meshgrid(np.linspace(-5, 10, 41), np.linspace(0, 15, 41), indexing="ij")
    g1, g2 = g1.ravel(), g2.ravel()
    tasks = []
    for i in range(1, 10):
        shift = 0.15 * i  # i % of the range (15) of either axis
        tasks.append(_branin(g1 - shift, g2) if i % 2 else _branin(g1, g2 - shift))
    grid = -(np.stack(tasks, 1) - 54.0) / 51.0
    space = {"x1": IntDistribution(0, 40), "x2": IntDistribution(0, 40)}
    return Problem("branin9", space, grid, lambda p: int(p["x1"]) * 41 + int(p["x2"]), 0.1, 0.5)


def german_rf(seed: int) -> Problem:
    import pandas as pd

    table = pd.read_csv(RESULTS / "german_landscape.csv.gz")
    space = {
        "n_estimators": IntDistribution(1, 64, log=True),
        "min_samples_split": FloatDistribution(0.01, 0.5, log=True),
        "max_depth": IntDistribution(1, 5),
        "criterion": CategoricalDistribution(["gini", "entropy"]),
    }
    ss = SearchSpace(space)
    encoded = ss.encode(table[list(space)].to_dict("records"))
    dp = table["demographic_parity"].to_numpy() + 0.05  # the column is dp - 0.05 (a constraint)
    grid = np.stack([table["value"].to_numpy(), -np.abs(dp)], 1)

    def locate(params: dict) -> int:
        return int(np.argmin(((encoded - ss.encode([params])[0]) ** 2).sum(1)))

    return Problem("german_rf", space, grid, locate, 0.0, None)


PROBLEMS: dict[str, Callable[[int], Problem]] = {
    "rkhs2": lambda seed: rkhs(2, seed),
    "rkhs20": lambda seed: rkhs(20, seed),
    "sine4": sine4,
    "branin9": branin9,
    "german_rf": german_rf,
}


def run(
    problem: Problem, sampler: optuna.samplers.BaseSampler, n_trials: int, seed: int,
    checkpoints: tuple[int, ...] = (),
) -> tuple[np.ndarray, dict[int, float]]:
    """Run ``n_trials`` ask/tell steps; returns the regrets (n_trials,) and the hypervolume at
    each checkpoint."""
    rng = np.random.RandomState(seed)
    study = optuna.create_study(directions=["maximize"] * problem.n, sampler=sampler)
    regrets = np.empty(n_trials)
    values = np.empty((n_trials, problem.n))
    hv = {}
    for t in range(n_trials):
        trial = study.ask(problem.space)
        i = problem.locate(trial.params)
        f = problem.grid[i]
        study.tell(trial, (f + problem.noise * rng.randn(problem.n)).tolist())
        regrets[t] = problem.best_utility - problem.utilities[i]
        values[t] = f
        if t + 1 in checkpoints:
            hv[t + 1] = hypervolume(problem, values[: t + 1])
    return regrets, hv
