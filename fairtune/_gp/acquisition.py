"""Acquisition functions, computed in log space where probabilities multiply.

Notation:
    mean, var (...): posterior mean and variance of a latent function at a batch of points.
    sigma = sqrt(var); z = (mean - best_f) / sigma.
    phi, Phi: standard normal density and distribution function.

log EI (maximization):
    EI = sigma * h(z), h(z) = phi(z) + z Phi(z).
    For z > -1, log h is evaluated directly. For z <= -1 the direct form cancels
    catastrophically; writing Phi(z) = erfcx(-z / sqrt2) exp(-z^2 / 2) / 2 gives
        log h(z) = -z^2/2 - log(sqrt(2 pi)) + log(1 - sqrt(pi/2) |z| erfcx(|z| / sqrt2)),
    and the last term is log1mexp(log(|z| erfcx(|z|/sqrt2)) + log(sqrt(pi/2))), finite down to
    very negative z (Ament et al. 2023, "Unexpected Improvements to Expected Improvement").

log PoF: log P(c <= threshold) = log Phi((threshold - mean) / sigma) (``log_ndtr``, finite even
    when the probability underflows).

UCB / LCB: mean +- sqrt(beta * var).

Information gain of a batch: 0.5 * logdet(I + Sigma / sigma2), Sigma (..., q, q).

cMES (constrained max-value entropy search, Perrone et al. 2019, "Constrained Bayesian
optimization with max-value entropy search"; Fair BO appendix B): for a sampled maximum y* of
the *feasible* objective, observing y = (f, c_1..c_K) at x tells that y lies in
A = {f <= y* or some c_k > 0}; the information gain is H[p(y)] - H[p(y | y in A)]. With
independent posteriors and the product region A^c = R_f x R_1 x ... x R_K,
R_f = {f > y*}, R_k = {c_k <= 0}, P_j = P(R_j), P = prod_j P_j, Z = 1 - P:
    alpha(x; y*) = -log Z - (P / Z) * sum_j g_j,
    g_j = H_j + (1 / P_j) * int_{R_j} p_j log p_j.
For a Gaussian dimension with standardized bound gamma_j, g_j = (1 - E[u^2 | u in R_j]) / 2:
    R_f: g_f = -gamma_f phi(gamma_f) / (2 (1 - Phi(gamma_f))), gamma_f = (y* - mean_f) / sigma_f
    R_k: g_k = +gamma_k phi(gamma_k) / (2 Phi(gamma_k)),        gamma_k = -mean_k / sigma_k
For a binary constraint with P(feasible) = p: g = (1 - p) log(p / (1 - p)).
With no constraint this is MES (Wang & Jegelka 2017): gamma phi / (2 Phi) - log Phi.
cMES averages alpha(x; y*) over the samples y*.
"""

from __future__ import annotations

import math
from typing import Any

import torch

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_LOG_SQRT_PI_OVER_2 = 0.5 * math.log(math.pi / 2)
_SQRT2 = math.sqrt(2.0)
# Beyond this |z| the tail of log h switches to its asymptotic series (truncation error < 1e-16).
_ASYMPTOTIC_FROM = 1e3


def _log1mexp(w: torch.Tensor) -> torch.Tensor:
    """log(1 - exp(w)) for w < 0, accurate on the whole range."""
    w = w.clamp_max(-1e-300)
    return torch.where(
        w > -math.log(2.0),
        torch.log(-torch.expm1(w.clamp_min(-math.log(2.0)))),
        torch.log1p(-torch.exp(w.clamp_max(-math.log(2.0)))),
    )


class _LogH(torch.autograd.Function):
    """log h(z) with the analytic derivative d log h / dz = Phi(z) / h(z).

    The forward value has three regimes of some 40 tensor operations; differentiating them by
    autograd cost more than the rest of a cEI evaluation (the acquisition optimizer needs a
    gradient at every step). Since h'(z) = Phi(z), the derivative is
    exp(log Phi(z) - log h(z)), finite wherever both logs are (``log_ndtr`` does not underflow).
    """

    @staticmethod
    def forward(ctx: Any, z: torch.Tensor) -> torch.Tensor:
        out = _log_h_value(z)
        ctx.save_for_backward(z, out)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        z, out = ctx.saved_tensors
        return grad * torch.exp(torch.special.log_ndtr(z) - out)


