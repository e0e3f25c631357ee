"""Group-fairness metrics for binary classifiers, as thin wrappers over fairlearn.

Every metric has the signature ``(y_true, y_pred, *, sensitive_features, sample_weight=None)``
and compares a per-group rate across the groups of ``sensitive_features`` (any number of groups;
a DataFrame with several columns defines intersectional groups, one group per combination that
occurs in the data):

==============================  =====================================  =====================
metric                          per-group rate (fairlearn)             aggregate
==============================  =====================================  =====================
demographic_parity_difference   selection rate P(yhat=1 | g)           max - min
equal_opportunity_difference    true positive rate P(yhat=1 | y=1, g)  max - min
false_positive_rate_difference  false positive rate P(yhat=1 | y=0, g) max - min
equalized_odds_difference       TPR and FPR                            max of the two gaps
disparate_impact_ratio          selection rate                         min / max
==============================  =====================================  =====================

For a binary sensitive feature the three differences are the DSP, DEO and DFP of Perrone et al.
(2021), "Fair Bayesian Optimization", section 4. The table :data:`METRICS` is the single source
of truth for names, aliases (``dsp``, ``deo``, ``dfp``, ``eod``, ``di``), the fairlearn rates a
metric uses, how they are aggregated and whether a limit bounds the metric from above or below.

The group rates come from :class:`fairlearn.metrics.MetricFrame`; this module only validates the
inputs and aggregates. Two deliberate departures from fairlearn, both so that a fairness
constraint never rests on a meaningless number:

- A rate that is undefined for some group raises a ``ValueError`` naming the group, where
  fairlearn silently reports 0 (the TPR of a group without positive samples, the FPR of a group
  without negative samples) or NaN (a group whose sample weights are all zero).
- :func:`disparate_impact_ratio` is 1 when no group is selected at all (every group is treated
  alike, as the difference 0 says), where fairlearn's ``demographic_parity_ratio`` is NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from fairtune._names import arg, check_fraction
from fairtune._validation import sensitive_groups

__all__ = [
    "METRICS",
    "MetricSpec",
    "demographic_parity_difference",
    "disparate_impact_ratio",
    "equal_opportunity_difference",
    "equalized_odds_difference",
    "expected_metric",
    "false_positive_rate_difference",
    "get_metric",
    "group_rates",
    "metric_interval",
]

RateName = Literal["selection_rate", "true_positive_rate", "false_positive_rate"]

# Error messages (tests assert on them); those about sensitive features are fairtune._validation's.
_MSG_NOT_1D = "`{name}` must be one-dimensional, but got an array of shape {shape}."
_MSG_LENGTH = (
    "`{name}` must have the same length as `y_true`, but got len(y_true)={n} and "
    "len({name})={m}."
)
_MSG_NOT_BINARY = ("`{name}` must contain only 0/1 (or boolean) labels, but got the values "
                   "{values}.")
_MSG_NAN = "`{name}` must not contain NaN or missing values, but got {count} of them."
_MSG_EMPTY = "`y_true` must not be empty, but got 0 samples."
_MSG_WEIGHTS = (
    "`sample_weight` must be non-negative and finite, but got {count} bad value(s), e.g. {value}."
)
_MSG_UNDEFINED_RATE = (
    "The {rate} of group {group!r} is undefined: the group has no {what}. Use a metric that "
    "does not need it (e.g. demographic_parity) or merge groups."
)
_MSG_UNKNOWN_RATE = "`rates` must be among {valid}, but got {unknown}."
_MSG_UNKNOWN_METRIC = ("{metric} must be one of {valid} (or an alias in {aliases}), but got "
                       "{name!r}.")


def _as_1d(values: Any, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise ValueError(_MSG_NOT_1D.format(name=name, shape=array.shape))
    return array


def _check_binary(values: Any, name: str) -> np.ndarray:
    """Return 0/1 labels as ints; accept booleans and 0/1 ints or floats, nothing else."""
    array = _as_1d(values, name)
    if array.dtype == bool:
        return array.astype(int)
    missing = pd.isna(array)
    if missing.any():
        raise ValueError(_MSG_NAN.format(name=name, count=int(missing.sum())))
    try:
        # Strings such as "0"/"1" or "yes"/"no" would otherwise convert or fail unpredictably.
        if array.dtype.kind in "USO" and any(isinstance(v, (str, bytes)) for v in array.tolist()):
            raise TypeError
        numeric = array.astype(float)
    except (TypeError, ValueError):
        values_ = sorted({repr(v) for v in array.tolist()})[:5]
        raise ValueError(_MSG_NOT_BINARY.format(name=name, values=values_)) from None
    bad = ~np.isin(numeric, (0.0, 1.0))
    if bad.any():
        raise ValueError(_MSG_NOT_BINARY.format(name=name, values=np.unique(numeric[bad])[:5]))
    return numeric.astype(int)


def _check_weights(sample_weight: Any, n: int) -> np.ndarray | None:
    if sample_weight is None:
        return None
    weights = _as_1d(sample_weight, "sample_weight")
    if len(weights) != n:
        raise ValueError(_MSG_LENGTH.format(name="sample_weight", n=n, m=len(weights)))
    try:
        weights = weights.astype(float)
    except (TypeError, ValueError):
        raise ValueError(
            f"`sample_weight` must be numeric, but got dtype {weights.dtype}.") from None
    n_nan = int(np.isnan(weights).sum())
    if n_nan:
        raise ValueError(_MSG_NAN.format(name="sample_weight", count=n_nan))
    bad = ~np.isfinite(weights) | (weights < 0)
    if bad.any():
        raise ValueError(_MSG_WEIGHTS.format(count=int(bad.sum()), value=weights[bad][0]))
    return weights


def _validate(
    y_true: Any, y_pred: Any, sensitive_features: Any, sample_weight: Any,
    pred: Literal["y_pred", "probabilities"] = "y_pred",  # 0/1, or probabilities of 1
) -> tuple[np.ndarray, np.ndarray, pd.Series, np.ndarray | None]:
    y_true_ = _check_binary(y_true, "y_true")
    n = len(y_true_)
    if n == 0:
        raise ValueError(_MSG_EMPTY)
    y_pred_ = _as_1d(y_pred, pred)
    if len(y_pred_) != n:
        raise ValueError(_MSG_LENGTH.format(name=pred, n=n, m=len(y_pred_)))
    if pred == "y_pred":
        y_pred_ = _check_binary(y_pred_, pred)
    else:
        y_pred_ = np.asarray(y_pred_, dtype=float)  # no copy of floats
        bad = ~((y_pred_ >= 0.0) & (y_pred_ <= 1.0))  # NaN too
        if bad.any():
            raise ValueError(f"`probabilities` must be in [0, 1], but got {int(bad.sum())} "
                             f"value(s) outside, e.g. {y_pred_[bad][0]}.")
    # One group label per sample (tuples for intersectional groups); no warning about the
    # values here (a metric is computed for every trial): the entrances warn.
    groups = sensitive_groups(sensitive_features, n)
    return y_true_, y_pred_, groups, _check_weights(sample_weight, n)


# For each rate: the label it conditions on (None: none) and what a group needs for it to exist.
RATE_CONDITION: dict[str, tuple[int | None, str]] = {
    "selection_rate": (None, "samples with positive weight"),
    "true_positive_rate": (1, "positive samples (y_true=1) with positive weight"),
    "false_positive_rate": (0, "negative samples (y_true=0) with positive weight"),
}


def _check_rates_defined(
    rates: tuple[str, ...], y_true: np.ndarray, groups: pd.Series, weights: np.ndarray | None
) -> None:
    codes, uniques = pd.factorize(groups)
    for rate in rates:
        label, what = RATE_CONDITION[rate]
        counted = np.ones(len(y_true), dtype=bool) if label is None else y_true == label
        if weights is not None:
            counted &= weights > 0
        counts = np.bincount(codes[counted], minlength=len(uniques))
        if (counts == 0).any():
            group = uniques[int(np.argmin(counts))]
            raise ValueError(
                _MSG_UNDEFINED_RATE.format(rate=rate.replace("_", " "), group=group, what=what)
            )


def group_rates(
    y_true: Any,
    y_pred: Any,
    *,
    sensitive_features: Any,
    rates: tuple[RateName, ...] = ("selection_rate",),
    sample_weight: Any = None,
) -> pd.DataFrame:
    """Per-group rates, one row per group and one column per rate.

    Args:
        y_true: True 0/1 labels, shape (n,).
        y_pred: Predicted 0/1 labels, shape (n,).
        sensitive_features: Group membership: a 1-d array-like, or a DataFrame (or 2-d array)
            whose columns together define intersectional groups.
        rates: Names among ``"selection_rate"``, ``"true_positive_rate"``,
            ``"false_positive_rate"``. Defaults to ``("selection_rate",)``.
        sample_weight: Optional non-negative sample weights, shape (n,). Defaults to None.

    Returns:
        fairlearn's ``MetricFrame.by_group``: a DataFrame indexed by group (a MultiIndex for
        intersectional groups).

    Raises:
        ValueError: On inputs of different lengths, labels that are not 0/1, NaN, negative
            weights, a single group, or a rate that is undefined for some group (e.g. the TPR of
            a group without positive samples); the message names the argument or the group.
    """
    import fairlearn.metrics  # lazily: it pulls in scikit-learn and more

    if not rates or any(r not in RATE_CONDITION for r in rates):
        raise ValueError(_MSG_UNKNOWN_RATE.format(valid=sorted(RATE_CONDITION),
                                                  unknown=list(rates)))
    y_true_, y_pred_, groups, weights = _validate(y_true, y_pred, sensitive_features,
                                                  sample_weight)
    _check_rates_defined(rates, y_true_, groups, weights)
    sensitive: Any = groups
    if isinstance(groups.iloc[0], tuple):
        # Intersectional groups: MetricFrame takes one named column per feature.
        sensitive = pd.DataFrame(groups.tolist(), columns=[
            f"sensitive_feature_{i}" for i in range(len(groups.iloc[0]))])
    frame = fairlearn.metrics.MetricFrame(
        metrics={r: getattr(fairlearn.metrics, r) for r in rates},
        y_true=y_true_,
        y_pred=y_pred_,
        sensitive_features=sensitive,
        sample_params=None if weights is None else {r: {"sample_weight": weights} for r in rates},
    )
    return frame.by_group


@dataclass(frozen=True)
class MetricSpec:
    """How one fairness metric is computed from fairlearn's per-group rates.

    Attributes:
        name: Canonical name used in limits, constraints and user attributes.
        function: The public metric function.
        rates: The fairlearn per-group rates it uses.
        aggregate: ``"difference"`` (max - min over groups, the largest gap over ``rates``;
            0 is fair) or ``"ratio"`` (min / max over groups; 1 is fair).
        sense: ``"upper"`` if a limit bounds the metric from above (differences), ``"lower"`` if
            from below (ratios).
        aliases: Other accepted names, e.g. the paper's acronyms.
        description: One line for error messages, reports and plot labels.
    """

    name: str
    function: Callable[..., float]
    rates: tuple[RateName, ...]
    aggregate: Literal["difference", "ratio"]
    sense: Literal["upper", "lower"]
    aliases: tuple[str, ...]
    description: str


def _aggregate(rates: np.ndarray, how: Literal["difference", "ratio"]) -> np.ndarray:
    """The metric from per-group rates of shape ``(..., groups, rates)``, one value per
    leading index: the largest max - min gap over the rates, or the smallest min / max ratio."""
    high = rates.max(axis=-2)
    low = rates.min(axis=-2)
    if how == "difference":
        return (high - low).max(axis=-1)
    # Nobody selected in any group: every group is treated alike, so the ratio is 1.
    ratios = np.where(high > 0, low / np.where(high > 0, high, 1.0), 1.0)
    return ratios.min(axis=-1)


def _compute(
    name: str, y_true: Any, y_pred: Any, sensitive_features: Any, sample_weight: Any
) -> float:
    spec = METRICS[name]
    by_group = group_rates(y_true, y_pred, sensitive_features=sensitive_features,
                           rates=spec.rates, sample_weight=sample_weight)
    return float(_aggregate(by_group.to_numpy(dtype=float), spec.aggregate))


def demographic_parity_difference(
    y_true: Any, y_pred: Any, *, sensitive_features: Any, sample_weight: Any = None
) -> float:
    """Largest gap in selection rate between groups (DSP), in [0, 1].

    ``DSP = max_g P(yhat=1 | g) - min_g P(yhat=1 | g)``; 0 means every group is selected at the
    same rate. ``y_true`` is validated but does not enter the value.

    Args:
        y_true: True 0/1 labels, shape (n,).
        y_pred: Predicted 0/1 labels, shape (n,).
        sensitive_features: Group of each sample: a 1-d array-like, or a DataFrame whose columns
            define intersectional groups.
        sample_weight: Optional non-negative weights, shape (n,). Defaults to None.

    Example:
        >>> demographic_parity_difference(
        ...     [0, 1, 0, 1], [1, 1, 0, 1], sensitive_features=["a", "a", "b", "b"]
        ... )
        0.5
    """
    return _compute("demographic_parity", y_true, y_pred, sensitive_features, sample_weight)


def equal_opportunity_difference(
    y_true: Any, y_pred: Any, *, sensitive_features: Any, sample_weight: Any = None
) -> float:
    """Largest gap in true positive rate between groups (DEO), in [0, 1].

    ``DEO = max_g P(yhat=1 | y=1, g) - min_g P(yhat=1 | y=1, g)``; the arguments are those of
    :func:`demographic_parity_difference`. A group without a positive sample (whose TPR is
    undefined) is a ValueError.
    """
    return _compute("equal_opportunity", y_true, y_pred, sensitive_features, sample_weight)


def false_positive_rate_difference(
    y_true: Any, y_pred: Any, *, sensitive_features: Any, sample_weight: Any = None
) -> float:
    """Largest gap in false positive rate between groups (DFP), in [0, 1].

    ``DFP = max_g P(yhat=1 | y=0, g) - min_g P(yhat=1 | y=0, g)``; the arguments are those of
    :func:`demographic_parity_difference`. A group without a negative sample (whose FPR is
    undefined) is a ValueError.
    """
    return _compute("false_positive_rate", y_true, y_pred, sensitive_features, sample_weight)


def equalized_odds_difference(
    y_true: Any, y_pred: Any, *, sensitive_features: Any, sample_weight: Any = None
) -> float:
    """The larger of the TPR gap and the FPR gap between groups (equalized odds), in [0, 1].

    ``EOD = max(DEO, DFP)``; 0 means equal error rates in every group. The arguments are those
    of :func:`demographic_parity_difference`. A group without a positive or a negative sample
    is a ValueError.
    """
    return _compute("equalized_odds", y_true, y_pred, sensitive_features, sample_weight)


def disparate_impact_ratio(
    y_true: Any, y_pred: Any, *, sensitive_features: Any, sample_weight: Any = None
) -> float:
    """Smallest over largest group selection rate (disparate impact; "four-fifths rule").

    ``DI = min_g P(yhat=1 | g) / max_g P(yhat=1 | g)``, in [0, 1]; 1 means equal selection
    rates, and the US EEOC four-fifths rule flags values below 0.8. If no group is ever
    selected, DI is 1. The arguments are those of :func:`demographic_parity_difference`.
    """
    return _compute("disparate_impact", y_true, y_pred, sensitive_features, sample_weight)


#: The spec table of the metrics, canonical name -> :class:`MetricSpec`.
METRICS: dict[str, MetricSpec] = {spec.name: spec for spec in (
    MetricSpec("demographic_parity", demographic_parity_difference, ("selection_rate",),
               "difference", "upper", ("dsp", "dp", "demographic_parity_difference"),
               "gap in selection rate between groups"),
    MetricSpec("equal_opportunity", equal_opportunity_difference, ("true_positive_rate",),
               "difference", "upper", ("deo", "tpr", "equal_opportunity_difference"),
               "gap in true positive rate between groups"),
    MetricSpec("false_positive_rate", false_positive_rate_difference, ("false_positive_rate",),
               "difference", "upper", ("dfp", "fpr", "false_positive_rate_difference"),
               "gap in false positive rate between groups"),
    MetricSpec("equalized_odds", equalized_odds_difference,
               ("true_positive_rate", "false_positive_rate"), "difference", "upper",
               ("eod", "equalized_odds_difference"),
               "larger of the TPR and FPR gaps between groups"),
    MetricSpec("disparate_impact", disparate_impact_ratio, ("selection_rate",), "ratio",
               "lower", ("di", "disparate_impact_ratio"), "smallest over largest selection rate"),
)}
_ALIASES: dict[str, str] = {
    alias: spec.name for spec in METRICS.values() for alias in (spec.name, *spec.aliases)
}


def get_metric(name: str) -> MetricSpec:
    """Look up a metric by canonical name or alias.

    Matching ignores case and surrounding spaces, and reads ``-`` and inner spaces as ``_``
    (``"Equalized-Odds"`` is ``"equalized_odds"``).

    Args:
        name: A canonical name of :data:`METRICS` or one of its aliases.

    Returns:
        The metric's :class:`MetricSpec`.

    Raises:
        ValueError: For an unknown name; the message lists the valid ones.
    """
    key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
    if key not in _ALIASES:
        raise ValueError(_MSG_UNKNOWN_METRIC.format(
            metric=arg("metric"), valid=sorted(METRICS),
            aliases=sorted(set(_ALIASES) - set(METRICS)), name=name))
    return METRICS[_ALIASES[key]]


def check_confidence_level(confidence_level: Any) -> None:
    check_fraction("confidence_level", confidence_level)


def _group_rates(
    rates: Sequence[str], y_true: np.ndarray, y_pred: np.ndarray, groups: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Each group's ``rates`` (shape (groups, rates)) and the number of rows each is a
    proportion of (all the group's rows, or those of one true label)."""
    codes, uniques = pd.factorize(groups)
    shape = (len(uniques), len(rates))
    sample, sizes = np.empty(shape), np.empty(shape, dtype=np.int64)
    for column, rate in enumerate(rates):
        label = RATE_CONDITION[rate][0]
        rows = slice(None) if label is None else y_true == label
        sizes[:, column] = np.bincount(codes[rows], minlength=len(uniques))
        sample[:, column] = np.bincount(codes[rows], weights=y_pred[rows],
                                        minlength=len(uniques)) / sizes[:, column]
    return sample, sizes


