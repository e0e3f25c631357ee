from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import fairtune._gp.gp as gp_module
from fairtune._gp.gp import GPRegressor, KernelParams, fit_gp, standardize

T = torch.float64


def _log_prior(params: KernelParams) -> torch.Tensor:
    """The priors of gp.py's docstring, by autograd: -0.1 (r + 1 / r) per inverse squared
    lengthscale r, Gamma(2, 1) on the outputscale, Gamma(1.1, rate 30) on the noise variance
    (densities in the parameters themselves), up to a constant."""
    isl, s, noise = params.inverse_squared_lengthscales, params.outputscale, params.noise_var
    return -0.1 * (isl + 1.0 / isl).sum() + s.log() - s + 0.1 * noise.log() - 30.0 * noise


def _matern52_numpy(a: np.ndarray, b: np.ndarray, lengthscale: np.ndarray, s: float) -> np.ndarray:
    r = np.sqrt((((a[:, None, :] - b[None, :, :]) / lengthscale) ** 2).sum(-1))
    return s * (1 + math.sqrt(5) * r + 5 / 3 * r**2) * np.exp(-math.sqrt(5) * r)


def _params(lengthscales: list[float], s: float, noise: float) -> KernelParams:
    ls = np.asarray(lengthscales)
    return KernelParams(
        torch.tensor(1 / ls**2), torch.tensor(s, dtype=T), torch.tensor(noise, dtype=T)
    )


def _random_gp(seed: int, n: int, is_categorical: list[bool]) -> GPRegressor:
    rng = np.random.RandomState(seed)
    d = len(is_categorical)
    X = rng.rand(n, d)
    for j in np.flatnonzero(is_categorical):
        X[:, j] = (rng.randint(0, 3, size=n) + 0.5) / 3
    return GPRegressor(
        torch.tensor(X), torch.tensor(rng.randn(n)), _params([0.3] * d, 1.2, 0.01),
        np.array(is_categorical),
    )


def test_posterior_matches_closed_form_on_three_points() -> None:
    X = np.array([[0.1, 0.2], [0.5, 0.9], [0.8, 0.4]])
    y = np.array([1.0, -0.5, 0.3])
    ls, s, noise = np.array([0.4, 0.6]), 1.3, 0.05
    gp = GPRegressor(torch.tensor(X), torch.tensor(y), _params(list(ls), s, noise), np.array([False, False]))
    x = np.array([[0.3, 0.3], [0.9, 0.9]])
    # mean = k_*^T (K + s2 I)^-1 y, var = k(x, x) - k_*^T (K + s2 I)^-1 k_* (1e-8: the jitter).
    K = _matern52_numpy(X, X, ls, s) + (noise + 1e-8) * np.eye(3)
    k = _matern52_numpy(x, X, ls, s)
    mean = k @ np.linalg.solve(K, y)
    var = s - np.einsum("ij,ji->i", k, np.linalg.solve(K, k.T))
    m, v = gp.posterior(torch.tensor(x))
    np.testing.assert_allclose(m.numpy(), mean, rtol=1e-8)
    np.testing.assert_allclose(v.numpy(), var, rtol=1e-8)
    joint_mean, cov = gp.joint_posterior(torch.tensor(x))
    np.testing.assert_allclose(joint_mean.numpy(), mean, rtol=1e-8)
    cov_closed = _matern52_numpy(x, x, ls, s) - k @ np.linalg.solve(K, k.T)
    np.testing.assert_allclose(cov.numpy(), cov_closed, rtol=1e-7, atol=1e-12)
    n = 3
    mll = -0.5 * y @ np.linalg.solve(K, y) - 0.5 * np.linalg.slogdet(K)[1] - n / 2 * math.log(2 * math.pi)
    assert float(gp.marginal_log_likelihood()) == pytest.approx(mll, rel=1e-10)


def test_joint_posterior_diagonal_equals_posterior_variance() -> None:
    gp = _random_gp(7, 9, [False, True, False])
    x = torch.tensor(np.random.RandomState(8).rand(2, 4, 3))
    x[..., 1] = 0.5  # the middle category
    mean, var = gp.posterior(x)
    joint_mean, cov = gp.joint_posterior(x)
    assert cov.shape == (2, 4, 4)
    torch.testing.assert_close(joint_mean, mean)
    torch.testing.assert_close(torch.diagonal(cov, dim1=-2, dim2=-1), var)
    torch.testing.assert_close(cov, cov.transpose(-1, -2))


