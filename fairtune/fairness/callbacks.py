"""Optuna study callbacks that follow fairness constraints as a study runs."""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from optuna.study import StudyDirection
from optuna.trial import TrialState

from fairtune.fairness.constraints import fairness_values, is_fair, study_limits
from fairtune.fairness.metrics import get_metric

if TYPE_CHECKING:
    from optuna.study import Study
    from optuna.trial import FrozenTrial

__all__ = ["FairnessCallback", "TrialRecord"]

_logger = logging.getLogger("fairtune")

_MSG_TARGET = "`target` must be a finite number or None, but got target={target!r}."
_MSG_METRIC_NAMES = (
    "`metric_names` must be a sequence of metric names, but got the string "
    "metric_names={names!r}; wrap it in a list."
)
_MSG_MULTI_OBJECTIVE = (
    "`FairnessCallback` supports single-objective studies only, but the study has "
    "{n} objectives."
)


@dataclass(frozen=True)
class TrialRecord:
    """What :class:`FairnessCallback` saw of one finished trial.

    Attributes:
        number: The trial number.
        state: Its final state (COMPLETE, PRUNED or FAIL).
        value: Its objective value, None unless COMPLETE.
        feasible: Whether it is fair: COMPLETE, and every limit of the study measured and met
            (:func:`~fairtune.fairness.is_fair`).
        fairness: Raw fairness metric values (user attributes ``fairtune:<metric>``),
            restricted to the callback's ``metric_names``.
        constraints: All its constraint values.
    """

    number: int
    state: TrialState
    value: float | None
    feasible: bool
    fairness: dict[str, float] = field(default_factory=dict)
    constraints: dict[str, float] = field(default_factory=dict)


def _canonical(metric_names: Sequence[str]) -> list[str]:
    try:
        return [get_metric(name).name for name in metric_names]
    except ValueError as err:
        raise ValueError(f"`metric_names` has an unknown metric: {err}") from None


class FairnessCallback:
    """Log every finished trial's fairness, track the best fair trial, stop at a target.

    Pass it to ``study.optimize(..., callbacks=[FairnessCallback(...)])``. After each finished
    trial it

    1. records the trial's fairness values (user attributes ``fairtune:<metric>`` written by
       :func:`~fairtune.fairness.set_fairness_constraints`), its constraints and feasibility
       in :attr:`history`, and logs them (by default on the ``"fairtune"`` logger);
    2. updates :attr:`best_fair_trial`, the best COMPLETE trial whose constraints all hold
       (in the study's direction);
    3. calls ``study.stop()`` if ``target`` is set, ``stop_on_target`` is true, and a feasible
       trial reached it (``value >= target`` when maximizing, ``<=`` when minimizing).

    A trial is feasible (fair) by ``fairtune report``'s rule, :func:`~fairtune.fairness.is_fair`.
    The callback only sees the trials finished by the ``study.optimize`` calls it is
    passed to (in this process): on a resumed or distributed study ``study.best_trial`` covers
    the whole study, :attr:`best_fair_trial` only those.

    Args:
        target: Objective value at which a fair trial is good enough. Defaults to None (never
            stop).
        metric_names: Fairness metrics to record and log (names or aliases, e.g.
            ``["dsp"]``); None keeps every metric found on the trial. Defaults to None.
        stop_on_target: Whether reaching ``target`` stops the study. Defaults to True.
        verbose: Whether to log each trial at INFO level (else DEBUG). Defaults to True.
        logger: Where to log. Defaults to None, the ``"fairtune"`` logger.

    Attributes:
        history: One :class:`TrialRecord` per finished trial, in order.
        best_fair_trial: The best feasible COMPLETE trial so far, or None.
        target_reached: Whether a feasible trial has reached ``target``.

    Example:
        >>> import optuna
        >>> def objective(trial):  # a stand-in: accuracy grows with x, so does unfairness
        ...     x = trial.suggest_float("x", 0.0, 1.0)
        ...     trial.set_constraint("unfairness", x - 0.6)  # fair iff x <= 0.6
        ...     return 0.7 + 0.2 * x
        >>> study = optuna.create_study(
        ...     direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
        >>> callback = FairnessCallback(target=0.8, verbose=False)
        >>> study.optimize(objective, n_trials=100, callbacks=[callback])
        >>> callback.target_reached, len(study.trials) < 100  # stopped at the first fair 0.8
        (True, True)
        >>> 0.5 <= callback.best_fair_trial.params["x"] <= 0.6
        True
    """

    def __init__(
        self,
        *,
        target: float | None = None,
        metric_names: Sequence[str] | None = None,
        stop_on_target: bool = True,
        verbose: bool = True,
        logger: logging.Logger | None = None,
    ) -> None:
        if target is not None and (isinstance(target, bool) or not isinstance(
                target, numbers.Real) or not math.isfinite(target)):
            raise ValueError(_MSG_TARGET.format(target=target))
        if isinstance(metric_names, str):
            raise ValueError(_MSG_METRIC_NAMES.format(names=metric_names))
        self.target = None if target is None else float(target)
        # Canonical names, so that aliases ("dsp") match the stored user attributes.
        self.metric_names = None if metric_names is None else _canonical(metric_names)
        self.stop_on_target = stop_on_target
        self.verbose = verbose
        self._logger = _logger if logger is None else logger
        self.history: list[TrialRecord] = []
        self.best_fair_trial: FrozenTrial | None = None
        self.target_reached = False

    def __call__(self, study: Study, trial: FrozenTrial) -> None:
        if len(study.directions) > 1:
            raise ValueError(_MSG_MULTI_OBJECTIVE.format(n=len(study.directions)))
        values = fairness_values(trial)
        if self.metric_names is not None:
            values = {k: v for k, v in values.items() if k in self.metric_names}
        complete = trial.state == TrialState.COMPLETE and trial.value is not None
        feasible = complete and is_fair(trial, study_limits(study))
        self.history.append(TrialRecord(trial.number, trial.state,
                                        trial.value if complete else None, feasible, values,
                                        dict(trial.constraints)))
        maximize = study.direction == StudyDirection.MAXIMIZE
        value = trial.value
        if feasible and value is not None and not math.isnan(value):
            best = None if self.best_fair_trial is None else self.best_fair_trial.value
            if best is None or (value > best if maximize else value < best):
                self.best_fair_trial = trial
        best_text = ("none yet" if self.best_fair_trial is None else
                     f"{self.best_fair_trial.value:.6g} (trial {self.best_fair_trial.number})")
        self._logger.log(
            logging.INFO if self.verbose else logging.DEBUG,
            "Trial %d %s: value=%s, %s, %s. Best fair value: %s.", trial.number, trial.state.name,
            f"{trial.value:.6g}" if complete else "-",
            ", ".join(f"{k}={v:.4g}" for k, v in values.items()) or "no metrics",
            "feasible" if feasible else "infeasible", best_text)
        if self.target is not None and feasible and value is not None and (
                value >= self.target if maximize else value <= self.target):
            self.target_reached = True
            if self.stop_on_target:
                self._logger.info(
                    "Trial %d is fair and reached the target %g: stopping the study.",
                    trial.number, self.target)
                study.stop()
