"""FairObjective: a dataset, a model space, a metric and fairness limits as an Optuna objective."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Union

import numpy as np
import pandas as pd

from fairtune.fairness import parse_limits, set_fairness_constraints
from fairtune.fairness.constraints import LimitsLike
from fairtune.tuning.spaces import Space, get_space

if TYPE_CHECKING:
    import optuna
    from sklearn.pipeline import Pipeline

    from fairtune.datasets import FairDataset

__all__ = ["FairObjective", "METRIC_NAMES", "VALIDATION_ERROR_KEY"]

Metric = Literal["accuracy", "balanced_accuracy", "f1", "roc_auc"]
METRIC_NAMES: tuple[str, ...] = ("accuracy", "balanced_accuracy", "f1", "roc_auc")
VALIDATION_ERROR_KEY = "fairtune:validation_error"
_BUNDLED = ("adult", "german", "compas")
DatasetLike = Union[str, "FairDataset", tuple]


def _load(dataset: DatasetLike) -> tuple[pd.DataFrame, pd.Series, Any, str]:
    from fairtune import datasets

    if isinstance(dataset, str):
        if dataset not in _BUNDLED:
            raise ValueError(
                f"`dataset` must be one of {list(_BUNDLED)}, a FairDataset or an (X, y, "
                f"sensitive) tuple, but got dataset={dataset!r}."
            )
        with warnings.catch_warnings():
            # The known-issue warning of German/COMPAS is for people reading the data; a tuning
            # run names the dataset deliberately.
            warnings.simplefilter("ignore", datasets.FairtuneDatasetWarning)
            bunch = getattr(datasets, f"load_{dataset}")()
        return bunch.data, bunch.target, bunch.sensitive_features, dataset
    if isinstance(dataset, datasets.FairDataset):
        return dataset.data, dataset.target, dataset.sensitive_features, dataset.get("name", "data")
    if isinstance(dataset, tuple) and len(dataset) == 3:
        X, y, s = dataset
        X = X if isinstance(X, pd.DataFrame) else pd.DataFrame(np.asarray(X))
        X.columns = [str(c) for c in X.columns]
        y = pd.Series(np.asarray(y), index=X.index)
        if len(y) != len(X) or len(s) != len(X):
            raise ValueError(
                "`dataset` (X, y, sensitive) must have equal lengths, but got "
                f"{len(X)}, {len(y)} and {len(s)}."
            )
        return X, y, s, "data"
    raise ValueError(
        f"`dataset` must be one of {list(_BUNDLED)}, a FairDataset or an (X, y, sensitive) "
        f"tuple, but got {type(dataset).__name__}."
    )


class FairObjective:
    """An Optuna objective: train a model, score it, and record its fairness as constraints.

    For every trial it

    1. builds the estimator from the search space (``model``),
    2. wraps it in a scikit-learn ``Pipeline`` with the preprocessing the data needs (one-hot
       encoding of categorical columns, standardization of numeric ones for models that need
       it),
    3. fits it on the training split, predicts the validation split and returns the validation
       ``metric`` (to be maximized),
    4. calls :func:`fairtune.fairness.set_fairness_constraints` with the validation predictions
       and sensitive features, so that ``study.best_trial`` is the best fair trial, and stores
       the validation error as user attribute ``"fairtune:validation_error"``.

    Example:
        >>> import optuna
        >>> from fairtune.samplers import FairBOSampler
        >>> objective = FairObjective("german", "random_forest", limits="dsp<=0.05")
        >>> study = optuna.create_study(direction="maximize", sampler=FairBOSampler(seed=0))
        >>> study.optimize(objective, n_trials=8)
        >>> study.best_trial.user_attrs["fairtune:demographic_parity"] <= 0.05
        True
        >>> pipeline = objective.refit_best(study)  # fitted on all the data
        >>> pipeline.predict(objective.X.head(3)).shape
        (3,)

    Args:
        dataset: ``"adult"``, ``"german"`` or ``"compas"``, a :class:`~fairtune.datasets.FairDataset`,
            or an ``(X, y, sensitive)`` tuple with 0/1 labels.
        model: A space name of :data:`fairtune.tuning.SPACES` (``"xgboost"``,
            ``"random_forest"``, ``"mlp"``, ``"linear"``) or a callable ``trial -> estimator``.
        limits: Fairness limits, e.g. ``"demographic_parity<=0.05"`` (see
            :func:`fairtune.fairness.parse_limits`).
        metric: ``"accuracy"``, ``"balanced_accuracy"``, ``"f1"`` or ``"roc_auc"``. Defaults to
            ``"accuracy"``. The study direction must be ``"maximize"``.
        validation_size: Fraction of rows held out for validation (stratified on the label).
            Defaults to 0.3.
        random_state: Seed of the split and of the models. Defaults to 0.
        use_sensitive_feature: Whether the model may use the sensitive columns as inputs.
            Defaults to True.
    """

    def __init__(
        self,
        dataset: DatasetLike,
        model: str | Callable[[optuna.Trial], Any],
        *,
        limits: LimitsLike,
        metric: Metric = "accuracy",
        validation_size: float = 0.3,
        random_state: int = 0,
        use_sensitive_feature: bool = True,
    ) -> None:
        from sklearn.model_selection import train_test_split

        if metric not in METRIC_NAMES:
            raise ValueError(f"`metric` must be one of {list(METRIC_NAMES)}, but got metric={metric!r}.")
        if not (isinstance(validation_size, float) and 0.0 < validation_size < 1.0):
            raise ValueError(
                f"`validation_size` must be a float in (0, 1), but got validation_size={validation_size!r}."
            )
        if isinstance(model, str):
            self.space = get_space(model)
        elif callable(model):
            self.space = Space(getattr(model, "__name__", "custom"), model, needs_scaling=True)
        else:
            raise ValueError(
                f"`model` must be a space name or a callable trial -> estimator, but got {model!r}."
            )
        self.limits = parse_limits(limits)
        self.metric = metric
        self.random_state = random_state
        X, y, sensitive, self.dataset_name = _load(dataset)
        y = pd.Series(np.asarray(y).astype(int), index=X.index, name="target")
        if set(np.unique(y)) - {0, 1}:
            raise ValueError("`dataset` labels must be 0/1.")
        sensitive = sensitive if isinstance(sensitive, (pd.Series, pd.DataFrame)) else pd.Series(
            np.asarray(sensitive), index=X.index
        )
        sensitive.index = X.index
        if not use_sensitive_feature:
            names = list(sensitive.columns) if isinstance(sensitive, pd.DataFrame) else [sensitive.name]
            X = X.drop(columns=[c for c in names if c in X.columns])
        self.X, self.y, self.sensitive = X, y, sensitive
        (self.X_train, self.X_valid, self.y_train, self.y_valid, _, self.s_valid) = train_test_split(
            X, y, sensitive, test_size=validation_size, stratify=y, random_state=random_state
        )

    def make_pipeline(self, trial: optuna.Trial | optuna.trial.FixedTrial) -> Pipeline:
        """Preprocessing + the estimator the space builds for ``trial``."""
        from sklearn.compose import ColumnTransformer
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import OneHotEncoder, StandardScaler

        categorical = [
            c for c in self.X.columns
            if isinstance(self.X[c].dtype, pd.CategoricalDtype) or self.X[c].dtype == object
            or pd.api.types.is_bool_dtype(self.X[c]) or pd.api.types.is_string_dtype(self.X[c])
        ]
        numeric = [c for c in self.X.columns if c not in categorical]
        transformers = [
            ("categorical", OneHotEncoder(handle_unknown="ignore", sparse_output=False), categorical),
            ("numeric", StandardScaler() if self.space.needs_scaling else "passthrough", numeric),
        ]
        build = self.space.build
        try:
            estimator = build(trial, random_state=self.random_state)
        except TypeError:
            estimator = build(trial)
        return Pipeline([("preprocess", ColumnTransformer(transformers)), ("model", estimator)])

    def _score(self, pipeline: Pipeline, y_pred: np.ndarray) -> float:
        from sklearn import metrics

        if self.metric == "accuracy":
            return float(metrics.accuracy_score(self.y_valid, y_pred))
        if self.metric == "balanced_accuracy":
            return float(metrics.balanced_accuracy_score(self.y_valid, y_pred))
        if self.metric == "f1":
            return float(metrics.f1_score(self.y_valid, y_pred, zero_division=0.0))
        scores = pipeline.predict_proba(self.X_valid)[:, 1]
        return float(metrics.roc_auc_score(self.y_valid, scores))

    def __call__(self, trial: optuna.Trial) -> float:
        from sklearn.exceptions import ConvergenceWarning

        pipeline = self.make_pipeline(trial)
        with warnings.catch_warnings():
            # Short training budgets (max_iter, tol) are part of the search space: not reaching
            # convergence is an expected outcome of a trial, not an error.
            warnings.simplefilter("ignore", ConvergenceWarning)
            pipeline.fit(self.X_train, self.y_train)
        y_pred = np.asarray(pipeline.predict(self.X_valid)).astype(int)
        set_fairness_constraints(
            trial, self.y_valid, y_pred, sensitive_features=self.s_valid, limits=self.limits
        )
        trial.set_user_attr(
            VALIDATION_ERROR_KEY, float(np.mean(y_pred != self.y_valid.to_numpy()))
        )
        return self._score(pipeline, y_pred)

    def refit_best(self, study: optuna.Study) -> Pipeline:
        """Fit the best fair trial's pipeline on all the data (training + validation).

        Raises:
            ValueError: If the study has no feasible (fair) completed trial.
        """
        import optuna

        try:
            best = study.best_trial
        except ValueError as e:
            raise ValueError(
                f"`study` has no fair trial to refit: no completed trial meets {self.limits_text}."
            ) from e
        pipeline = self.make_pipeline(optuna.trial.FixedTrial(best.params))
        from sklearn.exceptions import ConvergenceWarning

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return pipeline.fit(self.X, self.y)

    @property
    def limits_text(self) -> str:
        return ", ".join(str(limit) for limit in self.limits)
