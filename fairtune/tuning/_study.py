"""Study preparation, once: what ``fairtune tune``, FairObjective and FairSearchCV do to a study
before its trials run.

1. Check the setup: the pruner against the budgets (:func:`fairtune.tuning._trial.check_pruner`),
   then the run's setup record against the stored one (:func:`fairtune.tuning._setup.check_setup`),
   storing it on the first run.
2. Give the study the pruner asked for, only once the checks passed.
3. Mark the running trials of dead workers as failed (storages with a heartbeat).
4. Enqueue the untuned configuration as the next trial unless the study already evaluated it,
   is evaluating it or waits for it: a trial of it that failed or was interrupted does not count,
   so that a resumed study still evaluates the model a practitioner gets without tuning.
5. Give the study the sampler asked for.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import optuna

__all__ = ["create_study", "enqueue_defaults", "prepare_search_study", "prepare_study"]


def enqueue_defaults(study: optuna.Study, params: Mapping[str, Any] | None) -> bool:
    """Enqueue ``params`` (step 4 of the module docstring; workers that open a new study at the
    same moment may each run it once) and return whether it was enqueued."""
    from optuna.trial import TrialState

    if params is None:
        return False
    params = dict(params)
    for trial in study.get_trials(deepcopy=False):
        if trial.state == TrialState.FAIL:
            continue
        # A waiting (enqueued) trial keeps its parameters in its "fixed_params" attribute.
        given = (trial.system_attrs.get("fixed_params") if trial.state == TrialState.WAITING
                 else trial.params)
        if given == params:
            return False
    study.enqueue_trial(params)
    return True


def prepare_study(
    study: optuna.Study,
    *,
    check: Callable[[optuna.Study, Any], None],
    defaults: Mapping[str, Any] | None,
    budgets: Sequence[float] | None,
    sampler: str | None = None,
    seed: int = 0,
    pruner: str | optuna.pruners.BasePruner | None = None,
) -> None:
    """Make ``study`` ready for an entrance's trials (see the module docstring).

    Args:
        study: The study.
        check: ``check(study, pruner)`` checks and stores the entrance's setup.
        defaults: The untuned configuration's parameters, or None to enqueue nothing.
        budgets: The entrance's budgets (None for a single-fidelity search).
        sampler: A name of :data:`fairtune.samplers.SAMPLER_NAMES`, or None to keep the
            study's sampler; seeded by ``seed`` plus the study's trial count, so that a resumed
            study continues the random stream instead of replaying it.
        seed: The sampler's seed.
        pruner: A pruner name, an Optuna pruner, or None to keep the study's pruner.
    """
    from fairtune._storage import fail_stale_trials
    from fairtune.tuning._trial import check_pruner, make_pruner

    if isinstance(pruner, str):
        check_pruner(pruner, budgets)  # a name without budgets: refused before it is built
        pruner = make_pruner(pruner, budgets or ())
    chosen = study.pruner if pruner is None else pruner
    check_pruner(chosen, budgets)
    check(study, chosen)
    study.pruner = chosen
    fail_stale_trials(study)
    enqueue_defaults(study, defaults)
    if sampler is not None:
        from fairtune.samplers import make_sampler

        # Seeded after the enqueue: the count includes the untuned trial, as it always has.
        study.sampler = make_sampler(sampler, seed=seed + len(study.trials))


def create_study(
    *,
    directions: Sequence[Literal["minimize", "maximize"]],
    storage: str | optuna.storages.BaseStorage | None = None,
    study_name: str | None = None,
) -> optuna.Study:
    """A new study, or the stored study of that name (workers started together on a new
    database race to create it: retried)."""
    import optuna

    from fairtune._storage import create_or_load_study

    return create_or_load_study(lambda: optuna.create_study(
        directions=list(directions), storage=storage, study_name=study_name,
        load_if_exists=study_name is not None,
    ))


# The arguments of FairSearchCV that choose each entry of its setup (see tuning._setup).
_ARGUMENTS = {"model": ("estimator", "param_distributions"), "validation": ("cv",),
              "metric": ("scoring",)}


def prepare_search_study(study: optuna.Study | None, *, sampler: Any, sampler_seed: int | None,
                         pruner: Any, record: dict[str, Any],
                         budgets: tuple[float, ...] | None, untuned: dict[str, Any] | None
                         ) -> Any:
    """A FairSearchCV's study (its ``study``, or a new one with its ``sampler``, by default
    FairBOSampler seeded by ``sampler_seed``), prepared by :func:`prepare_study`."""
    import optuna
    from optuna.study import StudyDirection

    from fairtune.tuning._setup import SetupError, check_setup, describe_pruner

    if study is None:
        if sampler is None:
            from fairtune.samplers import FairBOSampler

            sampler = FairBOSampler(seed=sampler_seed)
        else:
            sampler = copy.deepcopy(sampler)
        study = optuna.create_study(direction="maximize", sampler=sampler,
                                    pruner=optuna.pruners.NopPruner())
    elif len(study.directions) != 1 or study.direction != StudyDirection.MAXIMIZE:
        raise ValueError(
            "`study` must maximize one value (the search maximizes `scoring`), but got "
            f"directions={[d.name.lower() for d in study.directions]}; create it with "
            "direction='maximize'."
        )

    def check(study: Any, pruner: Any) -> None:
        try:
            check_setup(study, {**record, "pruner": describe_pruner(pruner)},
                        arguments=_ARGUMENTS)
        except SetupError as error:
            if not error.data_only:
                raise
            raise ValueError(f"{error} A clone of the search (scikit-learn's clone, "
                             "cross_validate) shares a database study: give each fit a "
                             "study of its own, or study=None.") from None

    prepare_study(study, check=check, defaults=untuned, budgets=budgets, pruner=pruner)
    return study
