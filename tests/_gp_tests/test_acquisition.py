from __future__ import annotations

import math

import mpmath  # a torch dependency
import numpy as np
import pytest
import torch
from scipy import stats

from fairtune._gp.acquisition import (
    ConstrainedMES,
    Constraints,
    FeasibilityPhase,
    LogConstrainedEI,
    PenalizedUCB,
    RepeatPenalty,
    cmes,
    information_gain,
    lcb,
    log_ei,
    log_pof,
    sample_max_values,
    ucb,
)
from fairtune._gp.classifier import fit_gp_classifier
from fairtune._gp.gp import fit_gp

T = torch.float64


def test_log_ei_matches_closed_form_where_representable() -> None:
    z = np.linspace(-5, 5, 41)
    sigma = 0.7
    mean = torch.tensor(z * sigma + 1.0, dtype=T)
    var = torch.full_like(mean, sigma**2)
    expected = np.log(sigma * (stats.norm.pdf(z) + z * stats.norm.cdf(z)))
    np.testing.assert_allclose(log_ei(mean, var, 1.0).numpy(), expected, rtol=1e-9)


def _log_ei_asymptote(z: np.ndarray) -> np.ndarray:
    # For z -> -inf, EI / sigma = phi(z) + z Phi(z) = phi(z) / z^2 (1 - 3 / z^2 + 15 / z^4 - ...).
    return -0.5 * z**2 - 0.5 * math.log(2 * math.pi) - 2 * np.log(-z) + np.log1p(-3 / z**2 + 15 / z**4)


def test_log_ei_is_finite_and_monotone_far_below_the_incumbent() -> None:
    z = torch.cat(
        [
            -torch.logspace(8, 0, 400, dtype=T),
            torch.linspace(-1.0, 3.0, 200, dtype=T)[1:],
        ]
    ).requires_grad_(True)
    values = log_ei(z, torch.ones_like(z), 0.0)
    assert torch.isfinite(values).all()
    assert (values[1:] > values[:-1]).all()
    far = z.detach().numpy() < -1e3  # where the series is exact to double precision
    np.testing.assert_allclose(values.detach().numpy()[far], _log_ei_asymptote(z.detach().numpy()[far]), rtol=1e-12)
    assert float(log_ei(torch.tensor(-40.0, dtype=T), torch.tensor(1.0, dtype=T), 0.0)) == pytest.approx(
        stats.norm.logpdf(-40.0) - 2 * math.log(40) + math.log(1 - 3 / 40**2 + 15 / 40**4 - 105 / 40**6), rel=1e-9
    )
    (grad,) = torch.autograd.grad(values.sum(), z)
    assert torch.isfinite(grad).all() and (grad > 0).all()
    # Scaled by sigma: log EI = log sigma + log h(z), also for a tiny variance.
    tiny = log_ei(torch.tensor([-1.0], dtype=T), torch.tensor([1e-20], dtype=T), 0.0)
    assert torch.isfinite(tiny).all()
    huge = log_ei(torch.tensor([-1e200], dtype=T), torch.tensor([1.0], dtype=T), 0.0)
    assert torch.isfinite(huge).all()


def test_log_ei_agrees_with_high_precision_around_branch_switches() -> None:
    mpmath.mp.dps = 60
    z = np.array([-1.0 - 1e-9, -1.0, -0.999999999, -5.0, -37.5, -999.999, -1000.0, -1000.001, 0.5, 8.0])
    expected = [float(mpmath.log(mpmath.npdf(v) + v * mpmath.ncdf(v))) for v in z]
    values = log_ei(torch.tensor(z), torch.ones(len(z), dtype=T), 0.0).numpy()
    np.testing.assert_allclose(values, expected, rtol=1e-12)


def test_log_ei_gradient_matches_high_precision_derivative_in_every_regime() -> None:
    # log EI's gradient is analytic (d log h / dz = Phi(z) / h(z)), not autograd through the
    # three regimes of its value: compare with the derivative in 60-digit arithmetic.
    mpmath.mp.dps = 60
    z = np.array([-1e4, -1000.5, -999.5, -37.5, -5.0, -1.0 - 1e-9, -0.999999999, 0.0, 0.5, 8.0])

    def log_h(v: mpmath.mpf) -> mpmath.mpf:
        return mpmath.log(mpmath.npdf(v) + v * mpmath.ncdf(v))

    expected = [float(mpmath.diff(log_h, mpmath.mpf(v))) for v in z]
    zt = torch.tensor(z, dtype=T, requires_grad=True)
    (grad,) = torch.autograd.grad(log_ei(zt, torch.ones_like(zt), 0.0).sum(), zt)
    # exp(log Phi - log h) of two logs near -z^2 / 2 keeps about 16 - log10(z^2 / 2) digits.
    np.testing.assert_allclose(grad.numpy()[1:], expected[1:], rtol=1e-9)
    assert float(grad[0]) == pytest.approx(expected[0], rel=1e-7)
    # Through sigma too: d log EI / d var at a fixed mean, against central differences.
    mean = torch.tensor([-3.0, 0.2, 1.5], dtype=T)
    var = torch.tensor([0.3, 1.7, 0.05], dtype=T, requires_grad=True)
    (gv,) = torch.autograd.grad(log_ei(mean, var, 0.4).sum(), var)
    eps = 1e-6
    with torch.no_grad():
        fd = (log_ei(mean, var + eps, 0.4) - log_ei(mean, var - eps, 0.4)) / (2 * eps)
    np.testing.assert_allclose(gv.numpy(), fd.numpy(), rtol=1e-6, atol=1e-9)


