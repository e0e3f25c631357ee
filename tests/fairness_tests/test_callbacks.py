from __future__ import annotations

import logging

import numpy as np
import optuna
import pytest

from fairtune.fairness import FairnessCallback, set_fairness_constraints

Y_TRUE = np.array([1, 0] * 10)
GROUPS = np.array(["a"] * 10 + ["b"] * 10)


def _objective(trial: optuna.Trial) -> float:
    x = trial.suggest_float("x", 0.0, 1.0)
    # x > 0.5 selects everybody in group a: unfair (DSP = 0.5); otherwise perfectly fair.
    y_pred = np.where((GROUPS == "a") & (x > 0.5), 1, Y_TRUE)
    set_fairness_constraints(trial, Y_TRUE, y_pred, sensitive_features=GROUPS, limits="dsp<=0.1")
    return x


def test_callback_stops_study_at_target_reached_by_a_fair_trial() -> None:
    study = optuna.create_study(direction="maximize")
    # 0.9 is above target but unfair: must not stop. 0.45 is fair and reaches 0.4: stops.
    for x in (0.1, 0.9, 0.2, 0.45, 0.3, 0.35):
        study.enqueue_trial({"x": x})
    callback = FairnessCallback(target=0.4)
    study.optimize(_objective, n_trials=6, callbacks=[callback])
    finished = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(finished) == 4  # the two remaining enqueued trials never ran
    assert callback.target_reached
    assert callback.best_fair_trial is not None
    assert callback.best_fair_trial.params["x"] == 0.45
    assert [r.feasible for r in callback.history] == [True, False, True, True]
    assert callback.history[1].fairness["demographic_parity"] == pytest.approx(0.5)


def test_callback_minimize_and_no_stop() -> None:
    study = optuna.create_study(direction="minimize")
    for x in (0.9, 0.3, 0.2, 0.6):
        study.enqueue_trial({"x": x})
    callback = FairnessCallback(target=0.25, stop_on_target=False)
    study.optimize(_objective, n_trials=4, callbacks=[callback])
    assert len(study.trials) == 4
    assert callback.target_reached
    assert callback.best_fair_trial.params["x"] == 0.2


def test_callback_records_failed_trials_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    def objective(trial: optuna.Trial) -> float:
        if trial.number == 1:
            raise RuntimeError("boom")
        return _objective(trial)

    study = optuna.create_study(direction="maximize")
    callback = FairnessCallback()
    with caplog.at_level(logging.INFO, logger="fairtune"):
        study.optimize(objective, n_trials=3, callbacks=[callback], catch=(RuntimeError,))
    assert [r.state for r in callback.history][1] == optuna.trial.TrialState.FAIL
    assert not callback.history[1].feasible
    assert "demographic_parity=" in caplog.text


def test_callback_validation() -> None:
    with pytest.raises(ValueError, match="`target` must be a finite number"):
        FairnessCallback(target=float("nan"))
    with pytest.raises(ValueError, match="`metric_names` must be a sequence"):
        FairnessCallback(metric_names="dsp")
    study = optuna.create_study(directions=["maximize", "minimize"])
    with pytest.raises(ValueError, match="single-objective"):
        study.optimize(lambda t: (1.0, 2.0), n_trials=1, callbacks=[FairnessCallback()])
