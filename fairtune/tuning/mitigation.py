"""fairlearn's mitigations as parts of the pipeline a trial builds, with their settings tuned.

Three of fairlearn's mitigations, one per stage (:data:`MITIGATIONS`; the user guide's "Fair
model" page compares them): ``"threshold"`` (post-processing), ``"reduction"`` (in-processing)
and ``"correlation_remover"`` (pre-processing).

:class:`ThresholdClassifier` and :class:`ReductionClassifier` are scikit-learn estimators around
a pipeline: ``fit(X, y, *, sensitive_features)``, ``predict(X, *, sensitive_features=None)``.
Both predictors are randomized; their ``random_state`` fixes the draws, so that the same rows
get the same predictions every time (a trial is reproducible, a deployed model is consistent).
:class:`fairtune.tuning.FairObjective` builds them (``mitigation=...``) with the settings of
:data:`MITIGATION_PARAMS` suggested as hyperparameters of the trial.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    MetaEstimatorMixin,
    TransformerMixin,
    clone,
)

from fairtune._names import arg, check_choice, got
from fairtune._validation import sensitive_groups, shown

if TYPE_CHECKING:
    import optuna

    from fairtune.fairness.constraints import FairnessLimit

__all__ = [
    "MITIGATIONS",
    "MITIGATION_PARAMS",
    "MitigationSpec",
    "ReductionClassifier",
    "ThresholdClassifier",
    "needs_sensitive_features",
    "parse_mitigation",
]

MitigationName = Literal["threshold", "reduction", "correlation_remover"]


@dataclass(frozen=True)
class MitigationSpec:
    """One of fairlearn's mitigations as fairtune uses it.

    Attributes:
        name: The name used by ``FairObjective(mitigation=...)`` and ``fairtune tune
            --mitigation``.
        stage: ``"pre"``, ``"in"`` or ``"post"``-processing.
        implementation: The fairlearn class that does the work.
        sensitive_at_prediction: How the deployed model reads the sensitive feature, or None
            when it does not need it (unless the model itself uses the sensitive columns).
    """

    name: str
    stage: Literal["pre", "in", "post"]
    implementation: str
    sensitive_at_prediction: str | None


MITIGATIONS: dict[str, MitigationSpec] = {
    spec.name: spec
    for spec in (
        MitigationSpec(
            "threshold", "post", "fairlearn.postprocessing.ThresholdOptimizer",
            "predict(X, sensitive_features=...)",
        ),
        MitigationSpec(
            "reduction", "in", "fairlearn.reductions.ExponentiatedGradient", None,
        ),
        MitigationSpec(
            "correlation_remover", "pre", "fairlearn.preprocessing.CorrelationRemover",
            "the sensitive columns of X",
        ),
    )
}
"""The mitigations by name."""

MITIGATION_KEY = "mitigation"
"""Trial parameter: the mitigation a trial chose, when ``mitigation`` is a list."""

MITIGATION_PARAMS: dict[str, str] = {
    "threshold_tolerance": (
        "threshold: the gap ThresholdOptimizer may leave on the rows it is fitted on, as a "
        "fraction of the limit's bound, in [0, 1] (difference limits other than "
        "equalized_odds only; those are fitted exactly)"
    ),
    "reduction_bound": (
        "reduction: the bound of the constraint that ExponentiatedGradient enforces on the "
        "training rows (fairlearn's difference_bound: each group's distance to the overall "
        "rate), as a fraction of the limit's bound, in [0.1, 1]"
    ),
    "reduction_max_iter": "reduction: ExponentiatedGradient's max_iter, 5-50 (log)",
    "correlation_alpha": "correlation_remover: CorrelationRemover's alpha, in [0, 1]",
}
"""The hyperparameters the mitigations add to a trial, with their ranges."""

# Each mitigation as a practitioner sets it up without tuning: ThresholdOptimizer aimed at the
# bound itself, ExponentiatedGradient with the bound and fairlearn's default 50 iterations,
# CorrelationRemover removing all the correlation (fairlearn's default alpha).
_DEFAULT_SETTINGS: dict[str, float | int] = {
    "threshold_tolerance": 1.0, "reduction_bound": 1.0, "reduction_max_iter": 50,
    "correlation_alpha": 1.0,
}

# The limit's metric -> (ThresholdOptimizer's constraint, ExponentiatedGradient's moment);
# disparate impact (a ratio) is met by equal selection rates.
_TARGETS = {
    "demographic_parity": ("demographic_parity", "DemographicParity"),
    "disparate_impact": ("demographic_parity", "DemographicParity"),
    "equal_opportunity": ("true_positive_rate_parity", "TruePositiveRateParity"),
    "false_positive_rate": ("false_positive_rate_parity", "FalsePositiveRateParity"),
    "equalized_odds": ("equalized_odds", "EqualizedOdds"),
}
# ThresholdOptimizer relaxes every constraint but equalized odds, and only as a difference.
_RELAXABLE = ("demographic_parity", "equal_opportunity", "false_positive_rate")


def parse_mitigation(mitigation: Any) -> list[str]:
    """The distinct names of ``mitigation`` (None, a name or a non-empty list), in order."""
    valid = list(MITIGATIONS)
    if mitigation is None:
        return []
    names = [mitigation] if isinstance(mitigation, str) else mitigation
    if not isinstance(names, Sequence) or isinstance(names, str) or not names or not all(
        isinstance(n, str) and n in MITIGATIONS for n in names
    ):
        raise ValueError(
            f"{arg('mitigation')} must be None, one of {valid} or a non-empty list of them, but "
            f"got {got('mitigation', mitigation)}."
        )
    return list(dict.fromkeys(names))


def needs_sensitive_features(mitigation: str | None, *, model_uses_them: bool) -> str | None:
    """How a deployed pipeline with ``mitigation`` (a name of :data:`MITIGATIONS`, or None)
    reads the sensitive feature, or None if it does not need it; ``model_uses_them``: whether
    the model is given the sensitive columns as inputs."""
    how = MITIGATIONS[mitigation].sensitive_at_prediction if mitigation else None
    if how is None and model_uses_them:
        return "the sensitive columns of X (model inputs)"
    return how


def suggest_mitigation_params(
    trial: optuna.Trial | optuna.trial.FixedTrial, names: Sequence[str], limit: FairnessLimit
) -> tuple[str, dict[str, Any]]:
    """Suggest the mitigation (categorical when ``names`` has several) and every setting.

    All the settings of ``names`` are suggested in every trial, whichever mitigation it uses,
    so that the search space has a fixed dimension (which suits GP samplers).
    """
    name = names[0] if len(names) == 1 else trial.suggest_categorical(MITIGATION_KEY, list(names))
    params: dict[str, Any] = {}
    if "threshold" in names and limit.metric in _RELAXABLE:
        params["threshold_tolerance"] = trial.suggest_float("threshold_tolerance", 0.0, 1.0)
    if "reduction" in names:
        params["reduction_bound"] = trial.suggest_float("reduction_bound", 0.1, 1.0)
        params["reduction_max_iter"] = trial.suggest_int("reduction_max_iter", 5, 50, log=True)
    if "correlation_remover" in names:
        params["correlation_alpha"] = trial.suggest_float("correlation_alpha", 0.0, 1.0)
    return name, params


def default_mitigation_params(names: Sequence[str], limit: FairnessLimit) -> dict[str, Any]:
    """The trial parameters of ``names``' first mitigation with :data:`_DEFAULT_SETTINGS`."""
    import optuna

    trial = optuna.trial.FixedTrial({**_DEFAULT_SETTINGS, MITIGATION_KEY: names[0]})
    suggest_mitigation_params(trial, names, limit)
    return dict(trial.params)


