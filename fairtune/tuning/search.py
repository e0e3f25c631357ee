"""FairSearchCV: a scikit-learn meta-estimator that tunes any classifier under fairness limits.

A scikit-learn user with a ``Pipeline`` of their own and a sensitive feature gets ``fit`` /
``predict`` and ``cv_results_`` as with ``GridSearchCV``, and never writes an Optuna objective.
Every trial of the search is scored exactly as :class:`~fairtune.tuning.FairObjective` scores a
trial with ``cv=k``, by the trial path both share (:func:`fairtune.tuning._trial.run_trial`):

each configuration is fitted once per cross-validation fold; the folds' out-of-fold
predictions are pooled, so every validated row has one, and ``scoring`` and every limited
fairness metric (e.g. ``DSP = max_g P(yhat=1 | g) - min_g P(yhat=1 | g)``) are computed once on
them and recorded as Optuna 5 constraints ``metric - bound`` (feasible iff ``<= 0``), which
:class:`~fairtune.samplers.FairBOSampler` models and :func:`fairtune.fairness.best_fair_trial`
reads. Pooling matters for fairness: a gap measured on the few hundred rows of one fold is much
noisier, and averaging per-fold gaps is not the gap of any model.

Sensitive features reach the estimator as scikit-learn's metadata routing asks, or, without
routing, through the ``fit`` / ``predict`` parameters that take them
(:mod:`fairtune.tuning._estimators` says how); a model that needs the groups at prediction
time (``mitigation="threshold"``) needs them again: ``search.predict(X, sensitive_features=A)``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin
from sklearn.utils.metaestimators import available_if

from fairtune._keys import ERROR_KEY, FIT_TIMES_KEY, SCORE_TIMES_KEY, SPLIT_SCORES_KEY
from fairtune._names import arg
from fairtune._threads import limit_training_threads
from fairtune.fairness.constraints import (
    FairnessLimit,
    LimitsLike,
    best_fair_trial,
    parse_limits,
)
from fairtune.tuning import _trial as trial_path
from fairtune.tuning._certify import (
    NotCertifiedError,
    certify,
    check_bound,
    check_confidence,
)
from fairtune.tuning._data import data_fingerprint, favourable_labels, split_rows
from fairtune.tuning._deployment import deployment
from fairtune.tuning._estimators import (
    _PREDICT_METHODS,
    _positive_scores,
    _routing_enabled,
    _SearchObjective,
    _TrialFailed,
    builder,
    check_groups_known,
    describe_cv,
    estimator_identity,
    favourable_predictions,
    fold_params,
    known_groups,
    rows_of,
    with_sensitive,
)
from fairtune.tuning._results import (
    finished_trials,
    no_fair_trial_message,
    report_failures,
    results,
    warn_if_one_class,
)
from fairtune.tuning._search_checks import (
    binary_target,
    check_mitigation,
    check_options,
    check_same_rows,
    check_scores_for_roc_auc,
    check_sensitive,
    checked_space,
    cv_folds,
    seeds,
    untuned_params,
)
from fairtune.tuning._setup import setup_record
from fairtune.tuning._study import prepare_search_study

if TYPE_CHECKING:
    import optuna

# Trial user attributes: ``scoring`` on each fold's validation rows (``split<k>_test_score``),
# the seconds each fold's fit and its prediction and scoring took, a failed trial's error.
__all__ = ["ERROR_KEY", "FIT_TIMES_KEY", "SCORE_TIMES_KEY", "SPLIT_SCORES_KEY", "FairSearchCV"]


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
       :class:`~fairtune.samplers.FairBOSampler` ``(seed=random_state)``; the first trial of
       a new study is the untuned configuration (the estimator's own values of the searched
       parameters, with the mitigation aimed at the limit), so that the search keeps the
       model a user gets without tuning unless it finds a more accurate fair one;
    2. scores each trial by cross-validation on the *pooled* out-of-fold predictions: the
       ``scoring`` metric and every limited fairness metric are computed once on all the
       validated rows, as ``FairObjective(cv=...)`` does (see :mod:`fairtune.tuning.search`),
       and records the limits as Optuna constraints;
    3. picks the model to deploy: the best fair trial (with ``confidence``, the certified
       one), and with ``refit=True`` fits its configuration on all the rows as
       ``best_estimator_``.

    A trial whose estimator raises scores ``error_score`` and is recorded as a failed Optuna
    trial; the search goes on (a ``FitFailedWarning`` says how many failed). If no trial is
    fair, ``fit`` raises a ``ValueError`` naming the limits and the closest trial (with
    ``refit=False`` it warns instead, and the ``best_*`` attributes are not set).

    Differences from ``GridSearchCV``'s ``cv_results_``: ``mean_test_score`` is the trial's
    value, ``scoring`` on the pooled out-of-fold predictions (for ``"accuracy"``, the mean of
    the ``split<k>_test_score`` weighted by the fold sizes); ``rank_test_score`` ranks the model
    to deploy first (``best_index_``), then the other fair trials; after a refusal, which
    deploys none, no trial ranks first.

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
    scored on other rows; a clone (``cross_validate``) of a search on a database study runs in
    that same study, so give each fit a study of its own, or ``study=None``.

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
            fold are not scored. With ``confidence``, index arrays name rows of ``fit``'s X and
            lose the safety rows (which no fold may use). Defaults to 5.
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
            :class:`fairtune.fairness.FairnessCallback`; one with an ``after_search(study)``
            method (:class:`fairtune.dashboard.DashboardCallback`) is also called once at the
            end of ``fit``, after the safety test. Defaults to None.
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
        confidence: Refit only a model certified at this level (e.g. 0.95) as FairObjective
            certifies it, on ``safety_size`` (default 0.5) of the rows kept from the search:
            ``best_estimator_.certificate_``, or :class:`~fairtune.tuning.NotCertifiedError`.
        safety_size: The share of the rows kept for the safety test of ``confidence``.
        bound: The safety test of each pair of groups, as FairObjective's ``bound``.

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
        confidence: float | None = None,
        safety_size: float | None = None,
        bound: str | None = None,
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
        self.confidence = confidence
        self.safety_size = safety_size
        self.bound = bound

    # ------------------------------------------------------------------ validation

    def _check_limits(self) -> tuple[list[FairnessLimit], float | None, float | None,
                                     str | None]:
        """The limits as given, ``confidence``, ``safety_size`` and ``bound``, each checked."""
        limits = parse_limits(self.limits)  # its errors name `limits`
        trial_path.warn_if_cannot_bind(limits, stacklevel=3)
        confidence, safety_size = check_confidence(self.confidence, self.safety_size, limits)
        bound = check_bound(self.bound, confidence)
        if confidence is not None and not self.refit:
            raise ValueError(f"{arg('confidence')} certifies the refitted model, so `refit` "
                             "must be True with it, but got refit=False.")
        return limits, confidence, safety_size, bound

    def _check_refit(self, attr: str) -> None:
        if not self.refit:
            raise AttributeError(
                f"This FairSearchCV was created with refit=False: {attr} needs the refitted "
                "best estimator. Fit a clone of `estimator` with `best_params_` yourself."
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

    # ------------------------------------------------------------------ fit

    def fit(self, X: Any, y: Any = None, *, sensitive_features: Any = None,
            **fit_params: Any) -> FairSearchCV:
        """Run the search, then (``refit=True``) fit the model to deploy on all rows.

        Args:
            X: The rows, any input ``estimator`` accepts.
            y: Binary labels, one per row.
            sensitive_features: The group of each row: a 1-d array-like, or a DataFrame whose
                columns define intersectional groups. Required.
            **fit_params: ``estimator.fit``'s (or routed metadata); ``groups`` goes to ``cv``.
        """
        import optuna
        from sklearn.utils import indexable

        check_options(scoring=self.scoring, n_trials=self.n_trials, timeout=self.timeout,
                      n_jobs=self.n_jobs, refit=self.refit, error_score=self.error_score,
                      callbacks=self.callbacks, study=self.study, sampler=self.sampler)
        given, confidence, safety_size, bound = self._check_limits()
        y_array = binary_target(y)
        X, y = indexable(X, y)
        groups = check_sensitive(sensitive_features, len(y_array))
        check_same_rows(X, y, sensitive_features)
        mitigation = check_mitigation(self.mitigation, self.scoring, fit_params)
        space = checked_space(self.param_distributions, self.estimator, mitigation)
        sampler_seed, seed = seeds(self.random_state)
        check_scores_for_roc_auc(self.estimator, self.scoring, mitigation)
        y01, positive = self._favourable(y_array)
        routing = _routing_enabled()
        fit_all, predict_all, split_params = fold_params(
            sensitive_features, fit_params, mitigation,
            router=self.get_metadata_routing() if routing and not mitigation else None)
        budgets = None if self.budgets is None else trial_path.checked_budgets(self.budgets)
        resource = trial_path.checked_resource(self.resource, budgets)
        def take(value: Any, rows: np.ndarray) -> Any:  # the search rows: all but the safety's
            return value if confidence is None else rows_of(value, rows, len(y_array))
        split = split_rows(  # the same builder as FairObjective's
            y01, groups, sensitive_features, labels=y_array, keep=None, seed=seed,
            test_size=None, safety_size=safety_size if confidence else None, ordered=True,
            cv=lambda dev: cv_folds(self.cv, take(X, dev), y_array[dev], take(split_params, dev),
                                    kept=None if confidence is None else dev),
            limits=given, margin=self.margin, confidence=confidence, budgets=budgets, bound=bound,
            argument="`sensitive_features`", resource=resource, rows="rows given to fit")
        dev, splits, limits = split.dev, split.splits, split.limits
        safe = None if split.safe is None else (
            take(X, split.safe), y01[split.safe], take(sensitive_features, split.safe))
        X, y, sensitive_features, fit_all = (take(v, dev) for v in (X, y, sensitive_features,
                                                                    fit_all))
        predict_all, y01 = {m: take(p, dev) for m, p in predict_all.items()}, y01[dev]
        self._known_groups, self._group_columns = known_groups(X, sensitive_features)
        build = builder(self.estimator, space, mitigation, limits, seed, self.pos_label)
        record = self._record(space, mitigation, given, limits, budgets, resource,
                              data_fingerprint(X, y01, sensitive_features, folds=splits.folds),
                              confidence=confidence, safety_size=safety_size, bound=bound)
        study = prepare_search_study(
            self.study, sampler=self.sampler, sampler_seed=sampler_seed, pruner=self.pruner,
            record=record, budgets=budgets,
            untuned=untuned_params(self.estimator, space, mitigation, limits))
        objective = _SearchObjective(
            build=build, X=X, y=y, y01=y01, positive=positive, sensitive=sensitive_features,
            splits=splits, fit_params=fit_all, predict_params=predict_all, limits=limits,
            mitigation=mitigation, scoring=self.scoring, error_score=self.error_score,
            prune_unfair=self.prune_unfair, routing=routing, seed=seed, budgets=budgets,
            resource=resource)

        def refit(params: dict[str, Any]) -> Any:  # a configuration on every search row
            model, start = build(optuna.trial.FixedTrial(params)), time.perf_counter()
            with limit_training_threads():
                model.fit(X, y, **with_sensitive(model, "fit", fit_all, sensitive_features,
                                                 bool(mitigation), routing=routing))
            self.refit_time_ = time.perf_counter() - start
            return model

        def predict(model: Any, X_rows: Any, s_rows: Any) -> Any:
            # The favourable predictions (a randomized mitigation's expected ones).
            return favourable_predictions(model, X_rows, with_sensitive(
                model, "predict", {}, s_rows, bool(mitigation), routing=routing), positive, seed)

        self.n_splits_ = len(splits.folds)
        self._search(study, objective, limits)
        return self._conclude(study, refit, predict, safe, given, confidence, bound)

    def _conclude(self, study: Any, refit: Any, predict: Any, safe: Any,
                  limits: list[FairnessLimit], confidence: float | None,
                  bound: str | None) -> FairSearchCV:
        """After the search: with ``confidence`` the safety test on the ``safe`` rows
        (``refit(params) -> model`` on the search rows, ``predict(model, X, s)``), the model
        to deploy as ``best_*`` (:meth:`_deploy`), refitted, and the views told."""
        study = self.study_
        for name in ("best_estimator_", "certificate_", "best_trial_", "best_params_",
                     "best_score_", "best_index_"):  # an earlier fit's, or a candidate's
            self.__dict__.pop(name, None)
        try:
            if safe is not None:
                assert confidence is not None  # safety rows are kept for a confidence only
                X_safe, y_safe, s_safe = safe

                def fit_predict(trial: Any) -> tuple[Any, Any]:
                    model = refit(trial.params)
                    return model, predict(model, X_safe, s_safe)

                self.best_estimator_, self.certificate_ = certify(
                    study, fit_predict, limits, confidence, y_safe, s_safe,
                    method=bound or "exact")
        finally:  # a refusal too: then no trial ranks first
            self._deploy(study, trials=finished_trials(study))
        if safe is None and self.refit and getattr(self, "best_trial_", None) is not None:
            self.best_estimator_ = refit(self.best_params_)
        for callback in self.callbacks or ():  # a view of the study, e.g. DashboardCallback
            after_search = getattr(callback, "after_search", None)
            if callable(after_search):
                after_search(study)
        return self

    def _record(self, space: Any, mitigation: list[str], given: list[FairnessLimit],
                limits: list[FairnessLimit], budgets: Any, resource: str, data: str,
                **certify: Any) -> dict[str, Any]:
        """The setup record of this search (:mod:`fairtune.tuning._setup`; the study's
        preparation adds the pruner), ``certify`` the checked ``confidence``, ``safety_size``
        and ``bound``."""
        return setup_record(
            entrance="FairSearchCV", pos_label=self.pos_label, metric=self.scoring,
            model=estimator_identity(self.estimator, space), mitigation=list(mitigation),
            limits_given=sorted(str(limit) for limit in given),  # as the user gave them
            limits=sorted(str(limit) for limit in limits), margin=float(self.margin),
            validation=describe_cv(self.cv), budgets=None if budgets is None else list(budgets),
            resource=resource, prune_unfair=bool(self.prune_unfair), data=data, **certify)

    def _search(self, study: Any, objective: Any, limits: list[FairnessLimit]) -> None:
        """Run the trials, then ``cv_results_``; this fit's failures reported; when no trial
        is fair, an error (a warning with ``refit=False``)."""
        # Trials finished before this fit (a given study's earlier searches) are candidates
        # but not this fit's failures; enqueued (WAITING) trials run now.
        numbers_before = {t.number for t in finished_trials(study)}
        study.optimize(objective, n_trials=self.n_trials, timeout=self.timeout,
                       n_jobs=int(self.n_jobs),
                       catch=(_TrialFailed,) if self.error_score != "raise" else (),
                       callbacks=list(self.callbacks) if self.callbacks else None)
        self.study_ = study
        trials = finished_trials(study)
        self.cv_results_ = results(trials, limits, error_score=self.error_score,
                                   n_splits=self.n_splits_)
        self.n_trials_ = len(trials)
        report_failures([t for t in trials if t.number not in numbers_before], self.error_score)
        best = best_fair_trial(study, {limit.metric: limit for limit in limits})
        if best is not None:
            warn_if_one_class(best, self.scoring, (self._other_label, self._positive_label))
            return
        message = no_fair_trial_message(trials, limits, scoring=self.scoring,
                                        margin=self.margin, confidence=self.confidence,
                                        study=study)
        if self.refit:  # with confidence, a refusal like any other; none ranks first
            self._deploy(study, trials)
            raise (ValueError if self.confidence is None else NotCertifiedError)(message)
        warnings.warn(message, UserWarning, stacklevel=3)  # fit -> _search

    def _deploy(self, study: Any, trials: list[optuna.trial.FrozenTrial]) -> None:
        """``best_*`` and ``cv_results_["rank_test_score"]`` of the study's model to deploy
        (:func:`~fairtune.tuning._deployment.deployment`: the certified trial with
        ``confidence``, else the best fair trial), ranked first; without one, no trial is."""
        record = deployment(study)
        if record.trial is None:
            self.cv_results_["rank_test_score"] += 1
            return
        best = record.trial
        self.best_trial_, self.best_params_ = best, dict(best.params)
        self.best_score_ = float(best.value)
        self.best_index_ = next(i for i, t in enumerate(trials) if t.number == best.number)
        ranks = self.cv_results_["rank_test_score"]
        above = ranks <= ranks[self.best_index_]  # above it, or tied with it
        above[self.best_index_] = False
        ranks[above] += 1  # behind it now
        ranks[self.best_index_] = 1

    def _favourable(self, y: np.ndarray) -> tuple[np.ndarray, Any]:
        """(0/1 labels with 1 = the favourable label, that label), remembered with the other
        label for the predictions' checks and messages."""
        y01, _ = favourable_labels(y, self.pos_label)
        positive = 1 if self.pos_label is None else self.pos_label
        self._positive_label = positive
        others = [v for v in np.unique(y) if v != positive]
        self._other_label = others[0] if others else 0
        return y01, positive

    # ------------------------------------------------------------------ delegation

    def _method_params(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.mitigation is None and _routing_enabled():
            from sklearn.utils.metadata_routing import process_routing

            return dict(process_routing(self, method, **params)["estimator"][
                "predict" if method == "score" else method
            ])
        return params

    def _fitted_best(self, method: str, X: Any = None, params: dict[str, Any] | None = None
                     ) -> Any:
        """``best_estimator_`` for ``method``, which refuses rows ``X`` of a group that fit
        never saw (see the class docstring)."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        self._check_refit(method)
        if not hasattr(self, "best_estimator_"):
            from sklearn.exceptions import NotFittedError

            why = "found no fair trial" if self.confidence is None else "certified no model"
            raise NotFittedError(f"This FairSearchCV {why}, so it has no best estimator for "
                                 f"{method}.")
        if X is not None:
            check_groups_known(X, params or {}, method, getattr(self, "_known_groups", None),
                               getattr(self, "_group_columns", {}))
        return self.best_estimator_

    def _delegate(self, method: str, X: Any, params: dict[str, Any]) -> Any:
        best = self._fitted_best(method, X, params)
        return getattr(best, method)(X, **self._method_params(method, params))

    @available_if(_estimator_has("predict"))
    def predict(self, X: Any, **params: Any) -> np.ndarray:
        """``best_estimator_.predict(X, **params)`` (e.g. ``sensitive_features=`` for a
        threshold mitigation)."""
        return self._delegate("predict", X, params)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X: Any, **params: Any) -> np.ndarray:
        """``best_estimator_.predict_proba(X, **params)``."""
        return self._delegate("predict_proba", X, params)

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X: Any, **params: Any) -> np.ndarray:
        """``best_estimator_.predict_log_proba(X, **params)``."""
        return self._delegate("predict_log_proba", X, params)

    @available_if(_estimator_has("decision_function"))
    def decision_function(self, X: Any, **params: Any) -> np.ndarray:
        """``best_estimator_.decision_function(X, **params)``."""
        return self._delegate("decision_function", X, params)

    def score(self, X: Any, y: Any, **params: Any) -> float:
        """``scoring`` of ``best_estimator_`` on ``(X, y)``; ``params`` go to its ``predict``.

        Fairness is not part of the score: measure it with :mod:`fairtune.fairness` on
        ``predict(X)``.
        """
        best = self._fitted_best("score", X, params)
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

    def _best_attribute(self, name: str) -> Any:
        # An AttributeError, so that hasattr(search, name) is False before fit.
        from sklearn.exceptions import NotFittedError

        try:
            best = self._fitted_best(name)
        except (NotFittedError, AttributeError) as error:
            raise AttributeError(f"{type(self).__name__} has no {name}: {error}") from None
        return getattr(best, name)

    @property
    def n_features_in_(self) -> int:
        """Number of features seen by ``best_estimator_`` in fit."""
        return self._best_attribute("n_features_in_")

    @property
    def feature_names_in_(self) -> np.ndarray:
        """Names of the features seen by ``best_estimator_`` in fit (a DataFrame's columns)."""
        return self._best_attribute("feature_names_in_")

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import get_tags

        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        for name in ("pairwise", "sparse", "allow_nan", "categorical", "string"):
            setattr(tags.input_tags, name, getattr(inner.input_tags, name))
        tags.target_tags.required = True
        if tags.classifier_tags is not None:
            tags.classifier_tags.multi_class = False  # fairness of a binary decision
        return tags