def test_log_pof_is_finite_where_the_probability_underflows() -> None:
    mean = torch.tensor([50.0, 0.0, -3.0], dtype=T, requires_grad=True)
    value = log_pof(mean, torch.ones(3, dtype=T))
    value_ = value.detach()
    assert float(value_[0]) == pytest.approx(stats.norm.logcdf(-50.0), rel=1e-9)
    assert float(value_[0]) < -1200
    assert float(value_[1]) == pytest.approx(math.log(0.5))
    value.sum().backward()
    assert torch.isfinite(mean.grad).all()


@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 5)])
def test_acquisitions_keep_batch_shape_with_finite_gradients(shape: tuple[int, ...]) -> None:
    gen = torch.Generator().manual_seed(0)
    mean = torch.randn(*shape, generator=gen, dtype=T).requires_grad_(True)
    var = (torch.rand(*shape, generator=gen, dtype=T) + 0.1).requires_grad_(True)
    outputs = [
        log_ei(mean, var, 0.5),
        log_pof(mean, var, 0.2),
        ucb(mean, var, 2.0),
        lcb(mean, var, 2.0),
        cmes(mean, var, torch.tensor([1.0, 1.5], dtype=T), [(mean - 0.3, var)], [log_pof(mean, var)]),
    ]
    for out in outputs:
        assert out.shape == shape
        assert torch.isfinite(out).all()
        gm, gv = torch.autograd.grad(out.sum(), (mean, var))
        assert torch.isfinite(gm).all() and torch.isfinite(gv).all()


def test_ucb_and_lcb_formula() -> None:
    mean, var = torch.tensor([1.0], dtype=T), torch.tensor([4.0], dtype=T)
    assert float(ucb(mean, var, 9.0)) == pytest.approx(1.0 + 6.0)
    assert float(lcb(mean, var, 9.0)) == pytest.approx(1.0 - 6.0)


def test_information_gain_closed_form() -> None:
    cov = torch.tensor([[1.0, 0.5], [0.5, 2.0]], dtype=T)
    expected = 0.5 * np.log(np.linalg.det(np.eye(2) + cov.numpy() / 0.1))
    assert float(information_gain(cov, 0.1)) == pytest.approx(expected, rel=1e-9)
    batch = torch.stack([cov, 2 * cov, 3 * cov]).expand(4, 3, 2, 2).transpose(0, 1)  # (3, 4, 2, 2)
    batch = batch.clone().requires_grad_(True)
    gains = information_gain(batch, 0.1)
    assert gains.shape == (3, 4)
    for i, scale in enumerate((1, 2, 3)):
        det = np.linalg.det(np.eye(2) + scale * cov.numpy() / 0.1)
        np.testing.assert_allclose(gains[i].detach().numpy(), 0.5 * np.log(det), rtol=1e-9)
    (grad,) = torch.autograd.grad(gains.sum(), batch)
    assert torch.isfinite(grad).all()
    # A rank-deficient covariance (two identical points) works too: the second adds nothing.
    same = torch.ones(2, 2, dtype=T)
    assert float(information_gain(same, 0.5)) == pytest.approx(0.5 * math.log(1 + 2 / 0.5), rel=1e-6)


