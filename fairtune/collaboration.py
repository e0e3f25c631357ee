"""The board: where collaborating agents meet, sharing designs and never data.

A :class:`Board` is a dedicated Optuna study (named ``"fairtune-board:<name>"``) in any Optuna
storage: an RDB URL (PostgreSQL, MySQL, SQLite), a Journal file, or a storage object (an
``InMemoryStorage`` for one-process simulations). It holds no trial. Everything lives in the
study's system attributes under namespaced keys (long values in chunks, see
:mod:`fairtune._storage`)::

    fairtune:board:seed                    the shared seed (groups, collaborative Latin hypercube)
    fairtune:board:agent:<agent>           the agent's search space (parameter names and
                                           distributions, so that a mismatch is caught)
    fairtune:board:post:<agent>:<round>    {"design": params, "lcb": float, "kappa": float}

A post is D + 2 numbers: agent n's LCB maximizer x+ in round t, its LCB value
mu(x+) - eta sigma(x+) and kappa = max_x mu(x), in the *maximized* sign (values of a minimized
objective are negated). No objective value, no trial, no parameter of an evaluated trial is ever
written here: an agent's study may live in a storage the others cannot read.

Groups (Chen et al. 2025, section 4.4.2): in round t the registered agents, sorted by name, are
permuted by a generator seeded with (shared seed, t) and split into ceil(N / N_max) groups of
near-equal size (at most N_max), so every agent computes the same partition without a
coordinator.

Collaborative Latin hypercube (section 4.4.4): the first designs of all agents together form a
Latin hypercube of N * n0 points, and each agent's n0 designs form one on their own (a sliced
Latin hypercube, Qian 2012, "Sliced Latin hypercube designs"). Per parameter (so that it can be
drawn one parameter at a time, as Optuna's independent sampling does), with the [0, 1] axis cut
into n0 coarse and N * n0 fine cells: agent k's i-th design takes coarse cell pi_k(i) (a
permutation per agent) and, inside it, the fine cell that a permutation of the agents per coarse
cell gives agent k; the point is uniform inside its fine cell.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, distribution_to_json, json_to_distribution
from optuna.samplers import BaseSampler
from optuna.storages import BaseStorage

from fairtune import _keys
from fairtune._names import check_integer
from fairtune._optuna_compat import storage_and_id
from fairtune._storage import (
    check_storage_url,
    create_or_load_study,
    open_storage,
    read_text,
    records_heartbeats,
    write_study_text,
)

__all__ = ["Board", "Post", "open_study", "simulate", "sliced_lhs_value"]

BOARD_STUDY_PREFIX = "fairtune-board:"
SEED_KEY = _keys.BOARD_SEED_KEY
AGENT_KEY_PREFIX = _keys.BOARD_AGENT_PREFIX
POST_KEY_PREFIX = _keys.BOARD_POST_PREFIX


@dataclass(frozen=True)
class Post:
    """One agent's post of one round: its LCB maximizer, the LCB there, and its kappa.

    Attributes:
        agent: The agent's name.
        round: The agent's round (the number of its evaluated trials when it posted).
        design: The LCB maximizer x+ as parameters (possibly with ``design_noise`` added).
        lcb: ``mu(x+) - eta * sigma(x+)``, in the maximized sign.
        kappa: ``max_x mu(x)``, in the maximized sign.
    """

    agent: str
    round: int
    design: dict[str, Any]
    lcb: float
    kappa: float


def check_agent(agent: Any) -> str:
    if not isinstance(agent, str) or not agent or ":" in agent:
        raise ValueError(f"`agent` must be a non-empty string without ':', but got "
                         f"agent={agent!r}.")
    return agent


def open_study(
    storage: str,
    study_name: str,
    *,
    sampler: BaseSampler | None = None,
    direction: Literal["minimize", "maximize"] | None = None,
    directions: Sequence[Literal["minimize", "maximize"]] | None = None,
    heartbeat_interval: int | None = 30,
    grace_period: int | None = None,
    max_retry: int | None = 0,
) -> optuna.Study:
    """Create or load an agent's (or any worker's) study, safely when many start at once
    (:func:`fairtune._storage.create_or_load_study`), with heartbeats on an RDB storage.

    Example:
        .. code-block:: python

            board = Board("postgresql+psycopg://lab@db/alloys", name="alloys")
            study = open_study("postgresql+psycopg://lab@db/lab_a", "lab-a",
                               sampler=CGPSampler(board=board, agent="lab-a"))
            study.optimize(objective, n_trials=30)

    Args:
        storage: A storage URL: an RDB URL (``postgresql+psycopg://...``, ``sqlite:///...``)
            or ``journal:<file>``.
        study_name: The study's name.
        sampler: The study's sampler. Defaults to None (Optuna's default).
        direction: ``"maximize"`` or ``"minimize"`` (or ``directions`` for several
            objectives). Defaults to None (minimize).
        directions: The directions of a multi-objective study. Defaults to None.
        heartbeat_interval: Seconds between a running trial's heartbeats (RDB storages; None
            or 0 for none). Defaults to 30.
        grace_period: Seconds without a heartbeat after which a trial is failed. Defaults to
            None (twice the interval).
        max_retry: How many times a failed stale trial is re-run with the same parameters
            (None: no limit). Defaults to 0.

    Raises:
        ValueError: On a malformed storage URL (naming ``storage``).
        RuntimeError: On a storage file that cannot be used (e.g. read-only).
    """
    check_storage_url(storage, create=True)
    heartbeat = heartbeat_interval if records_heartbeats(storage) else None

    def create() -> optuna.Study:
        return optuna.create_study(
            storage=open_storage(storage, heartbeat_interval=heartbeat,
                                 grace_period=grace_period, max_retry=max_retry),
            study_name=study_name, sampler=sampler, direction=direction, directions=directions,
            load_if_exists=True,
        )

    return create_or_load_study(create)


def space_json(space: Mapping[str, BaseDistribution]) -> str:
    return json.dumps({k: distribution_to_json(v) for k, v in sorted(space.items())})


class Board:
    """Where CGP agents post designs, LCB values and kappas (never observations).

    Args:
        storage: Any Optuna storage: a URL (``"journal:<file>"`` for a Journal file) or a
            storage object (``InMemoryStorage`` for one process).
        name: The board's name; the board is the study ``"fairtune-board:<name>"`` of that
            storage, created on first use. Defaults to ``"default"``.
        seed: The shared seed of the groups and of the collaborative Latin hypercube, stored
            by the first board object to open the study (a different one later is an error).
            Defaults to None: a seed derived from ``name``.

    Example:
        >>> import optuna
        >>> from fairtune.collaboration import Board
        >>> board = Board(optuna.storages.InMemoryStorage(), name="demo", seed=0)
        >>> board.post("lab-a", 0, {"x": 0.5}, lcb=1.0, kappa=1.2)
        >>> board.latest(["lab-a"])["lab-a"].kappa
        1.2
    """

    def __init__(
        self, storage: str | BaseStorage, *, name: str = "default", seed: int | None = None
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"`name` must be a non-empty string, but got name={name!r}.")
        check_integer("seed", seed, seed=True)
        if not isinstance(storage, (str, BaseStorage)):
            raise ValueError("`storage` must be an Optuna storage URL or storage object, but "
                             f"got storage={storage!r}.")
        self.name = name
        if isinstance(storage, str):
            check_storage_url(storage, create=True)
            storage = open_storage(storage)
        study = create_or_load_study(
            lambda: optuna.create_study(
                storage=storage, study_name=BOARD_STUDY_PREFIX + name, load_if_exists=True
            )
        )
        self._storage, self._study_id = storage_and_id(study)
        attrs = self._attrs()
        if SEED_KEY not in attrs:
            # Without a seed, one derived from the name: agents that open a new board at the
            # same moment in several processes write the same value, whoever writes last.
            chosen = seed if seed is not None else int.from_bytes(
                hashlib.sha256(name.encode("utf-8")).digest()[:4], "little")
            self._storage.set_study_system_attr(self._study_id, SEED_KEY, int(chosen))
            attrs = self._attrs()
        if seed is not None and int(attrs[SEED_KEY]) != int(seed):
            raise ValueError(
                f"board {name!r} was created with seed={attrs[SEED_KEY]}, but got seed={seed!r}."
            )
        self.seed: int = int(attrs[SEED_KEY])

    def _attrs(self) -> dict[str, Any]:
        return self._storage.get_study_system_attrs(self._study_id)

    def items(self) -> dict[str, Any]:
        """Every key and value the board stores (for inspection)."""
        return dict(self._attrs())

    # -- agents ----------------------------------------------------------------------------------

    def register(
        self, agent: str, search_space: Mapping[str, BaseDistribution] | None = None
    ) -> None:
        """Make ``agent`` known to the board (it joins the groups), with its search space."""
        agent = check_agent(agent)
        text = space_json(search_space or {})
        key = AGENT_KEY_PREFIX + agent
        attrs = self._attrs()
        if read_text(attrs, key) != text and not (search_space is None and key in attrs):
            write_study_text(self._storage, self._study_id, key, text)

    def agents(self, attrs: Mapping[str, Any] | None = None) -> list[str]:
        """The registered agents, sorted by name."""
        attrs = self._attrs() if attrs is None else attrs
        return sorted(
            key[len(AGENT_KEY_PREFIX) :] for key in attrs
            if key.startswith(AGENT_KEY_PREFIX) and ":" not in key[len(AGENT_KEY_PREFIX) :]
        )

    def search_space(
        self, agent: str, attrs: Mapping[str, Any] | None = None
    ) -> dict[str, BaseDistribution] | None:
        """The search space ``agent`` registered (None if it is not registered)."""
        attrs = self._attrs() if attrs is None else attrs
        text = read_text(attrs, AGENT_KEY_PREFIX + agent)
        if text is None:
            return None
        return {k: json_to_distribution(v) for k, v in json.loads(text).items()}

    def group(
        self, agent: str, round_: int, group_size: int, attrs: Mapping[str, Any] | None = None
    ) -> list[str]:
        """The members of ``agent``'s group in round ``round_`` (``agent`` included)."""
        return group_of(agent, self.agents(attrs), round_, group_size, self.seed)

    # -- posts -----------------------------------------------------------------------------------

    def post(
        self, agent: str, round_: int, design: Mapping[str, Any], *, lcb: float, kappa: float
    ) -> None:
        """Post ``agent``'s LCB maximizer of round ``round_``, its LCB value and kappa."""
        agent = check_agent(agent)
        if AGENT_KEY_PREFIX + agent not in self._attrs():
            self.register(agent)
        text = json.dumps({"design": dict(design), "lcb": float(lcb), "kappa": float(kappa)})
        key = f"{POST_KEY_PREFIX}{agent}:{int(round_)}"
        write_study_text(self._storage, self._study_id, key, text)

    def posts(self, attrs: Mapping[str, Any] | None = None) -> list[Post]:
        """Every post, sorted by (agent, round)."""
        attrs = self._attrs() if attrs is None else attrs
        out = []
        for key in attrs:
            parts = key[len(POST_KEY_PREFIX):].split(":")
            if key.startswith(POST_KEY_PREFIX) and len(parts) == 2:  # (not a long post's chunk)
                record = json.loads(read_text(attrs, key))  # type: ignore[arg-type]
                out.append(Post(parts[0], int(parts[1]), record["design"], record["lcb"],
                                record["kappa"]))
        return sorted(out, key=lambda p: (p.agent, p.round))

    def latest(
        self, agents: Sequence[str], attrs: Mapping[str, Any] | None = None
    ) -> dict[str, Post]:
        """The latest post (highest round) of each of ``agents`` that has posted."""
        wanted = set(agents)  # posts are sorted by round within an agent: the last one wins
        return {post.agent: post for post in self.posts(attrs) if post.agent in wanted}


