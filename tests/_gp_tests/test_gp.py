from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from fairtune._gp.gp import GPRegressor, KernelParams, fit_gp, standardize
from fairtune._gp.kernels import matern52

T = torch.float64


def _matern52_numpy(a: np.ndarray, b: np.ndarray, lengthscale: np.ndarray, s: float) -> np.ndarray:
    r = np.sqrt((((a[:, None, :] - b[None, :, :]) / lengthscale) ** 2).sum(-1))
    return s * (1 + math.sqrt(5) * r + 5 / 3 * r**2) * np.exp(-math.sqrt(5) * r)


def test_kernel_matches_closed_form_and_is_psd() -> None:
    rng = np.random.RandomState(0)
    X = rng.rand(6, 2)
    ls = np.array([0.3, 0.7])
    K = matern52(torch.tensor(X), torch.tensor(X), torch.tensor(1 / ls**2), torch.tensor(1.5, dtype=T),
                 torch.tensor([False, False]))
    np.testing.assert_allclose(K.numpy(), _matern52_numpy(X, X, ls, 1.5), rtol=1e-10)
    assert np.linalg.eigvalsh(K.numpy()).min() > -1e-10
    np.testing.assert_allclose(K.numpy(), K.numpy().T)


def test_categorical_dimension_uses_hamming_distance() -> None:
    X = torch.tensor([[0.125, 0.0], [0.875, 0.0], [0.375, 0.0]], dtype=T)
    K = matern52(X, X, torch.tensor([1.0, 1.0], dtype=T), torch.tensor(1.0, dtype=T),
                 torch.tensor([True, False]))
    # Different categories are equally far apart, whatever their encoded positions.
    assert K[0, 1] == pytest.approx(float(K[0, 2]))
    r = 1.0
    assert float(K[0, 1]) == pytest.approx((1 + math.sqrt(5) * r + 5 / 3 * r**2) * math.exp(-math.sqrt(5) * r))


def test_posterior_matches_closed_form_on_three_points() -> None:
    X = np.array([[0.1, 0.2], [0.5, 0.9], [0.8, 0.4]])
    y = np.array([1.0, -0.5, 0.3])
    ls, s, noise = np.array([0.4, 0.6]), 1.3, 0.05
    params = KernelParams(torch.tensor(1 / ls**2), torch.tensor(s, dtype=T), torch.tensor(noise, dtype=T))
    gp = GPRegressor(torch.tensor(X), torch.tensor(y), params, np.array([False, False]))
    x = np.array([[0.3, 0.3], [0.9, 0.9]])
    K = _matern52_numpy(X, X, ls, s) + (noise + 1e-8) * np.eye(3)
    k = _matern52_numpy(x, X, ls, s)
    mean = k @ np.linalg.solve(K, y)
    var = s - np.einsum("ij,ji->i", k, np.linalg.solve(K, k.T))
    m, v = gp.posterior(torch.tensor(x))
    np.testing.assert_allclose(m.numpy(), mean, rtol=1e-8)
    np.testing.assert_allclose(v.numpy(), var, rtol=1e-8)
    joint_mean, cov = gp.joint_posterior(torch.tensor(x))
    np.testing.assert_allclose(joint_mean.numpy(), mean, rtol=1e-8)
    np.testing.assert_allclose(torch.diagonal(cov).numpy(), var, rtol=1e-7)
    cov_closed = _matern52_numpy(x, x, ls, s) - k @ np.linalg.solve(K, k.T)
    np.testing.assert_allclose(cov.numpy(), cov_closed, rtol=1e-7, atol=1e-12)


def test_condition_on_equals_gp_on_union_of_data() -> None:
    rng = np.random.RandomState(2)
    X, y = torch.tensor(rng.rand(5, 2)), torch.tensor(rng.randn(5))
    params = KernelParams.default(2)
    gp = GPRegressor(X[:3], y[:3], params, np.array([False, False]))
    union = GPRegressor(X, y, params, np.array([False, False]))
    x = torch.tensor(rng.rand(4, 2))
    for a, b in zip(gp.condition_on(X[3:], y[3:]).posterior(x), union.posterior(x)):
        torch.testing.assert_close(a, b)


