"""Fair regret of CollaborativeUCBSampler (Sim et al. 2021) for several rho, vs. no collaboration.

``hartmann``: n = 3 tenants maximize the negated Hartmann-6d function (maximum 3.32237) from
noisy observations (noise sd 0.1). For every rho in ``--rhos`` and seed, one shared study runs
``--rounds`` rounds (the first ``--startup`` random). The baseline "independent" gives each
tenant its own study and its own GP-UCB (the same sampler with a single tenant): no pooling.
Reported, from the noiseless values of the evaluated points:

* R_T / n: average cumulative regret per tenant, T f* - mean_i u_i;
* S_T: fair cumulative regret, T f* - g_norm(u) with G2SF weights of rho_eval;
* inequality: U_t / n - g_t (mean minus normalized G2SF of the cumulative utilities),
  averaged over rounds t.
Inequality and S_T are measured with one fixed ``--rho-eval`` (default 0.5) for every method,
so that the columns compare (with the sampler's own rho, rho = 1 would score 0 by definition).

``femnist``: the CNN experiment of Sim et al. (2021, section 5): n = 10 tenants, each holding 10
writers, tune the CNN's learning rate, learning-rate decay and L2 regularization (each in
[1e-5, 1], log scale) with T0 = 2 random rounds; utility = validation accuracy. For every rho
and seed, both exploration settings run: ``fixed c1`` (c1, c2 the same for every rho) and
``varying c1`` (c1 scaled so that exploration keeps its weight relative to the G2SF term; at
rho = 1 both are the same run, done once). Without ``--data-home`` the tenants hold the embedded
stand-in (scikit-learn's digits dealt to 100 pseudo-writers, not split by writer); with it, the
FEMNIST files found there (``fairtune.datasets.fetch_femnist``). The partition into tenants is
fixed (seed 0); the seed varies the sampler. Regret is measured against perfect accuracy
(f* = 1): R_T/n = T - mean_i U_i. Rows are appended to ``--out`` and (setting, rho, seed) rows
already there are skipped, so that a long run can be done in pieces (``--seed-start``).
``femnist-timing`` times one epoch of the CNN on a FEMNIST-sized tenant (random images,
28 x 28) and one round of the embedded stand-in.

Both cases append their rows to ``--out`` and skip the runs already there; ``--summarize``
prints the tables of ``--out`` without running (``--plot`` also saves the hartmann figure).

Usage:
    OMP_NUM_THREADS=1 python -m benchmarks.collaborative_fair_regret hartmann --seeds 10 \\
        --rounds 30 --out benchmarks/results/collaborative_hartmann.csv
    OMP_NUM_THREADS=1 python -m benchmarks.collaborative_fair_regret femnist --seeds 10 \\
        --rounds 8 --rho-eval 0.2 --out benchmarks/results/collaborative_femnist.csv
    OMP_NUM_THREADS=1 python -m benchmarks.collaborative_fair_regret femnist-timing
    python -m benchmarks.collaborative_fair_regret hartmann --summarize \\
        --out benchmarks/results/collaborative_hartmann.csv --plot fig.png
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from benchmarks._common import (
    COLUMN_INCHES,
    append_rows,
    done_keys,
    figure,
    read_rows,
    save_figure,
    wins_ties_losses,
)
from fairtune.fairness.welfare import generalized_gini
from fairtune.samplers import CollaborativeUCBSampler
from fairtune.tenancy import TENANT_KEY

H_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
H_A = np.array([
    [10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
    [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14],
])
H_P = 1e-4 * np.array([
    [1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
    [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381],
])
H_MAX = 3.32237


def neg_hartmann6(x: np.ndarray) -> float:
    return float(H_ALPHA @ np.exp(-(H_A * (x - H_P) ** 2).sum(1)))


def hartmann_objective(noise_rng: np.random.RandomState, log: list):
    def objective(trial: optuna.Trial) -> float:
        x = np.array([trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(6)])
        f = neg_hartmann6(x)
        tenant = trial.storage.get_trial_user_attrs(trial._trial_id).get(TENANT_KEY)
        log.append((tenant, f))
        return f + 0.1 * noise_rng.randn()

    return objective


def metrics(per_tenant: dict[str, list[float]], optimum: float, rho_eval: float) -> dict:
    tenants = sorted(per_tenant)
    T = min(len(v) for v in per_tenant.values())
    values = np.array([per_tenant[t][:T] for t in tenants]).T  # (T, n)
    cumulative = np.cumsum(values, axis=0)  # (T, n)
    inequality = [c.mean() - generalized_gini(c, rho_eval) for c in cumulative]
    return {
        "R_T/n": T * optimum - cumulative[-1].mean(),
        "S_T": T * optimum - generalized_gini(cumulative[-1], rho_eval),
        "inequality": float(np.mean(inequality)),
        "best": float(values.max()),
    }


def run_hartmann(rho: float | None, seed: int, rounds: int, startup: int, n: int = 3) -> dict:
    noise = np.random.RandomState(seed)
    log: list = []
    objective = hartmann_objective(noise, log)
    tenants = [f"t{i}" for i in range(n)]
    if rho is not None:
        sampler = CollaborativeUCBSampler(tenants=tenants, rho=rho, n_startup_rounds=startup,
                                          seed=seed)
        study = optuna.create_study(direction="maximize", sampler=sampler)
        study.optimize(objective, n_trials=n * rounds)
    else:  # independent GP-UCB per tenant, no pooling
        for i, tenant in enumerate(tenants):
            sampler = CollaborativeUCBSampler(tenants=[tenant], rho=1.0,
                                              n_startup_rounds=startup, seed=seed * 100 + i)
            study = optuna.create_study(direction="maximize", sampler=sampler)
            study.optimize(objective, n_trials=rounds)
    per_tenant: dict[str, list[float]] = {t: [] for t in tenants}
    for tenant, f in log:
        per_tenant[tenant].append(f)
    return per_tenant


HARTMANN_FIELDS = ["method", "seed", "R_T/n", "S_T", "inequality", "best", "seconds"]
ALONE = "independent"  # the method label of the tenants tuning alone


def method_name(method: str) -> str:
    """The page's name of a result file's method label (``rho=0.5``, ``independent``)."""
    if method == ALONE:
        return "the same tenants tuning alone (a GP-UCB each)"
    return f"CollaborativeUCBSampler, rho = {method.split('=')[1]}"


def hartmann(args: argparse.Namespace) -> None:
    out = Path(args.out)
    if not args.summarize:
        done = done_keys(out, ("method", "seed"))
        methods = [(f"rho={r:g}", r) for r in args.rhos] + [(ALONE, None)]
        for seed in range(args.seeds):
            for name, rho in methods:
                if (name, str(seed)) in done:
                    continue
                start = time.perf_counter()
                per_tenant = run_hartmann(rho, seed, args.rounds, args.startup)
                m = metrics(per_tenant, H_MAX, args.rho_eval)
                append_rows(out, [{"method": name, "seed": seed, **m,
                                   "seconds": round(time.perf_counter() - start, 1)}],
                            HARTMANN_FIELDS)
                print(f"seed={seed} {name}: " + ", ".join(f"{k}={v:.3f}" for k, v in m.items()),
                      flush=True)
    rows = read_rows(out)
    summarize(rows)
    if args.plot:
        plot(rows, args.plot)


def _frame(rows: list[dict]) -> Any:
    import pandas as pd

    df = pd.DataFrame(rows)
    for col in ("R_T/n", "S_T", "inequality"):
        df[col] = df[col].astype(float)
    df["seed"] = df["seed"].astype(int)
    return df


def plot(rows: list[dict], path: str) -> None:
    """R_T/n, S_T and the averaged inequality against rho (mean and standard error over
    seeds), the tenants tuning alone as a line; the legend sits in the inequality panel's
    empty middle."""
    df = _frame(rows)
    fig, axes = figure(1, 3, figsize=(COLUMN_INCHES, 3.0))
    collab = df[df["method"] != ALONE]
    rhos = [float(m.split("=")[1]) for m in collab["method"].unique()]
    for ax, col in zip(axes, ("R_T/n", "S_T", "inequality")):
        g = collab.groupby("method", sort=False)[col]
        ax.errorbar(rhos, g.mean(), yerr=g.sem(), marker="o", capsize=3,
                    label="CollaborativeUCBSampler")
        base = df[df["method"] == ALONE][col]
        if len(base):
            ax.axhline(base.mean(), color="gray", ls="--", label="tenants tuning alone")
        ax.set_xlabel("rho")
        ax.set_title({"inequality": "avg inequality U_t/n - g_t",
                      "R_T/n": "average regret R_T/n", "S_T": "fair regret S_T"}[col])
    axes[2].legend(loc="center", fontsize=9)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path)


def _mean_se(g: Any) -> str:
    # One seed has no standard error: say so rather than print "nan".
    se = f"{g.std(ddof=1) / math.sqrt(len(g)):.3f}" if len(g) > 1 else "n/a"
    return f"{g.mean():.3f} +- {se}"


def summarize(rows: list[dict], args: argparse.Namespace | None = None) -> None:
    """The page's table: each method's regret and inequality, and the inequality against the
    tenants tuning alone seed by seed (two-sided sign test)."""
    df = _frame(rows)
    base = df[df["method"] == ALONE].set_index("seed")["inequality"]
    print("\n| method | average regret R_T/n (mean +- se) | fair regret S_T (mean +- se) | "
          "inequality U_t/n - g_t (mean +- se) | inequality vs alone: lower / tie / higher "
          "(sign test) | seeds |")
    print("|---|---|---|---|---|---:|")
    for method, g in df.groupby("method", sort=False):
        cells = [_mean_se(g[col]) for col in ("R_T/n", "S_T", "inequality")]
        versus = "-"
        if method != ALONE and len(base):
            versus = wins_ties_losses(g.set_index("seed")["inequality"], base, sign=-1.0)[1]
        print(f"| {method_name(method)} | {' | '.join(cells)} | {versus} | {len(g)} |")


FEMNIST_SETTINGS = {  # the CNN and its training, per kind of data (as examples/femnist_tenants.py)
    "digits": {"epochs": 20, "batch_size": 16, "channels": (16, 32), "hidden": 128},
    "femnist": {"epochs": 5, "batch_size": 32, "channels": (16, 32), "hidden": 256},
}


def femnist_tenants(data_home: str | None, only_digits: bool) -> tuple[dict, str]:
    from fairtune.datasets import federated_digits, fetch_femnist

    if data_home is None:
        data, kind = federated_digits(n_writers=100, seed=0), "digits"
    else:
        data, kind = fetch_femnist(data_home=data_home, only_digits=only_digits), "femnist"
    return data.partition(n_tenants=10, writers_per_tenant=10, seed=0), kind


def run_femnist(tenants: dict, kind: str, rho: float, vary_c1: bool, seed: int, rounds: int,
                startup: int, epochs: int | None = None) -> tuple[dict[str, list[float]], float]:
    """One collaborative study; returns each tenant's accuracies in round order and the
    seconds spent training CNNs."""
    from fairtune.tenancy import tenant_of
    from fairtune.tuning.femnist import CNN_PARAMS, CNNTenantObjective

    settings = dict(FEMNIST_SETTINGS[kind])
    if epochs is not None:
        settings["epochs"] = epochs
    objective = CNNTenantObjective(tenants, seed=0, **settings)
    cnn_seconds = [0.0]

    def timed(trial: optuna.Trial) -> float:
        # The sampler plans the round at the first suggest: suggest first, then time the CNN
        # alone (the objective's own suggests return the same values).
        for name, (low, high) in CNN_PARAMS.items():
            trial.suggest_float(name, low, high, log=True)
        start = time.perf_counter()
        value = objective(trial)
        cnn_seconds[0] += time.perf_counter() - start
        return value

    names = list(tenants)
    sampler = CollaborativeUCBSampler(tenants=names, rho=rho, vary_c1=vary_c1,
                                      n_startup_rounds=startup, seed=seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(timed, n_trials=len(names) * rounds)
    per_tenant: dict[str, list[float]] = {t: [] for t in names}
    for trial in sorted(study.trials, key=lambda t: t.number):
        per_tenant[tenant_of(trial)].append(float(trial.value))
    return per_tenant, cnn_seconds[0]


def femnist(args: argparse.Namespace) -> None:
    out = Path(args.out)
    if args.summarize:
        summarize_femnist(read_rows(out), args)
        return
    tenants, kind = femnist_tenants(args.data_home, args.only_digits)
    done = done_keys(out, ("setting", "rho", "seed"))
    fields = ["data", "setting", "rho", "seed", "rounds", "R_T/n", "S_T", "inequality", "best",
              "seconds", "cnn_seconds"]
    for seed in range(args.seed_start, args.seed_start + args.seeds):
        for rho in args.rhos:
            # At rho = 1 the c1 scaling is 1: one run serves both settings.
            settings = ["fixed c1", "varying c1"] if rho < 1 else ["both"]
            for setting in settings:
                if (setting, f"{rho:g}", str(seed)) in done:
                    continue
                start = time.perf_counter()
                per_tenant, cnn = run_femnist(tenants, kind, rho, setting == "varying c1", seed,
                                              args.rounds, args.startup, args.epochs)
                m = metrics(per_tenant, 1.0, args.rho_eval)
                row = {"data": kind, "setting": setting, "rho": f"{rho:g}", "seed": seed,
                       "rounds": args.rounds, **{k: round(v, 6) for k, v in m.items()},
                       "seconds": round(time.perf_counter() - start, 1),
                       "cnn_seconds": round(cnn, 1)}
                append_rows(out, [row], fields)
                print(f"seed={seed} rho={rho:g} {setting}: " + ", ".join(
                    f"{k}={v:.3f}" for k, v in m.items()) + f", {row['seconds']} s", flush=True)
    summarize_femnist(read_rows(out), args)


def summarize_femnist(rows: list[dict[str, str]], args: argparse.Namespace | None = None
                      ) -> None:
    """One row per rho: the average regret and the inequality with c1 fixed and with c1
    varying with rho, the inequality against rho = 1 seed by seed (two-sided sign test)."""
    import pandas as pd

    if not rows:
        print("no rows")
        return
    df = pd.DataFrame(rows)
    for col in ("R_T/n", "S_T", "inequality", "seconds", "cnn_seconds", "rounds"):
        df[col] = df[col].astype(float)
    # The rho = 1 run belongs to both settings.
    both = df[df["setting"] == "both"]
    df = pd.concat([df[df["setting"] != "both"], both.assign(setting="fixed c1"),
                    both.assign(setting="varying c1")])
    settings = ("fixed c1", "varying c1")
    print("\n| rho | " + " | ".join(
        f"{s}: average regret R_T/n | {s}: inequality (lower / tie / higher than at rho = 1)"
        for s in settings) + " | seeds |")
    print("|---:|" + "---|---|" * len(settings) + "---:|")
    for rho in sorted(df["rho"].unique(), key=lambda r: -float(r)):
        cells = []
        for setting in settings:
            part = df[df["setting"] == setting]
            g = part[part["rho"] == rho]
            base = part[part["rho"] == "1"].set_index("seed")["inequality"]
            paired = "" if rho == "1" or not len(base) else " (" + wins_ties_losses(
                g.set_index("seed")["inequality"], base, sign=-1.0)[1] + ")"
            cells += [f"{g['R_T/n'].mean():.2f}", f"{g['inequality'].mean():.3f}{paired}"]
        print(f"| {rho} | {' | '.join(cells)} | {g['seed'].nunique()} |")
    runs = df.drop_duplicates(["setting", "rho", "seed"])
    print(f"\ndata: {', '.join(sorted(df['data'].unique()))}; seconds per round, all included "
          f"(mean): {(runs['seconds'] / runs['rounds']).mean():.2f}, of which training the "
          f"CNNs: {runs['cnn_seconds'].sum() / runs['seconds'].sum():.0%}")


def femnist_timing(args: argparse.Namespace) -> None:
    """Seconds per CNN trial on a FEMNIST-sized tenant, and per round of the embedded default."""
    import numpy as np

    from fairtune.tuning.femnist import CNNClassifier

    rng = np.random.RandomState(0)
    # A FEMNIST tenant: 10 writers x ~226 images (LEAF's mean), 80 % for training.
    X = rng.rand(1800, 28, 28).astype(np.float32)
    y = rng.randint(0, 62, 1800)
    print("| CNN (channels, channels, dense) | training images (28 x 28) | seconds per epoch | "
          "seconds per trial (5 epochs) |")
    print("|---|---:|---:|---:|")
    for label, channels, hidden in (("LEAF (32, 64, 2048)", (32, 64), 2048),
                                    ("smaller (16, 32, 256)", (16, 32), 256)):
        model = CNNClassifier(learning_rate=0.05, epochs=1, channels=channels, hidden=hidden,
                              n_classes=62)
        start = time.perf_counter()
        model.fit(X, y)
        one = time.perf_counter() - start
        print(f"| {label} | 1,800 | {one:.2f} | {5 * one:.1f} |", flush=True)
    tenants, kind = femnist_tenants(None, False)
    start = time.perf_counter()
    _, cnn = run_femnist(tenants, kind, 0.5, True, 0, args.rounds, args.startup, args.epochs)
    total = time.perf_counter() - start
    print(f"\nembedded digits, 10 tenants, {args.rounds} rounds (first {args.startup} random): "
          f"CNN {cnn / (10 * args.rounds):.3f} s per trial, {total / args.rounds:.2f} s per "
          f"round ({(total - cnn) / args.rounds:.2f} s of it the sampler)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=["hartmann", "femnist", "femnist-timing"])
    parser.add_argument("--rhos", type=float, nargs="+", default=[0.2, 0.4, 0.6, 0.8, 1.0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--startup", type=int, default=None,
                        help="random rounds first (default 10; 2 for femnist, the paper's T0)")
    parser.add_argument("--rho-eval", type=float, default=0.5)
    parser.add_argument("--out", default="benchmarks/results/collaborative_hartmann.csv")
    parser.add_argument("--plot", help="hartmann: also save a figure to this path")
    parser.add_argument("--seed-start", type=int, default=0, help="femnist: first seed")
    parser.add_argument("--data-home", help="femnist: folder holding femnist/ (FEMNIST files)")
    parser.add_argument("--only-digits", action="store_true", help="femnist: digits only")
    parser.add_argument("--epochs", type=int,
                        help="femnist: CNN epochs (default 20 on the digits, 5 on FEMNIST)")
    parser.add_argument("--summarize", action="store_true",
                        help="print the tables of --out without running")
    args = parser.parse_args()
    if args.startup is None:
        args.startup = 2 if args.case.startswith("femnist") else 10
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    cases = {"hartmann": hartmann, "femnist": femnist, "femnist-timing": femnist_timing}
    cases[args.case](args)


if __name__ == "__main__":
    main()
