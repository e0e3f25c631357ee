"""The model to deploy from a study: one record, decided here, that every view renders.

Every view (the command line, the reports, the dashboard, ``refit_best``, FairSearchCV's
``best_*``) reads :func:`deployment`, so that no two of them can name different models.

The rule, for a single-objective study (a tenant's trials in a shared study):

1. Without limits, the best completed trial; with limits, the best fair trial
   (:func:`fairtune.fairness.best_fair_trial`), or none when no trial is fair.
2. With ``confidence`` only a certified model is deployed: the trial of the safety test's
   certificate, as long as the certificate speaks for the trials as they stand. A fair trial
   more accurate than the certified one (any after a refusal) and that the safety test
   never tried makes the verdict outdated while the safety rows are not spent (no candidate
   of their fixed sequence has failed): nothing is deployed until the test runs again. Once
   they are spent no new trial can be tried, the verdict stands, and the record names the
   trials it passed over untested.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from fairtune import _keys
from fairtune.tuning import _certify

__all__ = ["TEST_CONFIDENCE", "Deployment", "ScoresOnTest", "conclude", "deployment",
           "read_test_fits", "store_test_fits"]

Why = Literal["certified", "best_fair", "best", "refused", "pending", "no_fair", "empty"]


@dataclass(frozen=True)
class Deployment:
    """Which trial's model to deploy, and why (:func:`deployment`).

    Attributes:
        trial: The trial whose model to deploy, or None: deploy no model.
        why: ``"certified"`` (the safety test's certificate), ``"best_fair"`` (the best fair
            trial, no ``confidence``), ``"best"`` (a study without limits: its best trial),
            ``"refused"`` (the safety test certified none), ``"pending"`` (``confidence``, and
            no verdict that speaks for the trials as they stand), ``"no_fair"`` (no trial meets
            every limit), ``"empty"`` (no completed trial).
        best: The best fair trial (a study without limits: its best trial), or None.
        confidence: The level the study was set up with, or None.
        certificate: The safety test's stored verdict (``{"certified": True, "trial": ...}`` or
            ``{"certified": False, "message": ...}``) when it speaks for the trials; else empty.
        failed: The fair trials more accurate than ``trial`` (every fair one after a refusal) that
            the safety test tried and did not certify.
        untested: The fair trials more accurate than ``trial`` that the safety test never tried.
        spent: Whether the safety rows are spent: a candidate of their sequence failed.
    """

    trial: Any
    why: Why
    best: Any = None
    confidence: float | None = None
    certificate: dict[str, Any] = field(default_factory=dict)
    failed: tuple[int, ...] = ()
    untested: tuple[int, ...] = ()
    spent: bool = False

    @property
    def passed_over(self) -> str:
        """Why the best fair trial is not the model to deploy ('' when it is, or none is)."""
        if self.why != "certified" or self.best is None or self.best.number == self.trial.number:
            return ""
        best = f"the best fair trial, #{self.best.number}"
        if self.best.value <= self.trial.value:  # a tie: the sequence took the one further inside
            return f"as accurate as {best}, and further inside the limits on the tuning rows"
        return f"{best}, " + ("did not pass the safety test" if self.best.number in self.failed
                              else f"was never tested: {_certify.SPENT}")

    def pending_text(self) -> str:
        """Of a ``"pending"`` deployment, why no model is certified and where the test runs."""
        if self.why != "pending":
            return ""
        where = ("the safety test runs{} at the end of `fairtune tune --confidence` (in "
                 "Python: objective.conclude(study), or FairSearchCV's fit)")
        if not self.certificate:
            return ("No model is certified yet: with confidence only a certified model is "
                    f"deployed, and {where.format('')}.")
        plural, shown = _certify.trials_text(self.untested)
        if self.certificate.get("certified"):
            was = (f"the certificate of trial #{self.certificate.get('trial')} was recorded "
                   f"before trial{plural} {shown}, fair, ranked above it and not tested on the "
                   "safety rows")
        else:
            was = (f"the safety test's refusal was recorded before trial{plural} {shown}, fair "
                   "and not tested on the safety rows")
        return (f"No model is certified for the trials as they stand: {was}; "
                f"{where.format(' again')}.")

    def untested_text(self) -> str:
        """Of a standing verdict on spent safety rows, the trials it never tried; else ''."""
        if self.why not in ("certified", "refused"):
            return ""
        return _certify.untested_text(self.untested, self.why == "certified")


def conclude(study: Any, tenant: str | None, *, certify: Any = None,
             test_fits: Any = None) -> Deployment:
    """What follows a search, for every entrance: the safety test (``certify() -> model``),
    then the model to deploy, and its scores on the test split (``test_fits(trial, certified
    model or None) -> [ScoresOnTest]``) recorded with the study."""
    from fairtune.tuning._certify import NotCertifiedError, forget_verdict

    certified = None
    if certify is not None:
        forget_verdict(study, tenant)  # this run certifies again
        try:
            certified = certify()
        except NotCertifiedError:
            pass  # recorded with the study: the deployment record says so
    record = deployment(study, tenant)
    if test_fits is not None and record.trial is not None:
        store_test_fits(study, record.trial.number, test_fits(record.trial, certified), tenant)
    return record


def deployment(study: Any, tenant: str | None = None) -> Deployment:
    """The model to deploy from ``study`` (``tenant``'s trials in a study that tenants
    share), by the rule of this module, from the study's records alone."""
    from optuna.trial import TrialState

    from fairtune.fairness import best_fair_trial, study_limits
    from fairtune.tenancy import tenant_of
    from fairtune.tuning._setup import read_setup

    limits = study_limits(study, tenant)
    confidence = read_setup(study, tenant).get("confidence")
    confidence = None if confidence is None else float(confidence)
    if not any(t.state == TrialState.COMPLETE and (tenant is None or tenant_of(t) == tenant)
               for t in study.get_trials(deepcopy=False)):
        return Deployment(None, "empty", confidence=confidence)
    best = best_fair_trial(study, limits, tenant=tenant)
    record = study.user_attrs.get(_certify._verdict_key(tenant))
    record = dict(record) if isinstance(record, dict) else {}
    if best is None:  # a refusal for want of a fair trial is still the safety test's word
        refused = record.get("certified") is False and "message" in record
        return Deployment(None, "refused" if refused else "no_fair", confidence=confidence,
                          certificate=record if refused else {})
    if "message" not in record or "certified" not in record:  # forgotten, or never run
        if confidence is None:
            return Deployment(best, "best_fair" if limits else "best", best)
        return Deployment(None, "pending", best, confidence)
    ranked = _certify.candidates(study, tenant)
    certified = next((t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                      if record["certified"] and t.number == record.get("trial")), None)
    # The fair trials strictly more accurate than the certified one (a tie is no better).
    above = [t.number for t in ranked if certified is None or t.value > certified.value]
    if certified is not None and certified.number not in {t.number for t in ranked}:
        above = []  # no longer fair: nothing ranks above it
    tested, passed = _certify.tested_before(study, tenant)
    if record.get("tested_trials") is None:  # an older record: it stands, as a test of all
        tested = above
    spent = bool(set(tested) - set(passed))
    failed = tuple(n for n in above if n in set(tested))
    untested = tuple(n for n in above if n not in set(tested))
    # Running the test now would try them first.
    if untested and not spent and record.get("tested_trials") is not None:
        return Deployment(None, "pending", best, confidence, record, failed, untested)
    if certified is None:
        return Deployment(None, "refused", best, confidence, record, failed, untested, spent)
    return Deployment(certified, "certified", best, confidence, record, failed, untested, spent)


