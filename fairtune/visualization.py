"""Plots of fairness-constrained studies (matplotlib; install with ``pip install fairtune[plot]``).

* :func:`plot_tradeoff`: every trial as objective vs. fairness value, the limit, the best fair
  trial (figure 3 of Perrone et al. 2021).
* :func:`plot_best_feasible`: best feasible objective vs. trial number, median and interquartile
  band over repeated studies (figure 2 of the paper).

Of a study shared by tenants, each scoring trials on its own data, both draw one tenant's trials
(``tenant``). A study name is drawn as written: its ``$`` signs are not typeset as math.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
from optuna.study import StudyDirection
from optuna.trial import TrialState

from fairtune._text import printable
from fairtune.fairness.constraints import (
    USER_ATTR_PREFIX,
    FairnessLimit,
    fairness_values,
    is_fair,
    parse_limits,
    study_limits,
)
from fairtune.fairness.metrics import METRICS, get_metric

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["plot_best_feasible", "plot_tradeoff"]


def _pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("fairtune.visualization needs matplotlib: pip install "
                          "'fairtune[plot]'") from e
    return plt


def _complete(study: optuna.Study, tenant: str | None = None) -> list[optuna.trial.FrozenTrial]:
    """The completed trials with a finite value (of ``tenant``'s only, if given)."""
    from fairtune.tenancy import tenant_of

    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.value is not None and np.isfinite(t.value)
            and (tenant is None or tenant_of(t) == tenant)]


def _value_label(studies: Sequence[optuna.Study], tenant: str | None = None) -> str:
    """The name of the metric the studies optimized (their setup records', ``tenant``'s of a
    shared study), or "objective value"; as stored (:func:`_literal` makes it matplotlib's)."""
    from fairtune.tuning._setup import read_setup

    names = {read_setup(s, tenant).get("metric") for s in studies}
    return str(names.pop()) if len(names) == 1 and None not in names else "objective value"


def _literal(text: Any) -> str:
    """``text`` as matplotlib should draw it: control characters escaped, and each ``$``
    escaped so that a name such as ``"cost $5-$10"`` is not typeset as math."""
    return printable(text).replace("$", r"\$")


def _title(text: Any) -> str:
    """A title as :func:`_literal` draws it, on at most 3 lines of 40 characters (a long study
    name would run off both edges of the figure), cut with "..."."""
    import textwrap

    wrapped = textwrap.wrap(printable(text), 40, max_lines=3, placeholder=" ...") or [""]
    return "\n".join(map(_literal, wrapped))


@dataclass
class _TradeoffData:
    """What a trade-off figure draws (``_tradeoff_data``), its words as stored (each drawer
    escapes them): one owner of the facts for the matplotlib plot and the optuna-dashboard
    figure (:mod:`fairtune.dashboard`).

    Attributes:
        metric: The fairness metric on the x axis (canonical name).
        x, y, numbers: Each completed trial's value of ``metric``, objective value and number.
        limits: ``(bound, label)`` of the study's limit on ``metric`` as given, then of the
            tightened one the trials were validated against when it differs (a ``margin``, or
            ``confidence``); none without a limit.
        star: ``(x, y, label)`` of the model to deploy
            (:func:`fairtune.tuning._deployment.deployment`), or with ``confidence`` before a
            current verdict of the candidate, if it has a value of ``metric``; else None.
        title, x_label, y_label: The title and the axes' names (the y axis is the metric the
            study maximized, or "objective value").
    """

    metric: str
    x: np.ndarray
    y: np.ndarray
    numbers: np.ndarray
    limits: list[tuple[float, str]]
    star: tuple[float, float, str] | None
    title: str
    x_label: str
    y_label: str


