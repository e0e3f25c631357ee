from __future__ import annotations

import datetime
import itertools
import json
import logging
import math
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
import torch
from optuna.distributions import FloatDistribution
from optuna.testing.pytest_samplers import (
    BasicSamplerTestCase,
    RelativeSamplerTestCase,
    SingleOnlySamplerTestCase,
)
from optuna.trial import TrialState

from fairtune._gp.gp import fit_gp, standardize
from fairtune._storage import read_text
from fairtune.fairness.welfare import g2sf_weights, generalized_gini
from fairtune.samplers import CollaborativeUCBSampler
from fairtune.samplers.collaborative import (
    PLAN_KEY_PREFIX,
    ROUND_KEY,
    SEED_KEY,
    assign_points,
    exploration_weight,
    g2sf_term,
)
from fairtune.tenancy import (
    TENANT_KEY,
    ask,
    cumulative_utilities,
    tenant_of,
    trials_by_tenant,
)
from tests.conftest import small

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _system_attrs(study: optuna.Study) -> dict:
    return study._storage.get_study_system_attrs(study._study_id)


def _plans(study: optuna.Study) -> dict[int, dict[str, dict]]:
    """Stored plans: round -> tenant -> params."""
    attrs = _system_attrs(study)
    plans: dict[int, dict[str, dict]] = {}
    for key in attrs:
        parts = key[len(PLAN_KEY_PREFIX) + 1 :].split(":")
        if key.startswith(PLAN_KEY_PREFIX + ":") and len(parts) == 2:
            plans.setdefault(int(parts[0]), {})[parts[1]] = json.loads(read_text(attrs, key))
    return plans


def _small(sampler: Any) -> Any:
    return small(sampler, preliminary=32)


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
    assert assign_points(np.array([0.0, 3.0]), np.array([1.0, 2.0])).tolist() == [1, 0]
    assert assign_points(np.array([3.0, 0.0]), np.array([1.0, 2.0])).tolist() == [0, 1]
    # The G2SF term of the best assignment, by hand: lambda (0, 3), mu (1, 2): the worst-off
    # tenant gets mu = 2 -> (2, 4), sorted, weights (1, 0.5): 2 + 2 = 4. The other assignment
    # gives (1, 5) -> 1 + 2.5 = 3.5.
    value = g2sf_term(torch.tensor([0.0, 3.0]), torch.tensor([[1.0, 2.0]]), torch.tensor([1.0, 0.5]))
    assert float(value) == pytest.approx(4.0)


@pytest.mark.parametrize("rho", [0.2, 0.5, 0.9])
def test_g2sf_term_is_the_best_assignment(rho: float) -> None:
    """For a fixed batch, no assignment of points to tenants beats the rule (brute force)."""
    rng = np.random.RandomState(0)
    w = g2sf_weights(4, rho)
    for _ in range(20):
        lambda_, mu = rng.randn(4) * 2, rng.randn(4)
        best = max(
            generalized_gini(lambda_ + mu[list(p)], w=w, normalize=False)
            for p in itertools.permutations(range(4))
        )
        by_rule = generalized_gini(lambda_ + mu[assign_points(lambda_, mu)], w=w, normalize=False)
        term = g2sf_term(torch.from_numpy(np.sort(lambda_)), torch.from_numpy(mu), torch.from_numpy(w))
        assert by_rule == pytest.approx(best)
        assert float(term) == pytest.approx(best)


def test_rho_one_is_db_gp_ucb() -> None:
    """With rho = 1 the first term is sum(lambda) + sum(mu) (the assignment does not matter)
    and alpha_t = c1 d n log(c2 t), the DB-GP-UCB exploration weight, with or without vary_c1."""
    lambda_ = torch.tensor([0.0, 3.0, 7.0])
    mu = torch.tensor([[0.3, 2.0, -1.0], [5.0, 0.0, 0.1]])
    torch.testing.assert_close(g2sf_term(lambda_, mu, torch.ones(3)), lambda_.sum() + mu.sum(-1))
    for vary_c1 in (True, False):
        alpha = exploration_weight(n=3, d=4, rho=1.0, c1=0.1, c2=2.0, t=5, vary_c1=vary_c1)
        assert alpha == pytest.approx(0.1 * 4 * 3 * math.log(10.0))


