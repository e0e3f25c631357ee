"""Acquisition functions, computed in log space where probabilities multiply: functions of
posterior moments, and the samplers' acquisitions as small objects over fitted models.

Notation:
    mean, var (...): posterior mean and variance of a latent function at a batch of points.
    sigma = sqrt(var); z = (mean - best_f) / sigma.
    phi, Phi: standard normal density and distribution function.
    Fitted models (standardized units): c_j(x) ~ GP, constraint models with thresholds t_j
    (feasible iff c_j(x) <= t_j); q_k(x) = P(binary constraint k satisfied at x), GP
    classifiers; r(x) = P(a new outcome at x), the classifier of repeated outcomes (a model that
    reports the same objective and constraint values as several earlier trials). The objects
    take ``x`` of shape (..., 1, d), the batch of one point that
    :func:`fairtune._gp.optim.maximize_acqf` optimizes, and return shape (...).

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from scipy import special

from fairtune._gp.classifier import GPClassifier
from fairtune._gp.gp import _MIN_VAR, GPRegressor, KernelParams

__all__ = [
    "ConstrainedMES", "Constraints", "FeasibilityPhase", "LogConstrainedEI",
    "PenalizedUCB", "RepeatPenalty", "cgp_log_ei", "cgp_ucb", "cmes", "incumbent",
    "information_gain", "lcb", "log_ei", "log_h", "log_pof", "sample_max_values",
    "shorten_lengthscales", "ucb",
]

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

    The value has three regimes (:func:`_log_h_numpy`); differentiating them by autograd cost
    more than the rest of a cEI evaluation (the acquisition optimizer needs a gradient at every
    step). Since h'(z) = Phi(z), the derivative is
    exp(log Phi(z) - log h(z)), finite wherever both logs are (``log_ndtr`` does not underflow).
    """

    @staticmethod
    def forward(ctx: Any, z: torch.Tensor) -> torch.Tensor:
        out = torch.from_numpy(_log_h_numpy(z.detach().numpy()))
        ctx.save_for_backward(z, out)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        z, out = ctx.saved_tensors
        return grad * torch.exp(torch.special.log_ndtr(z) - out)


def log_h(z: torch.Tensor) -> torch.Tensor:
    """log(phi(z) + z Phi(z)), stable and finite for all finite z; differentiable in z."""
    return _LogH.apply(z)  # type: ignore[no-untyped-call]  # torch's Function.apply is untyped


def _log_h_numpy(z: np.ndarray) -> np.ndarray:
    """The value of :func:`log_h` in numpy: each of three regimes on the z (if any) needing it."""
    out = np.empty_like(z)
    direct, asymptotic = z > -1.0, z <= -_ASYMPTOTIC_FROM
    tail = ~direct & ~asymptotic
    if direct.any():
        a = z[direct]
        out[direct] = np.log(np.exp(-0.5 * a * a - _LOG_SQRT_2PI) + a * special.ndtr(a))
    if tail.any():
        a = -z[tail]
        w = np.log(a * special.erfcx(a / _SQRT2)) + _LOG_SQRT_PI_OVER_2
        log1mexp = np.where(w > -math.log(2.0),
                            np.log(-np.expm1(np.maximum(w, -math.log(2.0)))),
                            np.log1p(-np.exp(np.minimum(w, -math.log(2.0)))))
        out[tail] = -0.5 * a * a - _LOG_SQRT_2PI + log1mexp
    if asymptotic.any():
        b = np.minimum(-z[asymptotic], 1e150)
        inv_b2 = 1.0 / (b * b)
        out[asymptotic] = (-0.5 * b * b - _LOG_SQRT_2PI - 2.0 * np.log(b)
                           + np.log1p(-3.0 * inv_b2 + 15.0 * inv_b2 * inv_b2))
    return out


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


def _sum_log_prob_positive(classifiers: list[GPClassifier], x: torch.Tensor) -> torch.Tensor:
    zero = torch.zeros(x.shape[:-1], dtype=torch.float64)
    return sum((clf.log_prob_positive(x) for clf in classifiers), zero)


def _sum_log_pof(models: list[tuple[GPRegressor, float]], x: torch.Tensor) -> torch.Tensor:
    zero = torch.zeros(x.shape[:-1], dtype=torch.float64)
    return sum((log_pof(*gp.posterior(x), threshold) for gp, threshold in models), zero)


