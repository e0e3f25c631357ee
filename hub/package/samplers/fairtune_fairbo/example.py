"""FairBOSampler on a problem whose better half breaks a limit."""

import optuna
import optunahub

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
