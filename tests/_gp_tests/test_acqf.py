"""The acquisition objects: the batch shape of their input, finite values and gradients, and
the formulas they state."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fairtune._gp import acquisition
from fairtune._gp.acqf import (
    ConstrainedMES,
    Constraints,
    FeasibilityPhase,
    LogConstrainedEI,
    RepeatPenalty,
    sample_max_values,
)
from fairtune._gp.classifier import fit_gp_classifier
from fairtune._gp.gp import fit_gp

X = torch.linspace(0.0, 1.0, 8, dtype=torch.float64)[:, None]
NOT_CATEGORICAL = np.array([False])


def models() -> tuple:
    f = fit_gp(X, torch.sin(4 * X[:, 0]), NOT_CATEGORICAL)
    c = fit_gp(X, X[:, 0] - 0.5, NOT_CATEGORICAL)
    clf = fit_gp_classifier(X, (X[:, 0] < 0.7).to(torch.float64), NOT_CATEGORICAL)
    return f, Constraints([(c, 0.0)], [clf]), clf


@pytest.mark.parametrize("kind", ["ei", "mes", "feasibility"])
def test_acquisitions_keep_the_batch_shape_and_are_finite_with_gradients(kind: str) -> None:
    f, constraints, clf = models()
    repeat = RepeatPenalty([clf])
    if kind == "ei":
        acqf = LogConstrainedEI(f, 0.5, constraints, repeat)
    elif kind == "mes":
        y_star = sample_max_values(f, constraints, X, 8, torch.Generator().manual_seed(0), 0.5)
        assert y_star.shape == (8,) and bool((y_star >= 0.5).all())
        acqf = ConstrainedMES(f, y_star, constraints, repeat)
    else:
        acqf = FeasibilityPhase.of(constraints, X, [0.5], trust_level=1.1)  # forces the mixture
        assert len(acqf.components) == 2
    x = torch.rand(5, 3, 1, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x.requires_grad_(True)
    value = acqf(x)
    assert value.shape == (5, 3)
    value.sum().backward()
    assert torch.isfinite(value).all() and torch.isfinite(x.grad).all()


def test_log_constrained_ei_is_log_ei_plus_the_log_probabilities() -> None:
    f, constraints, clf = models()
    x = torch.tensor([[[0.2]], [[0.9]]], dtype=torch.float64)
    mean, var = f.posterior(x[..., 0, :])
    (c, threshold), = constraints.regression
    c_mean, c_var = c.posterior(x[..., 0, :])
    expected = (acquisition.log_ei(mean, var, 0.3) + acquisition.log_pof(c_mean, c_var, threshold)
                + clf.log_prob_positive(x[..., 0, :]))
    got = LogConstrainedEI(f, 0.3, constraints, RepeatPenalty())(x)
    torch.testing.assert_close(got, expected)


def test_repeat_penalty_is_log_min_1_2p() -> None:
    _, _, clf = models()
    x = torch.tensor([[0.1], [0.95]], dtype=torch.float64)
    p = clf.log_prob_positive(x).exp()
    expected = torch.clamp(2 * p, max=1.0).log()
    torch.testing.assert_close(RepeatPenalty([clf])(x), expected)


def test_the_feasibility_phase_trusts_fitted_models_that_find_a_feasible_region() -> None:
    _, constraints, _ = models()
    trusted = FeasibilityPhase.of(constraints, X, [0.5], trust_level=0.01)
    assert len(trusted.components) == 1  # some probe point is plausibly feasible
    x = X[:3]
    torch.testing.assert_close(trusted.log_prob(x), constraints.log_pof(x))
    mixture = FeasibilityPhase.of(constraints, X, [0.5, 1.0], trust_level=1.1)
    assert len(mixture.components) == 2  # the factor 1.0 is the fitted model itself
    shared = mixture.classifiers[0].log_prob_positive(x)
    per_component = [shared + sum(acquisition.log_pof(*gp.posterior(x), thr) for gp, thr in m)
                     for m in mixture.components]
    expected = torch.log(0.5 * (per_component[0].exp() + per_component[1].exp()))
    torch.testing.assert_close(mixture.log_prob(x), expected)


def test_mtkb_acquisitions_penalize_optimistic_violations_only() -> None:
    from fairtune._gp.acqf import LogFeasibility, PenalizedUCB

    f, constraints, _ = models()
    regression_only = Constraints(constraints.regression)
    x = torch.tensor([[[0.0]], [[1.0]]], dtype=torch.float64)  # c = x - 0.5: ok, violated

    def ucb(z: torch.Tensor) -> torch.Tensor:
        return f.posterior(z)[0]

    penalized = PenalizedUCB(ucb, regression_only, beta=0.0, penalty=10.0)(x)
    (c, threshold), = regression_only.regression
    c_mean = c.posterior(x[..., 0, :])[0]
    expected = ucb(x[..., 0, :]) - 10.0 * (c_mean - threshold).clamp_min(0.0)
    torch.testing.assert_close(penalized, expected)
    assert penalized[0] == ucb(x[..., 0, :])[0]  # no violation: the UCB itself
    torch.testing.assert_close(LogFeasibility(regression_only)(x),
                               regression_only.log_pof(x[..., 0, :]))
