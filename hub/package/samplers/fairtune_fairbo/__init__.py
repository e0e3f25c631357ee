"""OptunaHub package of fairtune's FairBOSampler: the sampler lives in fairtune (pip install fairtune);
this package exposes it to ``optunahub.load_module``."""

from fairtune.samplers import FairBOSampler

__all__ = ["FairBOSampler"]
