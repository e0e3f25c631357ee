from __future__ import annotations

import numpy as np
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from fairtune._gp.search_space import SearchSpace

DISTRIBUTIONS = {
    "float": FloatDistribution(-1.0, 2.0),
    "log_float": FloatDistribution(1e-5, 10.0, log=True),
    "step_float": FloatDistribution(-10.2, 10.2, step=0.1),
    "int": IntDistribution(3, 9),
    "step_int": IntDistribution(0, 10, step=2),
    "log_int": IntDistribution(1, 256, log=True),
    "cat": CategoricalDistribution([1, "a", None, 2.5]),
}


def _contains(dist, value) -> bool:
    return dist._contains(dist.to_internal_repr(value))


def test_decode_of_random_points_is_valid_and_native() -> None:
    ss = SearchSpace(DISTRIBUTIONS)
    rng = np.random.RandomState(0)
    for x in rng.rand(200, ss.dim):
        params = ss.decode(x)
        for name, dist in DISTRIBUTIONS.items():
            value = params[name]
            assert _contains(dist, value), (name, value)
            assert not isinstance(value, (np.floating, np.integer))
            if isinstance(dist, IntDistribution):
                assert type(value) is int
            elif isinstance(dist, FloatDistribution):
                assert type(value) is float


def test_encode_decode_round_trip() -> None:
    ss = SearchSpace(DISTRIBUTIONS)
    params = {
        "float": 0.25, "log_float": 0.003, "step_float": 3.3, "int": 7, "step_int": 4,
        "log_int": 37, "cat": None,
    }
    x = ss.encode([params])
    assert x.shape == (1, ss.dim) and ((0 <= x) & (x <= 1)).all()
    decoded = ss.decode(x[0])
    assert decoded["float"] == pytest.approx(0.25)
    assert decoded["log_float"] == pytest.approx(0.003)
    assert decoded["step_float"] == pytest.approx(3.3)
    assert {k: decoded[k] for k in ("int", "step_int", "log_int", "cat")} == {
        "int": 7, "step_int": 4, "log_int": 37, "cat": None,
    }
    # Encoded discrete values are fixed points of round().
    np.testing.assert_allclose(ss.round(x), x)


def test_round_is_idempotent_and_marks_categoricals() -> None:
    ss = SearchSpace(DISTRIBUTIONS)
    x = np.random.RandomState(1).rand(50, ss.dim)
    once = ss.round(x)
    np.testing.assert_allclose(ss.round(once), once)
    assert ss.is_categorical.tolist() == [False] * 6 + [True]
    # Each int value owns an equal cell: 7 values of "int" -> centres (i + 0.5) / 7.
    np.testing.assert_allclose(np.unique(once[:, 3]), (np.unique(once[:, 3]) * 7 - 0.5).round() / 7 + 0.5 / 7)


def test_sample_is_rounded_and_deterministic() -> None:
    ss = SearchSpace(DISTRIBUTIONS)
    a = ss.sample(20, np.random.RandomState(3))
    b = ss.sample(20, np.random.RandomState(3))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(ss.round(a), a)


def test_rejects_unknown_distributions() -> None:
    with pytest.raises(ValueError, match="`distributions` must not be empty"):
        SearchSpace({})
    with pytest.raises(ValueError, match=r"`distributions\['x'\]` must be a Float, Int or Categorical"):
        SearchSpace({"x": object()})  # type: ignore[dict-item]