def mitigated_estimator(
    estimator: Any,
    name: str,
    settings: dict[str, Any],
    limit: FairnessLimit,
    *,
    random_state: int = 0,
    holdout: float = 0.0,
    pos_label: Any = None,
) -> ThresholdClassifier | ReductionClassifier:
    """``estimator`` inside the ``"threshold"`` or ``"reduction"`` mitigation aimed at ``limit``
    with the trial's ``settings`` (:func:`suggest_mitigation_params`); the keyword arguments
    are those of :class:`ThresholdClassifier` and :class:`ReductionClassifier`."""
    check_choice("name", name, ("threshold", "reduction"))
    if name == "threshold":
        fraction = settings.get("threshold_tolerance")
        return ThresholdClassifier(
            estimator,
            constraint=_TARGETS[limit.metric][0],
            tolerance=None if fraction is None else fraction * limit.bound,
            holdout=holdout,
            random_state=random_state,
            pos_label=pos_label,
        )
    return ReductionClassifier(
        estimator,
        constraint=_TARGETS[limit.metric][1],
        # A ratio limit (disparate impact >= b) is tightened towards 1.
        bound=(settings["reduction_bound"] * limit.bound if limit.sense == "upper"
               else 1.0 - settings["reduction_bound"] * (1.0 - limit.bound)),
        ratio=limit.sense == "lower",
        max_iter=settings["reduction_max_iter"],
        random_state=random_state,
        pos_label=pos_label,
    )


