from __future__ import annotations

import numpy as np
import torch
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from fairtune._gp.optim import maximize_acqf
from fairtune._gp.search_space import SearchSpace


def test_finds_the_maximizer_on_continuous_int_and_categorical_dims() -> None:
    ss = SearchSpace(
        {
            "x": FloatDistribution(0.0, 1.0),
            "n": IntDistribution(0, 9),
            "c": CategoricalDistribution(["a", "b", "c"]),
        }
    )
    target = ss.encode([{"x": 0.3141, "n": 7, "c": "b"}])[0]

    def acqf(X: torch.Tensor) -> torch.Tensor:
        x = X[..., 0, :]
        return -((x - torch.from_numpy(target)) ** 2 * torch.tensor([1.0, 1.0, 5.0], dtype=x.dtype)).sum(-1)

    x_best, value = maximize_acqf(acqf, ss, rng=np.random.RandomState(0), n_preliminary_samples=64)
    params = ss.decode(x_best[0])
    assert abs(params["x"] - 0.3141) < 1e-3
    assert params["n"] == 7 and params["c"] == "b"
    assert value > -1e-5


def test_joint_batch_of_two_points() -> None:
    ss = SearchSpace({"x": FloatDistribution(0.0, 1.0), "y": FloatDistribution(0.0, 1.0)})
    targets = torch.tensor([[0.2, 0.8], [0.7, 0.1]], dtype=torch.float64)

    def acqf(X: torch.Tensor) -> torch.Tensor:  # (b, 2, 2) -> (b,)
        return -((X - targets) ** 2).sum((-1, -2))

    X_best, _ = maximize_acqf(acqf, ss, rng=np.random.RandomState(1), q=2, n_preliminary_samples=128)
    assert X_best.shape == (2, 2)
    np.testing.assert_allclose(X_best, targets.numpy(), atol=1e-3)


def test_excluded_points_are_not_returned_and_result_is_deterministic() -> None:
    ss = SearchSpace({"n": IntDistribution(0, 4)})
    best_enc = ss.encode([{"n": 2}])

    def acqf(X: torch.Tensor) -> torch.Tensor:
        return -((X[..., 0, 0] - float(best_enc[0, 0])) ** 2)

    x, _ = maximize_acqf(acqf, ss, rng=np.random.RandomState(0), exclude=best_enc)
    assert ss.decode(x[0])["n"] in (1, 3)
    again, _ = maximize_acqf(acqf, ss, rng=np.random.RandomState(0), exclude=best_enc)
    np.testing.assert_array_equal(x, again)
    everything = ss.encode([{"n": i} for i in range(5)])
    x_all, _ = maximize_acqf(acqf, ss, rng=np.random.RandomState(0), exclude=everything)
    assert ss.decode(x_all[0])["n"] == 2  # all excluded: the best is returned anyway


def test_warm_start_is_refined_even_when_quasi_random_points_look_better() -> None:
    # A broad hill at (0.8, 0.8) wins the quasi-random screening; a narrow, higher peak sits
    # next to the warm start (the incumbent). Only refining the warm start finds the peak.
    ss = SearchSpace({"x": FloatDistribution(0.0, 1.0), "y": FloatDistribution(0.0, 1.0)})
    peak = torch.tensor([0.23, 0.31], dtype=torch.float64)
    hill = torch.tensor([0.8, 0.8], dtype=torch.float64)

    def acqf(X: torch.Tensor) -> torch.Tensor:
        x = X[..., 0, :]
        broad = torch.exp(-((x - hill) ** 2).sum(-1) / 0.1)
        narrow = 2.0 * torch.exp(-((x - peak) ** 2).sum(-1) / 0.002)
        return broad + narrow

    warm = np.array([[[0.2, 0.28]]])
    with torch.no_grad():
        assert float(acqf(torch.from_numpy(warm))) < 1.0  # worse than the hill's top
    x_best, value = maximize_acqf(
        acqf, ss, rng=np.random.RandomState(0), n_preliminary_samples=32, n_local_search=1,
        warm_starts=warm,
    )
    np.testing.assert_allclose(x_best[0], peak.numpy(), atol=1e-3)
    assert value > 1.99


