"""A share of the rows (test_size, safety_size, validation_size, cv) that leaves a part too
small is refused before any trial naming that argument and the value given, not the data; the
group sizes are checked against the limits the trials are validated against."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from fairtune._names import argument_names
from fairtune.tuning import FairObjective


def _rows(n: int, seed: int = 0) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n)})
    y = pd.Series((rng.random(n) < 1 / (1 + np.exp(-1.5 * X["x1"]))).astype(int), name="y")
    s = pd.Series(rng.choice(["A", "B"], n), name="grp")
    return X, y, s


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"test_size": 1e-9},
     "test_size=1e-09 gives the test split 1 of the 2,000 rows of the data and leaves the "
     "tuning rows 1,999, but a split stratified by label needs at least one row of each of the "
     "2 labels in each part: a larger `test_size`."),
    ({"test_size": 0.2, "confidence": 0.9, "safety_size": 1e-5},
     "safety_size=1e-05 gives the safety rows 1 of the 1,600 tuning rows that test_size=0.2 "
     "leaves and leaves the search 1,599, but a split stratified by label needs at least one "
     "row of each of the 2 labels in each part: a larger `safety_size`."),
    ({"test_size": 0.99999}, "gives the test split 2,000 of the 2,000 rows of the data and "
                              "leaves the tuning rows 0, but a split stratified by label needs "
                              "at least one row of each of the 2 labels in each part: a smaller "
                              "`test_size`."),
])
def test_a_share_too_small_to_split_names_the_argument_and_the_rows_it_gives(
        kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=re.escape(needle)):
        FairObjective(_rows(2000), "linear", limits="dsp<=0.3", **kwargs)
    # The command line's flag, as typed.
    name, value = next(iter(kwargs.items())) if "safety_size" not in kwargs else (
        "safety_size", kwargs["safety_size"])
    flag = "--" + name.replace("_", "-")
    with argument_names({"test_size": "--test-size", "safety_size": "--safety-size"}):
        with pytest.raises(ValueError, match=re.escape(f"{flag} {value!r} gives")):
            FairObjective(_rows(2000), "linear", limits="dsp<=0.3", **kwargs)


def test_a_safety_size_that_leaves_the_search_too_few_rows_is_named_not_the_data() -> None:
    # The minimum is that of the limit the trials are validated against (tightened for the
    # confidence on the safety rows), not that of the limit as given (4 rows for 0.3).
    with pytest.raises(ValueError, match=r"^safety_size=0\.99 leaves the group '[AB]' \d rows, "
                                         r"the group '[AB]' \d rows in the validation split; the "
                                         r"limit demographic_parity<=0\.2\d+ the trials are "
                                         r"validated against \(demographic_parity<=0\.3 "
                                         r"tightened for `confidence`\) needs at least 5 "
                                         r"rows of each group there: a different `safety_size`, "
                                         r"more rows of the group"):
        FairObjective(_rows(2000), "linear", limits="dsp<=0.3", confidence=0.999,
                      safety_size=0.99)
    with pytest.raises(ValueError, match=re.escape(
            "validation_size=0.3 gives the validation split 1 of the 2 search rows that "
            "safety_size=0.999 leaves and leaves the training split 1, but a split stratified "
            "by label needs at least one row of each of the 2 labels in each part: a smaller "
            "`safety_size`.")):
        FairObjective(_rows(2000), "linear", limits="dsp<=0.3", confidence=0.999,
                      safety_size=0.999)


def _one_small_group(n: int, small: int) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    X, y, _ = _rows(n)
    return X, y, pd.Series(["B"] * small + ["A"] * (n - small), name="grp")


def test_group_sizes_are_checked_against_the_limit_the_trials_are_validated_against() -> None:
    # 'B' has 4 rows in the validation split: enough for dsp<=0.3 as given (4), too few for
    # the limit that confidence=0.999 tightens it to on the safety rows (0.2x: 5 rows). The
    # error names that limit, as the trials are validated against it.
    def objective(small: int) -> FairObjective:
        return FairObjective(_one_small_group(6000, small), "linear", limits="dsp<=0.3",
                             confidence=0.999, safety_size=0.9, validation_size=0.2)

    with pytest.raises(ValueError, match=r"^safety_size=0\.9 leaves the group 'B' 4 rows in the "
                                         r"validation split; the limit "
                                         r"demographic_parity<=0\.2\d+ the trials are "
                                         r"validated against \(demographic_parity<=0\.3 "
                                         r"tightened for `confidence`\) needs at least 5 rows of "
                                         r"each group there: a different `safety_size`"):
        objective(300)
    # With more rows of 'B', the objective validates against the limit whose minimum it checked.
    checked = objective(400)
    (limit,) = checked.tuning_limits
    assert limit.bound < 0.3 and int((checked.s_valid == "B").sum()) > 1 / limit.bound


def test_a_test_size_that_leaves_groups_too_few_validation_rows_is_named() -> None:
    with pytest.raises(ValueError, match=r"^test_size=0\.99 leaves the group '[AB]' \d rows, "
                                         r"the group '[AB]' \d rows in the validation split; the "
                                         r"limit demographic_parity<=0\.1 needs at least 11 rows "
                                         r"of each group there: a smaller `test_size`"):
        FairObjective(_rows(2000), "linear", limits="dsp<=0.1", test_size=0.99)


def test_folds_too_small_for_a_large_group_name_cv() -> None:
    with pytest.raises(ValueError, match=r"^cv=400 leaves the group '[AB]' 0 rows in the "
                                         r"validation rows of fold \d+; training and testing a "
                                         r"model needs at least 1 row of each group there: a "
                                         r"smaller `cv`, more rows of the group"):
        FairObjective(_rows(2000), "linear", limits="dsp<=0.3", cv=400)
    with argument_names({"cv": "--cv"}), pytest.raises(ValueError, match=r"^--cv 400 leaves"):
        FairObjective(_rows(2000), "linear", limits="dsp<=0.3", cv=400)
    FairObjective(_rows(2000), "linear", limits="dsp<=0.3", cv=50)  # accepted


def test_a_small_group_is_still_the_datas_fault() -> None:
    X, y, s = _rows(400)
    s[:3] = "C"
    with pytest.raises(ValueError, match=r"^`dataset` sensitive features gives the group 'C' \d "
                                         r"rows? in the validation split; the limit "
                                         r"demographic_parity<=0\.1 needs at least 11 rows of "
                                         r"each group there: more rows of the group, or merging "
                                         r"it into another\.$"):
        FairObjective((X, y, s), "linear", limits="dsp<=0.1", test_size=0.2)


def _few_favourable() -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Group 'C' of 100 rows, two of them favourable."""
    X, y, s = _rows(1500)
    s[:100] = "C"
    y[:100] = 0
    y[:2] = 1
    return X, y, s