def group_of(
    agent: str, agents: Sequence[str], round_: int, group_size: int, seed: int
) -> list[str]:
    """``agent``'s group in round ``round_``: the sorted ``agents`` permuted by a generator seeded
    with (seed, round), split into ceil(N / group_size) near-equal groups."""
    members = sorted(set(agents) | {agent})
    rng = np.random.RandomState(
        np.random.SeedSequence([int(seed) % 2**63, 7, int(round_)]).generate_state(1)[0]
    )
    order = rng.permutation(len(members))
    n_groups = math.ceil(len(members) / group_size)
    for part in np.array_split(order, n_groups):
        names = [members[i] for i in part]
        if agent in names:
            return sorted(names)
    raise AssertionError("unreachable: every agent is in one group")


def sliced_lhs_value(
    seed: int, key: int, n_slices: int, n_per_slice: int, slice_index: int, i: int
) -> float:
    """Coordinate in [0, 1] of design ``i`` of slice ``slice_index`` of a sliced Latin hypercube.

    One coordinate (parameter), identified by ``key``; see the module docstring. Over all slices
    the values of a coordinate hit each of the n_slices * n_per_slice fine cells once; within a
    slice, each of the n_per_slice coarse cells once.
    """
    if not (0 <= slice_index < n_slices and 0 <= i < n_per_slice):
        raise ValueError(
            f"`slice_index` and `i` must be in [0, {n_slices}) and [0, {n_per_slice}), but got "
            f"slice_index={slice_index}, i={i}."
        )
    ss = np.random.SeedSequence([int(seed) % 2**63, 11, int(key), n_slices, n_per_slice])
    rng = np.random.RandomState(ss.generate_state(1)[0])
    coarse_perms = [rng.permutation(n_per_slice) for _ in range(n_slices)]  # per slice
    fine_perms = [rng.permutation(n_slices) for _ in range(n_per_slice)]  # per coarse cell
    jitter = rng.uniform(size=(n_slices, n_per_slice))
    coarse = int(coarse_perms[slice_index][i])
    fine = coarse * n_slices + int(fine_perms[coarse][slice_index])
    return (fine + float(jitter[slice_index, i])) / (n_slices * n_per_slice)


