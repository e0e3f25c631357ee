"""FairSearchCV's argument checks: each refused at once, naming the argument and what was
given (the data's own checks are :mod:`fairtune.tuning._data`'s)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np

from fairtune._names import check_choice
from fairtune.fairness.constraints import FairnessLimit
from fairtune.tuning import _trial as trial_path
from fairtune.tuning._arguments import check_metric_scores
from fairtune.tuning._estimators import _n_rows
from fairtune.tuning.mitigation import MITIGATION_KEY, MITIGATION_PARAMS, parse_mitigation


def check_options(*, scoring: str, n_trials: int | None, timeout: float | None, n_jobs: int,
                  refit: bool, error_score: float | str, callbacks: Sequence[Any] | None,
                  study: Any, sampler: Any) -> None:
    """FairSearchCV's arguments that need no data, each refused naming it."""
    check_choice("scoring", scoring, trial_path.METRIC_NAMES)
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
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral) or n_jobs == 0:
        raise ValueError(
            f"`n_jobs` must be a non-zero integer (-1: one per CPU), but got n_jobs={n_jobs!r}."
        )
    if not isinstance(refit, bool):
        raise ValueError(f"`refit` must be True or False, but got refit={refit!r}.")
    if not (error_score == "raise" or (
        isinstance(error_score, Real) and not isinstance(error_score, bool)
    )):
        raise ValueError(
            f"`error_score` must be a number or 'raise', but got error_score={error_score!r}."
        )
    if callbacks is not None and (
        isinstance(callbacks, str) or not isinstance(callbacks, Sequence)
        or not all(callable(c) for c in callbacks)
    ):
        raise ValueError(
            "`callbacks` must be None or a list of callables f(study, frozen_trial), but got "
            f"callbacks={callbacks!r}."
        )
    if study is not None and sampler is not None:
        raise ValueError(
            "`sampler` and `study` cannot both be given: the study samples with its own "
            f"sampler, but got sampler={sampler!r} and study={study!r}."
        )


def check_mitigation(mitigation: Any, scoring: str, fit_params: dict[str, Any]) -> list[str]:
    """The names of ``mitigation`` (FairSearchCV's), refused with ``scoring="roc_auc"`` or
    with parameters for ``fit``."""
    names = parse_mitigation(mitigation)
    if "correlation_remover" in names:
        raise ValueError(
            "`mitigation` must be 'threshold', 'reduction' or a list of them here: fairlearn's "
            "CorrelationRemover is a step of a pipeline, so put it in `estimator` (and tune "
            f"its alpha in `param_distributions`), but got mitigation={mitigation!r}."
        )
    check_metric_scores(names, mitigation, "scoring", scoring)
    if names and fit_params:
        raise ValueError(
            f"`mitigation` {mitigation!r} fits fairlearn's mitigation with X, y and "
            "sensitive_features only, so fit must not get other parameters, but got "
            f"{sorted(fit_params)}."
        )
    return names


def checked_space(given: Any, estimator: Any, mitigation: list[str]) -> Any:
    """The fairtune :class:`~fairtune.tuning.Space` named by ``param_distributions`` (given),
    whose estimator replaces ``estimator`` or its final step, or the validated dict of
    distributions of parameters of ``estimator``."""
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    from fairtune.tuning.spaces import SPACES

    if isinstance(given, str):
        if given not in SPACES:
            raise ValueError(
                "`param_distributions` must be a dict of Optuna distributions or one of "
                f"{sorted(SPACES)}, but got param_distributions={given!r}."
            )
        check_space_class(estimator, SPACES[given])
        return SPACES[given]
    if not isinstance(given, Mapping):
        raise ValueError(
            "`param_distributions` must be a dict {parameter name: Optuna distribution} or "
            f"a fairtune space name, but got {type(given).__name__}: {given!r}."
        )
    valid = estimator.get_params(deep=True)
    reserved = {MITIGATION_KEY, *MITIGATION_PARAMS} if mitigation else set()
    for name, distribution in given.items():
        if not isinstance(name, str) or name not in valid:
            raise ValueError(
                f"`param_distributions` names a parameter that {type(estimator).__name__} "
                f"does not have: {name!r} (valid names are those of "
                f"estimator.get_params(), e.g. {sorted(valid)[:6]})."
            )
        if name in reserved:
            raise ValueError(
                f"`param_distributions` must not name {name!r} with a `mitigation`: the "
                f"mitigation's own settings {sorted(reserved)} use that name."
            )
        if not isinstance(distribution, (FloatDistribution, IntDistribution,
                                         CategoricalDistribution)):
            raise ValueError(
                f"`param_distributions[{name!r}]` must be an Optuna distribution "
                "(optuna.distributions.FloatDistribution, IntDistribution or "
                f"CategoricalDistribution), but got {distribution!r} "
                f"({type(distribution).__name__})."
            )
    return dict(given)


