"""Three agents with related objectives share designs on a board."""

from pathlib import Path

import optuna
import optunahub

from fairtune.collaboration import simulate

# From a checkout (this file beside the package's __init__.py), the package itself;
# copied on its own, the package published in the OptunaHub registry.
_here = Path(__file__).resolve().parent
if (_here / "__init__.py").exists():
    module = optunahub.load_local_module(package="samplers/fairtune_cgp",
                                         registry_root=str(_here.parents[1]))
else:
    module = optunahub.load_module(package="samplers/fairtune_cgp")


def objective_for(shift: float):
    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", -1.0, 1.0)
        y = trial.suggest_float("y", -1.0, 1.0)
        return -((x - shift) ** 2 + (y + shift) ** 2)

    return objective


board = module.Board(optuna.storages.InMemoryStorage(), name="demo", seed=0)
samplers = [module.CGPSampler(board=board, agent=agent, n_startup_trials=4, seed=i)
            for i, agent in enumerate(["lab-a", "lab-b", "lab-c"])]
studies = simulate([objective_for(s) for s in (0.1, 0.15, 0.2)], samplers, n_rounds=6)
print([round(study.best_value, 3) for study in studies])