def simulate(
    objectives: Sequence[Callable[[optuna.Trial], float]],
    samplers: Sequence[BaseSampler],
    *,
    n_rounds: int,
    direction: Literal["minimize", "maximize"] = "maximize",
    callback: Callable[[int, list[optuna.Study]], None] | None = None,
    initial_params: Sequence[Sequence[Mapping[str, Any]]] | None = None,
) -> list[optuna.Study]:
    """Run N agents in one process, round by round: each with its own study and objective.

    In each round every agent first posts to its board, then evaluates one trial (the paper's
    synchronous Algorithm 1); each study lives in its own in-memory storage.

    Args:
        objectives: One objective per agent.
        samplers: One sampler per agent (any Optuna sampler, e.g. a baseline).
        n_rounds: Trials per agent, startup included.
        direction: ``"maximize"`` or ``"minimize"`` for every agent. Defaults to
            ``"maximize"``.
        callback: Called as ``callback(round, studies)`` after each round. Defaults to None.
        initial_params: Per agent, parameters of its first trials (enqueued), e.g. initial
            designs shared by several methods being compared. Defaults to None.

    Returns:
        The agents' studies, in the order of ``objectives``.
    """
    if len(objectives) != len(samplers) or not objectives:
        raise ValueError(
            "`objectives` and `samplers` must be non-empty and of equal length, but got "
            f"{len(objectives)} objectives and {len(samplers)} samplers."
        )
    check_integer("n_rounds", n_rounds)
    studies = [
        optuna.create_study(
            storage=optuna.storages.InMemoryStorage(), direction=direction, sampler=sampler,
            study_name=f"agent-{i}",
        )
        for i, sampler in enumerate(samplers)
    ]
    # Agents past the end of `initial_params` start from their sampler alone.
    for study, params in zip(studies, initial_params or [], strict=False):
        for p in params:
            study.enqueue_trial(dict(p))
    for round_ in range(n_rounds):
        for sampler, study in zip(samplers, studies, strict=True):
            post_round = getattr(sampler, "_post_round", None)
            if post_round is not None:
                post_round(study)
        for objective, study in zip(objectives, studies, strict=True):
            study.optimize(objective, n_trials=1)
        if callback is not None:
            callback(round_, studies)
    return studies
