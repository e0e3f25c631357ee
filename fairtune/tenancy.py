"""Multi-tenant studies: tenant tags on trials, asking for a tenant, per-tenant views.

A tenant is a party (team, company, client) that evaluates some of the trials of a shared
study. Each such trial carries the user attribute :data:`TENANT_KEY`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from fairtune import _keys
from fairtune._optuna_compat import storage_and_id, study_key, suggest, trial_id
from fairtune._storage import read_trial_text, trial_text_attrs

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution

__all__ = [
    "FINISHED_KEY",
    "TENANT_KEY",
    "ask",
    "cumulative_utilities",
    "finished_at_creation",
    "optimize",
    "tenant_of",
    "trials_by_tenant",
]

TENANT_KEY = _keys.TENANT_KEY
"""Trial user attribute holding the name of the tenant that evaluates the trial."""
FINISHED_KEY = _keys.FINISHED_KEY
"""Trial system attribute written by :func:`ask` as part of the new trial: which trials of the
study had finished when it was created (read it with :func:`finished_at_creation`)."""
# (storage object id, study id) -> the tenant that this process's study.optimize serves.
_optimizing_for: dict[tuple[int, int], str] = {}
_optimizing_lock = threading.Lock()


def ask(
    study: optuna.Study,
    tenant: str,
    fixed_distributions: dict[str, BaseDistribution] | None = None,
) -> optuna.Trial:
    """Create a running trial for ``tenant``, tagged with :data:`TENANT_KEY` at creation.

    Like ``study.ask()``, but the tag is part of the new trial from its first moment in the
    storage, before any ``suggest_*`` call (Optuna samples relative parameters lazily at the
    first suggest, which is when a tenant-aware sampler reads the tag), and no other process
    ever sees the trial untagged. So is a record of which trials had finished
    (:data:`FINISHED_KEY`): the processes of a collaborative study read a round's data from the
    round's first trial, and agree on it however late a result reaches the storage. Unlike
    ``study.ask()`` it does not pop enqueued (waiting) trials: those stay for ``study.ask()`` /
    ``study.optimize``.

    Args:
        study: The shared study.
        tenant: The tenant's name (non-empty).
        fixed_distributions: Parameters sampled at once, as in
            ``study.ask(fixed_distributions)``. Defaults to None.

    Example:
        .. code-block:: python

            trial = fairtune.tenancy.ask(study, "alice")
            x = trial.suggest_float("x", 0.0, 1.0)  # alice's point of the current round
            study.tell(trial, evaluate(x))
    """
    if not isinstance(tenant, str) or not tenant:
        raise ValueError(f"`tenant` must be a non-empty string, but got tenant={tenant!r}.")
    template = optuna.trial.create_trial(
        state=TrialState.RUNNING,
        user_attrs={TENANT_KEY: tenant},
        system_attrs=trial_text_attrs(FINISHED_KEY, json.dumps(_finished_now(study))),
    )
    storage, study_id = storage_and_id(study)
    trial = optuna.Trial(study, storage.create_new_trial(study_id, template_trial=template))
    for name, distribution in (fixed_distributions or {}).items():
        suggest(trial, name, distribution)
    return trial


def _finished_now(study: optuna.Study) -> list[Any]:
    """``[last, unfinished]``: every trial numbered up to ``last`` has finished, except the
    numbers in ``unfinished``."""
    # Count first: a trial created between the two reads is numbered after ``last``, and one that
    # finishes between them is finished for every later reader too.
    storage, study_id = storage_and_id(study)
    last = storage.get_n_trials(study_id) - 1
    unfinished = storage.get_all_trials(
        study_id, deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING))
    return [last, sorted(t.number for t in unfinished if t.number <= last)]


def finished_at_creation(trial: FrozenTrial) -> Callable[[FrozenTrial], bool] | None:
    """For a trial created by :func:`ask`: whether another trial of the study had finished when
    ``trial`` was created, as the storage showed it then (None for a trial created otherwise).

    Unlike a comparison of ``datetime_complete`` with ``trial.datetime_start``, this does not
    depend on when a result written just before reached the storage: every process that reads
    ``trial`` gets the same answer.
    """
    text = read_trial_text(trial.system_attrs, FINISHED_KEY)
    if text is None:
        return None
    last, unfinished = json.loads(text)
    skip = frozenset(unfinished)
    return lambda other: other.number <= last and other.number not in skip


def optimize(study: optuna.Study, tenant: str, func: Callable[[optuna.Trial], float], *,
             n_trials: int, **kwargs: Any) -> None:
    """Run ``study.optimize(func, n_trials=n_trials, **kwargs)`` for ``tenant``: every new trial
    it creates is ``tenant``'s.

    This is how a tenant's worker process gets what ``study.optimize`` gives and ``ask`` does
    not: the heartbeat of an RDB storage created with ``heartbeat_interval`` (a killed worker's
    trial then ends as FAIL instead of RUNNING forever, and stops holding its point as
    pending in the rounds of the others), ``n_jobs``, ``catch`` and callbacks. The tag is set by
    a tenant-aware sampler (:class:`~fairtune.samplers.CollaborativeUCBSampler`) when the trial
    is created, before any ``suggest_*`` call. Enqueued trials popped by ``study.optimize`` keep
    the tenant they were enqueued with.

    A run that cannot be the tenant's is refused before any trial is created, so that it
    leaves the study as it was: a ``tenant`` not among the sampler's ``tenants``, an objective
    made for another tenant, and an objective with a ``check_study`` method (a
    :class:`~fairtune.tuning.FairObjective`) whose setup differs from the one the study
    stores for ``tenant``.

    Args:
        study: The shared study; its sampler must be tenant-aware.
        tenant: The tenant's name (non-empty).
        func: The objective; one made for a tenant (a
            :class:`~fairtune.tuning.FairObjective` with ``tenant``) must be ``tenant``'s.
        n_trials: Number of trials to run.
        **kwargs: Other arguments of ``study.optimize``.

    Raises:
        ValueError: Naming ``tenant`` and the sampler's tenants, or the objective's tenant, or
            each setup argument that differs from the study's (as a resume names them).

    Example:
        .. code-block:: python

            storage = optuna.storages.RDBStorage(url, heartbeat_interval=30)
            study = optuna.load_study(study_name="shared", storage=storage, sampler=sampler)
            fairtune.tenancy.optimize(study, "alice", objective, n_trials=20)
    """
    if not isinstance(tenant, str) or not tenant:
        raise ValueError(f"`tenant` must be a non-empty string, but got tenant={tenant!r}.")
    if not hasattr(study.sampler, "tenants"):
        raise ValueError(
            "`study` must use a tenant-aware sampler (CollaborativeUCBSampler) for "
            f"tenancy.optimize, but its sampler is {type(study.sampler).__name__}.")
    scores = getattr(func, "tenant", tenant)  # an objective of one tenant's data
    if scores != tenant:
        raise ValueError(
            f"`tenant` {tenant!r} must be the tenant whose data the objective scores, but the "
            f"objective was made with tenant={scores!r}: create it with tenant={tenant!r}.")
    listed = [str(t) for t in study.sampler.tenants]
    if tenant not in listed:  # refused before a trial or a record is written
        raise ValueError(f"`tenant` must be one of the sampler's `tenants` {listed} (the tenants "
                         f"of study {study.study_name!r}), but got tenant={tenant!r}.")
    check = getattr(func, "check_study", None)
    if callable(check):  # an objective's setup against the study's, before any trial
        check(study)
    key = study_key(study)
    with _optimizing_lock:
        if key in _optimizing_for and _optimizing_for[key] != tenant:
            raise RuntimeError(
                f"This process already optimizes the study for tenant {_optimizing_for[key]!r}; "
                f"tenant {tenant!r} needs a process (or a study object of its own storage).")
        _optimizing_for[key] = tenant
    try:
        study.optimize(func, n_trials=n_trials, **kwargs)
    finally:
        with _optimizing_lock:
            _optimizing_for.pop(key, None)


def optimizing_tenant(study: optuna.Study) -> str | None:
    """The tenant that :func:`optimize` is running ``study`` for in this process, if any."""
    return _optimizing_for.get(study_key(study))


def tenant_of(trial: optuna.Trial | FrozenTrial) -> str | None:
    """The tenant a trial belongs to, or None for an untagged trial.

    For a live ``optuna.Trial`` the tag is read from the storage, so that a tenant assigned by
    the sampler at the first ``suggest_*`` call is visible inside the objective.
    """
    attrs = (trial.storage.get_trial_user_attrs(trial_id(trial))
             if isinstance(trial, optuna.Trial) else trial.user_attrs)
    value = attrs.get(TENANT_KEY)
    return None if value is None else str(value)


def trials_by_tenant(
    study: optuna.Study, states: Sequence[TrialState] | None = (TrialState.COMPLETE,)
) -> dict[str, list[FrozenTrial]]:
    """Tagged trials grouped by tenant, in trial order.

    Args:
        study: The shared study.
        states: Trial states to keep; None keeps every state. Defaults to COMPLETE only.
    """
    groups: dict[str, list[FrozenTrial]] = {}
    wanted = None if states is None else tuple(states)
    for trial in study.get_trials(deepcopy=False, states=wanted):
        tenant = tenant_of(trial)
        if tenant is not None:
            groups.setdefault(tenant, []).append(trial)
    return groups


def cumulative_utilities(
    study: optuna.Study, tenants: Sequence[str] | None = None
) -> dict[str, float]:
    """Each tenant's cumulative utility: the sum of its COMPLETE trials' values.

    A trial's utility is its value, *negated* when minimizing so that a larger utility is always
    better; failed, pruned and running trials count 0.

    Args:
        study: The shared (single-objective) study.
        tenants: The tenants to report, in this order; listed tenants without trials get 0 and
            other tenants are left out. Defaults to every tenant that has a COMPLETE trial.
    """
    sign = -1.0 if study.direction == StudyDirection.MINIMIZE else 1.0
    by_tenant = trials_by_tenant(study)
    names = by_tenant if tenants is None else dict.fromkeys(map(str, tenants))
    return {name: sum((sign * t.value for t in by_tenant.get(name, []) if t.value is not None),
                      0.0) for name in names}


def study_tenants(study: optuna.Study) -> list[str]:
    """The tenants of a study shared by tenants (``[]`` for a study of one): those its setup
    record lists, in that order, then any other tenant a trial is tagged with, in trial order."""
    from fairtune.tuning._setup import read_setup

    listed = [str(t) for t in read_setup(study).get("tenants") or []]
    tagged = (tenant_of(t) for t in study.get_trials(deepcopy=False))
    return list(dict.fromkeys([*listed, *(t for t in tagged if t is not None)]))


def check_tenant(study: optuna.Study, tenant: str | None, *, plots: bool = False) -> list[str]:
    """Fail before any work if ``tenant`` is not a tenant of ``study``, or if ``plots`` are
    asked of a study shared by tenants without one (each tenant's values are measured on its own
    data: a plot draws one tenant's trials). Returns the study's tenants
    (:func:`study_tenants`).

    Raises:
        ValueError: Naming ``tenant`` and the study's tenants.
    """
    from fairtune._names import arg, got

    tenants = study_tenants(study)
    name = study.study_name
    if tenant is not None and not tenants:
        raise ValueError(f"{arg('tenant')} must name a tenant of a study shared by tenants, but "
                         f"study {name!r} has none (got {got('tenant', tenant)}).")
    if tenant is not None and tenant not in tenants:
        raise ValueError(f"{arg('tenant')} must be one of {tenants} (the tenants of study "
                         f"{name!r}), but got {got('tenant', tenant)}.")
    if plots and tenants and tenant is None:
        raise ValueError(f"the plots of study {name!r} draw one tenant's trials (its tenants "
                         f"{tenants} score on their own data, so their values are not "
                         f"comparable): give {arg('tenant')}.")
    return tenants
