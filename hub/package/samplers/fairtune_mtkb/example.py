"""MTKBSampler on a trade-off between accuracy and unfairness."""

import optuna
import optunahub

module = optunahub.load_module(package="samplers/fairtune_mtkb")


def objective(trial: optuna.Trial) -> tuple[float, float]:
    x = trial.suggest_float("x", 0.0, 1.0)
    accuracy, unfairness = 0.7 + 0.2 * x, 0.3 * x**2  # more accurate, less fair
    return accuracy, unfairness


sampler = module.MTKBSampler(seed=0)
study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
study.optimize(objective, n_trials=15)
print(len(study.best_trials), sampler.task_correlation(study).round(2).tolist())
