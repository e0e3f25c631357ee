"""The study report: what a reviewer signs a fair model off on, as text or as one HTML page.

:func:`report` reads a single-objective study (any storage) and returns a :class:`StudyReport`:
the setup the study was tuned with (its setup record: data, model, metric, limits and margin,
validation, mitigation, and for a multi-fidelity search the budgets and the pruner), how many
trials completed, were pruned, failed and are fair, the best fair trial (its metric, every
limited fairness value, the predicted positive rate per group, its parameters), what its
deployed model needs at prediction time, how many trials predict one class for everyone, and
the test split's scores with their intervals when the objective (or ``fairtune tune
--test-size``) recorded them. :meth:`StudyReport.text` is what ``fairtune report`` prints;
:meth:`StudyReport.html` is a self-contained page (no external file: the trade-off plot and the
best-fair curve are inline images) that ``fairtune report --html`` and ``tune --html`` write.

A study shared by tenants (:mod:`fairtune.tenancy`) is reported by tenant: each tenant scores
trials on its own data, so there is no best trial across tenants, only each tenant's best fair
trial among its own trials (:func:`tenants_text`, and a section per tenant). Every value from
the data or the user is printed with its control characters escaped.

Example:
    >>> from fairtune.tuning import FairObjective
    >>> objective = FairObjective("german", "random_forest", limits="dsp<=0.05", test_size=0.25)
    >>> study = objective.create_study(seed=0)
    >>> study.optimize(objective, n_trials=4)
    >>> record = objective.conclude(study)  # the model to deploy, its test scores recorded
    >>> page = report(study)
    >>> page.text().splitlines()[0]  # doctest: +ELLIPSIS
    'Study ...: 4 trials, 4 complete, ... fair.'
    >>> page.html().startswith("<!DOCTYPE html>")
    True
"""

from __future__ import annotations

import base64
import html as html_lib
import io
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fairtune import _keys
from fairtune._text import (
    distinct,
    format_table,
    markdown_table,
    markdown_text,
    percent,
    printable,
)
from fairtune.tenancy import check_tenant, study_tenants
from fairtune.tuning import _deployment
from fairtune.tuning._deployment import ScoresOnTest

if TYPE_CHECKING:
    import optuna

__all__ = [
    "TEST_CONFIDENCE",
    "TEST_SCORES_KEY",
    "StudyReport",
    "TenantRow",
    "check_output_path",
    "check_tenant",
    "deployment_lines",
    "format_table",
    "least_unfair_trial",
    "objective_names",
    "pareto_test_text",
    "pareto_text",
    "print_report",
    "report",
    "running_line",
    "save_plot",
    "study_tenants",
    "tenants_text",
    "render_test_scores",
    "with_interval",
]

TEST_CONFIDENCE = _deployment.TEST_CONFIDENCE
"""The level of the fairness metrics' bootstrap intervals on the test split."""
TEST_SCORES_KEY = _keys.TEST_SCORES_KEY
"""Study user attribute: the test split's scores of the model to deploy, as ``{"trial":
number, "fits": [...]}`` (:class:`~fairtune.tuning._deployment.ScoresOnTest` records, written by
``FairObjective.conclude``)."""


def with_interval(value: float, interval: tuple[float, float] | None, label: str = "") -> str:
    """``value`` to four decimals, followed by its interval (if any) in brackets."""
    text = f"{value:.4f}"
    return text if interval is None else f"{text} ({label}{interval[0]:.4f}-{interval[1]:.4f})"


# What a recorded test line scored: (of the model to deploy, of a trial that no longer is).
_FITS = {
    "tuning": ("best fair trial refitted on the other rows",
               "trial #{n} refitted on the other rows"),
    "training": ("the validated model (training split only)",
                 "trial #{n}'s validated model (training split only)"),
    "certified": ("the certified model", "trial #{n} refitted on the search rows (certified "
                                         "when its scores were recorded)"),
}


def render_test_scores(trial: int, fits: Sequence[ScoresOnTest], *,
                       current: bool = True) -> list[str]:
    """Trial ``trial``'s recorded scores on the test split (:class:`ScoresOnTest`), one line
    per fitted model: each fairness metric with its bootstrap interval, the verdict against
    the limits, and each limit that lies inside its interval named, since this many test rows
    cannot tell whether it holds on new data. ``current``: whether the trial is still the
    model to deploy (else each line names the trial, and no advice on which to deploy)."""
    lines = []
    for i, fit in enumerate(fits):
        values = ", ".join(f"{k} " + with_interval(v, fit.intervals.get(k),  # type: ignore[arg-type]
                                                   f"{percent(TEST_CONFIDENCE)} interval ")
                           for k, v in fit.scores.items())
        verdict = "meets every limit" if fit.fair else f"violates {', '.join(fit.limits)}"
        if fit.unresolved:
            verdict += (f", but {fit.rows} test rows cannot tell whether "
                        f"{' and '.join(fit.unresolved)} holds on new data (the limit lies "
                        "inside the interval)")
        what = _FITS[fit.fit][0 if current else 1].format(n=trial)
        lines.append(f"Test split{f' ({fit.rows} rows)' if not i else ''}, {what}: {values}; "
                     f"{verdict}.")
    if current and [fit.fit for fit in fits] == ["tuning", "training"]:
        lines.append("Which to deploy: refit_best(study) returns the first, fitted on more rows "
                     "but never measured on validation rows; refit_best(study, "
                     "on=\"training\") returns the second, the model whose validation scores "
                     "are above.")
    return lines


def running_line(study: optuna.Study) -> str:
    """The line about the study's RUNNING trials, as the reports print it ('' if none)."""
    running = _running(study)
    return f"{'Running':<11} {running}\n" if running else ""


def _running(study: optuna.Study) -> str:
    """The RUNNING trials and how long ago they started ('' if none)."""
    from fairtune._storage import running_trials

    running = running_trials(study)
    if not running:
        return ""

    def age(seconds: float) -> str:
        if seconds < 120:
            return f"{seconds:.0f} s"
        return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"

    shown = ", ".join(f"#{n} (started {age(s)} ago)" for n, s in running[:10])
    more = f" and {len(running) - 10} more" if len(running) > 10 else ""
    return (f"{shown}{more}: still in progress, or their worker died (a storage with a "
            "heartbeat fails those; see --heartbeat).")


