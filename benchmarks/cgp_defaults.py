"""CGPSampler defaults for users: a study on families of related agents that are not the paper's.

Each *family* is a standard test function g (minimized) in D dimensions, N agents and a level of
heterogeneity. Agent n minimizes

    f_n(x) = a_n g(x* + R_n (x - x* - psi_n)) + b_n + noise,

a version of g whose optimum x* is moved by psi_n (uniform in a ball of radius ``shift`` times
the width of the domain), whose landscape is rotated around its optimum by R_n (the exponential
of a random skew-symmetric matrix of spectral norm ``angle``), whose output is scaled by
a_n = exp(N(0, ``log_scale``^2)) and offset by b_n = N(0, ``offset``^2) family scales, and
observed with Gaussian noise of sd 0.01 a_n family scales (the family scale: the median of
g - g* over uniform random points of the domain). Every agent's optimal value is g*, so its
simple regret, the best *noise-free* value among its evaluated designs, is normalized as
(g(.) - g*) / family scale. Levels of heterogeneity:

- ``low``: shift 0.05 (the paper's), angle 0.1 rad, log_scale 0.1, no offset;
- ``high``: shift 0.15, angle 0.5 rad, log_scale 0.5, offset 0.5.

Development families (seeds below 100; the defaults were chosen on the first six): six-hump
camel (2-d, 4 and 8 agents), Styblinski-Tang (4-d, 8 and 4 agents), Rosenbrock (6-d, 4 agents),
Rastrigin (3-d, 4 agents), Styblinski-Tang (16-d, 16 agents) and Rosenbrock (20-d, 8 agents). Held-out
families (seen only by the confirmation, seeds 100 and up): Hartmann-3, Michalewicz (5-d) and
Griewank (8-d, on [-10, 10]^8), 4 agents each, and Powell (12-d, on [-4, 5]^12, 16 agents).
None is one of the paper's four (Ackley, Hartmann-6, Cosine-8, Levy).

Methods, per (family, seed), on the same agents and noise streams:

- ``board``: CGPSampler with the setting under study, the agents sharing one in-memory Board
  (``fairtune.collaboration.simulate``, synchronous rounds);
- ``alone``: the same setting with ``board=None``;
- ``alone (other seed)``: the same alone with another sampler seed: how far two runs of an agent
  tuning alone differ by chance (the yardstick of "harmed");
- ``GPSampler``: Optuna's ``GPSampler(seed=...)`` alone, its defaults.

A *setting* is written ``acquisition[,beta=B][,startup=S][,group=G][,eta=E][,quorum=Q][,share]``
(e.g. ``ei``, ``ucb,beta=1``, ``ei,share,eta=1``; ``share`` is
``share_without_comparison=True``); what it does not name is CGPSampler's default, and the
setting ``defaults`` passes nothing but the board, agent and seed. ``eta``, ``quorum``,
``group`` and ``share`` act only through the board, so a sampler alone ignores them: a
setting's runs alone are those of the setting without them (``ei,share,eta=1`` is paired with
``ei`` alone), and ``run`` does not repeat them. Every run lasts ``--rounds``
trials per agent (startup included) and records every agent's simple regret after each trial,
so the 15- and 30-trial budgets are prefixes of the 60-trial run. Rows are appended to the CSV
per (family, seed, method, setting); a run already in the CSV is skipped, so an interrupted
command resumes where it stopped.

``--light``: the lighter acquisition optimization of ``cgp_paper.py`` (256 quasi-random starts,
2 refined, 15 L-BFGS-B iterations) for every CGPSampler run; Optuna's GPSampler keeps its own.
The development screen and the held-out confirmation both used it (on a shared 2-core machine
the sampler's own optimizer did not fit the time).

``headline`` prints the page's table (the held-out families); ``screen`` every setting on the
development families; ``summarize`` one setting's tables by family and a plot.

Usage (``OMP_NUM_THREADS=1``; every command behind docs/benchmarks/cgp_defaults.md is there):
    python -m benchmarks.cgp_defaults run --families camel2-low rastrigin3-high --seeds 0 1 \
        --settings ei "ei,share" --light --out benchmarks/results/cgp_defaults_dev.csv.gz
    python -m benchmarks.cgp_defaults run --families hartmann3-high michalewicz5-low \
        griewank8-high --seeds $(seq 100 139) --settings ei --light \
        --out benchmarks/results/cgp_defaults_heldout.csv.gz
    python -m benchmarks.cgp_defaults headline benchmarks/results/cgp_defaults_heldout.csv.gz \
        benchmarks/results/cgp_defaults_heldout16.csv.gz        # the page's table
    python -m benchmarks.cgp_defaults screen benchmarks/results/cgp_defaults_dev.csv.gz \
        --seeds 0 1 --trials 30 60
    python -m benchmarks.cgp_defaults summarize benchmarks/results/cgp_defaults_dev.csv.gz \
        benchmarks/results/cgp_defaults_heldout.csv.gz --setting ei \
        --plot docs/images/cgp_defaults.png
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from benchmarks._common import (
    COLUMN_INCHES,
    append_rows,
    checkpoints,
    done_keys,
    figure,
    legend_row,
    paired,
    save_figure,
    sign_test,
    wins_ties_losses,
)
from benchmarks.cgp_paper import _small, shifts
from fairtune.collaboration import Board, simulate
from fairtune.samplers import CGPSampler

optuna.logging.set_verbosity(optuna.logging.WARNING)

# -- test functions (minimized, defined on all of R^D) --------------------------------------------


def six_hump_camel(x: np.ndarray) -> float:
    a, b = x
    return float((4 - 2.1 * a**2 + a**4 / 3) * a**2 + a * b + (-4 + 4 * b**2) * b**2)


def styblinski_tang(x: np.ndarray) -> float:
    return float(0.5 * (x**4 - 16 * x**2 + 5 * x).sum())


def rosenbrock(x: np.ndarray) -> float:
    return float((100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum())


def rastrigin(x: np.ndarray) -> float:
    return float(10 * len(x) + (x**2 - 10 * np.cos(2 * math.pi * x)).sum())


def hartmann3(x: np.ndarray) -> float:
    alpha = np.array([1.0, 1.2, 3.0, 3.2])
    A = np.array([[3.0, 10, 30], [0.1, 10, 35], [3.0, 10, 30], [0.1, 10, 35]])
    P = 1e-4 * np.array([[3689, 1170, 2673], [4699, 4387, 7470], [1091, 8732, 5547],
                         [381, 5743, 8828]])
    return float(-(alpha * np.exp(-(A * (x - P) ** 2).sum(axis=1))).sum())


def michalewicz(x: np.ndarray) -> float:
    i = np.arange(1, len(x) + 1)
    return float(-(np.sin(x) * np.sin(i * x**2 / math.pi) ** 20).sum())


def griewank(x: np.ndarray) -> float:
    i = np.arange(1, len(x) + 1)
    return float((x**2).sum() / 4000 - np.prod(np.cos(x / np.sqrt(i))) + 1)


def powell(x: np.ndarray) -> float:
    a, b, c, d = x[0::4], x[1::4], x[2::4], x[3::4]
    return float(((a + 10 * b) ** 2 + 5 * (c - d) ** 2 + (b - 2 * c) ** 4
                  + 10 * (a - d) ** 4).sum())


@dataclass(frozen=True)
class Function:
    g: Callable[[np.ndarray], float]
    lb: np.ndarray
    ub: np.ndarray
    x_star: np.ndarray  # a global minimizer (refined numerically where only known to 1e-6)


def _function(name: str, dim: int) -> Function:
    full = np.ones(dim)
    if name == "camel":
        return Function(six_hump_camel, np.array([-3.0, -2.0]), np.array([3.0, 2.0]),
                        np.array([0.0898420131, -0.7126564033]))
    if name == "styblinski":
        return Function(styblinski_tang, -5 * full, 5 * full, -2.903534027771 * full)
    if name == "rosenbrock":
        return Function(rosenbrock, -2.048 * full, 2.048 * full, full)
    if name == "rastrigin":
        return Function(rastrigin, -5.12 * full, 5.12 * full, 0 * full)
    if name == "hartmann3":
        return Function(hartmann3, 0 * full, full, np.array([0.114614, 0.555649, 0.852547]))
    if name == "michalewicz":
        return Function(michalewicz, 0 * full, math.pi * full,
                        np.array([2.202906, 1.570796, 1.284992, 1.923058, 1.720470]))
    if name == "griewank":
        return Function(griewank, -10 * full, 10 * full, 0 * full)
    if name == "powell":
        return Function(powell, -4 * full, 5 * full, 0 * full)
    raise ValueError(f"unknown function {name!r}")


LEVELS = {
    "low": {"shift": 0.05, "angle": 0.1, "log_scale": 0.1, "offset": 0.0},
    "high": {"shift": 0.15, "angle": 0.5, "log_scale": 0.5, "offset": 0.5},
}
# family -> (function, D, N agents, level). A family's agents follow from the seed and the
# family's place in this table: add new families at the end.
FAMILIES: dict[str, tuple[str, int, int, str]] = {
    # development
    "camel2-low": ("camel", 2, 4, "low"),
    "camel2-high": ("camel", 2, 8, "high"),
    "styblinski4-low": ("styblinski", 4, 8, "low"),
    "styblinski4-high": ("styblinski", 4, 4, "high"),
    "rosenbrock6-low": ("rosenbrock", 6, 4, "low"),
    "rastrigin3-high": ("rastrigin", 3, 4, "high"),
    "styblinski16-low": ("styblinski", 16, 16, "low"),
    # held out
    "hartmann3-high": ("hartmann3", 3, 4, "high"),
    "michalewicz5-low": ("michalewicz", 5, 4, "low"),
    "griewank8-high": ("griewank", 8, 4, "high"),
    "powell12-low": ("powell", 12, 16, "low"),
    "rosenbrock20-high": ("rosenbrock", 20, 8, "high"),
}
DEV = [f for f in FAMILIES if FAMILIES[f][0] in ("camel", "styblinski", "rosenbrock", "rastrigin")]
HELDOUT = [f for f in FAMILIES if f not in DEV]
METHODS = ("board", "alone", "alone (other seed)", "GPSampler")
NOISE = 0.01  # noise sd, in family scales (times the agent's output scale a_n)
HARM = 2 * NOISE  # "harmed": a normalized regret larger by more than two noise sd
FIELDS = ["family", "seed", "method", "setting", "agent", "round", "regret", "seconds"]


def family_scale(function: Function, dim: int) -> tuple[float, float]:
    """(g*, median of g - g* over 4096 uniform random points of the domain)."""
    from scipy.optimize import minimize

    res = minimize(function.g, function.x_star, method="L-BFGS-B")
    g_star = min(float(res.fun), function.g(function.x_star))
    rng = np.random.RandomState(0)
    X = function.lb + (function.ub - function.lb) * rng.uniform(size=(4096, dim))
    return g_star, float(np.median([function.g(x) for x in X]) - g_star)


def rotation(dim: int, angle: float, rng: np.random.RandomState) -> np.ndarray:
    """exp(K) for a random skew-symmetric K of spectral norm ``angle`` (rotation angles <= it)."""
    from scipy.linalg import expm

    M = rng.normal(size=(dim, dim))
    K = M - M.T
    norm = np.linalg.norm(K, 2)
    return expm(angle * K / norm) if norm > 0 else np.eye(dim)


@dataclass
class Agents:
    """One family's agents for one seed: transforms, scales and what normalizes their regret."""

    function: Function
    dim: int
    x_opt: np.ndarray  # (N, D) each agent's minimizer x* + psi_n
    R: np.ndarray  # (N, D, D)
    a: np.ndarray  # (N,)
    b: np.ndarray  # (N,)
    g_star: float
    scale: float

    def true(self, n: int, x: np.ndarray) -> float:
        """Normalized regret of design x for agent n (noise-free)."""
        z = self.function.x_star + self.R[n] @ (x - self.x_opt[n])
        return max((self.function.g(z) - self.g_star) / self.scale, 0.0)


