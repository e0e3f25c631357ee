from __future__ import annotations

import math

import numpy as np
import torch

from fairtune._gp import acquisition
from fairtune._gp.fantasy import FantasyModels, reject
from fairtune._gp.gp import GPRegressor, KernelParams


def _gp(n: int = 6, d: int = 2, seed: int = 0) -> GPRegressor:
    rng = np.random.RandomState(seed)
    X = torch.from_numpy(rng.uniform(size=(n, d)))
    y = torch.from_numpy(np.sin(3 * X.numpy()).sum(1))
    params = KernelParams(
        torch.full((d,), 4.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64),
        torch.tensor(1e-3, dtype=torch.float64),
    )
    return GPRegressor(X, y, params, np.zeros(d, dtype=bool))


def test_fantasy_models_share_one_covariance_and_match_conditioning_on_each_sample() -> None:
    gp = _gp()
    X_b = torch.tensor([[0.2, 0.9], [0.8, 0.1]], dtype=torch.float64)
    samples = torch.tensor([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]], dtype=torch.float64)
    fantasies = FantasyModels(gp, X_b, samples)
    x = torch.rand(7, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    means = fantasies.means(x)  # (7, 3)
    for s in range(3):
        model = gp.condition_on(X_b, samples[s])  # GP(D u S+_s), refactorized per sample
        mean_s, var_s = model.posterior(x)
        torch.testing.assert_close(means[:, s], mean_s)
        # Property 2: the variance does not depend on the sample.
        torch.testing.assert_close(fantasies.variance(x), var_s)
        joint_mean, joint_cov = fantasies.joint_posterior(x, s)
        ref_mean, ref_cov = model.joint_posterior(x)
        torch.testing.assert_close(joint_mean, ref_mean)
        torch.testing.assert_close(joint_cov, ref_cov)
    mean, var, spread = fantasies.moments(x)
    torch.testing.assert_close(mean, means.mean(-1))
    torch.testing.assert_close(spread, means.var(-1))  # divisor S - 1, eq. 12
    # Borrowing a design pulls the means there towards the samples; the variance shrinks.
    assert bool((fantasies.variance(X_b) < gp.posterior(X_b)[1]).all())


def test_without_borrowed_designs_the_fantasy_model_is_the_gp_itself() -> None:
    gp = _gp()
    fantasies = FantasyModels(gp, torch.zeros(0, 2, dtype=torch.float64),
                              torch.zeros(0, 0, dtype=torch.float64))
    x = torch.rand(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    mean, var = gp.posterior(x)
    m, v, spread = fantasies.moments(x)
    torch.testing.assert_close(m, mean)
    torch.testing.assert_close(v, var)
    assert fantasies.n_models == 1 and bool((spread == 0).all())
    # Each acquisition equals the plain one on the GP.
    torch.testing.assert_close(
        acquisition.cgp_ucb(m, v, spread, 2.0), acquisition.ucb(mean, var, 4.0)
    )
    torch.testing.assert_close(
        acquisition.cgp_log_ei(fantasies.means(x), v, 0.3), acquisition.log_ei(mean, var, 0.3)
    )


def test_cgp_log_ei_is_the_log_of_the_average_ei_and_is_finite_far_below_the_incumbent() -> None:
    means = torch.tensor([[0.0, 1.0, -0.5]], dtype=torch.float64)
    var = torch.tensor([0.25], dtype=torch.float64)
    ei = acquisition.log_ei(means, var.unsqueeze(-1), 0.2).exp().mean(-1)
    torch.testing.assert_close(acquisition.cgp_log_ei(means, var, 0.2), ei.log())
    far = acquisition.cgp_log_ei(torch.full((1, 4), -60.0, dtype=torch.float64), var, 0.0)
    assert bool(torch.isfinite(far).all())


def test_rejection_keeps_only_samples_above_kappa_and_drops_a_contradicted_design() -> None:
    kappa = 1.0
    samples = torch.tensor(
        [
            [1.5, 0.0, 2.0],
            [1.2, 0.5, 1.1],
            [0.9, 3.0, 1.4],  # design 0 below kappa: rejected as a whole
            [2.0, 0.2, 1.3],
            [1.1, 0.1, 1.8],
            [1.3, 0.3, 1.2],
        ],
        dtype=torch.float64,
    )
    # Design 1 clears kappa in 1 sample of 6: below a quorum of 3, it is dropped.
    keep, kept = reject(samples, kappa, quorum=3)
    assert keep.tolist() == [True, False, True]
    expected = samples[[0, 1, 3, 4, 5]][:, [0, 2]]
    torch.testing.assert_close(kept, expected)
    assert bool((kept > kappa).all())
    # Each design alone clears the quorum but the joint acceptance does not: the design cleared
    # least often goes first.
    pair = torch.tensor([[2.0, 0.0], [2.0, 0.0], [0.0, 2.0], [2.0, 2.0], [2.0, 0.0], [0.0, 0.0]],
                        dtype=torch.float64)
    keep, kept = reject(pair, kappa, quorum=2)
    assert keep.tolist() == [True, False]  # design 0 cleared 4 times, design 1 twice
    assert kept.shape == (4, 1)
    keep, kept = reject(samples, 10.0, quorum=1)
    assert not bool(keep.any()) and kept.shape == (0, 0)


def test_moments_spread_is_zero_for_a_single_fantasy_and_positive_for_several() -> None:
    gp = _gp()
    X_b = torch.tensor([[0.5, 0.5]], dtype=torch.float64)
    one = FantasyModels(gp, X_b, torch.tensor([[2.0]], dtype=torch.float64))
    many = FantasyModels(gp, X_b, torch.tensor([[2.0], [3.0], [4.0]], dtype=torch.float64))
    x = torch.tensor([[0.5, 0.5], [0.45, 0.55]], dtype=torch.float64)
    assert bool((one.moments(x)[2] == 0).all())
    assert bool((many.moments(x)[2] > 0).all())
    assert math.isclose(float(many.moments(x[:1])[0]), float(many.means(x[:1]).mean()))
