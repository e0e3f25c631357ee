"""Tuning real models under fairness limits: search spaces and the FairObjective."""

from fairtune.tuning.objective import (
    METRIC_NAMES,
    POSITIVE_RATE_KEY,
    POSITIVE_RATES_KEY,
    VALIDATION_ERROR_KEY,
    FairObjective,
    predicts_one_class,
)
from fairtune.tuning.spaces import SPACES, Space, get_space, register_space

__all__ = [
    "METRIC_NAMES",
    "POSITIVE_RATES_KEY",
    "POSITIVE_RATE_KEY",
    "SPACES",
    "VALIDATION_ERROR_KEY",
    "FairObjective",
    "Space",
    "get_space",
    "predicts_one_class",
    "register_space",
]
