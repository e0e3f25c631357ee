"""fairtune: fairness-constrained and fair multi-tenant Bayesian optimization for Optuna.

Heavy modules (torch, the samplers) are imported lazily, on first attribute access, so that
``import fairtune`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
"""The installed version of fairtune."""

# public name -> module that defines it (imported on first access)
_LAZY_ATTRS = {
    "FairBOSampler": "fairtune.samplers",
    "CollaborativeUCBSampler": "fairtune.samplers",
    "CGPSampler": "fairtune.samplers",
    "MTKBSampler": "fairtune.samplers",
    "FairSearchCV": "fairtune.tuning",
    "set_num_threads": "fairtune._threads",
    "get_num_threads": "fairtune._threads",
}
_SUBMODULES = {
    "collaboration",
    "datasets",
    "fairness",
    "report",
    "samplers",
    "tenancy",
    "tuning",
    "visualization",
}

__all__ = ["__version__", *sorted(_LAZY_ATTRS), *sorted(_SUBMODULES)]


def __getattr__(name: str) -> Any:
    if name in _LAZY_ATTRS:
        return getattr(importlib.import_module(_LAZY_ATTRS[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"fairtune.{name}")
    raise AttributeError(f"module 'fairtune' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
