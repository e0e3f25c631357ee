"""Messages name the arguments as their caller does, from one mapping."""

from __future__ import annotations

import pytest

from fairtune._names import arg, argument_names, got
from fairtune.tuning import FairObjective


def test_arguments_are_named_as_python_code_unless_a_caller_maps_them() -> None:
    assert arg("margin") == "`margin`" and got("margin", 0.5) == "margin=0.5"
    with argument_names({"margin": "--margin", "use_sensitive_feature=False": "--hide-sensitive"}):
        assert arg("margin") == "--margin" and got("margin", 0.5) == "--margin 0.5"
        assert got("use_sensitive_feature", False) == "--hide-sensitive"
        assert arg("cv") == "`cv`"  # not mapped: as in Python
        assert got("margin", None) == "no --margin"  # a flag not given, not Python's None
    assert got("margin", None) == "margin=None"
    assert arg("margin") == "`margin`"  # restored on exit


def test_the_librarys_messages_use_the_callers_names() -> None:
    with pytest.raises(ValueError, match=r"^`margin` must be a number in \[0, 1\), but got "
                                         r"margin=1\.5\.$"):
        FairObjective("german", "linear", limits="dsp<=0.1", margin=1.5)
    with argument_names({"margin": "--margin", "limits": "--limit"}), \
            pytest.raises(ValueError, match=r"^--margin must be a number in \[0, 1\), but got "
                                            r"--margin 1\.5\.$"):
        FairObjective("german", "linear", limits="dsp<=0.1", margin=1.5)
    with argument_names({"limits": "--limit"}), \
            pytest.raises(ValueError, match=r"^--limit must limit each metric once"):
        FairObjective("german", "linear", limits=["dsp<=0.1", "dsp<=0.2"])


def test_the_command_lines_messages_say_a_flag_was_not_given(
    capsys: pytest.CaptureFixture[str]
) -> None:
    from fairtune.cli import main

    base = ["tune", "--dataset", "german", "--model", "linear", "--limit", "dsp<=0.2",
            "--n-trials", "1", "--no-progress"]
    assert main([*base, "--safety-size", "0.3"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "but got --safety-size 0.3 and no --confidence.")
    assert main([*base, "--study-name", " "]) == 2
    assert capsys.readouterr().err.strip() == (
        "fairtune: error: --study-name must name the study, but got ' '; leave it out for the "
        "default name.")


def test_a_typed_number_is_named_as_typed_through_copies_and_pickles() -> None:
    # The command line's numbers reach a pipeline's copies (deepcopy, joblib's pickles).
    import copy
    import pickle

    from fairtune._names import TypedNumber, got

    typed = TypedNumber(" 0.20")
    for number in (typed, copy.deepcopy(typed), pickle.loads(pickle.dumps(typed))):
        assert number == 0.2 and repr(number) == "0.20"
        assert got("test_size", number) == "test_size=0.20"