@dataclass
class Constraints:
    """The constraint models: ``regression`` (c_j, t_j) pairs and binary ``classifiers`` q_k.

    ``log_pof(x) = sum_j log P(c_j(x) <= t_j) + sum_k log q_k(x)``, x (..., d) -> (...).
    """

    regression: list[tuple[GPRegressor, float]] = field(default_factory=list)
    classifiers: list[GPClassifier] = field(default_factory=list)

    def log_pof(self, x: torch.Tensor) -> torch.Tensor:
        return _sum_log_pof(self.regression, x) + _sum_log_prob_positive(self.classifiers, x)

    def condition_on(self, X_pending: torch.Tensor) -> Constraints:
        """Fantasies at pending points (the posterior mean as the observation) shrink the
        regression models' variance there; classifiers are kept as they are."""
        with torch.no_grad():
            regression = [(gp.condition_on(X_pending, gp.posterior(X_pending)[0]), thr)
                          for gp, thr in self.regression]
        return Constraints(regression, self.classifiers)


@dataclass
class RepeatPenalty:
    """``log min(1, 2 r(x))``: hold back only the points where a repeated outcome is more
    likely than not (0 without a classifier).

    The classifier is undecided at a plateau's edge, and in fairness-constrained tuning that
    edge is where the fair, useful models lie (a model that predicts the positive class for a
    few people only is both); weighting by the plain probability there pushed the search away
    from them (``docs/benchmarks/fairbo.md``).
    """

    classifiers: list[GPClassifier] = field(default_factory=list)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # x (..., d) -> (...)
        return (_sum_log_prob_positive(self.classifiers, x) + math.log(2.0)).clamp(max=0.0)


