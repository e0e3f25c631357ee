"""The fair search inside optuna-dashboard: a study note, two figures and the HTML report.

optuna-dashboard shows a study's trials, values and user attributes, and its "Best Trial" badge
marks the trial with the best value whether it is fair or not. :func:`publish` adds fairtune's
view of the same study, where a team already watches its searches:

* the study note (``optuna_dashboard.save_note``): the trial to deploy (the best fair trial; with
  ``confidence``, the certified one, or that no model is certified yet, the best fair trial
  being only the candidate), its certificate and its verdict on the test split when they are
  recorded, its scores against each limit, the setup, and how many trials are fair
  (:meth:`fairtune.report.StudyReport.markdown`);
* two figures on the study page (``optuna_dashboard.save_plotly_graph_object``): every trial's
  value against its fairness value, with the limit and the best fair trial marked, and the best
  fair value after each trial; of a study shared by tenants, one pair per tenant;
* with an artifact store (Optuna's ``optuna.artifacts``, e.g.
  ``FileSystemArtifactStore("artifacts")``, the directory the dashboard is started with
  ``--artifact-dir``), the HTML report (:meth:`~fairtune.report.StudyReport.html`) as a study
  artifact, ``fairtune-report.html``, replaced in place at each update.

:class:`DashboardCallback` publishes as the search runs (docs/user_guide/fair_model.md gives
the times of an update); ``fairtune tune --dashboard`` (and ``--artifacts DIR``) does the same
and publishes once more at the end, with the test split's verdict.

Needs the ``dashboard`` extra: ``pip install 'fairtune[dashboard]'`` (optuna-dashboard, plotly).

Example:
    >>> from fairtune.dashboard import DashboardCallback
    >>> from fairtune.tuning import FairObjective
    >>> objective = FairObjective("german", "linear", limits="demographic_parity<=0.05")
    >>> study = objective.create_study(seed=0)
    >>> study.optimize(objective, n_trials=4, callbacks=[DashboardCallback(every=2)])
"""

from __future__ import annotations

import html
import io
import uuid
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fairtune._names import check_integer
from fairtune._optuna_compat import set_artifact_entry, storage_and_id
from fairtune._text import printable

if TYPE_CHECKING:
    import optuna

__all__ = ["REPORT_FILENAME", "DashboardCallback", "best_fair_figure", "publish",
           "report_artifact_id", "tradeoff_figure"]

REPORT_FILENAME = "fairtune-report.html"
"""The file name of the HTML report in the study's artifacts."""
TRADEOFF_ID = "fairtune-tradeoff"
"""The dashboard's id of the trade-off figure (``-<i>`` for the i-th tenant of a shared study)."""
_ARTIFACT_NAMESPACE = uuid.UUID("5b1c1f6e-52a4-4f0c-9a55-1e0f7d1f2a11")
"""Namespace of :func:`report_artifact_id` (any fixed UUID: it only has to stay the same)."""
BEST_FAIR_ID = "fairtune-best-fair"
"""The dashboard's id of the best-fair curve (``-<i>`` for the i-th tenant)."""


_MULTI_OBJECTIVE = (
    "`study` must have one objective for fairtune's dashboard view (the best fair trial), but "
    "got {n} directions; the dashboard shows a multi-objective study's Pareto front itself."
)


def check_artifact_store(artifact_store: Any) -> None:
    """Refuse what is not an Optuna artifact store (an object that writes and opens files by
    id; the class itself is not one)."""
    if artifact_store is not None and (isinstance(artifact_store, type) or not all(
        callable(getattr(artifact_store, name, None)) for name in ("write", "open_reader")
    )):
        raise ValueError(
            "`artifact_store` must be an Optuna artifact store (e.g. "
            "optuna.artifacts.FileSystemArtifactStore('artifacts')), but got "
            f"{printable(repr(artifact_store))[:80]}."
        )


def _check_study(study: Any) -> None:
    """Refuse what is not a single-objective Optuna study (a name, a multi-objective study)."""
    import optuna

    if not isinstance(study, optuna.Study):
        raise ValueError("`study` must be an optuna.Study (optuna.load_study(study_name=..., "
                         f"storage=...)), but got {printable(repr(study))[:80]}.")
    if len(study.directions) != 1:
        raise ValueError(_MULTI_OBJECTIVE.format(n=len(study.directions)))


def _modules() -> tuple[Any, Any]:
    """optuna_dashboard and plotly.graph_objects, or an ImportError that says how to get them."""
    try:
        import optuna_dashboard
        import plotly.graph_objects as go
    except ImportError as e:
        raise ImportError(
            f"fairtune.dashboard needs optuna-dashboard and plotly ({e.name} is missing): "
            "pip install 'fairtune[dashboard]'"
        ) from e
    return optuna_dashboard, go


