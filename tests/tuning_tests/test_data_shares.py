"""A share of the rows (test_size, safety_size, validation_size, cv) that leaves a part too
small is refused before any trial naming that argument and the value given, not the data."""

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
     "2 labels in each part: give a share from 0.001 to 0.999."),
    ({"test_size": 0.2, "confidence": 0.9, "safety_size": 1e-5},
     "safety_size=1e-05 gives the safety rows 1 of the 1,600 tuning rows that test_size=0.2 "
     "leaves and leaves the search 1,599"),
    ({"test_size": 0.99999}, "gives the test split 2,000 of the 2,000 rows of the data and "
                              "leaves the tuning rows 0"),
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
    with pytest.raises(ValueError, match=r"^Each group needs at least 4 rows in the validation "
                                         r"split .*: safety_size=0\.99 leaves group '[AB]' "
                                         r"\d of its [\d,]+ rows in the validation split .*"
                                         r"the share is the cause, not the group's size\. Use a "
                                         r"smaller `safety_size` \(about 0\.9\d* or less"):
        FairObjective(_rows(2000), "linear", limits="dsp<=0.3", confidence=0.9,
                      safety_size=0.99)
    with pytest.raises(ValueError, match=re.escape(
            "safety_size=0.999 leaves 2 search rows, too few for the validation split and the "
            "training split, which need at least one row of each of the 2 labels each: use a "
            "smaller `safety_size`.")):
        FairObjective(_rows(2000), "linear", limits="dsp<=0.3", confidence=0.9,
                      safety_size=0.999)


def test_a_test_size_that_leaves_groups_too_few_validation_rows_is_named() -> None:
    with pytest.raises(ValueError, match=r"^Each group needs at least 11 rows in the validation "
                                         r"split .*: test_size=0\.99 leaves group '[AB]' \d+ of "
                                         r"its \d,\d{3} rows in the validation split"):
        FairObjective(_rows(2000), "linear", limits="dsp<=0.1", test_size=0.99)


def test_folds_too_small_for_a_large_group_name_cv_and_a_cv_that_does() -> None:
    match = (r"^Every group needs rows to train on and to be measured on: cv=400 leaves group "
             r"'[AB]' 0 of its [\d,]+ rows in the validation rows of fold \d+ \(about "
             r"2\.\d+ on average\), where it needs 1: the folds are the cause, not the group's "
             r"size\. Use a smaller `cv`: cv=(\d+) gives every group rows in each fold's "
             r"training and validation rows\.")
    with pytest.raises(ValueError, match=match) as caught:
        FairObjective(_rows(2000), "linear", limits="dsp<=0.3", cv=400)
    better = int(re.match(match, str(caught.value)).group(1))
    FairObjective(_rows(2000), "linear", limits="dsp<=0.3", cv=better)  # accepted


def test_a_small_group_is_still_the_datas_fault() -> None:
    X, y, s = _rows(400)
    s[:3] = "C"
    with pytest.raises(ValueError, match=r"^`dataset` sensitive features must have at least 11 "
                                         r"rows of each group in the validation split"):
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
    assert ("The group's 2 favourable rows in the data are all held out from the search (2 in "
            "the test split of test_size=0.25): another `random_state`, a smaller `test_size` "
            "or more favourable rows of the group would give the search some") in message
    assert "no number of rows fixes it" not in message
    with argument_names({"test_size": "--test-size", "random_state": "--seed",
                         "dataset": "--data"}):
        with pytest.raises(ValueError, match=re.escape(
                "(2 in the test split of --test-size 0.25): another --seed, a smaller "
                "--test-size")):
            FairObjective(_few_favourable(), "linear", limits="eod<=0.3", test_size=0.25,
                          random_state=seed)


def test_a_label_the_data_lacks_still_says_no_number_of_rows_fixes_it() -> None:
    X, y, s = _few_favourable()
    y[:2] = 0
    with pytest.raises(ValueError, match="in any row of the search, so no number of rows"):
        FairObjective((X, y, s), "linear", limits="eod<=0.3", test_size=0.25)
