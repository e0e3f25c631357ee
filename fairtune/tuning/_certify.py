"""A deployed model with a stated confidence that it keeps the limits on new data, or a refusal.

A limit met on validation rows is a measurement of the best of many tries, optimistically
biased. With ``confidence=`` an entrance works in the manner of the Seldonian framework
(Thomas et al., "Preventing undesirable behavior of intelligent machines", Science 2019):

1. Safety rows: a share of the tuning rows (``safety_size``, stratified by label) that the
   search never sees, split off before the validation split or folds.
2. The search aims at models that can pass: every limit is tightened by the width that the
   chosen test is predicted to need on the safety rows' groups (:func:`limits_for_search`).
3. The safety test, an intersection-union test (Berger & Hsu, Statistical Science 1996): a
   model passes when, for every limit, every pair of groups and every rate, a one-sided test
   at the full level ``1 - confidence`` shows the limit kept
   (:func:`fairtune.fairness.bounds.metric_bound`, ``bound=`` chooses the test). A conjunction
   needs no split of the error probability over its parts.
4. Candidates in a fixed sequence (Learn then Test, Angelopoulos et al. 2021; Pareto Testing,
   Laufer-Goldshtein et al. 2023): of the :data:`CANDIDATES` most accurate fair trials, those
   that no other of them beats both in accuracy and in room under the limits on the tuning
   rows, the furthest inside first, each next one more accurate, are tested at the full level
   until one fails; the most accurate that passed is certified (a dominated candidate could
   only stop the sequence). A resumed study tests its new candidates more accurate than those
   that passed; once one has failed, the safety rows are spent. Until the first failure the
   sequence depends on the tuning rows alone, so the certified model breaks a limit on the
   population with probability at most ``1 - confidence``, whatever the sequence.
5. Else a refusal that names, for the failed candidate, the smallest limit that would have
   passed.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from fairtune._keys import CERTIFICATE_KEY, POSITIVE_RATE_KEY
from fairtune._names import arg, check_fraction, got
from fairtune._text import percent

__all__ = ["CANDIDATES", "SAFETY_SIZE", "SPENT", "TEST_NAMES", "Certificate", "NotCertifiedError",
           "aimed_text", "candidates", "certify", "check_bound", "check_confidence",
           "forget_verdict", "limits_for_search", "one_class_text", "rate_labels",
           "record_refusal", "sequence", "store_verdict", "tested_before", "trials_text",
           "untested_text"]

#: The most accurate fair trials a certification considers, in a fixed sequence.
CANDIDATES = 5

#: Why a verdict stands although better fair trials were never tested.
SPENT = "the sequence of tests stopped at a candidate that failed, which spent the safety rows"

#: The share of the tuning rows kept for the safety test by default: the best of 0.3, 0.5 and
#: 0.6 in certified accuracy on 5,000-row samples of Adult (benchmarks/certified_real.py).
SAFETY_SIZE = 0.5

#: The tests a certificate can use (``bound=``), by the name a certificate gives them.
TEST_NAMES = {"exact": "an exact test", "score": "the score test",
              "hoeffding": "Hoeffding's inequality"}


@dataclass
class Certificate:
    """A model's certificate: with probability at least ``level``, each fairness metric of the
    model on the population the rows come from is within ``bounds`` (an upper bound of a gap,
    a lower bound of a ratio), which keep the ``limits``.

    Attributes:
        trial: The number of the certified trial.
        level: The confidence level.
        bounds: ``{metric: bound}``: the smallest limit that would have passed.
        limits: The limits certified, as text.
        rows: The safety rows the bounds were computed on.
        method: The test of each pair of groups (a key of :data:`TEST_NAMES`).
        tested: How many candidates have been tested on these safety rows, over every
            certification of the study (this one included).
        tested_trials: Their trial numbers, in the order they were tested.
        passed_trials: Those of them that passed.
        positive_rate: The certified model's mean prediction of 1 over the safety rows.
        one_class: The class the certified model predicted for every safety row, or None.
    """

    trial: int
    level: float
    bounds: dict[str, float]
    limits: list[str]
    rows: int
    method: str
    tested: int
    values: dict[str, float] = field(default_factory=dict)
    tested_trials: list[int] = field(default_factory=list)
    passed_trials: list[int] = field(default_factory=list)
    positive_rate: float | None = None
    one_class: int | None = None

    def text(self) -> str:
        """One line for a person: what is guaranteed, at what level, on what; and, of a model
        that predicted one class for every safety row, that it is a constant model."""
        shown = bounds_text(self.bounds)
        text = (f"Certified: trial #{self.trial} keeps {', '.join(self.limits)} on new data "
                f"with {percent(self.level)} confidence ({shown} on the population, by "
                f"{TEST_NAMES[self.method]} on {self.rows} safety rows the search never saw; "
                f"{self.tested} candidate{'s' if self.tested != 1 else ''} tested in sequence).")
        if self.one_class is not None:
            text += " " + one_class_text(self.trial, self.one_class, self.rows)
        return text

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def bounds_text(bounds: dict[str, float]) -> str:
    """``{metric: bound}`` for a person, each rounded away from the limits (a gap's bound up, a
    ratio's down): the limit shown is one the test passes, never a tighter one."""
    # (At 1e-6 of a unit, so that 0.0007 stays 0.0007 despite 0.0007 * 1e4 = 7.000000000000001.)
    return ", ".join(f"{name} >= {np.floor(round(bound * 1e4, 6)) / 1e4:.4f}"
                     if name == "disparate_impact"
                     else f"{name} <= {np.ceil(round(bound * 1e4, 6)) / 1e4:.4f}"
                     for name, bound in bounds.items())


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
    ``tested_trials`` are the trials tested on the safety rows so far, ``passed_trials``
    those that passed, ``failure`` the test of the one that failed (its trial, bounds, safety
    rows and test), or None."""

    def __init__(self, message: str, tested_trials: Sequence[int] = (),
                 passed_trials: Sequence[int] = (),
                 failure: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.tested_trials = list(tested_trials)
        self.passed_trials = list(passed_trials)
        self.failure = failure


def check_confidence(confidence: Any, safety_size: Any, limits: Sequence[Any],
                     objectives: Sequence[str] = ()) -> tuple[float | None, float | None]:
    """``(confidence, safety_size)`` checked: a level in (0, 1) with limits to certify, and a
    share of the tuning rows in (0, 1) (:data:`SAFETY_SIZE` when not given)."""
    if confidence is None:
        if safety_size is not None:
            raise ValueError(f"{arg('safety_size')} holds out rows for the safety test of "
                             f"{arg('confidence')}, so {arg('confidence')} must be given with "
                             f"it, but got {got('safety_size', safety_size)} and "
                             f"{got('confidence', None)}.")
        return None, None
    if isinstance(confidence, bool) or not isinstance(
            confidence, (float, int, np.integer, np.floating)) or (
            not 0.5 < float(confidence) < 1.0):
        # At a level of one half or less, a one-sided bound lies at or inside the measured
        # value: no statement about new data.
        raise ValueError(f"{arg('confidence')} must be a level in (0.5, 1), e.g. 0.95, but "
                         f"got {got('confidence', confidence)}.")
    if not limits:
        raise ValueError(f"{arg('confidence')} certifies fairness limits, so {arg('limits')} "
                         f"must be given with it, but got {got('limits', None)}.")
    if objectives:
        raise ValueError(f"{arg('confidence')} certifies the one best fair model of a "
                         f"single-objective search; a multi-objective study has no single best "
                         f"model, but got {got('objectives', list(objectives))}.")
    share = SAFETY_SIZE if safety_size is None else safety_size
    check_fraction("safety_size", share)
    # A float32 0.95 is 0.949999988...: read numpy's floats as the number they print.
    return float(str(confidence)), float(str(share))


def check_bound(bound: Any, confidence: float | None) -> str | None:
    """``bound``, the test of the safety rows, checked: one of :data:`TEST_NAMES`, given only
    with ``confidence`` ("exact" when not given)."""
    if bound is None:
        return None if confidence is None else "exact"
    if confidence is None:
        raise ValueError(f"{arg('bound')} chooses the test of {arg('confidence')}'s safety "
                         f"rows, so {arg('confidence')} must be given with it, but got "
                         f"{got('bound', bound)} and {got('confidence', None)}.")
    if bound not in TEST_NAMES:
        raise ValueError(f"{arg('bound')} must be one of {', '.join(map(repr, TEST_NAMES))}, "
                         f"but got {got('bound', bound)}.")
    return str(bound)


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


def rows_needed(metric: str, sizes: np.ndarray, rates: np.ndarray, alpha: float,
                room: float, rows: int, method: str) -> int | None:
    """About how many safety rows (in the proportions of ``sizes``) make the width of
    ``metric``'s bound smaller than ``room``; None when no number does."""
    from fairtune.fairness.bounds import metric_bound_width

    if room <= 0.0 or not np.all(sizes > 0):
        return None

    def fits(scale: float) -> bool:
        return metric_bound_width(metric, sizes * scale, rates, alpha=alpha,
                                  method=method) < room

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
                      s_safe: Any, margin: float = 0.0, method: str = "exact") -> list[Any]:
    """The limits the search validates against: each tightened by the width that the test
    ``method`` is predicted to need on the safety rows (see the module docstring), so that
    the models it finds can pass.

    Raises:
        ValueError: If the safety rows are too few for any model to be certified (naming the
            smallest limit they could certify, and the rows the limit would need), or a group
            of them has no row of a label that a limit's rate is measured on.
    """
    from fairtune._validation import check_groups_have_labels, sensitive_groups
    from fairtune.fairness import FairnessLimit
    from fairtune.fairness.bounds import metric_bound_width

    y = np.asarray(y_safe).astype(int)
    groups = sensitive_groups(s_safe)
    tightened = []
    for limit in limits:
        sizes, rates = _sizes(limit.metric, y, groups)
        # A rate measured on no row of a group cannot be bounded by any number of rows of
        # the other groups: name the cause rather than a count of rows.
        check_groups_have_labels(groups, y, rate_labels([limit]), where="the safety rows",
                                 argument="The sensitive features",
                                 share=("safety_size", None, "a larger"))
        width = metric_bound_width(limit.metric, sizes, rates, alpha=1.0 - confidence,
                                   method=method)
        bound = limit.bound - width if limit.sense == "upper" else limit.bound + width
        room = limit.bound if limit.sense == "upper" else 1.0 - limit.bound
        if width >= room:
            raise ValueError(_too_few(limit, confidence, width, room, y, sizes, rates, margin,
                                      method))
        tightened.append(FairnessLimit(limit.metric, round(bound, 10)))
    return tightened