def _setup(setup: dict[str, Any]) -> list[tuple[str, str]]:
    """The report's rows of a setup record (:func:`fairtune.tuning._setup.read_setup`): what
    the trials were scored on and how, and for a multi-fidelity search the budgets, the
    resource they cut and the pruner."""

    def listed(values: Any) -> str | None:
        return ", ".join(map(str, values)) if values else None

    validated, given = listed(setup.get("limits")), listed(setup.get("limits_given"))
    limits = given or validated
    how = []
    if setup.get("margin"):
        how.append(f"less a margin of {setup['margin']:g}")
    if setup.get("confidence"):  # the certified search validates against tightened limits
        how.append(f"tightened by the width of their {percent(setup['confidence'])} bound on "
                   "the safety rows, so that the models found can pass the safety test, "
                   "which judges the limits as given")
    if given and (how or validated != given):
        limits = (f"{given} as given; the trials were validated against {validated}"
                  + (f" ({'; '.join(how)})" if how else ""))
    elif limits and how:  # a record of an older version: the validated limits only
        limits += f" (the limits the trials were validated against: {'; '.join(how)})"
    rows: list[tuple[str, Any]] = [
        ("dataset", setup.get("dataset")),
        ("model", setup.get("model")),
        ("metric", setup.get("metric")),
        ("limits", limits),
        ("validation", setup.get("validation")),
        ("mitigation", listed(setup.get("mitigation"))),
    ]
    budgets = setup.get("budgets")
    if budgets:
        resource = setup.get("resource") or "n_samples"
        of = "the training rows" if resource == "n_samples" else resource
        shown = ", ".join(f"{float(b):.3g}" for b in budgets)
        rows.append(("budgets", f"{shown} (fractions of {of})"))
        if resource != "n_samples":
            rows.append(("resource", resource))
        pruner = setup.get("pruner") or "none: every trial runs every budget"
        if setup.get("prune_unfair"):
            pruner += "; it also stops trials that break a limit at a smaller budget"
        rows.append(("pruner", pruner))
    out = [(what.capitalize(), str(value)) for what, value in rows if value]
    if setup.get("metric") == "roc_auc":
        out.append(("Note", "roc_auc scores the probabilities; the fairness values are "
                            "measured on the 0/1 predictions (threshold 0.5)."))
    return out


def deployment_lines(trial: optuna.trial.FrozenTrial) -> list[str]:
    """Which mitigation a trial used and what its deployed model needs at prediction time."""
    from fairtune.tuning.mitigation import MITIGATIONS

    lines = []
    used = trial.user_attrs.get(_keys.MITIGATION_USED_KEY)
    if used in MITIGATIONS:
        lines.append(f"Mitigation: {used} ({MITIGATIONS[used].implementation}).")
        if used in ("threshold", "reduction"):
            lines.append("Its predictions are randomized: the trial's validation values are "
                         "their expected values.")
    how = trial.user_attrs.get(_keys.SENSITIVE_AT_PREDICTION_KEY)
    if how:
        lines.append(_sensitive_line(how))
    return lines


def _sensitive_line(how: str) -> str:
    """What a deployed model needs of the sensitive feature at prediction time."""
    if how == "no":
        return "Sensitive feature at prediction: not needed."
    return f"Sensitive feature at prediction: needed, as {how}."


def least_unfair_trial(
    trials: Sequence[optuna.trial.FrozenTrial], limits: dict[str, Any]
) -> optuna.trial.FrozenTrial:
    """The completed trial whose fairness values exceed the limits by the least in total (a
    limit it has no value for counts as infinitely exceeded)."""
    from fairtune.fairness import fairness_values

    def unfairness(t: optuna.trial.FrozenTrial) -> float:
        values = fairness_values(t)
        total = 0.0
        for name, limit in limits.items():
            if limit is not None and name in values:
                total += max(limit.violation(values[name]), 0.0)
            elif name in t.constraints:
                total += max(t.constraints[name], 0.0)
            else:
                return float("inf")
        return total

    return min(trials, key=unfairness)


_NOT_COMPARABLE = (
    "Each tenant scores its trials on its own data, so the values of different tenants are not "
    "comparable: each tenant's best fair trial is the best of its own trials."
)


def _e(value: Any) -> str:
    """``value`` for an HTML page: control characters escaped, then HTML's special ones."""
    return html_lib.escape(printable(value))


@dataclass
class TenantRow:
    """One tenant's line in the report of a study shared by tenants.

    Attributes:
        tenant: The tenant's name.
        trials: Its trials, in any state.
        pruned: Those of its trials a pruner stopped at a smaller budget.
        fair: Its completed trials that meet every limit (:func:`fairtune.fairness.is_fair`).
        best: Its best fair trial among its own trials
            (``fairtune.fairness.best_fair_trial(study, tenant=...)``), or None.
        utility: Its cumulative utility (:func:`fairtune.tenancy.cumulative_utilities`).
    """

    tenant: str
    trials: int
    pruned: int
    fair: int
    best: Any
    utility: float


def _tenants_table(rows: Sequence[TenantRow]) -> str:
    return format_table(
        ["tenant", "trials", "pruned", "fair", "best fair trial", "cumulative utility"],
        [[row.tenant, str(row.trials), str(row.pruned), str(row.fair),
          "-" if row.best is None else f"#{row.best.number} {row.best.value:.4f}",
          f"{row.utility:.4f}"] for row in rows],
        right_aligned={1, 2, 3, 4, 5},
    )


