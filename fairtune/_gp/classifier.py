"""GP classification for binary (satisfied / violated) feedback, probit likelihood, Laplace.

Notation:
    labels t_i in {0, 1} (1 = positive, e.g. "constraint satisfied"); y_i = 2 t_i - 1 in {-1, 1}.
    Latent f ~ GP(0, k); p(t_i = 1 | f_i) = Phi(f_i).
    Laplace approximation (Rasmussen & Williams 2006, algorithm 3.1): Newton iterations for the
    mode f_hat of p(f | t); W = -d^2 log p(t | f) / df^2 (diagonal);
    B = I + W^1/2 K W^1/2 = L L^T.
    Predictive latent at x: mean = k(x, X) grad log p(t | f_hat),
        var = k(x, x) - ||L^-1 W^1/2 k(X, x)||^2,
    P(t = 1 | x) = Phi(mean / sqrt(1 + var)).

Kernel parameters: the lengthscales and outputscale come from a GP regression fitted to the
+-1 labels (a cheap, robust proxy for type-II maximum likelihood under the Laplace evidence),
with the outputscale raised so that the probit latent can express confident probabilities.
"""

from __future__ import annotations

import numpy as np
import torch

from fairtune._gp.gp import KernelParams, fit_gp
from fairtune._gp.kernels import matern52

_NEWTON_STEPS = 30
_LATENT_SCALE = 4.0


def _log_phi(z: torch.Tensor) -> torch.Tensor:
    return -0.5 * z * z - 0.5 * np.log(2 * np.pi)


class GPClassifier:
    """A probit GP classifier (Laplace approximation) with fixed kernel parameters."""

    def __init__(
        self,
        X_train: torch.Tensor,  # (n, d)
        labels: torch.Tensor,  # (n,) in {0, 1}
        params: KernelParams,
        is_categorical: np.ndarray | torch.Tensor,
    ) -> None:
        self.X_train = X_train
        self.labels = labels
        self.params = params
        self.is_categorical = torch.as_tensor(np.asarray(is_categorical, dtype=bool))
        y = 2.0 * labels.to(torch.float64) - 1.0
        n = len(y)
        with torch.no_grad():
            K = self._kernel(X_train, X_train) + 1e-8 * torch.eye(n, dtype=torch.float64)
            f = torch.zeros(n, dtype=torch.float64)
            for _ in range(_NEWTON_STEPS):
                grad, W = self._derivatives(f, y)
                sw = W.sqrt()
                B = torch.eye(n, dtype=torch.float64) + sw[:, None] * K * sw[None, :]
                L = torch.linalg.cholesky(B)
                b = W * f + grad
                c = torch.cholesky_solve((sw * (K @ b)).unsqueeze(-1), L).squeeze(-1)
                a = b - sw * c
                f_new = K @ a
                if float((f_new - f).abs().max()) < 1e-8:
                    f = f_new
                    break
                f = f_new
            grad, W = self._derivatives(f, y)
            sw = W.sqrt()
            B = torch.eye(n, dtype=torch.float64) + sw[:, None] * K * sw[None, :]
            self._L = torch.linalg.cholesky(B)
            self._grad = grad
            self._sqrt_W = sw

    def _kernel(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        p = self.params
        return matern52(X1, X2, p.inverse_squared_lengthscales, p.outputscale, self.is_categorical)

    @staticmethod
    def _derivatives(f: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = y * f
        ratio = torch.exp(_log_phi(f) - torch.special.log_ndtr(z))  # N(f) / Phi(y f)
        grad = y * ratio
        W = ratio * ratio + z * ratio
        return grad, W.clamp_min(1e-12)

    def latent_posterior(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and variance of the latent at ``x`` (..., d), each of shape (...,)."""
        batch_shape = x.shape[:-1]
        flat = x.reshape(-1, x.shape[-1])
        k = self._kernel(flat, self.X_train)  # (m, n)
        mean = k @ self._grad
        v = torch.linalg.solve_triangular(self._L, (self._sqrt_W[:, None] * k.T), upper=False)
        var = (self.params.outputscale - (v * v).sum(0)).clamp_min(1e-12)
        return mean.reshape(batch_shape), var.reshape(batch_shape)

    def log_prob_positive(self, x: torch.Tensor) -> torch.Tensor:
        """``log P(label = 1 | x)``, shape (...,), differentiable in ``x``."""
        mean, var = self.latent_posterior(x)
        return torch.special.log_ndtr(mean / (1.0 + var).sqrt())


def fit_gp_classifier(
    X: torch.Tensor,  # (n, d)
    labels: torch.Tensor,  # (n,)
    is_categorical: np.ndarray,
    *,
    warm_start: KernelParams | None = None,
) -> GPClassifier:
    """Fit a probit GP classifier; works with single-class label vectors too."""
    y = 2.0 * labels.to(torch.float64) - 1.0
    regression = fit_gp(X, y - y.mean(), is_categorical, warm_start=warm_start)
    p = regression.params
    params = KernelParams(
        p.inverse_squared_lengthscales,
        torch.tensor(_LATENT_SCALE, dtype=torch.float64),
        p.noise_var,
    )
    classifier = GPClassifier(X, labels, params, is_categorical)
    # Keep the regression parameters for the next warm start.
    classifier.params_for_warm_start = p  # type: ignore[attr-defined]
    return classifier
