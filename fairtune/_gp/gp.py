"""Exact Gaussian process regression with a Matern-5/2 ARD kernel.

Notation:
    X_train (n, d): encoded inputs; y_train (n,): standardized outputs (see :func:`standardize`).
    theta: kernel parameters (inverse squared lengthscales (d,), outputscale s, noise variance
        sigma2), optimized as their logarithms ("raw" parameters).
    K = k(X_train, X_train) + (sigma2 + jitter) I = L L^T (Cholesky), alpha = K^-1 y_train.
    Posterior of the latent f at x: mean = k(x, X) alpha, var = s - ||L^-1 k(X, x)||^2.

Fitting maximizes log p(y | X, theta) + log prior(theta) with L-BFGS-B over the raw parameters,
warm-started from the previous fit. Priors (weak, on standardized outputs and unit-cube inputs):
    inverse squared lengthscale r_j = 1 / l_j^2: log density -0.1 (r_j + 1 / r_j)
        = -0.2 cosh(log r_j), nearly flat for lengthscales between about 0.3 and 3 and rising
        exponentially outside (the prior of Optuna's GPSampler)
    outputscale s   ~ Gamma(2, 1)
    noise sigma2    ~ Gamma(1.1, rate 30)                        (mean ~0.04, mode ~0.003)
(:func:`_log_prior_and_grad`). The optimization runs over the logarithms, but the noise density
is that of sigma2 itself (no change-of-variables term, as in Optuna and BoTorch): with the term,
the maximum a posteriori noise of a noise-free function sits near 1.1 / 30 ~ 0.04 instead of
near zero, which blurs the probability of feasibility at a constraint's boundary, where
constrained optima lie. The noise variance is floored at ``MIN_NOISE_VAR`` (and fixed there for
deterministic objectives); a jitter of 1e-8 on the diagonal, escalated if a Cholesky
factorization fails, handles duplicate inputs.

Why not a log-normal prior on the lengthscales, centred on long ones (the dimension scaling of
Hvarfner et al. 2024), with a long tail towards short ones: on a 20-d quadratic a warm-started fit
under it keeps one lengthscale near 0.01 for many trials, and the acquisition chases the corners
of the cube. The bounded prior does much better on Levy's function in 6 and 10 dimensions and on
constrained quadratics in 8 and 16 (docs/benchmarks/fairbo.md, "Many parameters").
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize
import torch

from fairtune._gp.kernels import _SQRT5, CrossKernel, matern52, squared_distance_per_dimension
from fairtune._threads import with_thread_limit

MIN_NOISE_VAR = 1e-6
_JITTER = 1e-8
_MIN_VAR = 1e-12
_ISL_PRIOR_WEIGHT = 0.1
_MAX_ITER = 100
_MAX_ITER_WARM = 10
# A warm-started fit stops once an iteration lowers the per-point loss by less than this
# fraction (L-BFGS-B's ``ftol``; scipy's default, 2.2e-9, kept the refits running to the cap).
_WARM_FTOL = 1e-6
# Gamma(shape 1.1, rate 30) on the noise variance (its density in sigma2, see the docstring).
_NOISE_PRIOR_SHAPE = 1.1
_NOISE_PRIOR_RATE = 30.0


def standardize(y: np.ndarray) -> tuple[np.ndarray, float, float]:
    """``(y - mean) / std`` with non-finite values clipped to the finite range.

    Returns:
        The standardized values, the mean and the std (floored so that constant ``y`` works).
    """
    y = np.asarray(y, dtype=float)
    finite = np.isfinite(y)
    if not finite.all():
        if finite.any():
            y = np.clip(np.nan_to_num(y, nan=np.min(y[finite])), y[finite].min(), y[finite].max())
        else:
            y = np.zeros_like(y)
    scale = float(np.abs(y).max()) if y.size else 0.0
    if scale > 1e150 or 0.0 < scale < 1e-150:
        # np.std squares the values: beyond these magnitudes that overflows to inf or underflows
        # to 0, and the model would see a constant. Standardize the rescaled values instead (the
        # std's floor then scales with the values). Other magnitudes keep the direct formula.
        z, mean, std = standardize(y / scale)
        return z, mean * scale, std * scale
    mean = float(np.mean(y))
    std = float(max(np.std(y), 1e-10))
    return (y - mean) / std, mean, std


def impute_violations(raw: np.ndarray) -> np.ndarray:
    """A constraint's values (n,) with each NaN (a trial that did not report it) replaced by a
    clear violation: above every observed value and above 0, by the observed values' spread
    (at least 1e-3), so that the model learns "infeasible" there without an outlier."""
    raw = np.asarray(raw, dtype=float)
    missing = np.isnan(raw)
    if not missing.any():
        return raw
    observed = raw[~missing]
    scale = float(max(np.ptp(observed), np.abs(observed).max())) if len(observed) else 1.0
    worst = max(float(observed.max()) if len(observed) else 0.0, 0.0)
    return np.where(missing, worst + max(scale, 1e-3), raw)


@dataclass(frozen=True)
class KernelParams:
    """Kernel hyperparameters of a GP (tensors, float64)."""

    inverse_squared_lengthscales: torch.Tensor  # (d,)
    outputscale: torch.Tensor  # ()
    noise_var: torch.Tensor  # ()

    @classmethod
    def default(cls, dim: int) -> KernelParams:
        # Fits from the defaults start at a lengthscale of 0.38 sqrt(d), close to the
        # typical distance between random points of the unit cube, sqrt(d / 6).
        lengthscale = math.exp(math.sqrt(2.0) + 0.5 * math.log(max(dim, 1)) - 1.0) / 4.0
        return cls(
            torch.full((dim,), 1.0 / lengthscale**2, dtype=torch.float64),
            torch.tensor(1.0, dtype=torch.float64),
            torch.tensor(1e-2, dtype=torch.float64),
        )

    def to_raw(self) -> np.ndarray:
        return np.concatenate(
            [
                self.inverse_squared_lengthscales.detach().log().numpy(),
                [math.log(float(self.outputscale)), math.log(float(self.noise_var))],
            ]
        )

    @classmethod
    def from_raw(cls, raw: torch.Tensor) -> KernelParams:
        return cls(raw[:-2].exp(), raw[-2].exp(), raw[-1].exp())


def _log_prior_and_grad(raw: torch.Tensor, fixed_noise: bool) -> tuple[float, torch.Tensor]:
    """The weak log prior density of the module docstring over the raw (log) parameters (d + 2,),
    up to a constant, and its gradient (no noise terms when the noise is fixed)."""
    d = len(raw) - 2
    grad = torch.empty(d + 2, dtype=torch.float64)
    # -w (r + 1/r) with r = exp(raw): d / d raw = -w (r - 1/r); Gamma(2, 1) on s = exp(raw_s):
    # log s - s, d / d raw_s = 1 - s.
    isl = raw[:-2].exp()
    s = float(raw[-2].exp())
    value = float(-_ISL_PRIOR_WEIGHT * (isl + 1.0 / isl).sum()) + float(raw[-2]) - s
    grad[:-2] = -_ISL_PRIOR_WEIGHT * (isl - 1.0 / isl)
    grad[-2] = 1.0 - s
    if fixed_noise:
        grad[-1] = 0.0
    else:
        noise = float(raw[-1].exp())
        value += float((_NOISE_PRIOR_SHAPE - 1.0) * raw[-1]) - _NOISE_PRIOR_RATE * noise
        grad[-1] = _NOISE_PRIOR_SHAPE - 1.0 - _NOISE_PRIOR_RATE * noise
    return value, grad


class _LatentPosterior(torch.autograd.Function):
    """Posterior mean and variance of f at x (m, d), computed by
    :meth:`GPRegressor.posterior_numpy`, with its gradient map as the backward pass.

    The acquisition optimizer calls this hundreds of times on small batches, where the cost is
    the number of operations, not their size: one node instead of ~20 autograd nodes, and
    numpy's per-operation overhead instead of torch's.
    """

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, gp: GPRegressor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        mean, var, ctx.to_x = gp.posterior_numpy(x.detach().numpy())
        return torch.from_numpy(mean), torch.from_numpy(var)

    @staticmethod
    def backward(
        ctx: Any, grad_mean: torch.Tensor, grad_var: torch.Tensor
    ) -> tuple[torch.Tensor, None]:
        return torch.from_numpy(ctx.to_x(grad_mean.numpy(), grad_var.numpy())), None


class GPRegressor:
    """An exact GP conditioned on data, with fixed kernel parameters.

    The Cholesky factor L of K = k(X, X) + (sigma2 + jitter) I, its inverse L^-1 (for
    one-matmul variances) and alpha = K^-1 y are computed once here; :func:`fit_gp` builds one
    with fitted parameters, and any fixed ``params`` can be given directly.
    """

    def __init__(
        self,
        X_train: torch.Tensor,  # (n, d)
        y_train: torch.Tensor,  # (n,)
        params: KernelParams,
        is_categorical: np.ndarray | torch.Tensor,  # (d,)
        *,
        _cholesky: torch.Tensor | None = None,  # (n, n), given by condition_on
    ) -> None:
        if X_train.ndim != 2 or y_train.shape != X_train.shape[:1]:
            raise ValueError(
                "`X_train` must have shape (n, d) and `y_train` shape (n,), but got "
                f"X_train.shape={tuple(X_train.shape)}, y_train.shape={tuple(y_train.shape)}."
            )
        self.X_train = X_train.detach().to(torch.float64)
        self.y_train = y_train.detach().to(torch.float64)
        self.params = params
        self.is_categorical = torch.as_tensor(np.asarray(is_categorical, dtype=bool))
        if self.is_categorical.shape != (X_train.shape[1],):
            raise ValueError(
                f"`is_categorical` must have shape ({X_train.shape[1]},), but got "
                f"{tuple(self.is_categorical.shape)}."
            )
        self._k = CrossKernel(
            self.X_train, params.inverse_squared_lengthscales.detach(), self.is_categorical
        )
        n = len(self.X_train)
        with torch.no_grad():
            if _cholesky is None:
                K = self.kernel(self.X_train, self.X_train)
                K = K + (params.noise_var.detach() + _JITTER) * torch.eye(n, dtype=torch.float64)
                _cholesky = _robust_cholesky(K)
            self._L = _cholesky
            self._Linv = torch.linalg.solve_triangular(
                self._L, torch.eye(n, dtype=torch.float64), upper=False
            )
            self._Linv_T = self._Linv.T.contiguous()
            self._alpha = torch.cholesky_solve(self.y_train.unsqueeze(-1), self._L).squeeze(-1)

    def kernel(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        """k(X1, X2) with this GP's parameters, shape (..., n1, n2)."""
        p = self.params
        return matern52(X1, X2, p.inverse_squared_lengthscales.detach(), p.outputscale.detach(),
                        self.is_categorical)

    def kernel_to_train(self, x: torch.Tensor) -> torch.Tensor:
        """k(x, X_train) for x (..., d), shape (..., n); differentiable in x."""
        return self.params.outputscale.detach() * self._k.to(x)

    def posterior(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and variance of the latent f at ``x`` (..., d); both of shape (...,).

        The variance excludes observation noise and is clamped at a tiny positive floor.
        Differentiable w.r.t. ``x``.
        """
        batch_shape = x.shape[:-1]
        flat = x.reshape(-1, x.shape[-1]).to(torch.float64)
        mean, var = _LatentPosterior.apply(flat, self)  # type: ignore[no-untyped-call]
        return mean.reshape(batch_shape), var.clamp_min(_MIN_VAR).reshape(batch_shape)

    def posterior_numpy(
        self, x: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, Callable[[np.ndarray, np.ndarray], np.ndarray]]:
        """Mean and variance (not floored) of the latent f at ``x`` (m, d), in numpy, and the
        map from the gradients of a function w.r.t. the mean and the variance, (m,) each, to
        its gradient w.r.t. ``x``:
            d mean / d k = alpha,  d var / d k = -2 K^-1 k = -2 (k L^-T) L^-1,
            d k / d r^2 = s m'(r^2),  d r^2 / d x_j = 2 (x_j - X_ij) / l_j^2 (continuous dims;
            the Hamming distance of categorical dims is piecewise constant: gradient 0).
        """
        kt, s = self._k, float(self.params.outputscale)
        if not hasattr(self, "_numpy"):
            self._numpy = tuple(t.numpy() for t in (
                kt.cont, kt.cat, kt.sqrt_isl, kt.isl_cont, kt.isl_cat, kt.Xs, kt.Xs_sq,
                kt.X_cont, self.X_train[:, kt.cat], self._alpha, self._Linv_T, self._Linv))
        cont, cat, sqrt_isl, isl_cont, isl_cat, Xs, Xs_sq, X_cont, X_cat, alpha, Linv_T, Linv = (
            self._numpy)
        xc = x[:, cont]
        xs = xc * sqrt_isl
        r2 = np.maximum((xs * xs).sum(-1, keepdims=True) + Xs_sq - 2.0 * (xs @ Xs.T), 0.0)
        if len(cat):
            r2 = r2 + (np.abs(x[:, None, cat] - X_cat) > 1e-9) @ isl_cat
        r = np.sqrt(r2)
        e = np.exp(-_SQRT5 * r)
        k = s * (1.0 + _SQRT5 * r + (5.0 / 3.0) * r2) * e  # (m, n)
        v = k @ Linv_T

        def grad(grad_mean: np.ndarray, grad_var: np.ndarray) -> np.ndarray:
            dk = grad_mean[:, None] * alpha - 2.0 * grad_var[:, None] * (v @ Linv)
            dr2 = dk * (s * (-5.0 / 6.0)) * (1.0 + _SQRT5 * r) * e
            dx = np.zeros_like(x)
            dx[:, cont] = 2.0 * isl_cont * (dr2.sum(-1, keepdims=True) * xc - dr2 @ X_cont)
            return dx

        return k @ alpha, s - (v * v).sum(-1), grad

    def joint_posterior(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean (..., q) and covariance (..., q, q) of the latent f at ``x`` (..., q, d)."""
        k = self.kernel_to_train(x)  # (..., q, n)
        mean = k @ self._alpha
        v = k @ self._Linv_T  # (..., q, n)
        cov = self.kernel(x, x) - v @ v.transpose(-1, -2)
        cov = 0.5 * (cov + cov.transpose(-1, -2))
        return mean, cov

    def condition_on(self, X_new: torch.Tensor, y_new: torch.Tensor) -> GPRegressor:
        """The same GP with (X_new, y_new) appended to the data, kernel parameters unchanged.

        Extends the Cholesky factor by a block instead of refactorizing:
        [[L, 0], [B^T, C]] with B = L^-1 K_12 and C C^T = K_22 - B^T B.
        """
        X_new = X_new.detach().to(torch.float64).reshape(-1, self.X_train.shape[1])
        y_new = y_new.detach().to(torch.float64).reshape(-1)
        m = len(X_new)
        X = torch.cat([self.X_train, X_new])
        y = torch.cat([self.y_train, y_new])
        if m == 0:
            return self
        with torch.no_grad():
            B = self._Linv @ self.kernel(self.X_train, X_new)  # (n, m)
            K22 = self.kernel(X_new, X_new) + (
                self.params.noise_var.detach() + _JITTER
            ) * torch.eye(m, dtype=torch.float64)
            C, info = torch.linalg.cholesky_ex(K22 - B.T @ B)
            if int(info) != 0:  # numerically singular: refactorize with escalating jitter
                return GPRegressor(X, y, self.params, self.is_categorical)
            n = len(self.X_train)
            L = torch.zeros(n + m, n + m, dtype=torch.float64)
            L[:n, :n] = self._L
            L[n:, :n] = B.T
            L[n:, n:] = C
        return GPRegressor(X, y, self.params, self.is_categorical, _cholesky=L)

    def sample_joint(
        self, x: torch.Tensor, n_samples: int, generator: torch.Generator
    ) -> torch.Tensor:
        """Joint posterior samples of f at ``x`` (q, d), shape (n_samples, q)."""
        with torch.no_grad():
            mean, cov = self.joint_posterior(x)
            L = _robust_cholesky(cov + 1e-10 * torch.eye(len(mean), dtype=torch.float64))
            z = torch.randn(n_samples, len(mean), generator=generator, dtype=torch.float64)
            return mean + z @ L.T

    def marginal_log_likelihood(self) -> torch.Tensor:
        """log p(y_train | X_train, params), a scalar tensor."""
        n = len(self.y_train)
        return (
            -0.5 * (self.y_train * self._alpha).sum()
            - self._L.diagonal().log().sum()
            - 0.5 * n * math.log(2 * math.pi)
        )


