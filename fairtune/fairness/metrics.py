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
(2021), "Fair Bayesian Optimization", section 4.

The group rates come from :class:`fairlearn.metrics.MetricFrame`; this module only validates the
inputs (so that a wrong call fails loudly instead of producing a silent NaN) and aggregates.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

__all__ = [
    "METRICS",
    "MetricSpec",
    "demographic_parity_difference",
    "disparate_impact_ratio",
    "equal_opportunity_difference",
    "equalized_odds_difference",
    "false_positive_rate_difference",
    "get_metric",
    "group_rates",
]

# Error messages (tests assert on them).
_MSG_LENGTH = (
    "`{name}` must have the same length as `y_true`, but got len(y_true)={n} and "
    "len({name})={m}."
)
_MSG_NOT_BINARY = (
    "`{name}` must contain only 0/1 (or boolean) labels, but got the values {values}."
)
_MSG_NAN = "`{name}` must not contain NaN or missing values, but got {count} of them."
_MSG_SINGLE_GROUP = (
    "`sensitive_features` must define at least two groups to compare, but got a single group "
    "{group!r}."
)
_MSG_EMPTY = "`y_true` must not be empty, but got 0 samples."
_MSG_WEIGHTS = "`sample_weight` must be non-negative and finite, but got min={value}."
_MSG_UNDEFINED_RATE = (
    "The {rate} of group {group!r} is undefined: the group has no samples with y_true={label}. "
    "Use a metric that does not condition on the label (e.g. demographic_parity) or merge "
    "groups."
)
_MSG_UNKNOWN_METRIC = "`metric` must be one of {valid} (or an alias in {aliases}), but got {name!r}."