@dataclass
class StudyReport:
    """A single-objective study's report; :func:`report` builds it.

    A study shared by tenants, each scoring trials on its own data, has no best trial across
    tenants: its report holds a :class:`TenantRow` per tenant and one section (a report of the
    tenant's own trials) per tenant shown.

    Attributes:
        study: The study reported on.
        counts: ``(trials, complete, failed, fair)``.
        setup: ``(what, value)`` rows of the stored setup record (dataset, model, metric,
            limits and margin, validation, mitigation; for a multi-fidelity search the budgets,
            the resource they cut and the pruner; the tenants of a shared study).
        running: A line about trials still RUNNING ('' if none).
        best: The best fair trial, or the least unfair one when no trial is fair (None without
            completed trials, and for a study shared by tenants: see ``sections``).
        best_is_fair: Whether ``best`` meets every limit.
        deploy: The model to deploy and why
            (:class:`~fairtune.tuning._deployment.Deployment`, the one record every view
            renders). When it is a certified trial other than ``best``, the report is of it:
            ``rows``, ``deployment`` and ``best_one_class`` are this trial's.
        metric: The name of the study's value (e.g. ``"accuracy"``).
        rows: ``(name, value, status)`` rows of the trial reported (``deployed``, else
            ``best``): the metric, each fairness value
            (``"ok"`` or ``"violated (...)"``), the predicted positive rate overall and per
            group, the parameters (status ``"param"``).
        deployment: What the reported trial's deployed model uses and needs at prediction
            time.
        one_class: The number of completed trials that predict one class for everyone.
        best_one_class: The class the reported trial predicts for every validation row, or
            None.
        test_trial: The trial the test lines belong to (None without them).
        test_lines: The test split's score lines (:func:`scores_on_test_split`).
        test_recorded: Whether the test lines are those ``fairtune tune`` stored with the
            study (rather than computed for this report).
        pruned: The trials a pruner stopped at a smaller budget.
        tenant: The tenant asked for (:func:`report`'s ``tenant``); in a section, the tenant
            whose trials it reports.
        tenants: Of a study shared by tenants, one row per tenant (empty otherwise).
        sections: Of a study shared by tenants, the report of each tenant's own trials: the
            tenant asked for, else every tenant.
        untagged: Of a study shared by tenants, the trials that carry no tenant.
        test_current: Whether the recorded test lines are those of the model to deploy (the
            certified one with ``confidence``, else the best fair trial); if not, they are
            labelled by their trial.
    """

    study: Any
    counts: tuple[int, int, int, int]
    setup: list[tuple[str, str]]
    running: str
    best: Any
    best_is_fair: bool
    metric: str
    deploy: Any = None
    rows: list[tuple[str, str, str]] = field(default_factory=list)
    deployment: list[str] = field(default_factory=list)
    one_class: int = 0
    best_one_class: int | None = None
    test_trial: int | None = None
    test_lines: list[str] = field(default_factory=list)
    test_recorded: bool = False
    pruned: int = 0
    tenant: str | None = None
    tenants: list[TenantRow] = field(default_factory=list)
    sections: list[StudyReport] = field(default_factory=list)
    untagged: int = 0
    test_current: bool = True

    def _summary(self) -> str:
        trials, complete, failed, fair = self.counts
        if self.tenants:
            untagged = f" ({self.untagged} untagged)" if self.untagged else ""
            who = (f"Study {printable(self.study.study_name)}: {trials} trials of "
                   f"{len(self.tenants)} tenants{untagged}")
        elif self.tenant is not None:
            who = f"Tenant {printable(self.tenant)}: {trials} trials"
        else:
            who = f"Study {printable(self.study.study_name)}: {trials} trials"
        # A multi-fidelity search says how many trials it stopped early, even none.
        pruning = self.pruned or any(what == "Pruner" for what, _ in self.setup)
        return (who + f", {complete} complete" + (f", {self.pruned} pruned" if pruning else "")
                + (f", {failed} failed" if failed else "") + f", {fair} fair.")

    @property
    def deployed(self) -> Any:
        """The certified trial when it is not ``best``, else None."""
        d = self.deploy
        if d is None or d.why != "certified" or self.best is None:
            return None
        return None if d.trial.number == self.best.number else d.trial

    @property
    def certificate(self) -> dict[str, Any]:
        """The safety test's verdict that speaks for the trials as they stand, or empty."""
        d = self.deploy
        return d.certificate if d is not None and d.why != "pending" else {}

    @property
    def _subject(self) -> Any:
        """The trial the report's table is of: the model to deploy when it is not ``best``."""
        return self.best if self.deployed is None else self.deployed

    def _constant(self) -> int | None:
        """The class the certified model predicted for every safety row (its certificate's
        measurement of the deployed model itself), or None."""
        label = self.certificate.get("one_class") if self.certificate.get("certified") else None
        return None if label is None else int(label)

    def _pending(self) -> bool:
        return self.deploy is not None and self.deploy.why == "pending"

    def _findings(self) -> list[str]:
        """The warnings about the reported trial, one line each."""
        complete = self.counts[1]
        lines = []
        if self.best_one_class is not None and self._constant() is None:
            lines.append(
                f"Warning: trial #{self._subject.number} predicts one class "
                f"({self.best_one_class}) for everyone: its {self.metric} is that of a "
                f"constant guess and its fairness gaps are trivially 0 ({self.one_class} "
                f"of {complete} complete trials do so). Tighter limits are met this way; check "
                "the model before trusting it."
            )
        elif self.one_class:
            lines.append(f"{self.one_class} of {complete} complete trials predict one class for "
                         "everyone.")
        return lines

    def _headline(self) -> str:
        if self.best is None:
            return "No completed trial yet."
        if self.deployed is not None:
            return (f"Trial #{self.deployed.number}, the certified model "
                    f"({self.deploy.passed_over})")
        if self.best_is_fair and self._pending():
            return (f"Best fair trial: #{self.best.number} (a candidate: no model is certified "
                    "yet)")
        if self.best_is_fair and self.deploy is not None and self.deploy.why == "best":
            return f"Best trial: #{self.best.number} (the study has no fairness limits)"
        if self.best_is_fair:
            return f"Best fair trial: #{self.best.number}"
        return f"No trial meets every limit yet; the least unfair one is #{self.best.number}."

    def text(self) -> str:
        """The report as ``fairtune report`` prints it (every value from the data or the user
        with its control characters escaped).

        Of a study shared by tenants: the table of tenants, each with its own best fair trial,
        and the section of the tenant asked for (never one best trial across tenants).
        """
        out = [self._summary() + "\n"]
        # The answer first, as the HTML page and the dashboard's note give it: the lines of it
        # that the report prints further down (the certificate, the test verdict, what the
        # model needs at prediction time) are printed there.
        answer = self._answer()
        later = set(self.deployment + self._findings() + self.test_lines)
        out += [printable(line) + "\n" for line in answer if line not in later]
        out += [f"{what:<11} {printable(value)}\n" for what, value in self.setup]
        if self.running:
            out.append(f"{'Running':<11} {printable(self.running)}\n")
        if self.tenants:
            out.append(_tenants_table(self.tenants))
            out.append(_NOT_COMPARABLE + "\n")
            for section in self.sections if self.tenant is not None else []:
                out.append("\n" + section.text())
            return "".join(out)
        out.append(self._headline() + "\n")
        if self.best is None:
            return "".join(out)
        out.append(format_table(["", "value", ""], [list(r) for r in self.rows],
                                right_aligned={1}))
        refused = self.certificate.get("certified") is False and answer
        out += [printable(line) + "\n" for line in self.deployment + self._findings()
                if not (refused and line == self.certificate.get("message"))]
        if self.test_lines:
            out.append(f"Test scores for trial #{self.test_trial}{self._not_deployed()}"
                       ":\n")
            out += [f"  {printable(line)}\n" for line in self.test_lines]
        return "".join(out)

    def markdown(self) -> str:
        """The report as Markdown, for optuna-dashboard's study note (:mod:`fairtune.dashboard`):
        the answer first (the trial to deploy, its certificate, its test verdict, what it needs
        at prediction time), then the best trial's scores, the setup and the counts. Every value
        from the data or the user is shown as typed, never read as markup."""
        out = []
        if self.tenants:
            out += ["### Tenants", "", markdown_table(
                ["tenant", "trials", "pruned", "fair", "best fair trial", "cumulative utility"],
                [[row.tenant, str(row.trials), str(row.pruned), str(row.fair),
                  "-" if row.best is None else f"#{row.best.number} {row.best.value:.4f}",
                  f"{row.utility:.4f}"] for row in self.tenants], right_aligned={1, 2, 3, 4, 5}),
                markdown_text(_NOT_COMPARABLE), ""]
            for section in self.sections:
                out += [f"### Tenant {markdown_text(section.tenant)}", "",
                        section.markdown(), ""]
        else:
            answer = self._answer()
            out.append(f"### {markdown_text(self._deploy_heading())}")
            out.append("")
            out += [f"- {markdown_text(line)}" for line in answer or self._findings()]
            if self.best is not None:
                if answer:
                    out += [f"- {markdown_text(line)}" for line in self._findings()]
                which = ("the certified model" if self.deployed is not None else
                         "the best trial" if self.deploy.why == "best" else
                         "the best fair trial" if self.best_is_fair else "the least unfair trial")
                out += ["", f"Trial \\#{self._subject.number}, {which}, on validation:", "",
                        markdown_table(["", "value", ""],
                                           [[name.strip(), value, status]
                                            for name, value, status in self.rows
                                            if status != "param"], right_aligned={1})]
                out += [f"- {markdown_text(line)}" for line in self.deployment
                        if line not in answer and line != self.certificate.get("message")]
                rest = [line for line in self.test_lines if line not in answer]
                if rest:  # the verdict's first line is in the answer already
                    out += ["", f"Test split, trial #{self.test_trial}"
                                f"{markdown_text(self._not_deployed())}:", ""]
                    out += [f"- {markdown_text(line)}" for line in rest]
            out.append("")
        if self.tenants or self.tenant is None:  # not in a tenant's section: once per note
            if self.setup:
                out += [markdown_table(["setup", ""], [list(row) for row in self.setup],
                                       right_aligned=set()), ""]
            out.append(markdown_text(self._summary()))
        return "\n".join(out).rstrip() + "\n"

    def html(self, *, fairness_metric: str | None = None) -> str:
        """The report as one self-contained HTML page, the plots inline.

        Of a study shared by tenants: the table of tenants, then a section per tenant shown
        (the tenant asked for, else every tenant) with its best fair trial and plots of its
        own trials only.

        Args:
            fairness_metric: The trade-off plot's x axis. Defaults to None: the study's first
                limit.
        """
        title = f"fairtune report: {self.study.study_name}"
        parts = [
            "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_e(title)}</title>", f"<style>{_CSS}</style></head><body>",
            f"<h1>{_e(title)}</h1>",
        ]
        parts += self._html_body(fairness_metric, level=2)
        if self.tenants:
            parts.append("<h2>Tenants</h2><table class=tenants><tr><th>tenant</th>"
                         "<th>trials</th><th>pruned</th><th>fair</th><th>best fair trial</th>"
                         "<th>cumulative utility</th></tr>")
            for row in self.tenants:
                best = "-" if row.best is None else f"#{row.best.number} {row.best.value:.4f}"
                parts.append(f"<tr><td>{_e(row.tenant)}</td><td class=num>{row.trials}</td>"
                             f"<td class=num>{row.pruned}</td><td class=num>{row.fair}</td>"
                             f"<td class=num>{_e(best)}</td>"
                             f"<td class=num>{row.utility:.4f}</td></tr>")
            parts.append("</table>")
            parts.append(f"<p class=note>{_e(_NOT_COMPARABLE)}</p>")
            for section in self.sections:
                parts.append(f"<section><h2>Tenant {_e(section.tenant)}</h2>")
                parts += section._html_body(fairness_metric, level=3)
                parts.append("</section>")
        parts.append("</body></html>")
        return "\n".join(parts) + "\n"

    def _deploy_heading(self) -> str:
        """The note's heading: the model to deploy in a few words (or the report's headline
        when there is none yet)."""
        if self.tenants or self.best is None or self.deploy.why in ("no_fair", "empty"):
            return self._headline()
        return self.deploy.heading()

    def _not_deployed(self) -> str:
        """' (not the model to deploy)' when the test lines are another trial's."""
        return "" if self.test_current else " (not the model to deploy)"

    def _answer(self) -> list[str]:
        """What a reviewer reads first: the model to deploy (the certified one when the study
        was certified, none when the safety test refused), its verdict on the test split in
        one line when it was measured on that model, and what it needs at prediction time
        (nothing before a fair trial)."""
        d = self.deploy
        if self.tenants or self.best is None or d.why in ("no_fair", "empty"):
            return []
        if d.why == "refused":  # the safety test refused every candidate
            return [f"Deploy no model: {d.certificate.get('message', 'none could be certified.')}"
                    ] + ([d.untested_text()] if d.untested_text() else [])
        if d.why == "pending":  # only a certified model is deployed: the candidate, no more
            return [d.pending_text(),
                    (f"The candidate: trial #{self.best.number}, the best fair trial "
                     f"({self.metric} {self.best.value:.4f} on validation), not certified.")]
        what = {"certified": "the certified model", "best": "the best trial"}.get(
            d.why, "the best fair trial")
        if d.passed_over:
            what += f" ({d.passed_over})"
        constant = self._constant()
        facts = "" if constant is None else (
            f"; a constant model: it predicted {constant} for every safety row")
        lines = [f"Deploy trial #{d.trial.number}, {what} "
                 f"({self.metric} {d.trial.value:.4f} on validation{facts})."]
        if d.why == "certified":
            lines.append(str(d.certificate["message"]))
            lines += [d.untested_text()] if d.untested_text() else []
        if self.test_lines and self.test_trial == d.trial.number:
            lines.append(self.test_lines[0])
        how = d.trial.user_attrs.get(_keys.SENSITIVE_AT_PREDICTION_KEY)
        lines += [line for line in self.deployment if how and line == _sensitive_line(how)]
        return lines

    def _html_body(self, fairness_metric: str | None, *, level: int) -> list[str]:
        """The page's summary, setup and (but of a study shared by tenants) best trial, its
        headings at ``level``."""
        h = f"h{level}"
        parts = [f"<p class=summary>{_e(self._summary())}</p>"]
        answer = self._answer()
        if answer:  # the answer first: what to deploy, its test verdict, what it needs
            parts.append(f"<{h}>The answer</{h}><ul class=answer>")
            parts += [f"<li>{_e(line)}</li>" for line in answer]
            parts.append("</ul>")
        if self.setup:
            parts.append(f"<{h}>Setup</{h}><table class=setup>")
            parts += [f"<tr><th>{_e(what)}</th><td>{_e(value)}</td></tr>"
                      for what, value in self.setup]
            parts.append("</table>")
        if self.running:
            parts.append(f"<p class=note>Running: {_e(self.running)}</p>")
        if self.tenants:
            return parts
        parts.append(f"<{h}>{_e(self._headline())}</{h}>")
        if self.best is None:
            return parts
        findings = self._findings()
        parts += [f'<p class="{"warning" if line.startswith("Warning") else "note"}">'
                  f"{_e(line)}</p>" for line in findings]
        scores = [row for row in self.rows if row[2] != "param"]
        params = [row for row in self.rows if row[2] == "param"]
        parts.append("<div class=tables><table class=best><caption>Validation scores"
                     "</caption><tr><th></th><th>value</th><th></th></tr>")
        for name, value, status in scores:
            cls = "bad" if status.startswith("violated") else "ok" if status == "ok" else ""
            indent = " class=group" if name.startswith("  ") else ""
            parts.append(f"<tr class='{cls}'><td{indent}>{_e(name.removeprefix('  '))}</td>"
                         f"<td class=num>{_e(value)}</td><td>{_e(status)}</td></tr>")
        parts.append("</table>")
        if params:
            parts.append("<table class=params><caption>Parameters</caption>")
            parts += [f"<tr><td>{_e(name)}</td><td class=num>{_e(value)}</td></tr>"
                      for name, value, _ in params]
            parts.append("</table>")
        parts.append("</div>")
        if self.deployment:
            parts.append(f"<{h}>The deployed model</{h}><ul>")
            parts += [f"<li>{_e(line)}</li>" for line in self.deployment]
            parts.append("</ul>")
        if self.test_lines:
            parts.append(f"<{h}>Test split (trial #{self.test_trial}{_e(self._not_deployed())})"
                         f"</{h}><ul>")
            parts += [f"<li>{_e(line)}</li>" for line in self.test_lines]
            parts.append("</ul>")
        parts.append(f"<{h}>Trade-off and progress</{h}><div class=plots>")
        own = "" if self.tenant is None else f" (tenant {self.tenant}'s trials only)"
        for draw, caption in (
            ("tradeoff", f"Every trial's validation value against its fairness value, the "
                         f"limit and the best fair trial{own}."),
            ("curve", f"The best fair validation value after each trial{own}."),
        ):
            image = _plot_png(self.study, draw, fairness_metric, tenant=self.tenant)
            if image:
                parts.append(f'<figure><img alt="{_e(caption)}" '
                             f'src="data:image/png;base64,{image}">'
                             f"<figcaption>{_e(caption)}</figcaption></figure>")
        parts.append("</div>")
        return parts

    def write_html(self, path: str, *, fairness_metric: str | None = None) -> None:
        """Write :meth:`html` to ``path`` (UTF-8)."""
        with open(path, "w", encoding="utf-8") as file:
            file.write(self.html(fairness_metric=fairness_metric))