def _as_sensitive(sensitive_features: Any, *, predicting: bool = True) -> np.ndarray:
    """One group label per row (:func:`fairtune._validation.sensitive_groups`); several
    columns are joined with ``|``, escaped as fairlearn's ``_merge_columns`` escapes ``,``."""
    groups = sensitive_groups(sensitive_features, predicting=predicting)
    if len(groups) and isinstance(groups.iloc[0], tuple):
        return np.array([_MERGE_SEPARATOR.join(_escaped(str(v)) for v in row) for row in groups],
                        dtype=object)
    return groups.to_numpy()


_MERGE_SEPARATOR = "|"


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace(_MERGE_SEPARATOR, "\\" + _MERGE_SEPARATOR)


def _sensitive_layout(sensitive_features: Any) -> tuple[int, list[str] | None]:
    """(number of sensitive columns, their names for a DataFrame or a named Series)."""
    if isinstance(sensitive_features, pd.DataFrame):
        return sensitive_features.shape[1], [str(c) for c in sensitive_features.columns]
    if isinstance(sensitive_features, pd.Series):
        return 1, None if sensitive_features.name is None else [str(sensitive_features.name)]
    values = np.asarray(sensitive_features)
    return (values.shape[1] if values.ndim == 2 else 1), None


def check_known_groups(
    values: Any, known: Any, *, argument: str, where: str, what: str = "groups"
) -> None:
    """Raise if ``values`` hold entries outside ``known`` (a missing value included, unless
    ``known`` has one), naming them and the known ones."""
    values = pd.Series(np.asarray(values, dtype=object))
    unseen = pd.unique(values[~values.isin(pd.Index(np.asarray(list(known), dtype=object)))])
    if len(unseen):
        raise ValueError(
            f"`{argument}` given to {where} holds {what} the model did not see at fit: "
            f"{shown(list(unseen))} (known: {shown(list(known))})."
        )


class _KnownGroups(TransformerMixin, BaseEstimator):
    """The first step of a pipeline whose model reads the sensitive ``columns`` of X: it passes
    X through and refuses a value of them unseen at fit (one-hot encoding would read it as no
    group)."""

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = columns

    def fit(self, X: pd.DataFrame, y: Any = None) -> _KnownGroups:
        self.groups_ = {c: list(pd.unique(X[c])) for c in self.columns}
        return self

    def transform(self, X: pd.DataFrame) -> pd.DataFrame:
        missing = [c for c in self.columns if not isinstance(X, pd.DataFrame) or c not in X]
        if missing:
            raise ValueError(
                f"`X` must have the sensitive columns {list(self.columns)} that the model was "
                f"fitted with, but it lacks {missing}."
            )
        for column in self.columns:
            check_known_groups(
                X[column], self.groups_[column], argument=f"X[{column!r}]",
                where="the fitted pipeline", what="values",
            )
        return X


