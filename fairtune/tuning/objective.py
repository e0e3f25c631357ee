"""FairObjective: a dataset, a model space, a metric and fairness limits as an Optuna objective."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Union

import numpy as np
import pandas as pd

from fairtune._keys import FIT_TIMES_KEY, PREFIX, SCORE_TIMES_KEY
from fairtune._names import check_choice
from fairtune._optuna_compat import study_key
from fairtune.fairness import parse_limits
from fairtune.fairness.constraints import LimitsLike
from fairtune.tenancy import optimizing_tenant, tenant_of
from fairtune.tuning import _setup as setup_path
from fairtune.tuning import _trial as trial_path
from fairtune.tuning._arguments import (
    check_budgets_objectives,
    check_complete_rows,
    check_resource,
    check_validation,
    checked_mitigation,
    checked_tenant,
    chosen_trial,
    parse_objectives,
    space_of,
)
from fairtune.tuning._certify import check_bound, check_confidence
from fairtune.tuning._data import data_fingerprint, tuning_rows
from fairtune.tuning._pipeline import Pipelines, build_pipeline, fit_pipeline, predict_pipeline
from fairtune.tuning._trial import (
    METRIC_NAMES,
    MITIGATION_USED_KEY,
    POSITIVE_RATE_KEY,
    POSITIVE_RATES_KEY,
    SENSITIVE_AT_PREDICTION_KEY,
    VALIDATION_ERROR_KEY,
    predicts_one_class,
)
from fairtune.tuning.mitigation import needs_sensitive_features

if TYPE_CHECKING:
    import optuna
    from sklearn.pipeline import Pipeline

    from fairtune.datasets import FairDataset
    from fairtune.tuning._deployment import Deployment

__all__ = [
    "FairObjective",
    "METRIC_NAMES",
    "MITIGATION_USED_KEY",
    "SENSITIVE_AT_PREDICTION_KEY",
    "POSITIVE_RATE_KEY",
    "POSITIVE_RATES_KEY",
    "VALIDATION_ERROR_KEY",
    "predicts_one_class",
]

DatasetLike = Union[str, "FairDataset", tuple[Any, ...]]


class FairObjective:
    """An Optuna objective: train a model, score it, and record its fairness as constraints.

    For every trial it

    1. builds the estimator from the search space (``model``) in a scikit-learn ``Pipeline``
       with the preprocessing the data needs (one-hot encoding, standardization),
    2. fits and scores it through the trial path every entrance shares
       (:func:`fairtune.tuning._trial.run_trial`): fitted on the training split (or each
       fold's training rows, at each budget), it predicts the validation rows, and the trial
       returns the validation ``metric`` (to be maximized),
    3. records the fairness values as constraints
       (:func:`fairtune.fairness.set_fairness_constraints`), so that ``study.best_trial`` is the
       best fair trial, and the validation error and the predicted positive rate, overall and
       per group, as user attributes (:func:`predicts_one_class` reads them).

    A gap measured on a few hundred validation rows is noisy: ``cv=k`` scores every trial on
    the out-of-fold predictions of all the tuning rows; ``test_size=f`` holds out rows that
    tuning never sees, on which :meth:`evaluate` scores the chosen model.

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
        dataset: ``"adult"``, ``"german"`` or ``"compas"``, a
            :class:`~fairtune.datasets.FairDataset`, or an ``(X, y, sensitive)`` tuple: pandas
            labels and sensitive features are matched to a DataFrame X by index label (their
            index must hold the same labels), arrays by position; the objective works on copies
            and never changes them. Labels are 0/1 or booleans (1 = the favourable outcome),
            or any two labels with ``pos_label``.
        model: A space name of :data:`fairtune.tuning.SPACES` (``"xgboost"``,
            ``"random_forest"``, ``"mlp"``, ``"linear"``) or a callable ``trial -> estimator``.
        limits: Fairness limits, e.g. ``"demographic_parity<=0.05"`` (see
            :func:`fairtune.fairness.parse_limits`).
        metric: ``"accuracy"``, ``"balanced_accuracy"``, ``"f1"`` or ``"roc_auc"``, maximized.
            Defaults to ``"accuracy"``. The limits are measured on the 0/1 predictions (a 0.5
            threshold) while ``"roc_auc"`` scores the probabilities: a model can rank well and
            predict one class for almost everyone (the recorded positive rates show it).
        validation_size: Fraction of the tuning rows held out for validation (stratified on the
            label). Defaults to 0.3 when ``cv`` is not given; cannot be combined with ``cv``.
        cv: Number of stratified cross-validation folds (an integer >= 2), instead of a single
            validation split. Defaults to None (a single split).
        test_size: Fraction of all rows held out as a test split that tuning never sees (see
            :meth:`evaluate`). Defaults to None (no test split: all rows are tuning rows).
        random_state: Seed of the splits and of the models. Defaults to 0.
        use_sensitive_feature: Whether the model may use the sensitive columns as inputs.
            Defaults to True. With False, a warning names the categorical columns left that
            reveal the group (as Adult's ``relationship`` does for ``sex``).
        drop_columns: Columns of X the model does not see (e.g. German credit's
            ``personal_status_sex``, which determines ``sex``, with
            ``use_sensitive_feature=False``); the limits are still measured on the sensitive
            feature. Defaults to none.
        mitigation: One of fairlearn's mitigations in every trial's pipeline, its settings
            tuned with the model's (:data:`fairtune.tuning.MITIGATION_PARAMS`), aimed at the
            first limit, every limit measured on the *mitigated* model's validation
            predictions: ``"threshold"`` (``ThresholdOptimizer``,
            :class:`~fairtune.tuning.ThresholdClassifier`, which needs ``predict(X,
            sensitive_features=...)``), ``"reduction"`` (``ExponentiatedGradient``,
            :class:`~fairtune.tuning.ReductionClassifier`) or ``"correlation_remover"`` (it
            reads the sensitive columns of X). A list makes it a hyperparameter the study
            chooses; ``"auto"`` lists every one that applies. The first two predict at random
            for some rows: a trial records the *expected* metric and gaps, :meth:`evaluate`
            the deployed model's actual predictions (see the user guide). Not with
            ``metric="roc_auc"`` for these two. Defaults to None (hyperparameters only).
        objectives: The multi-objective form: a list of two or more objective names, at most
            one performance metric (:data:`METRIC_NAMES`, maximized) and fairness metrics
            (:data:`fairtune.fairness.METRICS` names or aliases; gaps minimized, the disparate
            impact ratio maximized), e.g. ``["accuracy", "demographic_parity"]``. A trial then
            returns their values in this order (fairness values also stored as user attributes
            ``"fairtune:<metric>"``); create the study with ``directions=objective.directions``,
            e.g. with :class:`fairtune.samplers.MTKBSampler`. ``limits`` may then be omitted
            (given, they still become constraints). Defaults to None (single objective:
            ``metric``).
        margin: Validate every trial against the limits tightened by ``margin`` and aim the
            mitigation there, while :meth:`evaluate` judges the limits themselves
            (:attr:`tuning_limits`; ``benchmarks/vs_mitigation.py``). Defaults to 0.
        pos_label: The favourable label (the outcome whose rates the fairness metrics
            compare, as in scikit-learn's scorers) when the labels are not 0/1 or booleans,
            e.g. ``"approved"``; the pipelines then predict 1 for it. Defaults to None: the
            labels must be 0/1 or booleans, and any other pair is an error naming them.
        budgets: Multi-fidelity search: increasing fractions (the last 1.0) of the training
            rows, or of ``resource``, that each trial is fitted on in turn, e.g. ``(1 / 9, 1 /
            3, 1.0)``; at each smaller budget the trial reports its validation metric (and its
            fairness, user attribute ``"fairtune:rungs"``) to the study's pruner, which may
            stop it. Only full-budget trials complete and get constraints. The row subsets are
            nested, stratified by label and group, the same for every trial. Defaults to None.
        resource: What ``budgets`` are fractions of: ``"n_samples"`` (the training rows) or an
            integer parameter of the model such as ``"n_estimators"``, as scikit-learn's
            ``HalvingRandomSearchCV(resource=...)``. Defaults to ``"n_samples"``.
        prune_unfair: Let the pruner stop a trial that breaks a limit at a smaller budget (it
            then reports its metric less 1). Defaults to False: the pruner sees the metric
            alone, since a gap measured on a few rows is noisy.
        tenant: The tenant whose data this objective scores, in a study that several tenants
            share (:class:`~fairtune.samplers.CollaborativeUCBSampler`), each with its own
            data. The setup is then stored and checked per tenant (study user attribute
            ``"fairtune:setup:<tenant>"``), :meth:`refit_best` picks among the tenant's trials,
            and :meth:`prepare` leaves the first trials to the sampler's startup rounds.
            Defaults to None: the study is this objective's alone.
        confidence: Deploy a model only with a certificate at this level, e.g. 0.95
            (:mod:`fairtune.tuning._certify`): a share of the tuning rows is kept from the
            search for a safety test, the search validates against the limits tightened by
            the width the test is predicted to need on those rows, and :meth:`refit_best`
            returns the certified model (``pipeline.certificate_``), or raises
            :class:`~fairtune.tuning.NotCertifiedError`. Defaults to None.
        safety_size: The share of the tuning rows kept for the safety test. Defaults to 0.5
            with ``confidence``.
        bound: The safety test of each pair of groups, with ``confidence``: ``"exact"`` (the
            default), ``"score"`` (asymptotic, narrower) or ``"hoeffding"`` (the widest).

    Raises:
        ValueError: On invalid arguments and on data a search cannot score correctly
            (:mod:`fairtune.tuning._data`): sensitive features with missing values or a single
            group, a group with too few validation rows, a ``pos_label`` with twins.

    Warns:
        UserWarning: When a limit cannot bind (every fairness metric lies in [0, 1], so e.g.
            ``"dsp<=2"`` holds for every model).

    A study remembers the objective's :attr:`setup`; another setup in the same study raises
    ``ValueError`` naming each differing argument (:mod:`fairtune.tuning._setup`).

    A model reading the sensitive columns of X refuses, at prediction, a value of them it did
    not see at fit (so does the threshold mitigation): one-hot encoding would read it as no group.

    Attributes:
        X, y, sensitive: All the rows.
        X_dev, y_dev, s_dev: The rows the search sees: all but the test split (and, with
            ``confidence``, but the safety rows).
        X_train, y_train, X_valid, y_valid, s_valid: The training and validation split of the
            tuning rows (None with ``cv``).
        X_test, y_test, s_test: The test split (None without ``test_size``).
        limits: The fairness limits (:class:`~fairtune.fairness.FairnessLimit`) :meth:`evaluate`
            judges; ``tuning_limits`` those the trials are validated against (``limits``
            tightened by ``margin`` and, with ``confidence``, by the bound's width).
    """

    def __init__(
        self,
        dataset: DatasetLike,
        model: str | Callable[[optuna.Trial], Any],
        *,
        limits: LimitsLike | None = None,
        metric: trial_path.Metric = "accuracy",
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
        confidence: float | None = None,
        safety_size: float | None = None,
        bound: str | None = None,
    ) -> None:
        check_validation(metric, validation_size, test_size, cv)
        self.tenant = checked_tenant(tenant)
        self.budgets = None if budgets is None else trial_path.checked_budgets(budgets)
        self.resource = trial_path.checked_resource(resource, self.budgets)
        self.prune_unfair = bool(prune_unfair)
        self.space = space_of(model)
        self.objectives, self.directions = parse_objectives(objectives, limits)
        self.limits = parse_limits(limits) if limits is not None else []
        self.margin = margin
        trial_path.warn_if_cannot_bind(self.limits, stacklevel=2)
        performance = [name for name in self.objectives if name in METRIC_NAMES]
        self.metric = performance[0] if performance else metric
        self.mitigation = checked_mitigation(mitigation, self.limits, self.metric,
                                             use_sensitive_feature=use_sensitive_feature)
        check_budgets_objectives(self.budgets, self.objectives, self.tenant)
        self.cv = None if cv is None else int(cv)
        self.validation_size = 0.3 if validation_size is None and cv is None else validation_size
        self.test_size = test_size
        self.random_state = random_state
        self.pos_label = pos_label
        self.use_sensitive_feature = use_sensitive_feature
        self.confidence, self.safety_size = check_confidence(confidence, safety_size, self.limits,
                                                             self.objectives)
        self.bound = check_bound(bound, self.confidence)
        self._rows = tuning_rows(
            dataset, pos_label=pos_label, drop_columns=drop_columns, stacklevel=3,
            use_sensitive_feature=use_sensitive_feature, test_size=test_size,
            validation_size=self.validation_size, cv=self.cv, random_state=random_state,
            limits=self.limits, margin=margin, confidence=self.confidence, bound=self.bound,
            budgets=self.budgets, resource=self.resource, safety_size=self.safety_size,
            correlation_remover="correlation_remover" in self.mitigation)
        self.tuning_limits, self.dataset_name = self._rows.limits, self._rows.name
        # A FairDataset's label column; its favourable label is read_table's `positive`.
        self._target = dataset.get("target_name") if isinstance(dataset, dict) else None
        self._named = {"pos_label": ("positive",)} if pos_label is None and isinstance(
            dataset, dict) else {}
        self.drop_columns, self.sensitive_name = self._rows.dropped, self._rows.sensitive_name
        self._sensitive_columns = self._rows.sensitive_columns
        # ThresholdOptimizer's thresholds are fitted on this fraction of the training rows,
        # held out from the model (see ThresholdClassifier.holdout).
        self._threshold_holdout = 0.0
        # A randomized mitigation's trial is scored by its expected predictions (the
        # probability of predicting 1 per validation row), not by one draw: under equalized
        # odds most rows are predicted at random, and one draw's noise in the accuracy and
        # the gaps is what a search over many trials would select on.
        self._score_expected = True
        self._recorded: set[tuple[int, int]] = set()  # studies whose setup it has checked
        check_resource(self.budgets, self.resource, self.default_params(), self.make_pipeline)
        check_complete_rows(self.space, self.X)

    # -- the rows (views of the data, see fairtune.tuning._data) ------------------------------

    X = property(lambda self: self._rows.X, doc="All the rows, as the model sees them.")
    y = property(lambda self: self._rows.y, doc="All the labels (1 = favourable).")
    sensitive = property(lambda self: self._rows.sensitive, doc="All the sensitive features.")
    X_dev = property(lambda self: self._rows.X_dev, doc="The tuning rows (no test split).")
    y_dev = property(lambda self: self._rows.y_dev)
    s_dev = property(lambda self: self._rows.s_dev)
    X_test = property(lambda self: self._rows.X_test, doc="The test split, or None.")
    y_test = property(lambda self: self._rows.y_test)
    s_test = property(lambda self: self._rows.s_test)

    def _part(self, which: int, frame: Any) -> Any:
        if not self._rows.single:
            return None
        return frame.iloc[self._rows.splits.folds[0][which]]

    X_train = property(lambda self: self._part(0, self.X_dev), doc="The training split, or None.")
    y_train = property(lambda self: self._part(0, self.y_dev))
    s_train = property(lambda self: self._part(0, self.s_dev))
    X_valid = property(lambda self: self._part(1, self.X_dev),
                       doc="The validation split, or None.")
    y_valid = property(lambda self: self._part(1, self.y_dev))
    s_valid = property(lambda self: self._part(1, self.s_dev))

    @property
    def data_fingerprint(self) -> str:
        """A digest of what the trials are scored on: the tuning rows (as the model sees
        them), their labels and groups, and the validation split or folds."""
        return self._rows.fingerprint

    @property
    def setup(self) -> dict[str, Any]:
        """What makes this objective's trial values comparable, as stored with a study (the
        study adds its pruner and tenants; see :mod:`fairtune.tuning._setup`).

        ``{"entrance": "FairObjective", "dataset": "german (sensitive: sex)", "model":
        "random_forest", "metric": "accuracy", "limits": ["demographic_parity<=0.05"], ...}``
        """
        return setup_path.objective_setup(
            self._rows, data_fingerprint, target=self._target, pos_label=self.pos_label,
            model=self.space.name, metric=self.metric, objectives=self.objectives,
            limits=self.limits, margin=self.margin, mitigation=self.mitigation, cv=self.cv,
            hidden=not self.use_sensitive_feature, validation_size=self.validation_size,
            test_size=self.test_size, random_state=self.random_state, budgets=self.budgets,
            resource=self.resource, prune_unfair=self.prune_unfair,
            confidence=self.confidence, safety_size=self.safety_size, bound=self.bound)

    def record_setup(self, study: optuna.Study, pruner: Any = None) -> None:
        """Store :attr:`setup` with ``study`` (with its pruner and tenants), or raise if the
        study holds another one.

        Args:
            study: The study.
            pruner: The pruner the study runs with. Defaults to None: ``study.pruner``.

        Raises:
            ValueError: If the study was tuned with another setup (the message names each
                difference), if ``budgets`` come without a pruner or a pruner without them,
                if the study's directions do not fit the objective, or if the study is
                shared by tenants and ``tenant`` is not one of them.
        """
        record = setup_path.study_record(self.setup, self.directions, study, pruner,
                                         trial_path.check_pruner)
        setup_path.check_setup(study, record, tenant=self.tenant, arguments=self._named)
        self._recorded.add(study_key(study))

    def check_study(self, study: optuna.Study, pruner: Any = None) -> None:
        """Raise as :meth:`record_setup` would, storing nothing, before a trial is created
        (:func:`fairtune.tenancy.optimize`): a refused run leaves the study as it was."""
        record = setup_path.study_record(self.setup, self.directions, study, pruner,
                                         trial_path.check_pruner)
        setup_path.check_stored(study, record, tenant=self.tenant, arguments=self._named)

    def needs_sensitive_features(self, params: dict[str, Any] | None = None) -> str | None:
        """How a pipeline of this objective reads the sensitive feature at prediction time:
        None if it does not, else how, e.g. ``"predict(X, sensitive_features=...)"``; a
        trial's ``params`` say which mitigation it used (``mitigation`` a list)."""
        return needs_sensitive_features(
            self._mitigation_of(params or {}), model_uses_them=self._model_sees_sensitive())

    def default_params(self) -> dict[str, Any] | None:
        """The parameters of the untuned model: the space's
        :attr:`~fairtune.tuning.Space.defaults` (the estimator library's, clipped into the
        space) and the (first) mitigation as set up without tuning, aimed at the bound; None
        when the space names no defaults (a callable ``model``)."""
        from fairtune.tuning.mitigation import default_mitigation_params

        if self.space.defaults is None:
            return None
        params = dict(self.space.defaults)
        if self.mitigation:
            params.update(default_mitigation_params(self.mitigation, self.tuning_limits[0]))
        return params

    def enqueue_defaults(self, study: optuna.Study) -> bool:
        """Make the untuned model (:meth:`default_params`) the study's next trial, so that the
        search keeps it unless it finds a more accurate fair model; not when the study already
        holds a completed, pruned, running or waiting trial of it. Returns whether it did."""
        from fairtune.tuning._study import enqueue_defaults

        return enqueue_defaults(study, self.default_params())

    def prepare(self, study: optuna.Study, *, sampler: str | None = None,
                seed: int | None = None, pruner: str | None = None) -> None:
        """Make ``study`` ready for this objective, as ``fairtune tune`` does before its trials
        (:func:`fairtune.tuning._study.prepare_study`): check the pruner against ``budgets``
        and the study's setup against this objective's (:meth:`record_setup`, storing it on
        the first run), give the study the pruner and the sampler asked for (seeded by
        ``seed`` plus the trials the study holds, so that a resume continues the random
        stream), fail the trials of dead workers, and enqueue the untuned model unless the
        study evaluated it (:meth:`enqueue_defaults`; not for a ``tenant``, whose shared
        study's first rounds are the sampler's).

        Args:
            study: The study to run this objective in.
            sampler: A sampler name, or None to keep the study's sampler. Defaults to None.
            seed: The sampler's seed. Defaults to None: ``random_state``, the seed of the
                splits, as the command line's ``--seed`` seeds both.
            pruner: A pruner name of :data:`fairtune.tuning.PRUNER_NAMES` for the study, set
                up for ``budgets`` (which it needs). Defaults to None: the study's pruner.
        """
        from fairtune.tuning._study import prepare_study

        prepare_study(study, check=lambda s, p: self.record_setup(s, p),
                      defaults=None if self.tenant is not None else self.default_params(),
                      budgets=self.budgets, sampler=sampler,
                      seed=self.random_state if seed is None else seed, pruner=pruner)

    def create_study(
        self,
        *,
        sampler: str | None = None,
        seed: int | None = None,
        storage: str | optuna.storages.BaseStorage | None = None,
        study_name: str | None = None,
        pruner: str | None = None,
    ) -> optuna.Study:
        """A study for this objective, prepared as ``fairtune tune`` prepares it.

        The same search as the command line with the same seed, which seeds the splits
        (``random_state``) and the sampler (``seed``, by default the same): the study has this
        objective's directions, its setup, the untuned model as the first trial and the
        sampler of ``fairtune tune --sampler`` (:meth:`prepare`). A stored study of that name
        is loaded and resumed.

        Example:
            >>> objective = FairObjective("german", "random_forest", limits="dsp<=0.05")
            >>> study = objective.create_study(seed=0)
            >>> study.optimize(objective, n_trials=3)
            >>> study.trials[0].params == objective.default_params()
            True

        Args:
            sampler: A sampler name of :data:`fairtune.samplers.SAMPLER_NAMES`. Defaults to
                None: ``"fairbo"``, or ``"mtkb"`` for the multi-objective form.
            seed: The sampler's seed. Defaults to None: ``random_state``. The command line's
                ``--seed`` is both: ``fairtune tune --seed 3`` is
                ``FairObjective(..., random_state=3).create_study()``.
            storage: An Optuna storage or its URL. Defaults to None (in memory).
            study_name: The study's name. Defaults to None (a new name; with ``storage``,
                give one to resume, or to run the same study from several workers).
            pruner: A pruner name for a multi-fidelity search (see ``budgets`` and
                :meth:`prepare`). Defaults to None; with ``budgets``, one must be given.
        """
        from fairtune.tuning._study import create_study

        study = create_study(directions=self.directions or ["maximize"], storage=storage,
                             study_name=study_name)
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

    def make_pipeline(self, trial: optuna.Trial | optuna.trial.FixedTrial) -> Any:
        """Preprocessing + the estimator the space builds for ``trial`` (+ its mitigation).

        Returns:
            A scikit-learn ``Pipeline`` (``"preprocess"``, with ``"decorrelate"`` for the
            correlation remover, and ``"model"``), or for ``"threshold"`` and ``"reduction"`` a
            :class:`~fairtune.tuning.ThresholdClassifier` or
            :class:`~fairtune.tuning.ReductionClassifier` around that pipeline, which is fitted
            with ``fit(X, y, sensitive_features=...)``.
        """
        return build_pipeline(
            self.X, self.space, trial, random_state=self.random_state, mitigation=self.mitigation,
            limit=self.tuning_limits[0] if self.tuning_limits else None,
            sensitive_columns=self._sensitive_columns,
            guard=self._model_sees_sensitive(), holdout=self._threshold_holdout)

    _fit = staticmethod(fit_pipeline)

    def _predict(
        self, pipeline: Any, X: pd.DataFrame, sensitive: Any, *, expected: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None]:
        return predict_pipeline(pipeline, X, sensitive, metric=self.metric, expected=expected)

    def __call__(self, trial: optuna.Trial) -> float:
        study = getattr(trial, "study", None)
        if study is not None and study_key(study) not in self._recorded:
            self.record_setup(study)
        if study is not None:  # the trial is its tenant's, scored on that tenant's data
            setup_path.check_tenant(study, {}, self.tenant, trial,
                         tenant_of(trial) or optimizing_tenant(study))
        rows = self._rows
        pipelines = Pipelines(lambda: self.make_pipeline(trial), rows, resource=self.resource,
                              fit=self._fit, predict=self._predict, expected=self._score_expected)
        try:
            scored = trial_path.run_trial(
                trial, pipelines, rows.splits, y01=rows.y_dev.to_numpy(),
                sensitive=rows.s_dev, metric=self.metric, limits=self.tuning_limits,
                budgets=self.budgets, prune_unfair=self.prune_unfair)
        finally:  # what the trial's fits and predictions took, pruned or not
            trial.set_user_attr(FIT_TIMES_KEY, pipelines.fit_times)
            trial.set_user_attr(SCORE_TIMES_KEY, pipelines.score_times)
        if self.mitigation:
            trial.set_user_attr(MITIGATION_USED_KEY, self._mitigation_of(trial.params))
        trial.set_user_attr(
            SENSITIVE_AT_PREDICTION_KEY, self.needs_sensitive_features(trial.params) or "no"
        )
        if not self.objectives:
            return scored.value
        values = []
        for name in self.objectives:
            if name in METRIC_NAMES:
                values.append(scored.value)
                continue
            value = trial_path.fairness_value(name, scored.y_true, scored.y_pred,
                                              scored.sensitive)
            trial.set_user_attr(PREFIX + name, value)
            values.append(value)
        return tuple(values)  # type: ignore[return-value]

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
            on: ``"tuning"`` (default) fits on the training and validation rows (or all the
                cross-validation rows), never the test split: more rows, but not the validated
                model, whose gap can differ (``benchmarks/fair_generalization.py``).
                ``"training"`` refits the validated model itself on the training split (same
                rows, same ``random_state``); it needs a validation split (not ``cv``).

        Raises:
            ValueError: If the study's trials were scored with another setup (other rows,
                labels, groups or splits, another ``limits``, ``margin`` or ``confidence``: the
                message of a resume, and nothing is stored), or are shared by tenants and
                ``tenant`` is None or not one of them, if it has no fair completed trial, if a
                multi-objective study has several Pareto-optimal trials and ``trial`` is None,
                if ``trial`` is not a completed trial of the study, or ``on`` is invalid (with
                ``confidence`` and no ``trial``: ``"training"``, which no certificate covers).
        """
        import optuna

        check_choice("on", on, ("tuning", "training"))
        if on == "training" and self.cv is not None:
            raise ValueError(
                f"`on='training'` needs a single validation split, but this objective uses "
                f"cv={self.cv}: every tuning row trained some fold's model."
            )
        self._check_trials(study)
        if self.confidence is not None and trial is None:
            if on == "training":  # a model no certificate covers, only when a trial is named
                raise ValueError("`on='training'` refits a model no certificate covers; with "
                                 "`confidence`, refit_best(study) returns the certified one "
                                 "(name a `trial` to refit it without a certificate).")
            return self._certified(study)
        best = chosen_trial(study, trial, tenant=self.tenant, limits=self.tuning_limits)
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
        from fairtune.fairness.metrics import check_confidence_level

        if confidence_level is not None:
            check_confidence_level(confidence_level)
        if self.X_test is None:
            raise ValueError(
                "`evaluate` needs a test split: create the FairObjective with test_size, e.g. "
                "test_size=0.2, but got test_size=None."
            )
        y_pred, y_score = self._predict(pipeline, self.X_test, self.s_test)
        names = [n for n in self.objectives if n not in METRIC_NAMES]
        report = trial_path.scores_of(
            self.metric, self.y_test, y_pred, y_score, self.s_test, fairness=names,
            limits=self.limits, confidence_level=confidence_level, random_state=self.random_state)
        if getattr(pipeline, "certificate_", None) is not None:  # a certified model's
            report["certificate"] = pipeline.certificate_.as_dict()
        return report

    def conclude(self, study: optuna.Study) -> Deployment:
        """What follows the search, as one call (``fairtune tune`` makes it too,
        :func:`fairtune.tuning._deployment.conclude`): with ``confidence`` the safety test,
        its certificate or refusal recorded (a refusal is the returned record's answer, not an
        exception); the study's model to deploy; with a test split, that model's scores on it
        recorded with the study for every later report (:func:`fairtune.report.report`).

        Returns:
            The study's :class:`~fairtune.tuning._deployment.Deployment`: ``trial`` to deploy
            (None after a refusal, or without a fair trial) and ``why``.

        Raises:
            ValueError: As :meth:`refit_best`, before anything runs or is stored; for the
                multi-objective form, which has no single model to deploy.
        """
        from fairtune.tuning._deployment import TEST_CONFIDENCE, ScoresOnTest, conclude

        if self.directions:
            raise ValueError("`conclude` needs the single-objective form: pick one of "
                             "study.best_trials and refit it with refit_best(study, trial=...).")
        self._check_trials(study)

        def scored(fit: Any, model: Any) -> ScoresOnTest:
            return ScoresOnTest.of(fit, self.evaluate(model, confidence_level=TEST_CONFIDENCE),
                                   len(self.X_test), self.limits)

        def test_fits(trial: Any, certified: Any) -> list[ScoresOnTest]:
            if certified is not None:
                return [scored("certified", certified)]
            return [scored(on, self.refit_best(study, trial=trial, on=on))
                    for on in (("tuning", "training") if self.cv is None else ("tuning",))]

        certify = None if self.confidence is None else lambda: self._certified(study)
        return conclude(study, self.tenant, certify=certify,
                        test_fits=None if self.X_test is None else test_fits)

    def _certified(self, study: optuna.Study) -> Pipeline:
        """The safety test (:func:`fairtune.tuning._certify.certify`) over this objective's
        trial path: the certified model, ``pipeline.certificate_``, or NotCertifiedError."""
        from fairtune.tuning._certify import certify

        rows = self._rows
        X_safe, y_safe, confidence = rows.X_safe, rows.y_safe, self.confidence
        # Called with a confidence only (conclude), whose safety rows are held out.
        assert X_safe is not None and y_safe is not None and confidence is not None

        def fit_predict(trial: Any) -> tuple[Any, Any]:
            model = self.refit_best(study, trial=trial)  # on the search rows
            return model, self._predict(model, X_safe, rows.s_safe, expected=True)[0]

        model, _ = certify(study, fit_predict, self.limits, confidence,
                           y_safe.to_numpy(), rows.s_safe, self.tenant, self.bound or "exact")
        return model

    def _check_trials(self, study: optuna.Study) -> None:
        """Refuse a study whose trials were scored with another setup (or are another
        tenant's), as a resume does (the study's pruner and sampler do not matter to a refit)."""
        setup_path.check_stored(study, self.setup, tenant=self.tenant, arguments=self._named)
