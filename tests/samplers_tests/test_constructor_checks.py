"""Sampler arguments are checked when the sampler is built, not when a trial fails later."""

from __future__ import annotations

import re
import warnings

import pytest

from fairtune.samplers import CollaborativeUCBSampler, FairBOSampler


@pytest.mark.parametrize("tenants", [["a", 1], [None, "b"], [1, 2]])
def test_tenants_must_be_names(tenants: list) -> None:
    with pytest.raises(ValueError, match=re.escape(
            "`tenants` must be a number of tenants (at least 1) or distinct names (strings, at "
            f"least one), but got tenants={tenants!r}.")):
        CollaborativeUCBSampler(tenants=tenants)


def test_a_misspelt_binary_constraint_warns_and_aliases_are_canonical() -> None:
    with pytest.warns(UserWarning, match=re.escape(
            "`binary_constraints` names 'dps', which is no fairness metric; did you mean 'demographic_parity'")):
        FairBOSampler(binary_constraints=["dps"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sampler = FairBOSampler(binary_constraints=["dsp", "budget"])  # legal: no warning
    assert sampler._is_binary("demographic_parity") and sampler._is_binary("budget")
    assert not sampler._is_binary("equal_opportunity")
