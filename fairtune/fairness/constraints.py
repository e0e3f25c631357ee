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
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from fairtune import _keys
from fairtune._names import arg, got
from fairtune.fairness.metrics import METRICS, MetricSpec, get_metric

if TYPE_CHECKING:
    import optuna

__all__ = [
    "FAIR_KEY",
    "LIMITS_KEY",
    "USER_ATTR_PREFIX",
    "FairnessLimit",
    "LimitsLike",
    "best_fair_trial",
    "cannot_bind",
    "fairness_values",
    "is_fair",
    "is_feasible",
    "least_unfair_trial",
    "parse_limits",
    "record_fairness_values",
    "set_fairness_constraints",
    "study_limits",
]

USER_ATTR_PREFIX = _keys.PREFIX
"""Prefix of the user attributes holding raw metric values: ``"fairtune:demographic_parity"``."""

FAIR_KEY = _keys.FAIR_KEY
"""Trial user attribute: whether every limit :func:`set_fairness_constraints` recorded holds.

The constraints are what Optuna reads; this copy of their verdict is for tools that show user
attributes but not Optuna 5's named constraints (optuna-dashboard 0.21 reads only the old list
attribute), and for ``study.trials_dataframe()``.
"""

LIMITS_KEY = _keys.LIMITS_KEY
"""Study user attribute: the study's fairness limits as strings, ``["demographic_parity<=0.05"]``.

Written by :class:`~fairtune.tuning.FairObjective` and ``fairtune tune``; read by
:func:`study_limits`.
"""

_LIMIT_PATTERN = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_\- ]*?)\s*(<=|>=)\s*(\S+)\s*$")

# Error messages (tests assert on them).
# The wording "must be strings like" is also asserted by the CLI and FairObjective tests.
_MSG_MALFORMED = (
    "{arg} must be strings like 'demographic_parity<=0.05' or 'disparate_impact>=0.8' "
    "(a metric, '<=' or '>=', a number), but got {text!r}."
)
_MSG_UNKNOWN = "{arg} names an unknown metric in {text!r}: {reason}"
_MSG_SENSE = (
    "{arg}: {metric} is {kind}, so its limit must be written '{metric}{op}bound', "
    "but got {text!r}."
)
_MSG_BOUND = "`bound` must be {rule} for {metric}, but got bound={bound!r}."
_MSG_LIMIT_BOUND = "{arg} must give {metric} a bound that is {rule}, but got {text!r}."
# {name} is how the caller names the argument (`limits`, or the command line's --limit), {given}
# the argument with its value.
_MSG_TYPE = (
    "{name} must be a string, a FairnessLimit, a dict from metric to bound, or a list of "
    "strings / FairnessLimit objects, but got {given}."
)
_MSG_ENTRY_TYPE = "{name} entries must be strings or FairnessLimit objects, but got {item!r}."
_MSG_EMPTY = "{name} must contain at least one fairness limit, but got {given}."
_MSG_DUPLICATE = "{name} must limit each metric once, but got {metric} twice in {limits!r}."
_MSG_ALREADY_SET = (
    "`trial` already has a constraint named {name!r}: Optuna keeps the first value of a "
    "constraint, so set_fairness_constraints must be called once per trial and metric."
)

_RULE_DIFFERENCE = "a non-negative finite number"
_RULE_RATIO = "a number in [0, 1] (it is a ratio)"


def _bound_problem(spec: MetricSpec, bound: Any) -> str | None:
    """The rule ``bound`` breaks for ``spec``, or None if it is a valid bound."""
    ratio = spec.aggregate == "ratio"
    valid = (isinstance(bound, (int, float, np.integer, np.floating))
             and not isinstance(bound, bool) and math.isfinite(bound)
             and 0 <= bound <= (1 if ratio else math.inf))
    return None if valid else _RULE_RATIO if ratio else _RULE_DIFFERENCE


