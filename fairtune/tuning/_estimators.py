"""A FairSearchCV trial's estimators: built for a trial, given the sensitive features and the
caller's metadata the way scikit-learn's routing (or, without it, their signatures) asks,
fitted on a fold's rows and predicting its validation rows. :class:`_SearchObjective` is the
search's Optuna objective: it hands the trial path (:func:`fairtune.tuning._trial.run_trial`)
a candidate of these estimators and records what scikit-learn's searches record.
Sensitive features and scikit-learn's metadata routing
------------------------------------------------------
``fit(X, y, *, sensitive_features)`` always needs the group of each row (to measure the
limits). It also reaches the estimator, each fold's share of it:

- With metadata routing enabled (``sklearn.set_config(enable_metadata_routing=True)``),
  scikit-learn's requests decide, as for any metadata: e.g.
  ``ThresholdOptimizer(...).set_fit_request(sensitive_features=True)
  .set_predict_request(sensitive_features=True)``; other fit metadata (``sample_weight``) is
  routed the same way, and the search itself requests ``sensitive_features`` from its own
  caller with ``search.set_fit_request(sensitive_features=True)``.
- Otherwise (scikit-learn's default), and for estimators that cannot request it because their
  ``fit`` reads it from ``**kwargs`` (fairlearn's ``ExponentiatedGradient``), the search passes
  ``sensitive_features=`` to every ``fit`` / ``predict`` that *takes* it: whose signature names
  ``sensitive_features``, or a fairlearn estimator's ``fit`` with ``**kwargs``. In a
  ``Pipeline`` it goes to the steps that take it (``<step>__sensitive_features``), and to the
  final step's ``predict``. Other fit parameters go to ``estimator.fit`` as given, sliced to
  each fold's rows (``groups`` goes to ``cv.split``).

A model that needs the groups at prediction time (``ThresholdOptimizer``,
``mitigation="threshold"``) needs them again from the caller:
``search.predict(X, sensitive_features=A)``.

fairlearn's ``ThresholdOptimizer`` and ``ExponentiatedGradient`` given as ``estimator``
predict at random for some rows: a trial is scored by one draw of their predictions, made
reproducible by the ``random_state=`` the search passes to their ``predict`` (the models'
seed, unless one is routed). ``mitigation=`` wraps them instead and scores the expected
predictions, which one draw's noise does not move.
"""

from __future__ import annotations

import inspect
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import clone

from fairtune._keys import ERROR_KEY, FIT_TIMES_KEY, SCORE_TIMES_KEY, SPLIT_SCORES_KEY
from fairtune._optuna_compat import suggest
from fairtune._threads import limit_training_threads
from fairtune.fairness.constraints import FairnessLimit
from fairtune.tuning import _trial as trial_path
from fairtune.tuning._data import Splits
from fairtune.tuning.mitigation import (
    MITIGATION_KEY,
    ReductionClassifier,
    ThresholdClassifier,
    mitigated_estimator,
    suggest_mitigation_params,
)

_SENSITIVE = "sensitive_features"
_PREDICT_METHODS = ("predict", "predict_proba", "predict_log_proba", "decision_function")

if TYPE_CHECKING:
    import optuna


class _TrialFailed(Exception):
    """A trial's estimator raised while fitting or scoring (it scores ``error_score``)."""


def _routing_enabled() -> bool:
    import sklearn

    return bool(sklearn.get_config().get("enable_metadata_routing", False))


def _n_rows(value: Any) -> int | None:
    shape = getattr(value, "shape", None)
    if shape is not None and len(shape) > 0:
        return int(shape[0])
    if isinstance(value, (list, tuple)):
        return len(value)
    return None


def _rows_of(params: Mapping[str, Any], rows: np.ndarray, n: int) -> dict[str, Any]:
    """``params`` with every per-row value (one entry per row of X) restricted to ``rows``."""
    from sklearn.utils import _safe_indexing

    return {
        key: _safe_indexing(value, rows) if _n_rows(value) == n else value
        for key, value in params.items()
    }


def rows_of(value: Any, rows: np.ndarray, n: int) -> Any:
    """``value`` restricted to ``rows`` of its ``n``: X, labels or groups, or a dict of
    parameters whose per-row values are."""
    from sklearn.utils import _safe_indexing

    return _rows_of(value, rows, n) if isinstance(value, Mapping) else _safe_indexing(value, rows)


def _takes_sensitive(estimator: Any, method: str) -> bool:
    """Whether ``estimator.<method>`` takes ``sensitive_features`` (see the module docstring)."""
    function = getattr(estimator, method, None)
    if function is None:
        return False
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    if _SENSITIVE in parameters:
        return True
    return (
        method == "fit"
        and type(estimator).__module__.startswith("fairlearn.")
        and any(p.kind == p.VAR_KEYWORD for p in parameters.values())
    )


