from __future__ import annotations

import math
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import optuna
import pytest
import torch
from optuna.testing.pytest_samplers import (
    BasicSamplerTestCase,
    RelativeSamplerTestCase,
    SingleOnlySamplerTestCase,
)
from optuna.trial import TrialState

from fairtune._gp.gp import fit_gp
from fairtune._gp.search_space import SearchSpace
from fairtune.collaboration import Board
from fairtune.samplers import CGPSampler
from fairtune.samplers.cgp import CLHS_SLOT_KEY, _RoundState
from tests.conftest import small

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _small(sampler: Any) -> Any:
    return small(sampler, preliminary=32, n_ts_candidates=64, optim_max_iter=5, fit_max_iter=20)


def _factory(acquisition: str, with_board: bool) -> Callable[[], CGPSampler]:
    def make() -> CGPSampler:
        board = Board(optuna.storages.InMemoryStorage(), name="t", seed=0) if with_board else None
        return _small(CGPSampler(board=board, agent="a", acquisition=acquisition,  # type: ignore[arg-type]
                                 n_startup_trials=1, n_raw_samples=200, seed=0))
    return make


# Optuna's contract for each acquisition, and with and without a board: the default (EI) both
# ways, UCB alone and TS on a board; the acquisitions share everything but their last step, and
# the board path is the same for all three.
class _Contract(BasicSamplerTestCase, RelativeSamplerTestCase, SingleOnlySamplerTestCase):
    pass


class TestUCBContract(_Contract):
    @pytest.fixture
    def sampler(self) -> Callable[[], CGPSampler]:
        return _factory("ucb", False)


class TestEIContract(_Contract):
    @pytest.fixture
    def sampler(self) -> Callable[[], CGPSampler]:
        return _factory("ei", False)


class TestEIBoardContract(_Contract):
    @pytest.fixture
    def sampler(self) -> Callable[[], CGPSampler]:
        return _factory("ei", True)


class TestTSBoardContract(_Contract):
    @pytest.fixture
    def sampler(self) -> Callable[[], CGPSampler]:
        return _factory("ts", True)


def _quadratic(center: float) -> Callable[[optuna.Trial], float]:
    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", 0.0, 1.0)
        y = trial.suggest_float("y", 0.0, 1.0)
        return -((x - center) ** 2 + (y - center) ** 2)
    return objective


def _seeded_study(sampler: CGPSampler, points: list[tuple[float, float]],
                  objective: Callable[[optuna.Trial], float]) -> optuna.Study:
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for x, y in points:
        study.enqueue_trial({"x": x, "y": y})
    study.optimize(objective, n_trials=len(points))
    return study


_GRID = [(x, y) for x in (0.05, 0.35, 0.65, 0.95) for y in (0.05, 0.35, 0.65, 0.95)]


def _next_params(sampler: CGPSampler, points: list[tuple[float, float]], center: float) -> dict:
    study = _seeded_study(sampler, points, _quadratic(center))
    trial = study.ask()
    trial.suggest_float("x", 0.0, 1.0)
    trial.suggest_float("y", 0.0, 1.0)
    return trial.params


def test_leaders_are_the_group_members_whose_lcb_exceeds_kappa() -> None:
    board = Board(optuna.storages.InMemoryStorage(), name="l", seed=0)
    sampler = CGPSampler(board=board, agent="me", group_size=10, share_without_comparison=False)
    space = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}
    for name, lcb, x in (("low", 0.5, 0.1), ("equal", 1.0, 0.2), ("high", 1.5, 0.3),
                         ("higher", 3.0, 0.4)):
        board.register(name, space)
        board.post(name, 0, {"x": 0.9}, lcb=lcb, kappa=9.9)  # an older post
        board.post(name, 2, {"x": x}, lcb=lcb, kappa=9.9)
    ss = SearchSpace(space)
    X = torch.zeros(1, 1, dtype=torch.float64)
    gp = fit_gp(X, torch.zeros(1, dtype=torch.float64), ss.is_categorical)
    # kappa = y_mean + y_std * 0.5 = 1.0 in the maximized units the posts use.
    state = _RoundState(key=(), round=3, ss=ss, X=X, X_pending=None, gp=gp, y_mean=0.5,
                        y_std=1.0, kappa=0.5, x_kappa=np.zeros(1), best_f=0.0, base_seed=0)
    leaders, designs = sampler._borrowed(state, space)
    assert leaders == ["high", "higher"]  # LCB > kappa strictly; "equal" is no leader
    np.testing.assert_allclose(designs[:, 0], [0.3, 0.4])  # their latest posts
    sampler._share_without_comparison = True
    leaders, designs = sampler._borrowed(state, space)
    assert leaders == ["equal", "high", "higher", "low"]
    np.testing.assert_allclose(designs[:, 0], [0.2, 0.3, 0.4, 0.1])
    # Group of at most 2: only the leader in this round's group can be borrowed from.
    sampler._group_size = 2
    leaders, _ = sampler._borrowed(state, space)
    assert leaders == [m for m in board.group("me", 3, 2) if m != "me"]


