"""OptunaHub package of fairtune's CGPSampler: the sampler lives in fairtune (pip install fairtune);
this package exposes it to ``optunahub.load_module``."""

from fairtune.samplers import CGPSampler
from fairtune.collaboration import Board

__all__ = ["CGPSampler", "Board"]