def _limit(name: str, bound: Any, *, arg: str, text: Any, op: str | None = None
           ) -> FairnessLimit:
    """The limit ``text`` of metric ``name`` (with operator ``op``, if written) at ``bound``;
    the messages name the argument ``arg`` and quote ``text``."""
    try:
        spec = get_metric(name)
    except ValueError as err:
        raise ValueError(_MSG_UNKNOWN.format(arg=arg, text=text, reason=err)) from None
    expected = "<=" if spec.sense == "upper" else ">="
    if op not in (None, expected):
        kind = "a difference (0 is fair)" if spec.sense == "upper" else "a ratio (1 is fair)"
        raise ValueError(
            _MSG_SENSE.format(arg=arg, metric=spec.name, kind=kind, op=expected, text=text))
    rule = _bound_problem(spec, bound)
    if rule is not None:
        raise ValueError(_MSG_LIMIT_BOUND.format(arg=arg, metric=spec.name, rule=rule, text=text))
    return FairnessLimit(metric=spec.name, bound=bound)


@dataclass(frozen=True)
class FairnessLimit:
    """A fairness metric and the bound it must respect (:attr:`sense` says from which side).

    Args:
        metric: A metric name or alias of :data:`fairtune.fairness.METRICS`
            (``"demographic_parity"``/``"dsp"``, ``"equal_opportunity"``/``"deo"``,
            ``"false_positive_rate"``/``"dfp"``, ``"equalized_odds"``/``"eod"``,
            ``"disparate_impact"``/``"di"``); stored as the canonical name.
        bound: Upper bound (>= 0) for differences, lower bound in [0, 1] for the disparate
            impact ratio.

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
        rule = _bound_problem(spec, self.bound)
        if rule is not None:
            raise ValueError(_MSG_BOUND.format(rule=rule, metric=spec.name, bound=self.bound))
        object.__setattr__(self, "metric", spec.name)
        object.__setattr__(self, "bound", float(self.bound))

    @property
    def sense(self) -> Literal["upper", "lower"]:
        """``"upper"`` if the metric must stay at or below the bound, ``"lower"`` if above."""
        return METRICS[self.metric].sense

    @classmethod
    def parse(cls, text: str) -> FairnessLimit:
        """Parse ``"<metric><=<bound>"`` (differences) or ``"<metric>>=<bound>"`` (ratios).

        Spaces around the operator are allowed and metric names are matched as in
        :func:`~fairtune.fairness.get_metric` (``"DSP <= 0.05"`` works).

        Args:
            text: The limit, e.g. ``"demographic_parity<=0.05"`` or ``"disparate_impact>=0.8"``.

        Returns:
            The parsed limit.

        Raises:
            ValueError: On a malformed string, an unknown metric (the message lists the valid
                ones), the wrong operator for the metric, or an invalid bound.
        """
        return _parse(text, arg="`text`")

    def violation(self, value: float) -> float:
        """The Optuna constraint value, <= 0 exactly when ``value`` respects the limit:
        ``value - bound`` (upper) or ``bound - value`` (lower)."""
        return value - self.bound if self.sense == "upper" else self.bound - value

    def __str__(self) -> str:
        return f"{self.metric}{'<=' if self.sense == 'upper' else '>='}{self.bound:g}"


def _parse(text: Any, *, arg: str) -> FairnessLimit:
    match = _LIMIT_PATTERN.match(text) if isinstance(text, str) else None
    try:
        bound = float(match.group(3)) if match else None
    except ValueError:
        bound = None
    if match is None or bound is None:
        raise ValueError(_MSG_MALFORMED.format(arg=arg, text=text))
    return _limit(match.group(1), bound, arg=arg, text=text, op=match.group(2))


LimitsLike = str | FairnessLimit | Mapping[str, float] | Sequence[str | FairnessLimit]
"""Every form :func:`parse_limits` accepts."""


def parse_limits(limits: LimitsLike) -> list[FairnessLimit]:
    """Normalize fairness limits given in any accepted form to a list of :class:`FairnessLimit`.

    Args:
        limits: A string (``"dsp<=0.05"``), a :class:`FairnessLimit`, a dict from metric name to
            bound (``{"demographic_parity": 0.05, "disparate_impact": 0.8}``; for the ratio the
            value is its lower bound), or a list or tuple of strings and limits.

    Returns:
        The limits, in the order given, with canonical metric names.

    Raises:
        ValueError: On an empty input, malformed entries, an unknown metric (the message lists
            the valid ones), an invalid bound, or the same metric limited twice. The message
            names ``limits`` and the offending entry.
    """
    name = arg("limits")
    if isinstance(limits, FairnessLimit):
        items = [limits]
    elif isinstance(limits, str):
        items = [_parse(limits, arg=name)]
    elif isinstance(limits, Mapping):
        items = [_limit(str(m), b, arg=name, text={m: b}) for m, b in limits.items()]
    elif isinstance(limits, Sequence):
        items = []
        for item in limits:
            if not isinstance(item, (str, FairnessLimit)):
                raise ValueError(_MSG_ENTRY_TYPE.format(name=name, item=item))
            items.append(_parse(item, arg=name) if isinstance(item, str) else item)
    else:
        raise ValueError(_MSG_TYPE.format(name=name, given=got("limits", limits)))
    if not items:
        raise ValueError(_MSG_EMPTY.format(name=name, given=got("limits", limits)))
    metrics = [item.metric for item in items]
    for i, metric in enumerate(metrics):
        if metric in metrics[:i]:
            raise ValueError(_MSG_DUPLICATE.format(name=name, metric=metric, limits=limits))
    return items


def set_fairness_constraints(
    trial: optuna.trial.BaseTrial,
    y_true: Any,
    y_pred: Any,
    *,
    sensitive_features: Any,
    limits: LimitsLike,
    sample_weight: Any = None,
) -> dict[str, float]:
    """Compute the limited fairness metrics and record them as Optuna 5 constraints.

    For every limit:

    1. compute the metric with :data:`~fairtune.fairness.METRICS` (all of them first, so that
       bad input raises before the trial is touched);
    2. store the raw value as the user attribute ``"fairtune:<metric>"``;
    3. call ``trial.set_constraint(<metric>, value - bound)`` (``bound - value`` for the
       disparate impact ratio, a lower bound);
    4. store whether every limit holds as the user attribute :data:`FAIR_KEY`
       (``"fairtune:fair"``), which tools that show user attributes display.

    Optuna 5 deems a trial feasible when every constraint value is <= 0, i.e. when every limit
    holds, and ``study.best_trial`` is then the best fair trial.

    Args:
        trial: The trial being evaluated (an ``optuna.Trial`` inside an objective), a
            ``FrozenTrial`` being built before ``study.add_trial``, or any other Optuna trial
            with ``set_constraint`` and ``set_user_attr``.
        y_true: True 0/1 labels of the evaluation data, shape (n,).
        y_pred: Predicted 0/1 labels, shape (n,).
        sensitive_features: Group of each sample (1-d, or a DataFrame for intersectional
            groups).
        limits: See :func:`parse_limits`.
        sample_weight: Optional non-negative sample weights, shape (n,). Defaults to None.

    Returns:
        ``{metric: raw value}`` for every limited metric (canonical names).

    Raises:
        ValueError: On bad limits or data (see :func:`parse_limits` and the metrics), or if the
            trial already has a constraint of the same name (Optuna would silently keep the
            old value).

    Example:
        >>> def objective(trial):
        ...     model = make_model(trial).fit(X_train, y_train)
        ...     y_pred = model.predict(X_valid)
        ...     set_fairness_constraints(trial, y_valid, y_pred, sensitive_features=s_valid,
        ...                              limits="demographic_parity<=0.05")
        ...     return accuracy_score(y_valid, y_pred)
    """
    parsed = parse_limits(limits)
    values = {limit.metric: METRICS[limit.metric].function(
        y_true, y_pred, sensitive_features=sensitive_features, sample_weight=sample_weight)
        for limit in parsed}
    record_fairness_values(trial, parsed, values)
    return values


def record_fairness_values(
    trial: optuna.trial.BaseTrial, limits: Sequence[FairnessLimit], values: Mapping[str, float]
) -> None:
    """Steps 2 to 4 of :func:`set_fairness_constraints` for metric values computed elsewhere
    (``values[limit.metric]`` for every limit), e.g. the expected values of a randomized
    classifier (:func:`~fairtune.fairness.metrics.expected_metric`).

    Raises:
        ValueError: If the trial already has a constraint of the same name.
    """
    existing = trial.constraints
    for limit in limits:
        if limit.metric in existing:
            raise ValueError(_MSG_ALREADY_SET.format(name=limit.metric))
    for limit in limits:
        trial.set_user_attr(USER_ATTR_PREFIX + limit.metric, float(values[limit.metric]))
        trial.set_constraint(limit.metric, limit.violation(values[limit.metric]))
    # Every fairness constraint of the trial: those of earlier calls too.
    trial.set_user_attr(FAIR_KEY, all(
        value <= 0.0 for name, value in trial.constraints.items() if name in METRICS))


def fairness_values(trial: optuna.trial.FrozenTrial) -> dict[str, float]:
    """The raw fairness metric values stored on a trial by :func:`set_fairness_constraints`.

    Args:
        trial: A finished (or running) trial.

    Returns:
        ``{metric: value}`` read from the user attributes ``"fairtune:<metric>"`` whose metric
        is in :data:`~fairtune.fairness.METRICS` (other ``fairtune:`` keys, such as the tenant
        tag, are skipped); empty if none was set.
    """
    n = len(USER_ATTR_PREFIX)
    return {key[n:]: float(value) for key, value in trial.user_attrs.items()
            if key.startswith(USER_ATTR_PREFIX) and key[n:] in METRICS}


def is_feasible(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether every constraint value of the trial is <= 0, Optuna 5's definition.

    As ``study.best_trial`` filters trials in Optuna 5, a trial **without constraints is
    feasible** (and ``study.best_trial`` may return it), so an objective that
    limits fairness should call :func:`set_fairness_constraints` on every trial it completes.
    The trial's state is not looked at; callers that want COMPLETE trials filter for them.

    Args:
        trial: Any trial.

    Returns:
        True if no constraint value is positive.
    """
    return all(value <= 0.0 for value in trial.constraints.values())