def make_agents(family: str, seed: int) -> Agents:
    name, dim, n_agents, level = FAMILIES[family]
    spec = LEVELS[level]
    function = _function(name, dim)
    g_star, scale = family_scale(function, dim)
    rng = np.random.RandomState(7_000_003 * (list(FAMILIES).index(family) + 1) + seed)
    width = function.ub - function.lb
    psi = shifts(n_agents, dim, spec["shift"], rng) * width  # radius in units of the width
    x_opt = np.clip(function.x_star + psi, function.lb + 0.01 * width, function.ub - 0.01 * width)
    R = np.stack([rotation(dim, spec["angle"], rng) for _ in range(n_agents)])
    a = np.exp(spec["log_scale"] * rng.normal(size=n_agents))
    b = spec["offset"] * scale * rng.normal(size=n_agents)
    return Agents(function, dim, x_opt, R, a, b, g_star, scale)


def objective_of(agents: Agents, n: int, noise_seed: int) -> Callable[[optuna.Trial], float]:
    f = agents.function
    rng = np.random.RandomState(noise_seed)

    def objective(trial: optuna.Trial) -> float:
        x = np.array([trial.suggest_float(f"x{i}", f.lb[i], f.ub[i]) for i in range(agents.dim)])
        regret = agents.true(n, x)
        trial.set_user_attr("regret", regret)
        value = agents.g_star + agents.scale * regret  # g(z), noise-free
        return float(agents.a[n] * (value + NOISE * agents.scale * rng.normal()) + agents.b[n])

    return objective