TEST_CONFIDENCE = 0.95
"""The level of the fairness metrics' bootstrap intervals on the test split."""


@dataclass(frozen=True)
class ScoresOnTest:
    """One fitted model's scores on the test split, as recorded with the study
    (:func:`store_test_fits`).

    Attributes:
        fit: What was fitted: the trial on every tuning row (``"tuning"``), the validated
            model (``"training"``) or the certified model (``"certified"``).
        rows: The test split's rows.
        scores: ``{name: value}``: the objective's metric and each fairness metric.
        intervals: ``{metric: [low, high]}``: each fairness metric's bootstrap interval at
            :data:`TEST_CONFIDENCE`.
        fair: Whether every limit holds on the test split.
        limits: The limits judged, as text.
        unresolved: The limits that lie inside their interval.
    """

    fit: Literal["tuning", "training", "certified"]
    rows: int
    scores: dict[str, float]
    intervals: dict[str, list[float]]
    fair: bool
    limits: list[str]
    unresolved: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, fit: Literal["tuning", "training", "certified"], scores: dict[str, Any],
           rows: int, limits: Any) -> ScoresOnTest:
        """The record of ``scores`` (``FairObjective.evaluate`` at :data:`TEST_CONFIDENCE`)."""
        scores = dict(scores)
        fair, intervals = bool(scores.pop("fair")), scores.pop("intervals")
        scores.pop("certificate", None)
        return cls(fit, int(rows), {k: float(v) for k, v in scores.items()},
                   {k: [float(v[0]), float(v[1])] for k, v in intervals.items()}, fair,
                   [str(limit) for limit in limits],
                   [str(limit) for limit in limits
                    if intervals[limit.metric][0] < limit.bound < intervals[limit.metric][1]])


def _test_key(tenant: str | None) -> str:
    return _keys.TEST_SCORES_KEY if tenant is None else _keys.TENANT_TEST_SCORES_PREFIX + tenant


def store_test_fits(study: Any, trial: int, fits: list[ScoresOnTest],
                    tenant: str | None = None) -> None:
    """Record trial ``trial``'s scores on the test split with ``study`` (a tenant's under its
    own key), for every later report."""
    study.set_user_attr(_test_key(tenant),
                        {"trial": int(trial), "fits": [asdict(fit) for fit in fits]})


def read_test_fits(study: Any, tenant: str | None = None
                   ) -> tuple[int | None, list[ScoresOnTest], list[str]]:
    """``(trial, fits, lines)`` recorded with ``study``: the trial the test scores are of (None
    without), their records, and the lines a study of an older version stored instead."""
    stored = study.user_attrs.get(_test_key(tenant))
    if not isinstance(stored, dict) or not isinstance(stored.get("trial"), int):
        return None, [], []
    fits = [ScoresOnTest(**fit) for fit in stored.get("fits") or [] if isinstance(fit, dict)]
    return stored["trial"], fits, [str(line) for line in stored.get("lines") or []]
