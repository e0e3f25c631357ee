"""fairtune._validation: the one owner of what the caller's labels and groups are.

Labels and sensitive features enter through read_table, the metrics, the mitigations and both
tuning entrances; these tests pin the answers they all share, including the three wrong answers
a user found before this module existed: twins of the favourable label counted as unfavourable,
twins among the groups measured as separate groups without a word, and a group of three rows
whose one validation row decides whether a trial meets the limit.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairtune import _validation as validation
from fairtune._names import argument_names
from fairtune._validation import (
    MIN_GROUP_VALIDATION_ROWS,
    check_group_sizes,
    favourable_labels,
    minimum_group_rows,
    sensitive_groups,
    shown,
    twins,
)
from fairtune.fairness import (
    METRICS,
    FairnessLimit,
    demographic_parity_difference,
    disparate_impact_ratio,
    equal_opportunity_difference,
    equalized_odds_difference,
    false_positive_rate_difference,
    group_rates,
)
from fairtune.fairness.metrics import expected_metric, metric_interval

# The user's target column: 700 favourable rows, 76 of them spelled otherwise.
DECISIONS = ["approved"] * 624 + ["Approved"] * 70 + ["approved "] * 6 + ["denied"] * 300
APPROVED_TWINS = "'approved' (624 rows), 'Approved' (70 rows), 'approved ' (6 rows)"


# -- shown and twins ------------------------------------------------------------------------


def test_shown_lists_values_sorted_and_cut_at_the_limit() -> None:
    assert shown(["b", "a"]) == "['a', 'b']"
    assert shown([np.int64(2), np.int64(1)]) == "[1, 2]"  # numpy scalars as Python values
    assert shown(range(12), limit=3) == "[0, 1, 2, ...]"


def test_twins_groups_the_values_that_differ_only_in_case_or_surrounding_spaces() -> None:
    values = ["approved", "denied", "Approved", "approved ", "DENIED", "pending", "approved"]
    assert twins(values) == [["approved", "Approved", "approved "], ["denied", "DENIED"]]
    assert twins(np.array(["F", " f", "M"], dtype=object)) == [["F", " f"]]
    assert twins(["a", "b", "ab"]) == []
    assert twins(pd.Series(["x", "x", "y"])) == []  # repeats of one value are not twins


# -- favourable labels ------------------------------------------------------------------------


def test_favourable_labels_keeps_its_behaviour_without_twins() -> None:
    y01, classes = favourable_labels([0, 1, 1, 0])
    assert y01.tolist() == [0, 1, 1, 0] and classes.tolist() == [0, 1]
    y01, _ = favourable_labels(np.array([True, False]))
    assert y01.tolist() == [1, 0]
    y01, classes = favourable_labels(["denied", "approved", "denied"], "approved")
    assert y01.tolist() == [0, 1, 0] and classes.tolist() == ["approved", "denied"]
    for y, pos_label, message in [
        ([0, 1, None], None, "`y` must not have missing labels, but got 1 missing values."),
        ([0, 1, 2], None, ("`y` must hold two distinct labels (a binary decision), but got 3: "
                           "[0, 1, 2].")),
        (["no", "yes"], None, ("`y` must be 0/1 (1 = the favourable outcome) or booleans, or "
                               "`pos_label` must name the favourable one, but got the labels "
                               "['no', 'yes'] and pos_label=None.")),
        (["no", "yes"], "maybe", ("`pos_label` must be one of the labels of `y` ['no', 'yes'], "
                                  "but got pos_label='maybe'.")),
    ]:
        with pytest.raises(ValueError) as caught:
            favourable_labels(y, pos_label)
        assert str(caught.value) == message


def test_a_pos_label_with_twins_is_refused_naming_them_and_their_row_counts() -> None:
    # The user's first case: exact comparison would make 76 of 700 approvals unfavourable.
    with pytest.raises(ValueError) as caught:
        favourable_labels(DECISIONS, "approved", argument="`dataset` labels")
    message = str(caught.value)
    assert message.startswith("`pos_label` must match exactly one label of `dataset` labels, "
                              "but got pos_label='approved'")
    assert APPROVED_TWINS in message and "count 76 of their rows as unfavourable" in message
    # Two labels only, twins of each other: still refused (which rows are favourable?).
    with pytest.raises(ValueError, match=r"'yes' \(2 rows\), 'Yes ' \(1 row\)"):
        favourable_labels(["yes", "Yes ", "yes"], "yes")
    # The command line's spelling of the argument.
    with argument_names({"pos_label": "--positive"}), \
            pytest.raises(ValueError, match=r"^--positive must match exactly one label of `y`, "
                                            r"but got --positive 'approved'"):
        favourable_labels(DECISIONS, "approved")


def test_twins_are_named_in_the_errors_about_the_labels() -> None:
    with pytest.raises(ValueError, match=r"must hold two distinct labels .* but got 4: .*"
                                         r"Labels that differ only in case, surrounding spaces "
                                         rf"or a final full stop are different labels: {re.escape(APPROVED_TWINS)}\."):
        favourable_labels(DECISIONS)
    with pytest.raises(ValueError, match=r"must be 0/1 .*pos_label=None\. Labels that differ "
                                         r"only in case.*: 'Yes' \(1 row\), 'yes' \(2 rows\)\."):
        favourable_labels(["Yes", "yes", "yes"])
    with pytest.raises(ValueError, match=r"must be one of the labels of `y` \['approved', "
                                         r"'denied'\], but got pos_label='Approved'\. It differs "
                                         r"only in case.* from 'approved' \(2 rows\)"):
        favourable_labels(["approved", "denied", "approved"], "Approved")
    # Adult's test file writes its labels with a final full stop: the same label, twice.
    with pytest.raises(ValueError, match=r"but got pos_label=' >50K' and labels that differ "
                                         r"from it only in case, surrounding spaces or a final "
                                         r"full stop: ' >50K' \(2 rows\), '>50K\.' \(1 row\)\. "
                                         r"Comparing exactly would count 1 of their rows"):
        favourable_labels([" >50K", " <=50K", " >50K", ">50K."], " >50K")


# -- sensitive groups -------------------------------------------------------------------------


def _former_check_sensitive(sensitive_features, n: int) -> pd.Series:
    """fairtune.fairness.metrics._check_sensitive before it delegated (its accepted inputs)."""
    if isinstance(sensitive_features, pd.DataFrame):
        frame = sensitive_features.reset_index(drop=True)
    else:
        array = np.asarray(sensitive_features, dtype=object)
        frame = pd.DataFrame({"sensitive": array}) if array.ndim == 1 else pd.DataFrame(array)
    assert len(frame) == n
    if frame.shape[1] == 1:
        return pd.Series(frame.iloc[:, 0].to_numpy(), name="group")
    return pd.Series(list(frame.itertuples(index=False, name=None)), name="group")


SENSITIVE_INPUTS = {
    "list": ["a", "b", "a", "b"],
    "ints": np.array([0, 1, 1, 0]),
    "series with an index": pd.Series(["a", "b", "b", "a"], index=[9, 3, 5, 1], name="sex"),
    "categorical with an unused category": pd.Series(
        pd.Categorical(["a", "b", "a", "b"], categories=["a", "b", "c"])),
    "one-column frame": pd.DataFrame({"sex": ["a", "b", "a", "b"]}, index=[4, 3, 2, 1]),
    "two-column frame": pd.DataFrame({"sex": list("aabb"), "age": [1, 2, 1, 2]}, index=[7, 6, 5, 4]),
    "2-d array": np.array([["a", "x"], ["a", "y"], ["b", "x"], ["b", "x"]], dtype=object),
    "column array": np.array([["a"], ["b"], ["b"], ["a"]]),
}


@pytest.mark.parametrize("name", list(SENSITIVE_INPUTS))
def test_sensitive_groups_normalises_as_the_metrics_did(name: str) -> None:
    value = SENSITIVE_INPUTS[name]
    groups = sensitive_groups(value, 4)
    expected = _former_check_sensitive(value, 4)
    pd.testing.assert_series_equal(groups, expected)
    assert isinstance(groups.index, pd.RangeIndex) and groups.name == "group"
    if name == "two-column frame":
        assert groups.tolist() == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    if name.startswith("categorical"):
        assert set(groups) == {"a", "b"}  # an unused category is not a group


@pytest.mark.parametrize(
    ("value", "n", "message"),
    [
        (np.zeros((4, 1, 1)), 4, ("`sensitive_features` must be 1-d or 2-d (one column per "
                                  "feature), but got an array of shape (4, 1, 1).")),
        (["a", "b"], 4, ("`sensitive_features` must have the same length as `y_true`, but got "
                         "len(y_true)=4 and len(sensitive_features)=2.")),
        (pd.DataFrame(index=range(4)), 4, ("`sensitive_features` must have at least one column, "
                                           "but got none.")),
        (["a", None, "b", np.nan], 4, ("`sensitive_features` must not contain NaN or missing "
                                       "values, but got 2 of them.")),
        (["a"] * 4, 4, ("`sensitive_features` must define at least two groups to compare, but "
                        "got a single group 'a'.")),
        (pd.DataFrame({"s": ["a"] * 4, "r": ["x"] * 4}), 4,
         ("`sensitive_features` must define at least two groups to compare, but got a single "
          "group ('a', 'x').")),
    ],
)
def test_sensitive_groups_refuses_with_the_metrics_messages(value, n: int, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        sensitive_groups(value, n)
    assert str(caught.value) == message
    # The metrics say the same, through sensitive_groups.
    with pytest.raises(ValueError) as caught:
        demographic_parity_difference([0, 1, 0, 1], [0, 1, 1, 1], sensitive_features=value)
    assert str(caught.value) == message


def test_sensitive_groups_names_the_callers_argument_and_lets_predictions_through() -> None:
    with pytest.raises(ValueError, match=r"^--sensitive must define at least two groups"):
        sensitive_groups(["a", "a"], argument="--sensitive")
    # Rows to predict may be of one group, or missing one (the fitted model refuses it).
    assert sensitive_groups(["a", None], predicting=True).tolist() == ["a", None]
    assert sensitive_groups(["a", "a"], predicting=True).tolist() == ["a", "a"]
    with pytest.raises(ValueError, match="must not contain NaN"):
        sensitive_groups(["a", None, "b"])


def _twin_groups() -> pd.Series:
    """The user's second case: F, f and Female in one column."""
    return pd.Series(["F"] * 30 + ["f "] * 4 + ["Female"] * 6 + ["M"] * 40, name="sex")


