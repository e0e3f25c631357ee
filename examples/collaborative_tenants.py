"""Three tenants tune one model together, from three processes sharing one SQLite storage
======================================================================================

Each tenant (say, three teams of a bank) runs its own process. All of them evaluate the same
objective, validation accuracy of a random forest on German credit, and ask the shared study for
their next configuration with ``fairtune.tenancy.ask``. ``CollaborativeUCBSampler`` pools every
tenant's results in one GP and hands out one configuration per tenant per round, choosing the
round's configurations jointly so that the tenant with the lowest cumulative utility gets the
most promising one (rho < 1). At the end each tenant's cumulative utility and the inequality
between them are printed, and drawn in the figure.

Run::

    python examples/collaborative_tenants.py                 # 3 processes x 8 rounds
    python examples/collaborative_tenants.py --rounds 15 --rho 0.2
    python examples/collaborative_tenants.py --plot tenants.png   # save the figure

Times at default settings (no thread variable set) on 2 cores: about 9 s on an idle
machine, 16 s on a busy one (two other single-threaded jobs running).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import optuna

TENANTS = ["alpha", "beta", "gamma"]
STUDY = "shared-tuning"
# The tenants' processes run this file. (sphinx-gallery, which runs it for the documentation,
# defines no __file__ but puts the file's path in sys.argv[0].)
SCRIPT = globals().get("__file__") or sys.argv[0]


def make_sampler(rho: float, seed: int) -> optuna.samplers.BaseSampler:
    from fairtune.samplers import CollaborativeUCBSampler

    # Every process builds the same sampler: plans are computed from the shared storage.
    return CollaborativeUCBSampler(tenants=TENANTS, rho=rho, n_startup_rounds=2, seed=seed)


def objective_factory():
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import cross_val_score

    from fairtune.datasets import FairtuneDatasetWarning, load_german

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FairtuneDatasetWarning)
        X, y, _ = load_german(return_X_y=True)
    X = X.select_dtypes("number")

    def evaluate(trial: optuna.Trial) -> float:
        model = RandomForestClassifier(
            n_estimators=trial.suggest_int("n_estimators", 2, 64, log=True),
            max_depth=trial.suggest_int("max_depth", 1, 8),
            min_samples_leaf=trial.suggest_float("min_samples_leaf", 0.001, 0.1, log=True),
            random_state=0,
            n_jobs=1,
        )
        return float(cross_val_score(model, X, y, cv=3).mean())

    return evaluate


def worker(storage: str, tenant: str, rounds: int, rho: float, seed: int) -> None:
    """One tenant's process: ask for its configuration, evaluate it, report, `rounds` times."""
    from fairtune.tenancy import ask

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name=STUDY, storage=storage, sampler=make_sampler(rho, seed))
    evaluate = objective_factory()
    for _ in range(rounds):
        trial = ask(study, tenant)  # tagged before the first suggest: the sampler sees the tenant
        study.tell(trial, evaluate(trial))


def main(rounds: int = 8, rho: float = 0.5, seed: int = 0, storage: str | None = None) -> dict:
    from fairtune.fairness import gini_inequality
    from fairtune.tenancy import cumulative_utilities

    tmp = None
    if storage is None:
        tmp = tempfile.TemporaryDirectory()
        storage = f"sqlite:///{Path(tmp.name) / 'tenants.db'}"
    optuna.create_study(study_name=STUDY, storage=storage, direction="maximize",
                        load_if_exists=True)
    processes = [
        subprocess.Popen([sys.executable, SCRIPT, "--worker", tenant, "--storage", storage,
                          "--rounds", str(rounds), "--rho", str(rho), "--seed", str(seed)])
        for tenant in TENANTS
    ]
    codes = [p.wait() for p in processes]
    if any(codes):
        raise RuntimeError(f"a tenant process failed: exit codes {codes}")
    study = optuna.load_study(study_name=STUDY, storage=storage)
    utilities = cumulative_utilities(study, tenants=TENANTS)
    inequality = gini_inequality(list(utilities.values()), rho)
    print(f"{len(study.trials)} trials from {len(TENANTS)} processes, {rounds} rounds each")
    for tenant, utility in utilities.items():
        print(f"  {tenant:>6}: cumulative utility {utility:.4f}")
    print(f"  inequality (mean - normalized G2SF, rho={rho}): {inequality:.5f}")
    print(f"  best configuration: accuracy {study.best_value:.4f}, {study.best_params}")
    if tmp is not None:
        tmp.cleanup()
    return {"utilities": utilities, "inequality": inequality, "n_trials": len(study.trials)}


def plot(result: dict, rho: float):
    """Each tenant's cumulative utility (the sum of its validation accuracies)."""
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(6, 4))
    names = list(result["utilities"])
    ax.bar(names, [result["utilities"][n] for n in names], color=["C0", "C1", "C2"])
    ax.set_ylabel("cumulative utility (sum of accuracies)")
    ax.set_title(f"CollaborativeUCBSampler, rho={rho}: inequality {result['inequality']:.4f}")
    return figure


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--rho", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--storage")
    parser.add_argument("--plot", metavar="PNG", help="save the figure there (else: show it)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.storage, args.worker, args.rounds, args.rho, args.seed)
    else:
        result = main(rounds=args.rounds, rho=args.rho, seed=args.seed, storage=args.storage)
        try:
            import matplotlib.pyplot as plt
        except ImportError:  # the figure needs matplotlib: pip install "fairtune[plot]"
            print("(install matplotlib to see the tenants' utilities)")
        else:
            figure = plot(result, args.rho)
            if args.plot:
                figure.savefig(args.plot, bbox_inches="tight")
            elif plt.get_backend().lower() != "agg":  # a window, where there is a display
                plt.show()
