"""The study report: what a reviewer signs a fair model off on, as text, Markdown or HTML.

:func:`report` reads a single-objective study's records into a :class:`StudyReport`, which
:meth:`StudyReport.text` (``fairtune report``), :meth:`StudyReport.markdown`
(optuna-dashboard's note) and :meth:`StudyReport.html` format: the answer first, then the
setup, the reported trial's table, its model and its test split.

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
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from fairtune import _keys
from fairtune._text import (
    distinct,
    format_table,
    markdown_table,
    markdown_text,
    percent,
    printable,
)
from fairtune.fairness.constraints import least_unfair_trial
from fairtune.tenancy import check_tenant, study_tenants
from fairtune.tuning import _deployment
from fairtune.tuning._deployment import ScoresOnTest

if TYPE_CHECKING:
    import optuna

__all__ = ["TEST_CONFIDENCE", "TEST_SCORES_KEY", "StudyReport", "TenantRow", "check_output_path",
           "check_report_options", "check_tenant", "deployment_lines", "format_table",
           "least_unfair_trial", "objective_names", "pareto_test_text", "pareto_text",
           "print_report", "report", "save_plot", "study_tenants", "render_test_scores",
           "with_interval"]

TEST_CONFIDENCE = _deployment.TEST_CONFIDENCE
"""The level of the fairness metrics' bootstrap intervals on the test split."""
TEST_SCORES_KEY = _keys.TEST_SCORES_KEY
"""Study user attribute: the test split's scores of the model to deploy, as ``{"trial":
number, "fits": [...]}`` (:class:`~fairtune.tuning._deployment.ScoresOnTest` records, written by
``FairObjective.conclude``)."""


def with_interval(value: float, interval: Sequence[float] | None, label: str = "") -> str:
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
    per fitted model; ``current``: whether the trial is still the model to deploy."""
    interval, lines = f"{percent(TEST_CONFIDENCE)} interval ", []
    for i, fit in enumerate(fits):
        values = ", ".join(f"{k} {with_interval(v, fit.intervals.get(k), interval)}"
                           for k, v in fit.scores.items())
        verdict = "meets every limit" if fit.fair else f"violates {', '.join(fit.limits)}"
        if fit.unresolved:
            verdict += (f", but {fit.rows} test rows cannot tell whether "
                        f"{' and '.join(fit.unresolved)} holds on new data (the limit lies "
                        "inside the interval)")
        lines.append(f"Test split{f' ({fit.rows} rows)' if not i else ''}, "
                     f"{_FITS[fit.fit][not current].format(n=trial)}: {values}; {verdict}.")
    if current and [fit.fit for fit in fits] == ["tuning", "training"]:
        lines.append("Which to deploy: refit_best(study) returns the first, fitted on more rows "
                     "but never measured on validation rows; refit_best(study, "
                     "on=\"training\") returns the second, the model whose validation scores "
                     "are above.")
    return lines


def _running(study: optuna.Study) -> str:
    """The RUNNING trials and how long ago they started ('' if none)."""
    import datetime

    from optuna.trial import TrialState

    def age(t: optuna.trial.FrozenTrial) -> str:
        s = (now - t.datetime_start).total_seconds() if t.datetime_start else 0.0
        if s < 120:
            return f"{s:.0f} s"
        return f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"

    now = datetime.datetime.now()
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    more = f" and {len(running) - 10} more" if len(running) > 10 else ""
    return (", ".join(f"#{t.number} (started {age(t)} ago)" for t in running[:10]) + more
            + ": still in progress, or their worker died (a storage with a heartbeat fails "
            "those; see --heartbeat).") if running else ""


def _setup(setup: dict[str, Any]) -> list[tuple[str, str]]:
    """The report's rows of a setup record (:func:`fairtune.tuning._setup.read_setup`)."""

    def listed(values: Any) -> str | None:
        return ", ".join(map(str, values)) if values else None

    validated, given = listed(setup.get("limits")), listed(setup.get("limits_given"))
    how = [f"less a margin of {setup['margin']:g}"] if setup.get("margin") else []
    if setup.get("confidence"):  # the certified search validates against tightened limits
        how.append(f"tightened by the width of their {percent(setup['confidence'])} bound on "
                   "the safety rows, so that the models found can pass the safety test, "
                   "which judges the limits as given")
    limits = given or validated
    if given and (how or validated != given):
        limits = (f"{given} as given; the trials were validated against {validated}"
                  + (f" ({'; '.join(how)})" if how else ""))
    elif limits and how:  # a record of an older version: the validated limits only
        limits += f" (the limits the trials were validated against: {'; '.join(how)})"
    target, positive = setup.get("target"), setup.get("pos_label")  # what a positive rate counts
    rows = [("dataset", setup.get("dataset")),
            ("favourable", f"{target} = {positive}" if target is not None else positive),
            ("model", setup.get("model")),
            ("metric", setup.get("metric")), ("limits", limits),
            ("validation", setup.get("validation")),
            ("mitigation", listed(setup.get("mitigation")))]
    if setup.get("budgets"):
        resource = setup.get("resource") or "n_samples"
        shown = ", ".join(f"{float(b):.3g}" for b in setup["budgets"])
        of = "the training rows" if resource == "n_samples" else resource
        rows += [("budgets", f"{shown} (fractions of {of})"),
                 ("resource", resource if resource != "n_samples" else None),
                 ("pruner", (setup.get("pruner") or "none: every trial runs every budget") + (
                     "; it also stops trials that break a limit at a smaller budget"
                     if setup.get("prune_unfair") else ""))]
    if setup.get("metric") == "roc_auc":
        rows.append(("note", "roc_auc scores the probabilities; the fairness values are "
                             "measured on the 0/1 predictions (threshold 0.5)."))
    return [(what.capitalize(), str(value)) for what, value in rows if value]