def cannot_bind(limit: FairnessLimit) -> bool:
    """Whether no model can violate ``limit``: every fairness metric lies in [0, 1].

    A difference bounded by 1 or more, or a ratio bounded by 0, holds for every model, so the
    study is unconstrained; this is legal but almost surely a mistake (``dsp<=2`` for
    ``dsp<=0.2``), and :class:`~fairtune.tuning.FairObjective` and ``fairtune tune`` warn.
    """
    return limit.bound >= 1.0 if limit.sense == "upper" else limit.bound <= 0.0


def _implied_bound(trial: optuna.trial.FrozenTrial, name: str) -> float | None:
    """The bound a trial's constraint on metric ``name`` was computed with, if it says so."""
    value = fairness_values(trial).get(name)
    violation = trial.constraints.get(name)
    if value is None or violation is None:
        return None
    return value - violation if METRICS[name].sense == "upper" else value + violation


def study_limits(study: optuna.Study, tenant: str | None = None
                 ) -> dict[str, FairnessLimit | None]:
    """The limits that decide which trials of ``study`` are fair, by constraint name (of
    ``tenant``'s trials, under its own setup, in a study that tenants share).

    1. The limits stored with the study (its setup record, written by
       :class:`~fairtune.tuning.FairObjective`, :class:`~fairtune.tuning.FairSearchCV` and
       ``fairtune tune``; :data:`LIMITS_KEY` in studies of older versions), with their bounds.
    2. Every other constraint name found on the study's COMPLETE trials. For a fairness metric
       the bound is the median of the bounds its trials were measured with (``value -
       constraint``); a constraint set by hand (``trial.set_constraint``) maps to None: its
       value must be <= 0.

    Args:
        study: Any single-objective study.
        tenant: A tenant of a shared study: its own limits (each tenant may have others) and
            the constraints of its own trials, or the study's when it has none of its own.
            Defaults to None: the study's.

    Returns:
        ``{name: FairnessLimit or None}``, stored limits first; empty if the study has none.
    """
    from optuna.trial import TrialState

    limits: dict[str, FairnessLimit | None] = {}
    # The setup record's limits; a study stored by an older version kept them under LIMITS_KEY.
    record = (study.user_attrs.get(_keys.SETUP_KEY) if tenant is None
              else study.user_attrs.get(_keys.TENANT_SETUP_PREFIX + tenant)) or {}
    stored = record.get("limits")
    if stored is None and tenant is not None:  # a tenant record of an older version
        stored = record.get(LIMITS_KEY)
    for text in stored if stored is not None else study.user_attrs.get(LIMITS_KEY) or []:
        try:
            limit = FairnessLimit.parse(str(text))
        except ValueError:
            continue  # not written by fairtune: the constraints below still count
        limits[limit.metric] = limit
    trials = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
              if tenant is None or t.user_attrs.get(_keys.TENANT_KEY) == tenant]
    names = list(dict.fromkeys(name for t in trials for name in t.constraints))
    for name in names:
        if name in limits:
            continue
        limits[name] = None
        if name in METRICS:
            bounds = [b for b in (_implied_bound(t, name) for t in trials) if b is not None]
            if bounds:
                bound = float(np.median(bounds))
                if _bound_problem(METRICS[name], bound) is None:
                    limits[name] = FairnessLimit(metric=name, bound=bound)
    return limits if limits or tenant is None else study_limits(study)