def expected_metric(
    name: str, y_true: Any, probabilities: Any, *, sensitive_features: Any
) -> float:
    """Fairness metric ``name`` of a randomized classifier that predicts 1 for row i with
    probability ``probabilities[i]`` (fairlearn's ThresholdOptimizer and reductions predict
    so): its expected value over the draws, exactly.

    Each group's expected rate is the mean of the probabilities over its rows (those of one
    true label for the TPR and FPR); the metric aggregates these rates as for 0/1 predictions,
    for which it equals :data:`METRICS`' function. Per-group sums over the rows as they are:
    no copy of the rows per outcome, so a million rows cost a few arrays of a million numbers.

    Raises:
        ValueError: As the metrics do (bad labels, lengths, groups, undefined rates), or on
            probabilities outside [0, 1] or missing.
    """
    spec = METRICS[name]
    y_true_, p, groups, _ = _validate(y_true, probabilities, sensitive_features, None,
                                      "probabilities")
    _check_rates_defined(spec.rates, y_true_, groups, None)
    rates, _ = _group_rates(spec.rates, y_true_, p, groups)
    return float(_aggregate(rates, spec.aggregate))


def metric_interval(
    metric: str,
    y_true: Any,
    y_pred: Any,
    *,
    sensitive_features: Any,
    confidence_level: float = 0.95,
    n_resamples: int = 2000,
    random_state: Any = None,
) -> tuple[float, float]:
    """A bootstrap confidence interval of a fairness metric: what a sample of this size can
    tell about the metric on new data.

    A gap measured on a few hundred rows is uncertain by about as much as a typical limit:
    "meets ``demographic_parity<=0.05`` on the test split" is resolved only when the interval
    lies on one side of 0.05. Each group's rate is resampled as a binomial proportion of its
    own rows; ``c``, the ``confidence_level`` quantile of the largest change of a pairwise
    difference of rates, gives ``[max(0, gap - c), gap + c]`` (so a gap of 0 is inside when
    the sample cannot tell it from 0); a ratio the same on the logarithms of the rates, and
    ``[0, 1]`` when no row is selected. The coverage is ``confidence_level`` for two groups
    and one rate, higher with more groups or both rates of equalized odds.

    Args:
        metric: A name or alias of :data:`METRICS`, e.g. ``"demographic_parity"``.
        y_true: True 0/1 labels, shape (n,).
        y_pred: Predicted 0/1 labels, shape (n,).
        sensitive_features: Group of each sample (see :func:`demographic_parity_difference`).
        confidence_level: The interval's coverage, in (0, 1). Defaults to 0.95.
        n_resamples: The number of bootstrap samples, at least 100. Defaults to 2000.
        random_state: Seed or :class:`numpy.random.Generator` of the resampling. Defaults to
            None (fresh entropy).

    Returns:
        ``(low, high)``, the interval's bounds.

    Raises:
        ValueError: For an unknown metric, a bad ``confidence_level`` or ``n_resamples``.

    Example:
        >>> import numpy as np
        >>> y_true = np.array([0, 1] * 100)
        >>> y_pred = np.array([0, 1, 1, 1] * 50)
        >>> groups = np.array(["a"] * 100 + ["b"] * 100)
        >>> low, high = metric_interval("demographic_parity", y_true, y_pred,
        ...                             sensitive_features=groups, random_state=0)
        >>> bool(low < 0.05 < high)  # 100 rows a group cannot tell whether a 0.05 limit holds
        True
    """
    spec = get_metric(metric)
    check_confidence_level(confidence_level)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) \
            or n_resamples < 100:
        raise ValueError("`n_resamples` must be an integer of at least 100, but got "
                         f"n_resamples={n_resamples!r}.")
    y_true_, y_pred_, groups, _ = _validate(y_true, y_pred, sensitive_features, None)
    _check_rates_defined(spec.rates, y_true_, groups, None)
    sample, sizes = _group_rates(spec.rates, y_true_, y_pred_, groups)
    rng = np.random.default_rng(random_state)
    resampled = rng.binomial(sizes, sample, size=(int(n_resamples), *sample.shape)) / sizes
    value = float(_aggregate(sample, spec.aggregate))
    if spec.aggregate == "difference":
        change = _aggregate(resampled - sample, "difference")
        c = float(np.quantile(change, confidence_level))
        low, high = max(0.0, value - c), min(1.0, value + c)
    else:
        # Half a row keeps the logarithm of a rate of 0 finite.
        floor = 0.5 / sizes
        logs = np.log(np.maximum(sample, floor))
        change = _aggregate(np.log(np.maximum(resampled, floor)) - logs, "difference")
        c = float(np.quantile(change, confidence_level))
        spread = float(_aggregate(logs, "difference"))
        low, high = float(np.exp(-(spread + c))), float(np.exp(-max(0.0, spread - c)))
        if not sample.max(axis=0).min() > 0:
            # No row selected: the ratio is 1 on these rows, but on new data each rate is
            # only known to be small, and a ratio of small rates can be anything (the bound
            # of fairtune.fairness.bounds.metric_bound is 0 alike).
            low = 0.0
    low, high = min(low, value), max(high, value)
    return float(low), float(high)
