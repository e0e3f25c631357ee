from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import optuna
import pytest
import torch
from optuna.testing.pytest_samplers import (
    BasicSamplerTestCase,
    RelativeSamplerTestCase,
    SingleOnlySamplerTestCase,
)

from fairtune.samplers import CollaborativeUCBSampler
from fairtune.samplers.collaborative import PLAN_KEY_PREFIX, ROUND_KEY, assign_points, g2sf_term
from fairtune.tenancy import TENANT_KEY, ask, cumulative_utilities, tenant_of, trials_by_tenant

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _system_attrs(study: optuna.Study) -> dict:
    return study._storage.get_study_system_attrs(study._study_id)


def _small(sampler: CollaborativeUCBSampler) -> CollaborativeUCBSampler:
    sampler._n_preliminary_samples = 32
    sampler._n_local_search = 1
    return sampler


class TestCollaborativeContract(BasicSamplerTestCase, RelativeSamplerTestCase, SingleOnlySamplerTestCase):
    @pytest.fixture
    def sampler(self) -> Callable[[], CollaborativeUCBSampler]:
        return lambda: _small(CollaborativeUCBSampler(tenants=2, n_startup_rounds=0, seed=0))


def _objective(trial: optuna.Trial) -> float:
    x = trial.suggest_float("x", 0.0, 1.0)
    y = trial.suggest_float("y", 0.0, 1.0)
    return -((x - 0.3) ** 2 + (y - 0.6) ** 2)


def test_assignment_rule_on_hand_made_numbers() -> None:
    lambda_ = np.array([5.0, -1.0, 2.0])  # tenant 1 is worst off, then 2, then 0
    mu = np.array([0.1, 0.9, 0.5])  # point 1 best, then 2, then 0
    order = assign_points(lambda_, mu)
    assert order.tolist() == [0, 1, 2]  # tenant 1 -> point 1, tenant 2 -> point 2, tenant 0 -> point 0
    order = assign_points(np.array([0.0, 3.0]), np.array([2.0, 1.0]))
    assert order.tolist() == [0, 1]
    # The G2SF term of that assignment, by hand: lambda sorted (0, 3) + mu desc (2, 1) = (2, 4);
    # sorted (2, 4) with w = (1, 0.5): 2 + 2 = 4.
    value = g2sf_term(torch.tensor([0.0, 3.0]), torch.tensor([[1.0, 2.0]]), torch.tensor([1.0, 0.5]))
    assert float(value) == pytest.approx(4.0)
    # The giving-the-best-to-the-worst-off assignment beats the other one for every rho < 1.
    assert 2 * 1.0 + 4 * 0.5 > 1 * 1.0 + 5 * 0.5 - 1e-12


def test_rho_one_is_db_gp_ucb() -> None:
    """With rho = 1 the first term is sum(lambda) + sum(mu): the assignment does not matter."""
    lambda_ = torch.tensor([0.0, 3.0, 7.0])
    mu = torch.tensor([[0.3, 2.0, -1.0], [5.0, 0.0, 0.1]])
    w = torch.ones(3)
    expected = lambda_.sum() + mu.sum(-1)
    torch.testing.assert_close(g2sf_term(lambda_, mu, w), expected)


def test_one_point_per_tenant_per_round_single_process() -> None:
    import json

    sampler = _small(CollaborativeUCBSampler(tenants=["a", "b", "c"], n_startup_rounds=1, seed=0))
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(_objective, n_trials=12)
    by_tenant = trials_by_tenant(study)
    assert {k: len(v) for k, v in by_tenant.items()} == {"a": 4, "b": 4, "c": 4}
    for tenant, trials in by_tenant.items():
        assert [t.system_attrs[ROUND_KEY] for t in trials] == [0, 1, 2, 3]
    attrs = _system_attrs(study)
    for round_ in (1, 2, 3):
        for tenant in "abc":
            planned = attrs[f"{PLAN_KEY_PREFIX}:{round_}:{tenant}"]
            trial = by_tenant[tenant][round_]
            assert json.loads(planned) == trial.params
    # Within a model round, the three tenants get three different points.
    for round_ in (1, 2, 3):
        points = {tuple(by_tenant[t][round_].params.values()) for t in "abc"}
        assert len(points) == 3


def test_plans_are_used_verbatim() -> None:
    import json

    sampler = _small(CollaborativeUCBSampler(tenants=2, n_startup_rounds=1, seed=1))
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: t.suggest_float("x", -1, 1) ** 2, n_trials=8)
    for trial in study.trials[2:]:
        key = f"{PLAN_KEY_PREFIX}:{trial.system_attrs[ROUND_KEY]}:{tenant_of(trial)}"
        assert json.loads(_system_attrs(study)[key]) == trial.params


