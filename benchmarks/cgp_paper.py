"""Chen et al. (Technometrics 2025), figures 3 and 4, and heterogeneity: CGPSampler vs. baselines.

``fig3``: N = 16 agents maximize shifted test functions f_n(x) = f(x + psi_n), psi_n uniform in a
ball of radius 0.05 |ub - lb|, observed with noise sd 0.1: Ackley-5 on [-32.768, 32.768]^5,
Hartmann-6 on [0, 1]^6, Cosine-8 on [-1, 1]^8 and Levy-20 on [-10, 10]^20 (Ackley, Hartmann and
Levy negated, so that every agent maximizes). N_max = 4, S_quorum = 5, eta = beta = 2; 10 initial
designs per agent (25 for Levy-20) from one collaborative (sliced) Latin hypercube shared by every
method but FTS-DE, which starts from random designs in its agent's sub-region. Methods: CGP-UCB,
CGP-EI, CGP-TS (CGPSampler with a board), UCB, EI, TS (the same acquisitions alone,
``board=None``), FTS and FTS-DE (below). Per round and agent it records the instantaneous regret
f_n* - f_n(x_t) and two optimality gaps: ``gap`` = f_n* - f_n(x_best), x_best the evaluated
design with the best observed (noisy) value, every round; and ``rec_gap`` = f_n* -
f_n(argmax_x mu_n(x)), the paper's definition (section 6: "the solution quality if the system
stops after t rounds"), with mu_n the posterior mean of a GP (the engine's, fitted afresh) on the
agent's own trials, the same recommender for every method, every ``--rec-every`` rounds (and at
the last) since it costs one GP fit and one maximization per agent. The recommender has its own
random state, so the runs' trajectories do not depend on it.

``fig4``: CGP-UCB on Levy-20 with N in {1, 4, 16, 64} agents (``--methods CGP-UCB UCB``: also
the same agents tuning alone, so that each N's gain from collaboration is paired by agent).

``hetero``: Hartmann-6 with 16 agents whose shifts have 5x the radius, and with 16 agents one of
which is adversarial (it maximizes -f_n, so it posts the others' worst region with a high LCB):
CGP-UCB against each agent tuning alone (UCB, same initial designs), paired by agent and
replication, and, as a yardstick of chance, UCB alone run again with another sampler seed
(``UCB (other seed)``): "hurt by more than noise" is judged against how far two runs of an agent
tuning alone already differ.

FTS (Dai, Low, Jaillet, NeurIPS 2020) and FTS-DE (NeurIPS 2021, without its differential-privacy
noise), implemented from the papers' descriptions (their code was not read): every agent keeps
a Bayesian linear model on M = 256 random Fourier features of a Matern-5/2 kernel (a basis shared
by all agents: a common lengthscale 0.2 sqrt(D) on the unit cube, the features drawn from the
shared seed), and after each round shares one posterior sample omega_n of its weights. With
probability p_t = 1 - 1/sqrt(t) (t = BO rounds so far, our choice of the schedule) an agent runs
Thompson sampling on its own GP (the engine's, as TS above); otherwise FTS maximizes the
function phi(x)^T omega_n' of a random other agent, and FTS-DE maximizes, in each of P = 4
sub-regions (slabs of the first parameter), the weighted average of all agents' omega with weight
e^2 for the agents assigned to that sub-region and 1 for the others (its distributed
exploration). Both maximize over 2048 quasi-random points plus 512 around the agent's best.

Rounds: the paper runs 50-100 rounds per function; docs/benchmarks/cgp.md uses 60 (``--rounds``
after the initial designs). ``--record-every K`` keeps every K-th round's rows (and the last),
which is what the kept result files hold.

Usage (each piece under 15 minutes on 2 cores; rows are appended to the CSV, gzip-compressed
when its name ends in .gz):
    OMP_NUM_THREADS=1 python -m benchmarks.cgp_paper fig3 --functions hartmann6 --reps 0 1 2 \\
        --rounds 60 --record-every 5 --out benchmarks/results/cgp_fig3_r60.csv.gz
    OMP_NUM_THREADS=1 python -m benchmarks.cgp_paper fig4 --methods CGP-UCB UCB --reps 0 1 \\
        --rounds 30 --record-every 5 --out benchmarks/results/cgp_fig4_r30.csv.gz
    OMP_NUM_THREADS=1 python -m benchmarks.cgp_paper hetero --reps 0 1 2 --rounds 30 \\
        --record-every 5 --out benchmarks/results/cgp_hetero_r30.csv.gz
    python -m benchmarks.cgp_paper summarize benchmarks/results/cgp_fig3_r60.csv.gz --plot f.png
    python -m benchmarks.cgp_paper summarize a.csv.gz b.csv.gz        # rows of both, pooled
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import torch
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial

from benchmarks._common import (
    COLUMN_INCHES,
    append_rows,
    figure,
    legend_row,
    paired,
    save_figure,
    sign_test,
)
from benchmarks.collaborative_fair_regret import neg_hartmann6
from fairtune._gp.gp import fit_gp, standardize
from fairtune._gp.optim import maximize_acqf
from fairtune._gp.search_space import SearchSpace
from fairtune.collaboration import Board, simulate, sliced_lhs_value
from fairtune.samplers import CGPSampler

optuna.logging.set_verbosity(optuna.logging.WARNING)

# -- test functions (maximized) -----------------------------------------------------------------

def neg_ackley(x: np.ndarray) -> float:
    d = len(x)
    return -float(
        -20 * math.exp(-0.2 * math.sqrt((x**2).sum() / d))
        - math.exp(np.cos(2 * math.pi * x).sum() / d) + 20 + math.e
    )


def cosine8(x: np.ndarray) -> float:
    return float(0.1 * np.cos(5 * math.pi * x).sum() - (x**2).sum())


def neg_levy(x: np.ndarray) -> float:
    w = 1 + (x - 1) / 4
    value = (
        math.sin(math.pi * w[0]) ** 2
        + (((w[:-1] - 1) ** 2) * (1 + 10 * np.sin(math.pi * w[:-1] + 1) ** 2)).sum()
        + (w[-1] - 1) ** 2 * (1 + math.sin(2 * math.pi * w[-1]) ** 2)
    )
    return -float(value)


# name -> (f, D, lb, ub, max value, initial designs)
FUNCTIONS: dict[str, tuple[Callable[[np.ndarray], float], int, float, float, float, int]] = {
    "ackley5": (neg_ackley, 5, -32.768, 32.768, 0.0, 10),
    "hartmann6": (neg_hartmann6, 6, 0.0, 1.0, 3.32237, 10),
    "cosine8": (cosine8, 8, -1.0, 1.0, 0.8, 10),
    "levy20": (neg_levy, 20, -10.0, 10.0, 0.0, 25),
}
METHODS = ("CGP-UCB", "CGP-EI", "CGP-TS", "UCB", "EI", "TS", "FTS", "FTS-DE")
# The heterogeneity runs' yardstick: UCB alone again with another sampler seed (same shifts,
# initial designs and noise), so "UCB (other seed) - UCB" shows how far two runs of one agent
# tuning alone differ by chance.
CONTROL = "UCB (other seed)"
NOISE_SD = 0.1


def shifts(n: int, dim: int, radius: float, rng: np.random.RandomState) -> np.ndarray:
    """n points uniform in the D-ball of ``radius``."""
    direction = rng.normal(size=(n, dim))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return direction * radius * rng.uniform(size=(n, 1)) ** (1.0 / dim)


def make_objective(f: Callable[[np.ndarray], float], dim: int, lb: float, ub: float,
                   psi: np.ndarray, sign: float, rng: np.random.RandomState
                   ) -> Callable[[optuna.Trial], float]:
    def objective(trial: optuna.Trial) -> float:
        x = np.array([trial.suggest_float(f"x{i}", lb, ub) for i in range(dim)])
        true = f(x + psi)
        trial.set_user_attr("true", true)
        return sign * true + NOISE_SD * float(rng.normal())
    return objective


# -- FTS / FTS-DE baselines -----------------------------------------------------------------------


class _FTSServer:
    """What FTS agents share: one random-Fourier-feature basis and each agent's weight sample."""

    def __init__(self, dim: int, n_features: int, seed: int, n_regions: int) -> None:
        rng = np.random.RandomState(seed)
        lengthscale = 0.2 * math.sqrt(dim)
        # Matern-5/2 spectral density: a multivariate t with 5 degrees of freedom.
        z = rng.normal(size=(n_features, dim))
        u = rng.chisquare(5, size=(n_features, 1))
        self.W = z / np.sqrt(u / 5) / lengthscale
        self.b = rng.uniform(0, 2 * math.pi, size=n_features)
        self.n_features = n_features
        self.omega: dict[int, np.ndarray] = {}
        self.n_regions = n_regions

    def features(self, X: np.ndarray) -> np.ndarray:
        return math.sqrt(2.0 / self.n_features) * np.cos(X @ self.W.T + self.b)