def test_vary_c1_keeps_exploration_relative_to_g2sf_scale() -> None:
    n, d, t = 4, 3, 7
    reference = math.sqrt(exploration_weight(n=n, d=d, rho=1.0, c1=0.3, c2=1.5, t=t, vary_c1=True)) / n
    for rho in (0.2, 0.6):
        w = g2sf_weights(n, rho)
        varied = exploration_weight(n=n, d=d, rho=rho, c1=0.3, c2=1.5, t=t, vary_c1=True)
        fixed = exploration_weight(n=n, d=d, rho=rho, c1=0.3, c2=1.5, t=t, vary_c1=False)
        assert math.sqrt(varied) / w.sum() == pytest.approx(reference)
        assert fixed == pytest.approx(0.3 * d * (w**2).sum() * math.log(1.5 * t))
    assert exploration_weight(n=2, d=1, rho=0.5, c1=1.0, c2=0.5, t=1, vary_c1=False) == 0.0


def _history(direction: str) -> optuna.Study:
    """Two tenants with one parameter; "poor" evaluated the bad end, "rich" the good end."""
    sampler = _small(CollaborativeUCBSampler(tenants=["rich", "poor"], rho=0.2, n_startup_rounds=1, seed=0))
    study = optuna.create_study(direction=direction, sampler=sampler)
    sign = 1.0 if direction == "maximize" else -1.0
    distribution = FloatDistribution(0.0, 1.0)
    for tenant, xs in (("poor", (0.05, 0.15, 0.25)), ("rich", (0.75, 0.85, 0.95))):
        for x in xs:
            study.add_trial(
                optuna.trial.create_trial(
                    params={"x": x},
                    distributions={"x": distribution},
                    value=sign * x,
                    user_attrs={TENANT_KEY: tenant},
                )
            )
    return study


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_worst_off_tenant_gets_the_most_promising_point(direction: str) -> None:
    study = _history(direction)
    sampler = study.sampler
    assert isinstance(sampler, CollaborativeUCBSampler)
    assert cumulative_utilities(study) == pytest.approx({"poor": 0.45, "rich": 2.55})
    trial = ask(study, "rich")  # rich asks first; the plan covers both tenants
    trial.suggest_float("x", 0.0, 1.0)
    plan = _plans(study)[3]
    assert set(plan) == {"rich", "poor"}
    # Posterior means at the two planned points, from the same (deterministic) GP fit.
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    X = torch.tensor([[t.params["x"]] for t in complete], dtype=torch.float64)
    y, mean, std = standardize(np.array([(1.0 if direction == "maximize" else -1.0) * t.value for t in complete]))
    gp = fit_gp(X, torch.from_numpy(y), np.array([False]))
    mu = gp.posterior(torch.tensor([[plan["poor"]["x"]], [plan["rich"]["x"]]], dtype=torch.float64))[0]
    assert float(mu[0]) >= float(mu[1])
    assert trial.params == plan["rich"]


def test_one_point_per_tenant_per_round_single_process() -> None:
    sampler = _small(CollaborativeUCBSampler(tenants=["a", "b", "c"], n_startup_rounds=1, seed=0))
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.optimize(_objective, n_trials=12)  # untagged trials: handed out round robin
    by_tenant = trials_by_tenant(study)
    assert {k: len(v) for k, v in by_tenant.items()} == {"a": 4, "b": 4, "c": 4}
    for trials in by_tenant.values():
        assert [t.system_attrs[ROUND_KEY] for t in trials] == [0, 1, 2, 3]
    plans = _plans(study)
    assert sorted(plans) == [1, 2, 3]  # round 0 is random: no plan
    for round_ in (1, 2, 3):
        assert set(plans[round_]) == {"a", "b", "c"}
        for tenant in "abc":
            assert by_tenant[tenant][round_].params == plans[round_][tenant]
        # Within a round, the three tenants get three different points.
        assert len({tuple(by_tenant[t][round_].params.values()) for t in "abc"}) == 3
    # Startup points differ between tenants too (each tenant and round has its own seed).
    assert len({tuple(by_tenant[t][0].params.values()) for t in "abc"}) == 3


