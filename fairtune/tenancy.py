"""Multi-tenant studies: tenant tags on trials, asking for a tenant, per-tenant views.

A tenant is a party (team, company, client) that evaluates some of the trials of a shared
study. Each such trial carries the user attribute :data:`TENANT_KEY`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution

__all__ = ["TENANT_KEY", "ask", "cumulative_utilities", "tenant_of", "trials_by_tenant"]

TENANT_KEY = "fairtune:tenant"


def ask(
    study: optuna.Study,
    tenant: str,
    fixed_distributions: dict[str, BaseDistribution] | None = None,
) -> optuna.Trial:
    """Create a trial for ``tenant``, tagged before any parameter is sampled.

    Optuna samples relative parameters lazily at the first ``suggest_*`` call, so a sampler
    that assigns points per tenant reads the tag then. With ``fixed_distributions`` the
    parameters are sampled at once (like ``study.ask(fixed_distributions)``).
    """
    if not isinstance(tenant, str) or not tenant:
        raise ValueError(f"`tenant` must be a non-empty string, but got tenant={tenant!r}.")
    trial = study.ask()
    trial.set_user_attr(TENANT_KEY, tenant)
    for name, distribution in (fixed_distributions or {}).items():
        trial._suggest(name, distribution)
    return trial


def tenant_of(trial: optuna.Trial | FrozenTrial) -> str | None:
    """The tenant a trial belongs to, or None for an untagged trial.

    For a live ``optuna.Trial`` the tag is read from the storage, so that a tenant assigned by
    the sampler at the first ``suggest_*`` call is visible inside the objective.
    """
    if isinstance(trial, optuna.Trial):
        value = trial.storage.get_trial_user_attrs(trial._trial_id).get(TENANT_KEY)
    else:
        value = trial.user_attrs.get(TENANT_KEY)
    return None if value is None else str(value)


def trials_by_tenant(
    study: optuna.Study, states: Sequence[TrialState] | None = (TrialState.COMPLETE,)
) -> dict[str, list[FrozenTrial]]:
    """Tagged trials grouped by tenant (in trial order); ``states=None`` keeps every state."""
    groups: dict[str, list[FrozenTrial]] = {}
    for trial in study.get_trials(deepcopy=False, states=None if states is None else tuple(states)):
        tenant = tenant_of(trial)
        if tenant is not None:
            groups.setdefault(tenant, []).append(trial)
    return groups


def cumulative_utilities(
    study: optuna.Study, tenants: Sequence[str] | None = None
) -> dict[str, float]:
    """Each tenant's cumulative utility: the sum of its COMPLETE trials' values.

    For a minimized objective the utility of a trial is the *negated* value, so that a larger
    utility is always better. Tenants listed in ``tenants`` without trials get 0.
    """
    sign = -1.0 if study.direction == StudyDirection.MINIMIZE else 1.0
    totals = {str(t): 0.0 for t in tenants} if tenants is not None else {}
    for tenant, trials in trials_by_tenant(study).items():
        if tenants is not None and tenant not in totals:
            continue
        totals[tenant] = totals.get(tenant, 0.0) + sum(sign * t.value for t in trials)
    return totals
