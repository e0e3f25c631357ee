"""A deployed model with a stated confidence that it keeps the limits on new data, or a refusal.

A limit met on validation rows is a measurement of the best of many tries, optimistically
biased. With ``confidence=`` an entrance works in the manner of the Seldonian framework
(Thomas et al., "Preventing undesirable behavior of intelligent machines", Science 2019):

1. Safety rows: a share of the tuning rows (``safety_size``, stratified by label) that the
   search never sees, split off before the validation split or folds.
2. The search aims at models that can pass: every limit is tightened by the width that a
   bound on the safety rows will have (:func:`limits_for_search`), a margin derived from the
   data instead of a guessed one.
3. The safety test: the fair completed trials, best first, at most ``candidates`` of them, are
   refitted on the search rows and predict the safety rows (a randomized mitigation's
   probabilities of predicting 1, whose mean is its rate); each limit's metric gets a bound
   (:func:`fairtune.fairness.bounds.metric_bound`) that holds with probability
   ``1 - (1 - confidence) / (candidates * limits)``. The first candidate whose every bound
   keeps its limit is certified. By a union bound over every test that could have been run,
   the probability that the certified model breaks a limit on the population is at most
   ``1 - confidence``.
4. Else a refusal that names the best candidate's bounds and what would change them.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from fairtune._keys import CERTIFICATE_KEY
from fairtune._names import arg, got
from fairtune._text import percent

__all__ = ["CANDIDATES", "Certificate", "NotCertifiedError", "candidates", "certify",
           "check_confidence", "forget_verdict", "limits_for_search",
           "one_class_text", "rate_labels", "record_refusal", "store_verdict"]

#: The fair trials tested on the safety rows, best first (more make each bound wider).
CANDIDATES = 5


@dataclass
class Certificate:
    """A model's certificate: with probability at least ``level``, each fairness metric of the
    model on the population the rows come from is within ``bounds`` (an upper bound of a gap,
    a lower bound of a ratio), which keep the ``limits``.

    Attributes:
        trial: The number of the certified trial.
        level: The confidence level.
        bounds: ``{metric: bound}``.
        limits: The limits certified, as text.
        rows: The safety rows the bounds were computed on.
        candidates: How many candidates the error probability was split among.
        tested: How many distinct candidates have been tested on these safety rows, over
            every certification of the study (this one included).
        tested_trials: Their trial numbers, in the order they were first tested.
        positive_rate: The certified model's mean prediction of 1 over the safety rows (None
            in a record of an older version).
        one_class: The class the certified model predicted for every safety row, or None.
    """

    trial: int
    level: float
    bounds: dict[str, float]
    limits: list[str]
    rows: int
    candidates: int
    tested: int
    values: dict[str, float] = field(default_factory=dict)
    tested_trials: list[int] = field(default_factory=list)
    positive_rate: float | None = None
    one_class: int | None = None

    def text(self) -> str:
        """One line for a person: what is guaranteed, at what level, on what; and, of a model
        that predicted one class for every safety row, that it is a constant model."""
        shown = ", ".join(f"{name} {'<=' if name != 'disparate_impact' else '>='} {bound:.4f}"
                          for name, bound in self.bounds.items())
        text = (f"Certified: trial #{self.trial} keeps {', '.join(self.limits)} on new data "
                f"with {percent(self.level)} confidence ({shown} on the population, bounded on "
                f"{self.rows} safety rows the search never saw; {self.candidates} candidates "
                f"accounted for, {self.tested} tested).")
        if self.one_class is not None:
            text += " " + one_class_text(self.trial, self.one_class, self.rows)
        return text

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def one_class_text(trial: int, label: int, rows: int) -> str:
    """The warning that certified trial ``trial``'s model predicted ``label`` for each of the
    ``rows`` safety rows: what every report says wherever it names the model to deploy."""
    outcome = "the favourable outcome" if label == 1 else "the unfavourable outcome"
    return (f"Warning: the certified model (trial #{trial} refitted on the search rows) "
            f"predicted {label} ({outcome}) for every one of the {rows} safety rows: a "
            "constant model, which treats every group alike whatever its inputs, so its "
            "fairness bounds are met trivially; check it before deploying it.")


def _one_class(predicted: Any) -> int | None:
    """The class every prediction is (a randomized model's with certainty), or None."""
    p = np.asarray(predicted, dtype=float)
    return next((label for label in (1, 0) if p.size and np.all(p == label)), None)


class NotCertifiedError(ValueError):
    """No candidate's bounds keep the limits: the entrance refuses to deploy a model;
    ``tested_trials`` are the trials tested on the safety rows so far."""

    def __init__(self, message: str, tested_trials: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.tested_trials = list(tested_trials)


def check_confidence(confidence: Any, safety_size: Any, limits: Sequence[Any],
                     objectives: Sequence[str] = ()) -> tuple[float | None, float | None]:
    """``(confidence, safety_size)`` checked: a level in (0, 1) with limits to certify, and a
    share of the tuning rows in (0, 1) (0.3 when not given)."""
    if confidence is None:
        if safety_size is not None:
            raise ValueError(f"{arg('safety_size')} holds out rows for the safety test of "
                             f"{arg('confidence')}, so {arg('confidence')} must be given with "
                             f"it, but got {got('safety_size', safety_size)} and "
                             f"{got('confidence', None)}.")
        return None, None
    if isinstance(confidence, bool) or not isinstance(
            confidence, (float, int, np.integer, np.floating)) or (
            not 0.0 < float(confidence) < 1.0):
        raise ValueError(f"{arg('confidence')} must be a level in (0, 1), e.g. 0.95, but got "
                         f"{got('confidence', confidence)}.")
    if not limits:
        raise ValueError(f"{arg('confidence')} certifies fairness limits, so {arg('limits')} "
                         f"must be given with it, but got {got('limits', None)}.")
    if objectives:
        raise ValueError(f"{arg('confidence')} certifies the one best fair model of a "
                         f"single-objective search; a multi-objective study has no single best "
                         f"model, but got {got('objectives', list(objectives))}.")
    share = 0.3 if safety_size is None else safety_size
    if isinstance(share, bool) or not isinstance(share, (float, np.floating)) or not (
            0.0 < float(share) < 1.0):
        raise ValueError(f"{arg('safety_size')} must be a float in (0, 1), but got "
                         f"{got('safety_size', safety_size)}.")
    return float(confidence), float(share)


def _delta(confidence: float, limits: Sequence[Any]) -> float:
    """The error probability of one metric's bound on one candidate."""
    return (1.0 - confidence) / (CANDIDATES * len(limits))


def _sizes(metric: str, y: np.ndarray, groups: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each group's rows per rate of ``metric`` (shape (groups, rates)), and the rate at which
    the margin is planned: the labels' base rate for a selection rate, 1/2 (the widest) for
    the error rates, whose level the search does not know in advance."""
    import pandas as pd

    from fairtune.fairness import METRICS
    from fairtune.fairness.metrics import RATE_CONDITION

    codes, uniques = pd.factorize(groups)
    spec = METRICS[metric]
    sizes = np.empty((len(uniques), len(spec.rates)))
    rates = np.empty_like(sizes)
    for column, rate in enumerate(spec.rates):
        label = RATE_CONDITION[rate][0]
        rows = slice(None) if label is None else y == label
        sizes[:, column] = np.bincount(codes[rows], minlength=len(uniques))
        rates[:, column] = float(np.mean(y)) if label is None else 0.5
    return sizes, rates


def rows_needed(metric: str, sizes: np.ndarray, rates: np.ndarray, delta: float,
                room: float, rows: int) -> int | None:
    """About how many safety rows (in the proportions of ``sizes``) make the width of
    ``metric``'s bound smaller than ``room``; None when no number does."""
    from fairtune.fairness.bounds import metric_bound_width

    if room <= 0.0 or not np.all(sizes > 0):
        return None

    def fits(scale: float) -> bool:
        return metric_bound_width(metric, sizes * scale, rates, delta=delta) < room

    # The width falls with the rows (about as one over their square root): double the scale
    # until it fits, then bisect.
    low, high = 0.0, 1.0
    while not fits(high):
        low, high = high, 2.0 * high
        if high > 1e12:
            return None
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (low, middle) if fits(middle) else (middle, high)
    return int(np.ceil(rows * high))


def rate_labels(limits: Sequence[Any]) -> list[tuple[str, str, int]]:
    """``(limit, rate, label)`` for each rate of the ``limits`` that is measured on the rows of
    one label: the true positive rate on the favourable rows (1), the false positive rate on
    the unfavourable ones (0)."""
    from fairtune.fairness import METRICS
    from fairtune.fairness.metrics import RATE_CONDITION

    return [(str(limit), rate.replace("_", " "), label)
            for limit in limits or () for rate in METRICS[limit.metric].rates
            if (label := RATE_CONDITION[rate][0]) is not None]


def limits_for_search(limits: Sequence[Any], confidence: float, y_safe: Any,
                      s_safe: Any, margin: float = 0.0) -> list[Any]:
    """The limits the search validates against: each tightened by the width its bound will
    have on the safety rows (see the module docstring), so that the models it finds can pass.

    Raises:
        ValueError: If the safety rows are too few for any model to be certified, or a group
            of them has no row of a label that a limit's rate is measured on.
    """
    from fairtune._validation import check_groups_have_labels, sensitive_groups
    from fairtune.fairness import FairnessLimit
    from fairtune.fairness.bounds import metric_bound_width

    y = np.asarray(y_safe).astype(int)
    groups = sensitive_groups(s_safe)
    delta = _delta(confidence, limits)
    tightened = []
    for limit in limits:
        sizes, rates = _sizes(limit.metric, y, groups)
        # A rate measured on no row of a group cannot be bounded by any number of rows of
        # the other groups: name the cause rather than a count of rows.
        check_groups_have_labels(groups, y, rate_labels([limit]), where="the safety rows",
                                 argument="The sensitive features",
                                 shares=[("safety_size", None, "a larger")])
        width = metric_bound_width(limit.metric, sizes, rates, delta=delta)
        bound = limit.bound - width if limit.sense == "upper" else limit.bound + width
        room = limit.bound if limit.sense == "upper" else 1.0 - limit.bound
        if width >= room:
            less = (f" (the limit as given less {arg('margin')} {margin:g})" if margin else "")
            needed = rows_needed(limit.metric, sizes, rates, delta, room, len(y))
            estimate = (
                f"the width falls as one over the square root of the rows: it fits under the "
                f"limit from about {needed:,} safety rows on" if needed is not None else
                "a limit that leaves no room is certified by no number of rows")
            raise ValueError(
                f"{arg('confidence')} {confidence:g} cannot be reached for {limit}{less} on "
                f"{len(y)} safety rows (the smallest group has {int(sizes.min())} of the rows "
                f"a rate is measured on): a bound on them would be at least {width:.3f} from "
                f"the measured value, no less than the room the limit leaves a perfectly fair "
                f"model ({room:.3f}; {estimate}). Give "
                f"more rows ({arg('safety_size')}, or more data), a lower "
                f"{arg('confidence')}, or a looser limit"
                + (f" (or a smaller {arg('margin')}: the certificate needs none)." if margin
                   else ".")
            )
        tightened.append(FairnessLimit(limit.metric, round(bound, 10)))
    return tightened


def safety_bounds(limits: Sequence[Any], confidence: float, y_safe: Any, predicted: Any,
                  s_safe: Any) -> dict[str, float]:
    """Each limit's bound of a candidate's predictions of the safety rows."""
    from fairtune.fairness.bounds import metric_bound

    delta = _delta(confidence, limits)
    return {limit.metric: metric_bound(limit.metric, y_safe, predicted,
                                       sensitive_features=s_safe, delta=delta)
            for limit in limits}


def first_certified(candidates: Sequence[Any], bounds_of: Any, limits: Sequence[Any],
                    confidence: float, rows: int, tested_before: Sequence[int] = ()
                    ) -> tuple[Any, Certificate]:
    """The first of ``candidates`` (trials, best first) whose bounds keep every limit, with its
    certificate; ``bounds_of(trial) -> (model, {metric: bound}, {metric: value}, predicted)``,
    ``predicted`` the model's predictions of the safety rows. ``tested_before`` (an earlier
    certification's trials) count against the safety rows' budget of :data:`CANDIDATES`; once
    it is spent no new trial is tested.

    Raises:
        NotCertifiedError: Naming the best candidate's bounds and what would change them.
    """
    tested = list(dict.fromkeys(int(n) for n in tested_before))
    tried: list[tuple[Any, dict[str, float], int | None]] = []
    skipped: list[int] = []
    for trial in candidates:
        if trial.number not in tested:
            if len(tested) >= CANDIDATES:
                skipped.append(trial.number)
                continue
            tested.append(trial.number)
        model, bounds, values, predicted = bounds_of(trial)
        if all(limit.violation(bounds[limit.metric]) <= 0 for limit in limits):
            if skipped:
                warnings.warn(
                    f"Trial{'s' if len(skipped) > 1 else ''} "
                    f"{', '.join(f'#{n}' for n in skipped)}, fair and ranked above the "
                    f"certified trial #{trial.number}, {'were' if len(skipped) > 1 else 'was'} "
                    f"never tested: the safety rows' {CANDIDATES} candidates were all spent on "
                    "other trials (new safety rows, another study or more data, would test "
                    "them).", UserWarning, stacklevel=4)
            return model, Certificate(
                trial=trial.number, level=confidence, bounds=bounds,
                limits=[str(limit) for limit in limits], rows=rows, candidates=CANDIDATES,
                tested=len(tested), values=values, tested_trials=tested,
                positive_rate=float(np.mean(predicted)), one_class=_one_class(predicted))
        tried.append((trial, bounds, _one_class(predicted)))
        if len(tried) >= CANDIDATES:
            break
    if not tried:
        if skipped:
            raise NotCertifiedError(
                f"No model could be certified: the safety rows have been spent on "
                f"{CANDIDATES} candidates (trials {', '.join(f'#{n}' for n in tested)}), the "
                f"most their bounds are accounted for, and none of the study's fair trials is "
                f"among them. New safety rows (another study, or more data) are needed.",
                tested)
        raise NotCertifiedError(
            f"No model could be certified: the search found no fair trial to test on the "
            f"safety rows (under the limits tightened for {arg('confidence')} "
            f"{confidence:g}). Run more trials, loosen the limits or lower "
            f"{arg('confidence')}.", tested)
    trial, bounds, constant = tried[0]
    shown = ", ".join(f"{name} {bound:.4f}" for name, bound in bounds.items())
    advice = (f"More safety rows (a larger {arg('safety_size')} in a new study, or more data) "
              f"narrow the bounds; a looser limit or a lower {arg('confidence')} asks less.")
    if skipped:  # fair trials the spent candidates left untested: only new rows test them
        plural = len(skipped) > 1
        advice = (f"Trial{'s' if plural else ''} {', '.join(f'#{n}' for n in skipped)}, fair, "
                  f"{'were' if plural else 'was'} never tested: the safety rows' {CANDIDATES} "
                  "candidates are spent; new safety rows (another study, or more data) would "
                  "test them. " + advice)
    if constant == 0 and any(limit.metric == "disparate_impact" for limit in limits):
        advice = ("It selected no one (it predicted 0 for every safety row): the ratio of two "
                  "rates of 0 can be anything on new data, so no number of rows certifies it "
                  "under a disparate_impact limit; a model that selects someone can pass.")
    raise NotCertifiedError(
        f"No model could be certified at {arg('confidence')} {confidence:g}: the best "
        f"candidate, trial #{trial.number}, has the bounds {shown} on {rows} safety rows, "
        f"beyond {', '.join(str(limit) for limit in limits)} ({len(tested)} of {CANDIDATES} "
        f"candidates tested). {advice}", tested)


def _verdict_key(tenant: str | None) -> str:
    return CERTIFICATE_KEY + ("" if tenant is None else ":" + tenant)


def candidates(study: Any, tenant: str | None = None) -> list[Any]:
    """The study's fair completed trials (``tenant``'s only), best first: the order in which
    the safety test tries them."""
    from optuna.trial import TrialState

    from fairtune.fairness import is_fair, study_limits
    from fairtune.tenancy import tenant_of

    fair_by = study_limits(study, tenant)
    return sorted(
        (t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
         if (tenant is None or tenant_of(t) == tenant) and is_fair(t, fair_by)),
        key=lambda t: (-t.value, t.number))


def store_verdict(study: Any, verdict: Certificate | NotCertifiedError,
                  tenant: str | None = None) -> None:
    """Record the safety test's verdict with ``study`` (``"fairtune:certificate"``, a tenant's
    under ``"fairtune:certificate:<tenant>"``): the certificate, or the refusal's text, with
    the trials tested on the safety rows so far. Every entrance records it through here."""
    if isinstance(verdict, Certificate):
        record = {"certified": True, **verdict.as_dict(), "message": verdict.text()}
    else:
        record = {"certified": False, "message": str(verdict),
                  "tested_trials": list(verdict.tested_trials)}
    study.set_user_attr(_verdict_key(tenant), record)


def record_refusal(study: Any, message: str, tenant: str | None = None) -> NotCertifiedError:
    """A refusal before any candidate was tested (no fair trial), recorded with ``study`` like
    every other verdict and returned to be raised."""
    refusal = NotCertifiedError(message, _tested_before(study, _verdict_key(tenant)))
    store_verdict(study, refusal, tenant)
    return refusal


def forget_verdict(study: Any, tenant: str | None = None) -> None:
    """Before a new certification of ``study`` (a resumed search): drop the earlier verdict,
    which no longer speaks for the study's trials, but keep the safety rows' budget (the
    trials already tested on them)."""
    key = _verdict_key(tenant)
    if "message" in (study.user_attrs.get(key) or {}):
        study.set_user_attr(key, {"tested_trials": _tested_before(study, key)})


def _tested_before(study: Any, key: str) -> list[int]:
    """The trials an earlier certification of ``study`` tested on its safety rows."""
    record = study.user_attrs.get(key) or {}
    return [int(n) for n in record.get("tested_trials") or []] if isinstance(record, dict) else []


def certify(study: Any, fit_predict: Any, limits: Sequence[Any], confidence: float,
            y_safe: Any, s_safe: Any, tenant: str | None = None) -> tuple[Any, Certificate]:
    """The safety test of ``study``'s fair trials (``tenant``'s), best first: the first whose
    model keeps every limit on the safety rows, with its certificate (also set as the model's
    ``certificate_``); the verdict is stored with the study. ``fit_predict(trial) -> (model,
    predicted)`` fits the trial's model on the search rows and predicts the safety rows.

    Raises:
        NotCertifiedError: Naming the best candidate's bounds and what would change them.
    """
    from fairtune.tuning._trial import fairness_value

    y_safe = np.asarray(y_safe)

    def bounds_of(trial: Any) -> tuple[Any, dict[str, float], dict[str, float], Any]:
        model, predicted = fit_predict(trial)
        bounds = safety_bounds(limits, confidence, y_safe, predicted, s_safe)
        values = {limit.metric: fairness_value(limit.metric, y_safe, predicted, s_safe)
                  for limit in limits}
        return model, bounds, values, predicted

    try:
        model, certificate = first_certified(
            candidates(study, tenant), bounds_of, limits, confidence, len(y_safe),
            _tested_before(study, _verdict_key(tenant)))
    except NotCertifiedError as refusal:
        store_verdict(study, refusal, tenant)
        raise
    model.certificate_ = certificate
    store_verdict(study, certificate, tenant)
    return model, certificate