def log_h(z: torch.Tensor) -> torch.Tensor:
    """log(phi(z) + z Phi(z)), stable and finite for all finite z; differentiable in z."""
    return _LogH.apply(z)  # type: ignore[no-untyped-call]  # torch's Function.apply is untyped


def _log_h_value(z: torch.Tensor) -> torch.Tensor:
    """The value of :func:`log_h`: three regimes, each computed only if some z needs it."""
    # Each regime is evaluated on a clamped copy of z so that the values torch.where does not
    # select stay finite.
    zero = torch.zeros_like(z)
    if bool((z > -1.0).any()):
        z_hi = z.clamp_min(-1.0)
        direct = torch.log(
            torch.exp(-0.5 * z_hi * z_hi - _LOG_SQRT_2PI) + z_hi * torch.special.ndtr(z_hi)
        )
    else:
        direct = zero
    if bool(((z <= -1.0) & (z > -_ASYMPTOTIC_FROM)).any()):
        a = (-z).clamp(1.0, _ASYMPTOTIC_FROM)
        tail = (
            -0.5 * a * a
            - _LOG_SQRT_2PI
            + _log1mexp(torch.log(a * torch.special.erfcx(a / _SQRT2)) + _LOG_SQRT_PI_OVER_2)
        )
    else:
        tail = zero
    if bool((z <= -_ASYMPTOTIC_FROM).any()):
        # 1 - sqrt(pi/2) a erfcx(a/sqrt2) = a^-2 - 3 a^-4 + 15 a^-6 - ..., whose direct
        # evaluation loses all digits once a^-2 nears the float64 epsilon.
        b = (-z).clamp(_ASYMPTOTIC_FROM, 1e150)
        inv_b2 = 1.0 / (b * b)
        asymptotic = (
            -0.5 * b * b
            - _LOG_SQRT_2PI
            - 2.0 * torch.log(b)
            + torch.log1p(-3.0 * inv_b2 + 15.0 * inv_b2 * inv_b2)
        )
    else:
        asymptotic = zero
    return torch.where(z > -1.0, direct, torch.where(z > -_ASYMPTOTIC_FROM, tail, asymptotic))


def log_ei(mean: torch.Tensor, var: torch.Tensor, best_f: float | torch.Tensor) -> torch.Tensor:
    """Log expected improvement over ``best_f`` (maximization), shape of ``mean``.

    ``log EI(x) = log sigma(x) + log h((mean(x) - best_f) / sigma(x))``.
    """
    sigma = var.clamp_min(1e-30).sqrt()
    return sigma.log() + log_h((mean - best_f) / sigma)


def log_pof(
    mean: torch.Tensor, var: torch.Tensor, threshold: float | torch.Tensor = 0.0
) -> torch.Tensor:
    """Log probability of feasibility ``log P(c(x) <= threshold)``, shape of ``mean``."""
    sigma = var.clamp_min(1e-30).sqrt()
    return torch.special.log_ndtr((threshold - mean) / sigma)


def ucb(mean: torch.Tensor, var: torch.Tensor, beta: float | torch.Tensor) -> torch.Tensor:
    """Upper confidence bound ``UCB(x) = mean(x) + sqrt(beta * var(x))``."""
    return mean + (beta * var.clamp_min(0.0)).sqrt()


def lcb(mean: torch.Tensor, var: torch.Tensor, beta: float | torch.Tensor) -> torch.Tensor:
    """Lower confidence bound ``LCB(x) = mean(x) - sqrt(beta * var(x))``."""
    return mean - (beta * var.clamp_min(0.0)).sqrt()


