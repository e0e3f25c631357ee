from __future__ import annotations

import logging

import numpy as np
import optuna
import pytest

from fairtune.fairness import FairnessCallback, is_feasible, set_fairness_constraints

Y_TRUE = np.array([1, 0] * 10)
GROUPS = np.array(["a"] * 10 + ["b"] * 10)


def _objective(trial: optuna.Trial) -> float:
    x = trial.suggest_float("x", 0.0, 1.0)
    # x > 0.5 selects everybody in group a: unfair (DSP = 1 - 0.5 = 0.5); otherwise y_pred =
    # y_true, perfectly fair (DSP = 0, DI = 1).
    y_pred = np.where((GROUPS == "a") & (x > 0.5), 1, Y_TRUE)
    set_fairness_constraints(
        trial, Y_TRUE, y_pred, sensitive_features=GROUPS, limits=["dsp<=0.1", "di>=0.8"]
    )
    return x


def test_callback_stops_study_at_target_reached_by_a_fair_trial() -> None:
    study = optuna.create_study(direction="maximize")
    # 0.9 is above the target but unfair: must not stop. 0.45 is fair and reaches 0.4: stops.
    for x in (0.1, 0.9, 0.2, 0.45, 0.3, 0.35):
        study.enqueue_trial({"x": x})
    callback = FairnessCallback(target=0.4)
    study.optimize(_objective, n_trials=6, callbacks=[callback])
    complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert [t.params["x"] for t in complete] == [0.1, 0.9, 0.2, 0.45]
    assert len(waiting) == 2  # the last two enqueued trials never ran
    assert callback.target_reached
    assert callback.best_fair_trial is not None
    assert callback.best_fair_trial.params["x"] == 0.45
    assert [r.number for r in callback.history] == [0, 1, 2, 3]
    assert [r.feasible for r in callback.history] == [True, False, True, True]
    assert callback.history[1].fairness == pytest.approx(
        {"demographic_parity": 0.5, "disparate_impact": 0.5}
    )
    assert callback.history[1].constraints == pytest.approx(
        {"demographic_parity": 0.4, "disparate_impact": 0.3}
    )


def test_callback_without_target_runs_every_trial() -> None:
    study = optuna.create_study(direction="maximize")
    for x in (0.1, 0.9, 0.45):
        study.enqueue_trial({"x": x})
    callback = FairnessCallback()
    study.optimize(_objective, n_trials=3, callbacks=[callback])
    assert len(study.trials) == 3
    assert not callback.target_reached


def test_callback_minimize_and_no_stop() -> None:
    study = optuna.create_study(direction="minimize")
    for x in (0.9, 0.3, 0.2, 0.6):
        study.enqueue_trial({"x": x})
    callback = FairnessCallback(target=0.25, stop_on_target=False)
    study.optimize(lambda t: -_objective(t) + 1.0, n_trials=4, callbacks=[callback])
    # values: 0.1 (unfair), 0.7, 0.8, 0.4 (unfair); target 0.25 never reached by a fair trial.
    assert len(study.trials) == 4
    assert not callback.target_reached
    assert callback.best_fair_trial.params["x"] == 0.3
    assert callback.best_fair_trial.number == study.best_trial.number

    study = optuna.create_study(direction="minimize")
    for x in (0.9, 0.3, 0.2, 0.1):
        study.enqueue_trial({"x": x})
    callback = FairnessCallback(target=0.25)
    study.optimize(_objective, n_trials=4, callbacks=[callback])
    # 0.2 <= 0.25 is fair: stops after three trials.
    assert len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) == 3
    assert callback.best_fair_trial.params["x"] == 0.2


def test_best_fair_trial_matches_study_best_trial() -> None:
    study = optuna.create_study(
        direction="maximize", sampler=optuna.samplers.RandomSampler(seed=1)
    )
    callback = FairnessCallback(verbose=False)
    study.optimize(_objective, n_trials=15, callbacks=[callback])
    feasible = [t for t in study.trials if is_feasible(t)]
    assert 0 < len(feasible) < len(study.trials)
    assert callback.best_fair_trial.number == study.best_trial.number
    assert callback.best_fair_trial.params["x"] <= 0.5
    assert sum(r.feasible for r in callback.history) == len(feasible)


def test_callback_records_failed_trials_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    def objective(trial: optuna.Trial) -> float:
        if trial.number == 1:
            raise RuntimeError("boom")
        return _objective(trial)

    study = optuna.create_study(direction="maximize")
    for x in (0.2, 0.3, 0.9):
        study.enqueue_trial({"x": x})
    callback = FairnessCallback(metric_names=["dsp"])
    with caplog.at_level(logging.INFO, logger="fairtune"):
        study.optimize(objective, n_trials=3, callbacks=[callback], catch=(RuntimeError,))
    assert [r.state for r in callback.history] == [
        optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL,
        optuna.trial.TrialState.COMPLETE,
    ]
    assert [r.feasible for r in callback.history] == [True, False, False]
    assert callback.history[1].value is None
    # metric_names given by alias keeps only that metric.
    assert callback.history[2].fairness == pytest.approx({"demographic_parity": 0.5})
    assert "Trial 2 COMPLETE" in caplog.text
    assert "demographic_parity=0.5" in caplog.text and "infeasible" in caplog.text
    assert "disparate_impact=" not in caplog.text


def test_callback_custom_logger_and_debug_level(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("my_app.tuning")
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial({"x": 0.2})
    with caplog.at_level(logging.INFO, logger="my_app.tuning"):
        study.optimize(_objective, n_trials=1, callbacks=[FairnessCallback(logger=logger)])
        study.enqueue_trial({"x": 0.3})
        study.optimize(
            _objective, n_trials=1, callbacks=[FairnessCallback(logger=logger, verbose=False)]
        )
    # Only the INFO-level callback logged (the second one logs at DEBUG).
    mine = [r.getMessage() for r in caplog.records if r.name == "my_app.tuning"]
    assert len(mine) == 1
    assert mine[0].startswith("Trial 0 COMPLETE") and "feasible" in mine[0]
    assert not [r for r in caplog.records if r.name == "fairtune"]


def test_callback_validation() -> None:
    with pytest.raises(ValueError, match="`target` must be a finite number"):
        FairnessCallback(target=float("nan"))
    with pytest.raises(ValueError, match="`target` must be a finite number"):
        FairnessCallback(target="0.9")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`metric_names` must be a sequence"):
        FairnessCallback(metric_names="dsp")
    with pytest.raises(ValueError, match=r"`metric_names` has an unknown metric: .*one of \["):
        FairnessCallback(metric_names=["accuracy"])
    study = optuna.create_study(directions=["maximize", "minimize"])
    with pytest.raises(ValueError, match="single-objective studies only, but the study has 2"):
        study.optimize(lambda t: (1.0, 2.0), n_trials=1, callbacks=[FairnessCallback()])


def test_a_trial_without_the_study_constraints_is_not_fair_for_the_callback() -> None:
    # Optuna deems a trial without constraints feasible; fairtune's one rule (issue 24) does not.
    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", 0.0, 1.0)
        if trial.number != 1:
            trial.set_constraint("unfairness", x - 2.0)
        return x

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    callback = FairnessCallback(verbose=False)
    study.optimize(objective, n_trials=3, callbacks=[callback])
    assert [r.feasible for r in callback.history] == [True, False, True]
    assert callback.best_fair_trial is not None and callback.best_fair_trial.number != 1
