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

``hpo``: 5 tenants, each holding its own shard of German credit, tune a logistic regression
(C, class weight, intercept scaling) together; utility = validation accuracy on the shard.

``scale``: time of one round's joint selection for 10 tenants, 3 parameters, 200 observations,
and a round with 50 tenants.

Usage:
    OMP_NUM_THREADS=1 python benchmarks/collaborative_fair_regret.py hartmann --seeds 10 \\
        --rounds 30 --out benchmarks/results/collaborative_hartmann.csv
    OMP_NUM_THREADS=1 python benchmarks/collaborative_fair_regret.py hpo --seeds 5 --rounds 15
    OMP_NUM_THREADS=1 python benchmarks/collaborative_fair_regret.py scale
"""

from __future__ import annotations

import argparse
import csv
import math
import time
import warnings
from pathlib import Path

import numpy as np
import optuna

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


def hartmann(args: argparse.Namespace) -> None:
    rows = []
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    methods = [(f"rho={r:g}", r) for r in args.rhos] + [("independent", None)]
    for seed in range(args.seeds):
        for name, rho in methods:
            start = time.perf_counter()
            per_tenant = run_hartmann(rho, seed, args.rounds, args.startup)
            m = metrics(per_tenant, H_MAX, args.rho_eval)
            rows.append({"method": name, "seed": seed, **m,
                         "seconds": round(time.perf_counter() - start, 1)})
            print(f"seed={seed} {name}: " + ", ".join(f"{k}={v:.3f}" for k, v in m.items()),
                  flush=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    summarize(rows, args)
    if args.plot:
        plot(rows, args.plot)


def plot(rows: list[dict], path: str) -> None:
    """R_T/n and the averaged inequality against rho (mean and standard error over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    df = pd.DataFrame(rows)
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    collab = df[df["method"] != "independent"]
    rhos = [float(m.split("=")[1]) for m in collab["method"].unique()]
    for ax, col in zip(axes, ("R_T/n", "S_T", "inequality")):
        g = collab.groupby("method", sort=False)[col]
        ax.errorbar(rhos, g.mean(), yerr=g.sem(), marker="o", capsize=3, label="CollaborativeUCB")
        base = df[df["method"] == "independent"][col]
        if len(base):
            ax.axhline(base.mean(), color="gray", ls="--", label="independent GP-UCB")
        ax.set_xlabel("rho")
        ax.set_title({"inequality": "avg inequality U_t/n - g_t"}.get(col, col))
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def summarize(rows: list[dict], args: argparse.Namespace) -> None:
    import pandas as pd

    df = pd.DataFrame(rows)
    print(f"\n| method | R_T/n (mean +- se) | S_T (mean +- se) | avg inequality U_t/n - g_t "
          f"(mean +- se) | seeds |")
    print("|---|---|---|---|---:|")
    for method, g in df.groupby("method", sort=False):
        cells = []
        for col in ("R_T/n", "S_T", "inequality"):
            # One seed has no standard error: say so rather than print "nan".
            se = f"{g[col].std(ddof=1) / math.sqrt(len(g)):.3f}" if len(g) > 1 else "n/a"
            cells.append(f"{g[col].mean():.3f} +- {se}")
        print(f"| {method} | {' | '.join(cells)} | {len(g)} |")


def hpo(args: argparse.Namespace) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from fairtune.datasets import FairtuneDatasetWarning, load_german

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FairtuneDatasetWarning)
        X, y, _ = load_german(return_X_y=True)
    X = StandardScaler().fit_transform(X.select_dtypes("number").to_numpy())
    y = y.to_numpy()
    n = 5
    shards = np.array_split(np.random.RandomState(0).permutation(len(y)), n)
    data = {}
    for i, idx in enumerate(shards):
        data[f"t{i}"] = train_test_split(X[idx], y[idx], test_size=0.4, random_state=0)

    def objective(trial: optuna.Trial) -> float:
        C = trial.suggest_float("C", 1e-4, 1e2, log=True)
        intercept_scaling = trial.suggest_float("intercept_scaling", 0.1, 10, log=True)
        balanced = trial.suggest_categorical("class_weight", ["none", "balanced"]) == "balanced"
        # The tenant is assigned at the first suggest of an untagged trial.
        tenant = trial.storage.get_trial_user_attrs(trial._trial_id).get(TENANT_KEY)
        X_tr, X_va, y_tr, y_va = data[tenant]
        model = LogisticRegression(
            C=C, intercept_scaling=intercept_scaling,
            class_weight="balanced" if balanced else None, max_iter=200,
        ).fit(X_tr, y_tr)
        return float(model.score(X_va, y_va))

    rows = []
    tenants = [f"t{i}" for i in range(n)]
    for seed in range(args.seeds):
        for rho in [*args.rhos, None]:
            per_tenant: dict[str, list[float]] = {t: [] for t in tenants}
            if rho is not None:
                sampler = CollaborativeUCBSampler(tenants=tenants, rho=rho,
                                                  n_startup_rounds=args.startup, seed=seed)
                study = optuna.create_study(direction="maximize", sampler=sampler)
                study.optimize(objective, n_trials=n * args.rounds)
                trials = study.trials
            else:  # each tenant alone on its shard: GP-UCB without pooling
                trials = []
                for i, tenant in enumerate(tenants):
                    sampler = CollaborativeUCBSampler(tenants=[tenant], rho=1.0,
                                                      n_startup_rounds=args.startup,
                                                      seed=seed * 100 + i)
                    study = optuna.create_study(direction="maximize", sampler=sampler)
                    study.optimize(objective, n_trials=args.rounds)
                    trials += study.trials
            for t in trials:
                per_tenant[t.user_attrs[TENANT_KEY]].append(t.value)
            cumulative = np.array([np.sum(per_tenant[t]) for t in tenants])
            rows.append({
                "method": "independent" if rho is None else f"rho={rho:g}", "seed": seed,
                "mean utility": cumulative.mean() / args.rounds,
                "worst tenant": cumulative.min() / args.rounds,
                "inequality": cumulative.mean() - generalized_gini(cumulative, args.rho_eval),
            })
            print(f"seed={seed} {rows[-1]['method']}: " + ", ".join(
                f"{k}={v:.4f}" for k, v in rows[-1].items() if k not in ("method", "seed")),
                flush=True)
    import pandas as pd

    df = pd.DataFrame(rows)
    print("\n| method | mean accuracy per round (avg over tenants) | worst tenant's mean accuracy |"
          " inequality of cumulative utilities (rho_eval) | seeds |")
    print("|---|---:|---:|---:|---:|")
    for method, g in df.groupby("method", sort=False):
        print(f"| {method} | {g['mean utility'].mean():.4f} | {g['worst tenant'].mean():.4f} | "
              f"{g['inequality'].mean():.4f} | {len(g)} |")