def _plotly_text(value: Any) -> str:
    """``value`` for a plotly title or label: control characters escaped, and plotly's markup
    (``<b>``, ``<br>``, entities) shown as typed."""
    return html.escape(printable(value), quote=False)


def tradeoff_figure(study: optuna.Study, metric: str | None = None, *,
                    tenant: str | None = None) -> Any:
    """The trade-off plot of :func:`fairtune.visualization.plot_tradeoff` as a plotly figure:
    every completed trial's value (y) against its fairness value (x), coloured by trial number,
    the limit as a dashed line and the best fair trial as a star.

    Raises:
        ValueError: If no completed trial has a value for the metric.
    """
    from fairtune.visualization import _tradeoff_data

    _, go = _modules()
    _check_study(study)
    data = _tradeoff_data(study, metric, tenant=tenant)
    value = _plotly_text(data.y_label)
    figure = go.Figure(go.Scatter(
        # Plain lists, not arrays: plotly would write arrays as typed binary data, which the
        # dashboard's plotly.js may not read.
        x=data.x.tolist(), y=data.y.tolist(), mode="markers", name="trials",
        text=[f"trial #{n}" for n in data.numbers],
        hovertemplate="%{text}<br>" + data.metric + " %{x:.4f}<br>" + value + " %{y:.4f}"
                      "<extra></extra>",
        marker={"color": data.numbers.tolist(), "colorscale": "Viridis", "size": 8,
                "colorbar": {"title": {"text": "trial number"}}}))
    if data.star is not None:
        x, y, label = data.star
        figure.add_trace(go.Scatter(x=[x], y=[y], mode="markers", name=_plotly_text(label),
                                    marker={"symbol": "star", "size": 18, "color": "gold",
                                            "line": {"color": "black", "width": 1}}))
    for (bound, label), dash, where in zip(data.limits, ("dash", "dot"),
                                           ("top right", "bottom left"), strict=False):
        figure.add_vline(x=bound, line={"color": "crimson", "dash": dash},
                         annotation_text=_plotly_text(label), annotation_position=where)
    figure.update_layout(title={"text": _plotly_text(data.title)}, xaxis_title=data.x_label,
                         yaxis_title=value,
                         legend={"orientation": "h", "yanchor": "top", "y": -0.2})
    return figure


def best_fair_figure(study: optuna.Study, *, tenant: str | None = None) -> Any:
    """The best fair value after each trial (the curve of
    :func:`fairtune.visualization.plot_best_feasible` for one study) as a plotly figure; each
    point is a trial number, from 0, and the curve starts at the first fair trial."""
    from fairtune.visualization import _best_feasible_curve, _value_label

    _, go = _modules()
    _check_study(study)
    curve = _best_feasible_curve(study, len(study.trials), tenant)
    x = np.flatnonzero(~np.isnan(curve))  # the trial numbers from the first fair trial on
    whose = "" if tenant is None else f" (tenant {_plotly_text(tenant)})"
    label = _plotly_text(_value_label([study], tenant))
    return go.Figure(go.Scatter(x=x.tolist(), y=curve[x].tolist(), mode="lines+markers",
                                name="best fair value", line={"shape": "hv"}, marker={"size": 5}),
                     layout={"title": {"text": f"Best fair {label} after each trial{whose}"},
                             "xaxis": {"title": {"text": "trial number"},
                                       "range": [-0.5, max(len(curve) - 0.5, 0.5)]},
                             "yaxis": {"title": {"text": f"best fair {label}"}},
                             "showlegend": False})


def publish(
    study: optuna.Study, *, artifact_store: Any = None, after: int | None = None,
) -> None:
    """Write ``study``'s fairness view into the study, where optuna-dashboard shows it.

    Args:
        study: A single-objective study that fairtune tunes (FairObjective, FairSearchCV,
            ``fairtune tune``), in any storage the dashboard reads.
        artifact_store: An Optuna artifact store (``optuna.artifacts.FileSystemArtifactStore``,
            ``Boto3ArtifactStore``, ...): the HTML report is uploaded to it as a study artifact,
            replacing the one an earlier update uploaded. Defaults to None: no report.
        after: The trial number the update follows, said in the note. Defaults to None.

    Raises:
        ImportError: Without optuna-dashboard or plotly (the ``dashboard`` extra).
        ValueError: If the study has several objectives.
    """
    from fairtune.report import report

    dashboard, _ = _modules()
    _check_study(study)
    check_artifact_store(artifact_store)
    if after is not None and (isinstance(after, bool) or not isinstance(after, (int, np.integer))
                              or not 0 <= after < len(study.trials)):
        raise ValueError(f"`after` must be the number of one of the study's "
                         f"{len(study.trials)} trials (or None), but got after={after!r}.")
    page = report(study)
    when = "" if after is None else f" Updated after trial #{after}."
    deployed = page.tenants or (page.deploy is not None and page.deploy.trial is not None)
    note = (
        "## Fairness (fairtune)\n\n"
        + page.markdown()
        + "\nThe dashboard's **Best Trial** badge marks the trial with the best value, fair or "
        + ("not; the model to deploy is the one this note names first." if deployed else
           "not; this note names no model to deploy yet.")
        + when + "\n"
    )
    dashboard.save_note(study, note)
    for i, tenant in enumerate([row.tenant for row in page.tenants] or [None]):
        suffix = "" if tenant is None else f"-{i}"
        try:
            tradeoff = tradeoff_figure(study, tenant=tenant)
        except ValueError:  # no completed trial with fairness values yet: nothing to draw
            pass
        else:
            dashboard.save_plotly_graph_object(study, tradeoff,
                                               graph_object_id=TRADEOFF_ID + suffix)
        dashboard.save_plotly_graph_object(study, best_fair_figure(study, tenant=tenant),
                                           graph_object_id=BEST_FAIR_ID + suffix)
    if artifact_store is not None:
        _upload_report(study, page, artifact_store)


