"""fairtune's Optuna samplers."""

from fairtune.samplers.fairbo import FairBOSampler

__all__ = ["FairBOSampler"]