def test_an_adversarial_design_is_rejected_and_does_not_move_the_agents_choice() -> None:
    board = Board(optuna.storages.InMemoryStorage(), name="adv", seed=0)
    space = {"x": optuna.distributions.FloatDistribution(0.0, 1.0),
             "y": optuna.distributions.FloatDistribution(0.0, 1.0)}
    board.register("liar", space)
    for round_ in range(0, 40):
        # A corner the agent's own data shows to be poor, with a huge claimed LCB.
        board.post("liar", round_, {"x": 0.95, "y": 0.95}, lcb=1e6, kappa=1e6)
    alone = _next_params(_small(CGPSampler(board=None, agent="me", seed=4, n_startup_trials=16)),
                         _GRID, 0.3)
    sampler = _small(CGPSampler(board=board, agent="me", seed=4, n_startup_trials=16))
    together = _next_params(sampler, _GRID, 0.3)
    assert sampler.last_borrowing["leaders"] == ["liar"]
    assert sampler.last_borrowing["kept"].tolist() == [False]  # dropped by the quorum
    assert together == alone


def test_a_helpful_design_is_kept_and_lifts_the_agents_model_above_kappa_there() -> None:
    board = Board(optuna.storages.InMemoryStorage(), name="help", seed=0)
    space = {"x": optuna.distributions.FloatDistribution(0.0, 1.0),
             "y": optuna.distributions.FloatDistribution(0.0, 1.0)}
    board.register("friend", space)
    # The agent's optimum (0.8, 0.8) lies away from its trials; a friend claims it.
    board.post("friend", 6, {"x": 0.8, "y": 0.8}, lcb=10.0, kappa=10.0)
    sparse = [(0.05, 0.05), (0.05, 0.45), (0.45, 0.05), (0.3, 0.3), (0.5, 0.5), (0.2, 0.6)]
    sampler = _small(CGPSampler(board=board, agent="me", seed=4, n_startup_trials=6))
    _next_params(sampler, sparse, 0.8)
    borrowing = sampler.last_borrowing
    assert borrowing["leaders"] == ["friend"] and borrowing["kept"].tolist() == [True]
    assert borrowing["n_models"] >= 5
    fantasies = borrowing["fantasies"]
    x = torch.tensor([[0.8, 0.8]], dtype=torch.float64)
    kappa = borrowing["kappa"]
    # Every kept sample clears kappa, so every fantasy model's mean there is lifted towards it.
    assert bool((fantasies.samples > kappa).all())
    plain_mean = fantasies.gp.posterior(x)[0]
    assert float(fantasies.moments(x)[0]) > float(plain_mean)
    assert float(fantasies.variance(x)) < float(fantasies.gp.posterior(x)[1])