def _too_few(limit: Any, confidence: float, width: float, room: float, y: np.ndarray,
             sizes: np.ndarray, rates: np.ndarray, margin: float, method: str) -> str:
    """The refusal of safety rows on which no model could be certified for ``limit``."""
    less = f" (the limit as given less {arg('margin')} {margin:g})" if margin else ""
    # Rounded away from the limit, so that a refused limit is never shown as reachable.
    smallest = (f"{limit.metric}<={np.ceil(width * 1000) / 1000:.3f}"
                if limit.sense == "upper"
                else f"{limit.metric}>={np.floor((1.0 - width) * 1000) / 1000:.3f}")
    # Rows at which the test needs half the room: a search aimed at half the limit, which
    # validation rows can measure (at the full room it would aim at a gap of 0).
    needed = rows_needed(limit.metric, sizes, rates, 1.0 - confidence, room / 2, len(y),
                         method)
    estimate, fixes = ((
        f"{limit} needs about {needed:,} safety rows, to leave the search half of it",
        f"Give more rows ({arg('safety_size')}, or more data), a lower {arg('confidence')}, "
        "or a looser limit") if needed is not None else (
        "a limit that leaves no room is certified by no number of rows", "Give a looser limit"))
    return (f"{arg('confidence')} {confidence:g} cannot be reached for {limit}{less} on "
            f"{len(y)} safety rows (the smallest group has {int(sizes.min())} of the rows a "
            f"rate is measured on): even a perfectly fair model would be certified no "
            f"tighter than {smallest} by {TEST_NAMES[method]} ({estimate}). {fixes}"
            + (f" (or a smaller {arg('margin')}: the certificate needs none)." if margin
               else "."))