class FTSSampler(CGPSampler):
    """FTS (or FTS-DE with ``region``): TS on the own GP with probability p_t, else the argmax
    of a shared random-feature function (see the module docstring)."""

    def __init__(self, *, server: _FTSServer, index: int, n_agents: int, region: int | None,
                 n_startup_trials: int, seed: int) -> None:
        super().__init__(board=None, **paper_settings("ts", n_startup_trials), seed=seed)
        self._server = server
        self._index = index
        self._n_agents = n_agents
        self._region = region
        self._own_rng = np.random.RandomState(seed + 7919)

    def _share(self, complete: Sequence[FrozenTrial], ss: SearchSpace) -> None:
        X = ss.encode([t.params for t in complete])
        y = np.array([t.value for t in complete])
        y = (y - y.mean()) / (y.std() or 1.0)
        Phi = self._server.features(X)
        noise = 1e-2
        A = Phi.T @ Phi + noise * np.eye(self._server.n_features)
        L = np.linalg.cholesky(A)
        mean = np.linalg.solve(A, Phi.T @ y)
        z = self._own_rng.normal(size=self._server.n_features)
        # cov = noise * A^-1 = noise * L^-T L^-1: sample mean + sqrt(noise) L^-T z.
        self._server.omega[self._index] = mean + math.sqrt(noise) * np.linalg.solve(L.T, z)

    def _post_round(self, study: optuna.Study) -> None:
        space = self.infer_relative_search_space(study, None)  # type: ignore[arg-type]
        complete = [t for t in study.trials if t.state.is_finished() and t.value is not None]
        if space and len(complete) >= self._n_startup_trials:
            self._share(complete, SearchSpace(space))

    def _sample_relative_impl(self, study: optuna.Study, search_space: dict[str, BaseDistribution],
                              complete: Sequence[FrozenTrial], pending: Sequence[dict[str, Any]]
                              ) -> dict[str, Any]:
        t = len(complete) - self._n_startup_trials + 1
        p_t = 1.0 - 1.0 / math.sqrt(t)
        others = [i for i in self._server.omega if i != self._index]
        if self._own_rng.uniform() < p_t or not others:
            return super()._sample_relative_impl(study, search_space, complete, pending)
        ss = SearchSpace(search_space)
        X = ss.encode([t.params for t in complete])
        best = X[np.argmax([t.value for t in complete])]
        candidates = np.concatenate([
            ss.sample(2048, self._own_rng),
            ss.round(best + self._own_rng.normal(0, 0.05, size=(512, ss.dim))),
        ])
        Phi = self._server.features(candidates)
        if self._region is None:
            omega = self._server.omega[others[self._own_rng.randint(len(others))]]
            values = Phi @ omega
        else:
            P = self._server.n_regions
            region_of = np.minimum((candidates[:, 0] * P).astype(int), P - 1)
            values = np.empty(len(candidates))
            for i in range(P):
                weights = np.array([
                    math.exp(2.0) if j % P == i else 1.0 for j in self._server.omega
                ])
                weights /= weights.sum()
                omega = sum(w * o for w, o in zip(weights, self._server.omega.values()))
                mask = region_of == i
                values[mask] = Phi[mask] @ omega
        return ss.decode(candidates[int(np.argmax(values))])