def test_posterior_gradient_matches_finite_differences() -> None:
    gp = _random_gp(4, 10, [False, False, False])
    x = torch.tensor(np.random.RandomState(5).rand(3, 3), requires_grad=True)
    torch.autograd.gradcheck(lambda z: gp.posterior(z), (x,))
    # With a categorical dim: continuous dims still exact, the categorical one has gradient 0.
    gp_cat = _random_gp(4, 10, [False, True, False])
    xc = torch.tensor([[0.2, 1 / 6, 0.7], [0.9, 0.5, 0.1]], dtype=T, requires_grad=True)
    mean, var = gp_cat.posterior(xc)
    (grad,) = torch.autograd.grad((mean + 3 * var).sum(), xc)
    assert (grad[:, 1] == 0).all()
    eps = 1e-6
    for j in (0, 2):
        shift = torch.zeros_like(xc)
        shift[:, j] = eps
        with torch.no_grad():
            up = sum(t * w for t, w in zip(gp_cat.posterior(xc + shift), (1, 3)))
            down = sum(t * w for t, w in zip(gp_cat.posterior(xc - shift), (1, 3)))
        np.testing.assert_allclose(grad[:, j].numpy(), ((up - down) / (2 * eps)).numpy(), rtol=1e-5)


def test_posterior_keeps_batch_shape_and_is_finite_at_training_points() -> None:
    gp = _random_gp(4, 6, [False, True, False])
    x = torch.tensor(np.random.RandomState(4).rand(2, 5, 3), requires_grad=True)
    mean, var = gp.posterior(x)
    assert mean.shape == var.shape == (2, 5)
    (mean.sum() + var.sum()).backward()
    assert torch.isfinite(x.grad).all()
    # At a training point (r = 0) the variance is tiny but positive and gradients are finite.
    x0 = gp.X_train[:2].clone().requires_grad_(True)
    m0, v0 = gp.posterior(x0)
    assert (v0 > 0).all() and (v0 < 0.02).all()
    v0.sum().backward()
    assert torch.isfinite(x0.grad).all()


def test_condition_on_equals_gp_on_union_of_data() -> None:
    rng = np.random.RandomState(2)
    X, y = torch.tensor(rng.rand(7, 2)), torch.tensor(rng.randn(7))
    params = _params([0.3, 0.5], 1.1, 0.02)
    gp = GPRegressor(X[:4], y[:4], params, np.array([False, False]))
    union = GPRegressor(X, y, params, np.array([False, False]))
    conditioned = gp.condition_on(X[4:], y[4:])
    x = torch.tensor(rng.rand(5, 2))
    for a, b in zip(conditioned.posterior(x), union.posterior(x)):
        torch.testing.assert_close(a, b)
    for a, b in zip(conditioned.joint_posterior(x), union.joint_posterior(x)):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(conditioned.marginal_log_likelihood(), union.marginal_log_likelihood())
    torch.testing.assert_close(conditioned.X_train, X)
    assert conditioned.params is params
    # The original GP is unchanged (fantasies must not leak into it).
    assert len(gp.X_train) == 4


def test_condition_on_a_duplicate_point_without_noise_does_not_crash() -> None:
    X, y = torch.tensor([[0.2, 0.3], [0.6, 0.1]], dtype=T), torch.tensor([0.5, -0.5], dtype=T)
    gp = GPRegressor(X, y, _params([0.5, 0.5], 1.0, 1e-6), np.array([False, False]))
    fantasy = gp.condition_on(X[:1], gp.posterior(X[:1])[0])
    mean, var = fantasy.posterior(X)
    assert torch.isfinite(mean).all() and (var > 0).all()
    np.testing.assert_allclose(mean.numpy(), y.numpy(), atol=1e-4)


