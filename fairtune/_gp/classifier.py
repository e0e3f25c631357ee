"""GP classification for binary (satisfied / violated) feedback: probit likelihood, EP.

Notation:
    labels t_i in {0, 1} (1 = positive, e.g. "constraint satisfied"); y_i = 2 t_i - 1 in {-1, 1}.
    Latent f = m + g, g ~ GP(0, k), with a constant prior mean m; p(t_i = 1 | f_i) = Phi(f_i).

The posterior of g is approximated by expectation propagation (Rasmussen & Williams 2006,
algorithms 3.5 and 3.6): each likelihood term is replaced by a Gaussian site with natural
parameters (nu_i, tau_i), chosen so that the site and the exact term give the same moments of
g_i against the rest of the approximation (the cavity, mean mu_-i and variance s2_-i). For the
probit term the tilted moments are closed form, with z_i = y_i (m + mu_-i) / sqrt(1 + s2_-i):
    Z_i = Phi(z_i),   r_i = phi(z_i) / Phi(z_i),
    mean = mu_-i + y_i s2_-i r_i / sqrt(1 + s2_-i),
    var  = s2_-i - s2_-i^2 r_i (z_i + r_i) / (1 + s2_-i).
With S = diag(tau), B = I + S^1/2 K S^1/2 = L L^T and a = nu - S^1/2 B^-1 S^1/2 K nu:
    predictive latent at x: mean = m + k(x, X) a,  var = k(x, x) - ||L^-1 S^1/2 k(X, x)||^2,
    P(t = 1 | x) = Phi(mean / sqrt(1 + var)).
EP rather than the Laplace approximation: a Laplace posterior is centred on the mode, and a
probit term's pull on the mode vanishes once a point is confidently classified, so repeated
"violated" labels at a point barely lower its predicted probability; EP matches the moments of
the tilted distributions, so each further violation moves the posterior further.

The prior mean is m = Phi^-1((n_1 + 1) / (n + 2)), the smoothed positive rate; far from the data
the prediction reverts to Phi(m / sqrt(1 + s)) for outputscale s, on the base rate's side of
1/2. Kernel parameters (an isotropic lengthscale and the outputscale) are chosen on a small grid
by the EP marginal likelihood (R&W eq. 3.65). The outputscale grid reaches 1024 because a
deterministic constraint is best explained by a latent far from zero (a nearly noise-free link);
a cap near 1 would limit how sure the classifier gets that a region is infeasible, and cEI would
keep sampling it (docs/benchmarks/fairbo.md).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg
import scipy.special
import torch

from fairtune._gp.gp import KernelParams
from fairtune._gp.kernels import matern52
from fairtune._threads import with_thread_limit

_MAX_SWEEPS = 100
_DAMPING = 0.5
_TOLERANCE = 1e-4
_MIN_SITE_PRECISION = 1e-10
_LENGTHSCALES = (0.1, 0.2, 0.4, 0.8, 1.6)
_OUTPUTSCALES = (1.0, 4.0, 16.0, 64.0, 256.0, 1024.0)


def _tilted_moments(
    y: np.ndarray, m: float, mu_cav: np.ndarray, var_cav: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log Z, mean and variance of the tilted distributions Phi(y (m + g)) N(g; mu, var)."""
    denom = np.sqrt(1.0 + var_cav)
    z = y * (m + mu_cav) / denom
    log_z = scipy.special.log_ndtr(z)
    ratio = np.exp(-0.5 * z * z - 0.5 * math.log(2 * math.pi) - log_z)
    mean = mu_cav + y * var_cav * ratio / denom
    # In exact arithmetic 0 < var < var_cav; keep it so when ratio * (z + ratio) rounds to 1.
    var = np.maximum(var_cav - var_cav**2 * ratio * (z + ratio) / (1.0 + var_cav),
                     1e-12 * var_cav)
    return log_z, mean, var


