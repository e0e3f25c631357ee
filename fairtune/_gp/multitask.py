"""Multi-task GP with an ICM kernel (MT-KB) and its Nystrom approximation (MT-BKB).

Chowdhury & Gopalan 2021, "No-regret Algorithms for Multi-task Bayesian Optimization" (AISTATS),
sections 2-3.

Notation:
    X (t, d): encoded inputs; Y (t, n): outputs of the n tasks (objectives), each standardized on
        its own, observed together at every x_s.
    k(x, x'): the engine's Matern-5/2 ARD kernel with unit variance (:mod:`fairtune._gp.kernels`).
    B (n, n): p.s.d. task covariance; Gamma(x, x') = k(x, x') B (intrinsic coregionalization).
    eta: noise variance (the ridge of the paper's eqs. 1-2), shared by the tasks.
    B = U diag(xi) U^T and K_t = k(X, X) = Q diag(s) Q^T (eigendecompositions).

Posterior (paper eqs. 1-2 with G_t = B (x) K_t; section 3.3). In the eigenbasis of B the n tasks
are independent GPs with kernels xi_i k and noise eta, and one eigendecomposition of K_t serves
all of them, since (xi_i K_t + eta I)^-1 = Q diag(1 / (xi_i s + eta)) Q^T:
    Z = Q^T Y U (t, n),   A_ji = Z_ji / (xi_i s_j + eta),
    mean in the eigenbasis   m_i(x) = xi_i sum_j (Q^T k_t(x))_j A_ji,   mu(x) = U m(x),
    variance in the eigenbasis v_i(x) = xi_i (1 - xi_i sum_j (Q^T k_t(x))_j^2 / (xi_i s_j + eta)),
    Gamma_t(x, x) = U diag(v(x)) U^T,   ||Gamma_t(x, x)|| = max_i v_i(x).

Fitting: log p(vec Y) = -1/2 vec(Y)^T C^-1 vec(Y) - 1/2 logdet C - nt/2 log 2 pi with
C = B (x) K_t + eta I, evaluated with the same two eigendecompositions:
    vec(Y)^T C^-1 vec(Y) = sum_ji Z_ji^2 / (xi_i s_j + eta),
    logdet C = sum_ji log(xi_i s_j + eta).
Its gradients w.r.t. K_t, B and eta are written by hand (differentiating through ``eigh`` is
unstable at repeated eigenvalues, e.g. B = I): with alpha = Q A U^T (t, n) = C^-1 Y,
    d/dK = 1/2 (alpha B alpha^T - Q diag(sum_i xi_i / (xi_i s + eta)) Q^T),
    d/dB = 1/2 (alpha^T K alpha - U diag(sum_j s_j / (xi s_j + eta)) U^T),
    d/deta = 1/2 (||alpha||^2 - sum_ji 1 / (xi_i s_j + eta)),
and autograd carries them to the lengthscales and the parameters of B.
B is learned with a signed parametrization, B = L L^T + diag(exp(v)) (L lower triangular with
free signs, so correlations may be negative), jointly with the lengthscales and eta, by
maximum a posteriori with the lengthscale prior of :mod:`fairtune._gp.gp`, Gamma(2, 1) on each
task variance B_ii (the outputs are standardized) and an LKJ(2) prior on the correlations,
log density log det R with R = D^-1/2 B D^-1/2, which keeps them away from +-1.

Nystrom (MT-BKB, paper section 3.2): a dictionary D of m_t training points, point i drawn with
probability p_i = min(q ||Gamma~_{t-1}(x_i, x_i)|| / eta, 1): the variance over the noise
variance is the ridge leverage score of x_i (BKB, Calandriello et al. 2019; the paper's formula
reads it with eta = 1, which with a fitted GP's small eta makes a much-observed point leave and
re-enter the dictionary in alternate steps, docs/benchmarks/mtkb.md).For ICM
kernels the embedding Phi~(x) = (G~^1/2)^+ G~(x) factorizes as phi(x) (x) B^1/2 with
phi(x) = K_DD^(-1/2) k_D(x) (the reweighting by 1 / sqrt(p) cancels), so in the eigenbasis of B,
with F = Phi^T Phi (m, m) over the t training points (Phi rows phi(x_s)) = R diag(f) R^T:
    m_i(x) = xi_i phi(x)^T (xi_i F + eta I)^-1 Phi^T Y u_i,
    v_i(x) = xi_i (1 - ||phi(x)||^2) + eta xi_i phi(x)^T (xi_i F + eta I)^-1 phi(x),
one m x m eigendecomposition per step: cost O(n^2 + (n + m_t) m_t t). With every point in the
dictionary, phi(X) = K^1/2 and F = K, which gives the exact posterior back.

Scalarizations (paper section 2) of y (..., n) with weights lambda (k, n):
    linear     s_lambda(y) = sum_i lambda_i y_i,
    Chebyshev  s_lambda(y) = min_i lambda_i (y_i - z_i), z a reference point below the values.
Weight prior (paper section 5, after Paria et al. 2020): u ~ U[0, 1]^n, lambda = u / ||u||_1
(linear) or lambda = a / ||a||_1 with a_i = ||u||_1 / u_i (Chebyshev).
Acquisition: u_t(x) = mean_k s_lambda_k(mu_t(x)) + beta_t w_t(x), with one of two confidence
widths w_t (or the "scalarized" bound below), each an upper bound on
|E_lambda s_lambda(f(x)) - E_lambda s_lambda(mu_t(x))| / beta_t under the corresponding
concentration inequality:
    "norm" (paper eq. 3)   w_t(x) = L ||Gamma_t(x, x)||^1/2, L = mean_k L_k the Lipschitz constant
        of the sampled scalarizations w.r.t. ||.||_2: L_k = max_i lambda_ki (Chebyshev),
        ||lambda_k||_2 (linear). (The paper sets L = 1, a bound for weights on the simplex.)
    "objectives"           w_t(x) = mean_k max_i lambda_ki sigma_i(x) (Chebyshev),
        mean_k (lambda_k^T Gamma_t(x, x) lambda_k)^1/2 (linear), sigma_i(x)^2 = Gamma_t(x, x)_ii,
        from the concentration of each objective (of each linear functional lambda^T f) under
        the scalar kernel on X x {1..n} (the paper's remark 2), since
        |min_i a_i - min_i b_i| <= max_i |a_i - b_i|.
Both use only the eigenbasis variances: sigma_i^2 = sum_j U_ij^2 v_j(x), lambda^T Gamma lambda =
sum_j (U^T lambda)_j^2 v_j(x). "objectives" is never wider than "norm" (Gamma_ii <= ||Gamma||),
and about sqrt(n) times narrower for n strongly correlated tasks, whose variances ||Gamma||
adds up.
    "scalarized" (the default) u_t(x) = mean_k min_i lambda_ki (mu_i(x) + beta_t sigma_i(x) - z_i)
        (Chebyshev): the scalarization of the objectives' upper confidence bounds (Paria et al.
        2020); linear: as "objectives". The Chebyshev scalarization is non-decreasing in every
        objective, so where every objective lies below its upper bound, s_lambda(f(x)) <=
        s_lambda(mu + beta sigma): a valid bound, never above the "objectives" one
        (min_i (a_i + b_i) <= min_i a_i + max_i b_i), which credits a point with uncertainty
        in objectives that cannot change its utility.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from fairtune._gp.gp import (
    _ISL_PRIOR_WEIGHT,
    _JITTER,
    _MAX_ITER,
    _MIN_VAR,
    _NOISE_PRIOR_RATE,
    _NOISE_PRIOR_SHAPE,
    MIN_NOISE_VAR,
    KernelParams,
    _lbfgsb,
    _robust_cholesky,
)
from fairtune._gp.kernels import (
    CrossKernel,
    matern52_from_squared_distance,
    squared_distance_per_dimension,
)
from fairtune._names import check_choice

Scalarization = Literal["linear", "chebyshev"]
SCALARIZATIONS: tuple[str, ...] = ("linear", "chebyshev")

_MAX_ITER_WARM = 15
_LKJ_ETA = 2.0


# -- task covariances --------------------------------------------------------------------------


def omega_task_covariance(omega: float, n: int) -> torch.Tensor:
    """B = omega I + (1 - omega) 11^T / n (Evgeniou et al. 2005), shape (n, n).

    omega = 1: unrelated tasks; omega = 0: identical tasks.
    """
    if not 0.0 <= omega <= 1.0:
        raise ValueError(f"`omega` must be in [0, 1], but got omega={omega!r}.")
    return omega * torch.eye(n, dtype=torch.float64) + (1.0 - omega) / n * torch.ones(
        n, n, dtype=torch.float64
    )


def covariance_to_correlation(B: torch.Tensor) -> torch.Tensor:
    """R = D^-1/2 B D^-1/2 with D = diag(B), shape (n, n)."""
    d = B.diagonal().clamp_min(1e-300).rsqrt()
    R = B * d[:, None] * d[None, :]
    return 0.5 * (R + R.T)


@dataclass(frozen=True)
class ICMParams:
    """Hyperparameters of an ICM multi-task GP (float64 tensors)."""

    inverse_squared_lengthscales: torch.Tensor  # (d,)
    task_covariance: torch.Tensor  # (n, n), B
    noise_var: torch.Tensor  # (), eta


def _n_tril(n: int) -> int:
    return n * (n + 1) // 2


def _b_from_raw(raw_b: torch.Tensor, n: int) -> torch.Tensor:
    """B = L L^T + diag(exp(v)); raw_b = [tril entries of L (n(n+1)/2), v (n)]."""
    rows, cols = torch.tril_indices(n, n)
    L = torch.zeros(n, n, dtype=torch.float64)
    L = L.index_put((rows, cols), raw_b[: _n_tril(n)])
    return L @ L.T + torch.diag(raw_b[_n_tril(n) :].exp())


def _b_to_raw(B: torch.Tensor) -> np.ndarray:
    """A raw vector whose :func:`_b_from_raw` is (close to) B: up to 10 % of the diagonal goes
    to v (less when B is nearly singular, so that B - diag(v) stays p.s.d.)."""
    n = B.shape[0]
    B = 0.5 * (B + B.T)
    smallest = float(torch.linalg.eigvalsh(B).min())
    v = torch.minimum(0.1 * B.diagonal(), torch.full((n,), 0.5 * smallest, dtype=torch.float64))
    v = v.clamp_min(1e-6)
    L = _robust_cholesky(B - torch.diag(v) + 1e-10 * torch.eye(n, dtype=torch.float64))
    rows, cols = torch.tril_indices(n, n)
    return np.concatenate([L[rows, cols].numpy(), v.log().numpy()])


def _eigh(M: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigendecomposition of a symmetric p.s.d. matrix, eigenvalues clamped at 0."""
    M = 0.5 * (M + M.T)
    try:
        w, V = torch.linalg.eigh(M)
    except torch.linalg.LinAlgError:  # rare convergence failure: perturb slightly and retry
        w, V = torch.linalg.eigh(M + 1e-10 * torch.eye(len(M), dtype=M.dtype))
    return w.clamp_min(0.0), V


