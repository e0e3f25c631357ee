"""FairObjective's argument checks: each argument refused at once, naming it and what was given."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from fairtune._names import arg, check_choice, check_fraction, got
from fairtune.fairness.constraints import LimitsLike
from fairtune.tuning._trial import METRIC_NAMES
from fairtune.tuning.mitigation import MITIGATIONS, parse_mitigation
from fairtune.tuning.spaces import Space, get_space

if TYPE_CHECKING:
    import optuna

__all__ = ["check_budgets_objectives", "check_complete_rows", "check_metric_scores",
           "check_resource", "check_validation", "checked_mitigation", "checked_tenant",
           "chosen_trial", "completed_trial", "parse_objectives", "space_of"]


def check_validation(
    metric: Any, validation_size: Any, test_size: Any, cv: Any
) -> None:
    """The metric and the validation options, or a ValueError naming the bad one."""
    check_choice("metric", metric, METRIC_NAMES)
    for name, fraction in (("validation_size", validation_size), ("test_size", test_size)):
        if fraction is not None:
            check_fraction(name, fraction)
    if cv is not None:
        if isinstance(cv, bool) or not isinstance(cv, (int, np.integer)) or cv < 2:
            raise ValueError(
                f"{arg('cv')} must be None or an integer >= 2, but got {got('cv', cv)}."
            )
        if validation_size is not None:
            raise ValueError(
                f"{arg('validation_size')} and {arg('cv')} cannot be combined: cross-validation "
                f"uses every tuning row for validation, but got "
                f"{got('validation_size', validation_size)} and {got('cv', cv)}."
            )


def space_of(model: Any) -> Space:
    if isinstance(model, str):
        return get_space(model)
    if callable(model):
        return Space(getattr(model, "__name__", "custom"), model, needs_scaling=True)
    raise ValueError(
        f"{arg('model')} must be a space name or a callable trial -> estimator, but got {model!r}."
    )


def checked_mitigation(mitigation: Any, limits: list[Any], metric: str, *,
                       use_sensitive_feature: bool = True) -> list[str]:
    """The mitigation names (``"auto"``: every one that applies), which need a limit to aim
    at, labels, not scores, and for ``correlation_remover`` the sensitive columns among the
    model's inputs."""
    if mitigation == "auto":
        mitigation = [m for m in MITIGATIONS
                      if use_sensitive_feature or m != "correlation_remover"]
    names = parse_mitigation(mitigation)
    if "correlation_remover" in names and not use_sensitive_feature:
        raise ValueError(
            f"{arg('mitigation')} 'correlation_remover' decorrelates the model's inputs from the "
            f"sensitive columns, which {got('use_sensitive_feature', False)} removes from them, "
            f"but got {got('mitigation', mitigation)} and {got('use_sensitive_feature', False)}."
        )
    if names and not limits:
        raise ValueError(
            f"{arg('mitigation')} aims at a fairness limit, so {arg('limits')} must be given with "
            f"it, but got {got('limits', None)} and {got('mitigation', mitigation)}."
        )
    check_metric_scores(names, mitigation, "metric", metric)
    return names


def check_metric_scores(names: Sequence[str], mitigation: Any, argument: str, metric: str
                        ) -> None:
    """Refuse 'roc_auc' (the caller's ``argument``) with a mitigation of ``names`` that
    predicts randomized labels, not scores."""
    randomized = [m for m in names if m in ("threshold", "reduction")]
    if randomized and metric == "roc_auc":
        raise ValueError(
            f"{arg('mitigation')} {randomized[0]!r} predicts randomized labels, not scores: "
            f"{arg(argument)} must not be 'roc_auc' with it, but got {got(argument, 'roc_auc')} "
            f"and {got('mitigation', mitigation)}."
        )


def completed_trial(
    study: optuna.Study, trial: int | optuna.trial.FrozenTrial
) -> optuna.trial.FrozenTrial:
    """The completed trial of ``study`` that ``trial`` (a number or a trial) names."""
    from optuna.trial import FrozenTrial, TrialState

    number = trial.number if isinstance(trial, FrozenTrial) else trial
    if isinstance(number, (int, np.integer)) and not isinstance(number, bool):
        trials = study.get_trials(deepcopy=False)
        if 0 <= number < len(trials) and trials[number].state == TrialState.COMPLETE:
            return trials[number]
    raise ValueError(
        "`trial` must be the number of a completed trial of `study` (or that trial), but got "
        f"trial={number!r}."
    )


