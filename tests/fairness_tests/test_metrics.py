from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from fairlearn import metrics as flm

from fairtune.fairness import (
    METRICS,
    demographic_parity_difference,
    disparate_impact_ratio,
    equal_opportunity_difference,
    equalized_odds_difference,
    false_positive_rate_difference,
    get_metric,
    group_rates,
)
from fairtune.fairness import metrics as fm


def _random(n: int, n_groups: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 2, n)
    # Predictions correlated with the label and shifted per group, so the gaps differ from 0.
    groups = rng.choice([f"g{i}" for i in range(n_groups)], n)
    shift = {f"g{i}": 0.15 * i for i in range(n_groups)}
    p = 0.2 + 0.5 * y_true + np.array([shift[g] for g in groups]) / n_groups
    y_pred = (rng.random(n) < p).astype(int)
    return y_true, y_pred, groups


def _fairlearn_gap(metric, y_true, y_pred, groups, weights=None) -> float:
    params = None if weights is None else {"m": {"sample_weight": weights}}
    frame = flm.MetricFrame(
        metrics={"m": metric}, y_true=y_true, y_pred=y_pred, sensitive_features=groups,
        sample_params=params,
    )
    return float(frame.difference(method="between_groups")["m"])


def _assert_equal_fairlearn(y_true, y_pred, sensitive, weights) -> None:
    kwargs = {"sensitive_features": sensitive, "sample_weight": weights}
    assert demographic_parity_difference(y_true, y_pred, **kwargs) == pytest.approx(
        flm.demographic_parity_difference(y_true, y_pred, **kwargs), abs=1e-12
    )
    assert equalized_odds_difference(y_true, y_pred, **kwargs) == pytest.approx(
        flm.equalized_odds_difference(y_true, y_pred, **kwargs), abs=1e-12
    )
    assert equal_opportunity_difference(y_true, y_pred, **kwargs) == pytest.approx(
        _fairlearn_gap(flm.true_positive_rate, y_true, y_pred, sensitive, weights), abs=1e-12
    )
    assert false_positive_rate_difference(y_true, y_pred, **kwargs) == pytest.approx(
        _fairlearn_gap(flm.false_positive_rate, y_true, y_pred, sensitive, weights), abs=1e-12
    )
    assert disparate_impact_ratio(y_true, y_pred, **kwargs) == pytest.approx(
        flm.demographic_parity_ratio(y_true, y_pred, **kwargs), abs=1e-12
    )


@pytest.mark.parametrize("n_groups", [2, 3, 5])
@pytest.mark.parametrize("weighted", [False, True])
def test_metrics_equal_fairlearn_on_random_data(n_groups: int, weighted: bool) -> None:
    y_true, y_pred, groups = _random(400, n_groups, seed=n_groups)
    weights = np.random.default_rng(1).uniform(0.1, 2.0, len(y_true)) if weighted else None
    assert demographic_parity_difference(y_true, y_pred, sensitive_features=groups) > 0.01
    _assert_equal_fairlearn(y_true, y_pred, groups, weights)


def test_metrics_equal_fairlearn_on_intersectional_frame() -> None:
    rng = np.random.default_rng(7)
    n = 300
    y_true, y_pred = rng.integers(0, 2, n), rng.integers(0, 2, n)
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], n), "race": rng.choice(["x", "y", "z"], n)})
    _assert_equal_fairlearn(y_true, y_pred, frame, rng.uniform(0.5, 1.5, n))