# -- settings and runs ----------------------------------------------------------------------------


def parse_setting(setting: str) -> dict[str, Any]:
    """``"ucb,beta=1,startup=5,group=8,eta=1,quorum=5,share"`` -> CGPSampler keyword arguments
    (``share``: ``share_without_comparison=True``; ``defaults``: none)."""
    if setting == "defaults":
        return {}
    acquisition, *rest = setting.split(",")
    if acquisition not in ("ucb", "ei", "ts"):
        raise ValueError(f"a setting starts with ucb, ei or ts, but got setting={setting!r}")
    kwargs: dict[str, Any] = {"acquisition": acquisition}
    names = {"beta": ("beta", float), "startup": ("n_startup_trials", int),
             "group": ("group_size", int), "eta": ("eta", float), "quorum": ("quorum", int)}
    for item in rest:
        if item == "share":
            kwargs["share_without_comparison"] = True
            continue
        key, _, value = item.partition("=")
        if key not in names:
            raise ValueError(f"setting items are {sorted(names)} and share, but got {item!r} in "
                             f"{setting!r}")
        kwarg, cast = names[key]
        kwargs[kwarg] = cast(value)
    return kwargs


def run(family: str, seed: int, method: str, setting: str, rounds: int, light: bool = False
        ) -> list[dict[str, Any]]:
    agents = make_agents(family, seed)
    n_agents = FAMILIES[family][2]
    kwargs = {} if method == "GPSampler" else parse_setting(setting)
    board = Board(optuna.storages.InMemoryStorage(), name="defaults", seed=seed)
    samplers: list[optuna.samplers.BaseSampler] = []
    for n in range(n_agents):
        sampler_seed = 1000 * seed + n + (50_000 if method == "alone (other seed)" else 0)
        if method == "GPSampler":
            samplers.append(optuna.samplers.GPSampler(seed=sampler_seed))
            continue
        if method == "board":
            s = CGPSampler(board=board, agent=f"a{n:03d}", seed=sampler_seed, **kwargs)
        elif method in ("alone", "alone (other seed)"):
            s = CGPSampler(board=None, seed=sampler_seed, **kwargs)
        else:
            raise ValueError(f"method must be one of {list(METHODS)}, but got method={method!r}")
        samplers.append(_small(s) if light else s)
    objectives = [objective_of(agents, n, 10**6 + 1000 * seed + n) for n in range(n_agents)]
    rows: list[dict[str, Any]] = []
    best = [math.inf] * n_agents
    started = time.perf_counter()

    def record(round_: int, studies: list[optuna.Study]) -> None:
        for n, study in enumerate(studies):
            best[n] = min(best[n], study.trials[-1].user_attrs["regret"])
            rows.append({"family": family, "seed": seed, "method": method,
                         "setting": "-" if method == "GPSampler" else setting, "agent": n,
                         "round": round_ + 1, "regret": f"{best[n]:.6g}",
                         "seconds": f"{time.perf_counter() - started:.1f}"})

    simulate(objectives, samplers, n_rounds=rounds, direction="minimize", callback=record)
    return rows