def _sensitive_keys(estimator: Any, method: str) -> list[str]:
    """The keywords under which ``estimator.<method>`` takes the sensitive features without
    routing (see the module docstring)."""
    from sklearn.pipeline import Pipeline

    if isinstance(estimator, Pipeline):
        steps = [(name, step) for name, step in estimator.steps
                 if step not in (None, "passthrough")]
        if method == "fit":
            return [f"{name}__{_SENSITIVE}" for name, step in steps
                    if _takes_sensitive(step, "fit")]
        final = steps[-1][1] if steps else None
        return [_SENSITIVE] if final is not None and _takes_sensitive(final, method) else []
    return [_SENSITIVE] if _takes_sensitive(estimator, method) else []


def _routing_knows_sensitive(estimator: Any, method: str) -> bool:
    """Whether scikit-learn's routing knows ``sensitive_features`` for ``estimator.<method>``
    (requested, refused or left unset): then routing, not the signature, decides."""
    from sklearn.pipeline import Pipeline
    from sklearn.utils.metadata_routing import get_routing_for_object

    if isinstance(estimator, Pipeline):
        return True  # a pipeline routes to its steps by their own requests
    request = get_routing_for_object(estimator)
    method_request = getattr(request, method, None)
    requests = getattr(method_request, "requests", None)
    return requests is None or _SENSITIVE in requests


def _positive_scores(model: Any, X: Any, positive: Any, params: dict[str, Any]) -> np.ndarray:
    """Scores of the positive class (for roc_auc): ``predict_proba``, else
    ``decision_function``."""
    if hasattr(model, "predict_proba"):
        proba = np.asarray(model.predict_proba(X, **params))
        column = int(np.flatnonzero(np.asarray(model.classes_) == positive)[0])
        return proba[:, column]
    scores = np.asarray(model.decision_function(X, **params)).ravel()
    return scores if np.asarray(model.classes_)[1] == positive else -scores


def builder(estimator: Any, space_or_distributions: Any, mitigation: list[str],
            limits: list[FairnessLimit], seed: int, pos_label: Any) -> Callable[[Any], Any]:
    """``trial -> unfitted estimator``: a clone of ``estimator`` with the trial's parameters
    (a FixedTrial of a trial's params rebuilds it)."""
    from sklearn.pipeline import Pipeline

    given = estimator

    def build(trial: Any) -> Any:
        if isinstance(space_or_distributions, dict):
            params = {name: suggest(trial, name, distribution)
                      for name, distribution in space_or_distributions.items()}
            estimator = clone(given).set_params(**params)
        else:
            function = space_or_distributions.build
            model = (function(trial, random_state=seed)
                     if trial_path.takes_random_state(function) else function(trial))
            estimator = clone(given)
            if isinstance(estimator, Pipeline):
                estimator.set_params(**{estimator.steps[-1][0]: model})
            else:
                estimator = model
        if mitigation:
            name, settings = suggest_mitigation_params(trial, mitigation, limits[0])
            estimator = mitigated_estimator(estimator, name, settings, limits[0],
                                            random_state=seed, pos_label=pos_label)
        return estimator

    return build


def fold_params(sensitive: Any, fit_params: dict[str, Any], mitigation: list[str], *,
                router: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, Any]]:
    """(fit params, {prediction method: params}, split params) for all the rows, routed by
    ``router`` (the search's ``get_metadata_routing()``, None without routing); the sensitive
    features are added per built estimator by :func:`with_sensitive`."""
    if mitigation:  # no other fit params (check_mitigation)
        return {}, {}, {}
    if router is not None:
        from sklearn.utils.metadata_routing import process_routing

        routed = process_routing(router, "fit", **{_SENSITIVE: sensitive}, **fit_params)
        estimator = routed["estimator"]
        predict = {m: dict(estimator.get(m, {})) for m in _PREDICT_METHODS}
        return dict(estimator.get("fit", {})), predict, dict(routed["splitter"]["split"])
    params = dict(fit_params)
    split = {"groups": params.pop("groups")} if "groups" in params else {}
    return params, {}, split


def with_sensitive(estimator: Any, method: str, params: dict[str, Any], sensitive: Any,
                   mitigation: bool, *, routing: bool) -> dict[str, Any]:
    """``params`` with the sensitive features where ``estimator.<method>`` takes them, unless
    routing decides (see the module docstring)."""
    if mitigation:
        # ThresholdClassifier / ReductionClassifier: fit(X, y, *, sensitive_features),
        # predict(X, *, sensitive_features=None).
        return {**params, _SENSITIVE: sensitive}
    if routing and _routing_knows_sensitive(estimator, method):
        return params
    return {**params, **dict.fromkeys(_sensitive_keys(estimator, method), sensitive)}