def check_sensitive(sensitive_features: Any, n: int) -> Any:
    """The group label of each row (:func:`fairtune._validation.sensitive_groups`)."""
    if sensitive_features is None:
        raise ValueError("`sensitive_features` must be given to FairSearchCV.fit (each row's "
                         "group), but got sensitive_features=None.")
    from fairtune._validation import sensitive_groups

    if (given := _n_rows(sensitive_features)) != n:
        raise ValueError(
            f"`sensitive_features` must have one entry per row of X ({n}), but got {given}.")
    return sensitive_groups(sensitive_features, warn_twins=True, stacklevel=4)


def check_same_rows(X: Any, y: Any, sensitive_features: Any) -> None:
    """Refuse pandas labels or groups whose index differs from a DataFrame X's (a shuffled
    index would give rows another person's label or group without a word)."""
    import pandas as pd

    if not isinstance(X, pd.DataFrame):
        return
    for name, value in (("y", y), ("sensitive_features", sensitive_features)):
        if isinstance(value, (pd.Series, pd.DataFrame)) and not value.index.equals(X.index):
            raise ValueError(
                f"`{name}` must have the index of X: FairSearchCV matches rows by position, "
                f"as scikit-learn does, but got the index {value.index[:3].tolist()}... "
                f"against X's {X.index[:3].tolist()}..."
            )


def seeds(state: Any) -> tuple[int | None, int]:
    """(sampler seed, seed of the models) of FairSearchCV's ``random_state``: the integer, one
    drawn from a RandomState, or (None, 0) for None."""
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


def check_space_class(estimator: Any, space: Any) -> None:
    """A fairtune space replaces the final step: it must be of the class the space builds."""
    import optuna
    from sklearn.pipeline import Pipeline

    # A throwaway trial: the class is known only once the space has built an estimator.
    model = space.build(optuna.create_study(sampler=optuna.samplers.RandomSampler(0)).ask())
    final = estimator.steps[-1][1] if isinstance(estimator, Pipeline) else estimator
    if type(final) is not type(model):
        raise ValueError(
            f"`param_distributions` {space.name!r} builds a {type(model).__name__} that "
            f"replaces the estimator's final step, which must then be a "
            f"{type(model).__name__}, but got {type(final).__name__}."
        )


def check_scores_for_roc_auc(estimator: Any, scoring: str, mitigation: list[str]) -> None:
    if scoring == "roc_auc" and not mitigation and not (
        hasattr(estimator, "predict_proba") or hasattr(estimator, "decision_function")
    ):
        raise ValueError(
            "`scoring` 'roc_auc' needs the estimator's predict_proba or decision_function, "
            f"but {type(estimator).__name__} has neither."
        )


def binary_target(y: Any) -> np.ndarray:
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
        from fairtune._validation import twins_note

        classes = np.unique(y_array)
        raise ValueError(
            "Only binary classification is supported: `y` must have two classes (the "
            "fairness metrics compare the rates of the favourable outcome), but got "
            f"{len(classes)} class{'es' if len(classes) != 1 else ''} "
            f"{classes[:10].tolist()} (a {target} target)."
            + twins_note(y_array, classes.tolist(), "classes")
        )
    return y_array


def cv_folds(cv: Any, X: Any, y: np.ndarray, split_params: dict[str, Any], *,
             kept: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (train, test) folds of ``cv``; the test folds must not overlap (each row gets
    at most one out-of-fold prediction). Folds given as positions of the rows given to fit
    are mapped to the rows ``kept`` for the search (with ``confidence``, the others are the
    safety rows, which no fold may use)."""
    from sklearn.model_selection import check_cv

    if kept is not None and cv is not None and not isinstance(cv, Integral) and not hasattr(
            cv, "split"):
        position = np.full(int(np.max(kept, initial=-1)) + 1, -1)
        position[kept] = np.arange(len(kept))

        def mapped(rows: Any) -> np.ndarray:
            rows = np.asarray(rows, dtype=int)
            inside = rows[rows < len(position)]
            return position[inside][position[inside] >= 0]

        cv = [(mapped(train), mapped(test)) for train, test in cv]
    folds = [(np.asarray(train), np.asarray(test))
             for train, test in check_cv(cv, y, classifier=True).split(X, y, **split_params)]
    tested = np.zeros(len(y), dtype=int)
    for _, test in folds:
        tested[test] += 1
    if not folds or tested.max() > 1:
        raise ValueError(
            "`cv` must give test folds that do not overlap (each row gets at most one "
            f"out-of-fold prediction), but got cv={cv!r}."
        )
    return folds


def untuned_params(estimator: Any, space_or_distributions: Any, mitigation: list[str],
                   limits: list[FairnessLimit]) -> dict[str, Any] | None:
    """The trial parameters of the configuration a user gets without tuning: a space's
    defaults, or the estimator's own values (clipped and rounded into their distributions),
    with the mitigation's default settings; None when a value cannot be placed."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    from fairtune.tuning.mitigation import default_mitigation_params

    if isinstance(space_or_distributions, dict):
        current = estimator.get_params(deep=True)
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
            params[name] = (round(value) if isinstance(distribution, IntDistribution)
                            else float(value))
    else:
        if space_or_distributions.defaults is None:
            return None
        params = dict(space_or_distributions.defaults)
    if mitigation:
        params.update(default_mitigation_params(mitigation, limits[0]))
    return params