def _read(paths: Sequence[Path]) -> Any:
    import pandas as pd

    frames = [pd.read_csv(p) for p in paths if Path(p).exists() and Path(p).stat().st_size]
    if not frames:
        return pd.DataFrame(columns=FIELDS)
    return pd.concat(frames, ignore_index=True)


def done_runs(path: Path) -> set[tuple[str, int, str, str]]:
    """The (family, seed, method, setting) runs already in ``path``: a resumed run skips them."""
    return {(f, int(seed), m, t)
            for f, seed, m, t in done_keys(path, ("family", "seed", "method", "setting"))}


# -- summaries ------------------------------------------------------------------------------------

BUDGETS = (15, 30, 60)


# Items of a setting that only act through the board: a sampler alone ignores them, so runs
# alone of the setting without them are its runs alone.
BOARD_ONLY = ("eta", "share", "group", "quorum")


def alone_setting(setting: str) -> str:
    """The setting whose runs alone are ``setting``'s (``"ei,share,eta=1"`` -> ``"ei"``)."""
    items = setting.split(",")
    return ",".join([items[0]] + [i for i in items[1:] if i.partition("=")[0] not in BOARD_ONLY])


def _paired(df: Any, setting: str, budget: int) -> dict[str, Any]:
    """Per (family, seed, agent): each method's regret at ``budget`` trials."""
    at = df[df["round"] == budget]
    out = {}
    for method in METHODS:
        mine = setting
        if method.startswith("alone") and not (
                (at["method"] == method) & (at["setting"] == setting)).any():
            mine = alone_setting(setting)
        part = at[(at["method"] == method)
                  & ((at["setting"] == mine) | (method == "GPSampler"))]
        out[method] = part.set_index(["family", "seed", "agent"])["regret"]
    return out


