"""FairSearchCV: a scikit-learn meta-estimator that tunes any classifier under fairness limits.

A scikit-learn user with a ``Pipeline`` of their own and a sensitive feature gets ``fit`` /
``predict`` and ``cv_results_`` as with ``GridSearchCV``, and never writes an Optuna objective.
Every trial of the search is scored exactly as :class:`~fairtune.tuning.FairObjective` scores a
trial with ``cv=k`` (the same private functions of :mod:`fairtune.tuning.objective`):

1. the trial's configuration is fitted once per cross-validation fold, and each fold's model
   predicts the rows of its validation part;
2. the predictions of all folds are pooled, so every validated row has exactly one
   out-of-fold prediction ``yhat_i``;
3. the trial's value is ``scoring`` on the pooled predictions, and every limited fairness
   metric is computed once on them, e.g. for demographic parity
   ``DSP = max_g P(yhat=1 | g) - min_g P(yhat=1 | g)`` over all the validated rows;
4. each limit is recorded as an Optuna 5 constraint ``metric - bound`` (feasible iff
   ``<= 0``) with the raw value as the user attribute ``"fairtune:<metric>"``
   (:func:`fairtune.fairness.set_fairness_constraints`), which is what
   :class:`~fairtune.samplers.FairBOSampler` models and :func:`fairtune.fairness.best_fair_trial`
   reads.

Pooling matters for fairness: a gap measured on the few hundred rows of one fold is much noisier
than on all of them, and averaging per-fold gaps is not the gap of any model.

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

import copy
import difflib
import inspect
import re
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.utils.metaestimators import available_if

from fairtune.fairness.constraints import (
    FairnessLimit,
    LimitsLike,
    best_fair_trial,
    fairness_values,
    is_fair,
    parse_limits,
)
from fairtune._keys import ERROR_KEY, FIT_TIMES_KEY, SCORE_TIMES_KEY, SPLIT_SCORES_KEY
from fairtune.tuning._data import (
    Splits,
    budget_folds,
    checked_group_sizes,
    data_fingerprint,
    favourable_labels,
)
from fairtune.tuning._setup import check_setup, describe_pruner, setup_record
from fairtune.tuning.mitigation import (
    MITIGATION_KEY,
    MITIGATION_PARAMS,
    ReductionClassifier,
    ThresholdClassifier,
    mitigated_estimator,
    parse_mitigation,
    suggest_mitigation_params,
)
from fairtune.tuning import _trial as trial_path
from fairtune._threads import limit_training_threads

if TYPE_CHECKING:
    import optuna

__all__ = [
    "ERROR_KEY",
    "FIT_TIMES_KEY",
    "SCORE_TIMES_KEY",
    "SPLIT_SCORES_KEY",
    "FairSearchCV",
]

# Trial user attributes: ``scoring`` on each fold's validation rows (``split<k>_test_score``),
# the seconds each fold's fit and its prediction and scoring took, a failed trial's error.

_SENSITIVE = "sensitive_features"
_PREDICT_METHODS = ("predict", "predict_proba", "predict_log_proba", "decision_function")


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


def _takes_sensitive(estimator: Any, method: str) -> bool:
    """Whether ``estimator.<method>`` takes ``sensitive_features`` without routing: its
    signature names it, or it is a fairlearn estimator's ``fit`` reading it from ``**kwargs``
    (``ExponentiatedGradient``)."""
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
    """The keyword names under which ``estimator.<method>`` takes the sensitive features when
    metadata routing is disabled (a pipeline's steps get ``<step>__sensitive_features`` in
    ``fit``; its final step gets them unprefixed in the prediction methods)."""
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


def _suggest(trial: Any, name: str, distribution: Any) -> Any:
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    if isinstance(distribution, FloatDistribution):
        return trial.suggest_float(
            name, distribution.low, distribution.high, step=distribution.step, log=distribution.log
        )
    if isinstance(distribution, IntDistribution):
        return trial.suggest_int(
            name, distribution.low, distribution.high, step=distribution.step, log=distribution.log
        )
    assert isinstance(distribution, CategoricalDistribution)
    return trial.suggest_categorical(name, distribution.choices)


def _positive_scores(model: Any, X: Any, positive: Any, params: dict[str, Any]) -> np.ndarray:
    """Scores of the positive class (for roc_auc): ``predict_proba``, else ``decision_function``."""
    if hasattr(model, "predict_proba"):
        proba = np.asarray(model.predict_proba(X, **params))
        column = int(np.flatnonzero(np.asarray(model.classes_) == positive)[0])
        return proba[:, column]
    scores = np.asarray(model.decision_function(X, **params)).ravel()
    return scores if np.asarray(model.classes_)[1] == positive else -scores


def _estimator_has(attr: str) -> Callable[[FairSearchCV], bool]:
    """``available_if`` check: the refitted best estimator has ``attr`` (before fit: the
    estimator a trial builds would have it)."""

    def check(self: FairSearchCV) -> bool:
        self._check_refit(attr)
        if hasattr(self, "best_estimator_"):
            getattr(self.best_estimator_, attr)  # raises AttributeError when it has not
            return True
        if self.mitigation is not None:
            # ThresholdClassifier and ReductionClassifier predict labels, and the
            # probabilities with which they predict them.
            return attr in ("predict", "predict_proba")
        getattr(self.estimator, attr)
        return True

    return check


class FairSearchCV(MetaEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Hyperparameter search under fairness limits, as a scikit-learn estimator.

    ``FairSearchCV`` is to :class:`~fairtune.tuning.FairObjective` what ``GridSearchCV`` is to a
    hand-written loop: give it any binary classifier (a ``Pipeline`` with your own
    preprocessing, a fairlearn mitigator around a model), Optuna distributions for its
    parameters and fairness limits, and call ``fit(X, y, sensitive_features=A)``. The search

    1. runs ``n_trials`` Optuna trials (``n_jobs`` at a time) with ``sampler``, by default
       :class:`~fairtune.samplers.FairBOSampler` ``(seed=random_state)``, which models the
       score and each fairness constraint with Gaussian processes and proposes
       configurations likely to be fair and accurate; the first trial of a new study is the
       untuned configuration (the estimator's own values of the searched parameters, clipped
       into their distributions, or a fairtune space's defaults, with the mitigation aimed at
       the limit), as ``fairtune tune`` starts, so that the search keeps the model a user gets
       without tuning unless it finds a more accurate fair one;
    2. scores each trial by cross-validation on the *pooled* out-of-fold predictions: the
       ``scoring`` metric and every limited fairness metric are computed once on all the
       validated rows, as ``FairObjective(cv=...)`` does (see :mod:`fairtune.tuning.search`),
       and records the limits as Optuna constraints;
    3. picks the best fair trial, the highest score among the trials whose out-of-fold
       predictions meet every limit (:func:`fairtune.fairness.best_fair_trial`), and with
       ``refit=True`` fits its configuration on all the rows as ``best_estimator_``.

    A trial whose estimator raises scores ``error_score`` and is recorded as a failed Optuna
    trial; the search goes on (a ``FitFailedWarning`` says how many failed). If no trial is
    fair, ``fit`` raises a ``ValueError`` naming the limits and the closest trial (with
    ``refit=False`` it warns instead, and the ``best_*`` attributes are not set).

    Differences from ``GridSearchCV``'s ``cv_results_``: ``mean_test_score`` is the trial's
    value, ``scoring`` on the pooled out-of-fold predictions (for ``"accuracy"``, the mean of
    the ``split<k>_test_score`` weighted by the fold sizes); ``rank_test_score`` ranks the fair
    trials first, so that rank 1 is ``best_index_``.

    Labels must be binary: 0/1 or booleans, where 1 (``True``) is the favourable outcome whose
    rates the fairness metrics compare, or any two labels with ``pos_label`` naming the
    favourable one (``pos_label="approved"``); other labels without it are an error naming
    them, as in :class:`~fairtune.tuning.FairObjective`.

    A fitted search refuses, in ``predict`` and the other prediction methods, rows of a group
    it never saw: a ``sensitive_features=`` value outside the groups of ``fit``, or, when the
    sensitive features are columns of a DataFrame ``X`` (the estimator reads them), a value of
    those columns outside those of ``fit``. Its model was chosen and fitted without that group,
    and a threshold mitigation has no threshold for it.

    If the best fair trial predicts one class for every out-of-fold row (a constant model,
    which meets demographic-parity limits trivially), ``fit`` warns;
    ``cv_results_["predicts_one_class"]`` marks such trials.

    With ``study``, the study records a fingerprint of the rows, labels, groups and folds its
    trials were scored on, and a fit on other data raises instead of choosing among trials
    scored on other rows. scikit-learn's ``clone`` (which ``cross_validate`` and
    ``GridSearchCV`` call) copies the ``study`` object: a clone of a search on an in-memory
    study gets its own copy, while a clone of a search on a database storage runs in the same
    stored study, so a clone fitted on other rows (another outer fold) raises; give each fit
    a study of its own, or ``study=None``.

    Examples:
        >>> import pandas as pd
        >>> from optuna.distributions import FloatDistribution
        >>> from sklearn.linear_model import LogisticRegression
        >>> from sklearn.pipeline import make_pipeline
        >>> from sklearn.preprocessing import StandardScaler
        >>> from fairtune.datasets import load_german
        >>> X, y, sex = load_german(return_X_y=True)
        >>> X = pd.get_dummies(X, dtype=float)
        >>> search = FairSearchCV(
        ...     make_pipeline(StandardScaler(), LogisticRegression()),
        ...     {"logisticregression__C": FloatDistribution(1e-4, 1e2, log=True)},
        ...     limits="demographic_parity<=0.05", cv=3, n_trials=6, random_state=0,
        ... )
        >>> search.fit(X, y, sensitive_features=sex)  # doctest: +ELLIPSIS
        FairSearchCV(...)
        >>> bool(search.cv_results_["demographic_parity"][search.best_index_] <= 0.05)
        True
        >>> search.predict(X.head(3)).shape
        (3,)

    Args:
        estimator: An unfitted binary classifier: any scikit-learn estimator or ``Pipeline``,
            or a fairlearn mitigator such as ``ExponentiatedGradient``, which then receives each
            fold's ``sensitive_features`` (see the module docstring for the rules).
        param_distributions: A dict ``{parameter name: Optuna distribution}`` with the names of
            ``estimator.get_params()`` (``"model__max_depth"`` for a pipeline step ``"model"``)
            and ``optuna.distributions.FloatDistribution``, ``IntDistribution`` or
            ``CategoricalDistribution`` values; or the name of a fairtune search space
            (:data:`fairtune.tuning.SPACES`: ``"xgboost"``, ``"random_forest"``, ``"mlp"``,
            ``"linear"``), whose estimator, built for each trial, replaces ``estimator`` (or
            the final step of a ``Pipeline``), which must be of that class.
        limits: Fairness limits, e.g. ``"demographic_parity<=0.05"`` (see
            :func:`fairtune.fairness.parse_limits`), measured on the pooled out-of-fold
            predictions. A limit that cannot bind (a difference bound of 1 or more, a ratio
            bound of 0) constrains nothing: fit warns, as FairObjective does.
        scoring: The metric to maximize: ``"accuracy"``, ``"balanced_accuracy"``, ``"f1"`` or
            ``"roc_auc"`` (on ``predict_proba``, else ``decision_function``). Defaults to
            ``"accuracy"``.
        cv: Folds: an integer k (stratified k-fold, as scikit-learn's ``check_cv``), a
            splitter, or an iterable of ``(train, test)`` index arrays. The test folds must
            not overlap (each row gets at most one out-of-fold prediction); rows in no test
            fold are not scored. Defaults to 5.
        n_trials: Number of trials to run. None runs until ``timeout``. Defaults to 50.
        timeout: Stop starting trials after this many seconds. Defaults to None (no limit).
        sampler: An Optuna sampler (copied at each fit, so that refitting repeats the search).
            Defaults to None: ``FairBOSampler(seed=random_state)``. Not with ``study``.
        study: An Optuna study to run the trials in (``direction="maximize"``, e.g. on an RDB
            storage to share the search among processes, or to resume it); its trials of
            earlier fits count as candidates too. It must hold the same limits and
            ``scoring`` if it holds any. Defaults to None: a new in-memory study.
        refit: Fit the best fair configuration on all the rows as ``best_estimator_``, which
            ``predict`` and the other methods use. Defaults to True.
        mitigation: One of fairlearn's mitigations around every trial's estimator, its
            settings tuned with the estimator's (:data:`fairtune.tuning.MITIGATION_PARAMS`) and
            aimed at the first limit: ``"threshold"`` (fairlearn's ``ThresholdOptimizer`` on the
            estimator; the deployed model needs ``predict(X, sensitive_features=...)``) or
            ``"reduction"`` (``ExponentiatedGradient``), or a list of both (the mitigation is
            then a categorical parameter ``"mitigation"``). Both predict at random for some
            rows; a trial is scored by the expected metric and gaps over those random
            predictions (their ``predict_proba``), as
            :class:`~fairtune.tuning.FairObjective` scores it. (``CorrelationRemover`` is a
            pipeline step: put it in ``estimator``.) Defaults to None.
        random_state: Seed of the default sampler, of the estimators a fairtune space builds
            and of the randomized predictions (the mitigations', and those of an estimator
            whose ``predict`` takes ``random_state``). Defaults to None (the sampler is not
            seeded; the others use 0).
        n_jobs: Trials run in parallel (Optuna threads; -1: one per CPU). Each model trains on
            :func:`fairtune.tuning.training_threads` threads (one by default). Defaults to 1.
        error_score: The score of a trial whose estimator raises while fitting or scoring, or
            ``"raise"`` to stop the search with that error. Defaults to ``np.nan``.
        callbacks: Optuna callbacks ``f(study, frozen_trial)`` called after every trial, e.g.
            :class:`fairtune.fairness.FairnessCallback`. Defaults to None.
        margin: Hold every trial to the limits tightened by ``margin`` (an upper bound
            lowered, a disparate-impact ratio raised), and aim the mitigation there, so that
            the chosen model meets the limits themselves on new data more often: a model at
            the bound on its out-of-fold predictions lands above or below it on new rows about
            equally often. The study, ``cv_results_["fair"]`` and the error when no trial is
            fair use the tightened limits. Defaults to 0.
        pos_label: The favourable label, as in scikit-learn's scorers, when the labels are
            not 0/1 or booleans. Defaults to None (labels 0/1 or booleans, 1 favourable).
        budgets: Multi-fidelity search, as :class:`~fairtune.tuning.FairObjective`'s
            ``budgets``: increasing shares of each fold's training rows (the last 1.0) that a
            trial is cross-validated on in turn, reporting its score to the pruner after each;
            pruned trials are left out of ``cv_results_``. Defaults to None.
        resource: What ``budgets`` are fractions of: ``"n_samples"`` (each fold's training
            rows) or an integer parameter of the estimator in scikit-learn's ``set_params``
            spelling, such as ``"n_estimators"`` or ``"classifier__n_estimators"`` (boosting
            rounds, trees), as in ``HalvingRandomSearchCV``. Defaults to ``"n_samples"``.
        pruner: An Optuna pruner, or a name of :data:`fairtune.tuning.PRUNER_NAMES`, for the
            study the search creates (or sets on ``study``). Needs ``budgets``. Defaults to
            None.
        prune_unfair: Let the pruner stop a trial that breaks a limit at a smaller budget.
            Defaults to False (the pruner sees the score alone).

    Raises:
        ValueError: From ``fit``, naming the argument and what it received, on an unknown
            parameter name or a value of ``param_distributions`` that is not an Optuna
            distribution, unparsable limits, missing or invalid
            ``sensitive_features``, labels that are not binary (or not 0/1 or booleans
            without ``pos_label``), a ``margin`` outside [0, 1) or one that leaves no room
            under a limit, a ``study`` whose trials were scored on other data; and when no
            trial is fair (with ``refit=True``) or every trial failed.

    Attributes:
        cv_results_: A dict of arrays, one entry per trial (completed or failed) of the
            study, ready for ``pandas.DataFrame``: ``params``, ``param_<name>`` (masked where
            a trial lacks the parameter), ``split<k>_test_score``, ``mean_test_score``,
            ``std_test_score``, ``rank_test_score``, ``mean_fit_time``, ``std_fit_time``,
            ``mean_score_time``, ``std_score_time``, one column per limited fairness metric
            (e.g. ``demographic_parity``, on the pooled out-of-fold predictions), ``fair``
            (every limit, tightened by ``margin``, met), ``predicts_one_class`` (the trial
            predicted one class for every out-of-fold row) and ``trial_number``.
        best_trial_: The best fair trial (an Optuna ``FrozenTrial``).
        best_index_: Its row in ``cv_results_``.
        best_params_: Its parameters (with the mitigation's settings, if any).
        best_score_: Its ``scoring`` value on the pooled out-of-fold predictions.
        best_estimator_: Its configuration fitted on all the rows (``refit=True`` only).
        refit_time_: Seconds the refit took (``refit=True`` only).
        study_: The Optuna study that holds the trials.
        n_trials_: Number of trials in ``cv_results_``.
        n_splits_: Number of cross-validation folds.
        classes_, n_features_in_, feature_names_in_: Those of ``best_estimator_``.
    """

    def __init__(
        self,
        estimator: Any,
        param_distributions: Mapping[str, Any] | str,
        *,
        limits: LimitsLike,
        scoring: str = "accuracy",
        cv: Any = 5,
        n_trials: int | None = 50,
        timeout: float | None = None,
        sampler: optuna.samplers.BaseSampler | None = None,
        study: optuna.Study | None = None,
        refit: bool = True,
        mitigation: str | Sequence[str] | None = None,
        random_state: int | None = None,
        n_jobs: int = 1,
        error_score: float | str = np.nan,
        callbacks: Sequence[Callable[..., Any]] | None = None,
        margin: float = 0.0,
        pos_label: Any = None,
        budgets: Sequence[float] | None = None,
        resource: str = "n_samples",
        pruner: Any = None,
        prune_unfair: bool = False,
    ) -> None:
        self.estimator = estimator
        self.param_distributions = param_distributions
        self.limits = limits
        self.scoring = scoring
        self.cv = cv
        self.n_trials = n_trials
        self.timeout = timeout
        self.sampler = sampler
        self.study = study
        self.refit = refit
        self.mitigation = mitigation
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.error_score = error_score
        self.callbacks = callbacks
        self.margin = margin
        self.pos_label = pos_label
        self.budgets = budgets
        self.resource = resource
        self.pruner = pruner
        self.prune_unfair = prune_unfair

    # ------------------------------------------------------------------ validation

    def _check_limits(self) -> list[FairnessLimit]:
        limits = parse_limits(self.limits)  # its errors name `limits`
        trial_path.warn_if_cannot_bind(limits, stacklevel=3)
        return limits

    def _check_options(self) -> None:
        if self.scoring not in trial_path.METRIC_NAMES:
            raise ValueError(
                f"`scoring` must be one of {list(trial_path.METRIC_NAMES)}, but got "
                f"scoring={self.scoring!r}."
            )
        n_trials, timeout = self.n_trials, self.timeout
        if n_trials is not None and (
            isinstance(n_trials, bool) or not isinstance(n_trials, Integral) or n_trials < 1
        ):
            raise ValueError(
                f"`n_trials` must be None or an integer >= 1, but got n_trials={n_trials!r}."
            )
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, Real) or not timeout > 0
        ):
            raise ValueError(
                f"`timeout` must be None or a positive number, but got timeout={timeout!r}."
            )
        if n_trials is None and timeout is None:
            raise ValueError(
                "`n_trials` or `timeout` must be given, or the search never ends, but got "
                "n_trials=None and timeout=None."
            )
        n_jobs = self.n_jobs
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral) or n_jobs == 0:
            raise ValueError(
                f"`n_jobs` must be a non-zero integer (-1: one per CPU), but got n_jobs={n_jobs!r}."
            )
        if not isinstance(self.refit, bool):
            raise ValueError(f"`refit` must be True or False, but got refit={self.refit!r}.")
        if not (self.error_score == "raise" or (
            isinstance(self.error_score, Real) and not isinstance(self.error_score, bool)
        )):
            raise ValueError(
                "`error_score` must be a number or 'raise', but got "
                f"error_score={self.error_score!r}."
            )
        if self.callbacks is not None and (
            isinstance(self.callbacks, str) or not isinstance(self.callbacks, Sequence)
            or not all(callable(c) for c in self.callbacks)
        ):
            raise ValueError(
                "`callbacks` must be None or a list of callables f(study, frozen_trial), but got "
                f"callbacks={self.callbacks!r}."
            )
        if self.study is not None and self.sampler is not None:
            raise ValueError(
                "`sampler` and `study` cannot both be given: the study samples with its own "
                f"sampler, but got sampler={self.sampler!r} and study={self.study!r}."
            )

    def _check_mitigation(self, y: np.ndarray) -> list[str]:
        names = parse_mitigation(self.mitigation)
        if "correlation_remover" in names:
            raise ValueError(
                "`mitigation` must be 'threshold', 'reduction' or a list of them here: fairlearn's "
                "CorrelationRemover is a step of a pipeline, so put it in `estimator` (and tune "
                f"its alpha in `param_distributions`), but got mitigation={self.mitigation!r}."
            )
        if names and self.scoring == "roc_auc":
            raise ValueError(
                f"`mitigation` {names[0]!r} predicts randomized labels, not scores: `scoring` must "
                "not be 'roc_auc' with it, but got scoring='roc_auc' and "
                f"mitigation={self.mitigation!r}."
            )
        return names

    def _space_or_distributions(self, mitigation: list[str]) -> Any:
        """The fairtune :class:`~fairtune.tuning.Space` named by ``param_distributions``, or the
        validated dict of distributions."""
        from optuna.distributions import (
            CategoricalDistribution,
            FloatDistribution,
            IntDistribution,
        )

        from fairtune.tuning.spaces import SPACES

        given = self.param_distributions
        if isinstance(given, str):
            if given not in SPACES:
                raise ValueError(
                    "`param_distributions` must be a dict of Optuna distributions or one of "
                    f"{sorted(SPACES)}, but got param_distributions={given!r}."
                )
            return SPACES[given]
        if not isinstance(given, Mapping):
            raise ValueError(
                "`param_distributions` must be a dict {parameter name: Optuna distribution} or "
                f"a fairtune space name, but got {type(given).__name__}: {given!r}."
            )
        valid = self.estimator.get_params(deep=True)
        reserved = {MITIGATION_KEY, *MITIGATION_PARAMS} if mitigation else set()
        for name, distribution in given.items():
            if not isinstance(name, str) or name not in valid:
                by_lower = {key.lower(): key for key in valid}
                close = [by_lower[key] for key in
                         difflib.get_close_matches(str(name).lower(), list(by_lower), n=3)]
                hint = f" Did you mean {close}?" if close else ""
                raise ValueError(
                    f"`param_distributions` names a parameter that {type(self.estimator).__name__} "
                    f"does not have: {name!r} (valid names are those of "
                    f"estimator.get_params(), e.g. {sorted(valid)[:6]}).{hint}"
                )
            if name in reserved:
                raise ValueError(
                    f"`param_distributions` must not name {name!r} with a `mitigation`: the "
                    f"mitigation's own settings {sorted(reserved)} use that name."
                )
            if not isinstance(distribution, (FloatDistribution, IntDistribution,
                                             CategoricalDistribution)):
                hint = (
                    " A list of values is CategoricalDistribution([...])."
                    if isinstance(distribution, (list, tuple)) else
                    " A scipy.stats distribution is FloatDistribution(low, high, log=...) or "
                    "IntDistribution(low, high)." if hasattr(distribution, "rvs") else ""
                )
                raise ValueError(
                    f"`param_distributions[{name!r}]` must be an Optuna distribution "
                    "(optuna.distributions.FloatDistribution, IntDistribution or "
                    f"CategoricalDistribution), but got {distribution!r} "
                    f"({type(distribution).__name__}).{hint}"
                )
        return dict(given)

    def _check_sensitive(self, sensitive_features: Any, n: int) -> None:
        if sensitive_features is None:
            raise ValueError(
                "`sensitive_features` must be given to FairSearchCV.fit (the group of each row, "
                "to measure the fairness limits): fit(X, y, sensitive_features=A), but got "
                "sensitive_features=None."
            )
        from fairtune._validation import sensitive_groups

        if _n_rows(sensitive_features) == n:
            try:
                sensitive_groups(sensitive_features, n, warn_twins=True, stacklevel=4)
            except ValueError as error:
                raise ValueError(
                    f"`sensitive_features` must give each row of X one of two or more groups: "
                    f"{str(error).replace('`sensitive_features` ', '')}"
                ) from None
        if _n_rows(sensitive_features) != n:
            raise ValueError(
                f"`sensitive_features` must have one entry per row of X ({n}), but got "
                f"{_n_rows(sensitive_features)}."
            )

    @staticmethod
    def _check_same_rows(X: Any, y: Any, sensitive_features: Any) -> None:
        """Refuse pandas labels or groups whose index differs from a DataFrame X's: the search
        matches rows by position, as scikit-learn does, and a shuffled index would give rows
        another person's label or group without a word."""
        import pandas as pd

        if not isinstance(X, pd.DataFrame):
            return
        for name, value in (("y", y), ("sensitive_features", sensitive_features)):
            if isinstance(value, (pd.Series, pd.DataFrame)) and not value.index.equals(X.index):
                raise ValueError(
                    f"`{name}` must have the index of X: FairSearchCV matches rows by position, "
                    f"as scikit-learn does, but the index of `{name}` differs from X's (first "
                    f"labels {value.index[:3].tolist()} against {X.index[:3].tolist()}); align "
                    f"it first (`{name}.loc[X.index]`, or `.reindex(X.index)`), or pass arrays."
                )

    def _check_refit(self, attr: str) -> None:
        if not self.refit:
            raise AttributeError(
                f"This FairSearchCV was created with refit=False: {attr} needs the refitted "
                "best estimator. Fit a clone of `estimator` with `best_params_` yourself."
            )

    def _seeds(self) -> tuple[int | None, int]:
        """(sampler seed, seed of the models): random_state, drawn from it if a RandomState."""
        state = self.random_state
        if state is None:
            return None, 0
        if isinstance(state, np.random.RandomState):
            seed = int(state.randint(np.iinfo(np.int32).max))
            return seed, seed
        if isinstance(state, bool) or not isinstance(state, Integral):
            raise ValueError(
                "`random_state` must be None, an integer or a numpy RandomState, but got "
                f"random_state={state!r}."
            )
        return int(state), int(state)

    # ------------------------------------------------------------------ building

    def _builder(
        self, space_or_distributions: Any, mitigation: list[str], limits: list[FairnessLimit],
        seed: int,
    ) -> Callable[[Any], Any]:
        """``trial -> unfitted estimator`` (a FixedTrial of a trial's params rebuilds it)."""
        from sklearn.pipeline import Pipeline

        def build(trial: Any) -> Any:
            if isinstance(space_or_distributions, dict):
                params = {name: _suggest(trial, name, distribution)
                          for name, distribution in space_or_distributions.items()}
                estimator = clone(self.estimator).set_params(**params)
            else:
                function = space_or_distributions.build
                model = (function(trial, random_state=seed)
                         if trial_path.takes_random_state(function) else function(trial))
                estimator = clone(self.estimator)
                if isinstance(estimator, Pipeline):
                    estimator.set_params(**{estimator.steps[-1][0]: model})
                else:
                    estimator = model
            if mitigation:
                name, settings = suggest_mitigation_params(trial, mitigation, limits[0])
                estimator = mitigated_estimator(estimator, name, settings, limits[0],
                                                random_state=seed, pos_label=self.pos_label)
            return estimator

        return build

    def _check_space_class(self, space: Any) -> None:
        """A fairtune space replaces the final step: it must be of the class the space builds."""
        import optuna
        from sklearn.pipeline import Pipeline

        # A throwaway trial: the class is known only once the space has built an estimator.
        model = space.build(optuna.create_study(sampler=optuna.samplers.RandomSampler(0)).ask())
        final = (self.estimator.steps[-1][1] if isinstance(self.estimator, Pipeline)
                 else self.estimator)
        if type(final) is not type(model):
            raise ValueError(
                f"`param_distributions` {space.name!r} builds a {type(model).__name__} that "
                f"replaces the estimator's final step, which must then be a "
                f"{type(model).__name__}, but got {type(final).__name__}."
            )

    # ------------------------------------------------------------------ routing

    def get_metadata_routing(self) -> Any:
        """The metadata routing of the search (scikit-learn's metadata routing API).

        The search consumes ``sensitive_features`` itself (request it from an outer
        ``Pipeline`` or ``cross_validate`` with ``set_fit_request(sensitive_features=True)``)
        and routes what the estimator requests: in ``fit`` to its ``fit`` and prediction
        methods (the folds' predictions), in the prediction methods to the same methods of
        ``best_estimator_``; ``groups`` goes to the splitter.
        """
        from sklearn.model_selection import check_cv
        from sklearn.utils.metadata_routing import MetadataRouter, MethodMapping

        mapping = MethodMapping().add(caller="fit", callee="fit")
        for method in _PREDICT_METHODS:
            mapping.add(caller="fit", callee=method).add(caller=method, callee=method)
        mapping.add(caller="score", callee="predict")
        router = MetadataRouter(owner=self).add_self_request(self)
        router.add(estimator=self.estimator, method_mapping=mapping)
        router.add(
            splitter=check_cv(self.cv, classifier=True),
            method_mapping=MethodMapping().add(caller="fit", callee="split"),
        )
        return router

    def _fold_params(
        self, sensitive: Any, fit_params: dict[str, Any], mitigation: list[str],
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, Any]]:
        """(fit params, {prediction method: params}, split params) for all the rows; the
        sensitive features are added per built estimator by :meth:`_with_sensitive`."""
        if mitigation:
            if fit_params:
                raise ValueError(
                    f"`mitigation` {self.mitigation!r} fits fairlearn's mitigation with X, y and "
                    "sensitive_features only, so fit must not get other parameters, but got "
                    f"{sorted(fit_params)}."
                )
            return {}, {}, {}
        if _routing_enabled():
            from sklearn.utils.metadata_routing import process_routing

            routed = process_routing(self, "fit", **{_SENSITIVE: sensitive}, **fit_params)
            estimator = routed["estimator"]
            predict = {m: dict(estimator.get(m, {})) for m in _PREDICT_METHODS}
            return dict(estimator.get("fit", {})), predict, dict(routed["splitter"]["split"])
        params = dict(fit_params)
        split = {"groups": params.pop("groups")} if "groups" in params else {}
        return params, {}, split

    def _with_sensitive(
        self, estimator: Any, method: str, params: dict[str, Any], sensitive: Any,
        mitigation: bool,
    ) -> dict[str, Any]:
        """``params`` with the sensitive features under the keys ``estimator.<method>``
        takes them by, when routing does not decide (see the module docstring)."""
        if mitigation:
            # ThresholdClassifier / ReductionClassifier: fit(X, y, *, sensitive_features),
            # predict(X, *, sensitive_features=None).
            return {**params, _SENSITIVE: sensitive}
        if _routing_enabled() and _routing_knows_sensitive(estimator, method):
            return params
        return {**params, **{key: sensitive for key in _sensitive_keys(estimator, method)}}

    # ------------------------------------------------------------------ fit

    def fit(self, X: Any, y: Any = None, *, sensitive_features: Any = None,
            **fit_params: Any) -> FairSearchCV:
        """Run the search, then (``refit=True``) fit the best fair configuration on all rows.

        Args:
            X: The rows, any input ``estimator`` accepts (a DataFrame for a
                ``ColumnTransformer``).
            y: Binary labels, one per row.
            sensitive_features: The group of each row: a 1-d array-like, or a DataFrame whose
                columns define intersectional groups. Required.
            **fit_params: Parameters of ``estimator.fit`` (or metadata, with routing enabled),
                each fold's rows of the per-row ones; ``groups`` goes to ``cv.split``.

        Returns:
            The fitted search.

        Raises:
            ValueError: See the class docstring.
        """
        import optuna
        from sklearn.utils import indexable

        self._check_options()
        limits = trial_path.tightened(self._check_limits(), self.margin)
        y_array = self._binary_target(y)
        X, y = indexable(X, y)
        n = len(y_array)
        self._check_sensitive(sensitive_features, n)
        self._check_same_rows(X, y, sensitive_features)
        mitigation = self._check_mitigation(y_array)
        space_or_distributions = self._space_or_distributions(mitigation)
        sampler_seed, seed = self._seeds()
        build = self._builder(space_or_distributions, mitigation, limits, seed)
        if not isinstance(space_or_distributions, dict):
            self._check_space_class(space_or_distributions)
        self._check_scores_for_roc_auc(mitigation)

        y01, positive = self._favourable(y_array)
        fit_all, predict_all, split_params = self._fold_params(
            sensitive_features, fit_params, mitigation
        )
        folds = self._folds(X, y_array, split_params)

        self._remember_groups(X, sensitive_features)
        budgets = None if self.budgets is None else trial_path.checked_budgets(self.budgets)
        resource = trial_path.checked_resource(self.resource, budgets)
        splits = Splits(folds, n, None if budgets is None or resource != "n_samples" else
                        budget_folds(folds, y01, sensitive_features, budgets, seed))
        checked_group_sizes(sensitive_features, splits.covered, limits,
                            argument="`sensitive_features`", where="the cross-validation folds")
        record = self._setup_record(X, y01, sensitive_features, folds, limits, mitigation,
                                    space_or_distributions, budgets, resource)
        study = self._prepare_study(
            sampler_seed, record, budgets,
            self._untuned_params(space_or_distributions, mitigation, limits))
        objective = _SearchObjective(
            self, build=build, X=X, y=y, y01=y01, positive=positive,
            sensitive=sensitive_features, splits=splits,
            fit_params=fit_all, predict_params=predict_all, limits=limits,
            mitigation=mitigation, seed=seed, budgets=budgets, resource=resource,
        )
        # Trials finished before this fit (a given study's earlier searches) are candidates
        # but not this fit's failures; enqueued (WAITING) trials run now.
        numbers_before = {t.number for t in self._finished_trials(study)}
        study.optimize(
            objective,
            n_trials=self.n_trials,
            timeout=self.timeout,
            n_jobs=int(self.n_jobs),
            catch=(_TrialFailed,) if self.error_score != "raise" else (),
            callbacks=list(self.callbacks) if self.callbacks else None,
        )
        self.study_ = study
        self.n_splits_ = len(folds)
        best = self._select(study, limits, numbers_before)
        if best is not None and self.refit:
            estimator = build(optuna.trial.FixedTrial(best.params))
            self._refit(estimator, X, y, self._with_sensitive(
                estimator, "fit", fit_all, sensitive_features, bool(mitigation)))
        return self

    def _select(
        self, study: Any, limits: list[FairnessLimit], numbers_before: set[int]
    ) -> optuna.trial.FrozenTrial | None:
        """``cv_results_`` and the best fair trial (None, with a warning, when no trial is
        fair and ``refit=False``); this fit's failures are reported."""
        trials = self._finished_trials(study)
        self.cv_results_ = self._results(trials, limits)
        self.n_trials_ = len(trials)
        self._report_failures(
            [t for t in trials if t.number not in numbers_before], limits
        )
        best = best_fair_trial(study, {limit.metric: limit for limit in limits})
        if best is None:
            message = self._no_fair_trial_message(trials, limits)
            if self.refit:
                raise ValueError(message)
            warnings.warn(message, UserWarning, stacklevel=3)
            return None
        self.best_trial_ = best
        self._warn_if_one_class(best)
        self.best_index_ = next(i for i, t in enumerate(trials) if t.number == best.number)
        self.best_params_ = dict(best.params)
        self.best_score_ = float(best.value)
        return best

    def _check_scores_for_roc_auc(self, mitigation: list[str]) -> None:
        if self.scoring == "roc_auc" and not mitigation and not (
            hasattr(self.estimator, "predict_proba") or hasattr(self.estimator, "decision_function")
        ):
            raise ValueError(
                "`scoring` 'roc_auc' needs the estimator's predict_proba or decision_function, "
                f"but {type(self.estimator).__name__} has neither."
            )

    def _favourable(self, y: np.ndarray) -> tuple[np.ndarray, Any]:
        """(0/1 labels with 1 = the favourable label, that label), remembered with the other
        label for the predictions' checks and messages."""
        y01, _ = favourable_labels(y, self.pos_label)
        positive = 1 if self.pos_label is None else self.pos_label
        self._positive_label = positive
        others = [v for v in np.unique(y) if v != positive]
        self._other_label = others[0] if others else 0
        return y01, positive

    def _refit(self, estimator: Any, X: Any, y: Any, fit_params: dict[str, Any]) -> None:
        """Fit the best configuration on all the rows as ``best_estimator_``."""
        start = time.perf_counter()
        with limit_training_threads():
            estimator.fit(X, y, **fit_params)
        self.refit_time_ = time.perf_counter() - start
        self.best_estimator_ = estimator

    @staticmethod
    def _binary_target(y: Any) -> np.ndarray:
        """``y`` as a 1-d array of a binary target, or scikit-learn's errors and ours."""
        from sklearn.utils import assert_all_finite
        from sklearn.utils.multiclass import check_classification_targets, type_of_target

        if y is not None and np.asarray(y).dtype.kind == "f":
            assert_all_finite(y, input_name="y")  # before type_of_target casts inf to int
        check_classification_targets(y)
        y_array = np.asarray(y)
        if y_array.ndim == 2 and y_array.shape[1] == 1:
            y_array = y_array.ravel()
        target = type_of_target(y_array, input_name="y", raise_unknown=True)
        if target != "binary" or len(np.unique(y_array)) != 2:
            classes = np.unique(y_array)
            raise ValueError(
                "Only binary classification is supported: `y` must have two classes (the "
                "fairness metrics compare the rates of the favourable outcome), but got "
                f"{len(classes)} class{'es' if len(classes) != 1 else ''} "
                f"{classes[:10].tolist()} (a {target} target)."
            )
        return y_array

    def _folds(
        self, X: Any, y: np.ndarray, split_params: dict[str, Any]
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """The (train, test) folds of ``cv``; the test folds must not overlap (each row gets
        at most one out-of-fold prediction)."""
        from sklearn.model_selection import check_cv

        cv = check_cv(self.cv, y, classifier=True)
        folds = [(np.asarray(train), np.asarray(test))
                 for train, test in cv.split(X, y, **split_params)]
        tested = np.zeros(len(y), dtype=int)
        for _, test in folds:
            tested[test] += 1
        if not folds or tested.max() > 1:
            raise ValueError(
                "`cv` must give test folds that do not overlap (each row gets at most one "
                f"out-of-fold prediction), but got cv={self.cv!r}."
            )
        return folds

    def _untuned_params(
        self, space_or_distributions: Any, mitigation: list[str], limits: list[FairnessLimit]
    ) -> dict[str, Any] | None:
        """The trial parameters of the configuration a user gets without tuning, or None.

        A fairtune space's defaults, or the estimator's own values of the searched parameters
        (numbers clipped into their distributions and rounded to their step); None when a
        value cannot be placed in its distribution (e.g. ``max_depth=None`` for an
        ``IntDistribution``, a category not among the choices). With a mitigation, its
        settings as fairlearn sets it up for the limit.
        """
        from optuna.distributions import CategoricalDistribution, IntDistribution

        from fairtune.tuning.mitigation import default_mitigation_params

        if isinstance(space_or_distributions, dict):
            current = self.estimator.get_params(deep=True)
            params: dict[str, Any] = {}
            for name, distribution in space_or_distributions.items():
                value = current[name]
                if isinstance(distribution, CategoricalDistribution):
                    if not any(value is c or (type(value) is type(c) and value == c)
                               for c in distribution.choices):
                        return None
                    params[name] = value
                    continue
                if isinstance(value, bool) or not isinstance(value, Real):
                    return None
                low, high, step = distribution.low, distribution.high, distribution.step
                value = min(max(float(value), low), high)
                if step is not None:
                    value = min(low + round((value - low) / step) * step, high)
                params[name] = (int(round(value)) if isinstance(distribution, IntDistribution)
                                else float(value))
        else:
            if space_or_distributions.defaults is None:
                return None
            params = dict(space_or_distributions.defaults)
        if mitigation:
            params.update(default_mitigation_params(mitigation, limits[0]))
        return params

    def _warn_if_one_class(self, best: optuna.trial.FrozenTrial) -> None:
        one_class = trial_path.predicts_one_class(best)
        if one_class is None:
            return
        label = self._positive_label if one_class == 1 else self._other_label
        label = label.item() if isinstance(label, np.generic) else label
        warnings.warn(
            f"The best fair trial (trial {best.number}) predicts {label!r} for every "
            f"out-of-fold row: its {self.scoring} {best.value:.4f} is that of a constant model, "
            "which meets demographic-parity limits trivially and decides nothing. Add a "
            "`mitigation` (e.g. 'threshold'), loosen `limits`, or run more trials; "
            "cv_results_['predicts_one_class'] marks such trials.",
            UserWarning,
            stacklevel=4,
        )

    def _remember_groups(self, X: Any, sensitive: Any) -> None:
        """What the predictions are checked against: the groups of fit, and the values of the
        sensitive columns when they are columns of a DataFrame X (the estimator reads them)."""
        import pandas as pd

        from fairtune.tuning.mitigation import _as_sensitive

        self._known_groups = list(pd.unique(pd.Series(_as_sensitive(sensitive, X))))
        names = (list(sensitive.columns) if isinstance(sensitive, pd.DataFrame)
                 else [sensitive.name] if isinstance(sensitive, pd.Series) else [])
        self._group_columns = {
            name: list(pd.unique(X[name])) for name in names
            if isinstance(X, pd.DataFrame) and name is not None and name in X.columns
        }

    def _check_groups_known(self, X: Any, params: dict[str, Any], method: str) -> None:
        """Refuse rows of a group the search never saw (see :meth:`predict`)."""
        import pandas as pd

        from fairtune.tuning.mitigation import _as_sensitive, check_known_groups

        why = ("The model was chosen and fitted on the known groups only: correct the values, "
               "or search again on data that has these groups.")
        given = params.get(_SENSITIVE)
        if given is not None and hasattr(self, "_known_groups"):
            check_known_groups(
                _as_sensitive(given, X), self._known_groups, argument=_SENSITIVE,
                where=f"FairSearchCV.{method}", why=why,
            )
        for name, known in getattr(self, "_group_columns", {}).items():
            if isinstance(X, pd.DataFrame) and name in X.columns:
                check_known_groups(
                    X[name], known, argument=f"X[{name!r}]", where=f"FairSearchCV.{method}",
                    what="values", why=why,
                )

    def _setup_record(self, X: Any, y01: np.ndarray, sensitive: Any, folds: list[Any],
                      limits: list[FairnessLimit], mitigation: list[str], space: Any,
                      budgets: tuple[float, ...] | None, resource: str) -> dict[str, Any]:
        """The setup of this search (see :mod:`fairtune.tuning._setup`), the pruner and its
        check added by :func:`fairtune.tuning._study.prepare_study`."""
        return setup_record(
            entrance="FairSearchCV", pos_label=self.pos_label,
            model=estimator_identity(self.estimator, space), metric=self.scoring,
            limits=sorted(str(limit) for limit in limits), margin=float(self.margin),
            mitigation=list(mitigation), validation=_describe_cv(self.cv),
            budgets=None if budgets is None else list(budgets), resource=resource,
            prune_unfair=bool(self.prune_unfair),
            data=data_fingerprint(X, y01, sensitive, folds=folds),
        )

    def _prepare_study(self, sampler_seed: int | None, record: dict[str, Any],
                       budgets: tuple[float, ...] | None, untuned: dict[str, Any] | None) -> Any:
        """The study to run the trials in, checked against and holding this search's setup,
        with its pruner, and the untuned configuration enqueued unless it was evaluated."""
        import optuna
        from optuna.study import StudyDirection

        from fairtune.tuning._study import prepare_study

        if self.study is None:
            if self.sampler is None:
                from fairtune.samplers import FairBOSampler

                sampler = FairBOSampler(seed=sampler_seed)
            else:
                sampler = copy.deepcopy(self.sampler)
            study = optuna.create_study(direction="maximize", sampler=sampler,
                                        pruner=optuna.pruners.NopPruner())
        else:
            study = self.study
            if len(study.directions) != 1 or study.direction != StudyDirection.MAXIMIZE:
                raise ValueError(
                    "`study` must maximize one value (the search maximizes `scoring`), but got "
                    f"directions={[d.name.lower() for d in study.directions]}; create it with "
                    "direction='maximize'."
                )

        def check(study: Any, pruner: Any) -> None:
            try:
                check_setup(study, {**record, "pruner": describe_pruner(pruner)},
                            arguments=_ARGUMENTS)
            except ValueError as error:
                if "other data" not in str(error):
                    raise
                raise ValueError(f"{error} A clone of the search (scikit-learn's clone, "
                                 "cross_validate) shares a database study: give each fit a "
                                 "study of its own, or study=None.") from None

        prepare_study(study, check=check, defaults=untuned, budgets=budgets, pruner=self.pruner)
        return study

    @staticmethod
    def _finished_trials(study: Any) -> list[optuna.trial.FrozenTrial]:
        from optuna.trial import TrialState

        return sorted(
            study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)),
            key=lambda t: t.number,
        )

    def _results(
        self, trials: list[optuna.trial.FrozenTrial], limits: list[FairnessLimit]
    ) -> dict[str, Any]:
        """scikit-learn's ``cv_results_`` layout, one row per trial."""
        from optuna.trial import TrialState

        n = len(trials)
        results: dict[str, Any] = {"params": [dict(t.params) for t in trials]}
        names = list(dict.fromkeys(name for t in trials for name in t.params))
        for name in names:
            column = np.ma.MaskedArray(np.empty(n, dtype=object), mask=True)
            for i, t in enumerate(trials):
                if name in t.params:
                    column[i] = t.params[name]
            results[f"param_{name}"] = column

        error = np.nan if self.error_score == "raise" else float(self.error_score)

        def per_split(key: str, fill: float) -> np.ndarray:
            table = np.full((n, self.n_splits_), np.nan)
            for i, t in enumerate(trials):
                values = list(t.user_attrs.get(key) or [])[: self.n_splits_]
                table[i, : len(values)] = values
                if t.state == TrialState.FAIL:
                    table[i, len(values):] = fill
            return table

        scores = per_split(SPLIT_SCORES_KEY, error)
        for i, t in enumerate(trials):
            if t.state == TrialState.FAIL:
                scores[i] = error
        for k in range(self.n_splits_):
            results[f"split{k}_test_score"] = scores[:, k]
        mean = np.array([
            t.value if t.state == TrialState.COMPLETE and t.value is not None else error
            for t in trials
        ], dtype=float)
        results["mean_test_score"] = mean
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows of failed trials
            results["std_test_score"] = np.nanstd(scores, axis=1) if n else np.empty(0)
            fair = np.array([is_fair(t, {lim.metric: lim for lim in limits}) for t in trials],
                            dtype=bool)
            results["rank_test_score"] = _rank(mean, fair, trials)
            for key, label in ((FIT_TIMES_KEY, "fit"), (SCORE_TIMES_KEY, "score")):
                times = per_split(key, np.nan)
                results[f"mean_{label}_time"] = (np.nanmean(times, axis=1) if n
                                                 else np.empty(0))
                results[f"std_{label}_time"] = np.nanstd(times, axis=1) if n else np.empty(0)
        for limit in limits:
            results[limit.metric] = np.array(
                [fairness_values(t).get(limit.metric, np.nan) for t in trials], dtype=float
            )
        results["fair"] = fair
        results["predicts_one_class"] = np.array(
            [trial_path.predicts_one_class(t) is not None for t in trials], dtype=bool
        )
        results["trial_number"] = np.array([t.number for t in trials], dtype=int)
        return results

    def _report_failures(
        self, trials: list[optuna.trial.FrozenTrial], limits: list[FairnessLimit]
    ) -> None:
        from optuna.trial import TrialState
        from sklearn.exceptions import FitFailedWarning

        failed = [t for t in trials if t.state == TrialState.FAIL]
        if not failed:
            return
        first = failed[0]
        reason = first.user_attrs.get(ERROR_KEY) or first.system_attrs.get("fail_reason", "?")
        if len(failed) == len(trials):
            raise ValueError(
                f"All {len(trials)} trials of the search failed: the estimator raised while "
                f"fitting or scoring. The first error (trial {first.number}, params "
                f"{first.params}): {reason}"
            )
        warnings.warn(
            f"{len(failed)} of {len(trials)} trials failed and scored "
            f"error_score={self.error_score!r}; the first error (trial {first.number}, params "
            f"{first.params}): {reason}",
            FitFailedWarning,
            stacklevel=4,
        )

    def _no_fair_trial_message(
        self, trials: list[optuna.trial.FrozenTrial], limits: list[FairnessLimit]
    ) -> str:
        from optuna.trial import TrialState

        text = ", ".join(str(limit) for limit in limits)
        if self.margin:
            text += f" (the given limits less `margin`={self.margin:g})"
        completed = [t for t in trials if t.state == TrialState.COMPLETE]

        def excess(t: optuna.trial.FrozenTrial) -> float:
            values = fairness_values(t)
            if any(limit.metric not in values for limit in limits):
                return np.inf
            return sum(max(0.0, limit.violation(values[limit.metric])) for limit in limits)

        message = (
            f"No trial meets the fairness limit{'s' if len(limits) > 1 else ''} {text} on its "
            f"out-of-fold predictions ({len(completed)} completed trial"
            f"{'s' if len(completed) != 1 else ''})"
        )
        if completed:
            closest = min(completed, key=lambda t: (excess(t), -(t.value or 0.0)))
            values = fairness_values(closest)
            measured = ", ".join(
                f"{limit.metric}={values[limit.metric]:.4f}" for limit in limits
                if limit.metric in values
            )
            message += (
                f": the closest is trial {closest.number} ({measured}, {self.scoring}="
                f"{closest.value:.4f}, params {closest.params})"
            )
        return message + (
            ". Loosen `limits`, run more trials (`n_trials`), widen `param_distributions` "
            "towards simpler models, or add a `mitigation` ('threshold' aims exactly at the "
            "limit); refit=False keeps the search's results without a best estimator."
        )

    # ------------------------------------------------------------------ delegation

    def _method_params(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.mitigation is None and _routing_enabled():
            from sklearn.utils.metadata_routing import process_routing

            return dict(process_routing(self, method, **params)["estimator"][
                "predict" if method == "score" else method
            ])
        return params

    def _fitted_best(self, method: str) -> Any:
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        self._check_refit(method)
        if not hasattr(self, "best_estimator_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError(
                f"This FairSearchCV found no fair trial, so it has no best estimator for {method}."
            )
        return self.best_estimator_

    @available_if(_estimator_has("predict"))
    def predict(self, X: Any, **params: Any) -> np.ndarray:
        """``best_estimator_.predict(X, **params)`` (e.g. ``sensitive_features=`` for a
        threshold mitigation)."""
        best = self._fitted_best("predict")
        self._check_groups_known(X, params, "predict")
        return best.predict(X, **self._method_params("predict", params))

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X: Any, **params: Any) -> np.ndarray:
        """``best_estimator_.predict_proba(X, **params)``."""
        best = self._fitted_best("predict_proba")
        self._check_groups_known(X, params, "predict_proba")
        return best.predict_proba(X, **self._method_params("predict_proba", params))

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X: Any, **params: Any) -> np.ndarray:
        """``best_estimator_.predict_log_proba(X, **params)``."""
        best = self._fitted_best("predict_log_proba")
        self._check_groups_known(X, params, "predict_log_proba")
        return best.predict_log_proba(X, **self._method_params("predict_log_proba", params))

    @available_if(_estimator_has("decision_function"))
    def decision_function(self, X: Any, **params: Any) -> np.ndarray:
        """``best_estimator_.decision_function(X, **params)``."""
        best = self._fitted_best("decision_function")
        self._check_groups_known(X, params, "decision_function")
        return best.decision_function(X, **self._method_params("decision_function", params))

    def score(self, X: Any, y: Any, **params: Any) -> float:
        """``scoring`` of ``best_estimator_`` on ``(X, y)``; ``params`` go to its ``predict``.

        Fairness is not part of the score: measure it with :mod:`fairtune.fairness` on
        ``predict(X)``.
        """
        best = self._fitted_best("score")
        self._check_groups_known(X, params, "score")
        params = self._method_params("score", params)
        positive = self._positive_label
        y_true = (np.asarray(y).ravel() == positive).astype(int)
        y_pred = (np.asarray(best.predict(X, **params)) == positive).astype(int)
        y_score = _positive_scores(best, X, positive, {}) if self.scoring == "roc_auc" else None
        return trial_path.metric_score(self.scoring, y_true, y_pred, y_score)

    @property
    def classes_(self) -> np.ndarray:
        """The class labels (of ``best_estimator_``)."""
        return self._fitted_best("classes_").classes_

    @property
    def n_features_in_(self) -> int:
        """Number of features seen by ``best_estimator_`` in fit."""
        from sklearn.exceptions import NotFittedError

        try:
            best = self._fitted_best("n_features_in_")
        except (NotFittedError, AttributeError) as error:
            raise AttributeError(f"{type(self).__name__} has no n_features_in_: {error}") from None
        return best.n_features_in_

    @property
    def feature_names_in_(self) -> np.ndarray:
        """Names of the features seen by ``best_estimator_`` in fit (a DataFrame's columns)."""
        from sklearn.exceptions import NotFittedError

        try:
            best = self._fitted_best("feature_names_in_")
        except (NotFittedError, AttributeError) as error:
            raise AttributeError(
                f"{type(self).__name__} has no feature_names_in_: {error}"
            ) from None
        return best.feature_names_in_

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import get_tags

        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.input_tags.pairwise = inner.input_tags.pairwise
        tags.input_tags.sparse = inner.input_tags.sparse
        tags.input_tags.allow_nan = inner.input_tags.allow_nan
        tags.input_tags.categorical = inner.input_tags.categorical
        tags.input_tags.string = inner.input_tags.string
        tags.target_tags.required = True
        if tags.classifier_tags is not None:
            tags.classifier_tags.multi_class = False  # fairness of a binary decision
        return tags