def test_joint_samples_match_joint_posterior() -> None:
    rng = np.random.RandomState(3)
    gp = GPRegressor(
        torch.tensor(rng.rand(4, 1)), torch.tensor(rng.randn(4)), KernelParams.default(1), np.array([False])
    )
    x = torch.tensor([[0.2], [0.25], [0.9]], dtype=T)
    samples = gp.sample_joint(x, 20000, torch.Generator().manual_seed(0))
    assert samples.shape == (20000, 3)
    mean, cov = gp.joint_posterior(x)
    np.testing.assert_allclose(samples.mean(0).numpy(), mean.detach().numpy(), atol=0.03)
    np.testing.assert_allclose(np.cov(samples.numpy().T), cov.detach().numpy(), atol=0.03)
    again = gp.sample_joint(x, 20000, torch.Generator().manual_seed(0))
    torch.testing.assert_close(again, samples)


@pytest.mark.parametrize("dim", [3, 12])
def test_fit_gradient_equals_autograd_of_the_log_posterior(dim: int) -> None:
    rng = np.random.RandomState(9)
    X, y = torch.tensor(rng.rand(8, dim)), torch.tensor(rng.randn(8))
    is_cat = np.zeros(dim, dtype=bool)
    is_cat[1] = True
    X[:, 1] = torch.tensor((rng.randint(0, 2, 8) + 0.5) / 2)
    raw = torch.tensor(
        list(np.linspace(-2.0, 2.5, dim)) + [0.3, math.log(0.05)], dtype=T
    )
    diff = X[:, None] - X[None]
    diff[..., 1] = (diff[..., 1].abs() > 1e-9).to(T)
    loss, grad = gp_module._negative_log_posterior(raw, diff * diff, y, None)

    raw_t = raw.clone().requires_grad_(True)
    params = KernelParams.from_raw(raw_t)
    K = gp_module.matern52(X, X, params.inverse_squared_lengthscales, params.outputscale, torch.tensor(is_cat))
    K = K + (params.noise_var + 1e-8) * torch.eye(8, dtype=T)
    dist = torch.distributions.MultivariateNormal(torch.zeros(8, dtype=T), covariance_matrix=K)
    expected = -(dist.log_prob(y) + _log_prior(params)) / 8
    (expected_grad,) = torch.autograd.grad(expected, raw_t)
    # Equal up to the constant of the Gaussian density (n/2 log 2 pi, per point).
    assert loss == pytest.approx(float(expected.detach()) - 0.5 * math.log(2 * math.pi), rel=1e-10)
    np.testing.assert_allclose(grad, expected_grad.numpy(), rtol=1e-8, atol=1e-12)


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
    # Warm start from the fit converges to the same place; a warm start of the wrong dimension
    # is ignored.
    again = fit_gp(X_t, y_t, np.array([False, False]), warm_start=fitted.params)
    torch.testing.assert_close(
        again.marginal_log_likelihood(), fitted.marginal_log_likelihood(), rtol=1e-3, atol=1e-3
    )
    other = fit_gp(X_t, y_t, np.array([False, False]), warm_start=KernelParams.default(5))
    assert other.params.inverse_squared_lengthscales.shape == (2,)
    # Deterministic: the same data gives the same parameters.
    torch.testing.assert_close(
        fit_gp(X_t, y_t, np.array([False, False])).params.inverse_squared_lengthscales, isl
    )


def test_warm_refit_after_one_new_point_stops_early_near_the_converged_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.RandomState(11)
    X = rng.rand(41, 3)
    y, _, _ = standardize(np.sin(5 * X[:, 0]) + 0.5 * X[:, 1] + 0.05 * rng.randn(41))
    is_cat = np.zeros(3, dtype=bool)
    previous = fit_gp(torch.tensor(X[:40]), torch.tensor(y[:40]), is_cat)
    calls = []
    original = gp_module._negative_log_posterior

    def counted(*args: object) -> tuple[float, np.ndarray]:
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(gp_module, "_negative_log_posterior", counted)
    X_t, y_t = torch.tensor(X), torch.tensor(y)
    warm = fit_gp(X_t, y_t, is_cat, warm_start=previous.params)
    n_warm = len(calls)
    calls.clear()
    cold = fit_gp(X_t, y_t, is_cat)
    # The refit stops once the loss barely moves, well before the iteration cap ...
    assert n_warm < min(len(calls), gp_module._MAX_ITER_WARM)
    # ... where the log posterior per point is the converged fit's, to about 1e-4.
    raw_w, raw_c = (torch.tensor(g.params.to_raw()) for g in (warm, cold))
    sqd = (X_t[:, None] - X_t[None]) ** 2
    loss_w, _ = original(raw_w, sqd, y_t, None)
    loss_c, _ = original(raw_c, sqd, y_t, None)
    assert loss_w == pytest.approx(loss_c, abs=1e-4)


