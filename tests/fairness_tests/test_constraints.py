from __future__ import annotations

import datetime
import re

import numpy as np
import optuna
import pytest

from fairtune.fairness import (
    USER_ATTR_PREFIX,
    FairnessLimit,
    demographic_parity_difference,
    disparate_impact_ratio,
    equalized_odds_difference,
    fairness_values,
    is_feasible,
    parse_limits,
    set_fairness_constraints,
)
from fairtune.fairness import constraints as fc


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
        ("eod<=0.2", "equalized_odds", 0.2, "upper"),
        ("disparate_impact>=0.8", "disparate_impact", 0.8, "lower"),
        ("di >= 0.8", "disparate_impact", 0.8, "lower"),
        ("  DSP<=1e-2 ", "demographic_parity", 0.01, "upper"),
        ("dsp<=0", "demographic_parity", 0.0, "upper"),
    ],
)
def test_parse_limit_strings(text: str, metric: str, bound: float, sense: str) -> None:
    for limit in (FairnessLimit.parse(text), *parse_limits(text)):
        assert (limit.metric, limit.bound, limit.sense) == (metric, pytest.approx(bound), sense)
        assert FairnessLimit.parse(str(limit)) == limit


def test_constructor_accepts_aliases() -> None:
    expected = FairnessLimit.parse("demographic_parity<=0.05")
    assert FairnessLimit(metric="dsp", bound=0.05) == expected
    assert FairnessLimit(metric="di", bound=0.8).sense == "lower"
    assert FairnessLimit(metric="eod", bound=np.float32(0.25)).bound == 0.25
    with pytest.raises(ValueError, match=r"`metric` must be one of \["):
        FairnessLimit(metric="accuracy", bound=0.1)
    with pytest.raises(ValueError, match=re.escape("`bound` must be a non-negative finite number")):
        FairnessLimit(metric="dsp", bound=-0.1)
    with pytest.raises(ValueError, match=re.escape("`bound` must be a number in [0, 1]")):
        FairnessLimit(metric="di", bound=1.2)
    with pytest.raises(ValueError, match="`bound` must be"):
        FairnessLimit(metric="dsp", bound=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`bound` must be"):
        FairnessLimit(metric="dsp", bound="0.1")  # type: ignore[arg-type]


def test_violation_sign() -> None:
    assert FairnessLimit.parse("dsp<=0.05").violation(0.10) == pytest.approx(0.05)
    assert FairnessLimit.parse("dsp<=0.05").violation(0.01) == pytest.approx(-0.04)
    assert FairnessLimit.parse("di>=0.8").violation(0.7) == pytest.approx(0.1)
    assert FairnessLimit.parse("di>=0.8").violation(0.9) == pytest.approx(-0.1)


def test_parse_limits_accepts_every_form() -> None:
    expected = [FairnessLimit("demographic_parity", 0.05), FairnessLimit("disparate_impact", 0.8)]
    # In a dict the value of a ratio is its lower bound.
    assert parse_limits({"demographic_parity": 0.05, "disparate_impact": 0.8}) == expected
    assert parse_limits({"dsp": 0.05, "di": 0.8}) == expected
    assert parse_limits(["dsp<=0.05", "di>=0.8"]) == expected
    assert parse_limits(("dsp<=0.05", "di>=0.8")) == expected
    assert parse_limits([expected[0], "di>=0.8"]) == expected
    assert parse_limits("dsp<=0.05") == expected[:1]
    assert parse_limits(expected[0]) == expected[:1]


@pytest.mark.parametrize(
    ("limits", "match"),
    [
        ("accuracy_gap<=0.1", r"`limits` names an unknown metric in 'accuracy_gap<=0.1': "
         r"`metric` must be one of \[.*'disparate_impact'.*\]"),
        ({"unknown": 0.1}, r"`limits` names an unknown metric .*must be one of \["),
        ("dsp < 0.05", re.escape(fc._MSG_MALFORMED.format(arg="`limits`", text="dsp < 0.05"))),
        ("dsp<=", "`limits` must be strings like"),
        ("dsp<=abc", "`limits` must be strings like"),
        ("<=0.05", "`limits` must be strings like"),
        ("dsp 0.05", "`limits` must be strings like"),
        ("", "`limits` must be strings like"),
        ("dsp>=0.05", r"`limits`: demographic_parity is a difference .* "
         r"'demographic_parity<=bound', but got 'dsp>=0.05'"),
        ("disparate_impact<=0.8", r"`limits`: disparate_impact is a ratio .* "
         r"'disparate_impact>=bound'"),
        ("dsp<=-0.05", re.escape("`limits` must give demographic_parity a bound that is a "
                                 "non-negative finite number, but got 'dsp<=-0.05'.")),
        ("dsp<=inf", "`limits` must give demographic_parity a bound"),
        ({"demographic_parity": -0.1}, r"`limits` must give demographic_parity a bound .*-0\.1"),
        ({"demographic_parity": float("nan")}, "`limits` must give demographic_parity a bound"),
        ({"demographic_parity": "0.1"}, "`limits` must give demographic_parity a bound"),
        ("di>=1.5", re.escape("disparate_impact a bound that is a number in [0, 1]")),
        ({"di": 1.5}, re.escape("`limits` must give disparate_impact a bound that is a number")),
        ([], "`limits` must contain at least one"),
        ({}, "`limits` must contain at least one"),
        (["dsp<=0.05", "demographic_parity<=0.1"], "`limits` must limit each metric once"),
        (42, "`limits` must be a string, a FairnessLimit"),
        ([42], "`limits` entries must be strings or FairnessLimit"),
        ([{"dsp": 0.1}], "`limits` entries must be strings or FairnessLimit"),
    ],
)
def test_bad_limits_raise(limits: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_limits(limits)  # type: ignore[arg-type]


def test_parse_names_text_argument() -> None:
    with pytest.raises(ValueError, match="`text` must be strings like"):
        FairnessLimit.parse("dsp=0.1")
    with pytest.raises(ValueError, match="`text` must give demographic_parity a bound"):
        FairnessLimit.parse("dsp<=-1")


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2, 200), rng.choice(["a", "b"], 200)


def test_set_fairness_constraints_stores_values_and_constraints() -> None:
    y_true, groups = _data()
    y_pred = np.where(groups == "a", 1, y_true)  # group a always selected: unfair
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    values = set_fairness_constraints(
        trial, y_true, y_pred, sensitive_features=groups, limits=["dsp<=0.05", "di>=0.8", "eod<=1"]
    )
    study.tell(trial, 0.5)
    frozen = study.trials[0]
    dsp = demographic_parity_difference(y_true, y_pred, sensitive_features=groups)
    di = disparate_impact_ratio(y_true, y_pred, sensitive_features=groups)
    eod = equalized_odds_difference(y_true, y_pred, sensitive_features=groups)
    assert dsp > 0.2 and di < 0.8
    assert values == pytest.approx(
        {"demographic_parity": dsp, "disparate_impact": di, "equalized_odds": eod}
    )
    assert fairness_values(frozen) == pytest.approx(values)
    assert frozen.user_attrs[USER_ATTR_PREFIX + "demographic_parity"] == pytest.approx(dsp)
    assert frozen.constraints == pytest.approx(
        {"demographic_parity": dsp - 0.05, "disparate_impact": 0.8 - di, "equalized_odds": eod - 1}
    )
    assert not is_feasible(frozen)


def test_set_fairness_constraints_on_a_frozen_trial() -> None:
    y_true, groups = _data(3)
    now = datetime.datetime.now()
    frozen = optuna.trial.FrozenTrial(
        number=0, state=optuna.trial.TrialState.COMPLETE, value=0.7, datetime_start=now,
        datetime_complete=now, params={}, distributions={}, user_attrs={}, system_attrs={},
        intermediate_values={}, trial_id=0,
    )
    values = set_fairness_constraints(
        frozen, y_true, y_true, sensitive_features=groups, limits={"equal_opportunity": 0.05}
    )
    # Perfect predictions: every TPR is 1, the gap is 0.
    assert values == {"equal_opportunity": 0.0}
    assert frozen.constraints == {"equal_opportunity": -0.05}
    study = optuna.create_study(direction="maximize")
    study.add_trial(frozen)
    assert is_feasible(study.trials[0])
    assert fairness_values(study.trials[0]) == {"equal_opportunity": 0.0}


def test_bad_input_leaves_the_trial_untouched() -> None:
    study = optuna.create_study()
    trial = study.ask()
    with pytest.raises(ValueError, match="`y_pred` must have the same length"):
        set_fairness_constraints(
            trial, [0, 1, 0, 1], [0, 1], sensitive_features=list("aabb"), limits="dsp<=0.1"
        )
    with pytest.raises(ValueError, match="`limits` names an unknown metric"):
        set_fairness_constraints(
            trial, [0, 1, 0, 1], [0, 1, 1, 1], sensitive_features=list("aabb"), limits="acc<=0.1"
        )
    assert trial.user_attrs == {}
    assert trial.constraints == {}


def test_setting_the_same_limit_twice_raises() -> None:
    study = optuna.create_study()
    trial = study.ask()
    kwargs = {"sensitive_features": list("aabb"), "limits": "dsp<=0.1"}
    set_fairness_constraints(trial, [0, 1, 0, 1], [1, 1, 0, 1], **kwargs)
    # Optuna would keep the first constraint value (with a warning) while the user attribute
    # changed: refuse instead.
    with pytest.raises(ValueError, match="`trial` already has a constraint named 'demographic_"):
        set_fairness_constraints(trial, [0, 1, 0, 1], [0, 0, 0, 0], **kwargs)
    assert trial.user_attrs[USER_ATTR_PREFIX + "demographic_parity"] == 0.5
    # Another metric on the same trial is fine.
    set_fairness_constraints(
        trial, [0, 1, 0, 1], [1, 1, 0, 1], sensitive_features=list("aabb"), limits="di>=0.5"
    )
    assert set(trial.constraints) == {"demographic_parity", "disparate_impact"}


def test_is_feasible_follows_optuna() -> None:
    study = optuna.create_study(direction="maximize")
    study.add_trial(optuna.trial.create_trial(value=3.0))  # no constraints
    study.add_trial(optuna.trial.create_trial(value=2.0, system_attrs={"constraints:dsp": 0.0}))
    study.add_trial(optuna.trial.create_trial(value=9.0, system_attrs={"constraints:dsp": 0.1}))
    assert [is_feasible(t) for t in study.trials] == [True, True, False]
    # Optuna counts the unconstrained trial as feasible too.
    assert study.best_trial.number == 0


def test_fairness_values_ignores_other_fairtune_attrs() -> None:
    trial = optuna.trial.create_trial(
        value=1.0,
        user_attrs={"fairtune:tenant": "acme", "fairtune:demographic_parity": 0.1, "other": 2},
    )
    assert fairness_values(trial) == {"demographic_parity": 0.1}


def test_best_trial_is_the_best_fair_trial() -> None:
    """The highest-scoring trials are unfair; best_trial must skip them."""
    y_true, groups = _data(1)
    rng = np.random.default_rng(2)

    def objective(trial: optuna.Trial) -> float:
        bias = trial.suggest_float("bias", 0.0, 1.0)
        noise = trial.suggest_float("noise", 0.0, 0.5)
        # Predictions copy the label except for a `noise` fraction; `bias` selects extra members
        # of group a, so larger bias -> more unfair, and the objective rewards bias (as an
        # accurate but unfair model would be rewarded).
        y_pred = np.where(rng.random(len(y_true)) < noise, 1 - y_true, y_true)
        y_pred = np.where((groups == "a") & (rng.random(len(y_true)) < bias), 1, y_pred)
        set_fairness_constraints(
            trial, y_true, y_pred, sensitive_features=groups, limits="demographic_parity<=0.1"
        )
        return bias - noise

    study = optuna.create_study(
        direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0)
    )
    for params in ({"bias": 0.95, "noise": 0.0}, {"bias": 0.8, "noise": 0.01},
                   {"bias": 0.0, "noise": 0.05}):
        study.enqueue_trial(params)
    study.optimize(objective, n_trials=20)
    feasible = [t for t in study.trials if is_feasible(t)]
    assert feasible and len(feasible) < len(study.trials)
    best_overall = max(study.trials, key=lambda t: t.value)
    assert best_overall.params["bias"] == 0.95 and not is_feasible(best_overall)
    best_fair = max(feasible, key=lambda t: t.value)
    assert study.best_trial.number == best_fair.number
    assert study.best_trial.user_attrs["fairtune:demographic_parity"] <= 0.1
    assert study.best_value < best_overall.value


