from __future__ import annotations

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
)


def _random(n: int, n_groups: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 2, n)
    y_pred = rng.integers(0, 2, n)
    groups = rng.choice([f"g{i}" for i in range(n_groups)], n)
    return y_true, y_pred, groups


def _fairlearn_gap(metric, y_true, y_pred, groups, weights=None) -> float:
    params = None if weights is None else {"m": {"sample_weight": weights}}
    frame = flm.MetricFrame(
        metrics={"m": metric}, y_true=y_true, y_pred=y_pred, sensitive_features=groups,
        sample_params=params,
    )
    return float(frame.difference(method="between_groups")["m"])


@pytest.mark.parametrize("n_groups", [2, 3, 5])
@pytest.mark.parametrize("weighted", [False, True])
def test_metrics_equal_fairlearn_on_random_data(n_groups: int, weighted: bool) -> None:
    y_true, y_pred, groups = _random(400, n_groups, seed=n_groups)
    weights = np.random.default_rng(1).uniform(0.1, 2.0, len(y_true)) if weighted else None
    kwargs = {"sensitive_features": groups, "sample_weight": weights}
    assert demographic_parity_difference(y_true, y_pred, **kwargs) == pytest.approx(
        flm.demographic_parity_difference(y_true, y_pred, **kwargs)
    )
    assert equalized_odds_difference(y_true, y_pred, **kwargs) == pytest.approx(
        flm.equalized_odds_difference(y_true, y_pred, **kwargs)
    )
    assert equal_opportunity_difference(y_true, y_pred, **kwargs) == pytest.approx(
        _fairlearn_gap(flm.true_positive_rate, y_true, y_pred, groups, weights)
    )
    assert false_positive_rate_difference(y_true, y_pred, **kwargs) == pytest.approx(
        _fairlearn_gap(flm.false_positive_rate, y_true, y_pred, groups, weights)
    )
    assert disparate_impact_ratio(y_true, y_pred, **kwargs) == pytest.approx(
        flm.demographic_parity_ratio(y_true, y_pred, **kwargs)
    )


def test_hand_computed_eight_rows() -> None:
    # group a: rows 0-3, group b: rows 4-7
    y_true = [1, 1, 0, 0, 1, 1, 0, 0]
    y_pred = [1, 0, 1, 0, 1, 1, 1, 1]
    groups = ["a"] * 4 + ["b"] * 4
    # selection rate: a = 2/4 = 0.5, b = 4/4 = 1.0            -> DSP = 0.5, DI = 0.5
    # TPR (y=1):     a = 1/2 = 0.5, b = 2/2 = 1.0            -> DEO = 0.5
    # FPR (y=0):     a = 1/2 = 0.5, b = 2/2 = 1.0            -> DFP = 0.5
    # equalized odds = max(0.5, 0.5) = 0.5
    kw = {"sensitive_features": groups}
    assert demographic_parity_difference(y_true, y_pred, **kw) == pytest.approx(0.5)
    assert disparate_impact_ratio(y_true, y_pred, **kw) == pytest.approx(0.5)
    assert equal_opportunity_difference(y_true, y_pred, **kw) == pytest.approx(0.5)
    assert false_positive_rate_difference(y_true, y_pred, **kw) == pytest.approx(0.5)
    assert equalized_odds_difference(y_true, y_pred, **kw) == pytest.approx(0.5)
    # Flip the prediction of row 1 (a, y=1): a's TPR becomes 2/2 = 1.0, selection 3/4 = 0.75.
    y_pred2 = [1, 1, 1, 0, 1, 1, 1, 1]
    assert equal_opportunity_difference(y_true, y_pred2, **kw) == pytest.approx(0.0)
    assert demographic_parity_difference(y_true, y_pred2, **kw) == pytest.approx(0.25)
    assert disparate_impact_ratio(y_true, y_pred2, **kw) == pytest.approx(0.75)
    assert equalized_odds_difference(y_true, y_pred2, **kw) == pytest.approx(0.5)  # FPR gap


def test_intersectional_groups_equal_combined_column() -> None:
    rng = np.random.default_rng(3)
    n = 300
    y_true, y_pred = rng.integers(0, 2, n), rng.integers(0, 2, n)
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], n), "race": rng.choice(["x", "y", "z"], n)})
    combined = frame["sex"] + "/" + frame["race"]
    for spec in METRICS.values():
        assert spec.function(y_true, y_pred, sensitive_features=frame) == pytest.approx(
            spec.function(y_true, y_pred, sensitive_features=combined)
        ), spec.name
    # Intersectional gaps are at least as large as the gap along one attribute alone.
    assert demographic_parity_difference(
        y_true, y_pred, sensitive_features=frame
    ) >= demographic_parity_difference(y_true, y_pred, sensitive_features=frame["sex"])


def test_boolean_and_float_labels_are_accepted() -> None:
    y_true = np.array([True, False, True, False])
    y_pred = np.array([1.0, 0.0, 0.0, 0.0])
    assert demographic_parity_difference(y_true, y_pred, sensitive_features=[0, 0, 1, 1]) == 0.5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"y_pred": [1, 0, 1]}, "`y_pred` must have the same length"),
        ({"sensitive_features": ["a", "b"]}, "`sensitive_features` must have the same length"),
        ({"y_pred": [1, 0, 2, 0]}, "`y_pred` must contain only 0/1"),
        ({"y_true": [1, 0, 0.5, 0]}, "`y_true` must contain only 0/1"),
        ({"y_pred": ["yes", "no", "yes", "no"]}, "`y_pred` must contain only 0/1"),
        ({"sensitive_features": ["a", "a", "a", "a"]}, "single group"),
        ({"y_true": [1, 0, np.nan, 0]}, "`y_true` must not contain NaN"),
        ({"y_pred": [1, 0, np.nan, 0]}, "`y_pred` must not contain NaN"),
        ({"sensitive_features": ["a", None, "b", "b"]}, "`sensitive_features` must not contain NaN"),
        ({"sample_weight": [1.0, -1.0, 1.0, 1.0]}, "`sample_weight` must be non-negative"),
        ({"sample_weight": [1.0, np.nan, 1.0, 1.0]}, "`sample_weight` must not contain NaN"),
        ({"sample_weight": [1.0, 1.0]}, "`sample_weight` must have the same length"),
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
    # Group "b" has no positive sample: its true positive rate is undefined.
    with pytest.raises(ValueError, match="group 'b'"):
        equal_opportunity_difference([1, 0, 0, 0], [1, 0, 0, 1], sensitive_features=list("aabb"))
    # ... but demographic parity does not condition on the label.
    assert demographic_parity_difference(
        [1, 0, 0, 0], [1, 0, 0, 1], sensitive_features=list("aabb")
    ) == 0.0


def test_get_metric_aliases_and_unknown_names() -> None:
    assert get_metric("DSP").name == "demographic_parity"
    assert get_metric("deo").name == "equal_opportunity"
    assert get_metric("dfp").name == "false_positive_rate"
    assert get_metric("equalized-odds").name == "equalized_odds"
    with pytest.raises(ValueError, match=r"`metric` must be one of \[.*demographic_parity.*\]"):
        get_metric("accuracy_gap")