def deployment_lines(trial: optuna.trial.FrozenTrial) -> list[str]:
    """Which mitigation a trial used and what its deployed model needs at prediction time."""
    from fairtune.tuning.mitigation import MITIGATIONS

    used = trial.user_attrs.get(_keys.MITIGATION_USED_KEY)
    lines = ([f"Mitigation: {used} ({MITIGATIONS[used].implementation})."]
             if used in MITIGATIONS else [])
    if used in ("threshold", "reduction"):
        lines.append("Its predictions are randomized: the trial's validation values are their "
                     "expected values.")
    return lines + _sensitive_line(trial)


def _sensitive_line(trial: optuna.trial.FrozenTrial) -> list[str]:
    """What a trial's deployed model needs of the sensitive feature at prediction time (none
    when not recorded)."""
    how = trial.user_attrs.get(_keys.SENSITIVE_AT_PREDICTION_KEY)
    needs = "not needed" if how == "no" else f"needed, as {how}"
    return [f"Sensitive feature at prediction: {needs}."] if how else []


_NOT_COMPARABLE = ("Each tenant scores its trials on its own data, so the values of different "
                   "tenants are not comparable: each tenant's best fair trial is the best of its "
                   "own trials.")


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
        best: Its best fair trial among its own trials, or None.
        utility: Its cumulative utility (:func:`fairtune.tenancy.cumulative_utilities`).
    """

    tenant: str
    trials: int
    pruned: int
    fair: int
    best: Any
    utility: float


class Row(NamedTuple):
    """One line of the reported trial's table: ``status`` as shown (``"ok"``, ``"violated
    (...)"``, ``"param"``, ...), ``kind`` what the line is (a group's positive rate is shown
    indented) and ``ok`` whether it meets its limit (None: no limit to meet)."""

    name: str
    value: str
    status: str = ""
    kind: Literal["score", "group", "param"] = "score"
    ok: bool | None = None


Finding = tuple[Literal["warning", "note"], str]
"""A line about the reported trial: ``(kind, text)``."""


_TENANTS = ["tenant", "trials", "pruned", "fair", "best fair trial", "cumulative utility"]
"""The header of the table of tenants (its columns but the first are numbers)."""


@dataclass
class StudyReport:
    """A single-objective study's report; :func:`report` builds it from the study's records,
    and :meth:`text`, :meth:`markdown` and :meth:`html` format the same parts of it.

    Attributes:
        study: The study reported on.
        counts: ``(trials, complete, failed, fair)``.
        setup: ``(what, value)`` rows of the stored setup record.
        running: A line about trials still RUNNING ('' if none).
        best: The best fair trial, or the least unfair one when no trial is fair (None without
            completed trials, and for a study shared by tenants: see ``sections``).
        best_is_fair: Whether ``best`` meets every limit.
        metric: The name of the study's value (e.g. ``"accuracy"``).
        deploy: The model to deploy and why (:class:`~fairtune.tuning._deployment.Deployment`);
            a certified trial other than ``best`` is the trial reported.
        rows: The table of the trial reported (:class:`Row`).
        deployment: What the reported trial's model uses and needs at prediction time.
        findings: ``(kind, text)`` lines about the reported trial: a warning that it predicts
            one class for everyone, or a note of how many trials do.
        test_trial: The trial the test lines belong to (None without them).
        test_lines: The test split's score lines recorded with the study
            (:func:`render_test_scores`).
        test_current: Whether ``test_trial`` is the model to deploy (else the test lines are
            labelled by their trial).
        pruned: The trials a pruner stopped at a smaller budget.
        tenant: The tenant asked for (:func:`report`'s ``tenant``); in a section, the tenant
            whose trials it reports.
        tenants: Of a study shared by tenants, one row per tenant (empty otherwise).
        sections: Of a study shared by tenants, the report of each tenant's own trials: the
            tenant asked for, else every tenant.
        untagged: Of a study shared by tenants, the trials that carry no tenant.
    """

    study: Any
    counts: tuple[int, int, int, int]
    setup: list[tuple[str, str]]
    running: str
    best: Any
    best_is_fair: bool
    metric: str
    deploy: Any = None
    rows: list[Row] = field(default_factory=list)
    deployment: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    test_trial: int | None = None
    test_lines: list[str] = field(default_factory=list)
    test_current: bool = True
    pruned: int = 0
    tenant: str | None = None
    tenants: list[TenantRow] = field(default_factory=list)
    sections: list[StudyReport] = field(default_factory=list)
    untagged: int = 0

    def _summary(self) -> str:
        trials, complete, failed, fair = self.counts
        who = f"Study {printable(self.study.study_name)}: {trials} trials"
        if self.tenants:
            who += f" of {len(self.tenants)} tenants" + (
                f" ({self.untagged} untagged)" if self.untagged else "")
        elif self.tenant is not None:
            who = f"Tenant {printable(self.tenant)}: {trials} trials"
        # A multi-fidelity search says how many trials it stopped early, even none.
        pruning = self.pruned or any(what == "Pruner" for what, _ in self.setup)
        return (who + f", {complete} complete" + (f", {self.pruned} pruned" if pruning else "")
                + (f", {failed} failed" if failed else "")
                + ("." if self.deploy is not None and self.deploy.why == "best" else
                   f", {fair} fair."))

    @property
    def deployed(self) -> Any:
        """The certified trial when it is not ``best``, else None."""
        d = self.deploy
        certified = d is not None and d.why == "certified"
        return d.trial if certified and d.trial.number != self.best.number else None

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

    def _verdict(self) -> tuple[str, str, list[str]]:
        """``(headline, heading, answer)``: the heading of the reported trial's table, the
        note's heading, and what a reviewer reads first (the model to deploy, its certificate,
        its test verdict, what it needs at prediction time)."""
        best, d = self.best, self.deploy
        if best is None:
            return "No completed trial yet.", "No completed trial yet.", []
        if self.deployed is not None:
            headline = f"Trial #{self.deployed.number}, the certified model ({d.passed_over})"
        elif not self.best_is_fair:
            headline = f"No trial meets every limit yet; the least unfair one is #{best.number}."
        elif d.why == "best":
            headline = f"Best trial: #{best.number} (the study has no fairness limits)"
        else:
            headline = f"Best fair trial: #{best.number}" + (
                " (a candidate: no model is certified yet)" if d.why == "pending" else "")
        untested = [d.untested_text()] if d.untested_text() else []
        if d.why == "no_fair":
            return headline, headline, []
        if d.why == "refused":  # the safety test refused every candidate
            return headline, "Deploy no model: the safety test certified none", [
                f"Deploy no model: {d.certificate.get('message', 'none could be certified.')}",
                *untested]
        if d.why == "pending":  # only a certified model is deployed: the candidate, no more
            candidate = (f"The candidate: trial #{best.number}, the best fair trial "
                         f"({self.metric} {best.value:.4f} on validation), not certified.")
            return headline, (f"No model certified yet; the best fair trial, #{best.number}, is "
                              "the candidate"), [d.pending_text(), candidate]
        constant = self._constant()
        short = {"certified": "certified", "best": "the best trial"}.get(
            d.why, "the best fair trial")
        heading = f"Deploy trial #{d.trial.number}, {short}" + ("" if constant is None else (
            f": a constant model, it predicted {constant} for every safety row"))
        what = {"certified": "the certified model"}.get(d.why, short) + (
            f" ({d.passed_over})" if d.passed_over else "")
        facts = "" if constant is None else (
            f"; a constant model: it predicted {constant} for every safety row")
        where = "" if d.why == "best" else " on validation"  # a study fairtune did not set up
        answer = [f"Deploy trial #{d.trial.number}, {what} "
                  f"({self.metric} {d.trial.value:.4f}{where}{facts})."]
        if d.why == "certified":
            answer += [str(d.certificate["message"]), *untested]
        if self.test_lines and self.test_trial == d.trial.number:
            answer.append(self.test_lines[0])
        return headline, heading, answer + _sensitive_line(d.trial)

    def _not_deployed(self) -> str:
        """' (not the model to deploy)' when the test lines are another trial's."""
        return "" if self.test_current else " (not the model to deploy)"

    def _parts(self, *, answer_first: bool) -> dict[str, Any]:
        """The report's parts, built once for each view to format; a line the answer repeats is
        said once: in the answer with ``answer_first`` (note and page), else below it (text)."""
        headline, heading, answer = self._verdict()
        below = {"deployment": self.deployment, "test": self.test_lines}
        findings = self.findings
        if answer_first:
            below = {part: [line for line in lines if line not in answer]
                     for part, lines in below.items()}
            findings = [(kind, line) for kind, line in findings if line not in answer]
        else:
            said = {*self.deployment, *self.test_lines, *(line for _, line in findings)}
            answer = [line for line in answer if line not in said]
        return {"headline": headline, "heading": heading, "answer": answer, **below,
                "findings": findings,
                "scores": [row for row in self.rows if row.kind != "param"],
                "params": [row for row in self.rows if row.kind == "param"],
                "tenants": [[row.tenant, str(row.trials), str(row.pruned), str(row.fair),
                             "-" if row.best is None else
                             f"#{row.best.number} {row.best.value:.4f}", f"{row.utility:.4f}"]
                            for row in self.tenants]}

    def text(self) -> str:
        """The report as ``fairtune report`` prints it (control characters escaped)."""
        parts = self._parts(answer_first=False)
        lines = [self._summary(), *parts["answer"],
                 *(f"{what:<11} {value}" for what, value in self.setup),
                 *([f"{'Running':<11} {self.running}"] if self.running else [])]
        if self.tenants:
            lines += format_table(_TENANTS, parts["tenants"],
                                  right_aligned={1, 2, 3, 4, 5}).splitlines()
            lines.append(_NOT_COMPARABLE)
        else:
            lines.append(parts["headline"])
        if self.best is not None:
            cells = [("  " * (row.kind == "group") + row.name, row.value, row.status)
                     for row in self.rows]  # a group's name indented
            lines += format_table(["", "value", ""], cells, right_aligned={1}).splitlines()
            lines += parts["deployment"] + [line for _, line in parts["findings"]]
            if parts["test"]:
                lines.append(f"Test scores for trial #{self.test_trial}{self._not_deployed()}:")
                lines += ["  " + line for line in parts["test"]]
        return "".join(printable(line) + "\n" for line in lines) + "".join(
            "\n" + section.text() for section in self.sections if self.tenant is not None)

    def markdown(self) -> str:
        """The report as Markdown, for optuna-dashboard's study note (:mod:`fairtune.dashboard`);
        every value from the data or the user is shown as typed, never read as markup."""
        parts, out = self._parts(answer_first=True), []
        if self.tenants:
            out += ["### Tenants", "", markdown_table(_TENANTS, parts["tenants"],
                                                      right_aligned={1, 2, 3, 4, 5}),
                    markdown_text(_NOT_COMPARABLE), ""]
            for section in self.sections:
                out += [f"### Tenant {markdown_text(section.tenant)}", "", section.markdown(), ""]
        else:
            out += [f"### {markdown_text(parts['heading'])}", ""]
            out += [f"- {markdown_text(line)}" for line in
                    parts["answer"] + [line for _, line in parts["findings"]]]
            if self.best is not None:
                which = ("the certified model" if self.deployed is not None else
                         "the best trial" if self.deploy.why == "best" else
                         "the best fair trial" if self.best_is_fair else "the least unfair trial")
                on = "" if self.deploy.why == "best" else ", on validation"
                out += ["", f"Trial \\#{self._subject.number}, {which}{on}:", "",
                        markdown_table(["", "value", ""], [row[:3] for row in parts["scores"]],
                                       right_aligned={1})]
                out += [f"- {markdown_text(line)}" for line in parts["deployment"]]
                if parts["test"]:
                    out += ["", f"Test split, trial #{self.test_trial}"
                                f"{markdown_text(self._not_deployed())}:", ""]
                    out += [f"- {markdown_text(line)}" for line in parts["test"]]
            out.append("")
        if self.tenants or self.tenant is None:  # not in a tenant's section: once per note
            if self.setup:
                out += [markdown_table(["setup", ""], self.setup, right_aligned=set()), ""]
            out.append(markdown_text(self._summary()))
        return "\n".join(out).rstrip() + "\n"

    def html(self, *, fairness_metric: str | None = None) -> str:
        """The report as one self-contained HTML page, the plots inline.

        Args:
            fairness_metric: The trade-off plot's x axis. Defaults to None: the study's first
                limit.
        """
        title = _e(f"fairtune report: {self.study.study_name}")
        return "\n".join([
            "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{title}</title>", f"<style>{_CSS}</style></head><body>", f"<h1>{title}</h1>",
            *self._html_body(fairness_metric, level=2), "</body></html>"]) + "\n"

    def _html_body(self, fairness_metric: str | None, *, level: int) -> list[str]:
        """The page's summary, answer and setup, then the table of tenants and a section per
        tenant shown, or the reported trial's table, its model, its test split and the plots;
        headings at ``level``."""
        h, parts = f"h{level}", self._parts(answer_first=True)

        def items(title: str, lines: list[str], ul: str = "<ul>") -> list[str]:
            return [f"<{h}>{_e(title)}</{h}>{ul}", *(f"<li>{_e(line)}</li>" for line in lines),
                    "</ul>"] if lines else []

        out = [f"<p class=summary>{_e(self._summary())}</p>",
               *items("The answer", parts["answer"], "<ul class=answer>")]
        if self.setup:
            out += [f"<{h}>Setup</{h}><table class=setup>",
                    *(f"<tr><th>{_e(what)}</th><td>{_e(value)}</td></tr>"
                      for what, value in self.setup), "</table>"]
        if self.running:
            out.append(f"<p class=note>Running: {_e(self.running)}</p>")
        if self.tenants:
            out.append(f"<{h}>Tenants</{h}><table class=tenants><tr>"
                       + "".join(f"<th>{cell}</th>" for cell in _TENANTS) + "</tr>")
            out += ["<tr>" + "".join(f"<td{' class=num' if i else ''}>{_e(cell)}</td>"
                                     for i, cell in enumerate(row)) + "</tr>"
                    for row in parts["tenants"]]
            out += ["</table>", f"<p class=note>{_e(_NOT_COMPARABLE)}</p>"]
            for section in self.sections:
                out += [f"<section><{h}>Tenant {_e(section.tenant)}</{h}>",
                        *section._html_body(fairness_metric, level=level + 1), "</section>"]
            return out
        out.append(f"<{h}>{_e(parts['headline'])}</{h}>")
        if self.best is None:
            return out
        out += [f'<p class="{kind}">{_e(line)}</p>' for kind, line in parts["findings"]]
        out.append("<div class=tables><table class=best><caption>Validation scores"
                   "</caption><tr><th></th><th>value</th><th></th></tr>")
        for row in parts["scores"]:
            cls = {True: "ok", False: "bad", None: ""}[row.ok]
            indent = " class=group" if row.kind == "group" else ""
            out.append(f"<tr class='{cls}'><td{indent}>{_e(row.name)}</td>"
                       f"<td class=num>{_e(row.value)}</td><td>{_e(row.status)}</td></tr>")
        out.append("</table>")
        if parts["params"]:
            out += ["<table class=params><caption>Parameters</caption>",
                    *(f"<tr><td>{_e(name)}</td><td class=num>{_e(value)}</td></tr>"
                      for name, value, *_ in parts["params"]), "</table>"]
        out.append("</div>")
        deployed = self.deploy is not None and self.deploy.trial is not None
        out += items("The deployed model" if deployed else f"Trial #{self._subject.number}'s "
                     "model (not deployed)", parts["deployment"])
        out += items(f"Test split (trial #{self.test_trial}{self._not_deployed()})", parts["test"])
        out.append(f"<{h}>Trade-off and progress</{h}><div class=plots>")
        own = "" if self.tenant is None else f" (tenant {self.tenant}'s trials only)"
        for draw, caption in (("tradeoff", "Every trial's validation value against its fairness "
                                           "value, the limit and the best fair trial"),
                              ("curve", "The best fair validation value after each trial")):
            image = _plot_png(self.study, draw, fairness_metric, tenant=self.tenant)
            caption = _e(caption + own + ".")
            out += [f'<figure><img alt="{caption}" src="data:image/png;base64,{image}">'
                    f"<figcaption>{caption}</figcaption></figure>"] if image else []
        return [*out, "</div>"]

    def write_html(self, path: str, *, fairness_metric: str | None = None) -> None:
        """Write :meth:`html` to ``path`` (UTF-8)."""
        with open(path, "w", encoding="utf-8") as file:
            file.write(self.html(fairness_metric=fairness_metric))


