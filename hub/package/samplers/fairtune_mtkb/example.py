"""MTKBSampler on a trade-off between accuracy and unfairness."""

from pathlib import Path

import optuna
import optunahub

# From a checkout (this file beside the package's __init__.py), the package itself;
# copied on its own, the package published in the OptunaHub registry.
_here = Path(__file__).resolve().parent
if (_here / "__init__.py").exists():
    module = optunahub.load_local_module(package="samplers/fairtune_mtkb",
                                         registry_root=str(_here.parents[1]))
else:
    module = optunahub.load_module(package="samplers/fairtune_mtkb")


def objective(trial: optuna.Trial) -> tuple[float, float]:
    x = trial.suggest_float("x", 0.0, 1.0)
    accuracy, unfairness = 0.7 + 0.2 * x, 0.3 * x**2  # more accurate, less fair
    return accuracy, unfairness


sampler = module.MTKBSampler(seed=0)
study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
study.optimize(objective, n_trials=15)
print(len(study.best_trials), sampler.task_correlation(study).round(2).tolist())