# -- one run ----------------------------------------------------------------------------------------


def posterior_mean_maximizer(study: optuna.Study, names: list[str], seed: int) -> np.ndarray:
    """argmax_x mu(x) of a GP on the study's complete trials (the paper's recommended design)."""
    trials = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    ss = SearchSpace(trials[0].distributions)
    X = ss.encode([t.params for t in trials])
    y, _, _ = standardize(np.array([t.value for t in trials], dtype=float))
    gp = fit_gp(torch.from_numpy(X), torch.from_numpy(y), ss.is_categorical)
    with torch.no_grad():
        warm = X[int(np.argmax(gp.posterior(torch.from_numpy(X))[0].numpy()))][None, None, :]
    x, _ = maximize_acqf(lambda z: gp.posterior(z[..., 0, :])[0], ss,
                         rng=np.random.RandomState(seed), n_preliminary_samples=1024,
                         n_local_search=5, warm_starts=warm)
    params = ss.decode(x[0])
    return np.array([params[name] for name in names], dtype=float)


def paper_settings(acquisition: str, n_init: int, *, n_raw_samples: int = 100000
                   ) -> dict[str, Any]:
    """Every tuning argument of CGPSampler as section 6 of the paper sets it (N_max = 4,
    S_quorum = 5, eta = beta = 2), S_raw as given: passed explicitly, so that the figures do
    not change with CGPSampler's defaults."""
    return {"acquisition": acquisition, "group_size": 4, "eta": 2.0, "beta": 2.0,
            "n_raw_samples": n_raw_samples, "quorum": 5, "share_without_comparison": False,
            "design_noise": None, "n_startup_trials": n_init}