class ThresholdClassifier(MetaEstimatorMixin, ClassifierMixin, BaseEstimator):
    """A classifier followed by fairlearn's ThresholdOptimizer (post-processing).

    1. ``estimator`` is fitted on the rows (all of them, or all but a ``holdout`` fraction).
    2. fairlearn's ``ThresholdOptimizer`` chooses one randomized threshold per group on the
       estimator's probabilities, maximizing accuracy subject to ``constraint`` (within
       ``tolerance``) on the holdout rows (or the same rows when ``holdout`` is 0).
    3. ``predict(X, sensitive_features=...)`` applies each row's group threshold; the
       randomization is drawn from ``random_state``, so the same rows get the same predictions.

    The deployed model needs every row's sensitive feature at prediction time.

    Example:
        >>> from sklearn.linear_model import LogisticRegression
        >>> X = np.arange(40.0).reshape(-1, 1)
        >>> y = np.array([0, 1] * 20)
        >>> group = np.array(["a"] * 20 + ["b"] * 20)
        >>> model = ThresholdClassifier(LogisticRegression(), tolerance=0.0)
        >>> model.fit(X, y, sensitive_features=group).predict(
        ...     X[:3], sensitive_features=group[:3]).shape
        (3,)

    Args:
        estimator: An unfitted scikit-learn classifier (or pipeline) with ``predict_proba``.
        constraint: ThresholdOptimizer's ``constraints``: ``"demographic_parity"``,
            ``"equalized_odds"``, ``"true_positive_rate_parity"``, ``"false_positive_rate_parity"``
            and the other rate parities fairlearn supports. Defaults to
            ``"demographic_parity"``.
        tolerance: ThresholdOptimizer's ``tol``: the largest gap between the groups' rates
            on the rows it is fitted on, or None for exact parity (equalized odds is always
            exact). Defaults to None.
        holdout: Fraction of the rows (stratified by label and group) kept away from the
            estimator to fit the thresholds on, in [0, 0.9]; 0 fits the thresholds on the
            estimator's own training rows. Defaults to 0.
        random_state: Seed of the holdout split and of the randomized predictions. Defaults
            to 0.
        pos_label: The favourable label, whose rates ``constraint`` compares across groups,
            when the labels are not 0/1 or booleans (e.g. ``"approved"``); ``predict``
            returns the labels as given. Defaults to None (labels 0/1, 1 favourable).

    Attributes:
        threshold_optimizer_: The fitted ``fairlearn.postprocessing.ThresholdOptimizer``.
        groups_: The groups the thresholds were fitted on.
        classes_: The two labels, sorted (``[0, 1]`` without ``pos_label``).
    """

    needs_sensitive_features_at_prediction = True

    def __init__(
        self,
        estimator: Any,
        *,
        constraint: str = "demographic_parity",
        tolerance: float | None = None,
        holdout: float = 0.0,
        random_state: int = 0,
        pos_label: Any = None,
    ) -> None:
        self.estimator = estimator
        self.constraint = constraint
        self.tolerance = tolerance
        self.holdout = holdout
        self.random_state = random_state
        self.pos_label = pos_label

    def fit(self, X: Any, y: Any, *, sensitive_features: Any) -> ThresholdClassifier:
        """Fit the estimator, then the group thresholds."""
        from fairlearn.postprocessing import ThresholdOptimizer

        if not (isinstance(self.holdout, (int, float)) and 0.0 <= self.holdout <= 0.9):
            raise ValueError(f"`holdout` must be in [0, 0.9], but got holdout={self.holdout!r}.")
        if self.tolerance is not None and not self.tolerance >= 0:
            raise ValueError(
                f"`tolerance` must be None or >= 0, but got tolerance={self.tolerance!r}."
            )
        y, self.classes_, sensitive = _fit_inputs(y, self.pos_label, sensitive_features)
        self._fit_layout = _sensitive_layout(sensitive_features)
        estimator = clone(self.estimator)
        if self.holdout > 0:
            from sklearn.model_selection import train_test_split
            from sklearn.utils import _safe_indexing

            rows = np.arange(len(y))
            fit_rows, threshold_rows = train_test_split(
                rows, test_size=self.holdout, stratify=y, random_state=self.random_state
            )
            estimator.fit(_safe_indexing(X, fit_rows), y[fit_rows])
            X_t, y_t = _safe_indexing(X, threshold_rows), y[threshold_rows]
            s_t = sensitive[threshold_rows]
        else:
            estimator.fit(X, y)
            X_t, y_t, s_t = X, y, sensitive
        optimizer = ThresholdOptimizer(
            estimator=_Float64Probabilities(estimator),
            constraints=self.constraint,
            objective="accuracy_score",
            prefit=True,
            predict_method="predict_proba",
            tol=None if self.constraint == "equalized_odds" else self.tolerance,
        )
        self.threshold_optimizer_ = optimizer.fit(X_t, y_t, sensitive_features=s_t)
        self.groups_ = list(
            self.threshold_optimizer_.interpolated_thresholder_.interpolation_dict
        )
        return self

    def _groups(self, X: Any, sensitive_features: Any, method: str) -> np.ndarray:
        """Each row's group, checked against the groups and the layout seen at fit."""
        where = f"{type(self).__name__}.{method}"
        if sensitive_features is None:
            raise ValueError(
                f"`sensitive_features` must be given to {where}: its group thresholds "
                "(fairlearn's ThresholdOptimizer) need each row's group, but got "
                "sensitive_features=None."
            )
        (n_fit, names_fit), (n, names) = self._fit_layout, _sensitive_layout(
            sensitive_features)
        if n != n_fit or (isinstance(sensitive_features, pd.DataFrame) and names_fit
                          and names != names_fit):
            raise ValueError(
                f"`sensitive_features` given to {where} must have the layout seen at fit: "
                f"{n_fit} column{'s' if n_fit != 1 else ''}"
                f"{f' {names_fit}' if names_fit else ''}, but got {n} column"
                f"{'s' if n != 1 else ''}{f' {names}' if names else ''}."
            )
        groups = _as_sensitive(sensitive_features)
        if len(groups) != _n_rows(X):
            raise ValueError(
                f"`sensitive_features` given to {where} must have one entry per row of X "
                f"({_n_rows(X)}), but got {len(groups)}."
            )
        check_known_groups(groups, self.groups_, argument="sensitive_features", where=where)
        return groups

    def predict(self, X: Any, *, sensitive_features: Any = None) -> np.ndarray:
        """Predictions (0/1, or the labels with ``pos_label``); ``sensitive_features`` (each
        row's group, one the thresholds were fitted on) is required.

        Raises:
            ValueError: If ``sensitive_features`` is missing, holds a group not seen at fit
                (fairlearn would predict 0 for it), or has another layout than at fit.
        """
        groups = self._groups(X, sensitive_features, "predict")
        predicted = np.asarray(self.threshold_optimizer_.predict(
            X, sensitive_features=groups, random_state=self.random_state,
        )).astype(int)
        return _labels_of(predicted, self.classes_, self.pos_label)

    def predict_proba(self, X: Any, *, sensitive_features: Any = None) -> np.ndarray:
        """The probabilities with which :meth:`predict` returns 0 and 1 for each row.

        Each group's rule mixes two thresholds on the estimator's probability (and, for
        equalized odds, a constant prediction): ``P(1) = p0 [score op0 t0] + p1 [score op1
        t1]``, then ``(1 - p_ignore) P(1) + p_ignore c``, read from the fitted
        ``interpolated_thresholder_.interpolation_dict``: an array of shape (n_rows, 2), its
        columns in the order of ``classes_``, whose average gives the *expected* accuracy and
        group rates of the randomized predictor. Raises as :meth:`predict`.
        """
        groups = self._groups(X, sensitive_features, "predict_proba")
        scores = self.threshold_optimizer_.estimator_.predict_proba(X)[:, 1]
        positive = np.zeros(len(scores))
        thresholder = self.threshold_optimizer_.interpolated_thresholder_
        for group, rule in thresholder.interpolation_dict.items():
            rows = groups == group
            s = scores[rows]
            p = rule.p0 * rule.operation0(s) + rule.p1 * rule.operation1(s)
            if "p_ignore" in rule:
                p = rule.p_ignore * rule.prediction_constant + (1.0 - rule.p_ignore) * p
            positive[rows] = p
        return _proba_columns(positive, self.classes_, self.pos_label)


