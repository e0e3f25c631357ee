from __future__ import annotations

import numpy as np
import pytest
import torch
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from fairtune._gp.optim import batched_lbfgsb, maximize_acqf, single_threaded_torch
from fairtune._gp.search_space import SearchSpace

T = torch.float64


def _quadratic(target: np.ndarray, weights: np.ndarray):  # type: ignore[no-untyped-def]
    """acqf(X) = -sum_i sum_j w_j (X_ij - target_ij)^2 over the q points of each candidate set."""
    t, w = torch.from_numpy(np.asarray(target, dtype=float)), torch.from_numpy(weights)

    def acqf(X: torch.Tensor) -> torch.Tensor:  # (b, q, d) -> (b,)
        return -(((X - t) ** 2) * w).sum((-1, -2))

    return acqf


def _contains(dist, value) -> bool:  # type: ignore[no-untyped-def]
    return dist._contains(dist.to_internal_repr(value))


def test_finds_the_maximizer_on_continuous_int_and_categorical_dims() -> None:
    dists = {
        "x": FloatDistribution(0.0, 1.0),
        "lr": FloatDistribution(1e-4, 1.0, log=True),
        "n": IntDistribution(0, 9),
        "c": CategoricalDistribution(["a", "b", "c"]),
    }
    ss = SearchSpace(dists)
    best = {"x": 0.3141, "lr": 0.01, "n": 7, "c": "b"}
    target = ss.encode([best])[0]
    acqf = _quadratic(target[None], np.array([1.0, 1.0, 1.0, 5.0]))
    x_best, value = maximize_acqf(acqf, ss, rng=np.random.RandomState(0), n_preliminary_samples=64)
    assert x_best.shape == (1, 4)
    np.testing.assert_array_equal(ss.round(x_best), x_best)
    params = ss.decode(x_best[0])
    assert params["x"] == pytest.approx(0.3141, abs=1e-4)
    assert params["lr"] == pytest.approx(0.01, rel=1e-3)
    assert params["n"] == 7 and params["c"] == "b"
    assert value == pytest.approx(float(acqf(torch.from_numpy(x_best[None]))))
    assert value > -1e-7


def test_off_grid_optimum_rounds_to_the_best_admissible_values() -> None:
    dists = {
        "step": FloatDistribution(0.0, 1.0, step=0.25),
        "log_int": IntDistribution(1, 64, log=True),
        "k": IntDistribution(2, 20, step=3),
    }
    ss = SearchSpace(dists)
    # The maximizer lies between grid values; the closest admissible ones win.
    target = np.zeros((1, 3))
    target[0, 0] = ss.encode([{"step": 0.5, "log_int": 1, "k": 2}])[0, 0] + 0.02
    target[0, 1] = ss.encode([{"step": 0.5, "log_int": 10, "k": 2}])[0, 1] + 0.004
    target[0, 2] = ss.encode([{"step": 0.5, "log_int": 1, "k": 11}])[0, 2] - 0.01
    acqf = _quadratic(target, np.ones(3))
    x_best, _ = maximize_acqf(acqf, ss, rng=np.random.RandomState(1), n_preliminary_samples=32)
    params = ss.decode(x_best[0])
    assert params == {"step": 0.5, "log_int": 10, "k": 11}
    for name, dist in dists.items():
        assert _contains(dist, params[name])


def test_joint_batch_of_two_points_with_a_discrete_dim() -> None:
    ss = SearchSpace({"x": FloatDistribution(0.0, 1.0), "n": IntDistribution(0, 4)})
    targets = np.array([[0.2, ss.encode([{"x": 0, "n": 3}])[0, 1]], [0.7, ss.encode([{"x": 0, "n": 1}])[0, 1]]])
    acqf = _quadratic(targets, np.ones(2))
    X_best, value = maximize_acqf(acqf, ss, rng=np.random.RandomState(1), q=2, n_preliminary_samples=128)
    assert X_best.shape == (2, 2)
    np.testing.assert_allclose(X_best, targets, atol=1e-4)
    assert [ss.decode(x)["n"] for x in X_best] == [3, 1]
    assert value > -1e-7


def test_preconditioning_scales_reach_the_same_maximizer() -> None:
    ss = SearchSpace({"a": FloatDistribution(0.0, 1.0), "b": FloatDistribution(0.0, 1.0)})
    target = np.array([[0.37, 0.81]])
    weights = np.array([400.0, 1.0])  # badly conditioned
    acqf = _quadratic(target, weights)
    x_plain, _ = maximize_acqf(acqf, ss, rng=np.random.RandomState(2), n_local_search=3)
    x_scaled, _ = maximize_acqf(
        acqf, ss, rng=np.random.RandomState(2), n_local_search=3, scales=weights**-0.5
    )
    np.testing.assert_allclose(x_plain, target, atol=1e-4)
    np.testing.assert_allclose(x_scaled, target, atol=1e-4)