def test_hand_computed_eight_rows() -> None:
    # Rows 0-3 are group a, rows 4-7 group b.
    y_true = [1, 1, 1, 0, 1, 0, 0, 0]
    y_pred = [1, 1, 0, 0, 1, 1, 1, 0]
    groups = ["a"] * 4 + ["b"] * 4
    # selection rate: a = 2/4 = 0.5,   b = 3/4 = 0.75  -> DSP = 0.25, DI = 0.5 / 0.75 = 2/3
    # TPR (y=1):      a = 2/3,         b = 1/1 = 1     -> DEO = 1 - 2/3 = 1/3
    # FPR (y=0):      a = 0/1 = 0,     b = 2/3         -> DFP = 2/3
    # equalized odds = max(1/3, 2/3) = 2/3
    kw = {"sensitive_features": groups}
    assert demographic_parity_difference(y_true, y_pred, **kw) == pytest.approx(0.25)
    assert disparate_impact_ratio(y_true, y_pred, **kw) == pytest.approx(2 / 3)
    assert equal_opportunity_difference(y_true, y_pred, **kw) == pytest.approx(1 / 3)
    assert false_positive_rate_difference(y_true, y_pred, **kw) == pytest.approx(2 / 3)
    assert equalized_odds_difference(y_true, y_pred, **kw) == pytest.approx(2 / 3)
    rates = group_rates(
        y_true, y_pred, rates=("selection_rate", "true_positive_rate", "false_positive_rate"), **kw
    )
    assert rates.loc["a"].tolist() == pytest.approx([0.5, 2 / 3, 0.0])
    assert rates.loc["b"].tolist() == pytest.approx([0.75, 1.0, 2 / 3])

    # Weight 2 on row 0 (a, y=1, yhat=1); b is unchanged.
    # selection rate a = (2 + 1) / (2 + 1 + 1 + 1) = 0.6 -> DSP = 0.75 - 0.6 = 0.15,
    #                                                        DI = 0.6 / 0.75 = 0.8
    # TPR a = (2 + 1) / (2 + 1 + 1) = 0.75               -> DEO = 1 - 0.75 = 0.25
    # FPR unchanged                                      -> DFP = 2/3, equalized odds = 2/3
    kw["sample_weight"] = [2, 1, 1, 1, 1, 1, 1, 1]
    assert demographic_parity_difference(y_true, y_pred, **kw) == pytest.approx(0.15)
    assert disparate_impact_ratio(y_true, y_pred, **kw) == pytest.approx(0.8)
    assert equal_opportunity_difference(y_true, y_pred, **kw) == pytest.approx(0.25)
    assert false_positive_rate_difference(y_true, y_pred, **kw) == pytest.approx(2 / 3)
    assert equalized_odds_difference(y_true, y_pred, **kw) == pytest.approx(2 / 3)


def test_hand_computed_three_groups() -> None:
    y_true = [1, 0, 1, 0, 1, 0]
    y_pred = [1, 1, 1, 0, 0, 0]
    groups = ["a", "a", "b", "b", "c", "c"]
    # selection rate: a = 1, b = 1/2, c = 0 -> DSP = 1 - 0 = 1, DI = 0 / 1 = 0
    # TPR: a = 1, b = 1, c = 0              -> DEO = 1
    # FPR: a = 1, b = 0, c = 0              -> DFP = 1
    kw = {"sensitive_features": groups}
    assert demographic_parity_difference(y_true, y_pred, **kw) == pytest.approx(1.0)
    assert disparate_impact_ratio(y_true, y_pred, **kw) == pytest.approx(0.0)
    # Dropping group a leaves b (rates 1/2, TPR 1, FPR 0) and c (0, 0, 0).
    kw = {"sensitive_features": groups[2:]}
    assert demographic_parity_difference(y_true[2:], y_pred[2:], **kw) == pytest.approx(0.5)
    assert equal_opportunity_difference(y_true[2:], y_pred[2:], **kw) == pytest.approx(1.0)
    assert false_positive_rate_difference(y_true[2:], y_pred[2:], **kw) == pytest.approx(0.0)


def test_intersectional_groups_equal_combined_column() -> None:
    rng = np.random.default_rng(3)
    n = 300
    y_true, y_pred = rng.integers(0, 2, n), rng.integers(0, 2, n)
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], n), "race": rng.choice(["x", "y", "z"], n)})
    combined = frame["sex"] + "/" + frame["race"]
    for spec in METRICS.values():
        expected = spec.function(y_true, y_pred, sensitive_features=combined)
        assert spec.function(y_true, y_pred, sensitive_features=frame) == pytest.approx(
            expected
        ), spec.name
        # A 2-d array is read the same way as the DataFrame.
        assert spec.function(
            y_true, y_pred, sensitive_features=frame.to_numpy()
        ) == pytest.approx(expected), spec.name
    # Intersectional gaps are at least as large as the gap along one attribute alone.
    assert demographic_parity_difference(
        y_true, y_pred, sensitive_features=frame
    ) >= demographic_parity_difference(y_true, y_pred, sensitive_features=frame["sex"])