def aimed_text(given: Sequence[Any], validated: Sequence[Any], margin: float,
               confidence: float | None, method: str | None, test_split: bool) -> str:
    """Why the trials are validated against ``validated`` instead of the limits as ``given``:
    the margin, and with ``confidence`` the width the test is predicted to need on the safety
    rows, whence the tightest limits they could certify (for a perfectly fair model); with a
    ``test_split``, that it is judged against the limits as given."""
    why = [f"a margin of {margin:g}"] if margin else []
    if confidence is not None:
        widths = {v.metric: abs(g.bound - v.bound) - margin
                  for g, v in zip(given, validated, strict=True)}
        tightest = ", ".join(f"{g.metric}<={widths[g.metric]:.3f}" if g.sense == "upper" else
                             f"{g.metric}>={1 - widths[g.metric]:.3f}" for g in given)
        why.append(f"the width {TEST_NAMES[method or 'exact']} at {percent(confidence)} is "
                   f"predicted to need on the safety rows, which could certify no limit "
                   f"tighter than {tightest}")
    judged = f"; the test split is judged against {', '.join(map(str, given))}"
    return (f"Trials validated against {', '.join(map(str, validated))} (the limits tightened "
            f"by {' and '.join(why)}){judged if test_split else ''}.")


def safety_bounds(limits: Sequence[Any], confidence: float, y_safe: Any, predicted: Any,
                  s_safe: Any, method: str = "exact") -> dict[str, float]:
    """Each limit's bound of a candidate's predictions of the safety rows, each at the full
    level (an intersection-union test)."""
    from fairtune.fairness.bounds import metric_bound

    return {limit.metric: metric_bound(limit.metric, y_safe, predicted,
                                       sensitive_features=s_safe, alpha=1.0 - confidence,
                                       method=method)
            for limit in limits}