_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;"
    "color:#222}h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:1.6rem}"
    "table{border-collapse:collapse}td,th{padding:.2rem .7rem;text-align:left;"
    "border-bottom:1px solid #ddd}td.num{text-align:right;font-variant-numeric:tabular-nums}"
    "td.group{padding-left:1.8rem}tr.ok td:last-child{color:#1a7f37}"
    "tr.bad td:last-child{color:#b42318;font-weight:600}tr.param td{color:#555}"
    ".warning{background:#fff4e5;border-left:4px solid #f79009;padding:.5rem .8rem}"
    ".note{color:#444}caption{text-align:left;font-weight:600;padding:.3rem 0}"
    ".tables{display:flex;flex-wrap:wrap;gap:2.5rem;align-items:flex-start}"
    ".plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(24rem,1fr));gap:1rem}"
    "figure{margin:0}.plots img{width:100%;display:block}"
    "figcaption{color:#555;font-size:.9rem}h3{font-size:1.05rem;margin-top:1.4rem}"
    "section{border-top:2px solid #ccc;margin-top:2rem}"
)


def _axes(study: Any, draw: str, fairness_metric: str | None, tenant: str | None = None) -> Any:
    """The trade-off plot (``draw="tradeoff"``), the best-fair curve (``"curve"``) or, of a
    multi-objective study, Optuna's Pareto-front plot (``"pareto"``); with ``tenant``, of that
    tenant's trials only."""
    import matplotlib

    matplotlib.use("Agg")
    from fairtune.visualization import plot_best_feasible, plot_tradeoff

    if draw == "pareto":
        import optuna
        from optuna.visualization.matplotlib import plot_pareto_front

        with warnings.catch_warnings():  # Optuna marks the plot experimental; it is stable here
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return plot_pareto_front(study, target_names=objective_names(study))
    return (plot_tradeoff(study, metric=fairness_metric, tenant=tenant) if draw == "tradeoff"
            else plot_best_feasible(study, tenant=tenant))