def test_intersectional_hand_computed() -> None:
    # (F, x): yhat 1, 1; (F, y): 0, 1; (M, x): 0, 0; (M, y): 1, 0
    y_pred = [1, 1, 0, 1, 0, 0, 1, 0]
    frame = pd.DataFrame({"sex": list("FFFFMMMM"), "race": list("xxyyxxyy")})
    # by sex: F = 3/4, M = 1/4 -> 0.5; intersectional: max 1 (F, x) - min 0 (M, x) -> 1.0
    y_true = [1, 0] * 4
    assert demographic_parity_difference(
        y_true, y_pred, sensitive_features=frame["sex"]
    ) == pytest.approx(0.5)
    assert demographic_parity_difference(y_true, y_pred, sensitive_features=frame) == 1.0


def test_label_types() -> None:
    groups = [0, 0, 1, 1]
    # Booleans, floats and pandas nullable integers are 0/1 labels.
    y_true = np.array([True, False, True, False])
    y_pred_float = [1.0, 0.0, 0.0, 0.0]
    assert demographic_parity_difference(y_true, y_pred_float, sensitive_features=groups) == 0.5
    y_pred = pd.array([1, 1, 0, 0], dtype="Int64")
    assert demographic_parity_difference(y_true, y_pred, sensitive_features=groups) == 1.0
    # A categorical with an unused category has only the groups that occur.
    cat = pd.Categorical(["a", "a", "b", "b"], categories=["a", "b", "c"])
    assert demographic_parity_difference(y_true, y_pred, sensitive_features=cat) == 1.0


def _msg(template: str, **kwargs: object) -> str:
    return re.escape(template.format(**kwargs))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"y_pred": [1, 0, 1]}, _msg(fm._MSG_LENGTH, name="y_pred", n=4, m=3)),
        (
            {"sensitive_features": ["a", "b"]},
            _msg(fm._MSG_LENGTH, name="sensitive_features", n=4, m=2),
        ),
        ({"sample_weight": [1.0, 1.0]}, _msg(fm._MSG_LENGTH, name="sample_weight", n=4, m=2)),
        ({"y_pred": [1, 0, 2, 0]}, "`y_pred` must contain only 0/1"),
        ({"y_pred": [1, 0, -1, 0]}, "`y_pred` must contain only 0/1"),
        ({"y_true": [1, 0, 0.5, 0]}, "`y_true` must contain only 0/1"),
        ({"y_pred": ["yes", "no", "yes", "no"]}, "`y_pred` must contain only 0/1"),
        ({"y_pred": ["1", "0", "1", "0"]}, "`y_pred` must contain only 0/1"),
        ({"y_pred": [[1, 0], [0, 1], [1, 1], [0, 0]]}, "`y_pred` must be one-dimensional"),
        ({"sensitive_features": ["a", "a", "a", "a"]}, _msg(fm._MSG_SINGLE_GROUP, group="a")),
        (
            {"sensitive_features": pd.DataFrame({"s": ["a"] * 4, "r": ["x"] * 4})},
            _msg(fm._MSG_SINGLE_GROUP, group=("a", "x")),
        ),
        ({"y_true": [1, 0, np.nan, 0]}, _msg(fm._MSG_NAN, name="y_true", count=1)),
        ({"y_pred": [1, 0, np.nan, np.nan]}, _msg(fm._MSG_NAN, name="y_pred", count=2)),
        (
            {"sensitive_features": ["a", None, "b", "b"]},
            _msg(fm._MSG_NAN, name="sensitive_features", count=1),
        ),
        (
            {"sensitive_features": pd.DataFrame({"s": list("aabb"), "r": [1, np.nan, 2, 2]})},
            _msg(fm._MSG_NAN, name="sensitive_features", count=1),
        ),
        (
            {"sample_weight": [1.0, np.nan, 1.0, 1.0]},
            _msg(fm._MSG_NAN, name="sample_weight", count=1),
        ),
        ({"sample_weight": [1.0, -1.0, 1.0, 1.0]}, "`sample_weight` must be non-negative"),
        ({"sample_weight": [1.0, np.inf, 1.0, 1.0]}, "`sample_weight` must be non-negative and"),
        ({"y_true": []}, re.escape(fm._MSG_EMPTY)),
        ({"sensitive_features": np.zeros((4, 1, 1))}, "`sensitive_features` must be 1-d or 2-d"),
    ],
)
def test_bad_input_raises_naming_the_argument(kwargs: dict, match: str) -> None:
    args = {
        "y_true": [1, 0, 1, 0],
        "y_pred": [1, 1, 0, 0],
        "sensitive_features": ["a", "a", "b", "b"],
        "sample_weight": None,
    }
    args.update(kwargs)
    for spec in METRICS.values():
        with pytest.raises(ValueError, match=match):
            spec.function(
                args["y_true"], args["y_pred"], sensitive_features=args["sensitive_features"],
                sample_weight=args["sample_weight"],
            )