def test_no_tenant_shares_a_point_in_a_round_of_a_small_discrete_space() -> None:
    sampler = _small(CollaborativeUCBSampler(tenants=["a", "b", "c"], n_startup_rounds=1, seed=0))
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: (t.suggest_int("k", 0, 5) - 2) ** 2, n_trials=15)
    by_tenant = trials_by_tenant(study)
    for round_ in range(1, 5):  # model rounds: three different values of k among 6
        assert len({by_tenant[t][round_].params["k"] for t in "abc"}) == 3
    # Fewer configurations than tenants: repeats are unavoidable, and nothing breaks.
    study = optuna.create_study(sampler=_small(CollaborativeUCBSampler(tenants=3, n_startup_rounds=1, seed=0)))
    study.optimize(lambda t: float(t.suggest_categorical("c", ["u", "v"]) == "u"), n_trials=9)
    assert all(t.state == TrialState.COMPLETE for t in study.trials)


def test_threads_of_one_process_share_rounds_correctly() -> None:
    sampler = _small(CollaborativeUCBSampler(tenants=["a", "b", "c"], n_startup_rounds=1, seed=0))
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: (t.suggest_float("x", 0, 1) - 0.3) ** 2, n_trials=12, n_jobs=3)
    by_tenant = trials_by_tenant(study)
    plans = _plans(study)
    for tenant in "abc":
        assert sorted(t.system_attrs[ROUND_KEY] for t in by_tenant[tenant]) == [0, 1, 2, 3]
        for t in by_tenant[tenant]:
            if t.system_attrs[ROUND_KEY] >= 1:
                assert t.params == plans[t.system_attrs[ROUND_KEY]][tenant]


def test_untagged_trials_sampled_out_of_order_take_distinct_rounds() -> None:
    """As with threads: later-numbered untagged trials may reach their first suggest first."""
    sampler = _small(CollaborativeUCBSampler(tenants=["a", "b", "c"], n_startup_rounds=1, seed=0))
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)  # round 0
    trials = [study.ask() for _ in range(6)]  # numbers 3..8, untagged
    for i in (0, 1, 5, 2, 3, 4):
        trials[i].suggest_float("x", 0, 1)
    for trial in trials:
        study.tell(trial, trial.params["x"])
    slots = [(tenant_of(t), t.system_attrs[ROUND_KEY]) for t in study.trials[3:]]
    assert sorted(slots) == [(t, r) for t in "abc" for r in (1, 2)]
    plans = _plans(study)
    for t in study.trials[3:]:
        assert t.params == plans[t.system_attrs[ROUND_KEY]][tenant_of(t)]


def test_startup_points_are_seeded_per_tenant_and_round() -> None:
    def run(seed: int | None, first: str) -> dict[str, dict]:
        sampler = CollaborativeUCBSampler(tenants=["a", "b"], n_startup_rounds=2, seed=seed)
        study = optuna.create_study(sampler=sampler)
        points = {}
        for tenant in (first, "b" if first == "a" else "a"):
            trial = ask(study, tenant)
            points[tenant] = {"x": trial.suggest_float("x", 0, 1), "n": trial.suggest_int("n", 0, 99)}
            study.tell(trial, 0.0)
        return points

    # The same tenant gets the same point whoever asks first; the two tenants differ.
    assert run(3, "a") == run(3, "b")
    assert run(3, "a")["a"] != run(3, "a")["b"]
    assert run(3, "a") != run(4, "a")
    # Without a seed, a random base seed is stored in the study for every process to share.
    study = optuna.create_study(sampler=CollaborativeUCBSampler(tenants=2))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    assert isinstance(_system_attrs(study)[SEED_KEY], int)