def slack(trial: Any, limits: Sequence[Any], validated: Sequence[Any]) -> float:
    """How far ``trial`` lies inside its limits on the tuning rows, in units of each limit's
    predicted width (the limit as given less the one validated against): the sequence's key."""
    from fairtune.fairness import fairness_values

    values = fairness_values(trial)
    if trial.user_attrs.get(POSITIVE_RATE_KEY) == 0 and any(
            limit.metric == "disparate_impact" for limit in limits):
        return -np.inf  # it selected no one: a ratio of two rates of 0 has no known room
    aimed = {limit.metric: limit.bound for limit in validated}
    room = []
    for limit in limits:
        width = abs(limit.bound - aimed.get(limit.metric, limit.bound)) or 1.0
        inside = limit.bound - values[limit.metric] if limit.sense == "upper" else (
            values[limit.metric] - limit.bound)
        room.append(inside / width)
    return min(room, default=0.0)


def sequence(study: Any, limits: Sequence[Any], tenant: str | None, tested: Sequence[int]
             ) -> list[Any]:
    """The next candidates of ``study``'s fixed sequence (see the module docstring), of its fair
    trials more accurate than those ``tested``."""
    from fairtune.fairness import study_limits

    validated = [v for v in study_limits(study, tenant).values() if v is not None]
    ranked = candidates(study, tenant)  # the most accurate first
    best = max((t.value for t in ranked if t.number in tested), default=-np.inf)
    fresh = [t for t in ranked if t.value > best][:CANDIDATES]  # the room of these only
    front: list[Any] = []
    for trial in sorted(fresh, key=lambda t: (-slack(t, limits, validated), -t.value, t.number)):
        front += [trial] if not front or trial.value > front[-1].value else []
    return front


def _verdict_key(tenant: str | None) -> str:
    return CERTIFICATE_KEY + ("" if tenant is None else ":" + tenant)


