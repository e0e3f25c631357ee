"""The evaluation of a trial, once: the trial path that every entrance calls.

As scikit-learn's searches over ``_fit_and_score``, fairtune's entrances are thin shells over
:func:`run_trial` and :func:`fit_and_score`. An entrance gives a *candidate* (how one
trial's configuration is fitted on some rows and predicts others: FairObjective's pipeline,
FairSearchCV's estimator with its routed parameters) and the :class:`~fairtune.tuning._data.Splits`
of its data; this module fits and scores it on every fold of a split at one budget, pools the
out-of-fold predictions, scores them once (expected values for the randomized mitigations),
records the validation values (fairness as constraints, the validation error, the positive
rates) and, for a multi-fidelity search, each budget's rung and the pruner's verdict. A budget
is a transformation of the split (:func:`fairtune.tuning._data.budget_folds`) or of the
candidate's resource: nothing here depends on where a trial came from.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeGuard

import numpy as np
import pandas as pd

from fairtune import _keys
from fairtune._names import arg, check_choice, got
from fairtune._validation import group_name, sensitive_groups
from fairtune.fairness import parse_limits, set_fairness_constraints
from fairtune.fairness.constraints import cannot_bind, record_fairness_values

if TYPE_CHECKING:
    import optuna

__all__ = [
    "METRIC_NAMES", "MITIGATION_USED_KEY", "POSITIVE_RATES_KEY", "POSITIVE_RATE_KEY",
    "PRUNER_NAMES", "RUNGS_KEY", "SENSITIVE_AT_PREDICTION_KEY", "VALIDATION_ERROR_KEY",
    "Candidate", "Scored", "checked_budgets", "checked_resource", "fairness_value",
    "fit_and_score", "is_expected", "make_pruner", "metric_score", "out_of_fold_predictions",
    "predicts_one_class", "record_validation", "report_rung", "run_trial", "scale_resource",
    "scores_of", "takes_random_state", "tightened", "validated_rows", "warn_if_cannot_bind",
]

#: Trial user attribute: the share of validation rows the model misclassifies.
VALIDATION_ERROR_KEY = _keys.VALIDATION_ERROR_KEY
#: Trial user attribute: the share of validation rows predicted 1 (the favourable outcome).
POSITIVE_RATE_KEY = _keys.POSITIVE_RATE_KEY
#: Trial user attribute: ``{group: share of the group's validation rows predicted 1}``.
POSITIVE_RATES_KEY = _keys.POSITIVE_RATES_KEY
#: Trial user attribute: the mitigation the trial's pipeline used (with a mitigation only).
MITIGATION_USED_KEY = _keys.MITIGATION_USED_KEY
#: Trial user attribute: how the trial's deployed pipeline reads the sensitive feature at
#: prediction time, or ``"no"``.
SENSITIVE_AT_PREDICTION_KEY = _keys.SENSITIVE_AT_PREDICTION_KEY
#: Trial user attribute: ``[{"budget": 0.1, "value": ..., "<metric>": gap, ...}, ...]``, the
#: trial's validation value and fairness at each smaller budget it was fitted on.
RUNGS_KEY = _keys.RUNGS_KEY

Metric = Literal["accuracy", "balanced_accuracy", "f1", "roc_auc"]
METRIC_NAMES: tuple[str, ...] = ("accuracy", "balanced_accuracy", "f1", "roc_auc")
"""The metrics :class:`FairObjective` can maximize (``metric=``)."""


class Candidate(Protocol):
    """One trial's configuration as an entrance runs it: fit on some rows, predict others."""

    def fit_predict(self, fit_rows: np.ndarray, valid_rows: np.ndarray, budget: float
                    ) -> tuple[np.ndarray, np.ndarray | None]:
        """0/1 predictions of ``valid_rows`` (1 = favourable), or a randomized mitigation's
        probabilities of 1, and the scores for roc_auc (else None), of the configuration fitted
        on ``fit_rows`` at ``budget`` (1.0: the full one; a smaller one cuts the candidate's
        resource when the budget is not a share of the rows)."""


@dataclass
class Scored:
    """A trial's pooled validation predictions at one budget and their score."""

    value: float
    y_true: np.ndarray
    y_pred: np.ndarray  # 0/1, or probabilities of 1 (see is_expected)
    y_score: np.ndarray | None
    sensitive: Any  # the validated rows' sensitive features


def fit_and_score(candidate: Candidate, folds: Sequence[tuple[np.ndarray, np.ndarray]], *,
                  y01: np.ndarray, sensitive: Any, metric: str, budget: float = 1.0
                  ) -> Scored:
    """Fit ``candidate`` on every fold's training rows at ``budget``, pool the predictions of
    the validation rows (a validation split is one fold), and score them once."""
    from sklearn.utils import _safe_indexing

    n_rows = len(y01)
    y_pred, y_score = out_of_fold_predictions(
        folds, n_rows, lambda fit, valid: candidate.fit_predict(fit, valid, budget),
        with_scores=metric == "roc_auc")
    rows = validated_rows(folds, n_rows)
    y_score = None if y_score is None else y_score[rows]
    y_true = np.asarray(y01)[rows]
    return Scored(metric_score(metric, y_true, y_pred[rows], y_score), y_true, y_pred[rows],
                  y_score, _safe_indexing(sensitive, rows))