def test_asynchronous_round_uses_one_snapshot() -> None:
    """A plan does not depend on when it is computed: results arriving after the round began
    are pending points, and a tenant asking later gets its entry of the same batch."""

    def make() -> CollaborativeUCBSampler:
        return _small(CollaborativeUCBSampler(tenants=["a", "b", "c"], rho=0.5, n_startup_rounds=1, seed=7))

    study = optuna.create_study(direction="maximize", sampler=make())
    round0 = {t: ask(study, t) for t in "abc"}
    values = {}
    for tenant, trial in round0.items():
        values[tenant] = _objective(trial)
    study.tell(round0["a"], values["a"])
    study.tell(round0["b"], values["b"])
    # a starts round 1 while c's round-0 trial still runs: c's point is pending, not data.
    a1 = ask(study, "a")
    a1.suggest_float("x", 0.0, 1.0)
    a1.suggest_float("y", 0.0, 1.0)
    plan = _plans(study)[1]
    assert set(plan) == {"a", "b", "c"} and a1.params == plan["a"]
    space = {"x": FloatDistribution(0.0, 1.0), "y": FloatDistribution(0.0, 1.0)}
    study.tell(round0["c"], values["c"])  # finishes after round 1 began
    # Another process computing round 1 now, from scratch, gets the same plan.
    recomputed = make()._compute_plan(study, 1, space)
    assert recomputed == plan
    # Had c's result been used, the plan would differ (the snapshot rule matters here).
    later = make()._compute_plan(study, 2, space)
    assert later != plan
    # b and c ask while a is still running round 1: each gets its own entry of the batch.
    for tenant in "bc":
        trial = ask(study, tenant)
        trial.suggest_float("x", 0.0, 1.0)
        trial.suggest_float("y", 0.0, 1.0)
        assert trial.params == plan[tenant]
    assert len({tuple(p.values()) for p in plan.values()}) == 3


def test_stored_plan_entries_are_never_replaced() -> None:
    sampler = _small(CollaborativeUCBSampler(tenants=["a", "b"], n_startup_rounds=1, seed=0))
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: t.suggest_float("x", -1, 1) ** 2, n_trials=4)
    plan = _plans(study)[1]
    sampler._write_plan(study, 1, {"a": {"x": 0.123}, "b": {"x": -0.5}})
    assert _plans(study)[1] == plan


def test_plans_are_used_verbatim() -> None:
    sampler = _small(CollaborativeUCBSampler(tenants=2, n_startup_rounds=1, seed=1))
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: t.suggest_float("x", -1, 1) ** 2, n_trials=8)
    plans = _plans(study)
    for trial in study.trials[2:]:
        assert plans[trial.system_attrs[ROUND_KEY]][tenant_of(trial)] == trial.params


def test_failed_trials_do_not_stall_rounds() -> None:
    """Rule: a failed trial uses up its tenant's slot in its round; the tenant's next trial
    belongs to the next round, so a round is done once every tenant has a finished trial."""
    sampler = _small(CollaborativeUCBSampler(tenants=["a", "b"], n_startup_rounds=1, seed=0))
    study = optuna.create_study(direction="maximize", sampler=sampler)

    def objective(trial: optuna.Trial) -> float:
        value = _objective(trial)
        round_ = trial.storage.get_trial_system_attrs(trial._trial_id)[ROUND_KEY]
        if tenant_of(trial) == "b" and round_ in (1, 2):
            raise RuntimeError("tenant b's job crashed")
        return value

    study.optimize(objective, n_trials=10, catch=(RuntimeError,))
    by_tenant = trials_by_tenant(study, states=None)
    for tenant in "ab":
        assert [t.system_attrs[ROUND_KEY] for t in by_tenant[tenant]] == [0, 1, 2, 3, 4]
    assert [t.state for t in by_tenant["b"]][1:3] == [TrialState.FAIL, TrialState.FAIL]
    assert all(t.state == TrialState.COMPLETE for t in by_tenant["a"])
    plans = _plans(study)
    for round_ in (1, 2, 3, 4):  # every model round was planned and handed out, failures or not
        for tenant in "ab":
            assert by_tenant[tenant][round_].params == plans[round_][tenant]
    assert set(cumulative_utilities(study)) == {"a", "b"}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tenants": 0}, r"`tenants` must be a number of tenants \(at least 1\) or distinct "
                          r"names \(strings, at least one\), but got tenants=0\."),
        ({"tenants": ["a", "a"]}, r"distinct names .*, but got tenants=\['a', 'a'\]\."),
        ({"tenants": "abc"}, "distinct names .*, but got tenants='abc'."),
        ({"tenants": 2, "rho": 0.0}, r"`rho` must be in \(0, 1\], but got rho=0.0"),
        ({"tenants": 2, "rho": 1.5}, r"`rho` must be in \(0, 1\], but got rho=1.5"),
        ({"tenants": 2, "rho": True}, r"`rho` must be in \(0, 1\], but got rho=True"),
        ({"tenants": 2, "rho": 0.5, "seed": "a"}, "`seed` must be None or an integer"),
        ({"tenants": 2, "c1": -1.0}, "`c1` must be None or a finite number > 0, but got c1=-1.0"),
        ({"tenants": 2, "c2": 0}, "`c2` must be None or a finite number > 0"),
        ({"tenants": 2, "n_startup_rounds": -1}, "`n_startup_rounds` must be"),
    ],
)
def test_bad_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CollaborativeUCBSampler(**kwargs)