def test_twins_among_a_sensitive_column_are_named_in_one_warning_at_the_caller() -> None:
    with pytest.warns(UserWarning) as caught:
        groups = sensitive_groups(_twin_groups(), warn_twins=True)
    assert len(caught) == 1 and caught[0].filename == __file__
    message = str(caught[0].message)
    assert message.startswith("`sensitive_features` column 'sex' has values that differ only "
                              "in case, surrounding spaces or a final full stop: 'F' (30 rows), 'f ' (4 rows); "
                              "they are measured as separate groups.")
    assert "['F', 'Female', 'M', 'f ']" in message  # all values: 'Female' shows too
    assert sorted(pd.unique(groups)) == ["F", "Female", "M", "f "]  # nothing is merged
    # Several columns, twins in two: one warning naming both.
    frame = pd.DataFrame({"sex": _twin_groups(), "race": ["B", "b"] * 40})
    with pytest.warns(UserWarning) as caught:
        sensitive_groups(frame, warn_twins=True, argument="`dataset` sensitive features")
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "`dataset` sensitive features column 'sex'" in text and "column 'race'" in text
    assert "'B' (40 rows), 'b' (40 rows)" in text


def test_the_warning_points_where_the_stacklevel_says() -> None:
    def entrance():
        return sensitive_groups(_twin_groups(), warn_twins=True, stacklevel=3)

    with pytest.warns(UserWarning) as caught:
        entrance()  # the line of the user's call
    assert caught[0].lineno == entrance.__code__.co_firstlineno + 4


