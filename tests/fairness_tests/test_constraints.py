from __future__ import annotations

import numpy as np
import optuna
import pytest

from fairtune.fairness import (
    FairnessLimit,
    demographic_parity_difference,
    fairness_values,
    is_feasible,
    parse_limits,
    set_fairness_constraints,
)


@pytest.mark.parametrize(
    ("text", "metric", "bound", "sense"),
    [
        ("demographic_parity<=0.05", "demographic_parity", 0.05, "upper"),
        ("dsp <= 0.05", "demographic_parity", 0.05, "upper"),
        ("equal_opportunity<=0.1", "equal_opportunity", 0.1, "upper"),
        ("deo<=0.1", "equal_opportunity", 0.1, "upper"),
        ("false_positive_rate<=0.05", "false_positive_rate", 0.05, "upper"),
        ("dfp<=0.05", "false_positive_rate", 0.05, "upper"),
        ("equalized_odds<=0.05", "equalized_odds", 0.05, "upper"),
        ("disparate_impact>=0.8", "disparate_impact", 0.8, "lower"),
        ("  DSP<=1e-2 ", "demographic_parity", 0.01, "upper"),
    ],
)
def test_parse_limit_strings(text: str, metric: str, bound: float, sense: str) -> None:
    limit = FairnessLimit.parse(text)
    assert (limit.metric, limit.bound, limit.sense) == (metric, pytest.approx(bound), sense)
    assert FairnessLimit.parse(str(limit)) == limit


def test_violation_sign() -> None:
    assert FairnessLimit.parse("dsp<=0.05").violation(0.10) == pytest.approx(0.05)
    assert FairnessLimit.parse("dsp<=0.05").violation(0.01) == pytest.approx(-0.04)
    assert FairnessLimit.parse("di>=0.8").violation(0.7) == pytest.approx(0.1)
    assert FairnessLimit.parse("di>=0.8").violation(0.9) == pytest.approx(-0.1)


def test_parse_limits_accepts_every_form() -> None:
    expected = [FairnessLimit("demographic_parity", 0.05), FairnessLimit("disparate_impact", 0.8)]
    assert parse_limits({"demographic_parity": 0.05, "disparate_impact": 0.8}) == expected
    assert parse_limits(["dsp<=0.05", "di>=0.8"]) == expected
    assert parse_limits([expected[0], "di>=0.8"]) == expected
    assert parse_limits("dsp<=0.05") == expected[:1]
    assert parse_limits(expected[0]) == expected[:1]


@pytest.mark.parametrize(
    ("limits", "match"),
    [
        ("accuracy_gap<=0.1", r"`metric` must be one of \["),
        ({"unknown": 0.1}, r"`metric` must be one of \["),
        ("dsp < 0.05", "`limits` must be strings like"),
        ("dsp<=", "`limits` must be strings like"),
        ("dsp<=abc", "`limits` must be strings like"),
        ("<=0.05", "`limits` must be strings like"),
        ("dsp>=0.05", "is a difference"),
        ("disparate_impact<=0.8", "is a ratio"),
        ("dsp<=-0.05", "`bound` must be a non-negative"),
        ({"demographic_parity": -0.1}, "`bound` must be a non-negative"),
        ({"demographic_parity": float("nan")}, "`bound` must be a non-negative"),
        ("di>=1.5", r"must be in \[0, 1\]"),
        ([], "at least one"),
        (["dsp<=0.05", "demographic_parity<=0.1"], "more than once"),
        (42, "`limits` must be a string"),
        ([42], "`limits` entries must be"),
    ],
)
def test_bad_limits_raise(limits: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_limits(limits)  # type: ignore[arg-type]


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2, 200), rng.choice(["a", "b"], 200)


def test_set_fairness_constraints_stores_values_and_constraints() -> None:
    y_true, groups = _data()
    y_pred = np.where(groups == "a", 1, y_true)  # group a always selected: unfair
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    values = set_fairness_constraints(
        trial, y_true, y_pred, sensitive_features=groups, limits=["dsp<=0.05", "di>=0.8"]
    )
    study.tell(trial, 0.5)
    frozen = study.trials[0]
    dsp = demographic_parity_difference(y_true, y_pred, sensitive_features=groups)
    assert values["demographic_parity"] == pytest.approx(dsp)
    assert fairness_values(frozen) == pytest.approx(values)
    assert frozen.user_attrs["fairtune:demographic_parity"] == pytest.approx(dsp)
    assert frozen.constraints["demographic_parity"] == pytest.approx(dsp - 0.05)
    assert frozen.constraints["disparate_impact"] == pytest.approx(
        0.8 - values["disparate_impact"]
    )
    assert not is_feasible(frozen)


def test_bad_input_leaves_the_trial_untouched() -> None:
    study = optuna.create_study()
    trial = study.ask()
    with pytest.raises(ValueError, match="`y_pred` must have the same length"):
        set_fairness_constraints(
            trial, [0, 1, 0, 1], [0, 1], sensitive_features=list("aabb"), limits="dsp<=0.1"
        )
    assert trial.user_attrs == {}
    assert trial.constraints == {}


def test_best_trial_is_the_best_fair_trial() -> None:
    """The most accurate trials are unfair; best_trial must skip them."""
    y_true, groups = _data(1)
    rng = np.random.default_rng(2)

    def objective(trial: optuna.Trial) -> float:
        bias = trial.suggest_float("bias", 0.0, 1.0)
        noise = trial.suggest_float("noise", 0.0, 0.5)
        # Predictions copy the label except for a `noise` fraction; `bias` selects extra members
        # of group a, so larger bias -> more unfair; the objective rewards bias (as an accurate
        # but unfair model would be rewarded).
        y_pred = np.where(rng.random(len(y_true)) < noise, 1 - y_true, y_true)
        y_pred = np.where((groups == "a") & (rng.random(len(y_true)) < bias), 1, y_pred)
        set_fairness_constraints(
            trial, y_true, y_pred, sensitive_features=groups, limits="demographic_parity<=0.1"
        )
        return bias - noise

    study = optuna.create_study(
        direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0)
    )
    for params in ({"bias": 0.9, "noise": 0.0}, {"bias": 0.0, "noise": 0.05}):
        study.enqueue_trial(params)
    study.optimize(objective, n_trials=30)
    feasible = [t for t in study.trials if is_feasible(t)]
    infeasible = [t for t in study.trials if not is_feasible(t)]
    assert feasible and infeasible
    best_overall = max(study.trials, key=lambda t: t.value)
    assert not is_feasible(best_overall)  # the most "accurate" trial is unfair
    assert study.best_trial.number == max(feasible, key=lambda t: t.value).number
    assert study.best_trial.user_attrs["fairtune:demographic_parity"] <= 0.1