@pytest.mark.parametrize("acquisition", ["ucb", "ei", "ts"])
def test_with_no_leader_each_acquisition_equals_the_plain_one(acquisition: str) -> None:
    board = Board(optuna.storages.InMemoryStorage(), name="n", seed=0)
    space = {"x": optuna.distributions.FloatDistribution(0.0, 1.0),
             "y": optuna.distributions.FloatDistribution(0.0, 1.0)}
    board.register("weak", space)
    board.post("weak", 16, {"x": 0.3, "y": 0.3}, lcb=-1e6, kappa=-1e6)  # never a leader
    alone = _next_params(
        _small(CGPSampler(board=None, agent="me", acquisition=acquisition, seed=2,  # type: ignore[arg-type]
                          n_startup_trials=16)), _GRID, 0.3)
    sampler = _small(CGPSampler(board=board, agent="me", acquisition=acquisition, seed=2,  # type: ignore[arg-type]
                                n_startup_trials=16, share_without_comparison=False))
    together = _next_params(sampler, _GRID, 0.3)
    assert sampler.last_borrowing["leaders"] == []
    assert together == alone
    assert len(board.posts()) == 2  # the agent posted (and the plain run did not need to)


def test_sharing_without_comparison_borrows_from_a_member_with_lower_outputs() -> None:
    # A member whose outputs are offset below this agent's (its LCB under this agent's kappa)
    # is no leader, and by default shares nothing; share_without_comparison borrows its design.
    board = Board(optuna.storages.InMemoryStorage(), name="offset", seed=0)
    space = {"x": optuna.distributions.FloatDistribution(0.0, 1.0),
             "y": optuna.distributions.FloatDistribution(0.0, 1.0)}
    board.register("offset", space)
    board.post("offset", 16, {"x": 0.3, "y": 0.3}, lcb=-1e6, kappa=-1e6)
    sharing = _small(CGPSampler(board=board, agent="me", seed=2, n_startup_trials=16,
                                share_without_comparison=True))
    _next_params(sharing, _GRID, 0.3)
    assert sharing.last_borrowing["leaders"] == ["offset"]
    np.testing.assert_allclose(sharing.last_borrowing["borrowed"], [[0.3, 0.3]])
    default = _small(CGPSampler(board=board, agent="me", seed=2, n_startup_trials=16))
    _next_params(default, _GRID, 0.3)
    assert default.last_borrowing["leaders"] == []


def test_design_noise_changes_the_post_only() -> None:
    posted = {}
    chosen = {}
    for noise in (None, 0.2):
        board = Board(optuna.storages.InMemoryStorage(), name="dp", seed=0)
        sampler = _small(CGPSampler(board=board, agent="me", seed=1, n_startup_trials=16,
                                    design_noise=noise))
        chosen[noise] = _next_params(sampler, _GRID, 0.3)
        (post,) = board.posts()
        posted[noise] = post.design
    assert chosen[None] == chosen[0.2]
    assert posted[None] != posted[0.2]
    assert all(0.0 <= v <= 1.0 for v in posted[0.2].values())


def test_minimization_is_handled_by_sign_in_the_posts() -> None:
    board = Board(optuna.storages.InMemoryStorage(), name="min", seed=0)
    sampler = _small(CGPSampler(board=board, agent="me", seed=0, n_startup_trials=16))
    study = optuna.create_study(direction="minimize", sampler=sampler)
    for x, y in _GRID:
        study.enqueue_trial({"x": x, "y": y})

    def cost(trial: optuna.Trial) -> float:
        return 5.0 + (trial.suggest_float("x", 0, 1) - 0.3) ** 2 + (trial.suggest_float("y", 0, 1) - 0.3) ** 2

    study.optimize(cost, n_trials=len(_GRID) + 1)
    (post,) = board.posts()
    best = min(t.value for t in study.trials[: len(_GRID)])
    # kappa = max of the posterior mean of -cost: about minus the best cost, never above -5.
    assert -best - 0.05 < post.kappa < -5.0 + 0.01
    assert post.lcb <= post.kappa
    assert study.trials[-1].value < 5.1  # it minimizes