def test_warm_start_is_used_when_it_is_best() -> None:
    ss = SearchSpace({"a": FloatDistribution(0.0, 1.0)})

    def spike(X: torch.Tensor) -> torch.Tensor:  # a narrow peak the QMC points miss
        return torch.exp(-(((X[:, 0, 0] - 0.123456) / 1e-4) ** 2))

    x, value = maximize_acqf(
        spike, ss, rng=np.random.RandomState(0), n_preliminary_samples=16,
        warm_starts=np.array([[[0.12347]]]),
    )
    assert x[0, 0] == pytest.approx(0.123456, abs=1e-6) and value > 0.99


def test_excluded_points_are_not_returned_and_result_is_deterministic() -> None:
    ss = SearchSpace({"n": IntDistribution(0, 4)})
    best_enc = ss.encode([{"n": 2}])
    acqf = _quadratic(best_enc, np.ones(1))
    x, _ = maximize_acqf(acqf, ss, rng=np.random.RandomState(0), exclude=best_enc)
    assert ss.decode(x[0])["n"] in (1, 3)
    again, _ = maximize_acqf(acqf, ss, rng=np.random.RandomState(0), exclude=best_enc)
    np.testing.assert_array_equal(x, again)
    everything = ss.encode([{"n": i} for i in range(5)])
    x_all, _ = maximize_acqf(acqf, ss, rng=np.random.RandomState(0), exclude=everything)
    assert ss.decode(x_all[0])["n"] == 2  # all excluded: the best is returned anyway


def test_deterministic_on_a_gp_acquisition_and_threads_restored() -> None:
    from fairtune._gp.acquisition import log_ei
    from fairtune._gp.gp import fit_gp

    ss = SearchSpace({"a": FloatDistribution(0.0, 1.0), "b": IntDistribution(1, 100, log=True)})
    rng = np.random.RandomState(3)
    X = torch.from_numpy(ss.sample(12, rng))
    y = torch.sin(6 * X[:, 0]) + X[:, 1]
    gp = fit_gp(X, (y - y.mean()) / y.std(), ss.is_categorical)

    def acqf(Xq: torch.Tensor) -> torch.Tensor:
        mean, var = gp.posterior(Xq[:, 0])
        return log_ei(mean, var, float(gp.y_train.max()))

    threads = torch.get_num_threads()
    a = maximize_acqf(acqf, ss, rng=np.random.RandomState(5), n_preliminary_samples=128)
    b = maximize_acqf(acqf, ss, rng=np.random.RandomState(5), n_preliminary_samples=128)
    assert torch.get_num_threads() == threads
    np.testing.assert_array_equal(a[0], b[0])
    assert a[1] == b[1]
    # Nothing among many random points is better than the returned point.
    many = ss.sample(4096, np.random.RandomState(6))[:, None, :]
    with torch.no_grad():
        assert float(acqf(torch.from_numpy(many)).max()) <= a[1] + 1e-9


def test_batched_lbfgsb_solves_independent_bounded_problems() -> None:
    # f_i(z) = 0.5 (z - c_i)^T H (z - c_i) on [0, 1]^2: the box solution clips some optima.
    H = np.array([[3.0, 1.0], [1.0, 2.0]])
    centres = np.array([[0.3, 0.6], [1.5, 0.2], [-1.0, -1.0], [0.5, 2.0]])
    seen = []

    def loss_and_grad(z: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        seen.append(index.copy())
        diff = z - centres[index]
        return 0.5 * np.einsum("bi,ij,bj->b", diff, H, diff), diff @ H

    z = batched_lbfgsb(loss_and_grad, np.full((4, 2), 0.5), np.array([[0.0, 1.0]] * 2), max_iter=100)
    # Box-constrained minimizers, by the KKT conditions: with z_k at a bound, the other
    # coordinate solves its own equation, e.g. run 3: z_1 = 1, 3 (z_0 - 0.5) + (1 - 2) = 0.
    expected = np.array([[0.3, 0.6], [1.0, 0.2 + 0.5 / 2], [0.0, 0.0], [0.5 + 1 / 3, 1.0]])
    np.testing.assert_allclose(z, expected, atol=1e-4)
    # Every call batches the runs still going, in increasing order.
    assert all((np.diff(i) > 0).all() for i in seen)
    assert len(seen[0]) == 4


def test_single_threaded_torch_restores_the_thread_count_on_error() -> None:
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError):
        with single_threaded_torch():
            assert torch.get_num_threads() == 1
            raise RuntimeError
    assert torch.get_num_threads() == before


def test_bad_arguments_raise() -> None:
    ss = SearchSpace({"a": FloatDistribution(0.0, 1.0)})
    acqf = _quadratic(np.array([[0.5]]), np.ones(1))
    with pytest.raises(ValueError, match="`q` must be >= 1"):
        maximize_acqf(acqf, ss, rng=np.random.RandomState(0), q=0)
    with pytest.raises(ValueError, match="`n_local_search` must be >= 1"):
        maximize_acqf(acqf, ss, rng=np.random.RandomState(0), n_local_search=0)
    with pytest.raises(ValueError, match="`scales` must be a positive finite array of shape"):
        maximize_acqf(acqf, ss, rng=np.random.RandomState(0), scales=np.array([0.0]))