def _tradeoff_data(study: optuna.Study, metric: str | None = None, *,
                  tenant: str | None = None) -> _TradeoffData:
    """The points, limit and best fair trial of :func:`plot_tradeoff` (same arguments).

    Raises:
        ValueError: If no completed trial has a value for the metric.
    """
    from fairtune.tenancy import check_tenant

    check_tenant(study, tenant, plots=True)  # one tenant's trials, never mixed
    trials = _complete(study, tenant)
    limits = {m: limit for m, limit in study_limits(study, tenant).items()
              if isinstance(limit, FairnessLimit)}  # not the constraints set by hand
    if metric is None:
        found = [*limits, *(m for t in trials for m in fairness_values(t))]
        if not found:
            raise ValueError(
                "`study` has no completed trial with fairness values (user attributes "
                f"'{USER_ATTR_PREFIX}<metric>'); record them with set_fairness_constraints."
            )
        metric = found[0]
    name = get_metric(metric).name
    points = [t for t in trials if name in fairness_values(t)]
    if not points:
        raise ValueError(f"`metric`: no completed trial has a value for {name!r}.")
    from fairtune.tuning._deployment import deployment
    from fairtune.tuning._setup import read_setup

    limit = limits.get(name)
    stored = read_setup(study, tenant).get("limits_given")
    given = next((g for g in (parse_limits(stored) if stored else []) if g.metric == name),
                 limit)
    lines = [] if given is None else [(given.bound, f"limit {given}")]
    if given is not None and limit is not None and limit != given:
        lines.append((limit.bound, f"validated against {limit.bound:g}"))
    record = deployment(study, tenant)
    best = record.trial if record.trial is not None else (
        record.best if record.why == "pending" else None)
    star = {"certified": "certified, to deploy", "pending": "candidate, not certified",
            "best": "best trial"}.get(record.why, "best fair trial")
    whose = "" if tenant is None else f" (tenant {tenant})"
    return _TradeoffData(
        metric=name, x=np.array([fairness_values(t)[name] for t in points]),
        y=np.array([t.value for t in points]), numbers=np.array([t.number for t in points]),
        limits=lines, star=None if best is None or name not in fairness_values(best) else (
            fairness_values(best)[name], best.value, f"{star} (#{best.number})"),
        title=f"Trade-off: {study.study_name}{whose}",
        x_label=f"{name} ({METRICS[name].description})",
        y_label=_value_label([study], tenant))


def plot_tradeoff(
    study: optuna.Study, metric: str | None = None, *, ax: Axes | None = None,
    tenant: str | None = None,
) -> Axes:
    """Scatter every completed trial as fairness value (x) vs. objective (y).

    Args:
        study: A single-objective study whose trials carry fairness values (user attributes
            ``"fairtune:<metric>"``, as written by ``set_fairness_constraints``).
        metric: The fairness metric on the x axis (name or alias). Defaults to the study's
            first limit, else the first metric found on the trials.
        ax: Axes to draw on. Defaults to a new figure.
        tenant: Of a study shared by tenants, draw this tenant's trials only, and star its
            best fair trial among them. Defaults to None: every trial.

    Returns:
        The Axes: points coloured by trial number (with a colorbar), the limit as given as a
        dashed vertical line and, when the trials were validated against a tighter one (a
        ``margin``, or ``confidence``), that one dotted; the model to deploy marked with a
        star, the trial every report names (with ``confidence`` the certified model, or the
        candidate before the safety test has run; none after a refusal). The y axis names the
        metric the study maximized when it is stored, else "objective value".

    Raises:
        ValueError: If no completed trial has a value for the metric.
    """
    plt = _pyplot()
    data = _tradeoff_data(study, metric, tenant=tenant)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.5))
    scatter = ax.scatter(data.x, data.y, c=data.numbers, cmap="viridis", s=28, edgecolors="none")
    ax.figure.colorbar(scatter, ax=ax, label="trial number")
    for (bound, label), style in zip(data.limits, ("--", ":"), strict=False):
        ax.axvline(bound, color="crimson", linestyle=style, linewidth=1.2, label=label)
    if data.star is not None:
        x, y, label = data.star
        ax.scatter([x], [y], marker="*", s=260, facecolors="gold", edgecolors="black", zorder=5,
                   label=label)
    ax.set_xlabel(data.x_label)
    ax.set_ylabel(_literal(data.y_label))
    ax.set_title(_title(data.title))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small")
    return ax