def _robust_cholesky(K: torch.Tensor) -> torch.Tensor:
    L, info = torch.linalg.cholesky_ex(K)
    jitter = 1e-9
    while bool((info > 0).any()) and jitter < 1.0:
        eye = torch.eye(K.shape[-1], dtype=K.dtype)
        L, info = torch.linalg.cholesky_ex(K + jitter * eye)
        jitter *= 10.0
    return L


def _negative_log_posterior(
    raw: torch.Tensor,  # (d + 2,) log parameters
    sqd: torch.Tensor,  # (n, n, d) per-dimension squared distances of the training inputs
    y: torch.Tensor,  # (n,)
    fixed_noise: float | None,
) -> tuple[float, np.ndarray]:
    """Negative log posterior of the kernel parameters (per data point) and its gradient.

    The gradient is analytic, which is several times faster than autograd through the
    Cholesky factorization at the sizes BO works with:
        d(-mll)/dK = (K^-1 - alpha alpha^T) / 2,
        dK/d log(1/l_j^2) = s * m'(r^2) * sqd_j / l_j^2,  dK/d log s = s m(r^2),
        dK/d log sigma2 = sigma2 I,
    with m(r^2) = (1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r),
    m'(r^2) = -5/6 (1 + sqrt5 r) exp(-sqrt5 r).
    The inputs do not change during a fit, so the squared distances are computed once.
    """
    d = sqd.shape[-1]
    n = len(y)
    isl = raw[:-2].exp()
    s = raw[-2].exp()
    noise = torch.tensor(fixed_noise, dtype=torch.float64) if fixed_noise else raw[-1].exp()
    r2 = sqd @ isl
    r = torch.sqrt(r2.clamp_min(1e-30))
    e = torch.exp(-_SQRT5 * r)
    m = (1.0 + _SQRT5 * r + (5.0 / 3.0) * r2) * e
    K_f = s * m
    K = K_f + (noise + _JITTER) * torch.eye(n, dtype=torch.float64)
    L = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
    nll = 0.5 * float(y @ alpha) + float(L.diagonal().log().sum())
    G = 0.5 * (torch.cholesky_inverse(L) - torch.outer(alpha, alpha))  # d(nll)/dK
    dm = -(5.0 / 6.0) * (1.0 + _SQRT5 * r) * e
    grad = torch.empty(d + 2, dtype=torch.float64)
    grad[:-2] = torch.einsum("ab,abj->j", G * (s * dm), sqd) * isl
    grad[-2] = (G * K_f).sum()
    grad[-1] = 0.0 if fixed_noise else noise * G.diagonal().sum()
    prior, prior_grad = _log_prior_and_grad(raw, fixed_noise is not None)
    scale = 1.0 / max(n, 1)
    return (nll - prior) * scale, ((grad - prior_grad) * scale).numpy()