def _rank(mean: np.ndarray, fair: np.ndarray, trials: list[Any]) -> np.ndarray:
    """Ranks (1 = best, ties share the smallest): fair trials by score, then the other
    completed ones by score, then the failed ones."""
    from optuna.trial import TrialState

    tier = np.array([
        0 if is_fair_ else 1 if t.state == TrialState.COMPLETE and np.isfinite(m) else 2
        for t, m, is_fair_ in zip(trials, mean, fair)
    ])
    key = np.where(tier < 2, -np.nan_to_num(mean, nan=0.0), 0.0)
    order = np.lexsort((key, tier))
    ranks = np.empty(len(mean), dtype=np.int32)
    previous: tuple[int, float] | None = None
    rank = 0
    for position, i in enumerate(order):
        current = (int(tier[i]), float(key[i]))
        if current != previous:
            rank = position + 1
            previous = current
        ranks[i] = rank
    return ranks


# The arguments of FairSearchCV that choose each entry of its setup (see tuning._setup).
_ARGUMENTS = {"model": ("estimator", "param_distributions"), "validation": ("cv",),
              "metric": ("scoring",), "limits": ("limits", "margin")}


def _describe_cv(cv: Any) -> str:
    """The validation scheme of ``cv`` as the setup records it."""
    if cv is None or isinstance(cv, Integral):
        return f"{5 if cv is None else int(cv)}-fold cross-validation"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(cv))


