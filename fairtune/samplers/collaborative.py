"""CollaborativeUCBSampler: fair batch UCB across the tenants of a shared study."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial

from fairtune._gp.acquisition import information_gain
from fairtune._gp.gp import fit_gp, standardize
from fairtune._gp.optim import maximize_acqf
from fairtune._gp.search_space import SearchSpace
from fairtune.fairness.welfare import g2sf_weights
from fairtune.samplers._base import GPSamplerBase, check_single_objective, collect_trials
from fairtune.tenancy import TENANT_KEY

if TYPE_CHECKING:
    from optuna.study import Study

__all__ = ["CollaborativeUCBSampler", "PLAN_KEY_PREFIX", "ROUND_KEY"]

# Study system attribute "fairtune:collab:plan:<round>:<tenant>" -> JSON params of that tenant's
# assigned point in that round (one entry per tenant keeps each value short for RDB storages).
PLAN_KEY_PREFIX = "fairtune:collab:plan"
# Trial system attribute: the round a trial belongs to (its index among its tenant's trials).
ROUND_KEY = "fairtune:collab:round"


def assign_points(lambda_: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Tenant -> point index: the k-th highest ``mu`` goes to the tenant with the k-th lowest
    cumulative utility ``lambda_`` (ties keep tenant order). Returns ``order`` with
    ``order[i]`` the point of tenant i."""
    tenants_by_need = np.argsort(lambda_, kind="stable")  # lowest utility first
    points_by_value = np.argsort(-mu, kind="stable")  # highest mean first
    order = np.empty(len(lambda_), dtype=int)
    order[tenants_by_need] = points_by_value
    return order


