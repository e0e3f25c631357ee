"""Tests of the ICM multi-task GP (MT-KB) and its Nystrom variant (MT-BKB)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fairtune._gp import multitask as mt
from fairtune._gp.gp import GPRegressor, KernelParams
from fairtune._gp.kernels import matern52


def _problem(t: int = 7, d: int = 2, n: int = 3, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(t, d, generator=g, dtype=torch.float64)
    Y = torch.randn(t, n, generator=g, dtype=torch.float64)
    A = torch.randn(n, n, generator=g, dtype=torch.float64)
    B = A @ A.T + 0.1 * torch.eye(n, dtype=torch.float64)
    params = mt.ICMParams(
        torch.tensor([3.0, 5.0], dtype=torch.float64)[:d], B, torch.tensor(0.05, dtype=torch.float64)
    )
    return X, Y, params


def _dense_posterior(X, Y, params, x):
    """Paper eqs. 1-2 with the nt x nt block matrix G_t = [Gamma(x_i, x_j)]."""
    is_cat = torch.zeros(X.shape[1], dtype=torch.bool)
    one = torch.tensor(1.0, dtype=torch.float64)
    isl = params.inverse_squared_lengthscales
    B = params.task_covariance
    K = matern52(X, X, isl, one, is_cat)
    t, n = Y.shape
    G = torch.kron(K, B) + (params.noise_var + 1e-8) * torch.eye(t * n, dtype=torch.float64)
    kx = matern52(x[None], X, isl, one, is_cat)[0]
    Gx = torch.kron(kx.reshape(-1, 1).clone(), B.clone())  # (nt, n)
    mean = Gx.T @ torch.linalg.solve(G, Y.reshape(-1))
    cov = B - Gx.T @ torch.linalg.solve(G, Gx)
    return mean, cov


def test_posterior_equals_dense_formulas() -> None:
    X, Y, params = _problem()
    model = mt.ICMGP(X, Y, params, np.zeros(2, dtype=bool))
    x = torch.rand(4, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    mean, norm = model.posterior(x)
    cov = model.covariance(x)
    for j in range(len(x)):
        dense_mean, dense_cov = _dense_posterior(X, Y, params, x[j])
        torch.testing.assert_close(mean[j], dense_mean, atol=1e-7, rtol=1e-7)
        torch.testing.assert_close(cov[j], dense_cov, atol=1e-7, rtol=1e-7)
        # ||Gamma_t(x, x)|| is the largest eigenvalue of the posterior covariance.
        assert math.isclose(float(norm[j]), float(torch.linalg.eigvalsh(dense_cov).max()),
                            abs_tol=1e-7)


def test_posterior_is_differentiable_in_x() -> None:
    X, Y, params = _problem()
    model = mt.NystromICMGP(X, Y, params, np.zeros(2, dtype=bool), dictionary=[0, 2, 5])
    exact = mt.ICMGP(X, Y, params, np.zeros(2, dtype=bool))
    for m in (model, exact):
        x = torch.rand(3, 2, dtype=torch.float64, requires_grad=True)
        mean, norm = m.posterior(x)
        (mean.sum() + norm.sum()).backward()
        assert x.grad is not None and bool(torch.isfinite(x.grad).all())
        assert mean.shape == (3, 3) and norm.shape == (3,)


def test_identity_task_covariance_gives_independent_gps() -> None:
    X, Y, params = _problem()
    params = mt.ICMParams(params.inverse_squared_lengthscales, torch.eye(3, dtype=torch.float64),
                          params.noise_var)
    model = mt.ICMGP(X, Y, params, np.zeros(2, dtype=bool))
    x = torch.rand(5, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    mean, _ = model.posterior(x)
    cov = model.covariance(x)
    single = KernelParams(params.inverse_squared_lengthscales, torch.tensor(1.0, dtype=torch.float64),
                          params.noise_var)
    for i in range(3):
        gp = GPRegressor(X, Y[:, i], single, np.zeros(2, dtype=bool))
        m, v = gp.posterior(x)
        torch.testing.assert_close(mean[:, i], m, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(cov[:, i, i], v, atol=1e-6, rtol=1e-6)
    off_diagonal = cov - torch.diag_embed(cov.diagonal(dim1=-2, dim2=-1))
    assert float(off_diagonal.abs().max()) < 1e-10


def test_nystrom_with_every_point_equals_exact() -> None:
    X, Y, params = _problem(t=9)
    exact = mt.ICMGP(X, Y, params, np.zeros(2, dtype=bool))
    nystrom = mt.NystromICMGP(X, Y, params, np.zeros(2, dtype=bool), dictionary=np.arange(9))
    x = torch.rand(6, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    torch.testing.assert_close(nystrom.posterior(x)[0], exact.posterior(x)[0], atol=1e-7, rtol=1e-6)
    torch.testing.assert_close(nystrom.covariance(x), exact.covariance(x), atol=1e-7, rtol=1e-6)
    # q large enough makes every p_i = 1: the whole data set is the dictionary.
    chosen, p = mt.sample_dictionary(exact, 1e12, np.random.RandomState(0))
    np.testing.assert_array_equal(chosen, np.arange(9))
    np.testing.assert_array_equal(p, np.ones(9))


def test_nystrom_small_dictionary_differs_and_inflates_variance() -> None:
    X, Y, params = _problem(t=12)
    exact = mt.ICMGP(X, Y, params, np.zeros(2, dtype=bool))
    nystrom = mt.NystromICMGP(X, Y, params, np.zeros(2, dtype=bool), dictionary=[0])
    # With one dictionary point the approximate variances at the data stay close to the prior.
    assert float(nystrom.posterior(X)[1].mean()) > float(exact.posterior(X)[1].mean()) + 0.1


def test_marginal_likelihood_and_gradient_match_dense() -> None:
    X, Y, params = _problem()
    t, n = Y.shape
    one = torch.tensor(1.0, dtype=torch.float64)
    K = matern52(X, X, params.inverse_squared_lengthscales, one, torch.zeros(2, dtype=torch.bool))

    def dense(K, B, eta):
        C = torch.kron(K, B) + eta * torch.eye(t * n, dtype=torch.float64)
        L = torch.linalg.cholesky(C)
        y = Y.reshape(-1)
        alpha = torch.cholesky_solve(y[:, None], L)[:, 0]
        return 0.5 * y @ alpha + L.diagonal().log().sum() + 0.5 * t * n * math.log(2 * math.pi)

    inputs = [K.clone().requires_grad_(), params.task_covariance.clone().requires_grad_(),
              torch.tensor(0.05, dtype=torch.float64, requires_grad=True)]
    ours = mt._ICMNegLogLik.apply(*inputs, Y)
    ours.backward()
    reference = [v.detach().clone().requires_grad_() for v in inputs]
    expected = dense(*reference)
    expected.backward()
    assert math.isclose(float(ours.detach()), float(expected.detach()), rel_tol=1e-9)
    for a, b in zip(inputs, reference):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-8, rtol=1e-7)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_learned_correlation_recovers_sign(sign: float) -> None:
    rng = np.random.RandomState(1)
    X = torch.from_numpy(rng.rand(25, 2))
    f = torch.sin(6 * X[:, 0]) + X[:, 1]
    g = torch.cos(5 * X[:, 1])
    Y = torch.stack([f + 0.3 * g, sign * f - 0.3 * g + 0.05 * torch.from_numpy(rng.randn(25))], 1)
    Y = (Y - Y.mean(0)) / Y.std(0)
    params = mt.fit_icm(X, Y, np.zeros(2, dtype=bool))
    R = mt.covariance_to_correlation(params.task_covariance)
    assert sign * float(R[0, 1]) > 0.5
    # The independent model keeps B diagonal.
    diag = mt.fit_icm(X, Y, np.zeros(2, dtype=bool), task_covariance="independent")
    assert float(diag.task_covariance[0, 1]) == 0.0
    # A given matrix is kept as it is.
    B = mt.omega_task_covariance(0.4, 2)
    fixed = mt.fit_icm(X, Y, np.zeros(2, dtype=bool), task_covariance=B, warm_start=params)
    torch.testing.assert_close(fixed.task_covariance, B)


def test_omega_task_covariance() -> None:
    B = mt.omega_task_covariance(0.4, 4)
    assert math.isclose(float(B[0, 0]), 0.4 + 0.6 / 4)
    assert math.isclose(float(B[0, 1]), 0.6 / 4)
    eig = torch.linalg.eigvalsh(B)  # one eigenvalue 1, the others omega (paper, lemma 1)
    torch.testing.assert_close(eig, torch.tensor([0.4, 0.4, 0.4, 1.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="omega"):
        mt.omega_task_covariance(1.5, 2)


def test_scalarizations_by_hand() -> None:
    y = torch.tensor([[1.0, 3.0], [2.0, -1.0]], dtype=torch.float64)
    w = torch.tensor([[0.25, 0.75], [0.5, 0.5]], dtype=torch.float64)
    z = torch.tensor([0.0, -2.0], dtype=torch.float64)
    linear = mt.scalarize(y, w, "linear")
    # 0.25*1 + 0.75*3 = 2.5; 0.5*1 + 0.5*3 = 2; 0.25*2 - 0.75 = -0.25; 0.5*2 - 0.5 = 0.5
    torch.testing.assert_close(linear, torch.tensor([[2.5, 2.0], [-0.25, 0.5]], dtype=torch.float64))
    cheb = mt.scalarize(y, w, "chebyshev", z)
    # min(0.25*1, 0.75*5) = 0.25; min(0.5, 2.5) = 0.5; min(0.5, 0.75); min(1.0, 0.5)
    torch.testing.assert_close(cheb, torch.tensor([[0.25, 0.5], [0.5, 0.5]], dtype=torch.float64))
    torch.testing.assert_close(
        mt.expected_utility(y, w, "chebyshev", z), torch.tensor([0.375, 0.5], dtype=torch.float64)
    )
    with pytest.raises(ValueError, match="reference_point"):
        mt.scalarize(y, w, "chebyshev")
    with pytest.raises(ValueError, match=r"\['linear', 'chebyshev'\]"):
        mt.scalarize(y, w, "max")  # type: ignore[arg-type]


def test_weight_prior_by_hand() -> None:
    rng = np.random.RandomState(5)
    u = np.random.RandomState(5).uniform(size=(3, 2))
    linear = mt.sample_weights(2, 3, "linear", rng)
    np.testing.assert_allclose(linear, u / u.sum(1, keepdims=True))
    u = np.random.RandomState(6).uniform(size=(1, 2))
    cheb = mt.sample_weights(2, 1, "chebyshev", np.random.RandomState(6))
    a = u.sum() / u[0]
    np.testing.assert_allclose(cheb[0], a / a.sum())
    # Chebyshev weights are proportional to 1 / u: the smaller u_i, the larger lambda_i.
    assert (cheb[0, 0] > cheb[0, 1]) == (u[0, 0] < u[0, 1])
    np.testing.assert_allclose(mt.sample_weights(4, 100, "chebyshev", rng).sum(1), 1.0)


def test_lipschitz_constants_on_hand_computed_weights() -> None:
    w = torch.tensor([[0.2, 0.8], [0.6, 0.4]], dtype=torch.float64)
    assert math.isclose(mt.lipschitz_constant(w, "chebyshev"), (0.8 + 0.6) / 2)
    assert math.isclose(
        mt.lipschitz_constant(w, "linear"), (math.sqrt(0.68) + math.sqrt(0.52)) / 2
    )


def test_norm_width_is_the_papers_bonus_with_the_lipschitz_constant() -> None:
    X, Y, params = _problem()
    model = mt.ICMGP(X, Y, params, np.zeros(2, dtype=bool))
    w = torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float64)
    x = torch.rand(4, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    mean, norm = model.posterior(x)
    u = mt.mtkb_ucb(model, w, "linear", 2.0, width="norm")(x)
    torch.testing.assert_close(u, mean @ w[0] + 2.0 * math.sqrt(0.38) * norm.sqrt())
    assert math.isclose(mt.default_beta(10, 3), math.sqrt(0.2 * 3 * math.log(20)))


def _width(model, x, w, scalarization, width):
    """w_t(x): the bound at beta = 1 less the utility of the posterior mean."""
    z = torch.full((w.shape[1],), -3.0, dtype=torch.float64)
    utility = mt.expected_utility(model.posterior(x)[0], w, scalarization, z)
    return mt.mtkb_ucb(model, w, scalarization, 1.0, z, width)(x) - utility


def test_objectives_width_on_the_dense_posterior_covariance() -> None:
    X, Y, params = _problem()
    model = mt.ICMGP(X, Y, params, np.zeros(2, dtype=bool))
    w = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]], dtype=torch.float64)
    z = torch.tensor([-3.0, -3.0, -3.0], dtype=torch.float64)
    x = torch.rand(5, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    mean = model.posterior(x)[0]
    cov = model.covariance(x)  # (5, 3, 3)
    sd = cov.diagonal(dim1=-2, dim2=-1).sqrt()
    # Linear: the posterior sd of lambda^T f(x), averaged over the weights.
    linear = torch.stack([torch.einsum("i,pij,j->p", wk, cov, wk).sqrt() for wk in w], -1).mean(-1)
    u = mt.mtkb_ucb(model, w, "linear", 2.0)(x)
    torch.testing.assert_close(u, (mean @ w.T).mean(-1) + 2.0 * linear)
    # Chebyshev: mean_k max_i lambda_ki sigma_i(x).
    cheb = torch.stack([(wk * sd).max(-1).values for wk in w], -1).mean(-1)
    expected = (w * (mean.unsqueeze(-2) - z)).min(-1).values.mean(-1) + 1.5 * cheb
    torch.testing.assert_close(
        mt.mtkb_ucb(model, w, "chebyshev", 1.5, z, width="objectives")(x), expected
    )
    # Never wider than the paper's width; much narrower for strongly correlated tasks.
    for scal in ("linear", "chebyshev"):
        narrow = _width(model, x, w, scal, "objectives")
        wide = _width(model, x, w, scal, "norm")
        assert bool((narrow <= wide + 1e-12).all())
    B = 0.02 * torch.eye(3, dtype=torch.float64) + 0.98 * torch.ones(3, 3, dtype=torch.float64)
    correlated = mt.ICMGP(X, Y, mt.ICMParams(params.inverse_squared_lengthscales, B,
                                             params.noise_var), np.zeros(2, dtype=bool))
    w3 = torch.full((1, 3), 1.0 / 3.0, dtype=torch.float64)
    narrow = _width(correlated, x, w3, "chebyshev", "objectives")
    wide = _width(correlated, x, w3, "chebyshev", "norm")
    assert bool((wide > 1.3 * narrow).all())  # the data narrows the gap near the trials
    # Far from the trials the posterior is the prior: the ratio is the task norm, about sqrt(3).
    far = torch.full((1, 2), 5.0, dtype=torch.float64)
    ratio = (_width(correlated, far, w3, "chebyshev", "norm")
             / _width(correlated, far, w3, "chebyshev", "objectives"))
    assert 1.7 < float(ratio) <= math.sqrt(3.0)
    with pytest.raises(ValueError, match="width"):
        mt.mtkb_ucb(model, w, "linear", 2.0, width="trace")  # type: ignore[arg-type]


def test_scalarized_bound_is_the_scalarization_of_the_objectives_upper_bounds() -> None:
    X, Y, params = _problem()
    model = mt.ICMGP(X, Y, params, np.zeros(2, dtype=bool))
    w = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.05, 0.9, 0.05]], dtype=torch.float64)
    z = torch.tensor([-3.0, -2.0, -4.0], dtype=torch.float64)
    x = torch.rand(6, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    mean = model.posterior(x)[0]
    sd = model.covariance(x).diagonal(dim1=-2, dim2=-1).sqrt()  # from the dense covariance
    beta = 1.7
    upper = mean + beta * sd
    expected = torch.stack(
        [torch.stack([wk[i] * (upper[:, i] - z[i]) for i in range(3)], -1).min(-1).values
         for wk in w], -1,
    ).mean(-1)
    scalarized = mt.mtkb_ucb(model, w, "chebyshev", beta, z)(x)  # the default
    torch.testing.assert_close(scalarized, expected)
    # A valid bound that is never above the "objectives" one (min(a + b) <= min a + max b), and
    # here strictly below at some point: the weights differ between objectives.
    objectives = mt.mtkb_ucb(model, w, "chebyshev", beta, z, width="objectives")(x)
    assert bool((scalarized <= objectives + 1e-12).all())
    assert bool((scalarized < objectives - 1e-6).any())
    mean_utility = mt.expected_utility(mean, w, "chebyshev", z)
    assert bool((scalarized >= mean_utility).all())
    # Linear: the same as "objectives" (the width of the functional lambda^T f).
    torch.testing.assert_close(
        mt.mtkb_ucb(model, w, "linear", beta)(x),
        mt.mtkb_ucb(model, w, "linear", beta, width="objectives")(x),
    )
    with pytest.raises(ValueError, match="reference_point"):
        mt.mtkb_ucb(model, w, "chebyshev", beta)


def test_dictionary_probabilities_are_leverage_scores_and_keep_a_repeated_point() -> None:
    # p_i = min(q ||Gamma~(x_i, x_i)|| / eta, 1): q times the ridge leverage score. With the
    # variance alone and a small eta, a point observed 13 times had p ~ 1e-3 while in the
    # dictionary, left it, came back with p = 1, and so on every other step (MT-BKB chose it
    # again and again on the 20-task RKHS problem).
    g = torch.Generator().manual_seed(4)
    X = torch.cat([torch.zeros(13, 1, dtype=torch.float64),
                   torch.rand(20, 1, generator=g, dtype=torch.float64)])
    Y = torch.randn(33, 3, generator=g, dtype=torch.float64)
    params = mt.ICMParams(torch.tensor([30.0], dtype=torch.float64),
                          mt.omega_task_covariance(0.3, 3), torch.tensor(1e-4, dtype=torch.float64))
    exact = mt.ICMGP(X, Y, params, np.zeros(1, dtype=bool))
    q = 5.0
    chosen, p = mt.sample_dictionary(exact, q, np.random.RandomState(0))
    _, norm = exact.posterior(X)
    np.testing.assert_allclose(p, np.minimum(q * norm.numpy() / exact._eta, 1.0))
    # The leverage scores of the 13 copies sum to about one point's worth: with q = 5 some
    # point at or next to 0 stays in every resampled dictionary, and the approximate variance
    # there stays far below the prior's, step after step.
    assert 0.9 < float((norm[:13] / exact._eta).sum()) < 1.2
    model: mt.ICMGP = exact
    for step in range(6):
        chosen, _ = mt.sample_dictionary(model, q, np.random.RandomState(step))
        model = mt.NystromICMGP(X, Y, params, np.zeros(1, dtype=bool), dictionary=chosen)
        variance_at_zero = float(model.posterior(X[:1])[1][0])
        prior = float(torch.linalg.eigvalsh(params.task_covariance).max())
        assert variance_at_zero < 0.01 * prior, step


def test_restart_leaves_a_warm_start_stuck_in_interpolating_the_noise() -> None:
    # A smooth function of x1 observed with noise sd 0.3 by three correlated tasks. A warm start
    # at the floor of eta with short lengthscales (the optimum of the first few trials'
    # interpolation) is a local optimum: the warm fit stays near it, the restart finds the noise.
    g = torch.Generator().manual_seed(3)
    X = torch.rand(40, 2, generator=g, dtype=torch.float64)
    f = torch.sin(3.0 * X[:, :1]) * torch.tensor([[1.0, 0.8, -0.6]], dtype=torch.float64)
    Y = f + 0.3 * torch.randn(40, 3, generator=g, dtype=torch.float64)
    Y = (Y - Y.mean(0)) / Y.std(0)
    stuck = mt.ICMParams(
        torch.tensor([150.0, 150.0], dtype=torch.float64),
        0.5 * torch.eye(3, dtype=torch.float64) + 0.5,
        torch.tensor(1e-6, dtype=torch.float64),
    )
    is_cat = np.zeros(2, dtype=bool)
    warm = mt.fit_icm(X, Y, is_cat, warm_start=stuck)
    both = mt.fit_icm(X, Y, is_cat, warm_start=stuck, restart=True)
    cold = mt.fit_icm(X, Y, is_cat)
    assert float(warm.noise_var) < 1e-3
    assert float(both.noise_var) > 0.01
    torch.testing.assert_close(both.noise_var, cold.noise_var)
    one, no_cat = torch.tensor(1.0, dtype=torch.float64), torch.zeros(2, dtype=torch.bool)
    mll = [-float(mt._ICMNegLogLik.apply(
        matern52(X, X, p.inverse_squared_lengthscales, one, no_cat), p.task_covariance,
        p.noise_var + 1e-8, Y)) for p in (warm, both)]
    assert mll[1] > mll[0] + 10.0
