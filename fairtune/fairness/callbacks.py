"""Optuna study callbacks that follow fairness constraints as a study runs."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from optuna.study import StudyDirection
from optuna.trial import TrialState

from fairtune.fairness.constraints import fairness_values, is_feasible

if TYPE_CHECKING:
    from optuna.study import Study
    from optuna.trial import FrozenTrial

__all__ = ["FairnessCallback", "TrialRecord"]

_logger = logging.getLogger("fairtune")


@dataclass(frozen=True)
class TrialRecord:
    """What :class:`FairnessCallback` saw of one finished trial."""

    number: int
    state: TrialState
    value: float | None
    feasible: bool
    fairness: dict[str, float] = field(default_factory=dict)
    constraints: dict[str, float] = field(default_factory=dict)


class FairnessCallback:
    """Log every finished trial's fairness, track the best fair trial, stop at a target.

    Pass it to ``study.optimize(..., callbacks=[FairnessCallback(...)])``. After each finished
    trial it

    1. records the trial's fairness values (user attributes ``fairtune:<metric>`` written by
       :func:`~fairtune.fairness.set_fairness_constraints`), its constraints and feasibility
       in :attr:`history`, and logs them on the ``"fairtune"`` logger;
    2. updates :attr:`best_fair_trial`, the best COMPLETE trial whose constraints all hold
       (in the study's direction);
    3. calls ``study.stop()`` if ``target`` is set, ``stop_on_target`` is true, and a feasible
       trial reached it (``value >= target`` when maximizing, ``<=`` when minimizing).

    A trial is feasible when all its constraint values are <= 0, as in Optuna 5; a trial
    without constraints counts as feasible.

    Args:
        target: Objective value at which a fair trial is good enough. Defaults to None (never
            stop).
        metric_names: Fairness metrics to log; None logs every metric found on the trial.
            Defaults to None.
        stop_on_target: Whether reaching ``target`` stops the study. Defaults to True.
        verbose: Whether to log each trial at INFO level (else DEBUG). Defaults to True.

    Example:
        >>> callback = FairnessCallback(target=0.85)
        >>> study.optimize(objective, n_trials=100, callbacks=[callback])  # doctest: +SKIP
        >>> callback.best_fair_trial.params  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        target: float | None = None,
        metric_names: Sequence[str] | None = None,
        stop_on_target: bool = True,
        verbose: bool = True,
    ) -> None:
        if target is not None and not (isinstance(target, (int, float)) and math.isfinite(target)):
            raise ValueError(f"`target` must be a finite number or None, but got target={target!r}.")
        if isinstance(metric_names, str):
            raise ValueError(
                "`metric_names` must be a sequence of metric names, but got the string "
                f"metric_names={metric_names!r}."
            )
        self.target = None if target is None else float(target)
        self.metric_names = None if metric_names is None else list(metric_names)
        self.stop_on_target = stop_on_target
        self.verbose = verbose
        self.history: list[TrialRecord] = []
        self.best_fair_trial: FrozenTrial | None = None
        self.target_reached = False

    def __call__(self, study: Study, trial: FrozenTrial) -> None:
        if len(study.directions) > 1:
            raise ValueError(
                "`FairnessCallback` supports single-objective studies only, but the study has "
                f"{len(study.directions)} objectives."
            )
        values = fairness_values(trial)
        if self.metric_names is not None:
            values = {k: v for k, v in values.items() if k in self.metric_names}
        complete = trial.state == TrialState.COMPLETE and trial.value is not None
        feasible = complete and is_feasible(trial)
        self.history.append(
            TrialRecord(
                number=trial.number,
                state=trial.state,
                value=trial.value if complete else None,
                feasible=feasible,
                fairness=values,
                constraints=dict(trial.constraints),
            )
        )
        maximize = study.direction == StudyDirection.MAXIMIZE
        if feasible and not math.isnan(trial.value):
            best = self.best_fair_trial
            if best is None or (trial.value > best.value if maximize else trial.value < best.value):
                self.best_fair_trial = trial
        fairness_text = ", ".join(f"{k}={v:.4g}" for k, v in values.items()) or "no metrics"
        best_text = (
            "none yet"
            if self.best_fair_trial is None
            else f"{self.best_fair_trial.value:.6g} (trial {self.best_fair_trial.number})"
        )
        _logger.log(
            logging.INFO if self.verbose else logging.DEBUG,
            "Trial %d %s: value=%s, %s, %s. Best fair value: %s.",
            trial.number,
            trial.state.name,
            f"{trial.value:.6g}" if complete else "-",
            fairness_text,
            "feasible" if feasible else "infeasible",
            best_text,
        )
        if self.target is not None and feasible:
            reached = trial.value >= self.target if maximize else trial.value <= self.target
            if reached:
                self.target_reached = True
                if self.stop_on_target:
                    _logger.info(
                        "Trial %d is fair and reached the target %g: stopping the study.",
                        trial.number,
                        self.target,
                    )
                    study.stop()