def test_undefined_rate_raises_naming_the_group() -> None:
    # Group "b" has no positive sample: its true positive rate is undefined (fairlearn says 0).
    y_true, y_pred, groups = [1, 0, 0, 0], [1, 0, 0, 1], list("aabb")
    for function in (equal_opportunity_difference, equalized_odds_difference):
        with pytest.raises(ValueError, match="true positive rate of group 'b' is undefined"):
            function(y_true, y_pred, sensitive_features=groups)
    # ... but demographic parity and the FPR gap do not need positives.
    assert demographic_parity_difference(y_true, y_pred, sensitive_features=groups) == 0.0
    assert false_positive_rate_difference(y_true, y_pred, sensitive_features=groups) == 0.5
    # Group "a" has no negative sample: its false positive rate is undefined.
    with pytest.raises(ValueError, match="false positive rate of group 'a' is undefined"):
        false_positive_rate_difference([1, 1, 0, 1], y_pred, sensitive_features=groups)
    # Zero weight on every negative of group "a" makes its FPR undefined as well.
    with pytest.raises(ValueError, match="false positive rate of group 'a' is undefined"):
        false_positive_rate_difference(
            [1, 0, 0, 1], y_pred, sensitive_features=groups, sample_weight=[1, 0, 1, 1]
        )
    # A group with only zero weights has no selection rate.
    with pytest.raises(ValueError, match="selection rate of group 'b' is undefined"):
        demographic_parity_difference(
            y_true, y_pred, sensitive_features=groups, sample_weight=[1, 1, 0, 0]
        )


def test_disparate_impact_when_nobody_is_selected() -> None:
    # Every selection rate is 0: groups are treated alike, DI = 1 (fairlearn returns NaN).
    assert disparate_impact_ratio(
        [1, 0, 1, 0], [0, 0, 0, 0], sensitive_features=list("aabb")
    ) == 1.0
    assert demographic_parity_difference(
        [1, 0, 1, 0], [0, 0, 0, 0], sensitive_features=list("aabb")
    ) == 0.0


def test_get_metric_aliases_and_unknown_names() -> None:
    expected = {
        "demographic_parity": ["DSP", "dp", "demographic_parity_difference", "Demographic Parity"],
        "equal_opportunity": ["deo", "equal-opportunity"],
        "false_positive_rate": ["dfp", "fpr"],
        "equalized_odds": ["eod", "Equalized-Odds"],
        "disparate_impact": ["di", "disparate_impact_ratio"],
    }
    for name, aliases in expected.items():
        for alias in [name, *aliases]:
            assert get_metric(alias).name == name
    with pytest.raises(ValueError, match=r"`metric` must be one of \[.*demographic_parity.*\]"):
        get_metric("accuracy_gap")


def test_spec_table_is_consistent() -> None:
    assert set(METRICS) == {
        "demographic_parity", "equal_opportunity", "false_positive_rate", "equalized_odds",
        "disparate_impact",
    }
    for name, spec in METRICS.items():
        assert spec.name == name
        assert (spec.aggregate == "ratio") == (spec.sense == "lower")
    with pytest.raises(ValueError, match="`rates` must be among"):
        group_rates([0, 1], [0, 1], sensitive_features=["a", "b"], rates=("accuracy",))