def estimator_identity(estimator: Any, space: Any) -> str:
    """What a FairSearchCV's trials are built from, as its setup records it: the estimator's
    class (a pipeline's steps) and a digest of every parameter that is not tuned (another
    scaler, another fixed setting) and of the searched space; a tuned parameter's starting
    value is not part of it."""
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

    def __init__(self, objective: _SearchObjective, estimator: Any,
                 log: dict[str, list[float]]) -> None:
        self.objective, self.estimator, self.log = objective, estimator, log
        self.scratch: dict[str, list[float]] = {key: [] for key in log}

    def fit_predict(self, fit_rows: np.ndarray, valid_rows: np.ndarray, budget: float
                    ) -> tuple[Any, Any]:
        objective, estimator = self.objective, self.estimator
        if budget < 1.0 and objective.resource != "n_samples":
            estimator = trial_path.scale_resource(clone(estimator), objective.resource, budget)
        return objective._fit_predict(estimator, fit_rows, valid_rows,
                                      self.log if budget >= 1.0 else self.scratch)


@dataclass
class _SearchObjective:
    """The Optuna objective of one ``FairSearchCV.fit``: cross-validate a trial's estimator."""

    search: FairSearchCV
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
                sensitive=self.sensitive, metric=self.search.scoring, limits=self.limits,
                budgets=self.budgets, prune_unfair=self.search.prune_unfair)
        except optuna.TrialPruned:
            raise
        except Exception as error:
            for key, values in log.items():
                trial.set_user_attr(key, values)
            trial.set_user_attr(ERROR_KEY, f"{type(error).__name__}: {error}")
            if self.search.error_score == "raise":
                raise
            raise _TrialFailed(f"{type(error).__name__}: {error}") from error
        for key, values in log.items():
            trial.set_user_attr(key, values)
        if self.mitigation:
            trial.set_user_attr(
                trial_path.MITIGATION_USED_KEY, trial.params.get(MITIGATION_KEY, self.mitigation[0])
            )
        return scored.value

    def _fit_predict(
        self, estimator: Any, fit_rows: np.ndarray, valid_rows: np.ndarray,
        log: dict[str, list[float]],
    ) -> tuple[Any, Any]:
        """Fit a clone of ``estimator`` on ``fit_rows``, predict ``valid_rows``: 0/1 labels (1
        = the favourable one), or a randomized mitigation's probabilities of it, and the
        positive class's scores for roc_auc; the times and the fold's score go to ``log``."""
        from sklearn.utils import _safe_indexing

        search, n = self.search, len(self.y01)
        model = clone(estimator)
        fit = search._with_sensitive(
            model, "fit", _rows_of(self.fit_params, fit_rows, n),
            _safe_indexing(self.sensitive, fit_rows), bool(self.mitigation),
        )
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
            return search._with_sensitive(
                model, method, _rows_of(self.predict_params.get(method, {}), valid_rows, n),
                s_valid, bool(self.mitigation),
            )

        with limit_training_threads():
            y_pred = self._favourable_predictions(model, X_valid, params("predict"))
            y_score = None
            if search.scoring == "roc_auc":
                method = ("predict_proba" if hasattr(model, "predict_proba")
                          else "decision_function")
                y_score = _positive_scores(model, X_valid, self.positive, params(method))
        log[SPLIT_SCORES_KEY].append(
            trial_path.metric_score(search.scoring, self.y01[valid_rows], y_pred, y_score)
        )
        log[SCORE_TIMES_KEY].append(time.perf_counter() - start)
        return y_pred, y_score

    def _favourable_predictions(self, model: Any, X: Any, predict: dict[str, Any]) -> Any:
        """1 where ``model`` predicts the favourable label, or a randomized mitigation's
        probability of predicting it (its expected predictions, as FairObjective scores it)."""
        if isinstance(model, (ThresholdClassifier, ReductionClassifier)):
            proba = model.predict_proba(X, **predict)
            classes = list(model.classes_)
            return (proba[:, classes.index(self.positive)] if self.positive in classes
                    else np.zeros(len(proba)))
        if "random_state" not in predict and trial_path.takes_random_state(model.predict,
                                                                var_keyword=False):
            # fairlearn's ThresholdOptimizer and ExponentiatedGradient predict at random from
            # numpy's global generator unless given one: fix it, so that a trial is
            # reproducible.
            predict = {**predict, "random_state": self.seed}
        return (np.asarray(model.predict(X, **predict)).ravel() == self.positive).astype(int)