def test_no_warning_unless_asked_and_the_metrics_never_ask() -> None:
    groups = _twin_groups()
    y_true = np.tile([0, 1], 40)
    y_pred = np.tile([1, 1, 0, 1], 20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sensitive_groups(groups)
        for spec in METRICS.values():
            spec.function(y_true, y_pred, sensitive_features=groups)
        expected_metric("demographic_parity", y_true, np.full(80, 0.5),
                        sensitive_features=groups)
        metric_interval("dsp", y_true, y_pred, sensitive_features=groups, random_state=0,
                        n_resamples=100)
    # The twins are separate groups: 'f ' (4 rows) has its own rate.
    rates = group_rates(y_true, y_pred, sensitive_features=groups)
    assert sorted(rates.index) == ["F", "Female", "M", "f "]


def _rate(y_pred: np.ndarray, rows: np.ndarray) -> float:
    return float(y_pred[rows].mean())


def test_metric_values_are_unchanged_for_one_and_two_sensitive_columns() -> None:
    rng = np.random.default_rng(0)
    n = 400
    sex = rng.choice(["f", "m"], n)
    age = rng.choice(["young", "old"], n)
    y_true = rng.integers(0, 2, n)
    y_pred = (rng.random(n) < np.where(sex == "m", 0.7, 0.4)).astype(int)
    # One column: the selection-rate gap by hand.
    dsp = abs(_rate(y_pred, sex == "m") - _rate(y_pred, sex == "f"))
    assert demographic_parity_difference(y_true, y_pred, sensitive_features=sex) == \
        pytest.approx(dsp, abs=1e-12)
    # Two columns: four intersectional groups; the gaps by hand.
    cells = [(sex == s) & (age == a) for s in ("f", "m") for a in ("young", "old")]
    selection = [_rate(y_pred, c) for c in cells]
    tpr = [_rate(y_pred, c & (y_true == 1)) for c in cells]
    fpr = [_rate(y_pred, c & (y_true == 0)) for c in cells]
    frame = pd.DataFrame({"sex": sex, "age": age}, index=np.arange(n)[::-1])
    for sensitive in (frame, frame.to_numpy()):
        assert demographic_parity_difference(y_true, y_pred, sensitive_features=sensitive) == \
            pytest.approx(max(selection) - min(selection), abs=1e-12)
        assert equal_opportunity_difference(y_true, y_pred, sensitive_features=sensitive) == \
            pytest.approx(max(tpr) - min(tpr), abs=1e-12)
        assert false_positive_rate_difference(y_true, y_pred, sensitive_features=sensitive) == \
            pytest.approx(max(fpr) - min(fpr), abs=1e-12)
        assert equalized_odds_difference(y_true, y_pred, sensitive_features=sensitive) == \
            pytest.approx(max(max(tpr) - min(tpr), max(fpr) - min(fpr)), abs=1e-12)
        assert disparate_impact_ratio(y_true, y_pred, sensitive_features=sensitive) == \
            pytest.approx(min(selection) / max(selection), abs=1e-12)
    by_group = group_rates(y_true, y_pred, sensitive_features=frame)
    assert len(by_group) == 4 and by_group.index.nlevels == 2


# -- the mitigations read groups through sensitive_groups ------------------------------------


def test_mitigation_labels_one_per_row_and_distinct_per_combination() -> None:
    from fairtune.tuning.mitigation import _as_sensitive

    one = pd.Series(["f", "m", "f"], index=[5, 6, 7])
    assert _as_sensitive(one).tolist() == ["f", "m", "f"]
    two = pd.DataFrame({"sex": ["f", "m", "f"], "age": [1, 1, 2]})
    assert _as_sensitive(two).tolist() == ["f|1", "m|1", "f|2"]
    # Escaped as fairlearn escapes its separator: two combinations never share a label.
    clash = pd.DataFrame({"a": ["x|y", "x"], "b": ["z", "y|z"]})
    labels = _as_sensitive(clash, predicting=False)
    assert labels.tolist() == ["x\\|y|z", "x|y\\|z"] and labels[0] != labels[1]
    # At fit, the checks of sensitive_groups; at prediction, any rows.
    with pytest.raises(ValueError, match="must define at least two groups"):
        _as_sensitive(["f", "f"], predicting=False)
    with pytest.raises(ValueError, match="must not contain NaN"):
        _as_sensitive(["f", None, "m"], predicting=False)
    assert _as_sensitive(["f", None]).tolist() == ["f", None]


def test_a_mitigation_refuses_missing_groups_at_fit() -> None:
    from sklearn.linear_model import LogisticRegression

    from fairtune.tuning import ThresholdClassifier

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"x": rng.normal(size=40)})
    y = np.tile([0, 1], 20)
    groups = pd.Series(["a", "b"] * 19 + [None, "a"])
    with pytest.raises(ValueError, match=r"`sensitive_features` must not contain NaN or missing "
                                         r"values, but got 1 of them"):
        ThresholdClassifier(LogisticRegression()).fit(X, y, sensitive_features=groups)


