"""Tuning real models under fairness limits: search spaces and the FairObjective."""

from fairtune.tuning.objective import METRIC_NAMES, VALIDATION_ERROR_KEY, FairObjective
from fairtune.tuning.spaces import SPACES, Space, get_space, register_space

__all__ = [
    "METRIC_NAMES",
    "SPACES",
    "VALIDATION_ERROR_KEY",
    "FairObjective",
    "Space",
    "get_space",
    "register_space",
]