def g2sf_term(lambda_sorted: torch.Tensor, mu: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``sum_i w_i * sort_asc(lambda_(i) + mu_[i])`` with mu_[i] sorted descending; (..., n) -> (...)."""
    mu_desc = torch.sort(mu, dim=-1, descending=True).values
    v = torch.sort(lambda_sorted + mu_desc, dim=-1).values
    return (v * w).sum(-1)


class CollaborativeUCBSampler(GPSamplerBase):
    """Collaborative Bayesian optimization with fair regret across the tenants of one study.

    Several tenants tune the same objective in one shared study; the sampler acts as the
    mediator of Sim, Zhang, Low and Jaillet (ICML 2021, "Collaborative Bayesian Optimization
    with Fair Regret"), pooling every tenant's observations in one GP and handing out one point
    per tenant per round:

    1. The first ``n_startup_rounds`` rounds are random for every tenant.
    2. In round t the n points X_t = (x_t^1..x_t^n) are chosen *jointly* (an n x d search) to
       maximize
       ``sum_i w_i * phi_i((lambda_t^i + mu(x_t^i))_i) + sqrt(alpha_t * 0.5 logdet(I + sigma^-2 Sigma(X_t)))``,
       where lambda_t^i is tenant i's cumulative observed utility (the sum of its observed
       values; the *negated* values for a minimized objective), mu the GP posterior mean,
       phi sorts ascending, w_i = rho^(i-1) (generalized Gini weights: the worst-off tenant
       weighs most), Sigma(X_t) the joint posterior covariance of the batch (its information
       gain rewards diverse batches), and
       ``alpha_t = c1 * d * sum_i w_i^2 * log(c2 * t)``. With ``vary_c1`` c1 is scaled by
       ``(sum_i w_i)^2 / (n sum_i w_i^2)`` so that exploration keeps the same weight relative to
       exploitation for every rho. The exploration term is in units of the GP's output scale.
    3. For the chosen batch, the k-th highest mu is given to the tenant with the k-th lowest
       lambda (which maximizes the first term for that batch).

    ``rho = 1`` is distributed batch GP-UCB (DB-GP-UCB, the utilitarian mediator); smaller rho
    is fairer. Round plans live in the study's system attributes (keys
    ``fairtune:collab:plan:<round>:<tenant>``), computed once, when the first tenant of a round
    asks, from the completed trials (running trials enter as pending points, conditioned on
    their posterior mean) and a seed derived from ``seed`` and the round: tenants in different
    processes or machines sharing an RDB or Journal storage each get their own assigned point,
    exactly one per tenant per round. An untagged trial gets its tenant at its first
    ``suggest_*`` call (read it in the objective with :func:`fairtune.tenancy.tenant_of` after
    suggesting). A trial's round is its index among its tenant's trials,
    so a failed trial uses up its tenant's slot and never stalls the others. An untagged trial is
    given to the tenant with the fewest trials (round robin), so a single-process simulation of
    n tenants is one ``study.optimize(objective, n_trials=n * T)``.

    Example:
        >>> sampler = CollaborativeUCBSampler(tenants=["a", "b", "c"], rho=0.5, seed=0)
        >>> study = optuna.create_study(sampler=sampler)
        >>> study.optimize(objective, n_trials=3 * 20)  # doctest: +SKIP
        >>> fairtune.tenancy.cumulative_utilities(study)  # doctest: +SKIP

    Args:
        tenants: Tenant names, or their number n (names "0".."n-1").
        rho: G2SF weight decay in (0, 1]. Defaults to 0.5.
        c1: Exploration constant. Defaults to 0.1.
        c2: Constant inside the logarithm of alpha_t (> 0). Defaults to 2.0.
        vary_c1: Scale c1 with rho as described above. Defaults to True.
        n_startup_rounds: Random rounds before the GP is used. Defaults to 2.
        independent_sampler: Sampler for startup rounds and parameters outside the shared
            search space. Defaults to ``RandomSampler(seed=seed)``.
        seed: Seed of the sampler. Defaults to None.
    """

    def __init__(
        self,
        *,
        tenants: Sequence[str] | int,
        rho: float = 0.5,
        c1: float | None = None,
        c2: float | None = None,
        vary_c1: bool = True,
        n_startup_rounds: int = 2,
        independent_sampler: BaseSampler | None = None,
        seed: int | None = None,
    ) -> None:
        if isinstance(tenants, (int, np.integer)) and not isinstance(tenants, bool):
            if tenants < 1:
                raise ValueError(f"`tenants` must be positive, but got tenants={tenants!r}.")
            names = [str(i) for i in range(int(tenants))]
        elif isinstance(tenants, Sequence) and not isinstance(tenants, str):
            names = [str(t) for t in tenants]
            if not names or len(set(names)) != len(names):
                raise ValueError(
                    f"`tenants` must be distinct names (at least one), but got tenants={tenants!r}."
                )
        else:
            raise ValueError(
                f"`tenants` must be a list of names or a number, but got tenants={tenants!r}."
            )
        if not (isinstance(rho, (int, float)) and 0.0 < rho <= 1.0):
            raise ValueError(f"`rho` must be in (0, 1], but got rho={rho!r}.")
        for name, value in (("c1", c1), ("c2", c2)):
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"`{name}` must be positive, but got {name}={value!r}.")
        if not isinstance(n_startup_rounds, int) or n_startup_rounds < 0:
            raise ValueError(
                f"`n_startup_rounds` must be a non-negative integer, but got "
                f"n_startup_rounds={n_startup_rounds!r}."
            )
        super().__init__(
            seed=seed,
            independent_sampler=independent_sampler,
            n_startup_trials=0,
            warn_independent_sampling=True,
        )
        self._tenants = names
        self._rho = float(rho)
        self._c1 = 0.1 if c1 is None else float(c1)
        self._c2 = 2.0 if c2 is None else float(c2)
        self._vary_c1 = vary_c1
        self._n_startup_rounds = n_startup_rounds
        self._seed = seed
        self._n_preliminary_samples = 256
        self._n_local_search = 3

    @property
    def tenants(self) -> list[str]:
        return list(self._tenants)

    # -- tenants and rounds -------------------------------------------------------------------

    def _tenant_and_round(self, study: Study, trial: FrozenTrial) -> tuple[str, int]:
        trials = study.get_trials(deepcopy=False, states=None)
        # Read the tag from the storage: tenancy.ask() sets it after the trial was created.
        tenant = study._storage.get_trial_user_attrs(trial._trial_id).get(TENANT_KEY)
        if tenant is None:
            counts = {t: 0 for t in self._tenants}
            for other in trials:
                owner = other.user_attrs.get(TENANT_KEY)
                if owner in counts and other.number != trial.number:
                    counts[owner] += 1
            tenant = min(self._tenants, key=lambda t: counts[t])
            study._storage.set_trial_user_attr(trial._trial_id, TENANT_KEY, tenant)
        tenant = str(tenant)
        if tenant not in self._tenants:
            raise ValueError(
                f"trial {trial.number} belongs to tenant {tenant!r}, which is not one of the "
                f"sampler's `tenants` {self._tenants}."
            )
        round_ = sum(
            1
            for other in trials
            if other.number < trial.number and other.user_attrs.get(TENANT_KEY) == tenant
        )
        study._storage.set_trial_system_attr(trial._trial_id, ROUND_KEY, round_)
        return tenant, round_

    # -- sampling ------------------------------------------------------------------------------

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        check_single_objective(study, type(self).__name__)
        with self._lock:
            # Tag every trial, even the first one (whose shared search space is still empty).
            tenant, round_ = self._tenant_and_round(study, trial)
            if not search_space or round_ < self._n_startup_rounds:
                return {}
            plan = self._read_plan(study, round_, search_space)
            if tenant not in plan:
                computed = self._compute_plan(study, trial, round_, search_space)
                if not computed:
                    return {}
                self._write_plan(study, round_, computed)
                plan = self._read_plan(study, round_, search_space)
            return plan.get(tenant, {})

    def _read_plan(
        self, study: Study, round_: int, search_space: dict[str, BaseDistribution]
    ) -> dict[str, dict[str, Any]]:
        attrs = study._storage.get_study_system_attrs(study._study_id)
        plan = {}
        for tenant in self._tenants:
            raw = attrs.get(f"{PLAN_KEY_PREFIX}:{round_}:{tenant}")
            if raw is None:
                continue
            params = json.loads(raw)
            # A plan made for another search space is not reused.
            if params.keys() == search_space.keys() and all(
                dist._contains(dist.to_internal_repr(params[name]))
                for name, dist in search_space.items()
            ):
                plan[tenant] = params
        return plan

    def _write_plan(self, study: Study, round_: int, plan: dict[str, dict[str, Any]]) -> None:
        attrs = study._storage.get_study_system_attrs(study._study_id)
        for tenant, params in plan.items():
            key = f"{PLAN_KEY_PREFIX}:{round_}:{tenant}"
            if key not in attrs:  # the first writer wins; a concurrent plan is never mixed in
                study._storage.set_study_system_attr(study._study_id, key, json.dumps(params))

    def _compute_plan(
        self,
        study: Study,
        trial: FrozenTrial,
        round_: int,
        search_space: dict[str, BaseDistribution],
    ) -> dict[str, dict[str, Any]]:
        complete, pending = collect_trials(study, search_space, trial)
        if not complete:
            return {}
        sign = 1.0 if study.direction == StudyDirection.MAXIMIZE else -1.0
        lambda_ = np.zeros(len(self._tenants))
        index = {t: i for i, t in enumerate(self._tenants)}
        for t in complete:
            owner = t.user_attrs.get(TENANT_KEY)
            if owner in index:
                lambda_[index[owner]] += sign * t.value
        ss = SearchSpace(search_space)
        X = torch.from_numpy(ss.encode([t.params for t in complete]))
        y, y_mean, y_std = standardize(sign * np.array([t.value for t in complete], dtype=float))
        gp = fit_gp(X, torch.from_numpy(y), ss.is_categorical)
        if pending:
            X_pending = torch.from_numpy(ss.encode(pending))
            with torch.no_grad():
                gp = gp.condition_on(X_pending, gp.posterior(X_pending)[0])
        n, d = len(self._tenants), ss.dim
        w_np = g2sf_weights(n, self._rho)
        c1 = self._c1
        if self._vary_c1:
            c1 *= w_np.sum() ** 2 / (n * (w_np**2).sum())
        t = round_ + 1
        alpha_t = c1 * d * float((w_np**2).sum()) * max(math.log(self._c2 * t), 0.0)
        w = torch.from_numpy(w_np)
        lambda_sorted = torch.from_numpy(np.sort(lambda_))
        scale = y_std * float(gp.params.outputscale) ** 0.5
        noise = gp.params.noise_var

        def acqf(Xb: torch.Tensor) -> torch.Tensor:  # (b, n, d) -> (b,)
            mean, cov = gp.joint_posterior(Xb)
            mu = y_mean + y_std * mean
            exploration = (alpha_t * information_gain(cov, noise)).clamp_min(0.0).sqrt()
            return g2sf_term(lambda_sorted, mu, w) + scale * exploration

        seed = None if self._seed is None else (self._seed * 1_000_003 + round_) % (2**32)
        rng = np.random.RandomState(seed) if seed is not None else self._rng.rng
        X_best, _ = maximize_acqf(
            acqf, ss, rng=rng, q=n,
            n_preliminary_samples=self._n_preliminary_samples,
            n_local_search=self._n_local_search,
        )
        with torch.no_grad():
            mu = gp.posterior(torch.from_numpy(X_best))[0].numpy()
        order = assign_points(lambda_, mu)
        return {tenant: ss.decode(X_best[order[i]]) for i, tenant in enumerate(self._tenants)}

    def _in_startup(self, study: Study, trial: FrozenTrial) -> bool:
        round_ = study._storage.get_trial_system_attrs(trial._trial_id).get(ROUND_KEY)
        if round_ is not None and round_ < self._n_startup_rounds:
            return True
        return super()._in_startup(study, trial)
