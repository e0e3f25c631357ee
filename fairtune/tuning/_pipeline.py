"""The pipelines of a FairObjective: preprocessing, the space's estimator and the mitigation,
built for a trial, fitted on some rows and predicting others."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fairtune._threads import limit_training_threads
from fairtune.tuning._trial import scale_resource, takes_random_state
from fairtune.tuning.mitigation import (
    ReductionClassifier,
    ThresholdClassifier,
    _KnownGroups,
    mitigated_estimator,
    suggest_mitigation_params,
)

if TYPE_CHECKING:
    from fairtune.tuning._data import TuningRows
    from fairtune.tuning.spaces import Space

__all__ = ["build_pipeline", "fit_pipeline", "predict_pipeline"]


def build_pipeline(
    X: pd.DataFrame, space: Space, trial: Any, *, random_state: int,
    mitigation: Sequence[str], limit: Any, sensitive_columns: Sequence[str], guard: bool,
    holdout: float,
) -> Any:
    """Preprocessing + the estimator ``space`` builds for ``trial`` (+ its mitigation, aimed at
    ``limit``): one-hot encoding of the categorical columns of ``X``, scaling of the numeric
    ones for spaces that need it, and with ``guard`` a first step that refuses values of the
    ``sensitive_columns`` unseen at fit (one-hot encoding would read them as no group)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    def is_categorical(c: Any) -> bool:
        return bool(
            isinstance(X[c].dtype, pd.CategoricalDtype) or X[c].dtype == object
            or pd.api.types.is_bool_dtype(X[c]) or pd.api.types.is_string_dtype(X[c])
        )

    build: Callable[..., Any] = space.build  # trial -> estimator, some with random_state=
    estimator = (build(trial, random_state=random_state) if takes_random_state(build)
                 else build(trial))
    chosen: str | None = None  # the mitigation the trial uses, of those in `mitigation`
    settings: dict[str, Any] = {}
    if mitigation:
        chosen, settings = suggest_mitigation_params(trial, mitigation, limit)
    decorrelate = chosen == "correlation_remover"
    # The correlation remover finds the sensitive columns by position: they come first,
    # one-hot encoded with the categories of all the rows, so their number is known.
    first = sensitive_columns if decorrelate else []
    categorical = [c for c in X.columns if c not in first and is_categorical(c)]
    numeric = [c for c in X.columns if c not in first and c not in categorical]
    transformers: list[tuple[str, Any, list[Any]]] = []
    n_sensitive = 0
    for i, c in enumerate(first):
        categories = sorted(pd.unique(X[c].dropna().astype(str))) if is_categorical(c) else None
        transformers.append((f"sensitive_{i}", "passthrough" if categories is None else
                             OneHotEncoder(categories=[categories], handle_unknown="ignore",
                                           sparse_output=False), [c]))
        n_sensitive += 1 if categories is None else len(categories)
    transformers += [
        ("categorical", OneHotEncoder(handle_unknown="ignore", sparse_output=False), categorical),
        ("numeric", StandardScaler() if space.needs_scaling else "passthrough", numeric),
    ]
    steps: list[tuple[str, Any]] = [("preprocess", ColumnTransformer(transformers))]
    if guard:
        steps.insert(0, ("check_groups", _KnownGroups(sensitive_columns)))
    if decorrelate:
        from fairlearn.preprocessing import CorrelationRemover

        steps.append(("decorrelate", CorrelationRemover(
            sensitive_feature_ids=list(range(n_sensitive)),
            alpha=settings["correlation_alpha"],
        )))
    pipeline = Pipeline([*steps, ("model", estimator)])
    if chosen in ("threshold", "reduction"):
        return mitigated_estimator(
            pipeline, chosen, settings, limit,
            random_state=random_state, holdout=holdout,
        )
    return pipeline


def fit_pipeline(pipeline: Any, X: pd.DataFrame, y: pd.Series, sensitive: Any) -> Any:
    """Fit ``pipeline`` (a mitigated one with the sensitive features)."""
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings(), limit_training_threads():
        # Short training budgets (max_iter, tol) are part of the search space: not reaching
        # convergence is an expected outcome of a trial, not an error.
        warnings.simplefilter("ignore", ConvergenceWarning)
        if isinstance(pipeline, (ThresholdClassifier, ReductionClassifier)):
            return pipeline.fit(X, y, sensitive_features=sensitive)
        return pipeline.fit(X, y)


def predict_pipeline(
    pipeline: Any, X: pd.DataFrame, sensitive: Any, *, metric: str, expected: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """0/1 predictions of a fitted pipeline on ``X`` and, for roc_auc, its scores; with
    ``expected``, a randomized mitigation's probabilities of predicting 1 instead."""
    with limit_training_threads():
        if isinstance(pipeline, (ThresholdClassifier, ReductionClassifier)):
            if expected:
                return pipeline.predict_proba(X, sensitive_features=sensitive)[:, 1], None
            y_pred = np.asarray(pipeline.predict(X, sensitive_features=sensitive))
            return y_pred.astype(int), None
        y_pred = np.asarray(pipeline.predict(X)).astype(int)
        y_score = pipeline.predict_proba(X)[:, 1] if metric == "roc_auc" else None
    return y_pred, y_score


class Pipelines:
    """A FairObjective trial as the trial path's candidate: the pipeline ``build()`` makes (its
    ``resource`` cut at a smaller budget), fitted by ``fit`` on some tuning ``rows`` and
    predicting others by ``predict`` (the objective's own, which the benchmarks time)."""

    def __init__(self, build: Callable[[], Any], rows: TuningRows, *, resource: str,
                 fit: Callable[..., Any], predict: Callable[..., Any], expected: bool) -> None:
        self.build, self.rows, self.resource = build, rows, resource
        self.fit, self.predict, self.expected = fit, predict, expected
        # Seconds of each fit and each prediction, recorded with the trial (FIT_TIMES_KEY).
        self.fit_times: list[float] = []
        self.score_times: list[float] = []

    def fit_predict(self, fit_rows: np.ndarray, valid_rows: np.ndarray, budget: float
                    ) -> tuple[np.ndarray, np.ndarray | None]:
        rows, pipeline = self.rows, self.build()
        if budget < 1.0 and self.resource != "n_samples":
            pipeline = scale_resource(pipeline, self.resource, budget)
        start = time.perf_counter()
        model = self.fit(pipeline, rows.X_dev.iloc[fit_rows], rows.y_dev.iloc[fit_rows],
                         rows.s_dev.iloc[fit_rows])
        self.fit_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        predicted = self.predict(model, rows.X_dev.iloc[valid_rows], rows.s_dev.iloc[valid_rows],
                                 expected=self.expected)
        self.score_times.append(time.perf_counter() - start)
        return predicted