class ReductionClassifier(MetaEstimatorMixin, ClassifierMixin, BaseEstimator):
    """A classifier trained by fairlearn's ExponentiatedGradient reduction (in-processing).

    1. A pipeline's preprocessing steps are fitted once; its last step is the base estimator.
    2. fairlearn's ``ExponentiatedGradient`` trains copies of the base estimator on reweighted
       rows (up to ``max_iter`` rounds) and returns a randomized mixture of them that
       minimizes the error subject to ``constraint`` with bound ``bound`` on the training rows.
    3. ``predict(X)`` draws from the mixture with ``random_state``: the same rows get the same
       predictions. The sensitive feature is not needed at prediction (unless the base
       estimator uses it as an input column).

    Example:
        >>> from sklearn.linear_model import LogisticRegression
        >>> X = np.arange(40.0).reshape(-1, 1)
        >>> y = np.array([0, 1] * 20)
        >>> group = np.array(["a"] * 20 + ["b"] * 20)
        >>> model = ReductionClassifier(LogisticRegression(), bound=0.05, max_iter=10)
        >>> model.fit(X, y, sensitive_features=group).predict(X[:3]).shape
        (3,)

    Args:
        estimator: An unfitted classifier whose ``fit`` takes ``sample_weight``, or a
            scikit-learn ``Pipeline`` ending in one.
        constraint: The fairlearn moment: ``"DemographicParity"``, ``"EqualizedOdds"``,
            ``"TruePositiveRateParity"``, ``"FalsePositiveRateParity"`` or
            ``"ErrorRateParity"``. Defaults to ``"DemographicParity"``.
        bound: The moment's ``difference_bound`` (or, with ``ratio=True``, ``ratio_bound``).
            Defaults to 0.05.
        difference: What ``bound`` bounds. ``"to_overall"`` (fairlearn's moments): each
            group's rate may differ from the overall rate by ``bound``, which lets two groups
            differ by more: with two groups, by ``bound`` over the larger group's share (0.075
            for ``bound=0.05`` when one group is two thirds of the rows). ``"between_groups"``:
            any two groups' rates may differ by ``bound``, as fairtune's limits and fairlearn's
            ``demographic_parity_difference`` / ``equalized_odds_difference`` measure it (see
            ``moment_bound_``). Defaults to ``"to_overall"``.
        ratio: Bound the ratio between the groups' rates instead of the difference. Defaults
            to False.
        max_iter: ExponentiatedGradient's ``max_iter``. Defaults to 50.
        random_state: Seed of the randomized predictions. Defaults to 0.
        pos_label: The favourable label when the labels are not 0/1 or booleans; ``predict``
            returns the labels as given. Defaults to None (labels 0/1, 1 favourable).

    Attributes:
        preprocess_: The fitted preprocessing steps (None if ``estimator`` is not a pipeline).
        exponentiated_gradient_: The fitted ``fairlearn.reductions.ExponentiatedGradient``.
        moment_bound_: The bound the fairlearn moment was given: ``bound``, or with
            ``difference="between_groups"``, ``bound`` times the smallest, over the moment's
            events, of ``max(1/2, the larger group's share)`` (1/2 for more than two groups).
        classes_: The two labels, sorted (``[0, 1]`` without ``pos_label``).
    """

    needs_sensitive_features_at_prediction = False

    def __init__(
        self,
        estimator: Any,
        *,
        constraint: str = "DemographicParity",
        bound: float = 0.05,
        difference: Literal["to_overall", "between_groups"] = "to_overall",
        ratio: bool = False,
        max_iter: int = 50,
        random_state: int = 0,
        pos_label: Any = None,
    ) -> None:
        self.estimator = estimator
        self.constraint = constraint
        self.bound = bound
        self.difference = difference
        self.ratio = ratio
        self.max_iter = max_iter
        self.random_state = random_state
        self.pos_label = pos_label

    def fit(self, X: Any, y: Any, *, sensitive_features: Any) -> ReductionClassifier:
        """Fit the preprocessing, then the reduction around the base estimator."""
        from fairlearn import reductions
        from sklearn.pipeline import Pipeline

        check_choice("constraint", self.constraint, ("DemographicParity", "EqualizedOdds",
                     "TruePositiveRateParity", "FalsePositiveRateParity", "ErrorRateParity"))
        check_choice("difference", self.difference, ("to_overall", "between_groups"))
        if self.difference == "between_groups" and self.ratio:
            raise ValueError(
                "`difference='between_groups'` bounds a difference, but got ratio=True."
            )
        y, classes, groups = _fit_inputs(y, self.pos_label, sensitive_features)
        self.moment_bound_ = float(self.bound) * (
            _between_groups_factor(self.constraint, y, groups)
            if self.difference == "between_groups" else 1.0
        )
        if isinstance(self.estimator, Pipeline) and len(self.estimator.steps) > 1:
            self.preprocess_ = clone(self.estimator[:-1])
            X = self.preprocess_.fit_transform(X, y)
            base = clone(self.estimator.steps[-1][1])
        else:
            self.preprocess_ = None
            base = clone(self.estimator)
        bound = ({"ratio_bound": self.moment_bound_} if self.ratio
                 else {"difference_bound": self.moment_bound_})
        moment = getattr(reductions, self.constraint)(**bound)
        self.exponentiated_gradient_ = reductions.ExponentiatedGradient(
            base, moment, max_iter=int(self.max_iter)
        ).fit(X, y, sensitive_features=groups)
        self.classes_ = classes
        return self

    def predict(self, X: Any, *, sensitive_features: Any = None) -> np.ndarray:
        """Predictions (0/1, or the labels with ``pos_label``); ``sensitive_features`` is
        accepted and not used."""
        if self.preprocess_ is not None:
            X = self.preprocess_.transform(X)
        predicted = np.asarray(
            self.exponentiated_gradient_.predict(X, random_state=self.random_state)
        ).astype(int)
        return _labels_of(predicted, self.classes_, self.pos_label)

    def predict_proba(self, X: Any, *, sensitive_features: Any = None) -> np.ndarray:
        """The probabilities with which :meth:`predict` returns 0 and 1 for each row.

        The mixture predicts a row with its t-th model with probability ``weights_[t]``, so
        ``P(1) = sum_t weights_[t] h_t(x)`` over the fitted ``predictors_`` (fairlearn's
        documented mixture), as in :meth:`ThresholdClassifier.predict_proba`.
        """
        if self.preprocess_ is not None:
            X = self.preprocess_.transform(X)
        eg = self.exponentiated_gradient_
        positive = np.zeros(_n_rows(X))
        for weight, predictor in zip(np.asarray(eg.weights_), list(eg.predictors_), strict=True):
            if weight > 0:
                positive += weight * np.asarray(predictor.predict(X), dtype=float)
        positive = np.clip(positive, 0.0, 1.0)
        return _proba_columns(positive, self.classes_, self.pos_label)