def _small(sampler: CGPSampler) -> CGPSampler:
    # Lighter acquisition optimization than the defaults (the same for every GP method), to fit
    # the 2-core machine; every private knob is set, so that the runs do not change with them.
    sampler._n_preliminary_samples = 256
    sampler._n_local_search = 2
    sampler._optim_max_iter = 15
    sampler._n_ts_candidates = 512
    sampler._max_ei_models = 64
    sampler._fit_max_iter = 100
    return sampler


def run(function: str, method: str, rep: int, n_agents: int, rounds: int, *,
        radius_factor: float = 1.0, adversarial: bool = False, n_raw_samples: int = 100000,
        n_init: int | None = None, rec_every: int = 10, record_every: int = 1
        ) -> list[dict[str, Any]]:
    f, dim, lb, ub, f_max, default_init = FUNCTIONS[function]
    n_init = n_init or default_init
    rng = np.random.RandomState(1000 * rep + 17)
    psi = shifts(n_agents, dim, radius_factor * 0.05 * (ub - lb), rng)
    signs = [(-1.0 if adversarial and n == 0 else 1.0) for n in range(n_agents)]
    board = Board(optuna.storages.InMemoryStorage(), name="bench", seed=rep)
    server = _FTSServer(dim, 256, rep, n_regions=4)
    samplers: list[CGPSampler] = []
    for n in range(n_agents):
        seed = 100 * rep + n
        if method.startswith("CGP-"):
            s: CGPSampler = CGPSampler(
                board=board, agent=f"a{n:03d}", seed=seed,
                **paper_settings(method[4:].lower(), n_init, n_raw_samples=n_raw_samples))
        elif method in ("UCB", "EI", "TS"):
            s = CGPSampler(board=None, seed=seed, **paper_settings(
                method.lower(), n_init, n_raw_samples=n_raw_samples))
        elif method == CONTROL:
            s = CGPSampler(board=None, seed=seed + 50_000, **paper_settings(
                "ucb", n_init, n_raw_samples=n_raw_samples))
        else:
            s = FTSSampler(server=server, index=n, n_agents=n_agents,
                           region=(n % 4) if method == "FTS-DE" else None,
                           n_startup_trials=n_init, seed=seed)
        samplers.append(_small(s))
    objectives = [
        make_objective(f, dim, lb, ub, psi[n], signs[n], np.random.RandomState(10**6 + 100 * rep + n))
        for n in range(n_agents)
    ]
    names = [f"x{i}" for i in range(dim)]
    init_rng = np.random.RandomState(rep)

    def initial(n: int, i: int) -> dict[str, float]:
        if method == "FTS-DE":  # random designs in the agent's sub-region (slab of x0)
            u = init_rng.uniform(size=dim)
            u[0] = ((n % 4) + u[0]) / 4
        else:  # the collaborative Latin hypercube shared by the other methods
            u = np.array([sliced_lhs_value(rep, j, n_agents, n_init, n, i) for j in range(dim)])
        return {name: lb + (ub - lb) * float(v) for name, v in zip(names, u)}

    rows: list[dict[str, Any]] = []

    def record(round_: int, studies: list[optuna.Study]) -> None:
        t = round_ + 1 - n_init
        if t < 0 or (t % record_every and t != rounds):
            return
        for n, study in enumerate(studies):
            if adversarial and n == 0:
                continue
            trials = study.trials
            best = max(trials, key=lambda t: t.value)
            rec_gap: float | str = ""
            if rec_every and (t % rec_every == 0 or t == rounds):
                x_rec = posterior_mean_maximizer(study, names, 7919 * rep + 31 * n + t)
                rec_gap = _g6(f_max - f(x_rec + psi[n]))
            rows.append({
                "function": function, "method": method, "rep": rep, "n_agents": n_agents,
                "radius_factor": radius_factor, "adversarial": int(adversarial), "agent": n,
                "round": t, "regret": _g6(f_max - trials[-1].user_attrs["true"]),
                "gap": _g6(f_max - best.user_attrs["true"]), "rec_gap": rec_gap,
            })

    simulate(objectives, samplers, n_rounds=n_init + rounds, callback=record,
             initial_params=[[initial(n, i) for i in range(n_init)] for n in range(n_agents)])
    return rows


