"""Ten tenants tune one CNN together with CollaborativeUCBSampler (Sim et al. 2021, section 5)
===========================================================================================

Each tenant holds the handwriting of 10 writers and trains the CNN on it; together they tune
its learning rate, learning-rate decay and L2 regularization (each in [1e-5, 1], log scale),
each tenant scoring the configurations it is given by its own validation accuracy. The
mediator pools every result in one GP, and each round gives the most promising configuration to
the tenant with the lowest cumulative utility (rho < 1).

Data: FEMNIST files when you have them (``--data-home``: a folder holding ``femnist/`` with
TensorFlow Federated's .h5 files, LEAF's JSON shards or the flwrlabs/femnist parquet files; see
``fairtune.datasets.fetch_femnist``). Without ``--data-home`` it runs on an embedded default
that needs no download: scikit-learn's bundled digits dealt to 100 pseudo-writers. That is real
handwriting, but not split by writer (the bundle does not say who wrote what), so the tenants'
data are more alike than FEMNIST's; the script says so when it runs.

The figure shows each tenant's cumulative utility and best validation accuracy.

Run::

    python examples/femnist_tenants.py                       # embedded digits, 8 rounds
    python examples/femnist_tenants.py --rounds 15 --rho 0.2
    python examples/femnist_tenants.py --data-home ~/fairtune_data --only-digits
    python examples/femnist_tenants.py --plot tenants.png     # save the figure

Times at default settings (no thread variable set) on 2 cores: about 21 s on an idle
machine, 36 s on a busy one (two other single-threaded jobs running).
"""

from __future__ import annotations

import argparse
import time

import optuna

N_TENANTS = 10
WRITERS_PER_TENANT = 10
# The CNN and its training on each kind of data: 8 x 8 digits (about 140 training images per
# tenant) need more passes than a FEMNIST tenant (about 1,000-2,000 images of 28 x 28).
SETTINGS = {
    "digits": {"epochs": 20, "batch_size": 16, "channels": (16, 32), "hidden": 128},
    "femnist": {"epochs": 5, "batch_size": 32, "channels": (16, 32), "hidden": 256},
}


def load_tenants(data_home: str | None, only_digits: bool, seed: int) -> tuple[dict, str]:
    from fairtune.datasets import federated_digits, fetch_femnist

    if data_home is None:
        data = federated_digits(n_writers=N_TENANTS * WRITERS_PER_TENANT, seed=seed)
        print("Data: the embedded default, scikit-learn's bundled digits (1,797 images of 8 x 8)"
              " dealt at random to 100 pseudo-writers. Real handwriting, but NOT split by "
              "writer: pass --data-home with FEMNIST files for the real experiment.")
        kind = "digits"
    else:
        data = fetch_femnist(data_home=data_home, only_digits=only_digits)
        print(f"Data: {data.DESCR}")
        kind = "femnist"
    tenants = data.partition(n_tenants=N_TENANTS, writers_per_tenant=WRITERS_PER_TENANT,
                             seed=seed)
    return tenants, kind


def main(
    *,
    rounds: int = 8,
    rho: float = 0.5,
    seed: int = 0,
    data_home: str | None = None,
    only_digits: bool = False,
    epochs: int | None = None,
) -> dict:
    from fairtune.fairness import gini_inequality
    from fairtune.samplers import CollaborativeUCBSampler
    from fairtune.tenancy import cumulative_utilities, tenant_of
    from fairtune.tuning.femnist import CNNTenantObjective

    tenants, kind = load_tenants(data_home, only_digits, seed)
    settings = dict(SETTINGS[kind])
    if epochs is not None:
        settings["epochs"] = epochs
    objective = CNNTenantObjective(tenants, seed=seed, **settings)
    names = list(tenants)
    # T0 = 2 random rounds, as in the paper's CNN experiment.
    sampler = CollaborativeUCBSampler(tenants=names, rho=rho, n_startup_rounds=2, seed=seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    start = time.perf_counter()
    study.optimize(objective, n_trials=N_TENANTS * rounds)  # untagged trials: round robin
    elapsed = time.perf_counter() - start

    utilities = cumulative_utilities(study, tenants=names)
    inequality = gini_inequality(list(utilities.values()), rho)
    best = {name: max(t.value for t in study.trials if tenant_of(t) == name) for name in names}
    print(f"{len(study.trials)} trials: {N_TENANTS} tenants x {rounds} rounds, rho={rho}, "
          f"{elapsed:.0f} s ({elapsed / rounds:.1f} s per round)")
    for name in names:
        print(f"  {name:>3}: cumulative utility {utilities[name]:7.3f}, best validation "
              f"accuracy {best[name]:.3f}")
    print(f"  inequality (mean - normalized G2SF, rho={rho}): {inequality:.4f}")
    params = ", ".join(f"{k}={v:.3g}" for k, v in study.best_params.items())
    print(f"  best configuration: accuracy {study.best_value:.3f} ({params})")
    return {"utilities": utilities, "inequality": inequality, "best": best,
            "n_trials": len(study.trials), "kind": kind}


def plot(result: dict, rho: float):
    """Each tenant's cumulative utility and best validation accuracy."""
    import matplotlib.pyplot as plt

    names = list(result["utilities"])
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.bar(names, [result["utilities"][n] for n in names])
    left.set_ylabel("cumulative utility (sum of accuracies)")
    left.set_title(f"inequality {result['inequality']:.4f} (rho={rho})")
    right.bar(names, [result["best"][n] for n in names], color="C1")
    right.set_ylabel("best validation accuracy")
    right.set_ylim(0, 1)
    right.set_title(f"ten tenants' CNNs ({result['kind']})")
    for ax in (left, right):
        ax.set_xlabel("tenant")
    figure.tight_layout()
    return figure


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--rho", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-home", help="folder holding femnist/ (else: embedded digits)")
    parser.add_argument("--only-digits", action="store_true", help="FEMNIST digits only")
    parser.add_argument("--epochs", type=int, help="passes over each tenant's training images")
    parser.add_argument("--plot", metavar="PNG", help="save the figure there (else: show it)")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    result = main(rounds=args.rounds, rho=args.rho, seed=args.seed, data_home=args.data_home,
                  only_digits=args.only_digits, epochs=args.epochs)

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