# -- group sizes --------------------------------------------------------------------------------


def test_the_minimum_group_size_follows_the_tightest_upper_bound() -> None:
    def limits(*texts: str) -> list[FairnessLimit]:
        return [FairnessLimit.parse(t) for t in texts]

    assert MIN_GROUP_VALIDATION_ROWS == 2
    assert minimum_group_rows(limits("demographic_parity<=0.05")) == 21
    assert minimum_group_rows(limits("demographic_parity<=0.1")) == 11
    assert minimum_group_rows(limits("demographic_parity<=0.2")) == 6
    assert minimum_group_rows(limits("demographic_parity<=0.9")) == 2
    assert minimum_group_rows(None) == 2
    assert minimum_group_rows([]) == 2
    # Ratios bound from below and do not count; the tightest upper bound does.
    assert minimum_group_rows(limits("disparate_impact>=0.8")) == 2
    assert minimum_group_rows(limits("dsp<=0.2", "disparate_impact>=0.05")) == 6
    assert minimum_group_rows(limits("dsp<=0.2", "eod<=0.05", "di>=0.9")) == 21
    assert minimum_group_rows(FairnessLimit.parse("dsp<=0.04")) == 26  # one limit
    # Duck-typed: anything with .sense and .bound.
    class Limit:
        sense, bound = "upper", 0.025

    assert minimum_group_rows([Limit()]) == 41


