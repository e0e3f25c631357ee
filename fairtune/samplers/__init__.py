"""fairtune's Optuna samplers."""

from fairtune.samplers.collaborative import CollaborativeUCBSampler
from fairtune.samplers.fairbo import FairBOSampler
from fairtune.samplers.mtkb import MTKBSampler

__all__ = ["CollaborativeUCBSampler", "FairBOSampler", "MTKBSampler"]
