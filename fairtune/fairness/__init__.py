"""Fairness for fairtune: group metrics, fairness limits as Optuna 5 constraints, callbacks.

- :mod:`~fairtune.fairness.metrics`: group-fairness metrics over fairlearn (DSP, DEO, DFP,
  equalized odds, disparate impact), any number of groups, intersectional features, and
  :func:`metric_interval`, a metric's bootstrap interval.
- :mod:`~fairtune.fairness.constraints`: limits such as ``"demographic_parity<=0.05"`` and
  :func:`set_fairness_constraints`, which records them as Optuna constraints.
- :mod:`~fairtune.fairness.bounds`: :func:`metric_bound`, a high-confidence bound of a metric
  on the population, which certified models are tested with.
- :mod:`~fairtune.fairness.callbacks`: :class:`FairnessCallback` for ``study.optimize``.
- :mod:`~fairtune.fairness.welfare`: fairness between tenants (G2SF weights, generalized Gini).
"""

from fairtune.fairness.bounds import metric_bound
from fairtune.fairness.callbacks import FairnessCallback, TrialRecord
from fairtune.fairness.constraints import (
    FAIR_KEY,
    LIMITS_KEY,
    USER_ATTR_PREFIX,
    FairnessLimit,
    LimitsLike,
    best_fair_trial,
    cannot_bind,
    fairness_values,
    is_fair,
    is_feasible,
    parse_limits,
    set_fairness_constraints,
    study_limits,
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
    metric_interval,
)
from fairtune.fairness.welfare import (
    TenantFairnessCallback,
    fair_cumulative_regret,
    g2sf_weights,
    generalized_gini,
    gini_inequality,
)

__all__ = [
    # group-fairness metrics
    "demographic_parity_difference", "equal_opportunity_difference",
    "false_positive_rate_difference", "equalized_odds_difference", "disparate_impact_ratio",
    "group_rates", "metric_interval", "metric_bound", "METRICS", "MetricSpec", "get_metric",
    # fairness limits as Optuna constraints
    "set_fairness_constraints", "FairnessLimit", "LimitsLike", "parse_limits", "cannot_bind",
    "study_limits", "fairness_values", "is_fair", "is_feasible", "best_fair_trial",
    "LIMITS_KEY", "FAIR_KEY", "USER_ATTR_PREFIX",
    # callbacks
    "FairnessCallback", "TenantFairnessCallback", "TrialRecord",
    # fairness between tenants
    "g2sf_weights", "generalized_gini", "gini_inequality", "fair_cumulative_regret",
]