def candidates(study: Any, tenant: str | None = None) -> list[Any]:
    """The study's fair completed trials (``tenant``'s only), best first."""
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
    the trials tested on the safety rows so far and those that passed."""
    if isinstance(verdict, Certificate):
        record = {"certified": True, **verdict.as_dict(), "message": verdict.text()}
    else:
        record = {"certified": False, "message": str(verdict),
                  "tested_trials": list(verdict.tested_trials),
                  "passed_trials": list(verdict.passed_trials),
                  **({"failure": verdict.failure} if verdict.failure else {})}
    study.set_user_attr(_verdict_key(tenant), record)


def record_refusal(study: Any, message: str, tenant: str | None = None) -> NotCertifiedError:
    """A refusal before any candidate was tested (no fair trial), recorded, to be raised."""
    refusal = NotCertifiedError(message, *tested_before(study, tenant),
                                failure=_failure(study, tenant))
    store_verdict(study, refusal, tenant)
    return refusal


def forget_verdict(study: Any, tenant: str | None = None) -> None:
    """Before a new certification of ``study``: drop the verdict, keep the sequence so far."""
    key = _verdict_key(tenant)
    if "message" in (study.user_attrs.get(key) or {}):
        tested, passed = tested_before(study, tenant)
        failure = _failure(study, tenant)
        study.set_user_attr(key, {"tested_trials": tested, "passed_trials": passed,
                                  **({"failure": failure} if failure else {})})


def _failure(study: Any, tenant: str | None) -> dict[str, Any] | None:
    """The stored test of the candidate that failed (its trial, bounds, rows and test), or None."""
    record = study.user_attrs.get(_verdict_key(tenant))
    failure = record.get("failure") if isinstance(record, dict) else None
    return failure if isinstance(failure, dict) else None


def tested_before(study: Any, tenant: str | None = None) -> tuple[list[int], list[int]]:
    """``(tested, passed)``: the trials earlier certifications of ``study`` tested, in order,
    and those that passed (an older version's record: its certified trial only)."""
    record = study.user_attrs.get(_verdict_key(tenant)) or {}
    if not isinstance(record, dict):
        return [], []
    tested = [int(n) for n in record.get("tested_trials") or []]
    passed = record.get("passed_trials")
    if passed is None:
        passed = [record["trial"]] if record.get("certified") else []
    return tested, [int(n) for n in passed]


def certify(study: Any, fit_predict: Any, limits: Sequence[Any], confidence: float,
            y_safe: Any, s_safe: Any, tenant: str | None = None, method: str = "exact"
            ) -> tuple[Any, Certificate]:
    """The safety test of ``study``'s fair trials (``tenant``'s) in their fixed sequence: the
    most accurate that passed, with its certificate (also set as the model's
    ``certificate_``); the verdict is stored with the study. ``fit_predict(trial) -> (model,
    predicted)`` fits the trial's model on the search rows and predicts the safety rows.

    Raises:
        NotCertifiedError: Naming the failed candidate's bounds and what would change them.
    """
    from fairtune.tuning._trial import fairness_value

    y_safe = np.asarray(y_safe)
    tested, passed = tested_before(study, tenant)
    failed = [n for n in tested if n not in passed]
    results: dict[int, tuple[Any, dict[str, float], dict[str, float], Any]] = {}

    def test(trial: Any) -> bool:
        try:
            model, predicted = fit_predict(trial)
        except Exception as error:  # the model's own error, with the trial it came from
            error.add_note(f"Refitting trial #{trial.number} for the safety test failed "
                           "(nothing was recorded).")
            raise
        bounds = safety_bounds(limits, confidence, y_safe, predicted, s_safe, method)
        values = {m.metric: fairness_value(m.metric, y_safe, predicted, s_safe) for m in limits}
        results[trial.number] = (model, bounds, values, predicted)
        return all(limit.violation(bounds[limit.metric]) <= 0 for limit in limits)

    for trial in [] if failed else sequence(study, limits, tenant, tested):
        tested.append(trial.number)
        if not test(trial):
            failed.append(trial.number)
            break
        passed.append(trial.number)
    ranked = candidates(study, tenant)
    best = next((t for t in ranked if t.number in passed), None)
    if best is None:
        failure = _failure(study, tenant)
        if failed and failed[0] in results:
            _, bounds, _, predicted = results[failed[0]]
            failure = {"trial": failed[0], "bounds": bounds, "rows": len(y_safe),
                       "method": method, "one_class": _one_class(predicted)}
        refusal = _refusal(ranked, limits, confidence, tested, failed, failure)
        store_verdict(study, refusal, tenant)
        raise refusal
    if best.number not in results:  # certified by an earlier run: its model, refitted
        test(best)
    model, bounds, values, predicted = results[best.number]
    certificate = Certificate(
        trial=best.number, level=confidence, bounds=bounds,
        limits=[str(limit) for limit in limits], rows=len(y_safe), method=method,
        tested=len(tested), values=values, tested_trials=tested, passed_trials=passed,
        positive_rate=float(np.mean(predicted)), one_class=_one_class(predicted))
    model.certificate_ = certificate
    store_verdict(study, certificate, tenant)
    above = [t.number for t in ranked if t.value > best.value and t.number not in tested]
    if failed and above:  # the safety rows are spent
        warnings.warn(untested_text(above, True), UserWarning, stacklevel=3)
    return model, certificate


def trials_text(numbers: Sequence[int]) -> tuple[str, str]:
    """``("s" or "", "#3, #5")``: the plural's ending and the trials, ten at most."""
    numbers = sorted(numbers)
    return "s" if len(numbers) > 1 else "", ", ".join(f"#{n}" for n in numbers[:10]) + (
        f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")


def untested_text(untested: Sequence[int], certified: bool) -> str:
    """The fair trials above the certified one (any, after a refusal) never tested, or ''."""
    if not untested:
        return ""
    plural, shown = trials_text(untested)
    where = "above the certified trial" if certified else "fair"
    return (f"Never tested on the safety rows: trial{plural} {shown}, {where}: {SPENT} "
            "(only new safety rows, in another study or with more data, could test them).")


def _refusal(ranked: Sequence[Any], limits: Sequence[Any], confidence: float,
             tested: list[int], failed: list[int], failure: dict[str, Any] | None
             ) -> NotCertifiedError:
    """Why no model is certified: no fair trial, or the bounds of the candidate that failed
    (the smallest limits that would have passed), tested in this run or an earlier one."""
    if not ranked or not failed:
        return NotCertifiedError(
            f"No model could be certified: the search found no fair trial to test on the "
            f"safety rows (under the limits tightened for {arg('confidence')} "
            f"{confidence:g}). Run more trials, loosen the limits or lower "
            f"{arg('confidence')}.", tested, (), failure)
    if failure is None or failure.get("trial") != failed[0]:  # a record of an older version
        return NotCertifiedError(
            f"No model could be certified: the sequence of tests on these safety rows stopped "
            f"at trial #{failed[0]}, which failed, so none of the study's fair trials can be "
            f"tested on them. New safety rows (another study, or more data) are needed.",
            tested, (), failure)
    shown = bounds_text(failure["bounds"])
    advice = (f"More safety rows (a larger {arg('safety_size')} in a new study, or more data) "
              f"narrow the bounds; a looser limit or a lower {arg('confidence')} asks less.")
    if failure.get("one_class") == 0 and any(lim.metric == "disparate_impact"
                                             for lim in limits):
        advice = ("It selected no one (it predicted 0 for every safety row): the ratio of two "
                  "rates of 0 can be anything on new data, so no number of rows certifies it "
                  "under a disparate_impact limit; a model that selects someone can pass.")
    return NotCertifiedError(
        f"No model could be certified at {arg('confidence')} {confidence:g}: the sequence of "
        f"tests stopped at trial #{failed[0]}, which would pass only {shown} on "
        f"{failure['rows']} safety rows (by {TEST_NAMES[failure['method']]}), beyond "
        f"{', '.join(str(limit) for limit in limits)}. The safety rows are spent: no other "
        f"trial is tested on them. {advice}", tested, (), failure)
