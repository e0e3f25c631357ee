"""The trial path that FairObjective, FairSearchCV and the command line share.

scikit-learn's search estimators are thin shells over one function that fits and scores a
candidate; fairtune's entrances are thin in the same way over the pieces here: how a trial's
predictions are scored (expected values for the randomized mitigations), pooled over
cross-validation folds, and recorded (fairness values as constraints, the validation error, the
positive rates), the keys under which a study stores its setup, and the rules every entrance
applies to limits and margins.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from fairtune._names import arg, got
from fairtune.fairness import parse_limits, set_fairness_constraints
from fairtune.fairness.constraints import record_fairness_values
from fairtune.fairness.constraints import cannot_bind

if TYPE_CHECKING:
    import optuna

__all__ = [
    "DATASET_KEY", "DATA_KEY", "METRIC_KEY", "METRIC_NAMES", "MITIGATION_SETUP_KEY",
    "MITIGATION_USED_KEY", "MODEL_KEY", "OBJECTIVES_KEY", "POSITIVE_RATES_KEY",
    "POSITIVE_RATE_KEY", "SENSITIVE_AT_PREDICTION_KEY", "TENANT_SETUP_PREFIX", "VALIDATION_ERROR_KEY", "VALIDATION_KEY",
    "check_groups", "is_expected", "fairness_value", "metric_score", "other_data_message",
    "other_setup_message",
    "out_of_fold_predictions", "predicts_one_class", "record_validation", "takes_random_state",
    "tightened", "warn_if_cannot_bind", "RUNGS_KEY", "budget_rows", "checked_budgets",
    "checked_resource", "scale_resource",
    "report_rung", "PRUNER_NAMES", "make_pruner",
]

Metric = Literal["accuracy", "balanced_accuracy", "f1", "roc_auc"]
METRIC_NAMES: tuple[str, ...] = ("accuracy", "balanced_accuracy", "f1", "roc_auc")
"""The metrics :class:`FairObjective` can maximize (``metric=``)."""
VALIDATION_ERROR_KEY = "fairtune:validation_error"
"""Trial user attribute: the share of validation rows the model misclassifies."""
POSITIVE_RATE_KEY = "fairtune:positive_rate"
"""Trial user attribute: the share of validation rows predicted 1 (the favourable outcome)."""
POSITIVE_RATES_KEY = "fairtune:positive_rate_by_group"
"""Trial user attribute: ``{group: share of the group's validation rows predicted 1}``."""
# Study user attributes: the setup that makes a study's trials comparable (see
# FairObjective.setup). LIMITS_KEY (fairtune.fairness) holds the limits.
DATASET_KEY = "fairtune:dataset"
MODEL_KEY = "fairtune:model"
METRIC_KEY = "fairtune:metric"
VALIDATION_KEY = "fairtune:validation"
OBJECTIVES_KEY = "fairtune:objectives"  # the multi-objective form only
TENANT_SETUP_PREFIX = "fairtune:setup:"
"""Study user attribute prefix: ``"fairtune:setup:<tenant>"`` holds a tenant's setup (the same
entries as a study of one objective holds as separate attributes)."""
DATA_KEY = "fairtune:data_fingerprint"
"""Study user attribute: a digest of the rows, labels, groups and validation splits that the
study's trials were scored on (see :func:`fairtune.tuning._data.data_fingerprint`)."""
MITIGATION_SETUP_KEY = "fairtune:mitigation"  # with a mitigation only
MITIGATION_USED_KEY = "fairtune:mitigation_used"
"""Trial user attribute: the mitigation the trial's pipeline used (set with a mitigation only)."""
SENSITIVE_AT_PREDICTION_KEY = "fairtune:sensitive_at_prediction"
"""Trial user attribute: how the trial's deployed pipeline reads the sensitive feature at
prediction time (see :meth:`FairObjective.needs_sensitive_features`), or ``"no"``."""
def takes_random_state(build: Callable[..., Any], var_keyword: bool = True) -> bool:
    """Whether a space's ``trial -> estimator`` function accepts ``random_state=``.

    Decided from the signature, not by calling it and catching ``TypeError``: a TypeError
    raised inside the user's function must surface as it is, not trigger a second call.
    ``var_keyword=False`` counts only a parameter named ``random_state``, not ``**kwargs``
    (a ``predict(X, **params)`` that routes its parameters elsewhere does not take it).
    """
    try:
        parameters = inspect.signature(build).parameters.values()
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return False
    return any(
        p.name == "random_state" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
        or var_keyword and p.kind == p.VAR_KEYWORD
        for p in parameters
    )


def predicts_one_class(trial: optuna.trial.FrozenTrial) -> int | None:
    """The class a trial's model predicted for every validation row, or None if it predicted both.

    Such a model (accuracy = the base rate, every group's positive rate equal) meets every
    demographic-parity limit trivially. Read from the user attribute ``"fairtune:positive_rate"``
    that :class:`FairObjective` records; None for trials without it.
    """
    rate = trial.user_attrs.get(POSITIVE_RATE_KEY)
    if rate is None:
        return None
    return 1 if rate == 1.0 else 0 if rate == 0.0 else None


def group_name(group: Any) -> str:
    return ", ".join(map(str, group)) if isinstance(group, tuple) else str(group)


def check_groups(sensitive: pd.Series | pd.DataFrame) -> pd.Series:
    from fairtune.fairness.metrics import _check_sensitive

    return _check_sensitive(sensitive, len(sensitive))


def is_expected(y_pred: Any) -> bool:
    """Whether ``y_pred`` holds a randomized classifier's probabilities of predicting 1 (floats)
    rather than 0/1 predictions: such predictions are scored by their expected value, exactly,
    without the noise of one draw."""
    return bool(np.issubdtype(np.asarray(y_pred).dtype, np.floating))


def _expected_counts(y_true: Any, p: np.ndarray) -> tuple[float, float, float, float]:
    """The expected true positives, false positives, false negatives and true negatives of a
    randomized classifier predicting 1 with probability ``p``."""
    y = np.asarray(y_true) == 1
    predicted = float(p.sum())
    tp = float(p[y].sum())
    positives = int(y.sum())
    return tp, predicted - tp, positives - tp, len(p) - positives - (predicted - tp)


def metric_score(
    metric: str, y_true: Any, y_pred: np.ndarray, y_score: np.ndarray | None
) -> float:
    """``metric`` (a name of :data:`METRIC_NAMES`) of 0/1 predictions, or of scores for roc_auc.

    Float ``y_pred`` (a randomized predictor's probabilities of predicting 1, see
    :func:`is_expected`) gives the expected accuracy or balanced accuracy (and F1 from the
    expected counts), computed from sums over the rows (no copy of them).
    """
    from sklearn import metrics

    if metric == "roc_auc":
        return float(metrics.roc_auc_score(y_true, y_score))
    if is_expected(y_pred):
        tp, fp, fn, tn = _expected_counts(y_true, np.asarray(y_pred, dtype=float))
        if metric == "accuracy":
            return (tp + tn) / (tp + fp + fn + tn)
        if metric == "balanced_accuracy":  # the mean recall of the labels present, as sklearn's
            recalls = [hit / (hit + miss) for hit, miss in ((tp, fn), (tn, fp)) if hit + miss > 0]
            return float(np.mean(recalls))
        return 2.0 * tp / (2.0 * tp + fp + fn) if tp + fp + fn > 0 else 0.0
    if metric == "accuracy":
        return float(metrics.accuracy_score(y_true, y_pred))
    if metric == "balanced_accuracy":
        return float(metrics.balanced_accuracy_score(y_true, y_pred))
    return float(metrics.f1_score(y_true, y_pred, zero_division=0.0))


def fairness_value(name: str, y_true: Any, y_pred: np.ndarray, sensitive: Any) -> float:
    """Fairness metric ``name`` of 0/1 predictions, or the expected one of probabilities."""
    from fairtune.fairness import METRICS
    from fairtune.fairness.metrics import expected_metric

    if is_expected(y_pred):
        return expected_metric(name, y_true, y_pred, sensitive_features=sensitive)
    return float(METRICS[name].function(y_true, y_pred, sensitive_features=sensitive))


def out_of_fold_predictions(
    folds: Sequence[tuple[np.ndarray, np.ndarray]],
    n_rows: int,
    fit_predict: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray | None]],
    *,
    with_scores: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Pooled out-of-fold 0/1 predictions (or probabilities of 1, see :func:`is_expected`) and
    scores: every row of a fold's validation part is predicted by the model that
    ``fit_predict(fit_rows, valid_rows)`` trained without it.

    The metric and the fairness gaps are then computed once on all the pooled rows, not
    averaged over folds: a gap measured on a few hundred rows of one fold is much noisier.
    Shared by :class:`FairObjective` (``cv=k``) and :class:`fairtune.tuning.FairSearchCV`;
    rows in no validation part keep arbitrary values (callers drop them).
    """
    y_pred: np.ndarray | None = None
    y_score = np.empty(n_rows) if with_scores else None
    for fit_rows, valid_rows in folds:
        fold_pred, fold_score = fit_predict(fit_rows, valid_rows)
        if y_pred is None:  # labels, or a randomized predictor's probabilities
            y_pred = np.zeros(n_rows, dtype=np.asarray(fold_pred).dtype)
        y_pred[valid_rows] = fold_pred
        if y_score is not None:
            y_score[valid_rows] = fold_score
    return y_pred, y_score


def record_validation(
    trial: optuna.trial.BaseTrial,
    y_true: Any,
    y_pred: np.ndarray,
    sensitive: Any,
    limits: Sequence[Any],
) -> None:
    """Record a trial's validation predictions: the fairness limits as constraints (with the
    raw metric values), the validation error and the positive rate, overall and per group.

    Float ``y_pred`` (a randomized predictor's probabilities of predicting 1) records the
    expected values (see :func:`is_expected`)."""
    if limits:
        if is_expected(y_pred):
            limits = parse_limits(limits)
            record_fairness_values(trial, limits, {
                limit.metric: fairness_value(limit.metric, y_true, y_pred, sensitive)
                for limit in limits})
        else:
            set_fairness_constraints(trial, y_true, y_pred, sensitive_features=sensitive,
                                     limits=limits)
    trial.set_user_attr(
        VALIDATION_ERROR_KEY, float(np.mean(np.abs(y_pred - np.asarray(y_true))))
    )
    trial.set_user_attr(POSITIVE_RATE_KEY, float(np.mean(y_pred)))
    groups = check_groups(sensitive)
    trial.set_user_attr(POSITIVE_RATES_KEY, {
        group_name(group): float(np.mean(y_pred[(groups == group).to_numpy()]))
        for group in pd.unique(groups)
    })


def other_data_message(study: optuna.Study, fingerprint: str) -> str:
    """Why a study whose trials were scored on other data cannot be used here, and what to do."""
    return (
        f"{arg('study')} {study.study_name!r} holds trials scored on other data (data "
        f"fingerprint {study.user_attrs.get(DATA_KEY)!r} there, {fingerprint!r} here: other "
        "rows, labels, groups or validation splits), so its best trial would be chosen on "
        "scores that do not measure these rows; create a new study for this data (another "
        f"{arg('study_name')})."
    )


# The arguments that choose each entry of a study's setup (LIMITS_KEY: "fairtune:limits").
_SETUP_ARGUMENTS: dict[str, tuple[str, ...]] = {
    DATASET_KEY: ("dataset", "use_sensitive_feature", "drop_columns"),
    MODEL_KEY: ("model",),
    METRIC_KEY: ("metric",),
    "fairtune:limits": ("limits",),
    VALIDATION_KEY: ("cv", "test_size", "random_state"),
    MITIGATION_SETUP_KEY: ("mitigation",),
    OBJECTIVES_KEY: ("objectives",),
}


def other_setup_message(study: optuna.Study, differences: list[tuple[str, Any, Any]]) -> str:
    """Why ``study`` cannot take trials scored with another setup: ``differences`` are
    ``(key, stored value, this run's value)``; the message names the arguments that choose each
    entry (the other data only when nothing else differs: other settings explain it)."""
    named_differences = [d for d in differences if d[0] != DATA_KEY]
    if not named_differences:
        return other_data_message(study, differences[0][2])

    def named(key: str) -> str:
        names = [arg(name) for name in _SETUP_ARGUMENTS.get(key, (key,))]
        if key == DATASET_KEY:  # the data and what the model is shown of it
            return f"{names[0]} (and {', '.join(names[1:])})"
        return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)

    def show(value: Any) -> str:
        return repr(", ".join(value) or "none" if isinstance(value, list) else str(value))

    what = "; ".join(
        f"{named(key)} {show(stored)}, but this run asks for {show(wanted)}"
        + (f" (the limits the trials are validated against: {arg('limits')} less "
           f"{arg('margin')})" if key == "fairtune:limits" else "")
        for key, stored, wanted in named_differences
    )
    return (
        f"{arg('study')} {study.study_name!r} was tuned with {what}: its values are not "
        f"comparable with this run's; use the same "
        f"{' and '.join(named(key) for key, _, _ in named_differences)} as before or another "
        f"{arg('study_name')}."
    )


def tightened(limits: list[Any], margin: Any) -> list[Any]:
    """``limits`` with every bound moved ``margin`` towards the stricter side."""
    from fairtune.fairness import FairnessLimit

    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.integer, np.floating)) \
            or not 0.0 <= float(margin) < 1.0:
        raise ValueError(
            f"{arg('margin')} must be a number in [0, 1), but got {got('margin', margin)}."
        )
    margin = float(margin)
    if margin and not limits:
        raise ValueError(
            f"{arg('margin')} tightens the fairness limits, so {arg('limits')} must be given with "
            f"it, but got {got('limits', None)} and {got('margin', margin)}."
        )
    result = []
    for limit in limits:
        bound = limit.bound - margin if limit.sense == "upper" else limit.bound + margin
        if margin and (bound <= 0.0 if limit.sense == "upper" else bound > 1.0):
            raise ValueError(
                f"{arg('margin')} must leave room under the limit {limit}: the tightened bound "
                f"would be {bound:g}, but got {got('margin', margin)}."
            )
        result.append(FairnessLimit(limit.metric, round(bound, 10)) if margin else limit)
    return result


def warn_if_cannot_bind(limits: Sequence[Any], *, stacklevel: int) -> None:
    """Warn for every limit that holds for every model (every fairness metric lies in [0, 1],
    so ``"dsp<=2"`` constrains nothing): the one rule of every entrance."""
    for limit in limits:
        if cannot_bind(limit):
            warnings.warn(
                f"{arg('limits')}: {limit} holds for every model ({limit.metric} lies in [0, 1]), "
                "so it does not constrain the study; did you mean a smaller bound?",
                UserWarning,
                stacklevel=stacklevel + 1,
            )


RUNGS_KEY = "fairtune:rungs"
"""Trial user attribute: ``[{"budget": 0.1, "value": ..., "<metric>": gap, ...}, ...]``, the
trial's validation value and fairness at each smaller budget it was fitted on."""


def checked_budgets(budgets: Any) -> tuple[float, ...]:
    """``budgets`` as increasing fractions of the training rows in (0, 1], ending at 1.0."""
    ok = isinstance(budgets, (list, tuple)) and len(budgets) >= 2 and all(
        isinstance(b, (int, float)) and not isinstance(b, bool) and 0.0 < b <= 1.0
        for b in budgets) and list(budgets) == sorted(set(budgets)) and budgets[-1] == 1.0
    if not ok:
        raise ValueError(
            f"{arg('budgets')} must be two or more increasing fractions of the training rows "
            f"in (0, 1], the last 1.0 (e.g. (1 / 9, 1 / 3, 1.0)), but got "
            f"{got('budgets', budgets)}."
        )
    return tuple(float(b) for b in budgets)


def checked_resource(resource: Any, budgets: Sequence[float] | None) -> str:
    """``resource``: ``"n_samples"`` or the name of a model parameter, given with ``budgets``."""
    if not isinstance(resource, str) or not resource:
        raise ValueError(f"{arg('resource')} must be \"n_samples\" or the name of an integer "
                         f"parameter of the model, such as \"n_estimators\", but got "
                         f"{got('resource', resource)}.")
    if budgets is None and resource != "n_samples":
        raise ValueError(f"{arg('resource')} is what {arg('budgets')} are fractions of, so "
                         f"{arg('budgets')} must be given with it, but got "
                         f"{got('resource', resource)} and {got('budgets', None)}.")
    return resource


def scale_resource(estimator: Any, resource: str, budget: float) -> Any:
    """``estimator`` with its integer parameter ``resource`` cut to ``budget`` of its value (at
    least 1): ``resource`` is a parameter of the estimator (``"n_estimators"``), of a step
    (``"model__n_estimators"``), or of the one nested estimator that has it."""
    params = estimator.get_params(deep=True)
    keys = [k for k in params if k == resource or k.endswith("__" + resource)]
    value = params[keys[0]] if len(keys) == 1 else None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        found = sorted(k for k, v in params.items()
                       if isinstance(v, (int, np.integer)) and not isinstance(v, bool))
        raise ValueError(f"{arg('resource')} must name one positive integer parameter of the "
                         f"model, but got {got('resource', resource)}, which "
                         + (f"matches {keys}" if len(keys) > 1 else
                            f"is {value!r}" if keys else "matches none")
                         + f"; the integer parameters: {found}.")
    estimator.set_params(**{keys[0]: max(1, round(budget * int(value)))})
    return estimator


def budget_rows(y: Any, groups: Any, budgets: Sequence[float], seed: int) -> list[np.ndarray]:
    """The row positions of each budget but the last (all rows): nested subsets, each keeping
    every label-and-group stratum's share (at least one row of each), drawn once per study
    seed so that every trial is fitted on the same rows at the same budget."""
    strata = pd.Series(np.asarray(y)).astype(str) + "|" + check_groups(groups).astype(str) \
        .reset_index(drop=True)
    rng = np.random.default_rng(seed)
    order = {key: rng.permutation(np.flatnonzero((strata == key).to_numpy()))
             for key in sorted(strata.unique())}
    return [np.sort(np.concatenate([rows[:max(1, round(budget * len(rows)))]
                                    for rows in order.values()]))
            for budget in budgets[:-1]]


def report_rung(trial: Any, step: int, budget: float, value: float, y_true: Any, y_pred: Any,
                sensitive: Any, limits: list[Any], prune_unfair: bool) -> None:
    """Record a smaller budget's validation value and fairness, report it to the pruner as step
    ``step + 1`` (steps count budgets from 1, the pruners' unit of resource), and stop the
    trial if the pruner says so.

    The pruner sees the metric alone, so a trial is never stopped for looking unfair on a few
    rows (a small sample's gap is noisy), unless ``prune_unfair``: then a rung that breaks a
    limit reports the metric less 1, below any fair rung."""
    import optuna

    gaps = {limit.metric: fairness_value(limit.metric, y_true, y_pred, sensitive)
            for limit in limits}
    rungs = list(getattr(trial, "user_attrs", {}).get(RUNGS_KEY, []))
    rungs.append({"budget": budget, "value": value, **gaps})
    trial.set_user_attr(RUNGS_KEY, rungs)
    fair = all(limit.violation(gaps[limit.metric]) <= 0.0 for limit in limits)
    trial.report(value if fair or not prune_unfair else value - 1.0, step + 1)
    if trial.should_prune():
        raise optuna.TrialPruned(f"pruned after the budget {budget:g} of the training rows")


PRUNER_NAMES: tuple[str, ...] = ("successive_halving", "hyperband", "median")
"""The pruners of :func:`make_pruner` (and of ``fairtune tune --pruner``)."""


def make_pruner(name: str, budgets: Sequence[float]) -> Any:
    """Optuna's pruner ``name`` set up for a trial that reports one step per budget: successive
    halving and Hyperband with a reduction factor of 3 from the first budget, the median rule
    after five trials."""
    import optuna

    if name not in PRUNER_NAMES:
        raise ValueError(f"{arg('pruner')} must be one of {list(PRUNER_NAMES)}, but got "
                         f"{got('pruner', name)}.")
    if name == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=len(budgets),
                                              reduction_factor=3)
    return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=0)
