from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.distributions import FloatDistribution, IntDistribution

from fairtune.collaboration import (
    AGENT_KEY_PREFIX,
    POST_KEY_PREFIX,
    SEED_KEY,
    Board,
    group_of,
    simulate,
    sliced_lhs_value,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _storages(tmp_path: Path) -> dict[str, object]:
    return {
        "memory": optuna.storages.InMemoryStorage(),
        "sqlite": f"sqlite:///{tmp_path / 'board.db'}",
        "journal": optuna.storages.JournalStorage(
            optuna.storages.journal.JournalFileBackend(str(tmp_path / "board.log"))
        ),
    }


@pytest.mark.parametrize("kind", ["memory", "sqlite", "journal"])
def test_board_posts_round_trip_on_any_storage_and_hold_nothing_else(
    tmp_path: Path, kind: str
) -> None:
    storage = _storages(tmp_path)[kind]
    board = Board(storage, name="lab", seed=5)
    long_design = {f"p{i:03d}": 0.123456789 * i for i in range(120)}  # > one RDB value
    board.post("a", 3, {"x": 0.25, "k": 4}, lcb=1.5, kappa=2.0)
    board.post("a", 4, {"x": 0.5, "k": 2}, lcb=1.7, kappa=2.1)
    board.post("b", 1, long_design, lcb=-1.0, kappa=0.0)
    again = Board(storage, name="lab")  # another process would open it the same way
    assert again.seed == 5
    latest = again.latest(["a", "b", "c"])
    assert set(latest) == {"a", "b"}
    assert (latest["a"].round, latest["a"].design, latest["a"].lcb, latest["a"].kappa) == (
        4, {"x": 0.5, "k": 2}, 1.7, 2.1
    )
    assert latest["b"].design == long_design
    assert [(p.agent, p.round) for p in again.posts()] == [("a", 3), ("a", 4), ("b", 1)]
    assert again.agents() == ["a", "b"]
    for key in again.items():
        assert key == SEED_KEY or key.startswith((AGENT_KEY_PREFIX, POST_KEY_PREFIX)), key
    # The board is a study without trials, apart from the agents' studies.
    study = optuna.load_study(study_name="fairtune-board:lab", storage=storage)
    assert study.trials == []


def test_board_rejects_bad_input_with_clear_messages(tmp_path: Path) -> None:
    storage = optuna.storages.InMemoryStorage()
    Board(storage, name="x", seed=1)
    with pytest.raises(ValueError, match=r"created with seed=1, but got seed=2"):
        Board(storage, name="x", seed=2)
    with pytest.raises(ValueError, match=r"`name` must be a non-empty string, but got name=''"):
        Board(storage, name="")
    with pytest.raises(ValueError, match=r"`storage` must be an Optuna storage URL"):
        Board(3, name="x")  # type: ignore[arg-type]
    for url in ("notaurl://", "sqlite//board.db", "journal:"):
        with pytest.raises(ValueError, match=rf"`storage` .*{re.escape(repr(url))}"):
            Board(url, name="x")
    # A journal:<file> URL is a Journal file, as on the command line.
    board = Board(f"journal:{tmp_path / 'board.log'}", name="j", seed=3)
    board.post("a", 0, {"x": 1.0}, lcb=0.0, kappa=0.0)
    journal = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "board.log"))
    )
    assert Board(journal, name="j").latest(["a"])["a"].design == {"x": 1.0}
    with pytest.raises(ValueError, match=r"`seed` must be None or an integer"):
        Board(storage, name="y", seed=-1)
    board = Board(storage, name="x")
    with pytest.raises(ValueError, match=r"`agent` must be a non-empty string without ':', but got agent='a:b'"):
        board.post("a:b", 0, {"x": 1.0}, lcb=0.0, kappa=0.0)


def test_board_stores_each_agents_search_space() -> None:
    board = Board(optuna.storages.InMemoryStorage(), name="s", seed=0)
    space = {"x": FloatDistribution(0.0, 1.0), "k": IntDistribution(1, 5)}
    board.register("a", space)
    board.register("b")
    assert board.search_space("a") == space
    assert board.search_space("b") == {}
    assert board.search_space("c") is None
    board.register("b", space)
    board.register("b")  # registering again without a space keeps it
    assert board.search_space("b") == space


def test_groups_are_one_partition_that_every_agent_computes_alike() -> None:
    agents = [f"agent{i}" for i in range(10)]
    for round_ in range(5):
        groups = {a: group_of(a, agents, round_, 4, seed=3) for a in agents}
        distinct = {tuple(g) for g in groups.values()}
        # ceil(10 / 4) = 3 groups of near-equal size, each at most N_max, covering everyone once.
        assert sorted(len(g) for g in distinct) == [3, 3, 4]
        assert sorted(a for g in distinct for a in g) == sorted(agents)
        for a, g in groups.items():
            assert a in g and all(groups[b] == g for b in g)  # symmetric: no coordinator needed
    partitions = {
        round_: frozenset(tuple(group_of(a, agents, round_, 4, seed=3)) for a in agents)
        for round_ in range(6)
    }
    assert len(set(partitions.values())) > 1  # reshuffled across rounds
    assert group_of("agent0", agents, 2, 4, seed=3) == group_of("agent0", agents[::-1], 2, 4, 3)
    assert group_of("agent0", agents, 2, 100, seed=3) == sorted(agents)