FIELDS = ["function", "method", "rep", "n_agents", "radius_factor", "adversarial", "agent",
          "round", "regret", "gap", "rec_gap"]


def _g6(value: float) -> float:
    # Six significant digits: the tables show three decimals, and the files stay small.
    return float(f"{value:.6g}")


# -- summaries ---------------------------------------------------------------------------------------


NAMES = {"ackley5": "Ackley-5", "cosine8": "Cosine-8", "hartmann6": "Hartmann-6",
         "levy20": "Levy-20"}


def headline(last: Any) -> list[str]:
    """The page's table: CGP-UCB, the same agents alone (UCB) and FTS-DE on each function at the
    last round (16 agents, the paper's shifts), and in how many replications CGP-UCB's mean gap
    over the agents is lower (two-sided sign test over replications)."""
    lines = [("| function | CGPSampler on a board (CGP-UCB) | the same agents tuning alone (UCB) | "
              "FTS-DE | replications where CGPSampler is below alone | ... below FTS-DE |"),
             "|---|---:|---:|---:|---|---|"]
    plain = last[(last["radius_factor"] == 1.0) & (last["adversarial"] == 0)]
    for (function, _), part in plain.groupby(["function", "n_agents"]):
        by_rep = part.groupby(["method", "rep"])["gap"].mean()
        if not {"CGP-UCB", "UCB", "FTS-DE"} <= set(by_rep.index.get_level_values(0)):
            continue
        cells = [f"{part[part['method'] == m]['gap'].mean():#.3g}".rstrip(".") for m in
                 ("CGP-UCB", "UCB", "FTS-DE")]
        for other in ("UCB", "FTS-DE"):
            reps = by_rep["CGP-UCB"].index.intersection(by_rep[other].index)
            below, _, _, p = paired(by_rep["CGP-UCB"][reps], by_rep[other][reps], sign=-1.0)
            cells.append(f"{below} of {len(reps)} " + ("(p < 0.001)" if p < 0.0005 else
                                                        f"(p = {p:.3f})"))
        lines.append(f"| {NAMES.get(function, function)} | " + " | ".join(cells) + " |")
    return lines if len(lines) > 2 else []