def _as_1d(values: Any, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise ValueError(f"`{name}` must be one-dimensional, but got shape {array.shape}.")
    return array


def _check_binary(values: Any, name: str) -> np.ndarray:
    array = _as_1d(values, name)
    if array.dtype == bool:
        return array.astype(int)
    missing = pd.isna(array)
    if missing.any():
        raise ValueError(_MSG_NAN.format(name=name, count=int(missing.sum())))
    try:
        numeric = array.astype(float)
    except (TypeError, ValueError):
        raise ValueError(
            _MSG_NOT_BINARY.format(name=name, values=sorted(map(repr, set(array.tolist())))[:5])
        ) from None
    bad = ~np.isin(numeric, (0.0, 1.0))
    if bad.any():
        raise ValueError(_MSG_NOT_BINARY.format(name=name, values=np.unique(numeric[bad])[:5]))
    return numeric.astype(int)


def _check_sensitive(sensitive_features: Any, n: int) -> pd.Series:
    """Validate the sensitive features and return one group label per sample."""
    if isinstance(sensitive_features, pd.DataFrame):
        frame = sensitive_features
    else:
        array = np.asarray(sensitive_features, dtype=object)
        if array.ndim == 1:
            frame = pd.DataFrame({"sensitive": array})
        elif array.ndim == 2:
            frame = pd.DataFrame(array)
        else:
            raise ValueError(
                "`sensitive_features` must be 1-d or 2-d, but got shape "
                f"{array.shape}."
            )
    if len(frame) != n:
        raise ValueError(_MSG_LENGTH.format(name="sensitive_features", n=n, m=len(frame)))
    if frame.shape[1] == 0:
        raise ValueError("`sensitive_features` must have at least one column, but got none.")
    missing = frame.isna().to_numpy().sum()
    if missing:
        raise ValueError(_MSG_NAN.format(name="sensitive_features", count=int(missing)))
    if frame.shape[1] == 1:
        groups = pd.Series(frame.iloc[:, 0].to_numpy(), name="group")
    else:
        # Intersectional groups: one label per combination that occurs.
        groups = pd.Series(
            [tuple(row) for row in frame.itertuples(index=False, name=None)], name="group"
        )
    unique = pd.unique(groups)
    if len(unique) < 2:
        raise ValueError(_MSG_SINGLE_GROUP.format(group=unique[0]))
    return groups


def _validate(
    y_true: Any, y_pred: Any, sensitive_features: Any, sample_weight: Any
) -> tuple[np.ndarray, np.ndarray, pd.Series, np.ndarray | None]:
    y_true_ = _check_binary(y_true, "y_true")
    n = len(y_true_)
    if n == 0:
        raise ValueError(_MSG_EMPTY)
    y_pred_ = _as_1d(y_pred, "y_pred")
    if len(y_pred_) != n:
        raise ValueError(_MSG_LENGTH.format(name="y_pred", n=n, m=len(y_pred_)))
    y_pred_ = _check_binary(y_pred_, "y_pred")
    groups = _check_sensitive(sensitive_features, n)
    weights = None
    if sample_weight is not None:
        weights = _as_1d(sample_weight, "sample_weight")
        if len(weights) != n:
            raise ValueError(_MSG_LENGTH.format(name="sample_weight", n=n, m=len(weights)))
        weights = weights.astype(float)
        if np.isnan(weights).any():
            raise ValueError(
                _MSG_NAN.format(name="sample_weight", count=int(np.isnan(weights).sum()))
            )
        if not np.all(np.isfinite(weights)) or weights.min() < 0:
            raise ValueError(_MSG_WEIGHTS.format(value=weights.min()))
    return y_true_, y_pred_, groups, weights


# fairlearn is imported lazily: it pulls in scikit-learn and plotting helpers.
def _rate_functions() -> dict[str, Callable[..., float]]:
    from fairlearn.metrics import false_positive_rate, selection_rate, true_positive_rate

    return {
        "selection_rate": selection_rate,
        "true_positive_rate": true_positive_rate,
        "false_positive_rate": false_positive_rate,
    }


# The label a rate conditions on (None: no conditioning); used to report undefined rates.
_CONDITION: dict[str, int | None] = {
    "selection_rate": None,
    "true_positive_rate": 1,
    "false_positive_rate": 0,
}


def group_rates(
    y_true: Any,
    y_pred: Any,
    *,
    sensitive_features: Any,
    rates: tuple[str, ...] = ("selection_rate",),
    sample_weight: Any = None,
) -> pd.DataFrame:
    """Per-group rates, one row per group and one column per rate.

    Args:
        y_true: True 0/1 labels.
        y_pred: Predicted 0/1 labels.
        sensitive_features: Group membership: a 1-d array-like, or a DataFrame whose columns
            together define intersectional groups.
        rates: Names among ``"selection_rate"``, ``"true_positive_rate"``,
            ``"false_positive_rate"``.
        sample_weight: Optional non-negative sample weights.

    Returns:
        A DataFrame indexed by group (fairlearn's ``MetricFrame.by_group``).

    Raises:
        ValueError: On inputs of different lengths, labels that are not 0/1, NaN, a single
            group, or a rate that is undefined for some group (e.g. the TPR of a group without
            positive samples).
    """
    from fairlearn.metrics import MetricFrame

    functions = _rate_functions()
    unknown = [r for r in rates if r not in functions]
    if unknown:
        raise ValueError(f"`rates` must be among {sorted(functions)}, but got {unknown}.")
    y_true_, y_pred_, groups, weights = _validate(y_true, y_pred, sensitive_features, sample_weight)
    codes, uniques = pd.factorize(groups)
    for rate in rates:
        label = _CONDITION[rate]
        if label is None:
            continue
        has_label = y_true_ == label
        if weights is not None:
            has_label &= weights > 0
        counts = np.bincount(codes[has_label], minlength=len(uniques))
        if (counts == 0).any():
            group = uniques[int(np.argmin(counts))]
            raise ValueError(
                _MSG_UNDEFINED_RATE.format(rate=rate.replace("_", " "), group=group, label=label)
            )
    params = {} if weights is None else {r: {"sample_weight": weights} for r in rates}
    if isinstance(groups.iloc[0], tuple):
        # Intersectional groups: MetricFrame wants one named column per feature.
        sensitive: Any = pd.DataFrame(
            groups.tolist(), columns=[f"sensitive_feature_{i}" for i in range(len(groups.iloc[0]))]
        )
    else:
        sensitive = groups
    frame = MetricFrame(
        metrics={r: functions[r] for r in rates},
        y_true=y_true_,
        y_pred=y_pred_,
        sensitive_features=sensitive,
        sample_params=params or None,
    )
    return frame.by_group


@dataclass(frozen=True)
class MetricSpec:
    """How one fairness metric is computed from per-group rates.

    Attributes:
        name: Canonical name used in limits, constraints and user attributes.
        function: The public metric function.
        rates: The fairlearn per-group rates it uses.
        aggregate: ``"difference"`` (max - min, 0 is fair) or ``"ratio"`` (min / max, 1 is fair).
        sense: ``"upper"`` if a limit bounds the metric from above (differences), ``"lower"`` if
            from below (ratios).
        aliases: Short names accepted in limit strings.
        description: One line for error messages and reports.
    """

    name: str
    function: Callable[..., float]
    rates: tuple[str, ...]
    aggregate: Literal["difference", "ratio"]
    sense: Literal["upper", "lower"]
    aliases: tuple[str, ...]
    description: str


def _aggregate(by_group: pd.DataFrame, how: Literal["difference", "ratio"]) -> float:
    if how == "difference":
        return float((by_group.max() - by_group.min()).max())
    high = by_group.max()
    low = by_group.min()
    # Nobody selected in any group: every group is treated alike, so the ratio is 1.
    ratios = np.where(high > 0, low / np.where(high > 0, high, 1.0), 1.0)
    return float(np.min(ratios))


def _metric(spec_name: str) -> Callable[..., float]:
    def compute(
        y_true: Any, y_pred: Any, *, sensitive_features: Any, sample_weight: Any = None
    ) -> float:
        spec = METRICS[spec_name]
        by_group = group_rates(
            y_true,
            y_pred,
            sensitive_features=sensitive_features,
            rates=spec.rates,
            sample_weight=sample_weight,
        )
        value = _aggregate(by_group, spec.aggregate)
        if math.isnan(value):  # pragma: no cover - guarded by group_rates' checks
            raise ValueError(f"{spec_name} is undefined for these inputs.")
        return value

    return compute


_demographic_parity = _metric("demographic_parity")
_equal_opportunity = _metric("equal_opportunity")
_false_positive_rate = _metric("false_positive_rate")
_equalized_odds = _metric("equalized_odds")
_disparate_impact = _metric("disparate_impact")


def demographic_parity_difference(
    y_true: Any, y_pred: Any, *, sensitive_features: Any, sample_weight: Any = None
) -> float:
    """Largest gap in selection rate P(yhat = 1 | group) between groups (DSP).

    ``max_g P(yhat=1 | g) - min_g P(yhat=1 | g)``; 0 means every group is selected at the same
    rate. ``y_true`` is validated but does not enter the value.

    Args:
        y_true: True 0/1 labels, shape (n,).
        y_pred: Predicted 0/1 labels, shape (n,).
        sensitive_features: Group of each sample: 1-d array-like, or a DataFrame whose columns
            define intersectional groups.
        sample_weight: Optional non-negative weights, shape (n,). Defaults to None.

    Returns:
        The difference, in [0, 1].

    Example:
        >>> demographic_parity_difference([0, 1, 0, 1], [1, 1, 0, 1], sensitive_features=list("aabb"))
        0.5
    """
    return _demographic_parity(
        y_true, y_pred, sensitive_features=sensitive_features, sample_weight=sample_weight
    )


def equal_opportunity_difference(
    y_true: Any, y_pred: Any, *, sensitive_features: Any, sample_weight: Any = None
) -> float:
    """Largest gap in true positive rate P(yhat = 1 | y = 1, group) between groups (DEO).

    Args:
        y_true: True 0/1 labels, shape (n,).
        y_pred: Predicted 0/1 labels, shape (n,).
        sensitive_features: Group of each sample (see :func:`demographic_parity_difference`).
        sample_weight: Optional non-negative weights. Defaults to None.

    Returns:
        The difference, in [0, 1].

    Raises:
        ValueError: If some group has no positive sample (its TPR is undefined).
    """
    return _equal_opportunity(
        y_true, y_pred, sensitive_features=sensitive_features, sample_weight=sample_weight
    )


def false_positive_rate_difference(
    y_true: Any, y_pred: Any, *, sensitive_features: Any, sample_weight: Any = None
) -> float:
    """Largest gap in false positive rate P(yhat = 1 | y = 0, group) between groups (DFP).

    Args:
        y_true: True 0/1 labels, shape (n,).
        y_pred: Predicted 0/1 labels, shape (n,).
        sensitive_features: Group of each sample (see :func:`demographic_parity_difference`).
        sample_weight: Optional non-negative weights. Defaults to None.

    Returns:
        The difference, in [0, 1].

    Raises:
        ValueError: If some group has no negative sample (its FPR is undefined).
    """
    return _false_positive_rate(
        y_true, y_pred, sensitive_features=sensitive_features, sample_weight=sample_weight
    )


def equalized_odds_difference(
    y_true: Any, y_pred: Any, *, sensitive_features: Any, sample_weight: Any = None
) -> float:
    """The larger of the TPR gap and the FPR gap between groups (equalized odds).

    Args:
        y_true: True 0/1 labels, shape (n,).
        y_pred: Predicted 0/1 labels, shape (n,).
        sensitive_features: Group of each sample (see :func:`demographic_parity_difference`).
        sample_weight: Optional non-negative weights. Defaults to None.

    Returns:
        ``max(equal_opportunity_difference, false_positive_rate_difference)``, in [0, 1].
    """
    return _equalized_odds(
        y_true, y_pred, sensitive_features=sensitive_features, sample_weight=sample_weight
    )


def disparate_impact_ratio(
    y_true: Any, y_pred: Any, *, sensitive_features: Any, sample_weight: Any = None
) -> float:
    """Smallest over largest group selection rate (disparate impact; "four-fifths rule").

    ``min_g P(yhat=1 | g) / max_g P(yhat=1 | g)``; 1 means equal selection rates, and the
    US EEOC four-fifths rule flags values below 0.8. If no group is ever selected the ratio is 1.

    Args:
        y_true: True 0/1 labels, shape (n,).
        y_pred: Predicted 0/1 labels, shape (n,).
        sensitive_features: Group of each sample (see :func:`demographic_parity_difference`).
        sample_weight: Optional non-negative weights. Defaults to None.

    Returns:
        The ratio, in [0, 1].
    """
    return _disparate_impact(
        y_true, y_pred, sensitive_features=sensitive_features, sample_weight=sample_weight
    )


# One spec table: the single source of truth for names, aliases and bound senses.
METRICS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        MetricSpec(
            "demographic_parity", demographic_parity_difference, ("selection_rate",),
            "difference", "upper", ("dsp", "demographic_parity_difference", "dp"),
            "gap in selection rate between groups",
        ),
        MetricSpec(
            "equal_opportunity", equal_opportunity_difference, ("true_positive_rate",),
            "difference", "upper", ("deo", "equal_opportunity_difference", "tpr"),
            "gap in true positive rate between groups",
        ),
        MetricSpec(
            "false_positive_rate", false_positive_rate_difference, ("false_positive_rate",),
            "difference", "upper", ("dfp", "false_positive_rate_difference", "fpr"),
            "gap in false positive rate between groups",
        ),
        MetricSpec(
            "equalized_odds", equalized_odds_difference,
            ("true_positive_rate", "false_positive_rate"),
            "difference", "upper", ("eod", "equalized_odds_difference"),
            "larger of the TPR and FPR gaps between groups",
        ),
        MetricSpec(
            "disparate_impact", disparate_impact_ratio, ("selection_rate",),
            "ratio", "lower", ("di", "disparate_impact_ratio"),
            "smallest over largest selection rate",
        ),
    )
}
_ALIASES: dict[str, str] = {
    alias: spec.name for spec in METRICS.values() for alias in (spec.name, *spec.aliases)
}


def get_metric(name: str) -> MetricSpec:
    """Look up a metric by canonical name or alias (case-insensitive, ``-``/space as ``_``).

    Raises:
        ValueError: For an unknown name; the message lists the valid ones.
    """
    key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
    if key not in _ALIASES:
        raise ValueError(
            _MSG_UNKNOWN_METRIC.format(
                valid=sorted(METRICS),
                aliases=sorted(set(_ALIASES) - set(METRICS)),
                name=name,
            )
        )
    return METRICS[_ALIASES[key]]
