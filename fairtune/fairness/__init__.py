"""Fairness metrics, fairness limits as Optuna constraints, and study callbacks."""

from fairtune.fairness.callbacks import FairnessCallback, TrialRecord
from fairtune.fairness.constraints import (
    USER_ATTR_PREFIX,
    FairnessLimit,
    fairness_values,
    is_feasible,
    parse_limits,
    set_fairness_constraints,
)
from fairtune.fairness.metrics import (
    METRICS,
    MetricSpec,
    demographic_parity_difference,
    disparate_impact_ratio,
    equal_opportunity_difference,
    equalized_odds_difference,
    false_positive_rate_difference,
    get_metric,
    group_rates,
)

__all__ = [
    "METRICS",
    "USER_ATTR_PREFIX",
    "FairnessCallback",
    "FairnessLimit",
    "MetricSpec",
    "TrialRecord",
    "demographic_parity_difference",
    "disparate_impact_ratio",
    "equal_opportunity_difference",
    "equalized_odds_difference",
    "fairness_values",
    "false_positive_rate_difference",
    "get_metric",
    "group_rates",
    "is_feasible",
    "parse_limits",
    "set_fairness_constraints",
]