def test_default_startup_rounds() -> None:
    assert CollaborativeUCBSampler(tenants=3)._n_startup_rounds == 4  # ceil(10 / 3)
    assert CollaborativeUCBSampler(tenants=50)._n_startup_rounds == 1
    assert CollaborativeUCBSampler(tenants=["x", "y"]).tenants == ["x", "y"]


def test_unknown_tenant_tag_is_an_error() -> None:
    study = optuna.create_study(sampler=CollaborativeUCBSampler(tenants=["a", "b"], seed=0))
    trial = ask(study, "mallory")
    with pytest.raises(ValueError, match="not one of the sampler's `tenants`"):
        trial.suggest_float("x", 0, 1)


def test_constraints_are_not_dropped_silently(caplog: pytest.LogCaptureFixture) -> None:
    def objective(trial: optuna.Trial) -> float:
        value = _objective(trial)
        trial.set_constraint("unfairness", trial.params["x"] - 0.5)
        return value

    study = optuna.create_study(
        direction="maximize", sampler=_small(CollaborativeUCBSampler(tenants=2, seed=0))
    )
    with caplog.at_level(logging.WARNING, logger="fairtune"):
        study.optimize(objective, n_trials=16)
    warned = [r for r in caplog.records if "does not model constraints" in r.getMessage()]
    assert len(warned) == 1 and "unfairness" in warned[0].getMessage()  # once per study
    assert study.best_trial.params["x"] <= 0.5  # Optuna still picks the best feasible trial
    caplog.clear()
    plain = optuna.create_study(
        direction="maximize", sampler=_small(CollaborativeUCBSampler(tenants=2, seed=0))
    )
    with caplog.at_level(logging.WARNING, logger="fairtune"):
        plain.optimize(_objective, n_trials=16)
    assert not any("constraints" in r.getMessage() for r in caplog.records)


def test_a_round_plan_does_not_depend_on_whether_a_lagging_tenant_has_started() -> None:
    # Tenant c is one round behind. Tenant a's round-2 plan is computed once before c starts
    # its round 1 and, in a copy of the study, once after (as another process would, while c's
    # trial runs). c's round-1 point is pending in both cases: at its stored plan entry before
    # the trial exists, at the trial's point after. So both computations give the same plan.
    def make() -> optuna.Study:
        sampler = _small(CollaborativeUCBSampler(tenants=["a", "b", "c"], n_startup_rounds=1,
                                                 seed=0))
        return optuna.create_study(direction="maximize", sampler=sampler)

    def evaluate(study: optuna.Study, tenant: str, finish: bool = True) -> dict:
        trial = ask(study, tenant)
        x, y = trial.suggest_float("x", 0.0, 1.0), trial.suggest_float("y", 0.0, 1.0)
        if finish:
            study.tell(trial, -((x - 0.3) ** 2 + (y - 0.6) ** 2))
        return trial.params

    study = make()
    for tenant in ["a", "b", "c", "a", "b"]:  # round 0 for all, round 1 for a and b
        evaluate(study, tenant)
    twin = make()
    twin.add_trials(study.trials)
    for key, value in _system_attrs(study).items():
        twin._storage.set_study_system_attr(twin._study_id, key, value)

    before = evaluate(study, "a")  # c has no round-1 trial yet
    c_point = evaluate(twin, "c", finish=False)  # c starts round 1 and is still running
    assert c_point == _plans(study)[1]["c"]
    after = evaluate(twin, "a")
    assert after == before
    assert _plans(twin)[2] == _plans(study)[2]
    assert after != c_point


