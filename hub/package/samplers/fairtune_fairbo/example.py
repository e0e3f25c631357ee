"""FairBOSampler on a problem whose better half breaks a limit."""

from pathlib import Path

import optuna
import optunahub

# From a checkout (this file beside the package's __init__.py), the package itself;
# copied on its own, the package published in the OptunaHub registry.
_here = Path(__file__).resolve().parent
if (_here / "__init__.py").exists():
    module = optunahub.load_local_module(package="samplers/fairtune_fairbo",
                                         registry_root=str(_here.parents[1]))
else:
    module = optunahub.load_module(package="samplers/fairtune_fairbo")


def objective(trial: optuna.Trial) -> float:
    x = trial.suggest_float("x", 0.0, 1.0)
    y = trial.suggest_float("y", 0.0, 1.0)
    # A limit the most accurate configurations break: feasible iff x + y <= 1.
    trial.set_constraint("gap", x + y - 1.0)
    return x + 0.5 * y


study = optuna.create_study(direction="maximize", sampler=module.FairBOSampler(seed=0))
study.optimize(objective, n_trials=20)
print(study.best_trial.params, study.best_trial.value)  # the best feasible trial