def comparison_table(df: Any, setting: str, families: Sequence[str]) -> str:
    """Board vs alone, vs GPSampler, and a second run alone vs the first, at each budget."""
    lines = [
        "| trials | board mean (median) | alone | GPSampler | board vs alone W/T/L (p) | "
        "board vs GPSampler W/T/L (p) | mean change vs alone (worst) | harmed vs alone: "
        "joining / a 2nd run alone (p) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    part = df[df["family"].isin(families)]
    for budget in checkpoints(int(part["round"].max()), BUDGETS):
        r = _paired(part, setting, budget)
        if r["board"].empty:
            continue
        board = r["board"]

        def stat(s: Any) -> str:
            common = s.index.intersection(board.index)
            return f"{s[common].mean():.3f} ({s[common].median():.3f})" if len(common) else "-"

        vs_alone = wins_ties_losses(board, r["alone"], sign=-1.0)[1] if len(r["alone"]) else "-"
        vs_gp = wins_ties_losses(board, r["GPSampler"], sign=-1.0)[1] if len(r["GPSampler"]) else "-"
        change = harmed = "-"
        common = board.index.intersection(r["alone"].index)
        if len(common):
            d = board[common] - r["alone"][common]
            change = f"{d.mean():+.3f} ({d.max():+.3f})"
            both = common.intersection(r["alone (other seed)"].index)
            if len(both):
                join = (board[both] - r["alone"][both]) > HARM
                chance = (r["alone (other seed)"][both] - r["alone"][both]) > HARM
                more, fewer = int((join & ~chance).sum()), int((chance & ~join).sum())
                p = sign_test(more, fewer, alternative="greater")
                harmed = (f"{join.mean():.1%} / {chance.mean():.1%} (p = {p:.2f}, "
                          f"{len(both)} agents)")
        lines.append(f"| {budget} | {stat(board)} | {stat(r['alone'])} | {stat(r['GPSampler'])} "
                     f"| {vs_alone} | {vs_gp} | {change} | {harmed} |")
    return "\n".join(lines)


def versus_table(df: Any, setting: str, other: str, families: Sequence[str]) -> str:
    """The board with ``setting`` against the board with ``other``, paired by agent."""
    lines = [f"| trials | {setting} board mean (median) | {other} board mean (median) | "
             f"{setting} vs {other} W/T/L (p) |", "|---|---|---|---|"]
    part = df[df["family"].isin(families) & (df["method"] == "board")]
    for budget in checkpoints(int(part["round"].max()), BUDGETS):
        at = part[part["round"] == budget].set_index(["family", "seed", "agent"])
        mine = at[at["setting"] == setting]["regret"]
        theirs = at[at["setting"] == other]["regret"]
        common = mine.index.intersection(theirs.index)
        if not len(common):
            continue
        mine, theirs = mine[common], theirs[common]
        lines.append(f"| {budget} | {mine.mean():.3f} ({mine.median():.3f}) | "
                     f"{theirs.mean():.3f} ({theirs.median():.3f}) | "
                     f"{wins_ties_losses(mine, theirs, sign=-1.0)[1]} |")
    return "\n".join(lines)


def summarize(paths: Sequence[Path], setting: str, plot: Path | None = None,
              dev_setting: str | None = None, versus: str | None = None,
              seeds: Sequence[int] | None = None) -> str:
    """Tables per budget for ``setting`` (``dev_setting`` on the development families, if
    given: the same sampler settings may be named differently there, e.g. ``ei`` before it was
    made the default)."""
    df = _read(paths)
    if seeds is not None:
        df = df[df["seed"].isin(list(seeds))]
    out = []
    settings = {}
    for title, families, mine in (("development families", DEV, dev_setting or setting),
                                  ("held-out families", HELDOUT, setting)):
        present = [f for f in families if f in set(df["family"])]
        if not present:
            continue
        settings.update(dict.fromkeys(present, mine))
        boards = df[df["family"].isin(present) & (df["method"] == "board")
                    & (df["setting"] == mine)]
        n_seeds = boards["seed"].nunique()
        out.append(f"\n{title}, setting {mine!r}, {n_seeds} seeds: all families pooled "
                   "(paired by family, seed and agent; lower is better)")
        out.append(comparison_table(df, mine, present))
        if versus is not None and mine != versus:
            out.append(f"\n{title}: the board with {mine!r} against the board with {versus!r}")
            out.append(versus_table(df, mine, versus, present))
        for level in LEVELS:
            of_level = [f for f in present if FAMILIES[f][3] == level]
            if of_level and len(of_level) < len(present):
                out.append(f"\n{level} heterogeneity: {', '.join(of_level)}")
                out.append(comparison_table(df, mine, of_level))
        for family in present:
            out.append(f"\n{family} ({FAMILIES[family][2]} agents)")
            out.append(comparison_table(df, mine, [family]))
    if plot is not None:
        _plot(df, settings, plot)
    return "\n".join(out)


# The page's names of the settings screened.
SETTING_NAMES = {
    "ei": "EI (the default)", "ts": "Thompson sampling", "ucb,beta=1": "UCB, beta = 1",
    "ucb,beta=2": "UCB, beta = 2 (the paper's)",
    "ei,share": "EI, borrowing from every group member",
}

# The page's table: the held-out families, the agents' regret with the defaults.
HEADLINE = (("Hartmann-3, Michalewicz-5, Griewank-8 (4 agents)",
             ("hartmann3-high", "michalewicz5-low", "griewank8-high")),
            ("Powell-12 (16 agents)", ("powell12-low",)))


def _below(mine: Any, theirs: Any) -> str:
    """"W of N (p = ..)": how many of the common entries ``mine`` is lower on."""
    common = mine.index.intersection(theirs.index)
    wins, _, _, p = paired(mine[common].to_numpy(float), theirs[common].to_numpy(float), -1.0)
    return f"{wins} of {len(common)} " + ("(p < 0.001)" if p < 0.0005 else f"(p = {p:.3f})")


def headline(paths: Sequence[Path], setting: str = "ei") -> str:
    """Mean normalized regret on a board, alone and with GPSampler alone, at each budget, on the
    held-out families; the board against alone by agent and by board (the agents' mean per
    family and seed, the independent unit), and against GPSampler by agent."""
    df = _read(paths)
    lines = ["| held-out families | trials | CGPSampler on a board | the same agents tuning alone "
             "| Optuna's GPSampler alone | board below alone: agents | ... boards "
             "| board below GPSampler: agents |", "|---|---:|---:|---:|---:|---|---|---|"]
    for label, families in HEADLINE:
        part = df[df["family"].isin(families)]
        if part.empty:
            continue
        for budget in checkpoints(int(part["round"].max()), BUDGETS):
            r = _paired(part, setting, budget)
            board, alone, gp = r["board"], r["alone"], r["GPSampler"]
            by_board = [s.groupby(level=["family", "seed"]).mean() for s in (board, alone)]
            means = [f"{s.mean():.3f}" if len(s) else "-" for s in (board, alone, gp)]
            lines.append(f"| {label} | {budget} | {' | '.join(means)} | {_below(board, alone)} "
                         f"| {_below(*by_board)} | {_below(board, gp) if len(gp) else '-'} |")
    return "\n".join(lines)


def screen(paths: Sequence[Path], families: Sequence[str] | None = None,
           trials: Sequence[int] | None = None, settings: Sequence[str] | None = None,
           seeds: Sequence[int] | None = None) -> str:
    """Every setting (or ``settings``) on the development families (or ``families``): board
    and alone at each budget (or at ``trials``), over the agents that have both (of ``seeds``)."""
    df = _read(paths)
    if seeds is not None:
        df = df[df["seed"].isin(list(seeds))]
    df = df[df["family"].isin(DEV if families is None else families)]
    lines = ["| setting | trials | (family, seed) runs | board mean | board median | alone mean | "
             "board vs alone W/T/L (p) | board vs GPSampler W/T/L (p) |",
             "|---|---|---|---|---|---|---|---|"]
    for setting in settings or sorted(set(df["setting"]) - {"-"}):
        mine = df[df["setting"] == setting]
        for budget in checkpoints(int(mine["round"].max()), tuple(trials or BUDGETS)):
            r = _paired(df, setting, budget)
            common = r["board"].index.intersection(r["alone"].index)
            if not len(common):
                continue
            board, alone = r["board"][common], r["alone"][common]
            runs = len(common.droplevel("agent").unique())
            vs_alone = wins_ties_losses(board, alone, sign=-1.0)[1]
            vs_gp = (wins_ties_losses(board, r["GPSampler"], sign=-1.0)[1]
                     if len(r["GPSampler"]) else "-")
            lines.append(f"| {SETTING_NAMES.get(setting, setting)} | {budget} | {runs} | "
                         f"{board.mean():.4f} | "
                         f"{board.median():.4f} | {alone.mean():.4f} | {vs_alone} | {vs_gp} |")
    return "\n".join(lines)


def _plot(df: Any, settings: dict[str, str], path: Path) -> None:
    """Mean regret per trial, a panel per family, for the family's setting in ``settings``,
    three to a row, and the legend below them."""
    families = [f for f in FAMILIES if f in settings]
    cols = 3
    rows = -(-len(families) // cols)
    fig, axes = figure(rows + 1, cols, squeeze=False, figsize=(COLUMN_INCHES, 2.2 * rows + 0.35),
                       gridspec_kw={"height_ratios": [2.2] * rows + [0.35]})
    labels = {"board": "CGPSampler on a board", "alone": "the same agents alone",
              "GPSampler": "Optuna's GPSampler alone"}
    handles: dict[str, Any] = {}
    for ax, family in zip(axes[:-1].flat, families):
        part = df[df["family"] == family]
        setting = settings[family]
        for method, style in (("board", "-"), ("alone", "--"), ("GPSampler", ":")):
            mine = part[(part["method"] == method)
                        & ((part["setting"] == setting) | (method == "GPSampler"))]
            if mine.empty:
                continue
            curve = mine.groupby("round")["regret"].mean()
            handles[method], = ax.plot(curve.index, curve.values, style)
        ax.set_yscale("log")
        ax.set_title(f"{family}{' (held out)' if family in HELDOUT else ''}", fontsize=9)
        ax.set_xlabel("trials per agent")
    for ax in axes[:-1].flat[len(families):]:
        ax.axis("off")
    for row in axes[:-1]:
        row[0].set_ylabel("mean normalized simple regret")
    legend_row(axes, list(handles.values()), [labels[m] for m in handles], ncol=3)
    save_figure(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run")
    p.add_argument("--families", nargs="+", default=["dev"],
                   help="family names, or 'dev' / 'heldout' for those lists")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--settings", nargs="+", default=["defaults"])
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--rounds", type=int, default=60, help="trials per agent, startup included")
    p.add_argument("--light", action="store_true",
                   help="lighter acquisition optimization for the CGPSampler runs")
    p.add_argument("--out", type=Path, default=Path("cgp_defaults.csv.gz"))
    s = sub.add_parser("summarize")
    s.add_argument("csv", type=Path, nargs="+")
    s.add_argument("--setting", default="defaults")
    s.add_argument("--dev-setting", default=None,
                   help="the setting on the development families (default: --setting)")
    s.add_argument("--plot", type=Path, default=None)
    s.add_argument("--versus", default=None,
                   help="another setting whose board runs to compare the board with")
    s.add_argument("--seeds", type=int, nargs="+", default=None, help="only these seeds")
    c = sub.add_parser("screen")
    c.add_argument("csv", type=Path, nargs="+")
    c.add_argument("--families", nargs="+", default=None,
                   help="only these families (default: the development families)")
    c.add_argument("--trials", type=int, nargs="+", default=None,
                   help="only these budgets (default: 15 30 60)")
    c.add_argument("--settings", nargs="+", default=None, help="only these settings, in order")
    c.add_argument("--seeds", type=int, nargs="+", default=None, help="only these seeds")
    h = sub.add_parser("headline", help="the page's table: the held-out families")
    h.add_argument("csv", type=Path, nargs="+")
    h.add_argument("--setting", default="ei")
    args = parser.parse_args()
    if args.command == "summarize":
        print(summarize(args.csv, args.setting, args.plot, args.dev_setting, args.versus,
                        args.seeds))
        return
    if args.command == "screen":
        print(screen(args.csv, args.families, args.trials, args.settings, args.seeds))
        return
    if args.command == "headline":
        print(headline(args.csv, args.setting))
        return
    families: list[str] = []
    for name in args.families:
        families += {"dev": DEV, "heldout": HELDOUT}.get(name, [name])
    for family in families:
        if family not in FAMILIES:
            raise SystemExit(f"--families must name families of {list(FAMILIES)} or dev / "
                             f"heldout, but got {family!r}")
    for setting in args.settings:
        parse_setting(setting)
    done = done_runs(args.out)
    for seed in args.seeds:
        for family in families:
            for method in args.methods:
                for setting in (["-"] if method == "GPSampler" else args.settings):
                    if (family, seed, method, setting) in done:
                        continue
                    if method.startswith("alone") and alone_setting(setting) != setting:
                        continue  # the same sampler as alone_setting(setting)'s runs alone
                    t0 = time.perf_counter()
                    rows = run(family, seed, method, setting, args.rounds, light=args.light)
                    append_rows(args.out, rows, FIELDS)
                    done.add((family, seed, method, setting))
                    last = [float(r["regret"]) for r in rows if r["round"] == args.rounds]
                    print(f"{family} seed {seed} {method} {setting}: regret "
                          f"{np.mean(last):.4f} ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