# One rule for "fair" (issue 24) -----------------------------------------------------------


def _told(study: optuna.Study, value: float, attrs: dict, constraints: dict) -> None:
    trial = study.ask()
    for key, v in attrs.items():
        trial.set_user_attr(f"fairtune:{key}", v)
    for key, v in constraints.items():
        trial.set_constraint(key, v)
    study.tell(trial, value)


def test_fair_means_every_limit_of_the_study_measured_and_met() -> None:
    from fairtune.fairness import LIMITS_KEY, best_fair_trial, is_fair, study_limits

    study = optuna.create_study(direction="maximize")
    _told(study, 0.6, {"demographic_parity": 0.04}, {"demographic_parity": -0.01, "budget": -1.0})
    _told(study, 0.7, {"demographic_parity": 0.08}, {"demographic_parity": -0.02, "budget": -1.0})
    _told(study, 0.9, {}, {})  # nothing measured: feasible for Optuna, not fair
    _told(study, 0.8, {"demographic_parity": 0.01}, {"demographic_parity": -0.04})  # no budget
    _told(study, 0.95, {"demographic_parity": 0.0}, {"demographic_parity": -0.05, "budget": 0.5})
    # Bounds implied by the trials: 0.05, 0.10, 0.05, 0.05 -> median 0.05; budget set by hand.
    limits = study_limits(study)
    assert list(limits) == ["demographic_parity", "budget"]
    assert limits["demographic_parity"] == FairnessLimit("demographic_parity", 0.05)
    assert limits["budget"] is None
    assert [is_fair(t, limits) for t in study.trials] == [True, False, False, False, False]
    assert [is_feasible(t) for t in study.trials] == [True, True, True, True, False]
    assert best_fair_trial(study).number == 0
    # A stored limit wins over what the trials imply.
    study.set_user_attr(LIMITS_KEY, ["demographic_parity<=0.1"])
    assert study_limits(study)["demographic_parity"].bound == 0.1
    assert best_fair_trial(study).number == 1
    failed = study.ask()
    study.tell(failed, state=optuna.trial.TrialState.FAIL)
    assert not is_fair(study.trials[-1], {})


def test_best_fair_trial_follows_the_direction_and_is_none_without_fair_trials() -> None:
    from fairtune.fairness import best_fair_trial

    study = optuna.create_study(direction="minimize")
    assert best_fair_trial(study) is None
    for value, c in ((3.0, -1.0), (1.0, -1.0), (0.5, 1.0), (1.0, -2.0)):
        _told(study, value, {}, {"c": c})
    assert best_fair_trial(study).number == 1  # the lowest number among ties


@pytest.mark.parametrize(("text", "binds"), [("dsp<=0.99", True), ("dsp<=1", False),
                                             ("di>=0.01", True), ("di>=0", False)])
def test_cannot_bind(text: str, binds: bool) -> None:
    from fairtune.fairness import cannot_bind

    assert cannot_bind(FairnessLimit.parse(text)) is not binds
