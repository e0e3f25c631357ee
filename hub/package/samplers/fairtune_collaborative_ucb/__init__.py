"""OptunaHub package of fairtune's CollaborativeUCBSampler: the sampler lives in fairtune (pip install fairtune);
this package exposes it to ``optunahub.load_module``."""

from fairtune.samplers import CollaborativeUCBSampler

__all__ = ["CollaborativeUCBSampler"]
