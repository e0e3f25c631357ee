"""fairtune's Optuna samplers."""

from __future__ import annotations

from typing import Any

from fairtune.samplers.cgp import CGPSampler
from fairtune.samplers.collaborative import CollaborativeUCBSampler
from fairtune.samplers.fairbo import FairBOSampler
from fairtune.samplers.mtkb import MTKBSampler

__all__ = [
    "SAMPLER_NAMES", "CGPSampler", "CollaborativeUCBSampler", "FairBOSampler", "MTKBSampler",
    "make_sampler",
]

SAMPLER_NAMES: tuple[str, ...] = ("fairbo", "gp", "tpe", "random", "mtkb")
"""The sampler names of :func:`make_sampler` (and of ``fairtune tune --sampler``)."""


def make_sampler(name: str, *, seed: int) -> Any:
    """The sampler ``fairtune tune --sampler NAME --seed SEED`` tunes with.

    ``"fairbo"`` (:class:`FairBOSampler`), ``"gp"`` (Optuna's ``GPSampler``), ``"tpe"``
    (Optuna's ``TPESampler``), ``"random"``, or ``"mtkb"`` (:class:`MTKBSampler`, for several
    objectives). The random startup draws of all but TPE depend on the seed and the trial
    number only (:class:`~fairtune.samplers._base.TrialSeededRandomSampler`), so that workers
    started with one seed on one storage draw different random trials; TPE's startup sampler
    cannot be replaced, and its workers may repeat each other's first random trials.

    Raises:
        ValueError: For an unknown name (the message lists :data:`SAMPLER_NAMES`).
    """
    import optuna

    from fairtune.samplers._base import TrialSeededRandomSampler

    if name not in SAMPLER_NAMES:
        raise ValueError(f"`sampler` must be one of {list(SAMPLER_NAMES)}, but got {name!r}.")
    startup = TrialSeededRandomSampler(seed)
    if name == "fairbo":
        return FairBOSampler(seed=seed, independent_sampler=startup)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed, independent_sampler=startup)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "mtkb":
        return MTKBSampler(seed=seed, independent_sampler=startup)
    return startup