def describe_cv(cv: Any) -> str:
    """The validation scheme of ``cv`` as the setup records it."""
    if cv is None or isinstance(cv, Integral):
        return f"{5 if cv is None else int(cv)}-fold cross-validation"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(cv))


def estimator_identity(estimator: Any, space: Any) -> str:
    """What a FairSearchCV's trials are built from, as its setup records it: the estimator's
    class (a pipeline's steps) and a digest of its untuned parameters and of the space."""
    import hashlib

    from sklearn.pipeline import Pipeline

    tuned = set(space) if isinstance(space, dict) else set()
    params = estimator.get_params(deep=True)
    described = []
    for key in sorted(params):
        if key in tuned:
            continue
        value = params[key]
        if hasattr(value, "get_params"):
            value = f"{type(value).__module__}.{type(value).__qualname__}"
        elif key.endswith("steps") and isinstance(value, list):
            value = [(name, type(step).__qualname__) for name, step in value]
        described.append(f"{key}={re.sub(r' at 0x[0-9a-fA-F]+', '', repr(value))}")
    described.append(repr(sorted((k, repr(v)) for k, v in space.items())) if isinstance(
        space, dict) else f"space {space.name}")
    digest = hashlib.sha256("\n".join(described).encode()).hexdigest()[:12]
    if isinstance(estimator, Pipeline):
        name = f"Pipeline({', '.join(type(step).__name__ for _, step in estimator.steps)})"
    else:
        name = type(estimator).__name__
    return f"{name} #{digest}"


class _Estimators:
    """A FairSearchCV trial as the trial path's candidate: clones of the trial's estimator
    fitted on a fold's rows (its resource cut at a smaller budget); the times and the folds'
    scores of the full budget go to the trial's log."""

    def __init__(self, scorer: _SearchObjective, estimator: Any,
                 log: dict[str, list[float]]) -> None:
        self.scorer, self.estimator, self.log = scorer, estimator, log
        self.scratch: dict[str, list[float]] = {key: [] for key in log}

    def fit_predict(self, fit_rows: np.ndarray, valid_rows: np.ndarray, budget: float
                    ) -> tuple[Any, Any]:
        scorer, estimator = self.scorer, self.estimator
        if budget < 1.0 and scorer.resource != "n_samples":
            estimator = trial_path.scale_resource(clone(estimator), scorer.resource, budget)
        return scorer._fit_predict(estimator, fit_rows, valid_rows,
                                   self.log if budget >= 1.0 else self.scratch)


