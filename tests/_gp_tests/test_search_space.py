from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from fairtune._gp.search_space import MAX_EXHAUSTIVE_GRID, SearchSpace

DISTRIBUTIONS: dict[str, BaseDistribution] = {
    "float": FloatDistribution(-1.0, 2.0),
    "log_float": FloatDistribution(1e-5, 10.0, log=True),
    "step_float": FloatDistribution(-10.2, 10.2, step=0.1),
    "int": IntDistribution(3, 9),
    "step_int": IntDistribution(0, 10, step=2),
    "log_int": IntDistribution(1, 256, log=True),
    "cat": CategoricalDistribution([1, "a", None, 2.5]),
}

# Values to round-trip, per distribution: bounds, interior points, every grid value if small.
VALUES: dict[str, list[Any]] = {
    "float": [-1.0, 0.25, 2.0],
    "log_float": [1e-5, 0.003, 10.0],
    "step_float": [-10.2, -0.1, 0.0, 3.3, 10.2],
    "int": list(range(3, 10)),
    "step_int": [0, 2, 4, 6, 8, 10],
    "log_int": [1, 2, 3, 37, 255, 256],
    "cat": [1, "a", None, 2.5],
}


def _contains(dist: BaseDistribution, value: Any) -> bool:
    return dist._contains(dist.to_internal_repr(value))


def _check_native(dist: BaseDistribution, value: Any) -> None:
    assert not isinstance(value, (np.floating, np.integer, np.bool_))
    if isinstance(dist, IntDistribution):
        assert type(value) is int
    elif isinstance(dist, FloatDistribution):
        assert type(value) is float


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_encode_decode_round_trip_per_distribution(name: str) -> None:
    dist = DISTRIBUTIONS[name]
    ss = SearchSpace({name: dist})
    x = ss.encode([{name: v} for v in VALUES[name]])
    assert x.shape == (len(VALUES[name]), 1)
    assert ((0 <= x) & (x <= 1)).all()
    for v, xi in zip(VALUES[name], x):
        decoded = ss.decode(xi)[name]
        _check_native(dist, decoded)
        assert _contains(dist, decoded)
        if isinstance(dist, FloatDistribution):
            assert decoded == pytest.approx(v, rel=1e-12, abs=1e-12)
        else:
            assert decoded == v and type(decoded) is type(v)
    # Encoded admissible values are fixed points of round().
    np.testing.assert_allclose(ss.round(x), x, atol=1e-12)


def test_categorical_with_mixed_and_non_numeric_choices() -> None:
    # (True would alias 1: Optuna itself maps choices by equality, and True == 1.)
    dist = CategoricalDistribution((1, "a", None, False, 2.5, "b"))
    ss = SearchSpace({"c": dist})
    assert ss.is_categorical.tolist() == [True]
    x = ss.encode([{"c": choice} for choice in dist.choices])
    # Each choice owns an equal cell; its code is the cell centre.
    np.testing.assert_allclose(x[:, 0], (np.arange(6) + 0.5) / 6)
    assert [ss.decode(xi)["c"] for xi in x] == list(dist.choices)
    assert ss.decode(np.array([1.0]))["c"] == "b"  # the upper boundary belongs to the last cell
    assert ss.decode(np.array([0.0]))["c"] == 1


def test_decode_of_random_points_is_valid_and_native() -> None:
    ss = SearchSpace(DISTRIBUTIONS)
    rng = np.random.RandomState(0)
    # Include points outside the cube: decode clips them.
    for x in rng.uniform(-0.2, 1.2, size=(300, ss.dim)):
        params = ss.decode(x)
        assert list(params) == list(DISTRIBUTIONS)
        for name, dist in DISTRIBUTIONS.items():
            assert _contains(dist, params[name]), (name, params[name])
            _check_native(dist, params[name])


def test_decode_agrees_with_round() -> None:
    ss = SearchSpace(DISTRIBUTIONS)
    x = np.random.RandomState(2).rand(100, ss.dim)
    rounded = ss.round(x)
    for xi, ri in zip(x, rounded):
        a, b = ss.decode(xi), ss.decode(ri)
        for name in ("step_float", "int", "step_int", "log_int", "cat"):
            assert a[name] == b[name]
        # The rounded point is exactly the encoding of its decoded value.
        np.testing.assert_allclose(ss.encode([b])[0], ri, atol=1e-12)