@pytest.mark.parametrize("case", ["constant", "duplicates", "single", "deterministic", "categorical"])
def test_fit_survives_degenerate_data(case: str) -> None:
    rng = np.random.RandomState(6)
    X = rng.rand(8, 2)
    y = rng.randn(8)
    is_cat = np.array([False, False])
    if case == "constant":
        y = np.full(8, 3.0)
    if case == "duplicates":
        X[4:] = X[:4]
    if case == "single":
        X, y = X[:1], y[:1]
    if case == "categorical":
        X[:, 1] = 0.5  # one category seen only
        is_cat = np.array([False, True])
    ys, _, _ = standardize(y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gp = fit_gp(torch.tensor(X), torch.tensor(ys), is_cat, deterministic=case == "deterministic")
    mean, var = gp.posterior(torch.tensor(rng.rand(3, 2)))
    assert torch.isfinite(mean).all() and torch.isfinite(var).all() and (var > 0).all()
    if case == "deterministic":
        assert float(gp.params.noise_var) == pytest.approx(1e-6)
    else:
        assert float(gp.params.noise_var) >= 1e-6 * (1 - 1e-9)


def test_failed_fit_retries_then_warns_and_keeps_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def broken(raw, sqd, y, fixed_noise):  # type: ignore[no-untyped-def]
        calls.append(raw.clone())
        raise torch.linalg.LinAlgError("not positive definite")

    monkeypatch.setattr(gp_module, "_negative_log_posterior", broken)
    X, y = torch.rand(5, 2, dtype=T), torch.randn(5, dtype=T)
    warm = KernelParams(torch.tensor([7.0, 7.0], dtype=T), torch.tensor(2.0, dtype=T), torch.tensor(0.1, dtype=T))
    with pytest.warns(RuntimeWarning, match="Fitting the GP's kernel parameters failed"):
        gp = fit_gp(X, y, np.array([False, False]), warm_start=warm)
    # First the warm start, then the defaults.
    np.testing.assert_allclose(calls[0].numpy(), warm.to_raw())
    np.testing.assert_allclose(calls[1].numpy(), KernelParams.default(2).to_raw())
    torch.testing.assert_close(gp.params.inverse_squared_lengthscales, KernelParams.default(2).inverse_squared_lengthscales)


def test_bad_input_raises() -> None:
    with pytest.raises(ValueError, match="`X` must have shape"):
        fit_gp(torch.zeros(0, 2, dtype=T), torch.zeros(0, dtype=T), np.array([False, False]))
    with pytest.raises(ValueError, match="must be finite"):
        fit_gp(torch.zeros(2, 1, dtype=T), torch.tensor([0.0, math.nan], dtype=T), np.array([False]))
    with pytest.raises(ValueError, match="`is_categorical` must have shape"):
        GPRegressor(torch.zeros(2, 2, dtype=T), torch.zeros(2, dtype=T), KernelParams.default(2), np.array([False]))


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e200, 1e300])
def test_standardize_is_scale_free_at_extreme_magnitudes(scale: float) -> None:
    # np.std of such values overflows or underflows; the model must not see a constant.
    y = np.array([0.3, -1.2, 2.5, 0.0, 0.7])
    expected, mean, std = standardize(y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ys, mean_s, std_s = standardize(y * scale)
    np.testing.assert_allclose(ys, expected, rtol=1e-12, atol=1e-12)
    assert math.isclose(mean_s, mean * scale, rel_tol=1e-12)
    assert math.isclose(std_s, std * scale, rel_tol=1e-12)
    _, _, floor = standardize(np.full(3, 5.0) * scale)  # constant: the floor scales too
    assert floor > 0 and math.isfinite(floor)


def test_standardize_handles_constant_and_infinite_values() -> None:
    ys, mean, std = standardize(np.array([2.0, 2.0, 2.0]))
    assert np.all(ys == 0) and mean == 2.0 and std > 0
    ys, mean, std = standardize(np.array([1.0, 3.0]))
    np.testing.assert_allclose(ys, [-1.0, 1.0])
    assert (mean, std) == (2.0, 1.0)
    ys, _, _ = standardize(np.array([0.0, 1.0, np.inf, -np.inf, np.nan]))
    assert np.isfinite(ys).all()
    assert ys[2] == ys[1] and ys[3] == ys[0]  # infinities clipped to the finite range


def _gramacy_constraint(X: np.ndarray) -> np.ndarray:
    return 1.5 - X[:, 0] - 2 * X[:, 1] - 0.5 * np.sin(2 * np.pi * (X[:, 0] ** 2 - 2 * X[:, 1]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fitted_noise_is_small_for_noise_free_data(seed: int) -> None:
    # A noise-free constraint (Gramacy et al. 2016's) must be interpolated: a fitted noise near
    # the prior's mean (~0.04) would blur the probability of feasibility at its boundary.
    X = np.random.RandomState(seed).rand(15, 2)
    y, _, _ = standardize(_gramacy_constraint(X))
    gp = fit_gp(torch.tensor(X), torch.tensor(y), np.array([False, False]))
    assert float(gp.params.noise_var) < 5e-3


def test_fitted_noise_follows_the_data_when_it_is_noisy() -> None:
    noise = []
    for seed in range(5):
        rng = np.random.RandomState(seed)
        X = rng.rand(30, 2)
        y, _, _ = standardize(_gramacy_constraint(X) + 0.3 * rng.randn(30))
        gp = fit_gp(torch.tensor(X), torch.tensor(y), np.array([False, False]))
        noise.append(float(gp.params.noise_var))
    # The standardized noise variance is ~0.17 here.
    assert np.median(noise) > 0.04


def test_the_lengthscale_prior_is_bounded_on_both_sides_and_the_outputscale_prior_peaks_at_1() -> None:
    def log_prior(lengthscale: float, outputscale: float = 1.0, dim: int = 10) -> float:
        params = KernelParams(
            torch.full((dim,), lengthscale**-2, dtype=T), torch.tensor(outputscale, dtype=T),
            torch.tensor(0.01, dtype=T),
        )
        return gp_module._log_prior_and_grad(torch.from_numpy(params.to_raw()), False)[0]

    # Per dimension, symmetric in log(1 / l^2) around l = 1, where it peaks; nearly flat between
    # 0.3 and 3, while a lengthscale of 0.01 (the collapse seen in 10-d with the earlier
    # log-normal prior) costs about 1000 nats.
    assert log_prior(1.0) > log_prior(0.9) > log_prior(0.5)
    assert log_prior(0.5) == pytest.approx(log_prior(2.0))
    assert log_prior(1.0, dim=1) - min(log_prior(0.3, dim=1), log_prior(3.0, dim=1)) < 1.0
    assert log_prior(1.0) - log_prior(0.01) == pytest.approx(10 * (0.1 * (1e4 + 1e-4) - 0.2))
    # Gamma(2, 1) on the outputscale, as a density in s: log s - s, largest at s = 1.
    assert log_prior(1.0, 2.0) - log_prior(1.0, 1.0) == pytest.approx(math.log(2.0) - 1.0)
    assert log_prior(1.0, 1.0) > max(log_prior(1.0, 0.8), log_prior(1.0, 1.25))


def test_missing_constraint_values_are_imputed_as_clear_violations() -> None:
    from fairtune._gp.gp import impute_violations

    raw = np.array([-0.2, np.nan, 0.1, np.nan])
    out = impute_violations(raw)
    # Above every observed value and above zero by the observed spread (0.3 here).
    assert out[[0, 2]].tolist() == [-0.2, 0.1] and np.allclose(out[[1, 3]], 0.1 + 0.3)
    assert np.allclose(impute_violations(np.array([-0.5, np.nan])), [-0.5, 0.5])
    assert np.allclose(impute_violations(np.array([np.nan])), [1.0])  # nothing observed
    assert impute_violations(np.array([0.2, -0.1])).tolist() == [0.2, -0.1]