_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;"
    "color:#222}h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:1.6rem}"
    "table{border-collapse:collapse}td,th{padding:.2rem .7rem;text-align:left;border-bottom:"
    "1px solid #ddd}td.num{text-align:right;font-variant-numeric:tabular-nums}td.group{"
    "padding-left:1.8rem}tr.ok td:last-child{color:#1a7f37}tr.bad td:last-child{color:#b42318;"
    "font-weight:600}.warning{background:#fff4e5;border-left:4px solid #f79009;padding:.5rem "
    ".8rem}.note{color:#444}caption{text-align:left;font-weight:600;padding:.3rem 0}.tables{"
    "display:flex;flex-wrap:wrap;gap:2.5rem;align-items:flex-start}.plots{display:grid;"
    "grid-template-columns:repeat(auto-fit,minmax(24rem,1fr));gap:1rem}figure{margin:0}"
    ".plots img{width:100%;display:block}figcaption{color:#555;font-size:.9rem}h3{font-size:"
    "1.05rem;margin-top:1.4rem}section{border-top:2px solid #ccc;margin-top:2rem}")


def save_plot(
    study: optuna.Study, path: Any, draw: str = "tradeoff", *,
    fairness_metric: str | None = None, tenant: str | None = None,
) -> None:
    """Write ``study``'s trade-off plot (``draw="tradeoff"``, x axis ``fairness_metric``),
    best-fair curve (``"curve"``) or Pareto front (``"pareto"``) to an image file (a binary
    stream: as PNG); with ``tenant``, of that tenant's trials only.

    Raises:
        ValueError: If no completed trial has fairness values to draw.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna
    from matplotlib.figure import Figure
    from optuna.visualization.matplotlib import plot_pareto_front

    from fairtune.visualization import plot_best_feasible, plot_tradeoff

    with warnings.catch_warnings():  # Optuna marks its Pareto-front plot experimental
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        ax = (plot_pareto_front(study, target_names=objective_names(study)) if draw == "pareto"
              else plot_tradeoff(study, metric=fairness_metric, tenant=tenant)
              if draw == "tradeoff" else plot_best_feasible(study, tenant=tenant))
    figure = ax.figure
    assert isinstance(figure, Figure)  # each plot draws on a new figure, not a subfigure
    try:
        figure.tight_layout()
        figure.savefig(path, dpi=120, format="png" if isinstance(path, io.IOBase) else None)
    finally:
        plt.close(figure)


def _plot_png(study: Any, draw: str, fairness_metric: str | None,
              tenant: str | None = None) -> str | None:
    """A plot of ``study`` as base64 PNG text, or None when there is nothing to draw."""
    buffer = io.BytesIO()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            save_plot(study, buffer, draw, fairness_metric=fairness_metric, tenant=tenant)
    except (ImportError, ValueError):  # no plot extra, or no trial with fairness values
        return None
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _best_rows(
    best: optuna.trial.FrozenTrial, limits: dict[str, Any], metric: str
) -> list[Row]:
    """The report's rows of a trial: its metric, fairness values, positive rates, parameters."""
    from fairtune.fairness import fairness_values

    values, attrs = fairness_values(best), best.user_attrs
    rows = [Row(metric, f"{best.value:.4f}")]
    for name, limit in limits.items():
        if name in values:
            ok = None if limit is None else limit.violation(values[name]) <= 0
            status = {None: "", True: "ok", False: f"violated ({limit})"}[ok]
            rows.append(Row(name, f"{values[name]:.4f}", status, ok=ok))
        elif name in best.constraints:  # set by hand (trial.set_constraint): <= 0 is ok
            violation = best.constraints[name]
            rows.append(Row(f"constraint {name}", f"{violation:.4g}",
                            "ok" if violation <= 0 else "violated", ok=violation <= 0))
        else:
            rows.append(Row(name, "-", "not measured"))
    rows += [Row(name, f"{value:.4f}") for name, value in values.items() if name not in limits]
    if _keys.POSITIVE_RATE_KEY in attrs:
        rows.append(Row("predicted positive rate", f"{attrs[_keys.POSITIVE_RATE_KEY]:.4f}"))
        rows += [Row(f"group {distinct(group)}", f"{rate:.4f}", kind="group")
                 for group, rate in (attrs.get(_keys.POSITIVE_RATES_KEY) or {}).items()]
    return rows + [Row(name, f"{value:.6g}" if isinstance(value, float) else str(value), "param",
                       kind="param") for name, value in best.params.items()]