@dataclass
class _SearchObjective:
    """The Optuna objective of one ``FairSearchCV.fit``: cross-validate a trial's estimator."""

    build: Callable[[Any], Any]  # trial -> unfitted estimator
    X: Any
    y: Any  # the labels as given (the estimator fits them)
    y01: np.ndarray  # 1 = the favourable outcome
    positive: Any
    sensitive: Any
    splits: Splits
    fit_params: dict[str, Any]
    predict_params: dict[str, dict[str, Any]]
    limits: list[FairnessLimit]
    mitigation: list[str]
    scoring: str
    error_score: Any  # a number, or "raise"
    prune_unfair: bool
    routing: bool  # scikit-learn's metadata routing is enabled
    seed: int = 0  # random_state of a randomized predict (fairlearn's) that takes one
    budgets: tuple[float, ...] | None = None
    resource: str = "n_samples"

    def __call__(self, trial: optuna.Trial) -> float:
        import optuna

        estimator = self.build(trial)
        log: dict[str, list[float]] = {FIT_TIMES_KEY: [], SCORE_TIMES_KEY: [],
                                       SPLIT_SCORES_KEY: []}
        try:
            scored = trial_path.run_trial(
                trial, _Estimators(self, estimator, log), self.splits, y01=self.y01,
                sensitive=self.sensitive, metric=self.scoring, limits=self.limits,
                budgets=self.budgets, prune_unfair=self.prune_unfair)
        except optuna.TrialPruned:
            raise
        except Exception as error:
            for key, values in log.items():
                trial.set_user_attr(key, values)
            trial.set_user_attr(ERROR_KEY, f"{type(error).__name__}: {error}")
            if self.error_score == "raise":
                raise
            raise _TrialFailed(f"{type(error).__name__}: {error}") from error
        for key, values in log.items():
            trial.set_user_attr(key, values)
        if self.mitigation:
            trial.set_user_attr(trial_path.MITIGATION_USED_KEY,
                                trial.params.get(MITIGATION_KEY, self.mitigation[0]))
        return scored.value

    def _fit_predict(
        self, estimator: Any, fit_rows: np.ndarray, valid_rows: np.ndarray,
        log: dict[str, list[float]],
    ) -> tuple[Any, Any]:
        """``Candidate.fit_predict`` (:mod:`fairtune.tuning._trial`) of a clone of
        ``estimator``; the times and the fold's score go to ``log``."""
        from sklearn.utils import _safe_indexing

        n = len(self.y01)
        model = clone(estimator)
        fit = with_sensitive(model, "fit", _rows_of(self.fit_params, fit_rows, n),
                             _safe_indexing(self.sensitive, fit_rows), bool(self.mitigation),
                             routing=self.routing)
        start = time.perf_counter()
        try:
            with limit_training_threads():
                model.fit(_safe_indexing(self.X, fit_rows), _safe_indexing(self.y, fit_rows),
                          **fit)
        finally:
            log[FIT_TIMES_KEY].append(time.perf_counter() - start)
        start = time.perf_counter()
        X_valid = _safe_indexing(self.X, valid_rows)
        s_valid = _safe_indexing(self.sensitive, valid_rows)

        def params(method: str) -> dict[str, Any]:
            return with_sensitive(
                model, method, _rows_of(self.predict_params.get(method, {}), valid_rows, n),
                s_valid, bool(self.mitigation), routing=self.routing)

        with limit_training_threads():
            y_pred = favourable_predictions(model, X_valid, params("predict"), self.positive,
                                            self.seed)
            y_score = None
            if self.scoring == "roc_auc":
                method = ("predict_proba" if hasattr(model, "predict_proba")
                          else "decision_function")
                y_score = _positive_scores(model, X_valid, self.positive, params(method))
        log[SPLIT_SCORES_KEY].append(
            trial_path.metric_score(self.scoring, self.y01[valid_rows], y_pred, y_score)
        )
        log[SCORE_TIMES_KEY].append(time.perf_counter() - start)
        return y_pred, y_score


def favourable_predictions(model: Any, X: Any, predict: dict[str, Any], positive: Any,
                           seed: int) -> Any:
    """1 where ``model`` predicts the favourable label ``positive``, or a randomized
    mitigation's probability of predicting it (its expected predictions, as FairObjective
    scores it)."""
    if isinstance(model, (ThresholdClassifier, ReductionClassifier)):
        proba = model.predict_proba(X, **predict)
        classes = list(model.classes_)
        return (proba[:, classes.index(positive)] if positive in classes
                else np.zeros(len(proba)))
    if "random_state" not in predict and trial_path.takes_random_state(model.predict,
                                                                       var_keyword=False):
        # fairlearn's ThresholdOptimizer and ExponentiatedGradient predict at random from
        # numpy's global generator unless given one: fix it, so that a trial is reproducible.
        predict = {**predict, "random_state": seed}
    return (np.asarray(model.predict(X, **predict)).ravel() == positive).astype(int)


def known_groups(X: Any, sensitive: Any) -> tuple[list[Any], dict[Any, list[Any]]]:
    """What the predictions are checked against: the groups of fit, and ``{column: values}``
    of the sensitive columns that are columns of a DataFrame X (the estimator reads them)."""
    import pandas as pd

    from fairtune.tuning.mitigation import _as_sensitive

    names = (list(sensitive.columns) if isinstance(sensitive, pd.DataFrame)
             else [sensitive.name] if isinstance(sensitive, pd.Series) else [])
    return list(pd.unique(pd.Series(_as_sensitive(sensitive)))), {
        name: list(pd.unique(X[name])) for name in names
        if isinstance(X, pd.DataFrame) and name is not None and name in X.columns
    }


def check_groups_known(X: Any, params: dict[str, Any], method: str, groups: list[Any] | None,
                       columns: dict[Any, list[Any]]) -> None:
    """Refuse rows of FairSearchCV's ``method`` of a group outside ``groups`` and
    ``columns`` (:func:`known_groups` of fit; see :meth:`FairSearchCV.predict`)."""
    import pandas as pd

    from fairtune.tuning.mitigation import _as_sensitive, check_known_groups

    given = params.get(_SENSITIVE)
    if given is not None and groups is not None:
        check_known_groups(_as_sensitive(given), groups, argument=_SENSITIVE,
                           where=f"FairSearchCV.{method}")
    for name, known in columns.items():
        if isinstance(X, pd.DataFrame) and name in X.columns:
            check_known_groups(X[name], known, argument=f"X[{name!r}]",
                               where=f"FairSearchCV.{method}", what="values")