def test_failed_trials_do_not_stall_rounds() -> None:
    sampler = _small(CollaborativeUCBSampler(tenants=["a", "b"], n_startup_rounds=1, seed=0))
    study = optuna.create_study(direction="maximize", sampler=sampler)

    def objective(trial: optuna.Trial) -> float:
        value = _objective(trial)
        if tenant_of(trial) == "b" and trial.number % 4 == 1:
            raise RuntimeError("tenant b's job crashed")
        return value

    study.optimize(objective, n_trials=10, catch=(RuntimeError,))
    by_tenant = trials_by_tenant(study, states=None)
    assert len(by_tenant["a"]) == len(by_tenant["b"]) == 5
    assert [t.system_attrs[ROUND_KEY] for t in by_tenant["a"]] == [0, 1, 2, 3, 4]
    assert any(t.state == optuna.trial.TrialState.FAIL for t in by_tenant["b"])
    utilities = cumulative_utilities(study)
    assert set(utilities) == {"a", "b"}


def test_tenancy_helpers() -> None:
    study = optuna.create_study(direction="minimize")
    trial = ask(study, "alice")
    assert tenant_of(trial) == "alice"
    x = trial.suggest_float("x", 0, 1)
    study.tell(trial, 2.0)
    study.tell(ask(study, "bob"), 3.0)
    assert cumulative_utilities(study) == {"alice": -2.0, "bob": -3.0}  # minimized: negated
    assert cumulative_utilities(study, tenants=["alice", "carol"]) == {"alice": -2.0, "carol": 0.0}
    assert 0 <= x <= 1
    with pytest.raises(ValueError, match="`tenant` must be a non-empty string"):
        ask(study, "")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tenants": 0}, "`tenants` must be positive"),
        ({"tenants": ["a", "a"]}, "`tenants` must be distinct"),
        ({"tenants": "abc"}, "`tenants` must be a list"),
        ({"tenants": 2, "rho": 0.0}, r"`rho` must be in \(0, 1\]"),
        ({"tenants": 2, "rho": 1.5}, r"`rho` must be in \(0, 1\]"),
        ({"tenants": 2, "c1": -1.0}, "`c1` must be positive"),
        ({"tenants": 2, "n_startup_rounds": -1}, "`n_startup_rounds` must be"),
    ],
)
def test_bad_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CollaborativeUCBSampler(**kwargs)


def test_unknown_tenant_tag_is_an_error() -> None:
    study = optuna.create_study(sampler=CollaborativeUCBSampler(tenants=["a", "b"], seed=0))
    trial = ask(study, "mallory")
    with pytest.raises(ValueError, match="not one of the sampler's `tenants`"):
        trial.suggest_float("x", 0, 1)


WORKER = textwrap.dedent(
    """
    import sys, optuna
    from fairtune.samplers import CollaborativeUCBSampler
    from fairtune.tenancy import ask
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage, tenant, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sampler = CollaborativeUCBSampler(tenants=["a", "b", "c"], n_startup_rounds=1, seed=0)
    sampler._n_preliminary_samples = 32
    sampler._n_local_search = 1
    study = optuna.load_study(study_name="shared", storage=storage, sampler=sampler)
    for _ in range(rounds):
        trial = ask(study, tenant)
        x = trial.suggest_float("x", 0.0, 1.0)
        y = trial.suggest_float("y", 0.0, 1.0)
        study.tell(trial, -((x - 0.3) ** 2 + (y - 0.6) ** 2))
    """
)


def test_three_processes_share_one_storage(tmp_path: Path) -> None:
    import json

    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    optuna.create_study(study_name="shared", storage=storage, direction="maximize")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    rounds = 4
    procs = [
        subprocess.Popen([sys.executable, str(script), storage, tenant, str(rounds)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for tenant in "abc"
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    study = optuna.load_study(study_name="shared", storage=storage)
    trials = study.get_trials()
    assert len(trials) == 3 * rounds
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)  # nothing lost
    per_round = Counter((tenant_of(t), t.system_attrs[ROUND_KEY]) for t in trials)
    assert set(per_round.values()) == {1}  # no tenant twice in a round
    assert set(per_round) == {(t, r) for t in "abc" for r in range(rounds)}  # every round complete
    for t in trials:
        r = t.system_attrs[ROUND_KEY]
        if r >= 1:  # model rounds: each tenant evaluated exactly its assigned point
            assert json.loads(_system_attrs(study)[f"{PLAN_KEY_PREFIX}:{r}:{tenant_of(t)}"]) == t.params
    assert TENANT_KEY == "fairtune:tenant"