def _seed_holding_out_both(test_size: float) -> int:
    from sklearn.model_selection import train_test_split

    _, y, _ = _few_favourable()
    for seed in range(200):
        _, test = train_test_split(np.arange(len(y)), test_size=test_size, stratify=y,
                                   random_state=seed)
        if {0, 1} <= set(test):
            return seed
    raise AssertionError("no seed")


def test_a_label_held_out_in_the_test_split_is_said_to_be_there_with_what_would_help() -> None:
    seed = _seed_holding_out_both(0.25)
    with pytest.raises(ValueError) as caught:
        FairObjective(_few_favourable(), "linear", limits="eod<=0.3", test_size=0.25,
                      random_state=seed)
    message = str(caught.value)
    assert "group 'C' has no row labelled 1 (favourable)" in message
    # One fix: the share that keeps the fewest of the validation rows, as the caller types it.
    assert ("The data has 2 favourable rows of the group. Give it favourable rows there "
            "(a larger `validation_size` or more data)") in message
    with argument_names({"test_size": "--test-size", "random_state": "--seed",
                         "dataset": "--data"}):
        with pytest.raises(ValueError, match=re.escape(
                "(a smaller --test-size or more data)")):
            FairObjective(_few_favourable(), "linear", limits="eod<=0.3", test_size=0.25,
                          random_state=seed)


def test_a_label_the_data_lacks_asks_for_more_data_only() -> None:
    X, y, s = _few_favourable()
    y[:2] = 0
    with pytest.raises(ValueError, match=r"The data has no favourable rows of the group\. Give "
                                         r"it favourable rows there \(more data\), merge it"):
        FairObjective((X, y, s), "linear", limits="eod<=0.3", test_size=0.25)
