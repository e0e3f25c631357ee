from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fairtune._gp.kernels import matern52

T = torch.float64


def _matern52_by_hand(r: float, s: float) -> float:
    # k(r) = s * (1 + sqrt(5) r + 5/3 r^2) * exp(-sqrt(5) r)
    return s * (1.0 + math.sqrt(5.0) * r + 5.0 / 3.0 * r * r) * math.exp(-math.sqrt(5.0) * r)


def test_matches_closed_form_on_hand_picked_points() -> None:
    X1 = torch.tensor([[0.0, 0.0], [0.3, 0.4]], dtype=T)
    X2 = torch.tensor([[0.3, 0.0], [1.0, 1.0], [0.3, 0.4]], dtype=T)
    lengthscales = (0.5, 2.0)
    s = 1.5
    K = matern52(
        X1,
        X2,
        torch.tensor([1 / lengthscales[0] ** 2, 1 / lengthscales[1] ** 2], dtype=T),
        torch.tensor(s, dtype=T),
        torch.tensor([False, False]),
    )
    # r = sqrt(sum_j ((x_j - x'_j) / l_j)^2), written out per pair.
    r = [
        [math.hypot(0.3 / 0.5, 0.0), math.hypot(1.0 / 0.5, 1.0 / 2.0), math.hypot(0.3 / 0.5, 0.4 / 2)],
        [math.hypot(0.0, 0.4 / 2.0), math.hypot(0.7 / 0.5, 0.6 / 2.0), 0.0],
    ]
    expected = [[_matern52_by_hand(v, s) for v in row] for row in r]
    np.testing.assert_allclose(K.numpy(), expected, rtol=1e-12)
    assert float(K[1, 2]) == pytest.approx(s)  # k(x, x) = outputscale


def test_symmetric_positive_semidefinite_with_categorical_dims() -> None:
    rng = np.random.RandomState(0)
    X = rng.rand(12, 3)
    X[:, 2] = (rng.randint(0, 3, size=12) + 0.5) / 3  # a categorical dim with 3 choices
    X[5] = X[2]  # duplicate row
    K = matern52(
        torch.tensor(X),
        torch.tensor(X),
        torch.tensor([4.0, 0.5, 2.0], dtype=T),
        torch.tensor(0.7, dtype=T),
        torch.tensor([False, False, True]),
    ).numpy()
    np.testing.assert_allclose(K, K.T, rtol=0, atol=0)
    assert np.linalg.eigvalsh(K).min() > -1e-12
    np.testing.assert_allclose(np.diag(K), 0.7)


def test_categorical_dimension_uses_hamming_distance() -> None:
    X = torch.tensor([[0.125, 0.0], [0.875, 0.0], [0.375, 0.0], [0.125, 0.0]], dtype=T)
    K = matern52(
        X, X, torch.tensor([1.0, 1.0], dtype=T), torch.tensor(1.0, dtype=T), torch.tensor([True, False])
    )
    # Different categories are one unit apart whatever their encoded positions; same ones 0.
    assert float(K[0, 1]) == pytest.approx(_matern52_by_hand(1.0, 1.0))
    assert float(K[0, 2]) == pytest.approx(_matern52_by_hand(1.0, 1.0))
    assert float(K[0, 3]) == pytest.approx(1.0)


def test_batch_shapes_and_finite_gradient_at_zero_distance() -> None:
    gen = torch.Generator().manual_seed(1)
    X1 = torch.rand(4, 5, 2, generator=gen, dtype=T)
    X2 = torch.rand(4, 3, 2, generator=gen, dtype=T)
    isl = torch.tensor([2.0, 3.0], dtype=T)
    K = matern52(X1, X2, isl, torch.tensor(1.0, dtype=T), torch.tensor([False, False]))
    assert K.shape == (4, 5, 3)
    x = X2[0, :1].clone().requires_grad_(True)
    k = matern52(x, X2[0, :1], isl, torch.tensor(1.0, dtype=T), torch.tensor([False, False]))
    (grad,) = torch.autograd.grad(k.sum(), x)
    # The kernel is smooth with a maximum at r = 0: the gradient there is exactly 0.
    assert torch.isfinite(grad).all()
    np.testing.assert_allclose(grad.numpy(), 0.0, atol=1e-12)