def summarize(path: Path | Sequence[Path], plot: Path | None, at_round: int | None = None,
              metric: str = "gap") -> str:
    """The page's table, then every method's table at the last round (or at ``at_round``, for
    rows that reach it), and a plot of the gap per round.

    ``path``: one CSV or several, whose rows are pooled (e.g. more replications run later).

    ``metric``: which optimality gap the "gap" columns show: ``"gap"`` (the best observed
    design's, every round) or ``"rec_gap"`` (the paper's, at the posterior mean's maximizer, on
    the rounds where it was computed).
    """
    import pandas as pd

    paths = [path] if isinstance(path, (str, Path)) else list(path)
    df = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    if metric not in ("gap", "rec_gap"):
        raise ValueError(f"metric must be one of ['gap', 'rec_gap'], but got metric={metric!r}")
    if metric == "rec_gap":
        if "rec_gap" not in df.columns:
            raise ValueError(f"{path} has no rec_gap column (written before the paper's gap was "
                             "recorded); summarize it with metric='gap'")
        df = df[df["rec_gap"].notna()].assign(gap=lambda d: d["rec_gap"])
    if at_round is not None:
        df = df[df["round"] <= at_round]
    groups = ["function", "n_agents", "radius_factor", "adversarial"]
    last = df[df["round"] == df.groupby(groups)["round"].transform("max")]
    lines: list[str] = [
        "gap: " + ("f* - f(argmax of the posterior mean), the paper's" if metric == "rec_gap"
                   else "f* - f(the best observed design)"),
        *headline(last),
    ]
    for (function, n_agents, radius, adv), part in last.groupby(groups):
        reps = part["rep"].nunique()
        rounds = int(part["round"].max())
        lines.append(f"\n{function}, N = {n_agents}, shift radius x{radius:g}"
                     f"{', one adversarial agent' if adv else ''}: round {rounds}, {reps} reps")
        lines.append("| method | mean gap | median gap | mean regret | median regret | "
                     "gap vs alone (agent x rep w / t / l, sign test) |")
        lines.append("|---|---|---|---|---|---|")
        for method in [m for m in METHODS + (CONTROL,) if m in set(part["method"])]:
            mine = part[part["method"] == method]
            versus = ""
            if method.startswith("CGP-") and method[4:] in set(part["method"]):
                a = mine.set_index(["rep", "agent"])["gap"]
                b = part[part["method"] == method[4:]].set_index(["rep", "agent"])["gap"]
                common = a.index.intersection(b.index)
                # A difference under 1e-12 is a tie (the same design found by both).
                d = b[common].to_numpy() - a[common].to_numpy()
                wins, losses = int((d > 1e-12).sum()), int((d < -1e-12).sum())
                versus = (f"{wins} / {len(d) - wins - losses} / {losses} "
                          f"(p = {sign_test(wins, losses):.3f})")
            lines.append(
                f"| {method} | {mine['gap'].mean():.3f} | {mine['gap'].median():.3f} | "
                f"{mine['regret'].mean():.3f} | {mine['regret'].median():.3f} | {versus} |"
            )
        # By replication (mean gap over its agents): each CGP variant against its acquisition
        # alone, and CGP-UCB and CGP-TS (the same base acquisition as FTS-DE's) against FTS-DE
        # (whose agents start from other designs).
        by_rep = part.groupby(["method", "rep"])["gap"].mean()
        pairs = [(m, m[4:]) for m in ("CGP-UCB", "CGP-EI", "CGP-TS")] + [
            ("CGP-UCB", "FTS-DE"), ("CGP-TS", "FTS-DE")]
        counts = []
        for a, b in pairs:
            if a in by_rep.index.get_level_values(0) and b in by_rep.index.get_level_values(0):
                both = by_rep[a].index.intersection(by_rep[b].index)
                below, _, _, p = paired(by_rep[a][both], by_rep[b][both], sign=-1.0)
                counts.append(f"{a} below {b} in {below} of {len(both)} (sign test p = {p:.3f})")
        if counts:
            lines.append("replications (mean gap over agents): " + "; ".join(counts))
        if adv or radius != 1.0:
            alone = part[part["method"] == "UCB"].set_index(["rep", "agent"])["gap"]
            for other in ("CGP-UCB", CONTROL):
                gaps = part[part["method"] == other].set_index(["rep", "agent"])["gap"]
                common = gaps.index.intersection(alone.index)
                if not len(common):
                    continue
                diff = gaps[common] - alone[common]
                lines.append(
                    f"paired {other} gap - UCB gap over {len(common)} agent x rep pairs: mean "
                    f"{diff.mean():.3f}, median {diff.median():.3f}, largest harm "
                    f"{diff.max():.3f}, pairs harmed by more than 2 noise sd (0.2): "
                    f"{int((diff > 2 * NOISE_SD).sum())}, helped by more: "
                    f"{int((diff < -2 * NOISE_SD).sum())}"
                )
    if plot is not None:
        _plot(df, plot, groups)
    return "\n".join(lines)


