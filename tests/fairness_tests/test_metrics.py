from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from fairlearn import metrics as flm

from fairtune import _validation as validation
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


_SENSITIVE = "`sensitive_features`"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"y_pred": [1, 0, 1]}, _msg(fm._MSG_LENGTH, name="y_pred", n=4, m=3)),
        (
            {"sensitive_features": ["a", "b"]},
            _msg(validation.MSG_SENSITIVE_LENGTH, argument=_SENSITIVE,
                 name="sensitive_features", n=4, m=2),
        ),
        ({"sample_weight": [1.0, 1.0]}, _msg(fm._MSG_LENGTH, name="sample_weight", n=4, m=2)),
        ({"y_pred": [1, 0, 2, 0]}, "`y_pred` must contain only 0/1"),
        ({"y_pred": [1, 0, -1, 0]}, "`y_pred` must contain only 0/1"),
        ({"y_true": [1, 0, 0.5, 0]}, "`y_true` must contain only 0/1"),
        ({"y_pred": ["yes", "no", "yes", "no"]}, "`y_pred` must contain only 0/1"),
        ({"y_pred": ["1", "0", "1", "0"]}, "`y_pred` must contain only 0/1"),
        ({"y_pred": [[1, 0], [0, 1], [1, 1], [0, 0]]}, "`y_pred` must be one-dimensional"),
        (
            {"sensitive_features": ["a", "a", "a", "a"]},
            _msg(validation.MSG_SINGLE_GROUP, argument=_SENSITIVE, group="a"),
        ),
        (
            {"sensitive_features": pd.DataFrame({"s": ["a"] * 4, "r": ["x"] * 4})},
            _msg(validation.MSG_SINGLE_GROUP, argument=_SENSITIVE, group=("a", "x")),
        ),
        ({"y_true": [1, 0, np.nan, 0]}, _msg(fm._MSG_NAN, name="y_true", count=1)),
        ({"y_pred": [1, 0, np.nan, np.nan]}, _msg(fm._MSG_NAN, name="y_pred", count=2)),
        (
            {"sensitive_features": ["a", None, "b", "b"]},
            _msg(validation.MSG_SENSITIVE_MISSING, argument=_SENSITIVE, count=1),
        ),
        (
            {"sensitive_features": pd.DataFrame({"s": list("aabb"), "r": [1, np.nan, 2, 2]})},
            _msg(validation.MSG_SENSITIVE_MISSING, argument=_SENSITIVE, count=1),
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


# --- metric_interval -------------------------------------------------------------------------


def _sample(rates: dict[str, tuple[float, float]], sizes: dict[str, int], seed: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Half positives in each group; ``rates[g]`` = (P(yhat=1 | y=1, g), P(yhat=1 | y=0, g))."""
    rng = np.random.default_rng(seed)
    y_true, y_pred, groups = [], [], []
    for group, n in sizes.items():
        labels = np.arange(n) % 2
        y_true.append(labels)
        y_pred.append((rng.random(n) < np.where(labels == 1, *rates[group])).astype(int))
        groups.append(np.full(n, group))
    return np.concatenate(y_true), np.concatenate(y_pred), np.concatenate(groups)


def test_interval_matches_the_normal_interval_of_a_two_group_gap() -> None:
    # Far from 0 the gap in selection rate is a difference of two binomial proportions.
    y_true, y_pred, groups = _sample({"a": (0.7, 0.4), "b": (0.4, 0.2)}, {"a": 600, "b": 400}, 0)
    p = {g: y_pred[groups == g].mean() for g in ("a", "b")}
    se = np.sqrt(p["a"] * (1 - p["a"]) / 600 + p["b"] * (1 - p["b"]) / 400)
    gap = demographic_parity_difference(y_true, y_pred, sensitive_features=groups)
    low, high = fm.metric_interval("dsp", y_true, y_pred, sensitive_features=groups,
                                   n_resamples=4000, random_state=0)
    assert low == pytest.approx(gap - 1.96 * se, abs=0.006)
    assert high == pytest.approx(gap + 1.96 * se, abs=0.006)
    # Four times the rows, half the width.
    y_true4, y_pred4, groups4 = _sample({"a": (0.7, 0.4), "b": (0.4, 0.2)}, {"a": 2400, "b": 1600}, 1)
    low4, high4 = fm.metric_interval("dsp", y_true4, y_pred4, sensitive_features=groups4,
                                     n_resamples=4000, random_state=0)
    assert (high4 - low4) / (high - low) == pytest.approx(0.5, abs=0.08)


_UNEQUAL = {"a": (0.8, 0.3), "b": (0.65, 0.2), "c": (0.7, 0.1)}
_EQUAL = {"a": (0.7, 0.2), "b": (0.7, 0.2), "c": (0.7, 0.2)}


@pytest.mark.parametrize("rates", [_UNEQUAL, _EQUAL], ids=["unequal", "equal"])
@pytest.mark.parametrize("metric", ["demographic_parity", "equalized_odds", "disparate_impact"])
def test_interval_covers_the_true_metric_as_often_as_its_level(
    metric: str, rates: dict[str, tuple[float, float]]
) -> None:
    # Equal rates: the true gap is 0 (the ratio 1), the edge that a sample's gap always exceeds.
    sizes = {"a": 500, "b": 300, "c": 400}
    # The metric of the population the samples come from, from its exact group rates.
    selection = {g: (tpr + fpr) / 2 for g, (tpr, fpr) in rates.items()}
    truth = {
        "demographic_parity": max(selection.values()) - min(selection.values()),
        "equalized_odds": max(max(r[i] for r in rates.values()) - min(r[i] for r in rates.values())
                              for i in (0, 1)),
        "disparate_impact": min(selection.values()) / max(selection.values()),
    }[metric]
    covered = []
    for seed in range(200):
        y_true, y_pred, groups = _sample(rates, sizes, seed)
        low, high = fm.metric_interval(metric, y_true, y_pred, sensitive_features=groups,
                                       confidence_level=0.9, n_resamples=1000, random_state=seed)
        covered.append(low <= truth <= high)
    # 90 % nominal, 200 samples: a standard error of 0.021. Three groups (and two rates for
    # equalized odds) make the interval wider than the metric alone needs, so only from below.
    assert np.mean(covered) >= 0.84


@pytest.mark.parametrize("gap", [0.0, 0.03, 0.1])
def test_interval_of_a_two_group_gap_covers_it_as_often_as_its_level(gap: float) -> None:
    rates = {"a": (0.6 + gap, 0.2 + gap), "b": (0.6, 0.2)}
    covered = []
    for seed in range(300):
        y_true, y_pred, groups = _sample(rates, {"a": 400, "b": 300}, seed)
        low, high = fm.metric_interval("demographic_parity", y_true, y_pred,
                                       sensitive_features=groups, confidence_level=0.9,
                                       n_resamples=1000, random_state=seed)
        covered.append(low <= gap <= high)
    # 90 % nominal; standard error 0.017. A gap within about a standard error of 0 (here 0.037)
    # is covered more often: the interval of |d| also holds it when d's sign is wrong.
    assert 0.85 <= np.mean(covered) <= (0.95 if gap in (0.0, 0.1) else 1.0)


def test_interval_of_intersectional_groups_equals_the_combined_column() -> None:
    y_true, y_pred, _ = _random(600, 2, seed=4)
    rng = np.random.default_rng(40)
    frame = pd.DataFrame({"sex": rng.choice(["f", "m"], 600), "race": rng.choice(["x", "y"], 600)})
    combined = frame["sex"] + "|" + frame["race"]
    for metric in ("equalized_odds", "disparate_impact"):
        assert fm.metric_interval(metric, y_true, y_pred, sensitive_features=frame,
                                  random_state=3) == fm.metric_interval(
            metric, y_true, y_pred, sensitive_features=combined, random_state=3)


def test_interval_is_reproducible_and_contains_a_clear_gap() -> None:
    y_true, y_pred, groups = _random(20000, 3, seed=5)
    first = fm.metric_interval("eod", y_true, y_pred, sensitive_features=groups, random_state=7)
    assert first == fm.metric_interval("eod", y_true, y_pred, sensitive_features=groups,
                                       random_state=np.random.default_rng(7))
    assert first != fm.metric_interval("eod", y_true, y_pred, sensitive_features=groups,
                                       random_state=8)
    gap = equalized_odds_difference(y_true, y_pred, sensitive_features=groups)
    assert 0 < first[0] < gap < first[1]
    assert (first[0] + first[1]) / 2 == pytest.approx(gap)  # the gap plus and minus c
    wide = fm.metric_interval("eod", y_true, y_pred, sensitive_features=groups,
                              confidence_level=0.99, random_state=7)
    assert wide[0] < first[0] and wide[1] > first[1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"confidence_level": 1.0}, r"`confidence_level` must be a float in \(0, 1\), but got confidence_level=1\.0\."),
        ({"confidence_level": 0}, r"`confidence_level` must .*got confidence_level=0\."),
        ({"confidence_level": True}, r"`confidence_level` must .*got confidence_level=True"),
        ({"confidence_level": "0.95"}, r"`confidence_level` must .*got confidence_level='0.95'"),
        ({"n_resamples": 10}, r"`n_resamples` must be an integer of at least 100, but got n_resamples=10\."),
        ({"n_resamples": 500.0}, r"`n_resamples` must .*got n_resamples=500\.0"),
        ({"metric": "parity"}, r"`metric` must be one of .*but got 'parity'"),
    ],
)
def test_interval_bad_input_raises_naming_the_argument(kwargs: dict, match: str) -> None:
    y_true, y_pred, groups = _random(200, 2, seed=0)
    arguments = {"metric": "demographic_parity", **kwargs}
    with pytest.raises(ValueError, match=match):
        fm.metric_interval(arguments.pop("metric"), y_true, y_pred, sensitive_features=groups,
                           **arguments)


def test_interval_of_an_undefined_rate_raises_naming_the_group() -> None:
    y_true = np.array([1, 0, 1, 0, 0, 0])
    y_pred = np.array([1, 0, 0, 1, 1, 0])
    groups = np.array(["a", "a", "a", "b", "b", "b"])
    with pytest.raises(ValueError, match="The true positive rate of group 'b' is undefined"):
        fm.metric_interval("equal_opportunity", y_true, y_pred, sensitive_features=groups)


def _each_row_twice(y_true, p, sensitive):
    """A randomized classifier's rows as weighted outcomes: each row predicted 1 with weight p
    and 0 with weight 1 - p, whose weighted metrics are the expected ones."""
    twice = (pd.concat([sensitive, sensitive], ignore_index=True)
             if isinstance(sensitive, pd.DataFrame) else np.concatenate([sensitive, sensitive]))
    return (np.concatenate([y_true, y_true]),
            np.concatenate([np.ones(len(p), int), np.zeros(len(p), int)]), twice,
            np.concatenate([p, 1.0 - p]))


@pytest.mark.parametrize("name", sorted(METRICS))
@pytest.mark.parametrize("intersectional", [False, True])
def test_expected_metric_equals_the_weighted_metric_of_both_outcomes(
    name: str, intersectional: bool
) -> None:
    rng = np.random.default_rng(3)
    n = 500
    y_true = rng.integers(0, 2, n)
    sensitive = (pd.DataFrame({"sex": rng.choice(["F", "M"], n), "race": rng.choice(["x", "y"], n)})
                 if intersectional else rng.choice(["a", "b", "c"], n))
    p = np.clip(0.3 + 0.4 * y_true + rng.normal(scale=0.2, size=n), 0.0, 1.0)
    y2, pred2, s2, w2 = _each_row_twice(y_true, p, sensitive)
    weighted = METRICS[name].function(y2, pred2, sensitive_features=s2, sample_weight=w2)
    expected = fm.expected_metric(name, y_true, p, sensitive_features=sensitive)
    assert expected == pytest.approx(weighted, abs=1e-12)
    assert expected != pytest.approx(METRICS[name].function(
        y_true, (p > 0.5).astype(int), sensitive_features=sensitive), abs=1e-3)
    # 0/1 probabilities are 0/1 predictions.
    hard = (p > 0.5).astype(int)
    assert fm.expected_metric(name, y_true, hard.astype(float), sensitive_features=sensitive) == \
        pytest.approx(METRICS[name].function(y_true, hard, sensitive_features=sensitive), abs=1e-12)


@pytest.mark.parametrize(("probabilities", "match"), [
    (np.array([0.2, 1.5, 0.3, 0.1]), r"`probabilities` must be in \[0, 1\], but got 1 value"),
    (np.array([0.2, np.nan, 0.3, 0.1]), r"`probabilities` must be in \[0, 1\]"),
    (np.array([0.2, 0.3, 0.1]), r"`probabilities` must have the same length as `y_true`"),
])
def test_expected_metric_refuses_bad_probabilities(probabilities, match) -> None:
    with pytest.raises(ValueError, match=match):
        fm.expected_metric("demographic_parity", [0, 1, 0, 1], probabilities,
                           sensitive_features=["a", "a", "b", "b"])


def test_expected_metric_names_a_group_whose_rate_is_undefined() -> None:
    with pytest.raises(ValueError, match=r"true positive rate of group 'b' is undefined"):
        fm.expected_metric("equal_opportunity", [0, 1, 0, 0], [0.2, 0.8, 0.4, 0.1],
                           sensitive_features=["a", "a", "b", "b"])


def test_a_ratio_of_no_one_selected_is_1_on_the_rows_and_not_settled_on_new_data() -> None:
    """Disparate impact of a model that selects no row: 1 on those rows (the definition), but
    its interval on new data reaches 0, since rates of 0 on a sample are only small rates on
    new data; a model that selects every row is settled near 1. (Its bound alike:
    tests/fairness_tests/test_bounds.py.)"""
    from fairtune.fairness import disparate_impact_ratio, metric_interval

    group = np.array(["a", "b"] * 500)
    y_true = np.array([0, 0, 1, 1] * 250)
    none, every = np.zeros(1000, dtype=int), np.ones(1000, dtype=int)
    for y_pred in (none, every):
        assert disparate_impact_ratio(y_true, y_pred, sensitive_features=group) == 1.0
    assert metric_interval("di", y_true, none, sensitive_features=group,
                           random_state=0) == (0.0, 1.0)
    assert metric_interval("di", y_true, every, sensitive_features=group,
                           random_state=0) == (1.0, 1.0)