def _bounds(dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of the raw parameters: log lengthscale terms and log outputscale in [-12, 12],
    log noise variance in [log MIN_NOISE_VAR, log 10]."""
    lower = np.full(dim + 2, -12.0)
    upper = np.full(dim + 2, 12.0)
    lower[-1] = math.log(MIN_NOISE_VAR)
    upper[-1] = math.log(10.0)
    return lower, upper


def _lbfgsb(
    loss: Callable[[np.ndarray], tuple[float, np.ndarray]], starts: list[np.ndarray],
    lower: np.ndarray, upper: np.ndarray, *, max_iter: int, max_iter_warm: int = _MAX_ITER_WARM,
    keep_best: bool = False,
) -> np.ndarray | None:
    """L-BFGS-B (``loss`` returns its gradient too) from each start in turn, within the bounds
    (infinite ones open). Every start but the last is a warm start, the previous optimum for
    nearly the same data: a few steps suffice (``max_iter_warm``, or until an iteration lowers
    the loss by a relative ``_WARM_FTOL``), and the next fit continues from there. A start that
    fails (an exception, a non-finite result) is skipped. Returns the first success (with
    ``keep_best``, the one of lowest loss), or None."""
    bounds = [(lo if np.isfinite(lo) else None, hi if np.isfinite(hi) else None)
              for lo, hi in zip(lower, upper, strict=True)]
    best: scipy.optimize.OptimizeResult | None = None
    for i, start in enumerate(starts):
        warm = i < len(starts) - 1
        options = {"maxiter": max_iter_warm, "ftol": _WARM_FTOL} if warm else {"maxiter": max_iter}
        try:
            result = scipy.optimize.minimize(loss, np.clip(start, lower, upper), jac=True,
                                             method="L-BFGS-B", bounds=bounds, options=options)
            if not np.all(np.isfinite(result.x)) or not np.isfinite(result.fun):
                raise RuntimeError("non-finite marginal likelihood")
        except (RuntimeError, ValueError, torch.linalg.LinAlgError):
            continue
        if best is None or result.fun < best.fun:
            best = result
        if not keep_best:
            break
    return None if best is None else best.x


@with_thread_limit(lambda X, *args, **kwargs: len(X))
def fit_gp(
    X: torch.Tensor,  # (n, d)
    y: torch.Tensor,  # (n,)
    is_categorical: np.ndarray,  # (d,)
    *,
    warm_start: KernelParams | None = None,
    deterministic: bool = False,
    max_iter: int = _MAX_ITER,
) -> GPRegressor:
    """Fit kernel parameters by maximum a posteriori and return the conditioned GP.

    Minimizes -(log p(y | X, theta) + log prior(theta)) / n over the log-parameters with scipy's
    L-BFGS-B (analytic gradient, see :func:`_negative_log_posterior`). Starts from
    ``warm_start`` when its dimension matches (the previous fit: refits after one new trial
    need a few iterations: they stop at ``_MAX_ITER_WARM`` iterations or once an iteration
    lowers the per-point loss by a relative ``_WARM_FTOL``); a failed optimization (exception or
    non-finite result) retries from the defaults, then warns and keeps the default parameters.

    Args:
        X: Encoded inputs, shape (n, d), n >= 1.
        y: Standardized outputs, shape (n,) (see :func:`standardize`).
        is_categorical: Boolean mask of categorical dimensions, shape (d,).
        warm_start: Parameters to start from, e.g. the previous fit. Defaults to None.
        deterministic: Fix the noise variance at ``MIN_NOISE_VAR`` (noise-free objectives).
            Defaults to False.
        max_iter: L-BFGS-B iteration cap of a fit from the defaults. Defaults to 100.
    """
    if X.ndim != 2 or len(X) == 0 or y.shape != X.shape[:1]:
        raise ValueError(
            "`X` must have shape (n, d) with n >= 1 and `y` shape (n,), but got "
            f"X.shape={tuple(X.shape)}, y.shape={tuple(y.shape)}."
        )
    if not (bool(torch.isfinite(X).all()) and bool(torch.isfinite(y).all())):
        raise ValueError("`X` and `y` must be finite (standardize `y` with `standardize`).")
    X = X.detach().to(torch.float64)
    y = y.detach().to(torch.float64)
    dim = X.shape[-1]
    is_cat = torch.as_tensor(np.asarray(is_categorical, dtype=bool))
    fixed_noise = MIN_NOISE_VAR if deterministic else None
    sqd = squared_distance_per_dimension(X, X, is_cat)  # (n, n, d)

    def loss_and_grad(raw_np: np.ndarray) -> tuple[float, np.ndarray]:
        return _negative_log_posterior(torch.from_numpy(raw_np), sqd, y, fixed_noise)

    starts = [KernelParams.default(dim).to_raw()]
    if warm_start is not None and warm_start.inverse_squared_lengthscales.shape == (dim,):
        starts.insert(0, warm_start.to_raw())  # a warm start of another dimension is ignored
    raw = _lbfgsb(loss_and_grad, starts, *_bounds(dim), max_iter=max_iter)
    if raw is None:
        warnings.warn(
            "Fitting the GP's kernel parameters failed; using default parameters for this step.",
            RuntimeWarning,
            stacklevel=2,
        )
        return GPRegressor(X, y, KernelParams.default(dim), is_cat)
    if fixed_noise:
        raw[-1] = math.log(fixed_noise)
    return GPRegressor(X, y, KernelParams.from_raw(torch.tensor(raw, dtype=torch.float64)), is_cat)