def is_fair(
    trial: optuna.trial.FrozenTrial, limits: Mapping[str, FairnessLimit | None]
) -> bool:
    """Whether a trial is a fair result: COMPLETE, and every limit of its study measured and met.

    This is the one rule of ``fairtune report``, :func:`best_fair_trial` and the plots of
    :mod:`fairtune.visualization`. It is stricter than Optuna's feasibility
    (:func:`is_feasible`): a trial that recorded no value for one of the study's limits is not
    fair (Optuna deems a trial without constraints feasible), and a fairness metric is checked
    against the study's bound even if the trial's constraint was computed with another one.

    Args:
        trial: A trial of the study.
        limits: The study's limits, from :func:`study_limits`.

    Returns:
        True if the trial is COMPLETE with a finite value and, for every limit, its fairness
        value (user attribute ``"fairtune:<metric>"``) meets the bound, or, for a constraint
        set by hand, its constraint value is <= 0.
    """
    from optuna.trial import TrialState

    if trial.state != TrialState.COMPLETE or trial.value is None or not math.isfinite(trial.value):
        return False
    values = fairness_values(trial)
    for name, limit in limits.items():
        if limit is not None and name in values:
            if limit.violation(values[name]) > 0:
                return False
        elif name not in trial.constraints or not trial.constraints[name] <= 0:
            return False
    return True