def test_a_result_stored_late_does_not_change_a_round_plan() -> None:
    # Tenant c finishes its round-1 trial just before tenant a creates round 2's first trial,
    # but c's result reaches the storage after a's new trial (a storage's commit lags the
    # clock that stamps it). A process that computes round 2 before the result arrives and
    # one that computes it after must still give the same plan: the round's first trial
    # records, at creation, which trials had finished.
    def make() -> optuna.Study:
        sampler = _small(CollaborativeUCBSampler(tenants=["a", "b", "c"], n_startup_rounds=1,
                                                 seed=0))
        return optuna.create_study(direction="maximize", sampler=sampler)

    def value(x: float, y: float) -> float:
        return -((x - 0.3) ** 2 + (y - 0.6) ** 2)

    def evaluate(study: optuna.Study, tenant: str) -> optuna.Trial:
        trial = ask(study, tenant)
        x, y = trial.suggest_float("x", 0.0, 1.0), trial.suggest_float("y", 0.0, 1.0)
        study.tell(trial, value(x, y))
        return trial

    study = make()
    for tenant in ["a", "b", "c", "a", "b"]:  # round 0 for all, round 1 for a and b
        evaluate(study, tenant)
    late = ask(study, "c")  # c's round-1 trial, running
    late_params = {n: late.suggest_float(n, 0.0, 1.0) for n in ("x", "y")}
    time.sleep(0.01)
    first = ask(study, "a")  # round 2 begins while c's result is on its way
    first.suggest_float("x", 0.0, 1.0)
    planned = _plans(study)[2]

    # What another process sees once c's result has arrived: stamped before round 2 began.
    start = study.trials[first.number].datetime_start
    trials = []
    for t in study.trials:
        if t.number == late.number:
            t = optuna.trial.create_trial(
                state=TrialState.COMPLETE, value=value(**late_params), params=t.params,
                distributions=t.distributions, user_attrs=t.user_attrs,
                system_attrs=t.system_attrs,
            )
            t.datetime_start = start - datetime.timedelta(milliseconds=5)
            t.datetime_complete = start - datetime.timedelta(milliseconds=1)
        trials.append(t)
    twin = make()
    twin.add_trials(trials)
    for key, stored in _system_attrs(study).items():
        if not key.startswith(f"{PLAN_KEY_PREFIX}:2:"):
            twin._storage.set_study_system_attr(twin._study_id, key, stored)
    trial = ask(twin, "b")
    params = {n: trial.suggest_float(n, 0.0, 1.0) for n in ("x", "y")}
    assert _plans(twin)[2] == planned
    assert params == planned["b"]


