"""The acquisition functions of FairBOSampler and MTKBSampler as small objects over fitted
models.

Notation (standardized units): f(x) ~ GP (mean mu, variance s^2) is the objective, to be
maximized; c_j(x) ~ GP are the constraint models with standardized thresholds t_j (feasible iff
c_j(x) <= t_j); q_k(x) = P(binary constraint k satisfied at x) are GP classifiers; r(x) =
P(a new outcome at x) is the classifier of repeated outcomes (a model that reports the same
objective and constraint values as several earlier trials).

Every acquisition takes ``x`` of shape (..., 1, d), the batch of one point that
:func:`fairtune._gp.optim.maximize_acqf` optimizes, and returns shape (...).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from fairtune._gp import acquisition
from fairtune._gp.classifier import GPClassifier
from fairtune._gp.gp import GPRegressor, KernelParams

__all__ = [
    "ConstrainedMES", "Constraints", "FeasibilityPhase", "LogConstrainedEI", "LogFeasibility",
    "PenalizedUCB", "RepeatPenalty", "incumbent", "sample_max_values", "shorten_lengthscales",
]


def _sum_log_prob_positive(classifiers: list[GPClassifier], x: torch.Tensor) -> torch.Tensor:
    total = torch.zeros(x.shape[:-1], dtype=torch.float64)
    for clf in classifiers:
        total = total + clf.log_prob_positive(x)
    return total


def _sum_log_pof(models: list[tuple[GPRegressor, float]], x: torch.Tensor) -> torch.Tensor:
    total = torch.zeros(x.shape[:-1], dtype=torch.float64)
    for gp, threshold in models:
        mean, var = gp.posterior(x)
        total = total + acquisition.log_pof(mean, var, threshold)
    return total


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
        if not self.classifiers:
            return torch.zeros(x.shape[:-1], dtype=torch.float64)
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
        return (acquisition.log_ei(mean, var, self.best_f) + self.constraints.log_pof(x)
                + self.repeat(x))


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
        value = acquisition.cmes(mean, var, self.y_star, moments, log_probs)
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
class LogFeasibility:
    """``sum_j log P(c_j(x) <= t_j)``: MTKBSampler's acquisition until a trial is feasible."""

    constraints: Constraints

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return _sum_log_pof(self.constraints.regression, x[..., 0, :])


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
            violation = (acquisition.lcb(m, v, self.beta * self.beta) - thr).clamp_min(0.0)
            value = value - self.penalty * violation
        return value