def test_a_group_too_small_to_measure_is_refused_naming_it_and_the_fix() -> None:
    # The user's third case: a group of 3 validation rows under a 0.05 limit.
    groups = pd.Series(["a"] * 40 + ["b"] * 30 + ["c"] * 3)
    minimum = minimum_group_rows([FairnessLimit.parse("demographic_parity<=0.05")])
    rows = np.arange(len(groups))
    with pytest.raises(ValueError) as caught:
        check_group_sizes(groups, rows, minimum, where="the validation split",
                          argument="`sensitive_features`",
                          needs="the limit demographic_parity<=0.05")
    assert str(caught.value) == (
        "`sensitive_features` gives the group 'c' 3 rows in the validation split; the limit "
        "demographic_parity<=0.05 needs at least 21 rows of each group there: more rows of the "
        "group, or merging it into another.")
    # Each small group, smallest first; intersectional groups by their text; a group none of
    # the rows holds has 0 of them.
    with pytest.raises(ValueError, match=r"gives the group 'b, 1' 0 rows, the group 'a, 2' 2 "
                                         r"rows in the cross-validation folds"):
        check_group_sizes(pd.Series([("a", 1)] * 12 + [("a", 2)] * 2 + [("b", 1)]),
                          np.arange(14), 10, where="the cross-validation folds",
                          argument="`dataset` sensitive")
    # A share that left a group of enough rows too few is named, with what would do, in the
    # caller's spelling; a group too small in all names the data.
    share = ("test_size", 0.9, "a smaller")
    with pytest.raises(ValueError, match=r"^test_size=0\.9 leaves the group 'c' 3 rows in x; .*"
                                         r"there: a smaller `test_size`, more rows"):
        check_group_sizes(pd.Series(["a"] * 40 + ["c"] * 30), np.arange(43), 21, where="x",
                          argument="`s`", share=share)
    with argument_names({"test_size": "--test-size"}), pytest.raises(
            ValueError, match=r"^--test-size 0\.9 leaves .*: a smaller --test-size, more rows"):
        check_group_sizes(pd.Series(["a"] * 40 + ["c"] * 30), np.arange(43), 21, where="x",
                          argument="`s`", share=share)
    with pytest.raises(ValueError, match=r"^`s` gives the group 'c' 3 rows in x; .*: more rows"):
        check_group_sizes(groups, rows, 21, where="x", argument="`s`", share=share)
    # Exactly the minimum passes.
    check_group_sizes(pd.Series(["a"] * 21 + ["b"] * 21), np.arange(42), 21, where="x",
                      argument="`s`")


