from __future__ import annotations

import logging

import numpy as np
import optuna
import pytest

from fairtune.fairness.welfare import (
    TenantFairnessCallback,
    fair_cumulative_regret,
    g2sf_weights,
    generalized_gini,
    gini_inequality,
)
from fairtune.tenancy import ask


def test_paper_example_equal_split_has_higher_welfare() -> None:
    # Sim et al.: with w = (3, 1), W(5, 5) = 3*5 + 1*5 = 20 > W(8, 2) = 3*2 + 1*8 = 14.
    assert generalized_gini([5, 5], w=[3, 1], normalize=False) == 20.0
    assert generalized_gini([8, 2], w=[3, 1], normalize=False) == 14.0
    assert generalized_gini([2, 8], w=[3, 1], normalize=False) == 14.0  # order-free


def test_weights_and_normalized_gini() -> None:
    np.testing.assert_allclose(g2sf_weights(4, 0.5), [1, 0.5, 0.25, 0.125])
    np.testing.assert_allclose(g2sf_weights(3, 1.0), [1, 1, 1])
    # (1*1 + 0.5*2 + 0.25*6) / 1.75 = 3.5 / 1.75 = 2
    assert generalized_gini([6, 1, 2], 0.5) == pytest.approx(2.0)
    assert generalized_gini([6, 1, 2], 1.0) == pytest.approx(3.0)  # the mean


def test_inequality() -> None:
    assert gini_inequality([4, 4, 4], 0.3) == pytest.approx(0.0)
    assert gini_inequality([6, 1, 2], 0.5) == pytest.approx(3.0 - 2.0)
    assert gini_inequality([6, 1, 2], 1.0) == pytest.approx(0.0)
    # More unequal utilities with the same mean -> larger inequality.
    assert gini_inequality([9, 0, 0], 0.5) > gini_inequality([6, 1, 2], 0.5)


def test_fair_regret_is_average_regret_plus_inequality() -> None:
    utilities = np.array([[1.0, 0.5], [0.8, 0.2], [1.0, 0.9]])  # (T=3 rounds, n=2 tenants)
    optimum = 1.0
    cumulative = utilities.sum(0)
    average_regret = 3 * optimum - cumulative.mean()
    s_t = fair_cumulative_regret(utilities, optimum, rho=0.5)
    assert s_t == pytest.approx(average_regret + gini_inequality(cumulative, 0.5))
    assert s_t == pytest.approx(3.0 - (1.0 * 1.6 + 0.5 * 2.8) / 1.5)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: g2sf_weights(3, 1.5), r"`rho` must be in \(0, 1\], but got rho=1.5"),
        (lambda: g2sf_weights(3, 0), r"`rho` must be in \(0, 1\]"),
        (lambda: g2sf_weights(0, 0.5), "`n` must be a positive integer"),
        (lambda: generalized_gini([], 0.5), "`u` must be a non-empty"),
        (lambda: generalized_gini([1.0, np.nan], 0.5), "`u` must be finite"),
        (lambda: generalized_gini([1, 2], w=[1, 3]), "non-increasing"),
        (lambda: fair_cumulative_regret([1, 2], 1.0), r"shape \(T, n\)"),
    ],
)
def test_bad_input(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_tenant_fairness_callback(caplog: pytest.LogCaptureFixture) -> None:
    study = optuna.create_study(direction="maximize")
    callback = TenantFairnessCallback(rho=0.5)
    for tenant, value in (("a", 3.0), ("b", 1.0), ("a", 1.0)):
        trial = ask(study, tenant)
        study.tell(trial, value)
        callback(study, study.trials[-1])
    with caplog.at_level(logging.INFO, logger="fairtune"):
        callback(study, study.trials[-1])
    assert callback.last["utilities"] == {"a": 4.0, "b": 1.0}
    assert callback.last["inequality"] == pytest.approx(gini_inequality([4.0, 1.0], 0.5))
    assert len(callback.history) == 4
    assert "inequality" in caplog.text