def parse_objectives(
    objectives: Sequence[str] | None, limits: LimitsLike | None
) -> tuple[list[str], list[Literal["minimize", "maximize"]]]:
    """Canonical objective names and their study directions (empty for the single form)."""
    from fairtune.fairness import METRICS, get_metric

    if objectives is None:
        if limits is None:
            raise ValueError(
                f"{arg('limits')} must be given for a single-objective FairObjective (or "
                f"{arg('objectives')} for a multi-objective one), but got {got('limits', None)}."
            )
        return [], []
    if isinstance(objectives, str) or not (
        isinstance(objectives, Sequence) and all(isinstance(o, str) for o in objectives)
    ) or len(objectives) < 2:
        raise ValueError(
            f"{arg('objectives')} must be a list of two or more metric names, e.g. "
            f"['accuracy', 'demographic_parity'], but got {got('objectives', objectives)}."
        )
    names: list[str] = []
    for name in objectives:
        key = name.strip().lower()
        if key in METRIC_NAMES:
            names.append(key)
            continue
        try:
            names.append(get_metric(name).name)
        except ValueError:
            raise ValueError(
                f"{arg('objectives')} must name performance metrics {list(METRIC_NAMES)} or "
                f"fairness metrics {sorted(METRICS)} (or their aliases), but got {name!r} in "
                f"{got('objectives', list(objectives))}."
            ) from None
    if len(set(names)) != len(names) or sum(n in METRIC_NAMES for n in names) > 1:
        raise ValueError(
            f"{arg('objectives')} must name each metric once and at most one of "
            f"{list(METRIC_NAMES)}, but got {got('objectives', list(objectives))}."
        )
    directions: list[Literal["minimize", "maximize"]] = [
        "maximize" if n in METRIC_NAMES or METRICS[n].sense == "lower" else "minimize"
        for n in names
    ]
    return names, directions


def chosen_trial(study: optuna.Study, trial: Any, *, tenant: str | None,
                 limits: Sequence[Any]) -> optuna.trial.FrozenTrial:
    """The trial to refit: ``trial`` (a number or a trial of ``study``), else the best fair
    trial (the tenant's own), or a multi-objective study's only Pareto-optimal trial."""
    from fairtune.fairness import best_fair_trial

    if trial is not None:
        return completed_trial(study, trial)
    if len(study.directions) > 1:
        front = sorted(study.best_trials, key=lambda t: t.number)
        if len(front) != 1:
            raise ValueError(
                f"`study` has {len(front)} Pareto-optimal trials "
                f"{[t.number for t in front]}: a multi-objective study has no single best "
                "trial; pass trial=<number> (one of them) to refit_best, but got trial=None."
            )
        return front[0]
    found = best_fair_trial(study, tenant=tenant)
    if found is None:
        raise ValueError(
            "`study` has no fair trial to refit: no completed trial meets "
            f"{', '.join(map(str, limits))}."
        )
    return found


def checked_tenant(tenant: Any) -> str | None:
    if tenant is not None and (not isinstance(tenant, str) or not tenant):
        raise ValueError(f"{arg('tenant')} must be a non-empty string or None, but got "
                         f"{got('tenant', tenant)}.")
    return tenant


def check_budgets_objectives(budgets: Any, objectives: Sequence[str],
                             tenant: str | None = None) -> None:
    if budgets is not None and objectives:
        raise ValueError(f"{arg('budgets')} prune single-objective studies (Optuna's pruners "
                         f"do not stop multi-objective trials), but got "
                         f"{got('objectives', list(objectives))}.")
    if budgets is not None and tenant is not None:
        raise ValueError(
            f"{arg('budgets')} let a pruner stop a trial next to the study's other trials, "
            "which other tenants score on their own data, so they must not be given with a "
            f"tenant, but got {got('budgets', list(budgets))} and {got('tenant', tenant)}.")


def check_resource(budgets: Any, resource: str, untuned: dict[str, Any] | None,
                   make_pipeline: Any) -> None:
    """Refuse a ``resource`` that the pipeline ``make_pipeline(trial)`` builds for the untuned
    model's parameters (``untuned``; None when the space names none) does not have, before any
    trial."""
    import optuna

    from fairtune.tuning._trial import scale_resource

    if budgets is not None and resource != "n_samples" and untuned is not None:
        pipeline = make_pipeline(optuna.trial.FixedTrial(untuned))
        scale_resource(pipeline, resource, budgets[0])


def check_complete_rows(space: Space, X: Any) -> None:
    """Refuse missing numeric values for a model that needs complete rows, before any trial."""
    if space.handles_missing is not False:
        return
    missing = X.select_dtypes("number").isna().sum()
    missing = {str(column): int(count) for column, count in missing.items() if count}
    if missing:
        raise ValueError(
            f"{arg('model')} {space.name!r} needs complete rows, but the columns {missing} "
            f"have missing values (of {len(X)} rows); fill or drop them first, or choose a "
            "model that handles them: 'xgboost' or 'random_forest'."
        )
