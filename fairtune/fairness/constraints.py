"""Fairness limits ("demographic_parity<=0.05") and how they become Optuna 5 constraints.

A :class:`FairnessLimit` is a metric of :mod:`fairtune.fairness.metrics` and a bound. Differences
(DSP, DEO, DFP, equalized odds) are bounded from above, ``metric <= bound``; the disparate impact
ratio is bounded from below, ``metric >= bound``. :func:`set_fairness_constraints` turns each
limit into an Optuna named constraint whose value is ``metric - bound`` (or ``bound - metric``),
so the trial is feasible exactly when every limit holds, and Optuna 5's ``study.best_trial``
returns the best fair trial.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Union

from fairtune.fairness.metrics import METRICS, get_metric

if TYPE_CHECKING:
    import optuna

__all__ = [
    "USER_ATTR_PREFIX",
    "FairnessLimit",
    "LimitsLike",
    "fairness_values",
    "is_feasible",
    "parse_limits",
    "set_fairness_constraints",
]

USER_ATTR_PREFIX = "fairtune:"

_LIMIT_PATTERN = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_\- ]*?)\s*(<=|>=)\s*(\S+)\s*$")
_MSG_MALFORMED = (
    "`limits` must be strings like 'demographic_parity<=0.05' or 'disparate_impact>=0.8' "
    "(metric, '<=' or '>=', number), but got {text!r}."
)
_MSG_SENSE = (
    "`limits`: {metric} is {kind}, so its limit must be written '{metric}{op}bound', "
    "but got {text!r}."
)
_MSG_NEGATIVE = "`bound` must be a non-negative finite number, but got bound={bound!r} for {metric}."
_MSG_RATIO = "`bound` of {metric} must be in [0, 1], but got bound={bound!r}."


@dataclass(frozen=True)
class FairnessLimit:
    """A fairness metric and the bound it must respect.

    Args:
        metric: A metric name or alias of :data:`fairtune.fairness.METRICS`
            (``"demographic_parity"``/``"dsp"``, ``"equal_opportunity"``/``"deo"``,
            ``"false_positive_rate"``/``"dfp"``, ``"equalized_odds"``, ``"disparate_impact"``);
            stored as the canonical name.
        bound: Upper bound for differences, lower bound for the disparate impact ratio.

    Example:
        >>> FairnessLimit.parse("dsp <= 0.05")
        FairnessLimit(metric='demographic_parity', bound=0.05)
        >>> FairnessLimit(metric="di", bound=0.8).sense
        'lower'
    """

    metric: str
    bound: float

    def __post_init__(self) -> None:
        spec = get_metric(self.metric)
        object.__setattr__(self, "metric", spec.name)
        try:
            bound = float(self.bound)
        except (TypeError, ValueError):
            raise ValueError(_MSG_NEGATIVE.format(bound=self.bound, metric=spec.name)) from None
        if not math.isfinite(bound) or bound < 0:
            raise ValueError(_MSG_NEGATIVE.format(bound=self.bound, metric=spec.name))
        if spec.aggregate == "ratio" and bound > 1:
            raise ValueError(_MSG_RATIO.format(bound=self.bound, metric=spec.name))
        object.__setattr__(self, "bound", bound)

    @property
    def sense(self) -> Literal["upper", "lower"]:
        """``"upper"`` if the metric must stay at or below the bound, ``"lower"`` if above."""
        return METRICS[self.metric].sense

    @classmethod
    def parse(cls, text: str) -> FairnessLimit:
        """Parse ``"<metric><=<bound>"`` (differences) or ``"<metric>>=<bound>"`` (ratios).

        Raises:
            ValueError: On a malformed string, an unknown metric (the message lists the valid
                ones), the wrong operator for the metric, or an invalid bound.
        """
        if not isinstance(text, str):
            raise ValueError(_MSG_MALFORMED.format(text=text))
        match = _LIMIT_PATTERN.match(text)
        if match is None:
            raise ValueError(_MSG_MALFORMED.format(text=text))
        name, op, number = match.groups()
        try:
            bound = float(number)
        except ValueError:
            raise ValueError(_MSG_MALFORMED.format(text=text)) from None
        spec = get_metric(name)
        expected = "<=" if spec.sense == "upper" else ">="
        if op != expected:
            kind = "a difference (0 is fair)" if spec.sense == "upper" else "a ratio (1 is fair)"
            raise ValueError(_MSG_SENSE.format(metric=spec.name, kind=kind, op=expected, text=text))
        return cls(metric=spec.name, bound=bound)

    def violation(self, value: float) -> float:
        """The Optuna constraint value: <= 0 iff ``value`` respects the limit."""
        return value - self.bound if self.sense == "upper" else self.bound - value

    def __str__(self) -> str:
        return f"{self.metric}{'<=' if self.sense == 'upper' else '>='}{self.bound:g}"


LimitsLike = Union[str, FairnessLimit, Mapping[str, float], Sequence[Union[str, FairnessLimit]]]


def parse_limits(limits: LimitsLike) -> list[FairnessLimit]:
    """Normalize fairness limits given in any accepted form to a list of :class:`FairnessLimit`.

    Args:
        limits: A string (``"dsp<=0.05"``), a :class:`FairnessLimit`, a dict from metric name to
            bound (``{"demographic_parity": 0.05, "disparate_impact": 0.8}``; for the ratio the
            value is the lower bound), or a list of strings / limits.

    Raises:
        ValueError: On an empty input, malformed entries, or the same metric limited twice.
    """
    if isinstance(limits, (str, FairnessLimit)):
        items: list[FairnessLimit] = [_one(limits)]
    elif isinstance(limits, Mapping):
        items = [FairnessLimit(metric=k, bound=v) for k, v in limits.items()]
    elif isinstance(limits, Sequence):
        items = [_one(item) for item in limits]
    else:
        raise ValueError(
            "`limits` must be a string, a FairnessLimit, a dict or a list of those, but got "
            f"limits={limits!r}."
        )
    if not items:
        raise ValueError("`limits` must name at least one fairness limit, but got none.")
    seen: set[str] = set()
    for item in items:
        if item.metric in seen:
            raise ValueError(f"`limits` limits {item.metric} more than once: {limits!r}.")
        seen.add(item.metric)
    return items


def _one(item: Any) -> FairnessLimit:
    if isinstance(item, FairnessLimit):
        return item
    if isinstance(item, str):
        return FairnessLimit.parse(item)
    raise ValueError(
        f"`limits` entries must be strings or FairnessLimit objects, but got {item!r}."
    )


def set_fairness_constraints(
    trial: optuna.trial.Trial | optuna.trial.FrozenTrial,
    y_true: Any,
    y_pred: Any,
    *,
    sensitive_features: Any,
    limits: LimitsLike,
    sample_weight: Any = None,
) -> dict[str, float]:
    """Compute the limited fairness metrics and record them as Optuna 5 constraints.

    For every limit, stores the raw metric value as the user attribute
    ``"fairtune:<metric>"`` and calls ``trial.set_constraint(<metric>, value - bound)``
    (``bound - value`` for the disparate impact ratio), so that the trial is feasible iff every
    limit holds and ``study.best_trial`` is the best fair trial.

    Args:
        trial: The trial being evaluated (inside an objective) or a FrozenTrial being built.
        y_true: True 0/1 labels of the evaluation data.
        y_pred: Predicted 0/1 labels.
        sensitive_features: Group of each sample (1-d, or a DataFrame for intersectional groups).
        limits: See :func:`parse_limits`.
        sample_weight: Optional non-negative sample weights. Defaults to None.

    Returns:
        ``{metric: raw value}`` for every limited metric.

    Example:
        >>> def objective(trial):
        ...     model = make_model(trial).fit(X_train, y_train)
        ...     y_pred = model.predict(X_valid)
        ...     set_fairness_constraints(trial, y_valid, y_pred, sensitive_features=s_valid,
        ...                              limits="demographic_parity<=0.05")
        ...     return accuracy_score(y_valid, y_pred)  # doctest: +SKIP
    """
    parsed = parse_limits(limits)
    # Compute everything first, so that bad inputs leave the trial untouched.
    values = {
        limit.metric: METRICS[limit.metric].function(
            y_true, y_pred, sensitive_features=sensitive_features, sample_weight=sample_weight
        )
        for limit in parsed
    }
    for limit in parsed:
        trial.set_user_attr(USER_ATTR_PREFIX + limit.metric, values[limit.metric])
        trial.set_constraint(limit.metric, limit.violation(values[limit.metric]))
    return values


def fairness_values(trial: optuna.trial.FrozenTrial) -> dict[str, float]:
    """The raw fairness metric values stored on a trial by :func:`set_fairness_constraints`."""
    return {
        key[len(USER_ATTR_PREFIX):]: float(value)
        for key, value in trial.user_attrs.items()
        if key.startswith(USER_ATTR_PREFIX) and key[len(USER_ATTR_PREFIX):] in METRICS
    }


def is_feasible(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether every constraint of the trial is <= 0 (Optuna 5's definition).

    A trial without constraints counts as feasible, as in Optuna 5's ``study.best_trial``.
    """
    return all(value <= 0.0 for value in trial.constraints.values())
