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
from fairtune.fairness.welfare import (
    TenantFairnessCallback,
    fair_cumulative_regret,
    g2sf_weights,
    generalized_gini,
    gini_inequality,
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
    "TenantFairnessCallback",
    "TrialRecord",
    "demographic_parity_difference",
    "disparate_impact_ratio",
    "equal_opportunity_difference",
    "equalized_odds_difference",
    "fair_cumulative_regret",
    "fairness_values",
    "false_positive_rate_difference",
    "g2sf_weights",
    "generalized_gini",
    "get_metric",
    "gini_inequality",
    "group_rates",
    "is_feasible",
    "parse_limits",
    "set_fairness_constraints",
]