def validated_rows(folds: Sequence[tuple[np.ndarray, np.ndarray]], n_rows: int) -> np.ndarray:
    """The rows in some validation part of ``folds``, in order."""
    tested = np.zeros(n_rows, dtype=bool)
    for _, valid in folds:
        tested[valid] = True
    return np.flatnonzero(tested)


def run_trial(trial: Any, candidate: Candidate, splits: Any, *, y01: np.ndarray,
              sensitive: Any, metric: str, limits: Sequence[Any],
              budgets: Sequence[float] | None = None, prune_unfair: bool = False) -> Scored:
    """The one trial loop: with ``budgets``, score at each smaller budget on its folds
    (``splits.at(step)``), record the rung and let the study's pruner stop the trial
    (``optuna.TrialPruned``); then score at the full budget, report it as the last step, and
    record the validation values. Returns the full budget's :class:`Scored`."""
    for step, budget in enumerate(tuple(budgets or ())[:-1]):
        rung = fit_and_score(candidate, splits.at(step), y01=y01, sensitive=sensitive,
                             metric=metric, budget=budget)
        report_rung(trial, step, budget, rung.value, rung.y_true, rung.y_pred, rung.sensitive,
                    list(limits), prune_unfair)
    scored = fit_and_score(candidate, splits.at(None), y01=y01, sensitive=sensitive,
                           metric=metric)
    if budgets:
        trial.report(scored.value, len(budgets))
    record_validation(trial, scored.y_true, scored.y_pred, scored.sensitive, limits)
    return scored


def scores_of(metric: str, y_true: Any, y_pred: np.ndarray, y_score: np.ndarray | None,
              sensitive: Any, *, fairness: Sequence[str], limits: Sequence[Any],
              confidence_level: float | None = None, random_state: int = 0) -> dict[str, Any]:
    """A deployed model's scores on rows it was not chosen on: ``metric``, every fairness
    metric of ``fairness`` and of ``limits``, whether every limit holds (``"fair"``, with
    limits), and with ``confidence_level`` each fairness metric's bootstrap interval."""
    from fairtune.fairness import METRICS, metric_interval

    report: dict[str, Any] = {metric: metric_score(metric, y_true, y_pred, y_score)}
    names = list(fairness) + [limit.metric for limit in limits if limit.metric not in fairness]
    for name in names:
        report[name] = float(METRICS[name].function(y_true, y_pred, sensitive_features=sensitive))
    if limits:
        report["fair"] = all(limit.violation(report[limit.metric]) <= 0 for limit in limits)
    if confidence_level is not None:
        report["intervals"] = {
            name: metric_interval(name, y_true, y_pred, sensitive_features=sensitive,
                                  confidence_level=confidence_level, random_state=random_state)
            for name in names
        }
    return report


