"""fairtune's Optuna samplers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import optuna

from fairtune._names import arg, check_choice, got
from fairtune.collaboration import Board
from fairtune.samplers._base import TrialSeededRandomSampler
from fairtune.samplers.cgp import CGPSampler
from fairtune.samplers.collaborative import CollaborativeUCBSampler
from fairtune.samplers.fairbo import FairBOSampler
from fairtune.samplers.mtkb import MTKBSampler

__all__ = [
    "SAMPLER_NAMES", "CGPSampler", "CollaborativeUCBSampler", "FairBOSampler", "MTKBSampler",
    "make_sampler", "team_sampler",
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
    check_choice("sampler", name, SAMPLER_NAMES)
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


def team_sampler(
    *, tenant: str | None = None, tenants: Sequence[str] | None = None,
    agent: str | None = None, board: str | None = None, board_name: str = "fairtune",
    storage: str | None = None, seed: int = 0, alone: bool = True,
) -> Any:
    """The sampler a team's process joins a shared search with, or None for a study of one.

    ``tenant`` and ``tenants``: one tenant of a study the tenants share in ``storage``
    (:class:`CollaborativeUCBSampler`, every process listing the tenants in the same order).
    ``agent`` and ``board``: one agent with a study of its own, sharing designs (never data)
    on the board ``board_name`` in the storage ``board`` (:class:`CGPSampler`). ``alone`` is
    False when the caller also chose a sampler of its own (both cannot hold).

    Raises:
        ValueError: For a tenant without the tenants (or an agent without a board), both
            kinds at once, a tenant not among the tenants, a shared study without a storage,
            or another sampler asked for beside.
    """
    if (tenant is None) != (tenants is None) or (agent is None) != (board is None):
        raise ValueError(f"{arg('tenant')} goes with {arg('tenants')}, and {arg('agent')} with "
                         f"{arg('board')}.")
    if tenant is None and agent is None:
        return None
    if (tenant is not None and agent is not None) or not alone:
        raise ValueError(f"{arg('tenant')} and {arg('agent')} each bring their own sampler: "
                         f"give one of them, and no {arg('sampler')}.")
    if tenant is not None:
        if tenant not in list(tenants or ()):
            raise ValueError(f"{got('tenant', tenant)} must be one of {got('tenants', tenants)}.")
        if not storage:
            raise ValueError(f"{got('tenant', tenant)} joins a study shared with the other "
                             f"tenants, which needs {arg('storage')}, but got no "
                             f"{arg('storage')}.")
        return CollaborativeUCBSampler(tenants=list(tenants or ()), seed=seed)
    assert board is not None  # an agent comes with a board (checked first)
    return CGPSampler(board=Board(board, name=board_name), agent=agent, seed=seed)
