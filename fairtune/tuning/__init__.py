"""Tuning real models: search spaces, fairlearn's mitigations, the FairObjective for fairness
limits and FairSearchCV (the same search as a scikit-learn estimator)."""

from fairtune._threads import (
    get_training_threads,
    limit_training_threads,
    set_training_threads,
    training_threads,
)
from fairtune.tuning._certify import Certificate, NotCertifiedError
from fairtune.tuning._trial import PRUNER_NAMES, make_pruner
from fairtune.tuning.mitigation import (
    MITIGATION_PARAMS,
    MITIGATIONS,
    MitigationSpec,
    ReductionClassifier,
    ThresholdClassifier,
)
from fairtune.tuning.objective import (
    METRIC_NAMES,
    POSITIVE_RATE_KEY,
    POSITIVE_RATES_KEY,
    VALIDATION_ERROR_KEY,
    FairObjective,
    predicts_one_class,
)
from fairtune.tuning.search import FairSearchCV
from fairtune.tuning.spaces import SPACES, Space, get_space, register_space

__all__ = [
    "Certificate",
    "NotCertifiedError",
    "METRIC_NAMES",
    "MITIGATIONS",
    "MITIGATION_PARAMS",
    "POSITIVE_RATES_KEY",
    "PRUNER_NAMES",
    "POSITIVE_RATE_KEY",
    "SPACES",
    "ThresholdClassifier",
    "VALIDATION_ERROR_KEY",
    "FairObjective",
    "FairSearchCV",
    "MitigationSpec",
    "ReductionClassifier",
    "Space",
    "get_space",
    "get_training_threads",
    "limit_training_threads",
    "make_pruner",
    "predicts_one_class",
    "register_space",
    "set_training_threads",
    "training_threads",
]