def save_plot(
    study: optuna.Study, path: str, draw: str = "tradeoff", *,
    fairness_metric: str | None = None, tenant: str | None = None,
) -> None:
    """Write the trade-off plot (``draw="tradeoff"``, x axis ``fairness_metric``, by default
    the first limit), the best-fair curve (``"curve"``) or, of a multi-objective study, the
    Pareto front (``"pareto"``) of ``study`` to an image file; with ``tenant``, of that
    tenant's trials only (a study shared by tenants)."""
    import matplotlib.pyplot as plt

    ax = _axes(study, draw, fairness_metric, tenant)
    ax.figure.tight_layout()
    try:
        ax.figure.savefig(path, dpi=120)
    finally:
        plt.close(ax.figure)


def _plot_png(study: Any, draw: str, fairness_metric: str | None,
              tenant: str | None = None) -> str | None:
    """A plot of ``study`` (of ``tenant``'s trials only) as base64 PNG text, or None when there
    is nothing to draw (or no matplotlib)."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - the plot extra is not installed
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ax = _axes(study, draw, fairness_metric, tenant)
    except ValueError:  # no trial with fairness values to draw
        return None
    buffer = io.BytesIO()
    try:
        ax.figure.tight_layout()
        ax.figure.savefig(buffer, format="png", dpi=110)
    finally:
        plt.close(ax.figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _best_rows(
    best: optuna.trial.FrozenTrial, limits: dict[str, Any], metric: str
) -> list[tuple[str, str, str]]:
    """The report's rows of a trial: its metric, each limited fairness value with its status,
    the other fairness values, the predicted positive rate overall and per group, and its
    parameters."""
    from fairtune.fairness import fairness_values

    rows = [(metric, f"{best.value:.4f}", "")]
    values = fairness_values(best)
    for name, limit in limits.items():
        if name in values:
            status = "" if limit is None else ("ok" if limit.violation(values[name]) <= 0
                                                else f"violated ({limit})")
            rows.append((name, f"{values[name]:.4f}", status))
        elif name in best.constraints:  # set by hand (trial.set_constraint): <= 0 is ok
            violation = best.constraints[name]
            rows.append((f"constraint {name}", f"{violation:.4g}",
                         "ok" if violation <= 0 else "violated"))
        else:
            rows.append((name, "-", "not measured"))
    rows += [(name, f"{value:.4f}", "") for name, value in values.items() if name not in limits]
    attrs = best.user_attrs
    if _keys.POSITIVE_RATE_KEY in attrs:
        rows.append(("predicted positive rate", f"{attrs[_keys.POSITIVE_RATE_KEY]:.4f}", ""))
        rows += [(f"  group {distinct(group)}", f"{rate:.4f}", "")
                 for group, rate in (attrs.get(_keys.POSITIVE_RATES_KEY) or {}).items()]
    rows += [(name, f"{value:.6g}" if isinstance(value, float) else str(value), "param")
             for name, value in best.params.items()]
    return rows


def _counts(trials: Sequence[optuna.trial.FrozenTrial], limits: dict[str, Any]
            ) -> tuple[tuple[int, int, int, int], int]:
    """``((trials, complete, failed, fair), pruned)`` of ``trials``."""
    from optuna.trial import TrialState

    from fairtune.fairness import is_fair

    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    fair = sum(is_fair(t, limits) for t in complete)
    failed = sum(t.state == TrialState.FAIL for t in trials)
    pruned = sum(t.state == TrialState.PRUNED for t in trials)
    return (len(trials), len(complete), failed, fair), pruned


def _tenant_rows(study: optuna.Study, tenants: Sequence[str], limits: dict[str, Any]
                 ) -> list[TenantRow]:
    from fairtune.fairness import best_fair_trial, study_limits
    from fairtune.tenancy import cumulative_utilities, trials_by_tenant

    by_tenant = trials_by_tenant(study, states=None)
    utilities = cumulative_utilities(study, tenants)
    rows = []
    for tenant in tenants:
        # Each tenant under its own limits (each may have others).
        own = study_limits(study, tenant) or limits
        (trials, _, _, fair), pruned = _counts(by_tenant.get(tenant, []), own)
        rows.append(TenantRow(tenant=tenant, trials=trials, pruned=pruned, fair=fair,
                              best=best_fair_trial(study, own, tenant=tenant),
                              utility=utilities[tenant]))
    return rows


def report(
    study: optuna.Study, *, tenant: str | None = None) -> StudyReport:
    """The report of a single-objective study.

    A study shared by tenants (:mod:`fairtune.tenancy`), whose tenants each score trials on
    their own data, is reported by tenant: a :class:`TenantRow` each (its trials, pruned and
    fair trials, its best fair trial among its own trials, its cumulative utility) and a section
    of the tenant asked for, or of every tenant; never one best trial across tenants.

    The report reads the study's records and never fits a model: the model to deploy is the
    study's deployment record (:func:`fairtune.tuning._deployment.deployment`), and the test
    split's scores are those recorded by ``FairObjective.conclude(study)`` (which ``fairtune
    tune`` runs after its search), labelled by their trial when it is no longer the model to
    deploy.

    Args:
        study: A single-objective study (fairtune's trials record their fairness values).
        tenant: Of a study shared by tenants, the tenant whose section to show. Defaults to
            None: every tenant's.

    Raises:
        ValueError: If the study has several objectives, or ``tenant`` is not one of its
            tenants (:func:`check_tenant`).
    """
    from fairtune.fairness import study_limits
    from fairtune.tuning._setup import read_setup

    if len(study.directions) != 1:
        raise ValueError(
            f"`study` must have one objective for this report, but got "
            f"{len(study.directions)} directions; `fairtune report` shows a multi-objective "
            "study's Pareto-optimal trials."
        )
    tenants = check_tenant(study, tenant)
    if not tenants:
        return _report_of(study)
    limits = study_limits(study)
    trials = study.get_trials(deepcopy=False)
    counts, pruned = _counts(trials, limits)
    rows = _tenant_rows(study, tenants, limits)
    # Fair by each tenant's own limits.
    counts = (*counts[:3], sum(row.fair for row in rows))
    setup = [*_setup(read_setup(study)), ("Tenants", ", ".join(tenants))]
    return StudyReport(
        study=study, counts=counts, pruned=pruned, setup=setup, running=_running(study),
        best=None, best_is_fair=False, metric="value", tenant=tenant, tenants=rows,
        untagged=sum(_keys.TENANT_KEY not in t.user_attrs for t in trials),
        sections=[_report_of(study, tenant=t)
                  for t in ([tenant] if tenant is not None else tenants)],
    )


def _report_of(study: optuna.Study, tenant: str | None = None) -> StudyReport:
    """The report of ``study``'s trials (of ``tenant``'s only, under its own setup record)."""
    from optuna.trial import TrialState

    from fairtune.fairness import best_fair_trial, study_limits
    from fairtune.tenancy import tenant_of
    from fairtune.tuning import predicts_one_class
    from fairtune.tuning._deployment import deployment, read_test_fits
    from fairtune.tuning._setup import read_setup

    setup = read_setup(study, tenant)
    limits = study_limits(study, tenant) if tenant is not None else study_limits(study)
    trials = [t for t in study.get_trials(deepcopy=False)
              if tenant is None or tenant_of(t) == tenant]
    counts, pruned = _counts(trials, limits)
    page = StudyReport(
        study=study, counts=counts, pruned=pruned, setup=_setup(setup),
        running=_running(study) if tenant is None else "", best=None, best_is_fair=False,
        metric=str(setup.get("metric") or "value"), tenant=tenant,
    )
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    if not complete:
        return page
    best = best_fair_trial(study, limits, tenant=tenant)
    page.best_is_fair = best is not None
    page.best = best if best is not None else least_unfair_trial(complete, limits)
    best = page.best
    page.deploy = deploy = deployment(study, tenant)
    shown = page._subject  # the model to deploy's facts
    page.rows = _best_rows(shown, limits, page.metric)
    page.deployment = deployment_lines(shown)
    if page.certificate:
        page.deployment.append(str(page.certificate["message"]))
    elif deploy.why == "pending":
        page.deployment.append(deploy.pending_text())
    page.one_class = sum(predicts_one_class(t) is not None for t in complete)
    page.best_one_class = predicts_one_class(shown)
    deployed = None if deploy.trial is None else deploy.trial.number
    # The test scores recorded with the study (FairObjective.conclude, `fairtune tune`), of
    # the trial they were measured on: labelled by it when it is no longer the one to deploy.
    number, fits, lines = read_test_fits(study, tenant)
    if number in {t.number for t in complete}:  # of this tenant's trials
        page.test_current = number == deployed
        lines = render_test_scores(number, fits, current=page.test_current) if fits else lines
        page.test_trial, page.test_lines = number, lines
        page.test_recorded = bool(lines)
    return page


# -- multi-objective studies ------------------------------------------------------------------


def objective_names(study: optuna.Study) -> list[str]:
    """The names of a multi-objective study's objectives as stored (``objective i`` if not)."""
    from fairtune.tuning._setup import read_setup

    return [str(name) for name in read_setup(study).get("objectives") or [
        f"objective {i}" for i in range(len(study.directions))
    ]]


