"""FairSearchCV's results: ``cv_results_`` from the study's trials, the failures of a fit and
the message when no trial is fair."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from fairtune._keys import ERROR_KEY, FIT_TIMES_KEY, SCORE_TIMES_KEY, SPLIT_SCORES_KEY
from fairtune.fairness.constraints import (
    FairnessLimit,
    fairness_values,
    is_fair,
    least_unfair_trial,
)
from fairtune.tuning import _trial as trial_path

if TYPE_CHECKING:
    import optuna


def finished_trials(study: Any) -> list[optuna.trial.FrozenTrial]:
    from optuna.trial import TrialState

    return sorted(
        study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)),
        key=lambda t: t.number,
    )


def results(trials: list[optuna.trial.FrozenTrial], limits: list[FairnessLimit], *,
            error_score: Any, n_splits: int) -> dict[str, Any]:
    """scikit-learn's ``cv_results_`` layout, one row per trial (a failed trial scores
    ``error_score``)."""
    from optuna.trial import TrialState

    n = len(trials)
    results: dict[str, Any] = {"params": [dict(t.params) for t in trials]}
    for name in dict.fromkeys(name for t in trials for name in t.params):
        results[f"param_{name}"] = np.ma.MaskedArray(
            [t.params.get(name) for t in trials], mask=[name not in t.params for t in trials],
            dtype=object)

    error = np.nan if error_score == "raise" else float(error_score)

    def per_split(key: str) -> np.ndarray:
        table = np.full((n, n_splits), np.nan)
        for i, t in enumerate(trials):
            values = list(t.user_attrs.get(key) or [])[:n_splits]
            table[i, : len(values)] = values
        return table

    scores = per_split(SPLIT_SCORES_KEY)
    scores[[t.state == TrialState.FAIL for t in trials]] = error  # every split of a failure
    for k in range(n_splits):
        results[f"split{k}_test_score"] = scores[:, k]
    mean = np.array([
        t.value if t.state == TrialState.COMPLETE and t.value is not None else error
        for t in trials
    ], dtype=float)
    results["mean_test_score"] = mean
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows of failed trials
        results["std_test_score"] = np.nanstd(scores, axis=1)
        fair = np.array([is_fair(t, {lim.metric: lim for lim in limits}) for t in trials],
                        dtype=bool)
        results["rank_test_score"] = _rank(mean, fair, trials)
        for key, label in ((FIT_TIMES_KEY, "fit"), (SCORE_TIMES_KEY, "score")):
            times = per_split(key)
            results[f"mean_{label}_time"] = np.nanmean(times, axis=1)
            results[f"std_{label}_time"] = np.nanstd(times, axis=1)
    for limit in limits:
        results[limit.metric] = np.array(
            [fairness_values(t).get(limit.metric, np.nan) for t in trials], dtype=float
        )
    results["fair"] = fair
    results["predicts_one_class"] = np.array(
        [trial_path.predicts_one_class(t) is not None for t in trials], dtype=bool
    )
    results["trial_number"] = np.array([t.number for t in trials], dtype=int)
    return results


def report_failures(trials: list[optuna.trial.FrozenTrial], error_score: Any) -> None:
    """Raise when every trial of a fit failed, else warn with the first failure."""
    from optuna.trial import TrialState
    from sklearn.exceptions import FitFailedWarning

    failed = [t for t in trials if t.state == TrialState.FAIL]
    if not failed:
        return
    first = failed[0]
    reason = first.user_attrs.get(ERROR_KEY) or first.system_attrs.get("fail_reason", "?")
    if len(failed) == len(trials):
        raise ValueError(
            f"All {len(trials)} trials of the search failed: the estimator raised while "
            f"fitting or scoring. The first error (trial {first.number}, params "
            f"{first.params}): {reason}"
        )
    warnings.warn(
        f"{len(failed)} of {len(trials)} trials failed and scored "
        f"error_score={error_score!r}; the first error (trial {first.number}, params "
        f"{first.params}): {reason}",
        FitFailedWarning,
        stacklevel=4,  # fit -> _search -> here
    )


def no_fair_trial_message(trials: list[optuna.trial.FrozenTrial], limits: list[FairnessLimit],
                          *, scoring: str, margin: float, confidence: float | None,
                          study: Any) -> str:
    """Why no trial of ``study`` is fair and what would change it; with ``confidence``, also
    the safety test's refusal, recorded with the study
    (:func:`fairtune.tuning._certify.record_refusal`)."""
    from optuna.trial import TrialState

    text = ", ".join(str(limit) for limit in limits)
    if confidence is not None:  # the limits the search validates against: tightened
        less = f" `margin`={margin:g} and" if margin else ""
        text += (f" (the given limits less{less} the width of their bound at "
                 f"`confidence`={confidence:g} on the safety rows)")
    elif margin:
        text += f" (the given limits less `margin`={margin:g})"
    completed = [t for t in trials if t.state == TrialState.COMPLETE]
    message = (
        f"No trial meets the fairness limit{'s' if len(limits) > 1 else ''} {text} on its "
        f"out-of-fold predictions ({len(completed)} completed trial"
        f"{'s' if len(completed) != 1 else ''})"
    )
    if completed:
        closest = least_unfair_trial(  # the best scoring among ties
            sorted(completed, key=lambda t: -(t.value or 0.0)),
            {limit.metric: limit for limit in limits})
        values = fairness_values(closest)
        measured = ", ".join(
            f"{limit.metric}={values[limit.metric]:.4f}" for limit in limits
            if limit.metric in values
        )
        message += (
            f": the closest is trial {closest.number} ({measured}, {scoring}="
            f"{closest.value:.4f}, params {closest.params})"
        )
    message += (". Loosen `limits`, run more trials or add a `mitigation` ('threshold' aims "
                "exactly at the limit)" + ("." if confidence is None else "; no model could "
                                           "be certified, since there is no fair trial to test."))
    if confidence is not None and study is not None:
        # The safety test's refusal, recorded with the study as every entrance records it,
        # so that `fairtune report` and the dashboard's note say that no model is deployed.
        from fairtune.tuning._certify import record_refusal

        record_refusal(study, message)
    return message


def _rank(mean: np.ndarray, fair: np.ndarray, trials: list[Any]) -> np.ndarray:
    """Ranks (1 = best, ties share the smallest): fair trials by score, then the other
    completed ones by score, then the failed ones."""
    from optuna.trial import TrialState

    tier = np.array([
        0 if is_fair_ else 1 if t.state == TrialState.COMPLETE and np.isfinite(m) else 2
        for t, m, is_fair_ in zip(trials, mean, fair, strict=True)
    ])
    key = np.rec.fromarrays([tier, np.where(tier < 2, -np.nan_to_num(mean, nan=0.0), 0.0)])
    # A trial's rank is 1 + the number of (tier, -score) keys sorted before its own.
    return (np.searchsorted(np.sort(key), key) + 1).astype(np.int32)


def warn_if_one_class(best: optuna.trial.FrozenTrial, scoring: str, labels: tuple[Any, Any]
                      ) -> None:
    """Warn when ``best`` predicts one class for every out-of-fold row (``labels``: the other
    label and the favourable one, as 0 and 1 name them)."""
    one_class = trial_path.predicts_one_class(best)
    if one_class is None:
        return
    label = labels[one_class]
    label = label.item() if isinstance(label, np.generic) else label
    warnings.warn(
        f"The best fair trial (trial {best.number}) predicts {label!r} for every "
        f"out-of-fold row: its {scoring} {best.value:.4f} is that of a constant model, "
        "which meets demographic-parity limits trivially and decides nothing. Add a "
        "`mitigation` (e.g. 'threshold'), loosen `limits`, or run more trials; "
        "cv_results_['predicts_one_class'] marks such trials.",
        UserWarning,
        stacklevel=4,  # fit -> _search -> here
    )
