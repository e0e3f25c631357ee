"""FairObjective: a dataset, a model space, a metric and fairness limits as an Optuna objective."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Union

import numpy as np
import pandas as pd

from fairtune.fairness import parse_limits
from fairtune.fairness.constraints import (
    LIMITS_KEY,
    LimitsLike,
    best_fair_trial,
)
from fairtune._names import arg, got
from fairtune.tuning._data import data_fingerprint as _digest
from fairtune.tuning._data import favourable_labels
from fairtune.tuning._trial import (
    DATA_KEY,
    DATASET_KEY,
    METRIC_KEY,
    METRIC_NAMES,
    MITIGATION_SETUP_KEY,
    MITIGATION_USED_KEY,
    MODEL_KEY,
    OBJECTIVES_KEY,
    POSITIVE_RATE_KEY,
    POSITIVE_RATES_KEY,
    SENSITIVE_AT_PREDICTION_KEY,
    TENANT_SETUP_PREFIX,
    VALIDATION_ERROR_KEY,
    VALIDATION_KEY,
    Metric,
    budget_rows,
    checked_resource,
    make_pruner,
    check_groups,
    checked_budgets,
    fairness_value,
    metric_score,
    other_data_message,
    other_setup_message,
    out_of_fold_predictions,
    predicts_one_class,
    record_validation,
    report_rung,
    scale_resource,
    takes_random_state,
    tightened,
    warn_if_cannot_bind,
)
from fairtune.tuning.mitigation import (
    ReductionClassifier,
    ThresholdClassifier,
    _KnownGroups,
    mitigated_estimator,
    needs_sensitive_features,
    parse_mitigation,
    suggest_mitigation_params,
)
from fairtune.tuning.spaces import Space, get_space
from fairtune._threads import limit_training_threads

if TYPE_CHECKING:
    import optuna
    from sklearn.pipeline import Pipeline

    from fairtune.datasets import FairDataset

__all__ = [
    "DATASET_KEY",
    "FairObjective",
    "METRIC_KEY",
    "METRIC_NAMES",
    "MITIGATION_USED_KEY",
    "MODEL_KEY",
    "SENSITIVE_AT_PREDICTION_KEY",
    "POSITIVE_RATE_KEY",
    "POSITIVE_RATES_KEY",
    "VALIDATION_ERROR_KEY",
    "VALIDATION_KEY",
    "predicts_one_class",
]

_BUNDLED = ("adult", "german", "compas")
DatasetLike = Union[str, "FairDataset", tuple]


def _load(dataset: DatasetLike) -> tuple[pd.DataFrame, Any, Any, str]:
    """(X, labels, sensitive features, name) of ``dataset``, new objects in X's row order.

    The caller's objects are never changed: pandas labels and sensitive features are matched
    to X by index label, arrays by position (:func:`fairtune.tuning._data.aligned`), and the
    column names of X become strings on a copy.
    """
    from fairtune import datasets
    from fairtune.tuning._data import aligned

    if isinstance(dataset, str):
        if dataset not in _BUNDLED:
            raise ValueError(
                f"{arg('dataset')} must be one of {list(_BUNDLED)}, a FairDataset or an (X, y, "
                f"sensitive) tuple, but got {got('dataset', dataset)}."
            )
        # German and COMPAS warn (once per process) about their known issues, here too.
        bunch = getattr(datasets, f"load_{dataset}")()
        X, y, s, name = bunch.data, bunch.target, bunch.sensitive_features, dataset
    elif isinstance(dataset, datasets.FairDataset):
        X, y, s = dataset.data, dataset.target, dataset.sensitive_features
        name = dataset.get("name", "data")
    elif isinstance(dataset, tuple) and len(dataset) == 3:
        (X, y, s), name = dataset, "data"
    else:
        raise ValueError(
            f"{arg('dataset')} must be one of {list(_BUNDLED)}, a FairDataset or an (X, y, "
            f"sensitive) tuple, but got {type(dataset).__name__}."
        )
    if isinstance(X, pd.DataFrame):
        X = X.copy()
    else:
        X = pd.DataFrame(np.asarray(X))
        # Beside an array, labels and groups are matched by position.
        y, s = (
            v.set_axis(X.index[: len(v)], axis=0) if isinstance(v, (pd.Series, pd.DataFrame))
            and len(v) == len(X) else v for v in (y, s)
        )
    X.columns = [str(c) for c in X.columns]
    try:
        y, s = aligned(X, y, "y"), aligned(X, s, "sensitive")
    except ValueError as error:
        raise ValueError(f"{arg('dataset')} (X, y, sensitive): {error}") from None
    return X, y, s, name


def _checked_drop_columns(drop_columns: Any, X: pd.DataFrame) -> list[str]:
    """``drop_columns`` as a list of column names of ``X``, or a ValueError naming it."""
    if isinstance(drop_columns, str) or not isinstance(drop_columns, (list, tuple)) or not all(
        isinstance(c, str) for c in drop_columns
    ):
        raise ValueError(
            f"{arg('drop_columns')} must be a list of column names, but got "
            f"{got('drop_columns', drop_columns)}."
        )
    unknown = [c for c in drop_columns if c not in X.columns]
    if unknown:
        raise ValueError(
            f"{arg('drop_columns')} must name columns of X, but got "
            f"{got('drop_columns', list(drop_columns))} "
            f"and X has no column {unknown} (its columns: {list(map(str, X.columns))})."
        )
    if set(X.columns) <= set(drop_columns):
        raise ValueError(
            f"{arg('drop_columns')} must leave the model at least one column of X, but got "
            f"{got('drop_columns', list(drop_columns))}, every column."
        )
    return list(dict.fromkeys(drop_columns))


# A value "names" the group when at least this share of its rows (and this many rows) are in
# one group; a column is flagged when such values cover this share of all rows.
_NAMING_PURITY = 0.99
_NAMING_MIN_ROWS = 10
_NAMING_SHARE = 0.1


def _proxy_columns(
    X: pd.DataFrame, sensitive: pd.Series | pd.DataFrame
) -> tuple[list[str], dict[str, tuple[float, list[str]]]]:
    """The categorical columns of ``X`` that reveal the sensitive feature.

    Returns the columns whose every value occurs in one group only, from which the group can be
    read off exactly (German credit's ``personal_status_sex`` for ``sex``), and, for the other
    columns, those that name the group on a large share of the rows: values of at least
    ``_NAMING_MIN_ROWS`` rows of which ``_NAMING_PURITY`` or more belong to one group, covering
    ``_NAMING_SHARE`` of the rows or more (Adult's ``relationship``, whose values ``Husband`` and
    ``Wife`` give ``sex`` on 46 % of the rows), mapped to that share and those values (the
    most frequent first).
    """
    groups = (
        sensitive.astype(str).agg("|".join, axis=1) if isinstance(sensitive, pd.DataFrame)
        else sensitive.astype(str)
    )
    if groups.nunique() < 2:
        return [], {}
    exact: list[str] = []
    naming: dict[str, tuple[float, list[str]]] = {}
    for column in X.columns:
        values = X[column]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            continue
        if values.nunique() >= len(values) / 2:  # an identifier, not a category
            continue
        counts = pd.crosstab(values.astype(str).to_numpy(), groups.to_numpy())
        if ((counts > 0).sum(axis=1) == 1).all():
            exact.append(str(column))
            continue
        rows = counts.sum(axis=1)
        named = rows[(rows >= _NAMING_MIN_ROWS) & (counts.max(axis=1) >= _NAMING_PURITY * rows)]
        share = named.sum() / len(values)
        if share >= _NAMING_SHARE:
            naming[str(column)] = (
                float(share), [str(v) for v in named.sort_values(ascending=False, kind="stable").index]
            )
    return exact, naming


def _check_validation(
    metric: Any, validation_size: Any, test_size: Any, cv: Any
) -> None:
    """The metric and the validation options, or a ValueError naming the bad one."""
    if metric not in METRIC_NAMES:
        raise ValueError(
            f"{arg('metric')} must be one of {list(METRIC_NAMES)}, but got {got('metric', metric)}."
        )
    for name, fraction in (("validation_size", validation_size), ("test_size", test_size)):
        if fraction is not None and not (isinstance(fraction, float) and 0.0 < fraction < 1.0):
            raise ValueError(
                f"{arg(name)} must be a float in (0, 1), but got {got(name, fraction)}."
            )
    if cv is not None:
        if isinstance(cv, bool) or not isinstance(cv, (int, np.integer)) or cv < 2:
            raise ValueError(
                f"{arg('cv')} must be None or an integer >= 2, but got {got('cv', cv)}."
            )
        if validation_size is not None:
            raise ValueError(
                f"{arg('validation_size')} and {arg('cv')} cannot be combined: cross-validation "
                f"uses every tuning row for validation, but got "
                f"{got('validation_size', validation_size)} and {got('cv', cv)}."
            )


def _space_of(model: Any) -> Space:
    if isinstance(model, str):
        return get_space(model)
    if callable(model):
        return Space(getattr(model, "__name__", "custom"), model, needs_scaling=True)
    raise ValueError(
        f"{arg('model')} must be a space name or a callable trial -> estimator, but got {model!r}."
    )


def _checked_mitigation(mitigation: Any, limits: list[Any], metric: str) -> list[str]:
    """The mitigation names, which need a limit to aim at and labels, not scores."""
    names = parse_mitigation(mitigation)
    if names and not limits:
        raise ValueError(
            f"{arg('mitigation')} aims at a fairness limit, so {arg('limits')} must be given with "
            f"it, but got {got('limits', None)} and {got('mitigation', mitigation)}."
        )
    randomized = [m for m in names if m in ("threshold", "reduction")]
    if randomized and metric == "roc_auc":
        raise ValueError(
            f"{arg('mitigation')} {randomized[0]!r} predicts randomized labels, not scores: "
            f"{arg('metric')} must not be 'roc_auc' with it, but got {got('metric', 'roc_auc')} "
            f"and {got('mitigation', mitigation)}."
        )
    return names


def _warn_of_proxies(
    X: pd.DataFrame, sensitive: Any, sensitive_names: list[Any], sensitive_name: str
) -> None:
    """Warn (at the caller of FairObjective) of the columns left in X that reveal the group."""
    proxies, naming = _proxy_columns(X, sensitive)
    if proxies:
        warnings.warn(
            f"{got('use_sensitive_feature', False)} drops {sensitive_names} from the model's "
            f"inputs, but the columns {proxies} determine {sensitive_name} exactly (each of "
            "their values belongs to one group), so the model can still read it; to "
            f"hide it, drop them too: {arg('drop_columns')} {','.join(proxies)}.",
            UserWarning,
            stacklevel=3,
        )
    if naming:
        described = "; ".join(
            f"{column!r} on {share:.0%} of the rows (values "
            f"{', '.join(map(repr, named[:5]))}"
            f"{f' and {len(named) - 5} more' if len(named) > 5 else ''})"
            for column, (share, named) in naming.items()
        )
        warnings.warn(
            f"{got('use_sensitive_feature', False)} drops {sensitive_names} from the model's "
            f"inputs, but some columns name {sensitive_name} on many rows, "
            f"with values of which {_NAMING_PURITY:.0%} or more belong to one group: "
            f"{described}; the model can still read it there. To hide it, drop them "
            f"too: {arg('drop_columns')} {','.join(naming)}.",
            UserWarning,
            stacklevel=3,
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
       the validation error (``"fairtune:validation_error"``) and the predicted positive rate,
       overall and per group (``"fairtune:positive_rate"``, ``"fairtune:positive_rate_by_group"``)
       as user attributes; :func:`predicts_one_class` reads them.

    Validation. A fairness gap measured on a few hundred validation rows is noisy, and the trial
    that a study picks is the one whose noise looked best: its gap on new data is often larger
    (``benchmarks/fair_generalization.py`` measures how often the limit then fails on a test
    split). Two options address this:

    - ``cv=k`` scores every trial by stratified k-fold cross-validation: the model is trained
      k times, and the metric and the fairness gaps are computed once, on the pooled
      out-of-fold predictions, which cover all the tuning rows instead of a 30 % split (k times
      the training cost per trial).
    - ``test_size=f`` holds out a stratified fraction of the rows that tuning never sees;
      :meth:`evaluate` scores a fitted pipeline on it, e.g. ``objective.evaluate(
      objective.refit_best(study))``, to check the chosen model's accuracy and fairness on
      data it was not selected on.

    Example:
        >>> import optuna
        >>> from fairtune.samplers import FairBOSampler
        >>> objective = FairObjective("german", "random_forest", limits="dsp<=0.05")
        >>> study = optuna.create_study(direction="maximize", sampler=FairBOSampler(seed=0))
        >>> study.optimize(objective, n_trials=8)
        >>> study.best_trial.user_attrs["fairtune:demographic_parity"] <= 0.05
        True
        >>> pipeline = objective.refit_best(study)  # fitted on all the tuning data
        >>> pipeline.predict(objective.X.head(3)).shape
        (3,)

        With cross-validation and a held-out test split:

        >>> objective = FairObjective("german", "random_forest", limits="dsp<=0.05", cv=3,
        ...                           test_size=0.2)
        >>> study = optuna.create_study(direction="maximize", sampler=FairBOSampler(seed=0))
        >>> study.optimize(objective, n_trials=6)
        >>> report = objective.evaluate(objective.refit_best(study))
        >>> sorted(report)
        ['accuracy', 'demographic_parity', 'fair']

    Args:
        dataset: ``"adult"``, ``"german"`` or ``"compas"``, a :class:`~fairtune.datasets.FairDataset`,
            or an ``(X, y, sensitive)`` tuple: pandas labels and sensitive features are
            matched to a DataFrame X by index label (their index must hold the same labels),
            arrays by position; the objective works on copies and never changes them. Labels
            are 0/1 or booleans (1 = the favourable outcome), or any two labels with
            ``pos_label``.
        model: A space name of :data:`fairtune.tuning.SPACES` (``"xgboost"``,
            ``"random_forest"``, ``"mlp"``, ``"linear"``) or a callable ``trial -> estimator``.
        limits: Fairness limits, e.g. ``"demographic_parity<=0.05"`` (see
            :func:`fairtune.fairness.parse_limits`).
        metric: ``"accuracy"``, ``"balanced_accuracy"``, ``"f1"`` or ``"roc_auc"``. Defaults to
            ``"accuracy"``. The study direction must be ``"maximize"`` (a minimizing study
            is refused at its first trial). The fairness limits are always measured on the
            model's 0/1 predictions (``predict``, i.e. a 0.5 probability threshold), while
            ``"roc_auc"`` scores the probabilities, whatever the threshold: a model can rank
            well and still predict one class for almost everyone. The predicted positive rate
            is recorded per trial (user attributes ``"fairtune:positive_rate"`` and
            ``"fairtune:positive_rate_by_group"``) to show it.
        validation_size: Fraction of the tuning rows held out for validation (stratified on the
            label). Defaults to 0.3 when ``cv`` is not given; cannot be combined with ``cv``.
        cv: Number of stratified cross-validation folds (an integer >= 2), instead of a single
            validation split. Defaults to None (a single split).
        test_size: Fraction of all rows held out as a test split that tuning never sees (see
            :meth:`evaluate`). Defaults to None (no test split: all rows are tuning rows).
        random_state: Seed of the splits and of the models. Defaults to 0.
        use_sensitive_feature: Whether the model may use the sensitive columns as inputs.
            Defaults to True. With False, a warning names the categorical columns left that
            reveal the group: those that determine it, and those with values that give it on
            a tenth of the rows or more (99 % of a value's rows in one group, as Adult's
            ``relationship`` does for ``sex``).
        drop_columns: Columns of X the model does not see (e.g. German credit's
            ``personal_status_sex``, which determines ``sex``, with
            ``use_sensitive_feature=False``); the limits are still measured on the sensitive
            feature. Defaults to none.
        mitigation: One of fairlearn's mitigations in every trial's pipeline, its settings
            tuned with the model's hyperparameters (:data:`fairtune.tuning.MITIGATION_PARAMS`),
            aimed at the first limit; every limit is still measured on the *mitigated*
            model's validation predictions. ``"threshold"``: fairlearn's ``ThresholdOptimizer``
            on the trained model (:class:`~fairtune.tuning.ThresholdClassifier`; the deployed
            pipeline needs ``predict(X, sensitive_features=...)``), its thresholds fitted on
            the model's training rows, as fairlearn does by default. ``"reduction"``:
            ``ExponentiatedGradient`` around the estimator
            (:class:`~fairtune.tuning.ReductionClassifier`). ``"correlation_remover"``:
            ``CorrelationRemover`` between the preprocessing and the model (it reads the
            sensitive columns of X, so they must be in X). A list makes the mitigation a
            categorical hyperparameter (``"mitigation"``) that the study chooses. Defaults to
            None (hyperparameters only). ``"threshold"`` and ``"reduction"`` predict at
            random for some rows: a trial records the *expected* metric and gaps over those
            random predictions (from the pipeline's ``predict_proba``, the probability of
            predicting 1), not those of one draw, whose luck a search over many trials would
            otherwise select; :meth:`evaluate` scores the deployed model's actual predictions.
            Not with ``metric="roc_auc"`` for these two, which predict labels, not scores.
        objectives: The multi-objective form: a list of two or more objective names, at most
            one performance metric (:data:`METRIC_NAMES`, maximized) and fairness metrics
            (:data:`fairtune.fairness.METRICS` names or aliases; gaps minimized, the disparate
            impact ratio maximized), e.g. ``["accuracy", "demographic_parity"]``. A trial then
            returns their values in this order (fairness values also stored as user attributes
            ``"fairtune:<metric>"``); create the study with ``directions=objective.directions``,
            e.g. with :class:`fairtune.samplers.MTKBSampler`. ``limits`` may then be omitted
            (given, they still become constraints). Defaults to None (single objective:
            ``metric``).
        margin: Validate every trial against the limits tightened by ``margin`` (an upper
            bound lowered by it, the disparate-impact ratio's lower bound raised), and aim the
            mitigation there, while :meth:`evaluate` judges the limits themselves. A gap
            measured on validation rows is noisy, and the best fair trial is the most accurate
            one that looked fair there: aimed exactly at the limit it breaks the limit on new
            data about half the time, while with a mitigation a margin costs little accuracy
            (``benchmarks/vs_mitigation.py``). The study stores the tightened limits
            (:attr:`tuning_limits`). Defaults to 0.
        pos_label: The favourable label (the outcome whose rates the fairness metrics
            compare, as in scikit-learn's scorers) when the labels are not 0/1 or booleans,
            e.g. ``"approved"``; the pipelines then predict 1 for it. Defaults to None: the
            labels must be 0/1 or booleans, and any other pair is an error naming them.
        budgets: Multi-fidelity search: increasing fractions of the training rows (the last
            1.0) that each trial is fitted on in turn, e.g. ``(1 / 9, 1 / 3, 1.0)``, or of the
            model's boosting rounds (see ``resource``). At each
            smaller budget the trial reports its validation metric to the study's pruner
            (``optuna.pruners.SuccessiveHalvingPruner``, ``HyperbandPruner``, ``MedianPruner``)
            and records its fairness there (user attribute ``"fairtune:rungs"``); the pruner
            may stop it. Only a trial that reaches the full budget completes and gets its
            constraints, so the best fair trial is always a full-budget one. The subsets are
            nested, stratified by label and group, and the same for every trial. Defaults to
            None: every trial on all the training rows.
        resource: What ``budgets`` are fractions of: ``"n_samples"`` (the training rows) or an
            integer parameter of the model, such as XGBoost's and the forests'
            ``"n_estimators"`` (boosting rounds, trees): a smaller budget then fits the trial's
            model with that share of its value (at least 1) on all the training rows, as
            scikit-learn's ``HalvingRandomSearchCV(resource=...)`` does. Each budget is a
            fit of its own, so a trial that completes costs the sum of its budgets' fits.
            Defaults to ``"n_samples"``.
        prune_unfair: Let the pruner stop a trial that breaks a limit at a smaller budget (it
            then reports its metric less 1). Defaults to False: the pruner sees the metric
            alone, since a gap measured on a few rows is noisy.
        tenant: The tenant whose data this objective scores, in a study that several tenants
            share (:class:`~fairtune.samplers.CollaborativeUCBSampler`), each with its own
            data. The setup is then stored and checked per tenant (study user attribute
            ``"fairtune:setup:<tenant>"``), :meth:`refit_best` picks among the tenant's trials,
            and :meth:`prepare` leaves the first trials to the sampler's startup rounds.
            Defaults to None: the study is this objective's alone.

    Raises:
        ValueError: On invalid arguments, including sensitive features with missing values or
            a single group (in all the rows or in the validation split).

    Warns:
        UserWarning: When a limit cannot bind (every fairness metric lies in [0, 1], so e.g.
            ``"dsp<=2"`` holds for every model).

    A study remembers the objective's :attr:`setup` (dataset and sensitive feature, model,
    metric, limits, validation, and a fingerprint of the rows, labels, groups and splits the
    trials are scored on): the first trial stores it as study user attributes, and a trial of
    another setup in the same study raises ``ValueError`` naming what differs, rather than
    mixing values that are not comparable.

    A pipeline whose model reads the sensitive columns of X refuses, at prediction, a value of
    those columns that it did not see at fit (and so does the threshold mitigation for the
    groups it is given): one-hot encoding would silently read it as no group at all.

    Attributes:
        X, y, sensitive: All the rows.
        X_dev, y_dev, s_dev: The tuning rows (all the rows but the test split).
        X_train, y_train, X_valid, y_valid, s_valid: The training and validation split of the
            tuning rows (None with ``cv``).
        X_test, y_test, s_test: The test split (None without ``test_size``).
        limits: The fairness limits (:class:`~fairtune.fairness.FairnessLimit`), which
            :meth:`evaluate` judges.
        tuning_limits: The limits the trials are validated against: ``limits`` tightened by
            ``margin`` (the same limits without one).
    """

    def __init__(
        self,
        dataset: DatasetLike,
        model: str | Callable[[optuna.Trial], Any],
        *,
        limits: LimitsLike | None = None,
        metric: Metric = "accuracy",
        validation_size: float | None = None,
        cv: int | None = None,
        test_size: float | None = None,
        random_state: int = 0,
        use_sensitive_feature: bool = True,
        drop_columns: Sequence[str] = (),
        objectives: Sequence[str] | None = None,
        mitigation: str | Sequence[str] | None = None,
        margin: float = 0.0,
        pos_label: Any = None,
        budgets: Sequence[float] | None = None,
        resource: str = "n_samples",
        prune_unfair: bool = False,
        tenant: str | None = None,
    ) -> None:
        _check_validation(metric, validation_size, test_size, cv)
        if tenant is not None and (not isinstance(tenant, str) or not tenant):
            raise ValueError(f"{arg('tenant')} must be a non-empty string or None, but got "
                             f"{got('tenant', tenant)}.")
        self.tenant = tenant
        self.budgets = None if budgets is None else checked_budgets(budgets)
        self.resource = checked_resource(resource, self.budgets)
        self.prune_unfair = bool(prune_unfair)
        self.space = _space_of(model)
        self.objectives, self.directions = _parse_objectives(objectives, limits)
        self.limits = parse_limits(limits) if limits is not None else []
        self.margin = margin
        self.tuning_limits = tightened(self.limits, margin)
        warn_if_cannot_bind(self.limits, stacklevel=2)
        performance = [name for name in self.objectives if name in METRIC_NAMES]
        self.metric = performance[0] if performance else metric
        self.mitigation = _checked_mitigation(mitigation, self.limits, self.metric)
        self.cv = None if cv is None else int(cv)
        self.validation_size = 0.3 if validation_size is None and cv is None else validation_size
        self.test_size = test_size
        self.random_state = random_state
        X, y, sensitive, self.dataset_name = _load(dataset)
        self.drop_columns = _checked_drop_columns(drop_columns, X)
        X = X.drop(columns=self.drop_columns)
        self.pos_label = pos_label
        y = pd.Series(favourable_labels(y, pos_label, argument=f"{arg('dataset')} labels")[0],
                      index=X.index, name="target")
        self._check_sensitive(sensitive, "the rows")
        self.sensitive_name = (
            ", ".join(map(str, sensitive.columns)) if isinstance(sensitive, pd.DataFrame)
            else str(sensitive.name or "sensitive")
        )
        self.use_sensitive_feature = use_sensitive_feature
        sensitive_names = (
            list(sensitive.columns) if isinstance(sensitive, pd.DataFrame) else [sensitive.name]
        )
        if not use_sensitive_feature:
            X = X.drop(columns=[c for c in sensitive_names if c in X.columns])
            _warn_of_proxies(X, sensitive, sensitive_names, self.sensitive_name)
        self.X, self.y, self.sensitive = X, y, sensitive
        self._sensitive_columns = [c for c in sensitive_names if c in X.columns]
        if "correlation_remover" in self.mitigation and (
            len(self._sensitive_columns) != len(sensitive_names)
        ):
            raise ValueError(
                f"{arg('mitigation')} 'correlation_remover' decorrelates the columns of X from the "
                "sensitive ones, so the sensitive features must be columns of X (named alike, "
                "and use_sensitive_feature=True), but X has no column "
                f"{[c for c in sensitive_names if c not in X.columns]}."
            )
        # ThresholdOptimizer's thresholds are fitted on this fraction of the training rows,
        # held out from the model (see ThresholdClassifier.holdout).
        self._threshold_holdout = 0.0
        # A randomized mitigation's trial is scored by its expected predictions (the
        # probability of predicting 1 per validation row), not by one draw: under equalized
        # odds most rows are predicted at random, and one draw's noise in the accuracy and
        # the gaps is what a search over many trials would select on.
        self._score_expected = True
        self._fingerprint: str | None = None
        # Studies whose setup this objective has checked and stored.
        self._recorded: set[tuple[int, int]] = set()
        self._split(X, y, sensitive)
        if self.budgets is not None:
            if self.objectives:
                raise ValueError(f"{arg('budgets')} prune single-objective studies (Optuna's "
                                 f"pruners do not stop multi-objective trials), but got "
                                 f"{got('objectives', list(self.objectives))}.")
        if self.budgets is not None and self.resource == "n_samples":
            parts = ([(self.y_train, self.s_train)] if self.cv is None else
                     [(self.y_dev.iloc[fit], self.s_dev.iloc[fit]) for fit, _ in self._folds])
            self._budget_rows = [budget_rows(y_part, s_part, self.budgets, random_state)
                                 for y_part, s_part in parts]

    def _split(self, X: pd.DataFrame, y: pd.Series, sensitive: Any) -> None:
        """The test split (with ``test_size``), then the validation split or the folds."""
        from sklearn.model_selection import StratifiedKFold, train_test_split

        random_state = self.random_state
        self.X_test = self.y_test = self.s_test = None
        if self.test_size is None:
            self.X_dev, self.y_dev, self.s_dev = X, y, sensitive
        else:
            (self.X_dev, self.X_test, self.y_dev, self.y_test, self.s_dev, self.s_test) = (
                train_test_split(
                    X, y, sensitive, test_size=self.test_size, stratify=y,
                    random_state=random_state,
                )
            )
        self.X_train = self.X_valid = self.y_train = self.y_valid = None
        self.s_train = self.s_valid = None
        self._folds: list[tuple[np.ndarray, np.ndarray]] = []
        if self.cv is None:
            (self.X_train, self.X_valid, self.y_train, self.y_valid, self.s_train, self.s_valid) = (
                train_test_split(
                    self.X_dev, self.y_dev, self.s_dev, test_size=self.validation_size,
                    stratify=self.y_dev, random_state=random_state,
                )
            )
            self._check_sensitive(self.s_valid, "the validation split")
        else:
            smallest_class = int(np.bincount(self.y_dev.to_numpy(), minlength=2).min())
            if self.cv > smallest_class:
                raise ValueError(
                    f"{arg('cv')} must be at most the number of tuning rows of the smaller class "
                    f"({smallest_class}), but got {got('cv', self.cv)}."
                )
            splitter = StratifiedKFold(self.cv, shuffle=True, random_state=random_state)
            self._folds = list(splitter.split(self.X_dev, self.y_dev))
        self._check_every_group_is_validated(sensitive)

    def _check_every_group_is_validated(self, sensitive: Any) -> None:
        """Refuse a group without rows in a training or a validation part (or the test split):
        its fairness cannot be measured there, and a mitigation fitted without it cannot
        predict it."""
        groups = check_groups(sensitive)
        parts = [("the test split", self.s_test)] if self.s_test is not None else []
        if self.cv is None:
            parts += [("the training split", self.s_train), ("the validation split", self.s_valid)]
        else:
            dev = check_groups(self.s_dev).to_numpy()
            for k, (train, valid) in enumerate(self._folds):
                parts += [(f"the training rows of fold {k + 1}", dev[train]),
                          (f"the validation rows of fold {k + 1}", dev[valid])]
        for where, part in parts:
            seen = set(check_groups(part) if not isinstance(part, np.ndarray) else part)
            absent = [g for g in pd.unique(groups) if g not in seen]
            if absent:
                sizes = groups.value_counts()
                shown = ", ".join(f"{g!r} ({int(sizes[g])} row{'' if sizes[g] == 1 else 's'})"
                                  for g in absent[:5])
                raise ValueError(
                    f"{arg('dataset')} sensitive groups with too few rows to validate: "
                    f"{shown} {'has' if len(absent) == 1 else 'have'} no row in {where}; merge "
                    "small groups into larger ones or drop their rows (every group needs rows "
                    "to train on and to be measured on)."
                )

    @staticmethod
    def _check_sensitive(sensitive: pd.Series | pd.DataFrame, rows: str) -> None:
        try:
            check_groups(sensitive)
        except ValueError as e:
            raise ValueError(
                f"{arg('dataset')} sensitive features must define two or more groups without "
                f"missing values in {rows}: {str(e).replace('`sensitive_features` ', '')}"
            ) from None

    @property
    def setup(self) -> dict[str, Any]:
        """What makes this objective's trial values comparable, as stored with a study.

        ``{"fairtune:dataset": "german (sensitive: sex)", "fairtune:model": "random_forest",
        "fairtune:metric": "accuracy", "fairtune:limits": ["demographic_parity<=0.05"],
        "fairtune:validation": "a 30% validation split, split seed 0",
        "fairtune:mitigation": []}`` (limits sorted; the mitigation names, none here).
        """
        validation = (
            f"{self.cv}-fold cross-validation" if self.cv
            else f"a {self.validation_size:.0%} validation split"
        ) + (f", {self.test_size:g} held out for testing" if self.test_size else "") + (
            f", split seed {self.random_state}"
        )
        hidden = "" if self.use_sensitive_feature else ", hidden from the model"
        dropped = f", without {', '.join(self.drop_columns)}" if self.drop_columns else ""
        return {
            DATASET_KEY: f"{self.dataset_name} (sensitive: {self.sensitive_name}{hidden}{dropped})",
            MODEL_KEY: self.space.name,
            METRIC_KEY: self.metric,
            LIMITS_KEY: sorted(str(limit) for limit in self.tuning_limits),
            VALIDATION_KEY: validation,
            **({OBJECTIVES_KEY: list(self.objectives)} if self.objectives else {}),
            MITIGATION_SETUP_KEY: list(self.mitigation),
            DATA_KEY: self.data_fingerprint,
        }

    @property
    def data_fingerprint(self) -> str:
        """A digest of what the trials are scored on: the tuning rows (as the model sees
        them), their labels and groups, and the validation split or folds."""
        if self._fingerprint is None:
            if self.cv is None:
                parts = (self.X_train, self.y_train, self.s_train,
                         self.X_valid, self.y_valid, self.s_valid)
            else:
                parts = (self.X_dev, self.y_dev, self.s_dev)
            self._fingerprint = _digest(*parts, folds=self._folds)
        return self._fingerprint

    def needs_sensitive_features(self, params: dict[str, Any] | None = None) -> str | None:
        """How a pipeline of this objective reads the sensitive feature at prediction time.

        Args:
            params: A trial's parameters (they say which mitigation it used when
                ``mitigation`` is a list). Defaults to None: this objective's only mitigation.

        Returns:
            None if the deployed pipeline does not need the sensitive feature, otherwise how it
            reads it, e.g. ``"predict(X, sensitive_features=...)"``.
        """
        return needs_sensitive_features(
            self._mitigation_of(params or {}), model_uses_them=self._model_sees_sensitive()
        )

    def default_params(self) -> dict[str, Any] | None:
        """The parameters of the untuned model, as a trial of this objective suggests them.

        The space's :attr:`~fairtune.tuning.Space.defaults` (the estimator library's defaults,
        clipped into the space) and the mitigation as a practitioner sets it up without tuning:
        ThresholdOptimizer aimed at the bound (``threshold_tolerance=1``), ExponentiatedGradient
        with the bound and 50 iterations, CorrelationRemover with ``alpha=1``; with a list of
        mitigations, the first.

        Returns:
            The parameters, or None when the space names no defaults (a callable ``model``, or
            a registered space without ``defaults``).
        """
        from fairtune.tuning.mitigation import default_mitigation_params

        if self.space.defaults is None:
            return None
        params = dict(self.space.defaults)
        if self.mitigation:
            params.update(default_mitigation_params(self.mitigation, self.tuning_limits[0]))
        return params

    def enqueue_defaults(self, study: optuna.Study) -> bool:
        """Make the untuned model (:meth:`default_params`) the study's next trial.

        A search that starts there keeps the model a practitioner would get without tuning
        whenever nothing it finds is more accurate on validation under the limits. Nothing is
        enqueued when the study already has (or is waiting for) a trial with these parameters,
        so that a resumed study does not run it again; workers that open a new study at the
        same moment may each run it once.

        Returns:
            Whether a trial was enqueued.
        """
        params = self.default_params()
        if params is None or any(
            # A waiting (enqueued) trial keeps its parameters in its "fixed_params" attribute.
            (t.system_attrs.get("fixed_params") if t.state.name == "WAITING" else t.params)
            == params for t in study.get_trials(deepcopy=False)
        ):
            return False
        study.enqueue_trial(params, skip_if_exists=True)
        return True

    def prepare(self, study: optuna.Study, *, sampler: str | None = None, seed: int = 0,
                pruner: str | None = None) -> None:
        """Make ``study`` ready for this objective, as ``fairtune tune`` does before its trials.

        1. Store the objective's :attr:`setup` with the study, or raise if the study holds
           another (:meth:`record_setup`).
        2. Mark the running trials of dead workers as failed, so that no sampler treats them
           as pending points (on storages with a heartbeat).
        3. Enqueue the untuned model as the next trial, once per study
           (:meth:`enqueue_defaults`): the search keeps it unless it finds a more accurate
           fair model. Not for a ``tenant``: a shared study's first rounds are the sampler's.
        4. With ``sampler`` (a name of :data:`fairtune.samplers.SAMPLER_NAMES`), give the study
           the sampler ``fairtune tune --sampler`` uses, seeded by ``seed`` plus the number of
           trials the study already holds, so that a resumed study continues the random
           stream instead of replaying it.

        Args:
            study: The study to run this objective in.
            sampler: A sampler name, or None to keep the study's sampler. Defaults to None.
            seed: The sampler's seed. Defaults to 0.
            pruner: A pruner name of :data:`fairtune.tuning.PRUNER_NAMES` for the study, set
                up for ``budgets`` (which it needs). Defaults to None: the study's pruner.
        """
        from fairtune._storage import fail_stale_trials
        from fairtune.samplers import make_sampler

        self.record_setup(study)
        fail_stale_trials(study)
        if self.tenant is None:
            self.enqueue_defaults(study)
        if sampler is not None:
            study.sampler = make_sampler(sampler, seed=seed + len(study.trials))
        if pruner is not None:
            if self.budgets is None:
                raise ValueError(f"{arg('pruner')} stops trials at smaller budgets, so "
                                 f"{arg('budgets')} must be given with it, but got "
                                 f"{got('pruner', pruner)} and {got('budgets', None)}.")
            study.pruner = make_pruner(pruner, self.budgets)

    def create_study(
        self,
        *,
        sampler: str | None = None,
        seed: int = 0,
        storage: str | optuna.storages.BaseStorage | None = None,
        study_name: str | None = None,
        pruner: str | None = None,
    ) -> optuna.Study:
        """A study for this objective, prepared as ``fairtune tune`` prepares it.

        The same search as the command line with the same seed: the study has this objective's
        directions, its setup, the untuned model as the first trial and the sampler of
        ``fairtune tune --sampler`` (:meth:`prepare`). A stored study of that name is loaded
        and resumed.

        Example:
            >>> objective = FairObjective("german", "random_forest", limits="dsp<=0.05")
            >>> study = objective.create_study(seed=0)
            >>> study.optimize(objective, n_trials=3)
            >>> study.trials[0].params == objective.default_params()
            True

        Args:
            sampler: A sampler name of :data:`fairtune.samplers.SAMPLER_NAMES`. Defaults to
                None: ``"fairbo"``, or ``"mtkb"`` for the multi-objective form.
            seed: The sampler's seed (the command line's ``--seed``). Defaults to 0.
            storage: An Optuna storage or its URL. Defaults to None (in memory).
            study_name: The study's name. Defaults to None (a new name; with ``storage``,
                give one to resume, or to run the same study from several workers).
            pruner: A pruner name for a multi-fidelity search (see ``budgets`` and
                :meth:`prepare`). Defaults to None.
        """
        import optuna

        from fairtune._storage import create_or_load_study

        # Workers started together on a new database race to create it: retried.
        study = create_or_load_study(lambda: optuna.create_study(
            directions=self.directions or ["maximize"], storage=storage,
            study_name=study_name, load_if_exists=study_name is not None,
        ))
        self.prepare(study, sampler=sampler or ("mtkb" if self.objectives else "fairbo"),
                     seed=seed, pruner=pruner)
        return study

    def _model_sees_sensitive(self) -> bool:
        return self.use_sensitive_feature and bool(self._sensitive_columns)

    def _mitigation_of(self, params: dict[str, Any]) -> str | None:
        from fairtune.tuning.mitigation import MITIGATION_KEY

        if not self.mitigation:
            return None
        return params.get(MITIGATION_KEY, self.mitigation[0])

    def setup_differences(self, study: optuna.Study) -> list[tuple[str, Any, Any]]:
        """``(key, stored value, this objective's value)`` for every setup entry that differs.

        Entries the study does not store yet are not differences.
        """
        stored = self._stored_setup(study)
        if DATASET_KEY in stored:
            # A FairObjective study that stored no mitigation was tuned without one.
            stored.setdefault(MITIGATION_SETUP_KEY, [])
        return [
            (key, stored[key], value) for key, value in self.setup.items()
            if key in stored and stored[key] != value
        ]

    def _stored_setup(self, study: optuna.Study) -> dict[str, Any]:
        """The setup ``study`` stores for this objective: its own, or its tenant's."""
        if self.tenant is None:
            return dict(study.user_attrs)
        return dict(study.user_attrs.get(TENANT_SETUP_PREFIX + self.tenant) or {})

    def record_setup(self, study: optuna.Study) -> None:
        """Store :attr:`setup` with ``study``, or raise if the study holds another one.

        Raises:
            ValueError: If the study was tuned with another setup (the message names each
                difference), or is not a single-objective maximization study.
        """
        from optuna.study import StudyDirection

        if self.objectives:
            expected = [StudyDirection.MAXIMIZE if d == "maximize" else StudyDirection.MINIMIZE
                        for d in self.directions]
            if list(study.directions) != expected:
                raise ValueError(
                    f"`study` must have directions={self.directions} for the objectives "
                    f"{self.objectives}, but got directions="
                    f"{[d.name.lower() for d in study.directions]}; create the study with "
                    "directions=objective.directions."
                )
        elif len(study.directions) != 1 or study.direction != StudyDirection.MAXIMIZE:
            raise ValueError(
                f"`study` must maximize one value: FairObjective returns its {self.metric}, "
                f"to be maximized, but got directions={[d.name for d in study.directions]}; "
                "create the study with direction='maximize'."
            )
        differences = self.setup_differences(study)
        if differences:
            raise ValueError(other_setup_message(study, differences))
        if self.tenant is not None:
            stored = self._stored_setup(study)
            if set(self.setup) - set(stored):
                study.set_user_attr(TENANT_SETUP_PREFIX + self.tenant, {**self.setup, **stored})
            return
        for key, value in self.setup.items():
            if key not in study.user_attrs:
                study.set_user_attr(key, value)

    def make_pipeline(self, trial: optuna.Trial | optuna.trial.FixedTrial) -> Any:
        """Preprocessing + the estimator the space builds for ``trial`` (+ its mitigation).

        Returns:
            A scikit-learn ``Pipeline`` (``"preprocess"``, with ``"decorrelate"`` for the
            correlation remover, and ``"model"``), or for ``"threshold"`` and ``"reduction"`` a
            :class:`~fairtune.tuning.ThresholdClassifier` or
            :class:`~fairtune.tuning.ReductionClassifier` around that pipeline, which is fitted
            with ``fit(X, y, sensitive_features=...)``.
        """
        from sklearn.compose import ColumnTransformer
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import OneHotEncoder, StandardScaler

        def is_categorical(c: Any) -> bool:
            return bool(
                isinstance(self.X[c].dtype, pd.CategoricalDtype) or self.X[c].dtype == object
                or pd.api.types.is_bool_dtype(self.X[c]) or pd.api.types.is_string_dtype(self.X[c])
            )

        build = self.space.build
        if takes_random_state(build):
            estimator = build(trial, random_state=self.random_state)
        else:
            estimator = build(trial)
        if not self.mitigation:
            mitigation, settings = None, {}
        else:
            mitigation, settings = suggest_mitigation_params(
                trial, self.mitigation, self.tuning_limits[0]
            )
        decorrelate = mitigation == "correlation_remover"
        # The correlation remover finds the sensitive columns by position: they come first,
        # one-hot encoded with the categories of all the rows, so their number is known.
        first = self._sensitive_columns if decorrelate else []
        categorical = [c for c in self.X.columns if c not in first and is_categorical(c)]
        numeric = [c for c in self.X.columns if c not in first and c not in categorical]
        transformers: list[tuple[str, Any, list[Any]]] = []
        n_sensitive = 0
        for c in first:
            if is_categorical(c):
                categories = sorted(pd.unique(self.X[c].dropna().astype(str)))
                transformers.append((f"sensitive_{len(transformers)}", OneHotEncoder(
                    categories=[categories], handle_unknown="ignore", sparse_output=False,
                ), [c]))
                n_sensitive += len(categories)
            else:
                transformers.append((f"sensitive_{len(transformers)}", "passthrough", [c]))
                n_sensitive += 1
        transformers += [
            ("categorical", OneHotEncoder(handle_unknown="ignore", sparse_output=False), categorical),
            ("numeric", StandardScaler() if self.space.needs_scaling else "passthrough", numeric),
        ]
        steps: list[tuple[str, Any]] = [("preprocess", ColumnTransformer(transformers))]
        if self._model_sees_sensitive():
            # One-hot encoding would read a group unseen at fit as no group at all.
            steps.insert(0, ("check_groups", _KnownGroups(self._sensitive_columns)))
        if decorrelate:
            from fairlearn.preprocessing import CorrelationRemover

            steps.append(("decorrelate", CorrelationRemover(
                sensitive_feature_ids=list(range(n_sensitive)),
                alpha=settings["correlation_alpha"],
            )))
        pipeline = Pipeline([*steps, ("model", estimator)])
        if mitigation in ("threshold", "reduction"):
            return mitigated_estimator(
                pipeline, mitigation, settings, self.tuning_limits[0],
                random_state=self.random_state, holdout=self._threshold_holdout,
            )
        return pipeline

    def _score(self, y_true: pd.Series, y_pred: np.ndarray, y_score: np.ndarray | None) -> float:
        return metric_score(self.metric, y_true, y_pred, y_score)

    @staticmethod
    def _fit(pipeline: Any, X: pd.DataFrame, y: pd.Series, sensitive: Any) -> Any:
        from sklearn.exceptions import ConvergenceWarning

        with warnings.catch_warnings(), limit_training_threads():
            # Short training budgets (max_iter, tol) are part of the search space: not reaching
            # convergence is an expected outcome of a trial, not an error.
            warnings.simplefilter("ignore", ConvergenceWarning)
            if isinstance(pipeline, (ThresholdClassifier, ReductionClassifier)):
                return pipeline.fit(X, y, sensitive_features=sensitive)
            return pipeline.fit(X, y)

    def _predict(
        self, pipeline: Any, X: pd.DataFrame, sensitive: Any, *, expected: bool = False
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
            y_score = pipeline.predict_proba(X)[:, 1] if self.metric == "roc_auc" else None
        return y_pred, y_score

    def _fit_predict(
        self, pipeline: Any, fit: tuple[pd.DataFrame, pd.Series, Any],
        X_pred: pd.DataFrame, s_pred: Any,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        return self._predict(
            self._fit(pipeline, *fit), X_pred, s_pred, expected=self._score_expected
        )

    def __call__(self, trial: optuna.Trial) -> float:
        study = getattr(trial, "study", None)
        if study is not None:
            key = (id(study._storage), study._study_id)
            if key not in self._recorded:
                self.record_setup(study)
                self._recorded.add(key)
        if self.budgets is not None:
            self._run_smaller_budgets(trial)
        if self.cv is None:
            y_true, sensitive = self.y_valid, self.s_valid
            y_pred, y_score = self._fit_predict(
                self.make_pipeline(trial), (self.X_train, self.y_train, self.s_train),
                self.X_valid, self.s_valid,
            )
        else:
            y_true, sensitive = self.y_dev, self.s_dev
            y_pred, y_score = out_of_fold_predictions(
                self._folds, len(self.y_dev),
                lambda fit_rows, valid_rows: self._fit_predict(
                    self.make_pipeline(trial),
                    (self.X_dev.iloc[fit_rows], self.y_dev.iloc[fit_rows],
                     self.s_dev.iloc[fit_rows]),
                    self.X_dev.iloc[valid_rows], self.s_dev.iloc[valid_rows],
                ),
                with_scores=self.metric == "roc_auc",
            )
        if self.budgets is not None:
            trial.report(self._score(y_true, y_pred, y_score), len(self.budgets))
        record_validation(trial, y_true, y_pred, sensitive, self.tuning_limits)
        if self.mitigation:
            trial.set_user_attr(MITIGATION_USED_KEY, self._mitigation_of(trial.params))
        trial.set_user_attr(
            SENSITIVE_AT_PREDICTION_KEY, self.needs_sensitive_features(trial.params) or "no"
        )
        if not self.objectives:
            return self._score(y_true, y_pred, y_score)
        values = []
        for name in self.objectives:
            if name in METRIC_NAMES:
                values.append(self._score(y_true, y_pred, y_score))
                continue
            value = fairness_value(name, y_true, y_pred, sensitive)
            trial.set_user_attr(f"fairtune:{name}", value)
            values.append(value)
        return tuple(values)  # type: ignore[return-value]

    def _run_smaller_budgets(self, trial: optuna.Trial) -> None:
        """Fit, score and report ``trial`` at each budget but the full one (see ``budgets``)."""
        by_rows = self.resource == "n_samples"

        def pipeline_at(budget: float) -> Any:
            pipeline = self.make_pipeline(trial)
            return pipeline if by_rows else scale_resource(pipeline, self.resource, budget)

        for step, budget in enumerate(self.budgets[:-1]):  # type: ignore[index]
            if self.cv is None:
                rows = self._budget_rows[0][step] if by_rows else slice(None)
                y_true, sensitive = self.y_valid, self.s_valid
                y_pred, y_score = self._fit_predict(
                    pipeline_at(budget), (self.X_train.iloc[rows], self.y_train.iloc[rows],
                               self.s_train.iloc[rows]),
                    self.X_valid, self.s_valid)
            else:
                y_true, sensitive = self.y_dev, self.s_dev
                folds = [(fit[self._budget_rows[k][step]] if by_rows else fit, valid)
                         for k, (fit, valid) in enumerate(self._folds)]
                y_pred, y_score = out_of_fold_predictions(
                    folds, len(self.y_dev),
                    lambda fit_rows, valid_rows: self._fit_predict(
                        pipeline_at(budget),
                        (self.X_dev.iloc[fit_rows], self.y_dev.iloc[fit_rows],
                         self.s_dev.iloc[fit_rows]),
                        self.X_dev.iloc[valid_rows], self.s_dev.iloc[valid_rows]),
                    with_scores=self.metric == "roc_auc")
            report_rung(trial, step, budget, self._score(y_true, y_pred, y_score), y_true,
                        y_pred, sensitive, self.tuning_limits, self.prune_unfair)

    def refit_best(
        self,
        study: optuna.Study,
        *,
        trial: int | optuna.trial.FrozenTrial | None = None,
        on: Literal["tuning", "training"] = "tuning",
    ) -> Pipeline:
        """Fit the best fair trial's pipeline (or the chosen trial's) again.

        Args:
            study: A study of this objective.
            trial: The trial to refit: its number or the trial itself, a completed trial of
                ``study``. Defaults to None: the best fair trial of the single-objective form.
                A multi-objective study has no single best trial: with None, its one
                Pareto-optimal (feasible) trial if there is only one, otherwise an error that
                lists them, so that the user picks one on the trade-off.
            on: ``"tuning"`` (default) fits on all the tuning rows: the training and validation
                rows, or all the cross-validation rows, but never the test split, so that
                :meth:`evaluate` scores the result on data it has not seen. More rows usually
                give a more accurate model, but not the one that was validated: its fairness
                gap can differ from the recorded one (``benchmarks/fair_generalization.py``
                measures by how much). ``"training"`` fits on the training split only, which
                rebuilds the validated model itself (same rows, same ``random_state``); it needs
                a validation split (not ``cv``).

        Raises:
            ValueError: If the study's trials were scored on other data (another
                objective's rows, labels, groups or splits), if the study has no feasible
                (fair) completed trial, if a
                multi-objective study has several Pareto-optimal trials and ``trial`` is None,
                if ``trial`` is not a completed trial of the study, or ``on`` is invalid.
        """
        import optuna

        if on not in ("tuning", "training"):
            raise ValueError(f"`on` must be one of ['tuning', 'training'], but got on={on!r}.")
        if on == "training" and self.cv is not None:
            raise ValueError(
                f"`on='training'` needs a single validation split, but this objective uses "
                f"cv={self.cv}: every tuning row trained some fold's model."
            )
        if self._stored_setup(study).get(DATA_KEY, self.data_fingerprint) != self.data_fingerprint:
            raise ValueError(other_data_message(study, self.data_fingerprint))
        if trial is not None:
            best = _completed_trial(study, trial)
        elif len(study.directions) > 1:
            front = sorted(study.best_trials, key=lambda t: t.number)
            if len(front) != 1:
                raise ValueError(
                    f"`study` has {len(front)} Pareto-optimal trials "
                    f"{[t.number for t in front]}: a multi-objective study has no single best "
                    "trial; pass trial=<number> (one of them) to refit_best, but got trial=None."
                )
            best = front[0]
        else:
            found = best_fair_trial(study, tenant=self.tenant)
            if found is None:
                raise ValueError(
                    "`study` has no fair trial to refit: no completed trial meets "
                    f"{', '.join(map(str, self.tuning_limits))}."
                )
            best = found
        pipeline = self.make_pipeline(optuna.trial.FixedTrial(best.params))
        if on == "tuning":
            return self._fit(pipeline, self.X_dev, self.y_dev, self.s_dev)
        return self._fit(pipeline, self.X_train, self.y_train, self.s_train)

    def evaluate(
        self, pipeline: Pipeline, *, confidence_level: float | None = None
    ) -> dict[str, Any]:
        """Score a fitted pipeline on the test split.

        Args:
            pipeline: A fitted pipeline, e.g. from :meth:`refit_best`.
            confidence_level: With a level such as 0.95, also a bootstrap interval of every
                fairness metric on the test split
                (:func:`~fairtune.fairness.metric_interval`, 2000 resamples seeded by
                ``random_state``): a test split of a few hundred rows cannot tell whether a
                gap of 0.04 would stay under a 0.05 limit on new data, and the interval says
                so. Defaults to None (no intervals).

        Returns:
            ``{metric: value, <fairness metric>: value, ..., "fair": bool}``: the objective's
            ``metric``, the value of every fairness metric among the ``objectives`` (the
            multi-objective form) and of every limited one, and, when there are limits
            (always in the single-objective form), whether all of them hold on the test split
            (the limits themselves, without the ``margin`` the trials were validated with).
            With ``confidence_level``, also ``"intervals"``: ``{<fairness metric>: (low,
            high)}``.

        Raises:
            ValueError: If the objective has no test split (``test_size`` was not given), or
                for a ``confidence_level`` outside (0, 1).
        """
        from fairtune.fairness import METRICS, metric_interval
        from fairtune.fairness.metrics import _check_confidence_level

        if confidence_level is not None:
            _check_confidence_level(confidence_level)
        if self.X_test is None:
            raise ValueError(
                "`evaluate` needs a test split: create the FairObjective with test_size, e.g. "
                "test_size=0.2, but got test_size=None."
            )
        y_pred, y_score = self._predict(pipeline, self.X_test, self.s_test)
        report: dict[str, Any] = {self.metric: self._score(self.y_test, y_pred, y_score)}
        names = [n for n in self.objectives if n not in METRIC_NAMES]
        names += [limit.metric for limit in self.limits if limit.metric not in names]
        for name in names:
            report[name] = float(
                METRICS[name].function(self.y_test, y_pred, sensitive_features=self.s_test)
            )
        if self.limits:
            report["fair"] = all(
                limit.violation(report[limit.metric]) <= 0 for limit in self.limits
            )
        if confidence_level is not None:
            report["intervals"] = {
                name: metric_interval(
                    name, self.y_test, y_pred, sensitive_features=self.s_test,
                    confidence_level=confidence_level, random_state=self.random_state,
                )
                for name in names
            }
        return report

    @property
    def limits_text(self) -> str:
        return ", ".join(str(limit) for limit in self.limits)


def _completed_trial(
    study: optuna.Study, trial: int | optuna.trial.FrozenTrial
) -> optuna.trial.FrozenTrial:
    """The completed trial of ``study`` that ``trial`` (a number or a trial) names."""
    from optuna.trial import FrozenTrial, TrialState

    number = trial.number if isinstance(trial, FrozenTrial) else trial
    if isinstance(number, (int, np.integer)) and not isinstance(number, bool):
        trials = study.get_trials(deepcopy=False)
        if 0 <= number < len(trials) and trials[number].state == TrialState.COMPLETE:
            return trials[number]
    raise ValueError(
        "`trial` must be the number of a completed trial of `study` (or that trial), but got "
        f"trial={number!r}."
    )


def _parse_objectives(
    objectives: Sequence[str] | None, limits: LimitsLike | None
) -> tuple[list[str], list[str]]:
    """Canonical objective names and their study directions (empty for the single form)."""
    from fairtune.fairness import METRICS, get_metric

    if objectives is None:
        if limits is None:
            raise ValueError(
                f"{arg('limits')} must be given for a single-objective FairObjective (or "
                f"{arg('objectives')} for a multi-objective one), but got {got('limits', None)}."
            )
        return [], []
    if isinstance(objectives, str) or not (
        isinstance(objectives, Sequence) and all(isinstance(o, str) for o in objectives)
    ) or len(objectives) < 2:
        raise ValueError(
            f"{arg('objectives')} must be a list of two or more metric names, e.g. "
            f"['accuracy', 'demographic_parity'], but got {got('objectives', objectives)}."
        )
    names: list[str] = []
    for name in objectives:
        key = name.strip().lower()
        if key in METRIC_NAMES:
            names.append(key)
            continue
        try:
            names.append(get_metric(name).name)
        except ValueError:
            raise ValueError(
                f"{arg('objectives')} must name performance metrics {list(METRIC_NAMES)} or "
                f"fairness metrics {sorted(METRICS)} (or their aliases), but got {name!r} in "
                f"{got('objectives', list(objectives))}."
            ) from None
    if len(set(names)) != len(names) or sum(n in METRIC_NAMES for n in names) > 1:
        raise ValueError(
            f"{arg('objectives')} must name each metric once and at most one of "
            f"{list(METRIC_NAMES)}, but got {got('objectives', list(objectives))}."
        )
    directions = [
        "maximize" if n in METRIC_NAMES or METRICS[n].sense == "lower" else "minimize"
        for n in names
    ]
    return names, directions