def _best_feasible_curve(study: optuna.Study, n_trials: int,
                         tenant: str | None = None) -> np.ndarray:
    from fairtune.tenancy import check_tenant

    check_tenant(study, tenant, plots=True)  # one tenant's trials, never mixed
    limits, fair = study_limits(study, tenant), np.full(n_trials, np.nan)
    for t in _complete(study, tenant):
        if t.number < n_trials and is_fair(t, limits):
            fair[t.number] = t.value
    # The running best, NaN until the first fair trial (fmax and fmin skip NaN).
    return (np.fmax if study.direction == StudyDirection.MAXIMIZE else np.fmin).accumulate(fair)


def plot_best_feasible(
    studies: Mapping[str, Sequence[optuna.Study] | optuna.Study] | Sequence[optuna.Study]
    | optuna.Study, *, ax: Axes | None = None, tenant: str | None = None,
) -> Axes:
    """Best fair objective value vs. trial number, median and IQR band over studies.

    The x axis is the trial number as Optuna and every fairtune report count it, from 0: the
    point at trial k is the best fair value among trials 0 to k.

    Args:
        studies: Method label -> repeated studies (e.g. one per seed) or a single study; a
            list of studies or a single study is drawn as one line labelled with the (first)
            study's name.
        ax: Axes to draw on. Defaults to a new figure.
        tenant: Of studies shared by tenants, count this tenant's trials only (the x axis
            still numbers the study's trials). Defaults to None: every trial.

    Returns:
        The Axes, one line (median over studies, counting only studies that already have a
        fair trial, :func:`~fairtune.fairness.is_fair`) and one band (25th-75th percentile) per
        label, told apart by a legend (a single line is named in the title instead). The y
        axis names the studies' metric when they all stored the same one.
    """
    plt = _pyplot()
    if isinstance(studies, optuna.Study):
        studies = [studies]
    if isinstance(studies, Sequence) and studies and all(
            isinstance(s, optuna.Study) for s in studies):
        studies = {_literal(studies[0].study_name): list(studies)}
    if not isinstance(studies, Mapping) or not studies:
        raise ValueError(
            "`studies` must be a study, a list of studies or a mapping from labels to lists of "
            f"studies, with at least one study, but got studies={studies!r}.")
    groups = {label: [group] if isinstance(group, optuna.Study) else group
              for label, group in studies.items()}
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.5))
    for label, group in groups.items():
        if not group or not all(isinstance(s, optuna.Study) for s in group):
            raise ValueError(f"`studies[{label!r}]` must be a study or a list of studies, with "
                             f"at least one study, but got {group!r}.")
        n = max(len(s.trials) for s in group)
        if n == 0:
            continue  # no trial yet: nothing to draw for this label
        curves = np.vstack([_best_feasible_curve(s, n, tenant) for s in group])
        x = np.flatnonzero(~np.isnan(curves).all(0))  # trial numbers, from 0 as reports count
        if not len(x):
            continue  # no fair trial in any of the label's studies yet
        cols = curves[:, x]
        median = np.nanmedian(cols, axis=0)
        low, high = np.nanpercentile(cols, [25, 75], axis=0)
        # A curve of one point (the only fair trial is the last) is a marker, not an empty axis.
        (line,) = ax.plot(x, median, label=label, marker="o" if len(x) == 1 else None)
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2)
        ax.set_xlim(-0.5, max(n - 0.5, 0.5))  # every trial's number, fair or not
    ax.set_xlabel("trial number")
    every = [s for group in groups.values() for s in group]
    ax.set_ylabel(f"best fair {_literal(_value_label(every, tenant))}")
    if len(ax.get_lines()) > 1:  # a legend tells lines apart; one line is named in the title
        ax.legend(loc="best", fontsize="small")
    elif ax.get_lines():
        ax.set_title(f"Best fair value: {ax.get_lines()[0].get_label()}")
    return ax
