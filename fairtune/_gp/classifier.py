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

The latent has a constant prior mean m = Phi^-1((n_1 + 1) / (n + 2)) (the smoothed positive
rate), so that far from the data the predicted probability reverts to the base rate instead of
1/2. Kernel parameters (an isotropic lengthscale and the outputscale) are chosen on a small grid
by the Laplace approximation of the marginal likelihood,
    log q(t | X) = -a^T (f_hat - m) / 2 + sum_i log Phi(y_i f_hat_i) - sum_i log L_ii.
"""

from __future__ import annotations

import numpy as np
import torch

from fairtune._gp.gp import KernelParams
from fairtune._gp.kernels import matern52

_NEWTON_STEPS = 30
_LENGTHSCALES = (0.1, 0.2, 0.4, 0.8, 1.6)
_OUTPUTSCALES = (1.0, 4.0, 16.0, 64.0)


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
        prior_mean: float = 0.0,
    ) -> None:
        self.X_train = X_train
        self.prior_mean = prior_mean
        self.labels = labels
        self.params = params
        self.is_categorical = torch.as_tensor(np.asarray(is_categorical, dtype=bool))
        y = 2.0 * labels.to(torch.float64) - 1.0
        n = len(y)
        with torch.no_grad():
            K = self._kernel(X_train, X_train) + 1e-8 * torch.eye(n, dtype=torch.float64)
            m = prior_mean
            f = torch.full((n,), m, dtype=torch.float64)
            for _ in range(_NEWTON_STEPS):
                grad, W = self._derivatives(f, y)
                sw = W.sqrt()
                B = torch.eye(n, dtype=torch.float64) + sw[:, None] * K * sw[None, :]
                L = torch.linalg.cholesky(B)
                b = W * (f - m) + grad
                c = torch.cholesky_solve((sw * (K @ b)).unsqueeze(-1), L).squeeze(-1)
                a = b - sw * c
                f_new = m + K @ a
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
            alpha = torch.linalg.solve(K, f - m) if n else f
            self.log_evidence = float(
                -0.5 * ((f - m) * alpha).sum()
                + torch.special.log_ndtr(y * f).sum()
                - self._L.diagonal().log().sum()
            )

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
        mean = self.prior_mean + k @ self._grad
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
    """Fit a probit GP classifier; works with single-class label vectors too.

    ``warm_start`` is accepted for interface symmetry with :func:`fit_gp`; the grid search
    over kernel parameters is cheap enough to run every time.
    """
    n, d = X.shape
    rate = (float(labels.sum()) + 1.0) / (n + 2.0)
    prior_mean = float(torch.special.ndtri(torch.tensor(rate, dtype=torch.float64)))
    best: GPClassifier | None = None
    for lengthscale in _LENGTHSCALES:
        # Scale with sqrt(d): distances in the unit cube grow like sqrt(d).
        isl = torch.full((d,), 1.0 / (lengthscale * np.sqrt(max(d, 1))) ** 2, dtype=torch.float64)
        for outputscale in _OUTPUTSCALES:
            params = KernelParams(
                isl,
                torch.tensor(outputscale, dtype=torch.float64),
                torch.tensor(0.0, dtype=torch.float64),
            )
            try:
                clf = GPClassifier(X, labels, params, is_categorical, prior_mean)
            except torch.linalg.LinAlgError:
                continue
            if best is None or clf.log_evidence > best.log_evidence:
                best = clf
    if best is None:  # pragma: no cover - every grid point failed numerically
        best = GPClassifier(X, labels, KernelParams.default(d), is_categorical, prior_mean)
    best.params_for_warm_start = best.params  # type: ignore[attr-defined]
    return best