def test_one_row_of_a_group_at_the_minimum_moves_its_rate_by_less_than_the_bound() -> None:
    for bound in (0.01, 0.03, 0.05, 0.07, 0.1, 1 / 30, 0.2):
        minimum = minimum_group_rows([FairnessLimit("dsp", bound)])
        assert 1 / minimum < bound or minimum == MIN_GROUP_VALIDATION_ROWS
        assert 1 / (minimum - 1) >= bound or minimum == MIN_GROUP_VALIDATION_ROWS


# -- read_table and the command line ------------------------------------------------------------


def _applicants_csv(tmp_path: Path, decisions: list[str] | None = None) -> Path:
    rng = np.random.default_rng(0)
    decisions = DECISIONS if decisions is None else decisions
    n = len(decisions)
    sex = rng.choice(["female", "male"], n)
    frame = pd.DataFrame({"income": rng.normal(50, 15, n).round(1), "sex": sex,
                          "decision": decisions})
    path = tmp_path / "applicants.csv"
    frame.to_csv(path, index=False)
    return path


def test_read_table_refuses_a_positive_with_twins(tmp_path: Path) -> None:
    from fairtune.datasets import read_table

    path = _applicants_csv(tmp_path)
    assert pd.read_csv(path)["decision"].value_counts()["approved "] == 6  # kept by the CSV
    with pytest.raises(ValueError) as caught:
        read_table(path, target="decision", sensitive="sex", positive="approved")
    message = str(caught.value)
    assert message.startswith("`positive` must match exactly one label of `target` 'decision', "
                              "but got positive='approved'")
    assert APPROVED_TWINS in message and "76 of their rows" in message
    # Consistent labels are read as before.
    consistent = ["approved" if d.strip().lower() == "approved" else d for d in DECISIONS]
    path = _applicants_csv(tmp_path, consistent)
    data = read_table(path, target="decision", sensitive="sex", positive="approved")
    assert int(data.target.sum()) == 700