def test_pending_failed_and_nan_trials() -> None:
    sampler = _small(CGPSampler(board=None, agent="me", seed=0, n_startup_trials=4))
    study = optuna.create_study(direction="maximize", sampler=sampler)
    objective = _quadratic(0.3)

    def flaky(trial: optuna.Trial) -> float:
        if trial.number == 5:
            raise RuntimeError("fails")
        if trial.number == 6:
            return math.nan
        return objective(trial)

    study.optimize(flaky, n_trials=9, catch=(RuntimeError,))
    assert [t.state for t in study.trials].count(TrialState.FAIL) == 2  # NaN is a failure too
    assert sum(t.state == TrialState.COMPLETE for t in study.trials) == 7
    first, second = study.ask(), study.ask()
    for t in (first, second):
        t.suggest_float("x", 0.0, 1.0)
        t.suggest_float("y", 0.0, 1.0)
    assert first.params != second.params  # the running trial is pending for the second


def test_agents_with_different_search_spaces_are_an_error() -> None:
    board = Board(optuna.storages.InMemoryStorage(), name="mismatch", seed=0)
    board.register("other", {"x": optuna.distributions.FloatDistribution(0.0, 2.0),
                             "y": optuna.distributions.FloatDistribution(0.0, 1.0)})
    sampler = _small(CGPSampler(board=board, agent="me", seed=0, n_startup_trials=16))
    with pytest.raises(ValueError, match="search spaces must agree, but agent 'other' has"):
        _next_params(sampler, _GRID, 0.3)


def test_collaborative_latin_hypercube_startup() -> None:
    board = Board(optuna.storages.InMemoryStorage(), name="lhs", seed=3)
    samplers = [CGPSampler(board=board, agent=f"a{i}", seed=i, n_startup_trials=5) for i in range(3)]
    studies = [optuna.create_study(direction="maximize", sampler=s) for s in samplers]
    for study in studies:
        study.optimize(_quadratic(0.3), n_trials=5)
    for name in ("x", "y"):
        values = np.array([[t.params[name] for t in s.trials] for s in studies])
        fine = np.floor(values * 15).astype(int)
        assert sorted(fine.ravel()) == list(range(15))
        for row in values:
            assert sorted(np.floor(row * 5).astype(int)) == list(range(5))
    slots = [s._storage.get_study_system_attrs(s._study_id)[CLHS_SLOT_KEY] for s in studies]
    assert slots == [[0, 3], [1, 3], [2, 3]]


def test_bad_arguments_are_clear_errors() -> None:
    board = Board(optuna.storages.InMemoryStorage(), name="bad", seed=0)
    with pytest.raises(ValueError, match=r"`acquisition` must be one of \['ucb', 'ei', 'ts'\], but got acquisition='pi'"):
        CGPSampler(board=None, acquisition="pi")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"`agent` must be given when `board` is"):
        CGPSampler(board=board)
    with pytest.raises(ValueError, match=r"`quorum <= n_raw_samples` must hold"):
        CGPSampler(board=None, quorum=10, n_raw_samples=5)
    with pytest.raises(ValueError, match=r"`group_size` must be a positive integer, but got group_size=0"):
        CGPSampler(board=None, group_size=0)
    with pytest.raises(ValueError, match=r"`design_noise` must be None or a finite number > 0"):
        CGPSampler(board=None, design_noise=-1.0)
    with pytest.raises(ValueError, match=r"`eta` must be a finite number >= 0"):
        CGPSampler(board=None, eta=math.inf)
    with pytest.raises(ValueError, match=r"`board` must be a fairtune.collaboration.Board"):
        CGPSampler(board="sqlite:///x.db", agent="a")  # type: ignore[arg-type]


def test_pickled_sampler_continues_as_the_original() -> None:
    board = Board(optuna.storages.InMemoryStorage(), name="p", seed=0)
    sampler = _small(CGPSampler(board=board, agent="me", seed=3, n_startup_trials=4))
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(_quadratic(0.3), n_trials=6)
    restored = pickle.loads(pickle.dumps(sampler))
    storage = optuna.storages.InMemoryStorage()
    optuna.copy_study(from_study_name=study.study_name, from_storage=study._storage,
                      to_storage=storage)
    twin = optuna.load_study(study_name=study.study_name, storage=storage, sampler=restored)
    study.optimize(_quadratic(0.3), n_trials=2)
    twin.optimize(_quadratic(0.3), n_trials=2)
    assert [t.params for t in study.trials] == [t.params for t in twin.trials]
