"""Fantasy models of a constrained GP (CGP; Chen, Jiang, Qin, Al Kontar, Technometrics 2025).

Notation (standardized units of one agent's GP):
    D: the agent's data (n points), mu(x), sigma(x)^2: the GP posterior given D.
    B: borrowed designs (m points), kappa: the agent's largest posterior mean.
    g_s (m,): a joint sample of f at B from GP(D); kept iff every g_s,j > kappa (eq. 6).
    M_s = GP(D u {(B, g_s)}): the fantasy model of a kept sample (eq. 8), the sample entering as
        an observation with the GP's noise variance.

Shared covariance (the paper's Property 2). Every M_s has the same inputs X+ = [X; B], hence the
same Gram matrix K+ and the same posterior variance sigma+(x)^2: one Cholesky factor serves them
all. Only the mean depends on the sample:
    mu_s(x) = k+(x)^T K+^-1 [y; g_s] = mu_0(x) + u(x)^T g_s,
    mu_0(x) = k+(x)^T K+^-1 [y; 0],   u(x) = (K+^-1 [0; I_m])^T k+(x)   (m,).
So the S fantasy means are an m-dimensional linear family: their average is mu_0 + u^T mean(g)
and their sample variance u^T Cov(g) u, whatever S is.

Rejection with a quorum (section 4.4.1). A borrowed design that fewer than ``quorum`` raw
samples put above kappa contradicts the agent's own model and is dropped. With several designs
the samples must clear kappa at *all* kept designs (eq. 6). Our reading of "fewer than S_quorum
retained samples for a design": drop every design cleared by fewer than ``quorum`` samples on
its own; then, while the samples clearing all remaining designs are fewer than ``quorum``, drop
the remaining design cleared least often. The kept samples are those clearing every kept design.
"""

from __future__ import annotations

import torch

from fairtune._gp.gp import GPRegressor, _robust_cholesky


def reject(
    samples: torch.Tensor,  # (S_raw, m) joint samples of f at the borrowed designs
    kappa: float,
    quorum: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rejection step: (mask of kept designs (m,), kept samples (S, m_kept)).

    See the module docstring for the rule. With no design kept the samples are (0, 0).
    """
    above = samples > kappa  # (S_raw, m)
    keep = above.sum(0) >= quorum  # (m,)
    while bool(keep.any()):
        joint = above[:, keep].all(-1)
        if int(joint.sum()) >= quorum:
            return keep, samples[joint][:, keep]
        counts = torch.where(keep, above.sum(0), torch.iinfo(torch.int64).max)
        keep = keep.clone()
        keep[int(torch.argmin(counts))] = False
    return keep, samples.new_zeros((0, 0))


class FantasyModels:
    """The fantasy models GP(D u {(B, g_s)}), s = 1..S, sharing one factorization.

    Args:
        gp: The agent's GP given its data D.
        X_borrowed: Kept borrowed designs B, shape (m, d); m may be 0.
        samples: Kept joint samples g_s at B, shape (S, m), S >= 1 when m > 0.
    """

    def __init__(
        self,
        gp: GPRegressor,
        X_borrowed: torch.Tensor,  # (m, d)
        samples: torch.Tensor,  # (S, m)
    ) -> None:
        m = X_borrowed.shape[0]
        if samples.ndim != 2 or samples.shape[1] != m or (m > 0 and samples.shape[0] == 0):
            raise ValueError(
                f"`samples` must have shape (S, {m}) with S >= 1, but got "
                f"samples.shape={tuple(samples.shape)}."
            )
        self.m = m
        self.gp = gp
        self.samples = samples.to(torch.float64)
        # GP(D u (B, 0)): its mean is mu_0, its variance sigma+^2 (Property 2).
        self.base = gp.condition_on(X_borrowed, torch.zeros(m, dtype=torch.float64))
        n_plus = len(self.base.X_train)
        E = torch.zeros(n_plus, m, dtype=torch.float64)
        E[n_plus - m :, :] = torch.eye(m, dtype=torch.float64)
        with torch.no_grad():
            self._M = torch.cholesky_solve(E, self.base._L)  # (n + m, m) = K+^-1 [0; I]
        self.sample_mean = self.samples.mean(0)  # (m,)
        centered = self.samples - self.sample_mean
        self.sample_cov = centered.T @ centered / max(self.samples.shape[0] - 1, 1)  # (m, m)

    @property
    def n_models(self) -> int:
        """S, the number of fantasy models (1 when nothing is borrowed: the GP itself)."""
        return self.samples.shape[0] if self.m else 1

    def _parts(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """mu_0 (...), sigma+^2 (...), u (..., m) at x (..., d)."""
        mu0, var = self.base.posterior(x)
        u = self.base.kernel_to_train(x) @ self._M
        return mu0, var, u

    def means(self, x: torch.Tensor, index: torch.Tensor | None = None) -> torch.Tensor:
        """Fantasy means mu_s(x) for x (..., d), shape (..., S) (or (..., len(index)))."""
        mu0, _, u = self._parts(x)
        if self.m == 0:
            return mu0.unsqueeze(-1)
        g = self.samples if index is None else self.samples[index]
        return mu0.unsqueeze(-1) + u @ g.T

    def variance(self, x: torch.Tensor) -> torch.Tensor:
        """sigma+(x)^2, the posterior variance every fantasy model shares, shape (...)."""
        return self.base.posterior(x)[1]

    def moments(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(mean_s mu_s(x), sigma+(x)^2, var_s mu_s(x)) for x (..., d), each shape (...).

        var_s is the sample variance (divisor S - 1) of eq. 12, 0 for S = 1.
        """
        mu0, var, u = self._parts(x)
        if self.m == 0:
            return mu0, var, torch.zeros_like(mu0)
        mean = mu0 + u @ self.sample_mean
        spread = ((u @ self.sample_cov) * u).sum(-1).clamp_min(0.0)
        return mean, var, spread

    def joint_posterior(self, x: torch.Tensor, s: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean (q,) and covariance (q, q) of fantasy model ``s`` at x (q, d)."""
        mean0, cov = self.base.joint_posterior(x)
        if self.m == 0:
            return mean0, cov
        u = self.base.kernel_to_train(x) @ self._M  # (q, m)
        return mean0 + u @ self.samples[s], cov

    def sample_path(self, x: torch.Tensor, s: int, generator: torch.Generator) -> torch.Tensor:
        """One joint draw of fantasy model ``s`` at x (q, d), shape (q,)."""
        with torch.no_grad():
            mean, cov = self.joint_posterior(x, s)
            L = _robust_cholesky(cov + 1e-10 * torch.eye(len(mean), dtype=torch.float64))
            z = torch.randn(len(mean), generator=generator, dtype=torch.float64)
            return mean + L @ z