@dataclass
class LogConstrainedEI:
    """``log EI(x; best_f) + log_pof(x) + repeat(x)``, in log space so that a tiny
    probability of feasibility does not underflow (Gardner et al. 2014; BoTorch's
    LogConstrainedExpectedImprovement)."""

    gp: GPRegressor
    best_f: float
    constraints: Constraints
    repeat: RepeatPenalty

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x[..., 0, :]
        mean, var = self.gp.posterior(x)
        return (log_ei(mean, var, self.best_f) + self.constraints.log_pof(x)
                + self.repeat(x))

    def value_and_grad(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The value (b,) and gradient (b, 1, d) at X (b, 1, d), in numpy; None where a
        classifier (a binary constraint, the repeat penalty) needs torch's autograd."""
        if self.constraints.classifiers or self.repeat.classifiers:
            return None
        x = X[:, 0, :]
        mean, var, to_x = _floored(self.gp.posterior_numpy(x))
        sigma = np.sqrt(var)
        z = (mean - self.best_f) / sigma
        log_h_z = _log_h_numpy(z)
        ratio = np.exp(special.log_ndtr(z) - log_h_z)  # d log h / dz
        value = np.log(sigma) + log_h_z
        grad = to_x(ratio / sigma, (1.0 - ratio * z) / (2.0 * var))
        for gp, threshold in self.constraints.regression:
            mean, var, to_x = _floored(gp.posterior_numpy(x))
            sigma = np.sqrt(var)
            w = (threshold - mean) / sigma
            log_p = special.log_ndtr(w)
            hazard = np.exp(-0.5 * w * w - _LOG_SQRT_2PI - log_p)  # d log Phi / dw
            value = value + log_p
            grad = grad + to_x(-hazard / sigma, -hazard * w / (2.0 * var))
        return value, grad[:, None, :]


def _floored(posterior: tuple[np.ndarray, np.ndarray, Any]) -> tuple[np.ndarray, np.ndarray, Any]:
    """A numpy posterior with the variance floored as :meth:`GPRegressor.posterior` floors it
    (no gradient w.r.t. a floored variance)."""
    mean, var, to_x = posterior
    kept = var > _MIN_VAR
    return mean, np.where(kept, var, _MIN_VAR), lambda gm, gv: to_x(gm, np.where(kept, gv, 0.0))


@dataclass
class ConstrainedMES:
    """Constrained max-value entropy search (Perrone et al. 2019), ``cmes(x) * exp(repeat(x))``
    with the samples ``y_star`` of the maximum feasible objective."""

    gp: GPRegressor
    y_star: torch.Tensor  # (S,)
    constraints: Constraints
    repeat: RepeatPenalty

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x[..., 0, :]
        mean, var = self.gp.posterior(x)
        moments = []
        for gp, thr in self.constraints.regression:
            m, v = gp.posterior(x)
            moments.append((m - thr, v))  # feasible iff (c - thr) <= 0
        log_probs = [clf.log_prob_positive(x) for clf in self.constraints.classifiers]
        value = cmes(mean, var, self.y_star, moments, log_probs)
        return value * self.repeat(x).exp()


@dataclass
class FeasibilityPhase:
    """``log P(all constraints hold at x)`` under an equal-weight mixture of constraint models
    (Algorithm 1 of Fair BO: find a feasible point first).

    ``components`` are lists of regression models: the fitted ones and, when they are
    overconfident, copies with shorter lengthscales (:meth:`of`); the classifiers enter every
    component unchanged.
    """

    components: list[list[tuple[GPRegressor, float]]]
    classifiers: list[GPClassifier]

    @classmethod
    def of(
        cls, constraints: Constraints, probe: torch.Tensor, factors: list[float],
        trust_level: float,
    ) -> FeasibilityPhase:
        """The phase for ``constraints``: the fitted models alone, unless they give every
        ``probe`` point a probability of feasibility below ``trust_level`` (the symptom of
        lengthscales fitted to a few infeasible trials, confident far from the data: then the
        probability is largest at the corners of the box). Then the mixture adds the models
        with every lengthscale multiplied by each of ``factors``, which keeps plausible dips
        near the least violating trials in the running (Berkenkamp et al. 2019)."""
        regression = constraints.regression
        components: list[list[tuple[GPRegressor, float]]] = [regression]
        factors = [f for f in factors if f != 1.0]
        if regression and factors:
            with torch.no_grad():
                fitted = _sum_log_pof(regression, probe)
            if float(fitted.max()) < math.log(trust_level):
                components += [
                    [(shorten_lengthscales(gp, factor), thr) for gp, thr in regression]
                    for factor in factors
                ]
        return cls(components, constraints.classifiers)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:  # x (..., d) -> (...)
        shared = _sum_log_prob_positive(self.classifiers, x)
        if not self.components[0]:
            return shared
        terms = torch.stack([shared + _sum_log_pof(models, x) for models in self.components])
        return torch.logsumexp(terms, 0) - math.log(len(self.components))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.log_prob(x[..., 0, :])


def shorten_lengthscales(gp: GPRegressor, factor: float) -> GPRegressor:
    """The same GP with every lengthscale multiplied by ``factor``."""
    params = KernelParams(
        gp.params.inverse_squared_lengthscales / factor**2, gp.params.outputscale,
        gp.params.noise_var,
    )
    return GPRegressor(gp.X_train, gp.y_train, params, gp.is_categorical)


def incumbent(gp: GPRegressor, X_feasible: torch.Tensor) -> float:
    """The value EI improves on: the largest posterior mean at the feasible trials.

    The plug-in incumbent for noisy observations (Picheny et al. 2013): with a negligible
    fitted noise it is the best observed value; with a noisy or rugged objective, one lucky
    observation does not make every other region look unpromising.
    """
    with torch.no_grad():
        return float(gp.posterior(X_feasible)[0].max())


def sample_max_values(
    gp: GPRegressor, constraints: Constraints, candidates: torch.Tensor, n_samples: int,
    generator: torch.Generator, floor: float,
) -> torch.Tensor:
    """Samples of the maximum feasible objective, shape (S,), for cMES.

    Objective and constraints are drawn independently at each candidate (n, d); a sample's
    maximum is the largest objective draw among the candidates whose constraint draws are all
    feasible, floored at ``floor`` (the best feasible observation), plus 1e-6.
    """
    S = n_samples
    with torch.no_grad():
        mean, var = gp.posterior(candidates)
        f = mean + var.sqrt() * torch.randn(S, len(mean), generator=generator,
                                            dtype=torch.float64)
        ok = torch.ones_like(f, dtype=torch.bool)
        for model, thr in constraints.regression:
            m, v = model.posterior(candidates)
            draws = m + v.sqrt() * torch.randn(S, len(m), generator=generator,
                                               dtype=torch.float64)
            ok &= draws <= thr
        for clf in constraints.classifiers:
            p = clf.log_prob_positive(candidates).exp()
            ok &= torch.rand(S, len(p), generator=generator, dtype=torch.float64) < p
        masked = torch.where(ok, f, torch.full_like(f, -math.inf)).max(-1).values
        # A draw without any feasible candidate (masked = -inf) gets the floor.
        y_star = torch.maximum(masked, torch.tensor(float(floor), dtype=torch.float64))
    return y_star + 1e-6


@dataclass
class PenalizedUCB:
    """``ucb(x) - penalty * sum_j max(0, LCB_j(x) - t_j)``: MT-KB's optimistic utility, with
    a point whose constraints are violated even optimistically (``LCB_j = m_j - beta s_j``)
    held back in proportion to the violation."""

    ucb: Callable[[torch.Tensor], torch.Tensor]  # x (..., d) -> (...)
    constraints: Constraints
    beta: float
    penalty: float

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x[..., 0, :]
        value = self.ucb(x)
        for gp, thr in self.constraints.regression:
            m, v = gp.posterior(x)
            violation = (lcb(m, v, self.beta * self.beta) - thr).clamp_min(0.0)
            value = value - self.penalty * violation
        return value