def test_cmes_without_constraints_is_mes_and_constraints_add_information() -> None:
    mean = torch.tensor([0.0, 0.5, -1.0], dtype=T)
    var = torch.tensor([1.0, 0.3, 2.0], dtype=T)
    y_star = torch.tensor([1.2, 2.0], dtype=T)
    gamma = (y_star.numpy()[None, :] - mean.numpy()[:, None]) / np.sqrt(var.numpy())[:, None]
    mes = (gamma * stats.norm.pdf(gamma) / (2 * stats.norm.cdf(gamma)) - stats.norm.logcdf(gamma)).mean(1)
    np.testing.assert_allclose(cmes(mean, var, y_star, []).numpy(), mes, rtol=1e-9)
    # An almost surely satisfied constraint adds no information.
    sure = [(torch.full((3,), -30.0, dtype=T), torch.ones(3, dtype=T))]
    np.testing.assert_allclose(cmes(mean, var, y_star, sure).numpy(), mes, rtol=1e-6)
    # An almost surely violated one makes the point worthless.
    violated = [(torch.full((3,), 30.0, dtype=T), torch.ones(3, dtype=T))]
    assert (cmes(mean, var, y_star, violated) < 1e-6).all()
    # An uncertain constraint at an otherwise uninformative point is worth learning about.
    flat = cmes(torch.tensor([-5.0], dtype=T), torch.tensor([1.0], dtype=T), torch.tensor([-1e3], dtype=T),
                [(torch.tensor([0.0], dtype=T), torch.tensor([1.0], dtype=T))])
    assert float(flat) == pytest.approx(math.log(2.0), rel=1e-6)


# -- the acquisition objects: the batch shape of their input, finite values and gradients, and
# the formulas they state.

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
    expected = (log_ei(mean, var, 0.3) + log_pof(c_mean, c_var, threshold)
                + clf.log_prob_positive(x[..., 0, :]))
    got = LogConstrainedEI(f, 0.3, constraints, RepeatPenalty())(x)
    torch.testing.assert_close(got, expected)


def test_log_constrained_ei_in_numpy_is_its_torch_value_and_autograd_gradient() -> None:
    gen = torch.Generator().manual_seed(3)
    X = torch.rand(25, 3, dtype=torch.float64, generator=gen)
    X[:, 2] = torch.randint(0, 3, (25,), generator=gen) / 2.0  # a categorical dim (encoded)
    categorical = np.array([False, False, True])
    f = fit_gp(X, torch.sin(4 * X[:, 0]) + X[:, 2], categorical)
    constraints = Constraints([(fit_gp(X, X[:, 0] + X[:, 1] - 1.0, categorical), 0.0),
                               (fit_gp(X, X[:, 1] ** 2 - 0.3, categorical), 0.1)])
    acqf = LogConstrainedEI(f, 1.5, constraints, RepeatPenalty())  # best_f far above: z << -1
    x = torch.rand(64, 1, 3, dtype=torch.float64, generator=gen)
    x[..., 2] = X[0, 2]  # an admissible category
    x.requires_grad_(True)
    value = acqf(x)
    (grad,) = torch.autograd.grad(value.sum(), x)
    got_value, got_grad = acqf.value_and_grad(x.detach().numpy())
    np.testing.assert_allclose(got_value, value.detach().numpy(), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got_grad, grad.numpy(), rtol=1e-5, atol=1e-7)
    assert (got_grad[..., 2] == 0).all()  # a categorical dim has no gradient
    # A classifier (a binary constraint or the repeat penalty) needs torch: no numpy path.
    _, with_classifier, clf = models()
    assert LogConstrainedEI(f, 0.5, with_classifier, RepeatPenalty()).value_and_grad(
        x.detach().numpy()) is None
    assert LogConstrainedEI(f, 0.5, constraints, RepeatPenalty([clf])).value_and_grad(
        x.detach().numpy()) is None


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
    per_component = [shared + sum(log_pof(*gp.posterior(x), thr) for gp, thr in m)
                     for m in mixture.components]
    expected = torch.log(0.5 * (per_component[0].exp() + per_component[1].exp()))
    torch.testing.assert_close(mixture.log_prob(x), expected)


def test_mtkb_acquisitions_penalize_optimistic_violations_only() -> None:
    f, constraints, _ = models()
    regression_only = Constraints(constraints.regression)
    x = torch.tensor([[[0.0]], [[1.0]]], dtype=torch.float64)  # c = x - 0.5: ok, violated

    def mean(z: torch.Tensor) -> torch.Tensor:
        return f.posterior(z)[0]

    penalized = PenalizedUCB(mean, regression_only, beta=0.0, penalty=10.0)(x)
    (c, threshold), = regression_only.regression
    c_mean = c.posterior(x[..., 0, :])[0]
    expected = mean(x[..., 0, :]) - 10.0 * (c_mean - threshold).clamp_min(0.0)
    torch.testing.assert_close(penalized, expected)
    assert penalized[0] == mean(x[..., 0, :])[0]  # no violation: the UCB itself
    # One component without classifiers: the log probability of feasibility, to the last bit.
    assert torch.equal(FeasibilityPhase([regression_only.regression], [])(x),
                       regression_only.log_pof(x[..., 0, :]))