class GPClassifier:
    """A probit GP classifier (expectation propagation) with fixed kernel parameters."""

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
        self.params = params
        self.is_categorical = torch.as_tensor(np.asarray(is_categorical, dtype=bool))
        y = 2.0 * labels.detach().numpy().astype(float) - 1.0
        n = len(y)
        with torch.no_grad():
            K = (self._kernel(X_train, X_train) + 1e-8 * torch.eye(n, dtype=torch.float64)).numpy()
        nu, tau = np.zeros(n), np.zeros(n)
        Sigma, mu, L = K.copy(), np.zeros(n), np.zeros((0, 0))
        for sweep in range(_MAX_SWEEPS if n else 0):
            # Parallel EP: every site is refitted against its cavity under the current
            # approximation, then all sites move (damped) at once and the posterior is refreshed.
            diag = np.diag(Sigma)
            tau_cav = np.maximum(1.0 / diag - tau, _MIN_SITE_PRECISION)
            nu_cav = mu / diag - nu
            _, mean, var = _tilted_moments(y, prior_mean, nu_cav / tau_cav, 1.0 / tau_cav)
            new_tau = np.maximum(1.0 / var - tau_cav, _MIN_SITE_PRECISION)
            new_nu = mean / var - nu_cav
            step = 1.0 if sweep == 0 else _DAMPING
            change = np.max(np.abs(new_tau - tau)) / (1.0 + np.max(tau))
            tau = tau + step * (new_tau - tau)
            nu = nu + step * (new_nu - nu)
            Sigma, mu, L = self._refresh(K, nu, tau)
            if change < _TOLERANCE:
                break
        sqrt_tau = np.sqrt(tau)
        # a = nu - S^1/2 B^-1 S^1/2 K nu
        a = nu - sqrt_tau * scipy.linalg.cho_solve((L, True), sqrt_tau * (K @ nu)) if n else nu
        self._site_nu, self._site_tau = nu, tau
        self._L = torch.from_numpy(L)
        self._a = torch.from_numpy(a)
        self._sqrt_tau = torch.from_numpy(sqrt_tau)
        self.log_evidence = self._log_evidence(K, Sigma, mu, nu, tau, L, y, prior_mean)

    @staticmethod
    def _refresh(
        K: np.ndarray, nu: np.ndarray, tau: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sigma = K - V^T V (V = L^-1 S^1/2 K), mu = Sigma nu, and L = chol(B)."""
        n = len(nu)
        sqrt_tau = np.sqrt(tau)
        B = np.eye(n) + sqrt_tau[:, None] * K * sqrt_tau[None, :]
        L = np.linalg.cholesky(B)
        V = scipy.linalg.solve_triangular(L, sqrt_tau[:, None] * K, lower=True)
        Sigma = K - V.T @ V
        return Sigma, Sigma @ nu, L

    @staticmethod
    def _log_evidence(
        K: np.ndarray, Sigma: np.ndarray, mu: np.ndarray, nu: np.ndarray, tau: np.ndarray,
        L: np.ndarray, y: np.ndarray, prior_mean: float,
    ) -> float:
        """The EP approximation of log p(t | X) (R&W eq. 3.65, algorithm 3.5)."""
        diag = np.diag(Sigma)
        tau_cav = np.maximum(1.0 / diag - tau, _MIN_SITE_PRECISION)
        nu_cav = mu / diag - nu
        var_cav = 1.0 / tau_cav
        mu_cav = nu_cav * var_cav
        log_z, _, _ = _tilted_moments(y, prior_mean, mu_cav, var_cav)
        return float(
            0.5 * np.sum(np.log1p(tau / tau_cav))
            - np.sum(np.log(np.diag(L)))
            + 0.5 * nu @ (Sigma @ nu)
            - 0.5 * np.sum(nu**2 / (tau_cav + tau))
            + 0.5 * np.sum(mu_cav * tau_cav / (tau_cav + tau) * (tau * mu_cav - 2 * nu))
            + np.sum(log_z)
        )

    def _kernel(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        p = self.params
        return matern52(X1, X2, p.inverse_squared_lengthscales, p.outputscale, self.is_categorical)

    def latent_posterior(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and variance of the latent at ``x`` (..., d), each of shape (...,)."""
        batch_shape = x.shape[:-1]
        flat = x.reshape(-1, x.shape[-1])
        k = self._kernel(flat, self.X_train)  # (m, n)
        mean = self.prior_mean + k @ self._a
        v = torch.linalg.solve_triangular(self._L, (self._sqrt_tau[:, None] * k.T), upper=False)
        var = (self.params.outputscale - (v * v).sum(0)).clamp_min(1e-12)
        return mean.reshape(batch_shape), var.reshape(batch_shape)

    def log_prob_positive(self, x: torch.Tensor) -> torch.Tensor:
        """``log P(label = 1 | x)``, shape (...,), differentiable in ``x``."""
        mean, var = self.latent_posterior(x)
        return torch.special.log_ndtr(mean / (1.0 + var).sqrt())


@with_thread_limit(lambda X, *args, **kwargs: len(X))
def fit_gp_classifier(
    X: torch.Tensor,  # (n, d)
    labels: torch.Tensor,  # (n,)
    is_categorical: np.ndarray,
    *,
    warm_start: KernelParams | None = None,
) -> GPClassifier:
    """Fit a probit GP classifier; works with single-class label vectors too.

    The kernel parameters maximize the EP evidence over the grid ``_LENGTHSCALES`` x
    ``_OUTPUTSCALES``. With ``warm_start`` (the parameters of the previous fit, on that grid),
    only its neighbours on the grid, itself included, are tried: one step per refit, 4 to 9
    fits instead of 30.
    """
    n, d = X.shape
    rate = (float(labels.sum()) + 1.0) / (n + 2.0)
    prior_mean = float(torch.special.ndtri(torch.tensor(rate, dtype=torch.float64)))
    scale = math.sqrt(max(d, 1))  # distances in the unit cube grow like sqrt(d)
    candidates = [(i, j) for i in range(len(_LENGTHSCALES)) for j in range(len(_OUTPUTSCALES))]
    start = _grid_index(warm_start, d, scale)
    if start is not None:
        candidates = [(i, j) for i, j in candidates
                      if abs(i - start[0]) <= 1 and abs(j - start[1]) <= 1]
    best: GPClassifier | None = None
    for i, j in candidates:
        params = KernelParams(
            torch.full((d,), 1.0 / (_LENGTHSCALES[i] * scale) ** 2, dtype=torch.float64),
            torch.tensor(_OUTPUTSCALES[j], dtype=torch.float64),
            torch.tensor(0.0, dtype=torch.float64),
        )
        try:
            clf = GPClassifier(X, labels, params, is_categorical, prior_mean)
        except np.linalg.LinAlgError:
            continue
        if not math.isfinite(clf.log_evidence):
            continue
        if best is None or clf.log_evidence > best.log_evidence:
            best = clf
    if best is None:  # pragma: no cover - every grid point failed numerically
        best = GPClassifier(X, labels, KernelParams.default(d), is_categorical, prior_mean)
    return best


def _grid_index(params: KernelParams | None, d: int, scale: float) -> tuple[int, int] | None:
    """(lengthscale, outputscale) grid indices of ``params``, or None if not on the grid."""
    if params is None or params.inverse_squared_lengthscales.shape != (d,):
        return None
    lengthscales = (params.inverse_squared_lengthscales.numpy() ** -0.5) / scale
    i = np.flatnonzero(np.isclose(_LENGTHSCALES, lengthscales[0], rtol=1e-9))
    j = np.flatnonzero(np.isclose(_OUTPUTSCALES, float(params.outputscale), rtol=1e-9))
    if len(i) != 1 or len(j) != 1 or not np.allclose(lengthscales, lengthscales[0], rtol=1e-9):
        return None
    return int(i[0]), int(j[0])
