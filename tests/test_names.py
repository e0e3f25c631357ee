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