WORKER = textwrap.dedent(
    """
    import sys, optuna
    from optuna.storages.journal import JournalFileBackend, JournalStorage
    from fairtune.samplers import CollaborativeUCBSampler
    from fairtune.tenancy import ask
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    url, tenant, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if url.startswith("journal:"):
        storage = JournalStorage(JournalFileBackend(url[len("journal:"):]))
    else:
        storage = url
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


@pytest.mark.processes
@pytest.mark.parametrize("backend", ["sqlite", "journal", "postgres"])
def test_three_processes_share_one_storage(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend in ("sqlite", "postgres"):
        url = (f"sqlite:///{tmp_path / 'shared.db'}" if backend == "sqlite"
               else request.getfixturevalue("postgres_url"))
        storage: str | optuna.storages.BaseStorage = url
    else:
        path = str(tmp_path / "shared.log")
        url = f"journal:{path}"
        storage = optuna.storages.journal.JournalStorage(
            optuna.storages.journal.JournalFileBackend(path)
        )
    optuna.create_study(study_name="shared", storage=storage, direction="maximize")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    rounds = 3 if backend == "journal" else 4
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), url, tenant, str(rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tenant in "abc"
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    study = optuna.load_study(study_name="shared", storage=storage)
    trials = study.get_trials()
    assert len(trials) == 3 * rounds
    assert all(t.state == TrialState.COMPLETE for t in trials)  # nothing lost
    per_round = Counter((tenant_of(t), t.system_attrs[ROUND_KEY]) for t in trials)
    assert set(per_round.values()) == {1}  # no tenant twice in a round
    assert set(per_round) == {(t, r) for t in "abc" for r in range(rounds)}  # every round complete
    plans = _plans(study)
    assert sorted(plans) == list(range(1, rounds))
    for t in trials:
        r = t.system_attrs[ROUND_KEY]
        if r >= 1:  # model rounds: each tenant evaluated exactly its entry of the stored plan
            assert set(plans[r]) == {"a", "b", "c"}
            assert plans[r][tenant_of(t)] == t.params
    # No point was handed out twice, in startup or model rounds.
    assert len({tuple(t.params.values()) for t in trials}) == len(trials)


def _mixed_objective(trial: optuna.Trial) -> float:
    x = trial.suggest_float("x", 0.0, 1.0)
    k = trial.suggest_int("k", 0, 9)
    return (x - 0.3) ** 2 + (k - 4) ** 2


def test_reseed_rng_changes_the_draws_of_a_new_study() -> None:
    """As Optuna's test_reseed_rng_change_sampling: a seeded sampler that was reseeded samples a
    new study differently (before, every draw came from `seed` and reseeding changed nothing)."""

    def run(reseed: bool) -> list[dict]:
        sampler = _small(CollaborativeUCBSampler(tenants=2, n_startup_rounds=1, seed=1))
        if reseed:
            sampler.reseed_rng()
        study = optuna.create_study(sampler=sampler)
        study.optimize(_mixed_objective, n_trials=4)
        return [t.params for t in study.trials]

    first = run(reseed=False)
    assert run(reseed=False) == first  # reproducible from the seed
    reseeded = run(reseed=True)
    assert reseeded[:2] != first[:2]  # random startup round
    assert reseeded[2:] != first[2:]  # model round (its plan's optimizer is seeded too)


def test_a_reseeded_sampler_keeps_the_rounds_of_a_shared_study() -> None:
    """The study's base seed is stored by its first sampler: a reseeded (or unseeded) process
    joining the study computes the same startup points and plans as the other processes."""
    sampler = _small(CollaborativeUCBSampler(tenants=["a", "b"], n_startup_rounds=2, seed=5))
    study = optuna.create_study(sampler=sampler)
    study.optimize(_mixed_objective, n_trials=6)  # rounds 0, 1 random, round 2 planned
    assert _system_attrs(study)[SEED_KEY] == 5
    space = {"k": optuna.distributions.IntDistribution(0, 9), "x": FloatDistribution(0.0, 1.0)}
    for other in (CollaborativeUCBSampler(tenants=["a", "b"], n_startup_rounds=2, seed=5),
                  CollaborativeUCBSampler(tenants=["a", "b"], n_startup_rounds=2)):
        other = _small(other)
        other.reseed_rng()
        for trial in study.trials[:4]:  # the random rounds: every process draws the same point
            tenant, round_ = tenant_of(trial), trial.system_attrs[ROUND_KEY]
            assert other._assigned_point(study, trial, tenant, round_, space) == trial.params
        assert other._compute_plan(study, 2, space) == _plans(study)[2]
        # Joining the study (as a new process would), the reseeded sampler continues its rounds.
        study.sampler = other
        study.optimize(_mixed_objective, n_trials=2)
        plans = _plans(study)
        for trial in study.trials[-2:]:
            assert trial.params == plans[trial.system_attrs[ROUND_KEY]][tenant_of(trial)]
    assert _system_attrs(study)[SEED_KEY] == 5