def pareto_text(study: optuna.Study) -> str:
    """A multi-objective study's report: its Pareto-optimal (feasible) trials, marked where
    they predict one class for everyone, and the task correlation MTKBSampler learned."""
    from optuna.trial import TrialState

    from fairtune._storage import stored_task_correlation
    from fairtune.tuning import predicts_one_class

    names = objective_names(study)
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    out = [f"Study {printable(study.study_name)}: {len(study.trials)} trials, {len(trials)} "
           "complete.\n", running_line(study)]
    if not trials:
        return "".join(out) + "No completed trial yet.\n"
    best = sorted(study.best_trials, key=lambda t: t.number)
    out.append(f"Pareto-optimal trials ({len(best)}):\n")
    directions = [d.name.lower() for d in study.directions]
    # A stored setup naming fewer objectives than the study has still reports what it names.
    header = ["trial", *(f"{n} ({d[:3]})" for n, d in zip(names, directions, strict=False))]
    rows = [[f"#{t.number}", *(f"{v:.4f}" for v in t.values)] for t in best]
    # A constant model (the base rate's accuracy, every fairness gap 0) is Pareto-optimal by
    # construction: mark it, as the single-objective report warns about it.
    labels = [predicts_one_class(t) for t in best]
    if any(label is not None for label in labels):
        header.append("")
        for row, label in zip(rows, labels, strict=True):
            row.append("" if label is None else f"predicts {label} for everyone")
    out.append(format_table(header, rows, right_aligned=set(range(1, len(directions) + 1))))
    one_class = sum(predicts_one_class(t) is not None for t in trials)
    if one_class:
        out.append(f"{one_class} of {len(trials)} complete trials predict one class for "
                   "everyone: their fairness gaps are trivially 0; check a model before "
                   "trusting it.\n")
    correlation = stored_task_correlation(study)
    if correlation is not None and correlation.shape == (len(names), len(names)):
        out.append("Task correlation learned by MTKBSampler (of the objectives as defined):\n")
        out.append(format_table(
            ["", *names],
            [[a, *(f"{correlation[i, j]:+.2f}" for j in range(len(names)))]
             for i, a in enumerate(names)],
            right_aligned=set(range(1, len(names) + 1)),
        ))
    return "".join(out)