def _counts(trials: Sequence[optuna.trial.FrozenTrial], limits: dict[str, Any]
            ) -> tuple[tuple[int, int, int, int], int]:
    """``((trials, complete, failed, fair), pruned)`` of ``trials``."""
    from optuna.trial import TrialState

    from fairtune.fairness import is_fair

    states = [t.state for t in trials]
    fair = sum(is_fair(t, limits) for t in trials)  # only COMPLETE trials can be fair
    return ((len(trials), states.count(TrialState.COMPLETE), states.count(TrialState.FAIL), fair),
            states.count(TrialState.PRUNED))


def report(study: optuna.Study, *, tenant: str | None = None) -> StudyReport:
    """The report of a single-objective study, read from its records (it never fits a model).

    Args:
        study: A single-objective study (fairtune's trials record their fairness values).
        tenant: Of a study shared by tenants, the tenant whose section to show. Defaults to
            None: every tenant's.

    Raises:
        ValueError: If the study has several objectives, or ``tenant`` is not one of its
            tenants (:func:`check_tenant`).
    """
    from fairtune.fairness import best_fair_trial, study_limits
    from fairtune.tenancy import cumulative_utilities, trials_by_tenant
    from fairtune.tuning._setup import read_setup

    if len(study.directions) != 1:
        raise ValueError(f"`study` must have one objective for this report, but got "
                         f"{len(study.directions)} directions; `fairtune report` shows a "
                         "multi-objective study's Pareto-optimal trials.")
    tenants = check_tenant(study, tenant)
    if not tenants:
        return _report_of(study)
    trials, by_tenant = study.get_trials(deepcopy=False), trials_by_tenant(study, states=None)
    utilities = cumulative_utilities(study, tenants)
    rows = []
    for name in tenants:  # each tenant under its own limits (each may have others)
        own = study_limits(study, name)
        (count, _, _, fair), pruned = _counts(by_tenant.get(name, []), own)
        rows.append(TenantRow(name, count, pruned, fair, best_fair_trial(study, own, tenant=name),
                              utilities[name]))
    (count, complete, failed, _), pruned = _counts(trials, {})
    return StudyReport(  # fair by each tenant's own limits
        study=study, counts=(count, complete, failed, sum(row.fair for row in rows)),
        pruned=pruned, setup=[*_setup(read_setup(study)), ("Tenants", ", ".join(tenants))],
        running=_running(study), best=None, best_is_fair=False, metric="value", tenant=tenant,
        tenants=rows, untagged=sum(_keys.TENANT_KEY not in t.user_attrs for t in trials),
        sections=[_report_of(study, t) for t in ([tenant] if tenant is not None else tenants)])