def test_round_is_idempotent_and_snaps_to_equal_cells() -> None:
    ss = SearchSpace(DISTRIBUTIONS)
    x = np.random.RandomState(1).rand(5, 10, ss.dim)  # any batch shape
    once = ss.round(x)
    assert once.shape == x.shape
    np.testing.assert_array_equal(ss.round(once), once)
    np.testing.assert_array_equal(once[..., 0], x[..., 0])  # continuous dims untouched
    assert ss.is_categorical.tolist() == [False] * 6 + [True]
    # "int" has 7 values, each owning a cell of width 1/7 centred at (i + 0.5) / 7.
    codes = np.unique(once[..., 3])
    assert set(np.round(codes * 7 - 0.5, 9)) <= set(range(7))
    np.testing.assert_array_equal(ss.round(np.array([[2.0] * ss.dim]))[0, 0], 1.0)  # clipped


def test_single_value_distributions_encode_to_the_centre() -> None:
    ss = SearchSpace(
        {
            "f": FloatDistribution(1.0, 1.0),
            "i": IntDistribution(4, 4),
            "c": CategoricalDistribution(["only"]),
        }
    )
    x = ss.encode([{"f": 1.0, "i": 4, "c": "only"}])
    np.testing.assert_allclose(x, [[0.5, 0.5, 0.5]])
    assert ss.decode(np.array([0.9, 0.1, 0.3])) == {"f": 1.0, "i": 4, "c": "only"}


def test_sample_is_rounded_in_the_cube_and_deterministic() -> None:
    ss = SearchSpace(DISTRIBUTIONS)
    a = ss.sample(20, np.random.RandomState(3))
    b = ss.sample(20, np.random.RandomState(3))
    c = ss.sample(20, np.random.RandomState(4))
    assert a.shape == (20, ss.dim)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    np.testing.assert_array_equal(ss.round(a), a)
    assert ((0 <= a) & (a <= 1)).all()


def test_rejects_unknown_distributions() -> None:
    with pytest.raises(ValueError, match="`distributions` must not be empty"):
        SearchSpace({})
    with pytest.raises(ValueError, match=r"`distributions\['x'\]` must be a Float, Int or Categorical"):
        SearchSpace({"x": object()})  # type: ignore[dict-item]


def test_large_grids_are_searched_continuously_and_still_round_to_admissible_values() -> None:
    ss = SearchSpace(
        {
            "small": IntDistribution(0, MAX_EXHAUSTIVE_GRID - 1),
            "huge": IntDistribution(0, 10**9),
            "fine": FloatDistribution(0.0, 100.0, step=1e-4),
        }
    )
    assert ss.is_discrete.tolist() == [True, False, False]
    assert ss.n_grid.tolist() == [MAX_EXHAUSTIVE_GRID, 10**9 + 1, 10**6 + 1]
    x = np.random.RandomState(0).rand(50, 3)
    for point in ss.round(x):
        params = ss.decode(point)
        assert isinstance(params["huge"], int) and 0 <= params["huge"] <= 10**9
        assert abs(params["fine"] / 1e-4 - round(params["fine"] / 1e-4)) < 1e-6
        np.testing.assert_allclose(ss.encode([params])[0], point, atol=1e-12)


@pytest.mark.parametrize("name", ["step_float", "int", "step_int", "log_int", "cat"])
def test_the_neighbourhood_of_a_discrete_value_is_that_value_only(name: str) -> None:
    dist = DISTRIBUTIONS[name]
    ss = SearchSpace({"p": dist})
    values = VALUES[name]
    X = ss.encode([{"p": v} for v in values])
    near = ss.is_near(X[:, None, :], X[None, :, :])
    np.testing.assert_array_equal(near, np.eye(len(values), dtype=bool))
    # Every point of a box rounds to the box's value.
    for x, (low, high) in zip(X, ss.neighbourhood_boxes(X)):
        inner = np.linspace(low, high, 9)[1:-1]
        assert all(ss.decode(ss.round(p)) == ss.decode(x) for p in inner)


@pytest.mark.parametrize("name", ["float", "log_float"])
def test_the_neighbourhood_of_a_float_is_a_thousandth_of_its_encoded_range(name: str) -> None:
    dist = DISTRIBUTIONS[name]
    ss = SearchSpace({"p": dist, "n": DISTRIBUTIONS["int"]})
    np.testing.assert_allclose(ss.neighbourhood[0], 1e-3)

    def at(t: float, n: int = 5) -> np.ndarray:
        # t: position in the range, linear (or log-linear for a log float).
        if dist.log:
            value = float(np.exp(np.log(dist.low) + t * (np.log(dist.high) - np.log(dist.low))))
        else:
            value = dist.low + t * (dist.high - dist.low)
        return ss.encode([{"p": value, "n": n}])[0]

    assert ss.is_near(at(0.3), at(0.3 + 0.9e-3))
    assert ss.is_near(at(0.3), at(0.3 - 0.9e-3))
    assert not ss.is_near(at(0.3), at(0.3 + 1.1e-3))
    assert not ss.is_near(at(0.3), at(0.3, n=6))  # the same float, another int