def test_board_groups_agree_between_board_objects_on_one_storage(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    one = Board(url, name="g", seed=9)
    for i in range(7):
        one.register(f"n{i}")
    two = Board(url, name="g")
    for i in range(7):
        assert one.group(f"n{i}", 4, 3) == two.group(f"n{i}", 4, 3)
        assert len(one.group(f"n{i}", 4, 3)) <= 3


def test_sliced_latin_hypercube_union_and_slices_are_latin() -> None:
    n_slices, n0 = 4, 5
    values = np.array([
        [sliced_lhs_value(7, 123, n_slices, n0, k, i) for i in range(n0)] for k in range(n_slices)
    ])
    fine = np.floor(values * n_slices * n0).astype(int)
    assert sorted(fine.ravel()) == list(range(n_slices * n0))  # the union is a Latin hypercube
    for k in range(n_slices):
        assert sorted(np.floor(values[k] * n0).astype(int)) == list(range(n0))  # and each slice
    other = sliced_lhs_value(7, 124, n_slices, n0, 0, 0)
    assert other != values[0, 0]  # another parameter gets another permutation
    with pytest.raises(ValueError, match="slice_index"):
        sliced_lhs_value(7, 1, 2, 3, 2, 0)


def test_simulate_runs_agents_round_by_round_in_their_own_studies() -> None:
    seen: list[list[int]] = []

    def objective_for(shift: float):
        def objective(trial: optuna.Trial) -> float:
            x = trial.suggest_float("x", 0.0, 1.0)
            return -((x - shift) ** 2)
        return objective

    samplers = [optuna.samplers.RandomSampler(seed=i) for i in range(3)]
    studies = simulate(
        [objective_for(0.1 * i) for i in range(3)], samplers, n_rounds=4,
        callback=lambda r, ss: seen.append([len(s.trials) for s in ss]),
    )
    assert seen == [[r + 1] * 3 for r in range(4)]
    assert len({id(s._storage) for s in studies}) == 3
    for i, study in enumerate(studies):
        assert all(math.isclose(t.value, -((t.params["x"] - 0.1 * i) ** 2)) for t in study.trials)
    with pytest.raises(ValueError, match="equal length"):
        simulate([objective_for(0.0)], samplers, n_rounds=1)


def test_board_values_are_json_posts_with_exactly_design_lcb_kappa() -> None:
    board = Board(optuna.storages.InMemoryStorage(), name="j", seed=0)
    board.post("a", 0, {"x": 0.1}, lcb=0.0, kappa=1.0)
    record = json.loads(board.items()[f"{POST_KEY_PREFIX}a:0"])
    assert set(record) == {"design", "lcb", "kappa"}



def test_a_board_without_a_seed_gets_one_from_its_name() -> None:
    # Agents started together on a new board, none giving a seed, may each find no seed stored
    # and write one: a random one per process would give each agent its own groups. The
    # default is a function of the board's name, so whoever writes last writes the same value.
    first = Board(optuna.storages.InMemoryStorage(), name="race")
    second = Board(optuna.storages.InMemoryStorage(), name="race")
    assert first.seed == second.seed
    assert Board(optuna.storages.InMemoryStorage(), name="other").seed != first.seed
    # A given seed still wins, and the stored one is kept for later boards.
    storage = optuna.storages.InMemoryStorage()
    assert Board(storage, name="race", seed=3).seed == 3
    assert Board(storage, name="race").seed == 3


def test_open_study_survives_agents_starting_together_on_a_new_postgres_database(
    tmp_path: Path, postgres_url: str
) -> None:
    import subprocess
    import sys

    script = tmp_path / "agent.py"
    script.write_text(
        "import sys\n"
        "from fairtune.collaboration import open_study\n"
        "study = open_study(sys.argv[1], 'shared', direction='maximize', heartbeat_interval=5)\n"
        "study.optimize(lambda t: t.suggest_float('x', 0, 1), n_trials=2)\n"
        "print(study._storage.get_heartbeat_interval())\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, str(script), postgres_url], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.strip() == "5"  # each agent's trials record heartbeats
    study = optuna.load_study(study_name="shared", storage=postgres_url)
    assert len(study.trials) == 8


def test_open_study_names_a_bad_storage_and_loads_an_existing_study(tmp_path: Path) -> None:
    from fairtune.collaboration import open_study

    with pytest.raises(ValueError, match=r"`storage` 'sqlte:///x.db' has an unknown scheme"):
        open_study("sqlte:///x.db", "s")
    url = f"sqlite:///{tmp_path / 's.db'}"
    first = open_study(url, "s", direction="maximize")
    first.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    again = open_study(url, "s", direction="maximize", heartbeat_interval=None)
    assert len(again.trials) == 1 and again._storage.get_heartbeat_interval() is None
    journal = open_study(f"journal:{tmp_path / 'j.log'}", "j")  # no heartbeat there
    assert journal.study_name == "j"