def test_the_command_line_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fairtune.cli import main

    path = _applicants_csv(tmp_path)
    argv = ["tune", "--data", str(path), "--target", "decision", "--sensitive", "sex",
            "--positive", "approved", "--model", "linear", "--limit", "demographic_parity<=0.1",
            "--n-trials", "1", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--positive must match exactly one label of --target 'decision', but got --positive " \
           "'approved'" in err
    assert APPROVED_TWINS in err


def test_read_table_warns_of_twins_in_a_sensitive_column(tmp_path: Path) -> None:
    from fairtune.datasets import read_table

    path = tmp_path / "groups.csv"
    pd.DataFrame({"x": np.arange(80.0), "sex": _twin_groups(),
                  "decision": np.tile([0, 1], 40)}).to_csv(path, index=False)
    with pytest.warns(UserWarning) as caught:
        data = read_table(path, target="decision", sensitive="sex")
    assert len(caught) == 1 and caught[0].filename == __file__
    assert str(caught[0].message).startswith(
        "`sensitive` column 'sex' has values that differ only in case, surrounding spaces or a final full stop: "
        "'F' (30 rows), 'f ' (4 rows); they are measured as separate groups.")
    assert sorted(pd.unique(data.sensitive_features)) == ["F", "Female", "M", "f "]
    # Without twins, no warning.
    pd.DataFrame({"x": np.arange(8.0), "sex": ["F", "M"] * 4,
                  "decision": [0, 1] * 4}).to_csv(path, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_table(path, target="decision", sensitive="sex")


# -- layering -----------------------------------------------------------------------------------


def test_validation_is_a_bottom_module() -> None:
    from tests.test_layout import GRAPH

    assert GRAPH["fairtune._validation"] <= {"fairtune._names", "fairtune._text"}
    for user in ("fairtune.fairness.metrics", "fairtune.tuning.mitigation",
                 "fairtune.datasets._table"):
        assert "fairtune._validation" in GRAPH[user]
    assert validation.__doc__ is not None and "floor(1 / b) + 1" in validation.__doc__


@pytest.mark.parametrize("spelling", ["TRUE", "True", "true", "FALSE"])
def test_a_positive_spelled_as_the_file_spells_a_boolean_is_that_boolean(
    tmp_path: Path, spelling: str,
) -> None:
    """pandas reads TRUE / FALSE in a file as booleans: ``--positive TRUE`` is the file's
    value as typed, not a near miss of Python's ``True``."""
    from fairtune.datasets import read_table

    rng = np.random.default_rng(0)
    hired = rng.choice(["TRUE", "FALSE"], 300)
    frame = pd.DataFrame({"x": rng.normal(size=300), "sex": rng.choice(["F", "M"], 300),
                          "hired": hired})
    frame.to_csv(tmp_path / "d.csv", index=False)
    data = read_table(tmp_path / "d.csv", target="hired", sensitive="sex", positive=spelling)
    favourable = "TRUE" if spelling.lower() == "true" else "FALSE"
    assert int(data.target.sum()) == int((hired == favourable).sum())
    with pytest.raises(ValueError, match=r"must be one of the values of `target` 'hired' "
                                         r"\['False', 'True'\], but got positive='yes'"):
        read_table(tmp_path / "d.csv", target="hired", sensitive="sex", positive="yes")


def test_a_group_without_the_label_a_rate_is_measured_on_is_named_with_the_rate_and_limit() -> None:
    from fairtune._validation import check_groups_have_labels

    groups = pd.Series(["a", "a", "b", "b", "b"])
    y01 = np.array([0, 1, 1, 1, 1])
    needs = [("equalized_odds<=0.1", "true positive rate", 1),
             ("equalized_odds<=0.1", "false positive rate", 0)]
    with pytest.raises(ValueError, match=r"^`s` must give each group rows of every label .* in "
                                         r"the validation split group 'b' has no row labelled 0 "
                                         r"\(unfavourable\) among its 3 rows: its false positive "
                                         r"rate is undefined, and equalized_odds<=0\.1 needs it\. "
                                         r"The data has no unfavourable rows of the group\. Give "
                                         r"it unfavourable rows there \(more data\), merge it"):
        check_groups_have_labels(groups, y01, needs, where="the validation split",
                                 argument="`s`", rows=np.arange(5),
                                 share=("test_size", 0.5, "a smaller"))
    # Rows of the label elsewhere in the data: the share that drew the rows can help.
    with pytest.raises(ValueError, match=r"among its 3 rows: .* The data has 2 unfavourable rows "
                                         r"of the group\. Give it unfavourable rows there \(a "
                                         r"smaller `test_size` or more data\)"):
        check_groups_have_labels(pd.concat([groups, groups[2:4]]), np.r_[y01, 0, 0], needs,
                                 where="the validation split", argument="`s`",
                                 rows=np.arange(5), share=("test_size", 0.5, "a smaller"))
    with pytest.raises(ValueError, match=r"needs it\. Give it unfavourable rows there \(a larger "
                                         r"`safety_size` or more data\)"):
        check_groups_have_labels(groups, y01, needs, where="the safety rows", argument="`s`",
                                 share=("safety_size", None, "a larger"))
    # The selection rate is measured on every row; the true positive rate has its rows.
    check_groups_have_labels(groups, y01, needs[:1], where="x", argument="`s`")