# The rows of each event a fairlearn moment compares the groups' rates within.
_MOMENT_EVENTS = {
    "DemographicParity": (None,), "ErrorRateParity": (None,), "EqualizedOdds": (0, 1),
    "TruePositiveRateParity": (1,), "FalsePositiveRateParity": (0,),
}


def _between_groups_factor(constraint: str, y: np.ndarray, groups: np.ndarray) -> float:
    """The fraction of a between-groups bound to give a fairlearn moment (a bound on each
    group's distance to the event's overall rate) so that no two groups' rates can differ by
    more than the between-groups bound on these rows.

    Within an event, rates ``r_g`` with ``sum_g p_g (r_g - r) = 0`` and ``|r_g - r| <= d``
    can put two groups ``d / max(1/2, their larger share)`` apart, and no further: for two
    groups ``d`` over the larger share, for more groups up to ``2 d``.
    """
    factor = 1.0
    for label in _MOMENT_EVENTS[constraint]:
        rows = groups if label is None else groups[y == label]
        _, counts = np.unique(rows.astype(str), return_counts=True)
        if len(counts) >= 2:
            factor = min(factor, counts.max() / counts.sum() if len(counts) == 2 else 0.5)
    return factor


def _fit_inputs(y: Any, pos_label: Any, sensitive_features: Any
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(0/1 labels, ``classes_``, each row's group) of a mitigation's fit: with ``pos_label``,
    1 marks it and ``classes_`` are the two labels sorted; without, the labels must be 0/1 or
    booleans and ``classes_`` is [0, 1]."""
    from fairtune._validation import favourable_labels

    if sensitive_features is None:
        raise ValueError("`sensitive_features` must be given to fit, but got None.")
    y01, classes = favourable_labels(y, pos_label)
    if pos_label is not None and len(classes) != 2:
        raise ValueError(
            f"`y` must hold both labels to fit with pos_label={pos_label!r}, but got only "
            f"{classes.tolist()}."
        )
    return y01, classes, _as_sensitive(sensitive_features, predicting=False)


def _labels_of(predicted: np.ndarray, classes: np.ndarray, pos_label: Any) -> np.ndarray:
    """0/1 predictions as the labels of fit: 1 is ``pos_label`` (or 1 without one)."""
    if pos_label is None:
        return predicted
    other = classes[0] if classes[1] == pos_label else classes[1]
    return np.where(predicted == 1, pos_label, other).astype(classes.dtype)


def _proba_columns(positive: np.ndarray, classes: np.ndarray, pos_label: Any) -> np.ndarray:
    """``[P(classes_[0]), P(classes_[1])]`` from the probability of the favourable label."""
    if pos_label is not None and classes[0] == pos_label:
        return np.column_stack([positive, 1.0 - positive])
    return np.column_stack([1.0 - positive, positive])


class _Float64Probabilities(BaseEstimator):
    """A fitted classifier whose ``predict_proba`` returns float64.

    fairlearn's ThresholdOptimizer writes its float64 group probabilities into a pandas Series
    of the estimator's probability dtype, which pandas >= 3 refuses for float32 (XGBoost's).
    """

    def __init__(self, estimator: Any) -> None:
        self.estimator = estimator

    def __sklearn_is_fitted__(self) -> bool:
        return True

    def fit(self, X: Any, y: Any) -> _Float64Probabilities:
        self.estimator.fit(X, y)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        return np.asarray(self.estimator.predict_proba(X), dtype=np.float64)


def _n_rows(X: Any) -> int:
    return X.shape[0] if hasattr(X, "shape") else len(X)
