"""Tests of MTKBSampler (MT-KB and MT-BKB, Chowdhury & Gopalan 2021)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import optuna
import pytest
import torch
from optuna.testing.pytest_samplers import (
    BasicSamplerTestCase,
    MultiObjectiveSamplerTestCase,
    RelativeSamplerTestCase,
)
from optuna.trial import TrialState

import fairtune
from fairtune._gp import multitask as mt
from fairtune._gp.gp import standardize
from fairtune._storage import TASK_CORRELATION_KEY, stored_task_correlation
from fairtune.samplers import MTKBSampler
from tests.conftest import small

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _small(sampler: Any) -> Any:
    return small(sampler)


class TestMTKBContract(BasicSamplerTestCase, RelativeSamplerTestCase, MultiObjectiveSamplerTestCase):
    @pytest.fixture
    def sampler(self) -> Callable[[], MTKBSampler]:
        return lambda: _small(MTKBSampler(n_startup_trials=1, seed=0))


class TestMTBKBContract(BasicSamplerTestCase, RelativeSamplerTestCase, MultiObjectiveSamplerTestCase):
    @pytest.fixture
    def sampler(self) -> Callable[[], MTKBSampler]:
        return lambda: _small(MTKBSampler(budgeted=True, n_startup_trials=1, seed=0))


def test_lazy_export() -> None:
    assert fairtune.MTKBSampler is MTKBSampler


def test_single_objective_is_gp_ucb() -> None:
    sampler = _small(MTKBSampler(seed=0, n_startup_trials=3, beta=2.0))
    study = optuna.create_study(direction="minimize", sampler=sampler)
    dist = {"x": optuna.distributions.IntDistribution(0, 30)}
    xs = [0, 4, 9, 17, 25, 30]
    values = [math.sin(x / 5.0) for x in xs]
    for x, v in zip(xs, values):
        study.add_trial(optuna.trial.create_trial(params={"x": x}, distributions=dist, value=v))
    chosen = study.ask(dist).params["x"]
    # The same model by hand: minimized -> negated, standardized, fitted; UCB over the grid.
    X = torch.tensor([[(x + 0.5) / 31] for x in xs], dtype=torch.float64)
    y, _, _ = standardize(-np.array(values))
    params = mt.fit_icm(X, torch.from_numpy(y)[:, None], np.zeros(1, dtype=bool))
    model = mt.ICMGP(X, torch.from_numpy(y)[:, None], params, np.zeros(1, dtype=bool))
    grid = torch.tensor([[(x + 0.5) / 31] for x in range(31)], dtype=torch.float64)
    mean, var = model.posterior(grid)
    ucb = (mean[:, 0] + 2.0 * var.sqrt()).numpy()
    assert chosen == int(np.argmax(ucb))


def test_pending_trials_are_not_proposed_again() -> None:
    for budgeted in (False, True):
        sampler = _small(MTKBSampler(seed=0, n_startup_trials=3, budgeted=budgeted))
        study = optuna.create_study(directions=["minimize", "maximize"], sampler=sampler)
        dist = {"x": optuna.distributions.IntDistribution(0, 20)}
        for x in (0, 10, 20):
            study.add_trial(optuna.trial.create_trial(
                params={"x": x}, distributions=dist, values=[abs(x - 7), -abs(x - 12)]
            ))
        xs = [study.ask(dist).params["x"] for _ in range(5)]  # five workers ask at once
        assert len(set(xs)) == 5


def test_survives_failed_nan_and_pruned_trials() -> None:
    sampler = _small(MTKBSampler(seed=0, n_startup_trials=3))
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        x = trial.suggest_float("x", 0.0, 1.0)
        kind = trial.number % 4
        if kind == 1:
            raise RuntimeError("training crashed")
        if kind == 2:
            return float("nan"), x
        if kind == 3:
            raise optuna.TrialPruned()
        return x, x * x

    study.optimize(objective, n_trials=16, catch=(RuntimeError,))
    states = [t.state for t in study.trials]
    assert states.count(TrialState.FAIL) == 8
    assert states.count(TrialState.PRUNED) == 4
    assert states.count(TrialState.COMPLETE) == 4


def test_dynamic_search_space_falls_back_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    sampler = _small(MTKBSampler(seed=0, n_startup_trials=2))
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        x = trial.suggest_float("x", 0, 1)
        if trial.number % 2:
            return x + trial.suggest_float("extra", 0, 1), -x
        return x, -x

    with caplog.at_level(logging.WARNING, logger="fairtune"):
        study.optimize(objective, n_trials=6)
    assert "extra" in caplog.text and "dynamic search spaces" in caplog.text
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 6


def test_constraints_are_honoured() -> None:
    sampler = _small(MTKBSampler(seed=1, n_startup_trials=4))
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        x = trial.suggest_float("x", 0.0, 1.0)
        trial.set_constraint("c", x - 0.4)  # feasible iff x <= 0.4
        return x, 1.0 - (x - 0.2) ** 2

    study.optimize(objective, n_trials=14)
    model_based = [t.params["x"] for t in study.trials[4:]]
    # Objective 1 pulls towards x = 1, which is infeasible: the model stays (mostly) below 0.4.
    assert sum(x <= 0.45 for x in model_based) >= 8
    assert study.best_trials and all(t.constraints["c"] <= 0 for t in study.best_trials)


def test_infeasible_start_searches_for_feasibility() -> None:
    sampler = _small(MTKBSampler(seed=0, n_startup_trials=2))
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    dist = {"x": optuna.distributions.FloatDistribution(0, 1)}
    for x in (0.5, 0.7, 0.9, 1.0):
        study.add_trial(optuna.trial.create_trial(
            params={"x": x}, distributions=dist, values=[x, -x], constraints={"c": x - 0.2}
        ))
    assert study.ask(dist).params["x"] < 0.5


def test_dirac_weights_steer_the_search() -> None:
    finals = {}
    for w in ([0.95, 0.05], [0.05, 0.95]):
        sampler = _small(MTKBSampler(seed=0, n_startup_trials=4, weights=w, scalarization="linear"))
        study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)

        def objective(trial: optuna.Trial) -> tuple[float, float]:
            x = trial.suggest_float("x", 0.0, 1.0)
            return -((x - 0.15) ** 2), (x - 0.85) ** 2

        study.optimize(objective, n_trials=14)
        finals[w[0]] = float(np.median([t.params["x"] for t in study.trials[-6:]]))
    assert finals[0.95] < 0.4 < 0.6 < finals[0.05]


def test_utility_units_decide_how_the_weights_trade_objectives_off() -> None:
    # Equal weights; the second objective's values are 1000 times larger. In standardized units
    # the trade-off is balanced (the best x is about 0.5); in the objectives' own units the
    # second objective dominates (the best x is 0.8 - 0.6 / 1001, about 0.8).
    finals = {}
    for units in ("standardized", "objectives"):
        sampler = _small(MTKBSampler(seed=0, n_startup_trials=4, weights=[0.5, 0.5],
                                     scalarization="linear", utility_units=units))
        study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)

        def objective(trial: optuna.Trial) -> tuple[float, float]:
            x = trial.suggest_float("x", 0.0, 1.0)
            return -((x - 0.2) ** 2), 1000.0 * (x - 0.8) ** 2

        study.optimize(objective, n_trials=14)
        finals[units] = float(np.median([t.params["x"] for t in study.trials[-6:]]))
    assert 0.35 < finals["standardized"] < 0.65
    assert finals["objectives"] > 0.75


def test_callable_weight_prior_and_reference_point() -> None:
    calls = []

    def prior(rng: np.random.RandomState) -> np.ndarray:
        calls.append(1)
        return rng.dirichlet([5.0, 1.0], size=4)

    sampler = _small(MTKBSampler(seed=0, n_startup_trials=3, weights=prior,
                                 reference_point=[-2.0, 3.0]))
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.optimize(lambda t: (t.suggest_float("x", 0, 1), t.suggest_float("y", 0, 1)), n_trials=6)
    assert len(calls) == 3


def test_task_correlation_sign_and_storage() -> None:
    for sign in (1.0, -1.0):
        sampler = _small(MTKBSampler(seed=0, n_startup_trials=12))
        study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)

        def objective(trial: optuna.Trial) -> tuple[float, float]:
            x = trial.suggest_float("x", 0.0, 1.0)
            y = trial.suggest_float("y", 0.0, 1.0)
            f = math.sin(5 * x) + y
            return f, sign * f + 0.1 * math.cos(7 * y)

        study.optimize(objective, n_trials=12)
        R = sampler.task_correlation(study)
        assert R.shape == (2, 2) and sign * R[0, 1] > 0.5
        np.testing.assert_allclose(stored_task_correlation(study), R, atol=1e-6)
        assert TASK_CORRELATION_KEY in study._storage.get_study_system_attrs(study._study_id)
    with pytest.raises(ValueError, match="at least two complete trials"):
        sampler.task_correlation(optuna.create_study(directions=["maximize", "maximize"]))


def test_task_correlation_is_of_the_objectives_as_the_study_defines_them() -> None:
    # f1 = f2 = the same function, one maximized and one minimized: correlation +1, in Python,
    # in the storage and in the public reader alike (the model itself sees f2 negated).
    sampler = _small(MTKBSampler(seed=0, n_startup_trials=10))
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        x = trial.suggest_float("x", 0.0, 1.0)
        return math.sin(4 * x), math.sin(4 * x)

    study.optimize(objective, n_trials=10)
    R = sampler.task_correlation(study)
    assert R[0, 1] > 0.9
    np.testing.assert_allclose(MTKBSampler.stored_task_correlation(study), R, atol=1e-6)
    assert MTKBSampler.stored_task_correlation(optuna.create_study()) is None


def test_budgeted_dictionary_is_a_subset() -> None:
    sampler = _small(MTKBSampler(seed=0, n_startup_trials=4, budgeted=True, q=1.0))
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    study.optimize(lambda t: (t.suggest_float("x", 0, 1), -t.suggest_float("x", 0, 1)),
                   n_trials=12)
    assert sampler.last_dictionary_size is not None
    assert 1 <= sampler.last_dictionary_size <= 11


@pytest.mark.parametrize(("q", "expected"), [("unset", 4.0), (None, "theorem"), (2.5, 2.5)])
def test_budgeted_q_reaches_the_dictionary(
    monkeypatch: pytest.MonkeyPatch, q: object, expected: object
) -> None:
    seen: list[tuple[int, float]] = []
    sample = mt.sample_dictionary

    def recording(model, q, rng):  # type: ignore[no-untyped-def]
        seen.append((len(model.X), q))
        return sample(model, q, rng)

    monkeypatch.setattr(mt, "sample_dictionary", recording)
    kwargs = {} if q == "unset" else {"q": q}
    sampler = _small(MTKBSampler(seed=0, n_startup_trials=4, budgeted=True, **kwargs))
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    study.optimize(lambda t: (t.suggest_float("x", 0, 1), -t.suggest_float("x", 0, 1)),
                   n_trials=7)
    assert [t for t, _ in seen] == [4, 5, 6]
    for t, used in seen:
        assert used == (mt.default_q(t) if expected == "theorem" else expected)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scalarization": "max"}, r"`scalarization` must be one of \['linear', 'chebyshev'\]"),
        ({"n_weight_samples": 0}, "`n_weight_samples` must be a positive integer"),
        ({"weights": [-1.0, 2.0]}, "`weights` must be None"),
        ({"reference_point": [math.nan]}, "`reference_point` must be None"),
        ({"task_covariance": "shared"}, r"one of \['learned', 'independent'\]"),
        ({"task_covariance": 1.5}, r"must be in \[0, 1\]"),
        ({"task_covariance": [[1.0, 2.0], [2.0, 1.0]]}, "positive semi-definite"),
        ({"q": 0.5}, "`q` must be None or a finite number >= 1"),
        ({"beta": -1.0}, "`beta` must be None"),
        ({"width": "trace"}, r"`width` must be one of \['scalarized', 'objectives', "
                             r"'norm'\], but got width='trace'"),
        ({"budgeted": 1}, "`budgeted` must be a bool"),
        ({"utility_units": "raw"}, r"`utility_units` must be one of \['standardized', "
                                   r"'objectives'\], but got utility_units='raw'"),
    ],
)
def test_bad_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        MTKBSampler(**kwargs)


@pytest.mark.parametrize("width", [None, "objectives", "norm"])
def test_fits_restart_on_a_geometric_schedule_and_width_reaches_the_acquisition(
    monkeypatch: pytest.MonkeyPatch, width: str | None
) -> None:
    import fairtune._gp.multitask as mt

    restarts: list[tuple[int, bool]] = []
    widths: list[str] = []
    fit, ucb = mt.fit_icm, mt.mtkb_ucb

    def recording_fit(X, Y, is_cat, **kwargs):  # type: ignore[no-untyped-def]
        restarts.append((len(X), kwargs["restart"]))
        return fit(X, Y, is_cat, **kwargs)

    def recording_ucb(*args):  # type: ignore[no-untyped-def]
        widths.append(args[-1])
        return ucb(*args)

    monkeypatch.setattr(mt, "fit_icm", recording_fit)
    monkeypatch.setattr(mt, "mtkb_ucb", recording_ucb)
    kwargs = {} if width is None else {"width": width}
    sampler = MTKBSampler(seed=0, n_startup_trials=5, **kwargs)  # type: ignore[arg-type]
    sampler._n_preliminary_samples = 64
    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.optimize(lambda t: (t.suggest_float("x", 0, 1), (t.suggest_float("x", 0, 1) - 0.3) ** 2),
                   n_trials=20)
    # The first fit has no warm start; then a fit from the defaults too whenever the number of
    # trials has grown by a quarter: at 5, 7 (>= 6.25), 9, 12, 15 and 19 trials.
    assert [t for t, r in restarts if r] == [5, 7, 9, 12, 15, 19]
    assert len(restarts) == 15
    assert widths == [width or "scalarized"] * 15


def test_arguments_must_match_the_number_of_objectives() -> None:
    sampler = MTKBSampler(weights=[0.5, 0.3, 0.2], n_startup_trials=1)
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    with pytest.raises(ValueError, match="one entry per objective"):
        study.optimize(lambda t: (t.suggest_float("x", 0, 1), 0.0), n_trials=2)


def test_many_objectives_correlation_is_stored_in_chunks() -> None:
    # 20 x 20 correlations are longer than an RDB attribute holds: the storage helpers chunk them.
    sampler = MTKBSampler(seed=0)
    study = optuna.create_study(directions=["maximize"] * 20, sampler=sampler)
    dist = {"x": optuna.distributions.FloatDistribution(0, 1)}
    for x in (0.1, 0.4, 0.7, 0.9):
        study.add_trial(optuna.trial.create_trial(
            params={"x": x}, distributions=dist, values=[math.sin(x + i) for i in range(20)]
        ))
    R = sampler.task_correlation(study)
    assert R.shape == (20, 20)
    np.testing.assert_allclose(np.diag(R), 1.0)
    attrs = study._storage.get_study_system_attrs(study._study_id)
    assert str(attrs[TASK_CORRELATION_KEY]).startswith("chunks:")
    np.testing.assert_allclose(stored_task_correlation(study), R, atol=1e-6)