def takes_random_state(build: Callable[..., Any], var_keyword: bool = True) -> bool:
    """Whether ``build`` accepts ``random_state=`` (or, with ``var_keyword``, ``**kwargs``),
    from its signature: a TypeError raised inside the user's function must surface as it is."""
    try:
        parameters = inspect.signature(build).parameters.values()
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return False
    return any(
        (p.name == "random_state" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        or (var_keyword and p.kind == p.VAR_KEYWORD)
        for p in parameters
    )


def predicts_one_class(trial: optuna.trial.FrozenTrial) -> int | None:
    """The class a trial's model predicted for every validation row (such a model meets every
    demographic-parity limit trivially), or None if it predicted both or was not recorded."""
    rate = trial.user_attrs.get(POSITIVE_RATE_KEY)
    if rate is None:
        return None
    return 1 if rate == 1.0 else 0 if rate == 0.0 else None


def is_expected(y_pred: Any) -> bool:
    """Whether ``y_pred`` holds a randomized classifier's probabilities of predicting 1 (floats)
    rather than 0/1 predictions: such predictions are scored by their expected value, exactly,
    without the noise of one draw."""
    return bool(np.issubdtype(np.asarray(y_pred).dtype, np.floating))


def metric_score(
    metric: str, y_true: Any, y_pred: np.ndarray, y_score: np.ndarray | None
) -> float:
    """``metric`` of 0/1 predictions, of scores for roc_auc, or its expected value (F1: of the
    expected counts) for probabilities (:func:`is_expected`)."""
    from sklearn import metrics

    if metric == "roc_auc":
        return float(metrics.roc_auc_score(y_true, y_score))
    if is_expected(y_pred):
        p, y = np.asarray(y_pred, dtype=float), np.asarray(y_true) == 1
        tp = float(p[y].sum())  # the expected counts of the randomized predictions
        fp, fn = float(p.sum()) - tp, int(y.sum()) - tp
        tn = len(p) - int(y.sum()) - fp  # in this order: the same last digit as ever
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
    scores of ``fit_predict(fit_rows, valid_rows)``; rows in no validation part keep arbitrary
    values. Scored once on all the pooled rows, not averaged over folds: a gap measured on a
    few hundred rows of one fold is much noisier."""
    y_pred: np.ndarray | None = None
    y_score = np.empty(n_rows) if with_scores else None
    for fit_rows, valid_rows in folds:
        fold_pred, fold_score = fit_predict(fit_rows, valid_rows)
        if y_pred is None:  # labels, or a randomized predictor's probabilities
            y_pred = np.zeros(n_rows, dtype=np.asarray(fold_pred).dtype)
        y_pred[valid_rows] = fold_pred
        if y_score is not None:
            y_score[valid_rows] = fold_score
    assert y_pred is not None  # one fold at least (a validation split, or cv >= 2)
    return y_pred, y_score


def record_validation(
    trial: optuna.trial.BaseTrial,
    y_true: Any,
    y_pred: np.ndarray,
    sensitive: Any,
    limits: Sequence[Any],
) -> None:
    """Record a trial's validation predictions (expected values for probabilities): the
    fairness limits as constraints, the validation error and the positive rates."""
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
    groups = sensitive_groups(sensitive)
    trial.set_user_attr(POSITIVE_RATES_KEY, {
        group_name(group): float(np.mean(y_pred[(groups == group).to_numpy()]))
        for group in pd.unique(groups)
    })


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

    def keys_of(name: str) -> list[str]:
        return [k for k in params if k == name or k.endswith("__" + name)]

    def positive(value: Any) -> TypeGuard[int | np.integer[Any]]:
        return (
            isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            and bool(value >= 1)
        )

    keys = keys_of(resource)
    value = params[keys[0]] if len(keys) == 1 else None
    if not positive(value):
        # What it would accept: each positive integer parameter by its shortest name that
        # matches it alone.
        accepted = sorted({next((n for n in (k.rsplit("__", 1)[-1], k) if keys_of(n) == [k]),
                                "") for k, v in params.items() if positive(v)} - {""})
        raise ValueError(f"{arg('resource')} must name one positive integer parameter of the "
                         f"model, but got {got('resource', resource)}, which "
                         + (f"matches {keys}" if len(keys) > 1 else
                            f"is {value!r}" if keys else "matches none")
                         + f"; the model's positive integer parameters: {accepted} (or "
                           "'n_samples', the training rows).")
    estimator.set_params(**{keys[0]: max(1, round(budget * int(value)))})
    return estimator


def report_rung(trial: Any, step: int, budget: float, value: float, y_true: Any, y_pred: Any,
                sensitive: Any, limits: list[Any], prune_unfair: bool) -> None:
    """Record a smaller budget's value and fairness, report it as step ``step + 1`` and stop
    the trial if the pruner says so. The pruner sees the metric alone (a small sample's gap is
    noisy), unless ``prune_unfair``: then an unfair rung reports the metric less 1."""
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


def make_pruner(name: str, budgets: Sequence[float]) -> optuna.pruners.BasePruner:
    """Optuna's pruner ``name`` set up for a trial that reports one step per budget: successive
    halving and Hyperband with a reduction factor of 3 from the first budget, the median rule
    after five trials."""
    import optuna

    check_choice("pruner", name, PRUNER_NAMES)
    if name == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=len(budgets),
                                              reduction_factor=3)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=0)
    # Optuna's default pruner has these very settings: marked, so that a median rule asked
    # for is told apart from the default that check_pruner counts as none.
    pruner._fairtune_pruner = name  # type: ignore[attr-defined]
    return pruner


def check_pruner(pruner: Any, budgets: Sequence[float] | None) -> None:
    """Budgets need a pruner that uses them, and a pruner needs budgets (Optuna's default
    pruner counts as none), wherever the pruner comes from."""
    from fairtune.tuning._setup import describe_pruner, is_default_pruner

    if isinstance(pruner, str):  # a name of PRUNER_NAMES: never the default
        if not budgets:
            raise ValueError(
                f"{arg('pruner')} stops trials at smaller budgets, so {arg('budgets')} must be "
                f"given with it, but got {got('pruner', pruner)} and {got('budgets', None)}.")
        return
    if budgets and is_default_pruner(pruner):
        raise ValueError(
            f"{arg('budgets')} fit each trial on smaller budgets first so that a pruner can stop "
            f"poor ones, so a pruner must be given with them (one of {list(PRUNER_NAMES)}: "
            f"{arg('pruner')}, or optuna.create_study(pruner=make_pruner(name, budgets))), but "
            f"got {got('budgets', list(budgets))} and no pruner (Optuna's default MedianPruner "
            "counts as none: for the median rule pass make_pruner('median', budgets))."
        )
    if not budgets and not is_default_pruner(pruner):
        raise ValueError(
            f"{arg('pruner')} stops trials at smaller budgets, so {arg('budgets')} must be given "
            f"with it: without them a trial reports "
            f"no step and nothing is pruned, but got the pruner {describe_pruner(pruner)} and "
            f"{got('budgets', None)}."
        )
