"""Kernels on the encoded unit hypercube.

Notation:
    X1 (..., n1, d), X2 (..., n2, d): encoded inputs.
    inverse_squared_lengthscales (d,): 1 / l_j^2 (ARD).
    r^2 = sum_j dist_j^2 / l_j^2 with dist_j = x_j - x'_j, or 1[x_j != x'_j] on categorical dims.
    Matern-5/2: k(r) = s * (1 + sqrt(5) r + 5/3 r^2) * exp(-sqrt(5) r).
"""

from __future__ import annotations

import math

import torch

_SQRT5 = math.sqrt(5.0)


def squared_distance_per_dimension(
    X1: torch.Tensor,  # (..., n1, d)
    X2: torch.Tensor,  # (..., n2, d)
    is_categorical: torch.Tensor,  # (d,) bool
) -> torch.Tensor:  # (..., n1, n2, d)
    """dist_j^2 per dimension (the kernel fits precompute it once per fit)."""
    diff = X1.unsqueeze(-2) - X2.unsqueeze(-3)  # (..., n1, n2, d)
    if bool(is_categorical.any()):
        # Hamming distance: categories are equal or not; their encoded order means nothing.
        diff = torch.where(is_categorical, (diff.abs() > 1e-9).to(diff.dtype), diff)
    return diff * diff


def squared_distance(
    X1: torch.Tensor,  # (..., n1, d)
    X2: torch.Tensor,  # (..., n2, d)
    inverse_squared_lengthscales: torch.Tensor,  # (d,)
    is_categorical: torch.Tensor,  # (d,) bool
) -> torch.Tensor:  # (..., n1, n2)
    return (squared_distance_per_dimension(X1, X2, is_categorical)
            * inverse_squared_lengthscales).sum(-1)


def matern52_from_squared_distance(r2: torch.Tensor) -> torch.Tensor:
    # sqrt has an infinite derivative at 0; the kernel itself is smooth there. Evaluate sqrt on a
    # clamped value so that gradients at coinciding points stay finite (they are 0 analytically).
    r = torch.sqrt(r2.clamp_min(1e-30))
    return (1.0 + _SQRT5 * r + (5.0 / 3.0) * r2) * torch.exp(-_SQRT5 * r)


def matern52(
    X1: torch.Tensor,  # (..., n1, d)
    X2: torch.Tensor,  # (..., n2, d)
    inverse_squared_lengthscales: torch.Tensor,  # (d,)
    outputscale: torch.Tensor,  # ()
    is_categorical: torch.Tensor,  # (d,) bool
) -> torch.Tensor:  # (..., n1, n2)
    """Matern-5/2 ARD kernel, with a Hamming distance on categorical dimensions."""
    r2 = squared_distance(X1, X2, inverse_squared_lengthscales, is_categorical)
    return outputscale * matern52_from_squared_distance(r2)


class CrossKernel:
    """Unit-variance Matern-5/2 ARD cross-covariances k(x, X) to fixed inputs X (t, d),
    differentiable in x. They are the hot path of acquisition optimization: the scaled inputs
    are precomputed so that r^2 = |a|^2 + |b|^2 - 2 a.b on the continuous dims is one matmul;
    categorical dims add their Hamming distance."""

    def __init__(
        self, X: torch.Tensor, isl: torch.Tensor, is_categorical: torch.Tensor  # (t, d), (d,)
    ) -> None:
        self.X, self.isl, self.is_categorical = X, isl, is_categorical
        self.cont = torch.nonzero(~is_categorical).squeeze(-1)
        self.cat = torch.nonzero(is_categorical).squeeze(-1)
        self.isl_cont, self.isl_cat = isl[self.cont], isl[self.cat]
        self.sqrt_isl = self.isl_cont.sqrt()
        self.X_cont = X[:, self.cont]  # (t, d_cont)
        self.Xs = self.X_cont * self.sqrt_isl  # (t, d_cont)
        self.Xs_sq = (self.Xs * self.Xs).sum(-1)  # (t,)

    def to(self, x: torch.Tensor) -> torch.Tensor:  # (..., d) -> (..., t)
        xs = x[..., self.cont] * self.sqrt_isl
        r2 = ((xs * xs).sum(-1, keepdim=True) + self.Xs_sq - 2.0 * xs @ self.Xs.T).clamp_min(0.0)
        if len(self.cat):
            mismatch = (x[..., None, self.cat] - self.X[:, self.cat]).abs() > 1e-9
            r2 = r2 + (mismatch.to(x.dtype) * self.isl_cat).sum(-1)
        return matern52_from_squared_distance(r2)

    def gram(self) -> torch.Tensor:  # (t, t)
        return matern52_from_squared_distance(
            squared_distance(self.X, self.X, self.isl, self.is_categorical)
        )