def pareto_test_text(rows: int, scored: Sequence[tuple[int, dict[str, Any]]]) -> str:
    """A table of each Pareto-optimal trial's scores on the test split of ``rows`` rows:
    ``scored`` holds ``(trial number, FairObjective.evaluate(model, confidence_level=...))``
    ('' when empty)."""
    if not scored:
        return ""
    table, header = [], ["trial"]
    for number, scores in scored:
        scores = dict(scores)
        fair = scores.pop("fair", None)
        intervals = scores.pop("intervals")
        header = ["trial", *scores, *(["limits"] if fair is not None else [])]
        table.append([f"#{number}",
                      *(with_interval(v, intervals.get(k)) for k, v in scores.items()),
                      *(["met" if fair else "violated"] if fair is not None else [])])
    return (f"Test split ({rows} rows), each Pareto-optimal trial refitted on the tuning rows "
            f"(fairness metrics with their {percent(TEST_CONFIDENCE)} interval):\n"
            + format_table(header, table, right_aligned=set(range(1, len(header)))))


def print_report(
    study: optuna.Study, out: Any, *, plot: str | None = None, curve: str | None = None,
    fairness_metric: str | None = None, tenant: str | None = None,
) -> None:
    """Write ``study``'s text report to the stream ``out`` (:meth:`StudyReport.text`, or
    :func:`pareto_text` for a multi-objective study) and save the plots asked for: ``plot``
    the trade-off (the Pareto front), ``curve`` the best-fair curve, each once there is a trial
    to draw. Of a study shared by tenants, ``tenant`` names the tenant whose section is shown
    and whose own trials the plots draw (they need one).

    Raises:
        ValueError: Before writing anything, for a ``tenant`` the study does not have, or plots
            of a study shared by tenants without ``tenant`` (:func:`check_tenant`).
    """
    from optuna.trial import TrialState

    if len(study.directions) > 1:
        out.write(pareto_text(study))
        drawn = [(plot, "pareto")] if study.get_trials(
            deepcopy=False, states=(TrialState.COMPLETE,)) else []
    else:
        check_tenant(study, tenant, plots=bool(plot or curve))
        page = report(study, tenant=tenant)
        out.write(page.text())
        shown = page.sections[0] if page.tenants and tenant is not None else page
        drawn = [] if shown.best is None else [(plot, "tradeoff"), (curve, "curve")]
    names = {"tradeoff": "Trade-off plot", "curve": "Best-fair curve",
             "pareto": "Pareto front plot"}
    for path, draw in drawn:
        if path:
            save_plot(study, path, draw, fairness_metric=fairness_metric, tenant=tenant)
            out.write(f"{names[draw]} written to {printable(path)}\n")


