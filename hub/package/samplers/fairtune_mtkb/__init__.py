"""OptunaHub package of fairtune's MTKBSampler: the sampler lives in fairtune (pip install fairtune);
this package exposes it to ``optunahub.load_module``."""

from fairtune.samplers import MTKBSampler

__all__ = ["MTKBSampler"]