def _report_of(study: optuna.Study, tenant: str | None = None) -> StudyReport:
    """The report of ``study``'s trials (of ``tenant``'s only, under its own setup record)."""
    from optuna.trial import TrialState

    from fairtune.fairness import study_limits
    from fairtune.tenancy import tenant_of
    from fairtune.tuning import predicts_one_class
    from fairtune.tuning._deployment import deployment, read_test_fits
    from fairtune.tuning._setup import read_setup

    setup, limits = read_setup(study, tenant), study_limits(study, tenant)
    trials = [t for t in study.get_trials(deepcopy=False)
              if tenant is None or tenant_of(t) == tenant]
    counts, pruned = _counts(trials, limits)
    page = StudyReport(
        study=study, counts=counts, pruned=pruned, setup=_setup(setup),
        running=_running(study) if tenant is None else "", best=None, best_is_fair=False,
        metric=str(setup.get("metric") or "value"), tenant=tenant)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    if not complete:
        return page
    page.deploy = deploy = deployment(study, tenant)  # its best: the best fair trial, or None
    page.best_is_fair = deploy.best is not None
    page.best = deploy.best if page.best_is_fair else least_unfair_trial(complete, limits)
    shown = page._subject  # the model to deploy's facts
    page.rows = _best_rows(shown, limits, page.metric)
    # A refusal is the answer itself; a certificate and a pending verdict are about the model.
    certified = page.certificate.get("message") if page.certificate.get("certified") else None
    page.deployment = deployment_lines(shown) + [
        str(line) for line in (certified, deploy.pending_text()) if line]
    one_class = sum(predicts_one_class(t) is not None for t in complete)
    # A certified constant model is said to be one in the answer.
    label = predicts_one_class(shown) if page._constant() is None else None
    if label is not None:
        page.findings = [("warning", (
            f"Warning: trial #{shown.number} predicts one class ({label}) for everyone: its "
            f"{page.metric} is that of a constant guess and its fairness gaps are trivially 0 "
            f"({one_class} of {len(complete)} complete trials do so). Tighter limits are met "
            "this way; check the model before trusting it."))]
    elif one_class:
        page.findings = [("note", f"{one_class} of {len(complete)} complete trials predict "
                                  "one class for everyone.")]
    # The test scores recorded with the study (FairObjective.conclude, `fairtune tune`), of
    # the trial they were measured on: labelled by it when it is no longer the one to deploy.
    number, fits, lines = read_test_fits(study, tenant)
    if number in {t.number for t in complete}:  # of this tenant's trials
        page.test_current = deploy.trial is not None and number == deploy.trial.number
        page.test_trial, page.test_lines = number, render_test_scores(
            number, fits, current=page.test_current) if fits else lines
    return page