def tenants_text(study: optuna.Study, tenants: Sequence[str] | None = None) -> str:
    """A shared study's table by tenant: each tenant's trials, pruned and fair trials, its best
    fair trial among its own trials and its cumulative utility (the sum of its values,
    :func:`fairtune.tenancy.cumulative_utilities`), so that each team sees what it got and how
    the others fared. The tenants score on their own data: no trial is best across them.

    Args:
        study: The shared study.
        tenants: The tenants, in this order. Defaults to None: :func:`study_tenants`.
    """
    from fairtune.fairness import study_limits

    tenants = study_tenants(study) if tenants is None else list(tenants)
    rows = _tenant_rows(study, tenants, study_limits(study))
    return (f"Study {printable(study.study_name)}: {len(study.trials)} trials of {len(tenants)} "
            "tenants.\n" + _tenants_table(rows))


def board_text(board: Any, agent: str) -> str:
    """What ``agent`` sees of its CGPSampler board: who posted, and how often."""
    posts = board.posts()
    agents = sorted({post.agent for post in posts})
    mine = [post for post in posts if post.agent == agent]
    return (f"Board {board.name!r}: {len(posts)} posts by {len(agents)} agents "
            f"({printable(', '.join(agents) or 'none yet')}); {printable(agent)} posted "
            f"{len(mine)} times.\n")


def check_output_path(path: str | None, *, flag: str = "`path`", html: bool = False) -> None:
    """Fail before any work if an image (or, with ``html``, the HTML page) could not be written
    to ``path``: an extension matplotlib (or HTML) knows, an existing folder, not a folder
    itself, and writable. None passes.

    Raises:
        ValueError: Naming ``flag`` and what is wrong with the path.
    """
    import os
    from pathlib import Path

    from fairtune._storage import can_create_in

    if path is None:
        return
    if html:
        formats = ["html"]
    else:
        from matplotlib.backend_bases import FigureCanvasBase

        formats = sorted(FigureCanvasBase.get_supported_filetypes())
    target = Path(path).expanduser()
    if target.suffix.lower().lstrip(".") not in formats:
        raise ValueError(
            f"{flag} must be a file name ending in one of {['.' + f for f in formats]}, but got "
            f"{path!r}."
        )
    folder = target.resolve().parent
    if not folder.is_dir():
        raise ValueError(f"{flag} must be a file in an existing folder, but got {path!r} "
                         f"(no folder {str(folder)!r}).")
    if target.is_dir():
        raise ValueError(f"{flag} must be a file, but got the folder {path!r}.")
    writable = os.access(target, os.W_OK) if target.exists() else can_create_in(folder)
    if not writable:
        raise ValueError(f"{flag} {path!r} cannot be written (read-only file or folder).")