def test_joint_samples_match_joint_posterior() -> None:
    rng = np.random.RandomState(3)
    gp = GPRegressor(torch.tensor(rng.rand(4, 1)), torch.tensor(rng.randn(4)), KernelParams.default(1),
                     np.array([False]))
    x = torch.tensor([[0.2], [0.25], [0.9]], dtype=T)
    samples = gp.sample_joint(x, 20000, torch.Generator().manual_seed(0))
    mean, cov = gp.joint_posterior(x)
    np.testing.assert_allclose(samples.mean(0).numpy(), mean.detach().numpy(), atol=0.03)
    np.testing.assert_allclose(np.cov(samples.numpy().T), cov.detach().numpy(), atol=0.03)


def test_posterior_keeps_batch_shape_and_has_finite_gradients() -> None:
    rng = np.random.RandomState(4)
    gp = GPRegressor(torch.tensor(rng.rand(6, 3)), torch.tensor(rng.randn(6)), KernelParams.default(3),
                     np.array([False, True, False]))
    x = torch.tensor(rng.rand(2, 5, 3), requires_grad=True)
    mean, var = gp.posterior(x)
    assert mean.shape == var.shape == (2, 5)
    (mean.sum() + var.sum()).backward()
    assert torch.isfinite(x.grad).all()
    # A training point itself (r = 0) has finite gradients too.
    x0 = gp.X_train[:1].clone().requires_grad_(True)
    gp.posterior(x0)[1].sum().backward()
    assert torch.isfinite(x0.grad).all()


def test_fit_improves_the_marginal_likelihood_and_recovers_relevance() -> None:
    rng = np.random.RandomState(5)
    X = rng.rand(30, 2)
    y, _, _ = standardize(np.sin(6 * X[:, 0]))  # only the first input matters
    X_t, y_t = torch.tensor(X), torch.tensor(y)
    default = GPRegressor(X_t, y_t, KernelParams.default(2), np.array([False, False]))
    fitted = fit_gp(X_t, y_t, np.array([False, False]))
    assert fitted.marginal_log_likelihood() > default.marginal_log_likelihood()
    isl = fitted.params.inverse_squared_lengthscales
    assert isl[0] > 10 * isl[1]
    # Warm start from the fit converges to the same place.
    again = fit_gp(X_t, y_t, np.array([False, False]), warm_start=fitted.params)
    torch.testing.assert_close(again.marginal_log_likelihood(), fitted.marginal_log_likelihood(),
                               rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("case", ["constant", "duplicates", "single", "deterministic"])
def test_fit_survives_degenerate_data(case: str) -> None:
    rng = np.random.RandomState(6)
    X = rng.rand(8, 2)
    y = rng.randn(8)
    if case == "constant":
        y = np.full(8, 3.0)
    if case == "duplicates":
        X[4:] = X[:4]
    if case == "single":
        X, y = X[:1], y[:1]
    ys, _, _ = standardize(y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gp = fit_gp(torch.tensor(X), torch.tensor(ys), np.array([False, False]),
                    deterministic=case == "deterministic")
    mean, var = gp.posterior(torch.tensor(rng.rand(3, 2)))
    assert torch.isfinite(mean).all() and torch.isfinite(var).all() and (var > 0).all()
    if case == "deterministic":
        assert float(gp.params.noise_var) == pytest.approx(1e-6)


def test_standardize_handles_constant_and_infinite_values() -> None:
    ys, mean, std = standardize(np.array([2.0, 2.0, 2.0]))
    assert np.all(ys == 0) and mean == 2.0 and std > 0
    ys, _, _ = standardize(np.array([0.0, 1.0, np.inf, -np.inf]))
    assert np.isfinite(ys).all()