def test_excluded_boxes_are_not_returned() -> None:
    ss = SearchSpace({"x": FloatDistribution(0.0, 1.0), "c": CategoricalDistribution(["a", "b"])})
    peak = ss.encode([{"x": 0.5, "c": "a"}])[0]

    def acqf(X: torch.Tensor) -> torch.Tensor:
        return -((X[..., 0, :] - torch.from_numpy(peak)) ** 2).sum(-1)

    # The peak's neighbourhood in x (with c = "a") is ruled out; c = "b" stays allowed.
    box = np.array([[[0.4, peak[1]], [0.6, peak[1]]]])
    x, _ = maximize_acqf(acqf, ss, rng=np.random.RandomState(0), exclude_boxes=box)
    params = ss.decode(x[0])
    assert not (params["c"] == "a" and 0.4 - 1e-6 <= params["x"] <= 0.6 + 1e-6)
    # The best allowed points: the box's edges with c = "a", or x = 0.5 with c = "b".
    assert min(abs(params["x"] - 0.4), abs(params["x"] - 0.6), abs(params["x"] - 0.5)) < 0.02


def test_a_huge_int_range_is_optimized_without_trying_every_value() -> None:
    # A linear int with a million values is refined continuously and rounded, not swept value
    # by value (a sweep of a billion values would take 24 GB per suggestion).
    ss = SearchSpace({"n": IntDistribution(0, 10**6), "x": FloatDistribution(0.0, 1.0)})
    target = ss.encode([{"n": 123_456, "x": 0.5}])[0]
    n_evaluated = 0

    def acqf(X: torch.Tensor) -> torch.Tensor:
        nonlocal n_evaluated
        n_evaluated += X.shape[0]
        return -((X[..., 0, :] - torch.from_numpy(target)) ** 2).sum(-1)

    x_best, _ = maximize_acqf(acqf, ss, rng=np.random.RandomState(0), n_preliminary_samples=64)
    params = ss.decode(x_best[0])
    assert n_evaluated < 10_000
    assert isinstance(params["n"], int) and abs(params["n"] - 123_456) <= 10
    assert abs(params["x"] - 0.5) < 1e-3


def test_an_excluded_point_excludes_its_neighbourhood_and_the_best_point_next_to_it_wins() -> None:
    # A pending point at p; the acquisition peaks 1e-7 from it (two workers that chose together
    # ended that close). The point returned is outside p's neighbourhood (0.1 % of the range),
    # and it is the best one outside: just beyond the box's edge, not a distant local optimum.
    ss = SearchSpace({"x": FloatDistribution(0.0, 1.0), "y": FloatDistribution(0.0, 1.0)})
    p = np.array([0.4, 0.7])
    peak = torch.from_numpy(p + 1e-7)
    other = torch.tensor([0.9, 0.1], dtype=torch.float64)

    def acqf(X: torch.Tensor) -> torch.Tensor:
        x = X[..., 0, :]
        main = torch.exp(-((x - peak) ** 2).sum(-1) / 0.01)
        return main + 0.5 * torch.exp(-((x - other) ** 2).sum(-1) / 0.01)

    x, value = maximize_acqf(acqf, ss, rng=np.random.RandomState(0), n_preliminary_samples=64,
                             exclude=p[None])
    gap = np.abs(x[0] - p).max()
    assert gap > 1e-3
    assert gap < 2e-3
    assert value > 0.99
    # Ints: the neighbourhood is the value itself; the next value is allowed.
    ss_int = SearchSpace({"n": IntDistribution(0, 100)})
    target = float(ss_int.encode([{"n": 40}])[0, 0])

    def acqf_int(X: torch.Tensor) -> torch.Tensor:
        return -((X[..., 0, 0] - target) ** 2)

    x_int, _ = maximize_acqf(acqf_int, ss_int, rng=np.random.RandomState(0),
                             exclude=ss_int.encode([{"n": 40}]))
    assert ss_int.decode(x_int[0])["n"] in (39, 41)


def test_an_acquisition_with_a_numpy_gradient_is_refined_with_it_one_start_at_a_time() -> None:
    ss = SearchSpace({"x": FloatDistribution(0.0, 1.0), "y": FloatDistribution(0.0, 1.0)})
    target = np.array([0.3137, 0.8512])

    batch_sizes: list[int] = []

    class Quadratic:

        def __call__(self, X: torch.Tensor) -> torch.Tensor:
            return -((X[:, 0, :] - torch.from_numpy(target)) ** 2).sum(-1)

        def value_and_grad(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            batch_sizes.append(len(X))
            return -((X[:, 0, :] - target) ** 2).sum(-1), -2.0 * (X - target)

    x, value = maximize_acqf(Quadratic(), ss, rng=np.random.RandomState(0),
                             n_preliminary_samples=16, n_local_search=3)
    # The local search ran on the numpy gradient: after one call on all three starts, which
    # asks whether it can, each start was refined in a search of its own.
    assert batch_sizes[0] == 3 and len(batch_sizes) > 3
    assert set(batch_sizes[1:]) == {1}
    np.testing.assert_allclose(x[0], target, atol=1e-6)
    assert value == -((x[0] - target) ** 2).sum()
