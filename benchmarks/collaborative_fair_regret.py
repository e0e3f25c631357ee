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
already there are skipped, so that a long run can be done in pieces (``--seed-start``);
``--summarize`` prints the tables of a CSV. ``femnist-timing`` times one epoch of the CNN on a
FEMNIST-sized tenant (random images, 28 x 28) and one round of the embedded default.

Usage:
    OMP_NUM_THREADS=1 python -m benchmarks.collaborative_fair_regret hartmann --seeds 10 \\
        --rounds 30 --out benchmarks/results/collaborative_hartmann.csv
    OMP_NUM_THREADS=1 python -m benchmarks.collaborative_fair_regret hpo --seeds 5 --rounds 15
    OMP_NUM_THREADS=1 python -m benchmarks.collaborative_fair_regret scale
    OMP_NUM_THREADS=1 python -m benchmarks.collaborative_fair_regret femnist --seeds 10 \\
        --rounds 10 --rho-eval 0.2 --out benchmarks/results/collaborative_femnist.csv
    OMP_NUM_THREADS=1 python -m benchmarks.collaborative_fair_regret femnist-timing
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
    from fairtune.datasets.femnist import CNN_PARAMS, CNNTenantObjective

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
        summarize_femnist(_read_rows(out), args)
        return
    tenants, kind = femnist_tenants(args.data_home, args.only_digits)
    done = {(r["setting"], r["rho"], r["seed"]) for r in _read_rows(out)}
    out.parent.mkdir(parents=True, exist_ok=True)
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
                new = not out.exists()
                with open(out, "a", newline="") as f:
                    writer = csv.DictWriter(f, fieldnames=fields)
                    if new:
                        writer.writeheader()
                    writer.writerow(row)
                print(f"seed={seed} rho={rho:g} {setting}: " + ", ".join(
                    f"{k}={v:.3f}" for k, v in m.items()) + f", {row['seconds']} s", flush=True)
    summarize_femnist(_read_rows(out), args)


def _read_rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def summarize_femnist(rows: list[dict[str, str]], args: argparse.Namespace) -> None:
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
    from benchmarks._common import wins_ties_losses

    print(f"\n| data | c1 | rho | R_T/n (mean +- se) | S_T (mean +- se) | avg inequality "
          f"U_t/n - g_t (mean +- se) | inequality vs rho = 1: lower / tie / higher (sign test) "
          f"| seeds |")
    print("|---|---|---:|---|---|---|---|---:|")
    for (data, setting), part in df.groupby(["data", "setting"], sort=True):
        base = part[part["rho"] == "1"].set_index("seed")["inequality"]
        for rho, g in sorted(part.groupby("rho"), key=lambda kv: -float(kv[0])):
            cells = []
            for col in ("R_T/n", "S_T", "inequality"):
                # One seed has no standard error: say so rather than print "nan".
                se = f"{g[col].std(ddof=1) / math.sqrt(len(g)):.3f}" if len(g) > 1 else "n/a"
                cells.append(f"{g[col].mean():.3f} +- {se}")
            paired = "-"
            if rho != "1" and len(base):
                paired = wins_ties_losses(g.set_index("seed")["inequality"], base, sign=-1.0)[1]
            print(f"| {data} | {setting} | {rho} | {' | '.join(cells)} | {paired} | {len(g)} |")
    runs = df.drop_duplicates(["setting", "rho", "seed"]) if "seed" in df else df
    trials = runs["rounds"] * 10
    print(f"\nCNN seconds per trial (mean): {(runs['cnn_seconds'] / trials).mean():.3f}; "
          f"seconds per round, all included (mean): {(runs['seconds'] / runs['rounds']).mean():.2f}")


def femnist_timing(args: argparse.Namespace) -> None:
    """Seconds per CNN trial on a FEMNIST-sized tenant, and per round of the embedded default."""
    import numpy as np

    from fairtune.datasets.femnist import CNNClassifier

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
    parser.add_argument("case", choices=["hartmann", "hpo", "scale", "femnist",
                                         "femnist-timing"])
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
                        help="femnist: print the tables of --out without running")
    args = parser.parse_args()
    if args.startup is None:
        args.startup = 2 if args.case.startswith("femnist") else 10
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    cases = {"hartmann": hartmann, "hpo": hpo, "scale": scale, "femnist": femnist,
             "femnist-timing": femnist_timing}
    cases[args.case](args)


if __name__ == "__main__":
    main()