def _plot(df: Any, path: Path, groups: list[str]) -> None:
    """Mean gap per round (over replications of the agents' mean), a panel per function or
    setting, two to a row, and the legend below them; the band spans the replications' min to
    max."""
    panels = list(df.groupby(groups))
    cols = min(2, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = figure(rows + 1, cols, squeeze=False,
                       figsize=(min(3.7 * cols, COLUMN_INCHES), 2.8 * rows + 0.5),
                       gridspec_kw={"height_ratios": [2.8] * rows + [0.5]})
    handles: dict[str, Any] = {}
    for ax, ((function, n_agents, radius, adv), part) in zip(axes[:-1].flat, panels):
        for method in [m for m in METHODS + (CONTROL,) if m in set(part["method"])]:
            curve = part[part["method"] == method].groupby(["round", "rep"])["gap"].mean()
            by_round = curve.groupby("round")
            mean = by_round.mean()
            style = "-" if method.startswith("CGP") else ":" if method.startswith("FTS") else "--"
            handles[method], = ax.plot(
                mean.index, mean.values, style,
                linewidth=2.0 if method in ("CGP-UCB", "UCB", "FTS-DE") else 1.0)
            ax.fill_between(mean.index, by_round.min().values, by_round.max().values, alpha=0.08)
        ax.set_yscale("log")
        extra = (", one adversarial agent" if adv else "") + (
            f", shifts x{radius:g}" if radius != 1.0 else "")
        ax.set_title(f"{NAMES.get(function, function)}, N = {n_agents}{extra}", fontsize=10)
        ax.set_xlabel("round")
    for ax in axes[:-1].flat[len(panels):]:
        ax.axis("off")
    for row in axes[:-1]:
        row[0].set_ylabel("optimality gap (best observed design)")
    methods = [m for m in METHODS + (CONTROL,) if m in handles]
    legend_row(axes, [handles[m] for m in methods], methods, ncol=4)
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("fig3", "fig4", "hetero"):
        p = sub.add_parser(name)
        p.add_argument("--reps", type=int, nargs="+", default=[0])
        p.add_argument("--rounds", type=int, default=15)
        p.add_argument("--out", type=Path, default=Path(f"cgp_{name}.csv"))
        p.add_argument("--n-raw-samples", type=int, default=100000,
                       help="S_raw of the CGP methods (default: 10^5, the paper's)")
        p.add_argument("--record-every", type=int, default=1,
                       help="keep every K-th round's rows, and the last (default: every round)")
        p.add_argument("--rec-every", type=int, default=10,
                       help="rounds between the paper's optimality gaps (rec_gap; 0: never)")
        if name == "fig3":
            p.add_argument("--functions", nargs="+", default=list(FUNCTIONS))
            p.add_argument("--methods", nargs="+", default=list(METHODS))
            p.add_argument("--n-agents", type=int, default=16)
            p.add_argument("--n-init", type=int, default=None,
                           help="initial designs per agent (default: 10, 25 for levy20)")
        if name == "fig4":
            p.add_argument("--n-agents", type=int, nargs="+", default=[1, 4, 16, 64])
            p.add_argument("--methods", nargs="+", default=["CGP-UCB"], choices=["CGP-UCB", "UCB"],
                           help="UCB: the same agents tuning alone, to pair with CGP-UCB per N")
        if name == "hetero":
            p.add_argument("--function", default="hartmann6")
    s = sub.add_parser("summarize")
    s.add_argument("csv", type=Path, nargs="+", help="one or more CSVs, pooled")
    s.add_argument("--plot", type=Path, default=None)
    s.add_argument("--round", type=int, default=None, dest="at_round",
                   help="tables (and plots) up to this round instead of the last")
    s.add_argument("--metric", choices=["gap", "rec_gap"], default="gap",
                   help="gap: the best observed design's; rec_gap: the paper's, at argmax of "
                        "the posterior mean")
    args = parser.parse_args()
    if args.command == "summarize":
        print(summarize(args.csv, args.plot, args.at_round, args.metric))
        return
    jobs: list[tuple[str, str, int, int, dict[str, Any]]] = []
    for rep in args.reps:
        if args.command == "fig3":
            jobs += [(fn, m, rep, args.n_agents, {}) for fn in args.functions for m in args.methods]
        elif args.command == "fig4":
            jobs += [("levy20", m, rep, n, {}) for n in args.n_agents for m in args.methods]
        else:
            for extra in ({"radius_factor": 5.0}, {"adversarial": True}):
                jobs += [(args.function, m, rep, 16, extra) for m in ("CGP-UCB", "UCB", CONTROL)]
    for function, method, rep, n_agents, extra in jobs:
        t0 = time.perf_counter()
        rows = run(function, method, rep, n_agents, args.rounds, n_raw_samples=args.n_raw_samples,
                   n_init=getattr(args, "n_init", None), rec_every=args.rec_every,
                   record_every=args.record_every, **extra)
        append_rows(args.out, rows, FIELDS)
        last = [r for r in rows if r["round"] == args.rounds]
        print(f"{function} {method} rep {rep} N={n_agents} {extra}: "
              f"gap {np.mean([r['gap'] for r in last]):.3f} "
              f"regret {np.mean([r['regret'] for r in last]):.3f} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
