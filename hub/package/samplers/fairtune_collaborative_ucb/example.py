"""Three tenants share one study with CollaborativeUCBSampler."""

from pathlib import Path

import optuna
import optunahub

from fairtune.tenancy import ask, cumulative_utilities

# From a checkout (this file beside the package's __init__.py), the package itself;
# copied on its own, the package published in the OptunaHub registry.
_here = Path(__file__).resolve().parent
if (_here / "__init__.py").exists():
    module = optunahub.load_local_module(package="samplers/fairtune_collaborative_ucb",
                                         registry_root=str(_here.parents[1]))
else:
    module = optunahub.load_module(package="samplers/fairtune_collaborative_ucb")

tenants = ["alpha", "beta", "gamma"]
sampler = module.CollaborativeUCBSampler(tenants=tenants, rho=0.5, seed=0)
study = optuna.create_study(direction="maximize", sampler=sampler)
for _ in range(4):  # four rounds; in real use each tenant runs in its own process
    for tenant in tenants:
        trial = ask(study, tenant)  # a trial tagged for this tenant
        x = trial.suggest_float("x", 0.0, 1.0)
        study.tell(trial, -((x - 0.3) ** 2))
print(cumulative_utilities(study, tenants))