def information_gain(cov: torch.Tensor, noise_var: float | torch.Tensor) -> torch.Tensor:
    """``0.5 * logdet(I + cov / noise_var)`` for cov (..., q, q); shape (...,)."""
    q = cov.shape[-1]
    M = torch.eye(q, dtype=cov.dtype) + cov / noise_var
    L, _ = torch.linalg.cholesky_ex(M + 1e-10 * torch.eye(q, dtype=cov.dtype))
    return L.diagonal(dim1=-2, dim2=-1).log().sum(-1)


def _log_phi(z: torch.Tensor) -> torch.Tensor:
    return -0.5 * z * z - _LOG_SQRT_2PI


def cmes(
    mean_f: torch.Tensor,  # (...)
    var_f: torch.Tensor,  # (...)
    y_star: torch.Tensor,  # (S,)
    constraint_moments: list[tuple[torch.Tensor, torch.Tensor]],  # [(mean_k, var_k)], (...) each
    constraint_log_probs: list[torch.Tensor] | None = None,  # [log P(feasible)], (...) each
) -> torch.Tensor:  # (...)
    """Constrained max-value entropy search, averaged over max-value samples ``y_star``.

    Args:
        mean_f, var_f: Posterior of the (maximized) objective.
        y_star: Samples of the maximum feasible objective value, shape (S,).
        constraint_moments: Posterior mean and variance of each real-valued constraint
            (feasible iff <= 0).
        constraint_log_probs: log P(feasible) of each binary constraint (GP classification).

    Returns:
        The acquisition value (nats), shape of ``mean_f``.
    """
    sigma_f = var_f.clamp_min(1e-30).sqrt().unsqueeze(-1)  # (..., 1)
    gamma_f = (y_star - mean_f.unsqueeze(-1)) / sigma_f  # (..., S)
    log_p_f = torch.special.log_ndtr(-gamma_f)  # P(f > y*)
    # g_f = -gamma phi(gamma) / (2 (1 - Phi(gamma)))
    g_sum = -0.5 * gamma_f * torch.exp(_log_phi(gamma_f) - log_p_f)
    log_p = log_p_f
    for mean_k, var_k in constraint_moments:
        gamma_k = (-mean_k / var_k.clamp_min(1e-30).sqrt()).unsqueeze(-1)  # (..., 1)
        log_p_k = torch.special.log_ndtr(gamma_k)
        g_sum = g_sum + 0.5 * gamma_k * torch.exp(_log_phi(gamma_k) - log_p_k)
        log_p = log_p + log_p_k
    for log_p_k in constraint_log_probs or []:
        lp = log_p_k.clamp(max=-1e-12).unsqueeze(-1)
        log_q = _log1mexp(lp)  # log(1 - p)
        g_sum = g_sum + torch.exp(log_q) * (lp - log_q)
        log_p = log_p + lp
    log_p = log_p.clamp(max=-1e-12)
    log_z = _log1mexp(log_p)  # log(1 - P)
    value = -log_z - torch.exp(log_p - log_z) * g_sum
    return value.mean(-1)


def cgp_ucb(
    mean: torch.Tensor, var: torch.Tensor, spread: torch.Tensor, beta: float | torch.Tensor
) -> torch.Tensor:
    """UCB over fantasy models, eq. 13 of Chen et al. (Technometrics 2025):
    ``CGP-UCB(x) = mean_s mu_s(x) + beta * sqrt(sigma+(x)^2 + var_s mu_s(x))``.

    ``mean``, ``var`` and ``spread`` are the three outputs of ``FantasyModels.moments``, all of
    one shape. (The law of total variance: within-model variance plus the spread of the means.)
    """
    return mean + beta * (var + spread).clamp_min(0.0).sqrt()


def cgp_log_ei(
    means: torch.Tensor,  # (..., S) fantasy means
    var: torch.Tensor,  # (...) the shared variance
    best_f: float | torch.Tensor,
) -> torch.Tensor:  # (...)
    """Log of the EI averaged over S fantasy models, eq. 11 of Chen et al. (2025):
    ``log((1/S) sum_s EI(x; mu_s, sigma+))``, computed as a logsumexp of log EIs.
    """
    S = means.shape[-1]
    return torch.logsumexp(log_ei(means, var.unsqueeze(-1), best_f), -1) - math.log(S)