def artifact_directory(directory: str, *, argument: str = "`directory`") -> Any:
    """An Optuna ``FileSystemArtifactStore`` in ``directory``, created if missing (the
    command line's ``--artifacts``).

    Raises:
        ValueError: If ``directory`` is blank, is a file, or cannot be created.
    """
    from optuna.artifacts import FileSystemArtifactStore

    if not directory.strip():
        raise ValueError(f"{argument} must name a directory, but got {directory!r}.")
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{argument} must be a directory, but {directory!r} is a file.")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"{argument} {directory!r}: cannot create the directory "
                         f"({e.strerror}).") from None
    return FileSystemArtifactStore(str(path))


def report_artifact_id(study: optuna.Study) -> str:
    """The artifact id of ``study``'s HTML report: derived from the study (its id and name in
    the storage), so that workers that publish at once write one artifact, not one each."""
    return str(uuid.uuid5(_ARTIFACT_NAMESPACE, f"{storage_and_id(study)[1]}\0{study.study_name}"))


def _upload_report(study: optuna.Study, page: Any, artifact_store: Any) -> None:
    """The HTML report as the study's artifact ``fairtune-report.html``, under
    :func:`report_artifact_id`: its file replaced and its entry (re)written at each update, so
    that a report a user deleted in the dashboard comes back at the next update."""
    artifact_id = report_artifact_id(study)
    artifact_store.write(artifact_id, io.BytesIO(page.html().encode("utf-8")))
    meta = {"artifact_id": artifact_id, "filename": REPORT_FILENAME, "mimetype": "text/html",
            "encoding": None}  # the entry Optuna's upload_artifact writes, with a known id
    set_artifact_entry(study, artifact_id, meta)


class DashboardCallback:
    """An Optuna callback that keeps :func:`publish`'s view up to date as the search runs.

    Pass it where the search takes callbacks: ``study.optimize(objective, callbacks=[...])``,
    ``FairSearchCV(..., callbacks=[...])``.

    Args:
        every: Publish after every ``every``-th trial by trial number (trials ``every - 1``,
            ``2 * every - 1``, ...), from the worker that ran it. Defaults to 10.
        artifact_store: Upload the HTML report to this Optuna artifact store at each update
            (:func:`publish`). Defaults to None: the note and figures only.

    An update that fails (a storage error) is reported as a warning and the search goes on:
    the dashboard's view is a window on the study, not part of it.

    Raises:
        ImportError: Without optuna-dashboard or plotly (the ``dashboard`` extra), at once.
        ValueError: If ``every`` is not a positive integer.
    """

    def __init__(self, every: int = 10, *, artifact_store: Any = None) -> None:
        check_integer("every", every, minimum=1)
        _modules()
        check_artifact_store(artifact_store)
        self.every = int(every)
        self.artifact_store = artifact_store

    def after_search(self, study: optuna.Study) -> bool:
        """Publish once more when the search has ended (FairSearchCV's ``fit`` calls it after
        its safety test, ``fairtune tune`` after its report), so that the note names the model
        the search deploys. A failure is a warning: the study and its results are stored
        either way. Returns whether the view was updated."""
        return self._update(study, after=None)

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        _check_study(study)
        if (trial.number + 1) % self.every == 0:
            self._update(study, after=trial.number)

    def _update(self, study: optuna.Study, *, after: int | None) -> bool:
        try:
            publish(study, artifact_store=self.artifact_store, after=after)
        except Exception as e:  # noqa: BLE001 - the search and its results do not need their view
            what = ("the study's view was not updated" if after is None else
                    f"the update after trial #{after} failed")
            end = "." if after is None else "; the search goes on."
            warnings.warn(f"fairtune.dashboard: {what} ({type(e).__name__}: {printable(e)}){end}",
                          RuntimeWarning, stacklevel=3)
            return False
        return True