# -- multi-objective studies ------------------------------------------------------------------


def objective_names(study: optuna.Study) -> list[str]:
    """The names of a multi-objective study's objectives as stored (``objective i`` if not)."""
    from fairtune.tuning._setup import read_setup

    return [str(name) for name in read_setup(study).get("objectives") or [
        f"objective {i}" for i in range(len(study.directions))
    ]]


def pareto_text(study: optuna.Study) -> str:
    """A multi-objective study's report: its Pareto-optimal trials and the task correlation."""
    from optuna.trial import TrialState

    from fairtune._storage import stored_task_correlation
    from fairtune.tuning import predicts_one_class

    names, running = objective_names(study), _running(study)
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    out = [f"Study {printable(study.study_name)}: {len(study.trials)} trials, {len(trials)} "
           "complete.\n", f"{'Running':<11} {running}\n" if running else ""]
    if not trials:
        return "".join(out) + "No completed trial yet.\n"
    best = sorted(study.best_trials, key=lambda t: t.number)
    # A stored setup naming fewer objectives than the study has still reports what it names.
    # A constant model (the base rate's accuracy, every fairness gap 0) is Pareto-optimal by
    # construction: marked, as the single-objective report warns about it.
    labels = [predicts_one_class(t) for t in best]
    marked = any(label is not None for label in labels)
    header = ["trial", *(f"{n} ({d.name.lower()[:3]})"
                         for n, d in zip(names, study.directions, strict=False)), *[""] * marked]
    rows = [[f"#{t.number}", *(f"{v:.4f}" for v in t.values), *[
        "" if label is None else f"predicts {label} for everyone"] * marked]
        for t, label in zip(best, labels, strict=True)]
    out += [f"Pareto-optimal trials ({len(best)}):\n",
            format_table(header, rows, right_aligned=set(range(1, len(study.directions) + 1)))]
    one_class = sum(predicts_one_class(t) is not None for t in trials)
    if one_class:
        out.append(f"{one_class} of {len(trials)} complete trials predict one class for "
                   "everyone: their fairness gaps are trivially 0; check a model before "
                   "trusting it.\n")
    correlation = stored_task_correlation(study)
    if correlation is not None and correlation.shape == (len(names), len(names)):
        out += ["Task correlation learned by MTKBSampler (of the objectives as defined):\n",
                format_table(["", *names], [[a, *(f"{c:+.2f}" for c in correlation[i])]
                                            for i, a in enumerate(names)],
                             right_aligned=set(range(1, len(names) + 1)))]
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
    :func:`pareto_text`) and save the plots asked for (``plot``: the trade-off or Pareto
    front, ``curve``: the best-fair curve) once there is a trial to draw; ``tenant`` as in
    :func:`check_tenant`."""
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
    for path, draw in (drawing for drawing in drawn if drawing[0]):
        save_plot(study, path, draw, fairness_metric=fairness_metric, tenant=tenant)
        out.write(f"{names[draw]} written to {printable(path)}\n")


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
    to ``path`` (None passes)."""
    import os
    from pathlib import Path

    from fairtune._storage import can_create_in

    if path is None:
        return
    formats = ["html"]
    if not html:
        from matplotlib.backend_bases import FigureCanvasBase

        formats = sorted(FigureCanvasBase.get_supported_filetypes())
    target = Path(path).expanduser()
    if target.suffix.lower().lstrip(".") not in formats:
        raise ValueError(f"{flag} must be a file name ending in one of "
                         f"{['.' + f for f in formats]}, but got {path!r}.")
    folder = target.resolve().parent
    if not folder.is_dir():
        raise ValueError(f"{flag} must be a file in an existing folder, but got {path!r} "
                         f"(no folder {str(folder)!r}).")
    if target.is_dir():
        raise ValueError(f"{flag} must be a file, but got the folder {path!r}.")
    writable = os.access(target, os.W_OK) if target.exists() else can_create_in(folder)
    if not writable:
        raise ValueError(f"{flag} {path!r} cannot be written (read-only file or folder).")


def check_report_options(study: optuna.Study, *, curve: Any = None, html: Any = None,
                         fairness_metric: str | None = None, tenant: str | None = None,
                         plots: bool = False) -> None:
    """Refuse what a report of ``study`` cannot show: of a multi-objective study the
    best-fair curve, a fairness axis, the HTML page or a tenant; a ``tenant`` the study does
    not have; a ``fairness_metric`` no trial has a value for."""
    from fairtune._names import arg
    from fairtune.fairness import fairness_values

    name = study.study_name
    if len(study.directions) > 1:
        for option, value in (("curve", curve), ("metric", fairness_metric), ("html", html),
                              ("tenant", tenant)):
            if value is not None:
                raise ValueError(
                    f"{arg(option)} does not apply to study {name!r}: it has "
                    f"{len(study.directions)} objectives, whose trade-off is drawn as a "
                    "Pareto front (the best-fair curve and its axis need one objective).")
        return
    check_tenant(study, tenant, plots=plots)
    if fairness_metric is not None and not any(
            fairness_metric in fairness_values(t) for t in study.get_trials(deepcopy=False)):
        raise ValueError(f"{arg('metric')} {fairness_metric}: no trial of study {name!r} has "
                         "a value for it.")