def scale(args: argparse.Namespace) -> None:
    from optuna.distributions import FloatDistribution

    space = {f"x{i}": FloatDistribution(0.0, 1.0) for i in range(3)}
    for n_tenants, n_obs in ((10, 200), (50, 200)):
        tenants = [f"t{i}" for i in range(n_tenants)]
        sampler = CollaborativeUCBSampler(tenants=tenants, n_startup_rounds=0, seed=0)
        study = optuna.create_study(direction="maximize", sampler=sampler)
        rng = np.random.RandomState(0)
        for i in range(n_obs):
            params = {k: float(rng.rand()) for k in space}
            study.add_trial(optuna.trial.create_trial(
                params=params, distributions=space, value=float(-np.sum((np.array(list(params.values())) - 0.4) ** 2)),
                user_attrs={TENANT_KEY: tenants[i % n_tenants]},
            ))
        start = time.perf_counter()
        trial = study.ask(space)  # the first ask of a new round computes the whole round's plan
        elapsed = time.perf_counter() - start
        study.tell(trial, 0.0)
        print(f"| {n_tenants} tenants | 3 parameters | {n_obs} observations | joint selection "
              f"of one round: {elapsed:.2f} s |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", choices=["hartmann", "hpo", "scale"])
    parser.add_argument("--rhos", type=float, nargs="+", default=[0.2, 0.4, 0.6, 0.8, 1.0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--startup", type=int, default=10)
    parser.add_argument("--rho-eval", type=float, default=0.5)
    parser.add_argument("--out", default="benchmarks/results/collaborative_hartmann.csv")
    parser.add_argument("--plot", help="hartmann: also save a figure to this path")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    {"hartmann": hartmann, "hpo": hpo, "scale": scale}[args.case](args)


if __name__ == "__main__":
    main()