def least_unfair_trial(
    trials: Sequence[optuna.trial.FrozenTrial], limits: Mapping[str, FairnessLimit | None]
) -> optuna.trial.FrozenTrial:
    """Of ``trials``, the one whose fairness values exceed ``limits`` by the least in total,
    the first among ties (a limit it has no value for counts as infinitely exceeded; a NaN
    excess as none, as :func:`is_fair` lets a NaN value pass)."""

    def excess(t: optuna.trial.FrozenTrial, name: str, limit: FairnessLimit | None) -> float:
        value = fairness_values(t).get(name)
        if limit is not None and value is not None:
            return max(0.0, limit.violation(value))
        return max(0.0, t.constraints[name]) if name in t.constraints else math.inf

    return min(trials, key=lambda t: sum(excess(t, name, bound) for name, bound in limits.items()))


def best_fair_trial(
    study: optuna.Study, limits: Mapping[str, FairnessLimit | None] | None = None, *,
    tenant: str | None = None,
) -> optuna.trial.FrozenTrial | None:
    """The best fair trial of a single-objective study (see :func:`is_fair`), or None.

    Args:
        study: The study.
        limits: Its limits. Defaults to :func:`study_limits` of the study (of ``tenant``).
        tenant: Only this tenant's trials (:mod:`fairtune.tenancy`). Defaults to None: all.

    Returns:
        The fair trial with the best value in the study's direction (the lowest number among
        ties), or None if no trial is fair.
    """
    from optuna.study import StudyDirection
    from optuna.trial import TrialState

    limits = study_limits(study, tenant) if limits is None else limits
    fair = [
        t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if is_fair(t, limits) and (tenant is None or t.user_attrs.get(_keys.TENANT_KEY) == tenant)
    ]
    if not fair:
        return None
    sign = 1.0 if study.direction == StudyDirection.MAXIMIZE else -1.0

    def score(trial: optuna.trial.FrozenTrial) -> float:
        assert trial.value is not None  # a COMPLETE trial of a single-objective study has one
        return sign * trial.value

    return max(sorted(fair, key=lambda t: t.number), key=score)