# -- exact ICM posterior -------------------------------------------------------------------------


class ICMGP:
    """Exact ICM multi-task GP posterior through the eigendecompositions of B and K_t, on
    standardized outputs Y with every task observed at every point."""

    def __init__(
        self,
        X: torch.Tensor,  # (t, d)
        Y: torch.Tensor,  # (t, n)
        params: ICMParams,
        is_categorical: np.ndarray | torch.Tensor,  # (d,)
    ) -> None:
        if X.ndim != 2 or Y.ndim != 2 or Y.shape[0] != X.shape[0]:
            raise ValueError(
                "`X` must have shape (t, d) and `Y` shape (t, n), but got "
                f"X.shape={tuple(X.shape)}, Y.shape={tuple(Y.shape)}."
            )
        n = Y.shape[1]
        if params.task_covariance.shape != (n, n):
            raise ValueError(
                f"`task_covariance` must have shape ({n}, {n}), but got "
                f"{tuple(params.task_covariance.shape)}."
            )
        self.X = X.detach().to(torch.float64)
        self.Y = Y.detach().to(torch.float64)
        self.params = params
        self.is_categorical = torch.as_tensor(np.asarray(is_categorical, dtype=bool))
        self._kernel = CrossKernel(
            self.X, params.inverse_squared_lengthscales.detach(), self.is_categorical
        )
        with torch.no_grad():
            self.xi, self.U = _eigh(params.task_covariance.detach())  # (n,), (n, n)
            self._eta = float(params.noise_var) + _JITTER
            self._build()

    def _build(self) -> None:
        s, Q = _eigh(self._kernel.gram())  # (t,), (t, t)
        self._Q = Q
        denom = self.xi[None, :] * s[:, None] + self._eta  # (t, n)
        self._inv_denom = 1.0 / denom
        Z = Q.T @ self.Y @ self.U  # (t, n)
        self._A = Z * self._inv_denom  # (t, n)

    def _features(self, x: torch.Tensor) -> torch.Tensor:
        return self._kernel.to(x) @ self._Q  # (..., t)

    def posterior_eig(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean (..., n) and variance (..., n) of the tasks in the eigenbasis of B at x (..., d).

        Differentiable w.r.t. ``x``; the variances are clamped at a tiny floor.
        """
        kq = self._features(x.to(torch.float64))
        mean = self.xi * (kq @ self._A)
        var = self.xi * (1.0 - self.xi * ((kq * kq) @ self._inv_denom))
        return mean, var.clamp_min(_MIN_VAR)

    def posterior(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior mean mu_t(x) (..., n) and ||Gamma_t(x, x)|| (...) at x (..., d)."""
        mean, var = self.posterior_eig(x)
        return mean @ self.U.T, var.max(-1).values

    def covariance(self, x: torch.Tensor) -> torch.Tensor:
        """Gamma_t(x, x) = U diag(v(x)) U^T, shape (..., n, n)."""
        _, var = self.posterior_eig(x)
        return (self.U * var.unsqueeze(-2)) @ self.U.T

    def condition_on(self, X_new: torch.Tensor, Y_new: torch.Tensor) -> ICMGP:
        """The same model with (X_new (m, d), Y_new (m, n)) appended (parameters unchanged)."""
        if len(X_new) == 0:
            return self
        return self._on(torch.cat([self.X, X_new.to(torch.float64)]),
                        torch.cat([self.Y, Y_new.to(torch.float64)]))

    def _on(self, X: torch.Tensor, Y: torch.Tensor) -> ICMGP:
        return ICMGP(X, Y, self.params, self.is_categorical)


# -- Nystrom variant -----------------------------------------------------------------------------


class NystromICMGP(ICMGP):
    """MT-BKB's Nystrom approximation of :class:`ICMGP` on the training points whose indices
    (m,) are ``dictionary`` (D_t)."""

    def __init__(
        self,
        X: torch.Tensor,
        Y: torch.Tensor,
        params: ICMParams,
        is_categorical: np.ndarray | torch.Tensor,
        *,
        dictionary: np.ndarray | torch.Tensor,
    ) -> None:
        self.dictionary = torch.as_tensor(np.asarray(dictionary, dtype=np.int64))
        if len(self.dictionary) == 0:
            raise ValueError("`dictionary` must not be empty.")
        super().__init__(X, Y, params, is_categorical)

    def _build(self) -> None:
        XD = self.X[self.dictionary]
        self._dict_kernel = CrossKernel(
            XD, self.params.inverse_squared_lengthscales.detach(), self.is_categorical
        )
        w, V = _eigh(self._dict_kernel.gram())  # K_DD
        # (K_DD^1/2)^+ with a relative cut-off (the pseudo-inverse of the paper).
        keep = w > w.max() * 1e-10
        self._W = V[:, keep] / w[keep].sqrt()  # (m, r): phi(x) = k_D(x) @ W
        Phi = self._dict_kernel.to(self.X) @ self._W  # (t, r)
        f, R = _eigh(Phi.T @ Phi)
        self._R = R
        denom = self.xi[None, :] * f[:, None] + self._eta  # (r, n)
        self._inv_denom = 1.0 / denom
        self._A = (R.T @ Phi.T @ self.Y @ self.U) * self._inv_denom  # (r, n)

    def _phi(self, x: torch.Tensor) -> torch.Tensor:
        return self._dict_kernel.to(x) @ self._W  # (..., r)

    def posterior_eig(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        phi = self._phi(x.to(torch.float64))
        pr = phi @ self._R
        mean = self.xi * (pr @ self._A)
        residual = (1.0 - (phi * phi).sum(-1, keepdim=True)).clamp_min(0.0)
        var = self.xi * residual + self._eta * self.xi * ((pr * pr) @ self._inv_denom)
        return mean, var.clamp_min(_MIN_VAR)

    def _on(self, X: torch.Tensor, Y: torch.Tensor) -> NystromICMGP:
        return NystromICMGP(X, Y, self.params, self.is_categorical, dictionary=self.dictionary)


def sample_dictionary(
    model: ICMGP, q: float, rng: np.random.RandomState
) -> tuple[np.ndarray, np.ndarray]:
    """Resample the dictionary: point i joins with p_i = min(q ||Gamma~(x_i, x_i)|| / eta, 1)
    (its ridge leverage score times q; see the module docstring).

    ``model`` gives the variances (the previous step's approximation, or the exact model).

    Returns:
        The indices of the new dictionary (at least one point) and the probabilities p (t,).
    """
    with torch.no_grad():
        _, norm = model.posterior(model.X)
    p = np.minimum(q * norm.numpy() / model._eta, 1.0)
    chosen = np.flatnonzero(rng.random_sample(len(p)) < p)
    if len(chosen) == 0:
        chosen = np.array([int(np.argmax(p))])
    return chosen, p


# -- fitting -------------------------------------------------------------------------------------


class _ICMNegLogLik(torch.autograd.Function):
    """-log p(vec Y) of C = B (x) K + eta I, with the hand-written gradient of the docstring."""

    @staticmethod
    def forward(
        ctx: Any, K: torch.Tensor, B: torch.Tensor, eta: torch.Tensor, Y: torch.Tensor
    ) -> torch.Tensor:
        s, Q = _eigh(K)
        xi, U = _eigh(B)
        denom = xi[None, :] * s[:, None] + eta  # (t, n)
        Z = Q.T @ Y @ U
        A = Z / denom
        t, n = Y.shape
        value = 0.5 * (Z * A).sum() + 0.5 * denom.log().sum() + 0.5 * t * n * math.log(2 * math.pi)
        ctx.save_for_backward(K, B, s, Q, xi, U, denom, A)
        return value

    @staticmethod
    def backward(
        ctx: Any, grad: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None]:
        K, B, s, Q, xi, U, denom, A = ctx.saved_tensors
        alpha = Q @ A @ U.T  # (t, n) = C^-1 Y
        inv = 1.0 / denom
        dK = 0.5 * (alpha @ B @ alpha.T - (Q * (inv @ xi)) @ Q.T)
        dB = 0.5 * (alpha.T @ K @ alpha - (U * (s @ inv)) @ U.T)
        deta = 0.5 * ((alpha * alpha).sum() - inv.sum())
        # These are gradients of log p; the function is -log p.
        return -grad * dK, -grad * dB, -grad * deta, None


BMode = Literal["learned", "independent", "fixed"]


def fit_icm(
    X: torch.Tensor,  # (t, d)
    Y: torch.Tensor,  # (t, n)
    is_categorical: np.ndarray,  # (d,)
    *,
    task_covariance: BMode | torch.Tensor = "learned",
    warm_start: ICMParams | None = None,
    deterministic: bool = False,
    max_iter: int = _MAX_ITER,
    restart: bool = False,
) -> ICMParams:
    """Fit lengthscales, eta and (unless given) B by maximum a posteriori (module docstring).

    Args:
        X: Encoded inputs, shape (t, d), t >= 1.
        task_covariance: ``"learned"`` (B = L L^T + diag(exp(v)), signed correlations),
            ``"independent"`` (B diagonal, learned task variances: the IT-KB baseline), or a
            fixed p.s.d. matrix (n, n). Defaults to "learned".
        warm_start: Parameters to start from (the previous fit). Defaults to None.
        deterministic: Fix eta at ``MIN_NOISE_VAR``. Defaults to False.
        max_iter: L-BFGS-B iteration cap of a fit from the defaults. Defaults to 100.
        restart: With a ``warm_start``, also fit from the defaults and keep the fit of higher
            posterior density (a chain of warm starts can stay in a poor local optimum, e.g.
            one that interpolates the noise). Defaults to False.
    """
    if X.ndim != 2 or Y.ndim != 2 or len(X) == 0 or len(Y) != len(X):
        raise ValueError(
            "`X` must have shape (t, d) with t >= 1 and `Y` shape (t, n), but got "
            f"X.shape={tuple(X.shape)}, Y.shape={tuple(Y.shape)}."
        )
    if not (bool(torch.isfinite(X).all()) and bool(torch.isfinite(Y).all())):
        raise ValueError("`X` and `Y` must be finite (standardize each column of `Y`).")
    X = X.detach().to(torch.float64)
    Y = Y.detach().to(torch.float64)
    is_cat = torch.as_tensor(np.asarray(is_categorical, dtype=bool))
    problem = _ICMFit(X, Y, is_cat, task_covariance, MIN_NOISE_VAR if deterministic else None)
    default, warm_start_raw = problem.default(), problem.start(warm_start)
    starts = ([] if warm_start_raw is None else [warm_start_raw]) + [default]
    raw = _lbfgsb(problem.loss, starts, *problem.bounds(), max_iter=max_iter,
                  max_iter_warm=_MAX_ITER_WARM, keep_best=restart)
    if raw is None:
        warnings.warn(
            "Fitting the multi-task GP's parameters failed; using default parameters for this "
            "step.",
            RuntimeWarning,
            stacklevel=2,
        )
        raw = default
    with torch.no_grad():
        isl, B, eta = problem.unpack(torch.tensor(raw, dtype=torch.float64))
    return ICMParams(isl.detach(), B.detach().clone(), eta.detach().reshape(()))


class _ICMFit:
    """The MAP problem of :func:`fit_icm` over a raw parameter vector: log inverse squared
    lengthscales (d), the task covariance's raw parameters (by ``mode``: ``"learned"``,
    ``"independent"`` or ``"fixed"``, B given), log eta unless ``fixed_noise`` is given.
    """

    def __init__(
        self, X: torch.Tensor, Y: torch.Tensor, is_cat: torch.Tensor,
        task_covariance: BMode | torch.Tensor, fixed_noise: float | None,
    ) -> None:
        self.t, self.d = X.shape
        self.n = n = Y.shape[1]
        self.Y, self.fixed_noise = Y, fixed_noise
        self.mode: str = "fixed"
        self.B_fixed: torch.Tensor | None = None
        if isinstance(task_covariance, str):
            if task_covariance not in ("learned", "independent"):
                raise ValueError(
                    "`task_covariance` must be one of ['learned', 'independent'] or a matrix, "
                    f"but got task_covariance={task_covariance!r}."
                )
            self.mode = task_covariance
        else:
            self.B_fixed = torch.as_tensor(task_covariance, dtype=torch.float64)
            if self.B_fixed.shape != (n, n):
                raise ValueError(f"`task_covariance` must have shape ({n}, {n}), but got "
                                 f"{tuple(self.B_fixed.shape)}.")
        self.n_b = {"learned": _n_tril(n) + n, "independent": n, "fixed": 0}[self.mode]
        self.sqd = squared_distance_per_dimension(X, X, is_cat)  # (t, t, d)

    def unpack(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        d, n, n_b = self.d, self.n, self.n_b
        isl = raw[:d].exp()
        if self.mode == "learned":
            B = _b_from_raw(raw[d : d + n_b], n)
        elif self.mode == "independent":
            B = torch.diag(raw[d : d + n_b].exp())
        else:
            assert self.B_fixed is not None
            B = self.B_fixed
        eta = (torch.tensor(self.fixed_noise, dtype=torch.float64) if self.fixed_noise
               else raw[-1].exp())
        return isl, B, eta

    def loss(self, raw_np: np.ndarray) -> tuple[float, np.ndarray]:
        """The negative log posterior per observation and its gradient."""
        n, mode = self.n, self.mode
        raw = torch.tensor(raw_np, dtype=torch.float64, requires_grad=True)
        isl, B, eta = self.unpack(raw)
        K = matern52_from_squared_distance(self.sqd @ isl)
        nll = _ICMNegLogLik.apply(K, B, eta + _JITTER, self.Y)  # type: ignore[no-untyped-call]
        log_prior = -_ISL_PRIOR_WEIGHT * (isl + 1.0 / isl).sum()
        if mode != "fixed":
            b = B.diagonal()
            log_prior = log_prior + (b.log() - b).sum()  # Gamma(2, 1) on each task variance
        if mode == "learned" and n > 1:
            R = covariance_to_correlation(B)
            log_prior = log_prior + (_LKJ_ETA - 1.0) * torch.logdet(R + 1e-12 * torch.eye(n))
        if not self.fixed_noise:
            log_prior = (
                log_prior + (_NOISE_PRIOR_SHAPE - 1.0) * eta.log() - _NOISE_PRIOR_RATE * eta
            )
        value = (nll - log_prior) / (self.t * n)
        (grad,) = torch.autograd.grad(value, raw)
        return float(value.detach()), np.nan_to_num(grad.numpy())

    def _raw_b(self, B: torch.Tensor) -> np.ndarray:
        """The raw parameters (by ``mode``) of a task covariance B."""
        if self.mode == "learned":
            return _b_to_raw(B)
        if self.mode == "independent":
            return B.diagonal().clamp_min(1e-6).log().numpy()
        return np.zeros(0)

    def default(self) -> np.ndarray:
        """The start from the defaults: unit-ish lengthscales, B = I, eta = 0.01."""
        default_isl = KernelParams.default(self.d).inverse_squared_lengthscales.log().numpy()
        B = torch.eye(self.n, dtype=torch.float64)
        return np.concatenate([default_isl, self._raw_b(B), [math.log(1e-2)]])

    def start(self, warm_start: ICMParams | None) -> np.ndarray | None:
        """The start from a previous fit of the same shape, or None."""
        if (
            warm_start is None
            or warm_start.inverse_squared_lengthscales.shape != (self.d,)
            or warm_start.task_covariance.shape != (self.n, self.n)
        ):
            return None
        return np.concatenate(
            [warm_start.inverse_squared_lengthscales.log().numpy(),
             self._raw_b(warm_start.task_covariance), [math.log(float(warm_start.noise_var))]]
        )

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        d, n_b = self.d, self.n_b
        lower = np.concatenate([np.full(d, -12.0), np.full(n_b, -np.inf),
                                [math.log(MIN_NOISE_VAR)]])
        upper = np.concatenate([np.full(d, 12.0), np.full(n_b, np.inf), [math.log(10.0)]])
        # The log task variances (v of the learned B, the diagonal of an independent one).
        v = slice(d + (_n_tril(self.n) if self.mode == "learned" else 0), d + n_b)
        lower[v], upper[v] = -12.0, 5.0
        return lower, upper


# -- scalarizations and acquisition --------------------------------------------------------------


def sample_weights(
    n: int, k: int, scalarization: Scalarization, rng: np.random.RandomState
) -> np.ndarray:
    """k weight vectors on the simplex (k, n), drawn as in the paper's section 5 (Paria et al.).

    u ~ U[0, 1]^n; linear: lambda = u / ||u||_1; Chebyshev: a_i = ||u||_1 / u_i,
    lambda = a / ||a||_1.
    """
    check_choice("scalarization", scalarization, SCALARIZATIONS)
    u = rng.uniform(size=(k, n)).clip(1e-12, None)
    if scalarization == "linear":
        return u / u.sum(-1, keepdims=True)
    a = u.sum(-1, keepdims=True) / u
    return a / a.sum(-1, keepdims=True)


def scalarize(
    y: torch.Tensor,  # (..., n)
    weights: torch.Tensor,  # (k, n)
    scalarization: Scalarization,
    reference_point: torch.Tensor | None = None,  # (n,)
) -> torch.Tensor:  # (..., k)
    """s_lambda(y) for every weight vector: linear sum_i lambda_i y_i or Chebyshev
    min_i lambda_i (y_i - z_i) (``reference_point`` z required)."""
    check_choice("scalarization", scalarization, SCALARIZATIONS)
    if scalarization == "linear":
        return y @ weights.T
    if reference_point is None:
        raise ValueError("The Chebyshev scalarization needs a `reference_point`.")
    return (weights * (y.unsqueeze(-2) - reference_point)).min(-1).values


def expected_utility(
    y: torch.Tensor,  # (..., n)
    weights: torch.Tensor,  # (k, n)
    scalarization: Scalarization,
    reference_point: torch.Tensor | None = None,
) -> torch.Tensor:  # (...)
    """E_lambda[s_lambda(y)], the average over the weight samples."""
    return scalarize(y, weights, scalarization, reference_point).mean(-1)


WIDTHS: tuple[str, ...] = ("scalarized", "objectives", "norm")
Width = Literal["scalarized", "objectives", "norm"]


def lipschitz_constant(weights: torch.Tensor, scalarization: Scalarization) -> float:
    """mean_k L_k, the Lipschitz constants w.r.t. ||.||_2 of the scalarizations s_lambda_k:
    max_i lambda_ki (Chebyshev) or ||lambda_k||_2 (linear); weights (k, n)."""
    check_choice("scalarization", scalarization, SCALARIZATIONS)
    if scalarization == "linear":
        return float(weights.norm(dim=-1).mean())
    return float(weights.max(-1).values.mean())


def _objective_sd(model: ICMGP) -> Callable[[torch.Tensor], torch.Tensor]:
    """Each objective's posterior sd from the eigenbasis variances v(x) (..., n) -> (..., n):
    sigma_i^2 = sum_j U_ij^2 v_j."""
    squared_u = (model.U**2).T
    return lambda var: (var @ squared_u).clamp_min(0.0).sqrt()


def _width_of_variances(
    model: ICMGP, weights: torch.Tensor, scalarization: Scalarization, width: Width
) -> Callable[[torch.Tensor], torch.Tensor]:
    """w_t from the eigenbasis variances v(x) (..., n) -> (...), with everything that does not
    depend on x computed once (the acquisition is evaluated many times per suggestion)."""
    check_choice("width", width, WIDTHS)
    check_choice("scalarization", scalarization, SCALARIZATIONS)
    if width == "scalarized":  # linear (mtkb_ucb forms the Chebyshev one): the same bound
        width = "objectives"
    weights = weights.to(model.U.dtype)
    if width == "norm":
        lipschitz = lipschitz_constant(weights, scalarization)
        return lambda var: lipschitz * var.max(-1).values.sqrt()
    if scalarization == "linear":
        projected = ((weights @ model.U) ** 2).T  # (n, k): (U^T lambda_k)_j^2
        return lambda var: (var @ projected).clamp_min(0.0).sqrt().mean(-1)
    objective_sd = _objective_sd(model)

    def chebyshev(var: torch.Tensor) -> torch.Tensor:
        return (weights * objective_sd(var).unsqueeze(-2)).max(-1).values.mean(-1)

    return chebyshev


def mtkb_ucb(
    model: ICMGP,
    weights: torch.Tensor,  # (k, n)
    scalarization: Scalarization,
    beta: float,
    reference_point: torch.Tensor | None = None,
    width: Width = "scalarized",
) -> Callable[[torch.Tensor], torch.Tensor]:
    """u_t(x) = E_lambda[s_lambda(mu_t(x))] + beta w_t(x), x (..., d) -> (...); with
    ``width="scalarized"`` and the Chebyshev scalarization, u_t(x) = E_lambda[s_lambda(mu_t(x) +
    beta sigma_t(x))] (module docstring)."""
    if width == "scalarized" and scalarization == "chebyshev":
        if reference_point is None:
            raise ValueError("The Chebyshev scalarization needs a `reference_point`.")
        objective_sd = _objective_sd(model)
        weights = weights.to(model.U.dtype)

        def bound(x: torch.Tensor) -> torch.Tensor:
            mean_eig, var = model.posterior_eig(x)
            upper = mean_eig @ model.U.T + beta * objective_sd(var)
            return expected_utility(upper, weights, scalarization, reference_point)

        return bound
    of_variances = _width_of_variances(model, weights, scalarization, width)

    def acqf(x: torch.Tensor) -> torch.Tensor:
        mean_eig, var = model.posterior_eig(x)
        mean = mean_eig @ model.U.T
        return expected_utility(mean, weights, scalarization, reference_point) + beta * (
            of_variances(var)
        )

    return acqf


def default_beta(t: int, dim: int) -> float:
    """beta_t = sqrt(0.2 d log(2 t)), the practical GP-UCB schedule of Kandasamy et al. 2015
    (the theoretical beta of the paper's theorem 2 needs the RKHS norm b and is far too wide)."""
    return math.sqrt(0.2 * max(dim, 1) * math.log(2.0 * max(t, 1)))


def default_q(t: int, epsilon: float = 0.5, delta: float = 0.1) -> float:
    """MT-BKB's q = 6 rho log(4 t / delta) / epsilon^2, rho = (1 + epsilon) / (1 - epsilon)
    (paper, theorem 3, with the horizon T replaced by the current step t)."""
    rho = (1.0 + epsilon) / (1.0 - epsilon)
    return 6.0 * rho * math.log(4.0 * max(t, 1) / delta) / epsilon**2
