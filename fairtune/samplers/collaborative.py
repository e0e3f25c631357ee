"""CollaborativeUCBSampler: fair batch UCB across the tenants of a shared study.

Sim, Zhang, Low, Jaillet, ICML 2021, "Collaborative Bayesian Optimization with Fair Regret";
notation and acquisition as in :class:`CollaborativeUCBSampler` (``round_`` is t, 0-based).

Assignment. For fixed X_t and lambda, the first term is largest when the k-th highest mu goes
to the tenant with the k-th lowest lambda (swapping a better point towards a worse-off tenant
never lowers the weighted sorted sum, as the weights do not increase). The acquisition
evaluates the first term under that assignment and searches X_t jointly (an n x d problem for
``maximize_acqf(q=n)``).

Rounds in storage. A trial's round is its index among its tenant's trials. The plan of round t,
one point per tenant, is stored in the study's system attributes, one key per tenant
("fairtune:collab:plan:<round>:<tenant>", long values chunked). It is a deterministic function
of the seed and a history snapshot every process sees identically, and writes are
first-writer-wins (a stored entry is never replaced; every process returns what is stored).
The snapshot is taken at the round's earliest-numbered trial (the anchor):
    finished = the trials finished when the anchor was created: for a trial created by
               :func:`fairtune.tenancy.ask`, the set it records (the highest trial number then
               and the unfinished ones below it); otherwise the trials with
               datetime_complete <= the anchor's datetime_start (clocks that disagree or lagging
               writes can then make processes differ, and first-writer-wins keeps them on one
               plan in all but a tiny window);
    data     = every finished COMPLETE trial (for the GP and, if tagged, for lambda);
    pending  = every earlier round's point of every tenant that had not finished, at its plan
               entry (model rounds) or its seeded random point (startup rounds); pending points
               enter the GP as fantasies at their posterior mean.
When no trial had finished at the anchor (round 0 with ``n_startup_rounds=0``), the plan uses
the trials finished when it is computed, and first-writer-wins alone applies.
"""
from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.trial import FrozenTrial, TrialState

from fairtune import _keys
from fairtune._gp.acquisition import information_gain
from fairtune._gp.gp import fit_gp, standardize
from fairtune._names import arg, check_integer, check_number, got
from fairtune._optuna_compat import contains, storage_and_id, study_system_attrs, trial_id
from fairtune._storage import read_text, write_study_text
from fairtune._threads import limit_threads
from fairtune.fairness.welfare import g2sf_weights
from fairtune.samplers._base import (
    GPSamplerBase,
    derived_seed,
    direction_signs,
    encode_trials,
    name_code,
)
from fairtune.tenancy import TENANT_KEY, finished_at_creation, optimizing_tenant

if TYPE_CHECKING:
    from optuna.study import Study

__all__ = [
    "CollaborativeUCBSampler",
    "PLAN_KEY_PREFIX",
    "ROUND_KEY",
    "SEED_KEY",
    "assign_points",
    "exploration_weight",
    "g2sf_term",
]

# "<prefix>:<round>:<tenant>" -> JSON params (one key per tenant: RDB values are capped).
PLAN_KEY_PREFIX = _keys.COLLAB_PLAN_PREFIX
# Trial system attribute: the round a trial belongs to (its index among its tenant's trials).
ROUND_KEY = _keys.COLLAB_ROUND_KEY
# Study system attribute: the study's base seed (see ``_base_seed``).
SEED_KEY = _keys.COLLAB_SEED_KEY
_logger = logging.getLogger("fairtune")


def assign_points(lambda_: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Tenant -> point index: the k-th highest ``mu`` goes to the tenant with the k-th lowest
    cumulative utility ``lambda_`` (ties keep tenant order).

    Returns ``order`` with ``order[i]`` the index of tenant i's point.
    """
    tenants_by_need = np.argsort(lambda_, kind="stable")  # lowest utility first
    points_by_value = np.argsort(-mu, kind="stable")  # highest mean first
    order = np.empty(len(lambda_), dtype=int)
    order[tenants_by_need] = points_by_value
    return order


def g2sf_term(lambda_sorted: torch.Tensor, mu: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``sum_i w_i * phi_i(lambda + mu)`` under the best assignment; mu (..., n) -> (...).

    ``lambda_sorted`` (n,) is ascending; the highest mu is added to the lowest lambda, and the
    sums are sorted ascending before weighting.
    """
    mu_desc = torch.sort(mu, dim=-1, descending=True).values
    v = torch.sort(lambda_sorted + mu_desc, dim=-1).values
    return (v * w).sum(-1)


def exploration_weight(
    *, n: int, d: int, rho: float, c1: float, c2: float, t: int, vary_c1: bool
) -> float:
    """``alpha_t = c1' * d * sum_i w_i^2 * log(c2 * t)`` (clipped at 0), with
    ``c1' = c1 * (sum_i w_i)^2 / (n * sum_i w_i^2)`` if ``vary_c1`` else ``c1``.

    With ``vary_c1``, ``sqrt(alpha_t) / sum_i w_i`` does not depend on rho: exploration keeps the
    same weight relative to the G2SF term (whose scale is sum_i w_i) as at rho = 1.
    """
    w = g2sf_weights(n, rho)
    sum_w2 = float((w**2).sum())
    if vary_c1:
        c1 = c1 * float(w.sum()) ** 2 / (n * sum_w2)
    return c1 * d * sum_w2 * max(math.log(c2 * t), 0.0)


class CollaborativeUCBSampler(GPSamplerBase):
    """Collaborative Bayesian optimization with fair regret across the tenants of one study.

    Several tenants tune the same objective in one shared study; the sampler is the mediator
    of Sim, Zhang, Low and Jaillet (ICML 2021, "Collaborative Bayesian Optimization with Fair
    Regret"): it pools every tenant's observations in one GP and hands out one point per tenant
    per round.

    1. The first ``n_startup_rounds`` rounds are random for every tenant (each tenant and round
       gets its own seeded random point, so tenants in different processes never share one).
    2. In round t the n points X_t = (x_t^1..x_t^n) are chosen *jointly* (an n x d search) to
       maximize

       ``sum_i w_i * phi_i((lambda_t^i + mu(x_t^i))_i)
       + sqrt(alpha_t * 0.5 * logdet(I + sigma^-2 Sigma(X_t)))``

       where lambda_t^i is tenant i's cumulative observed utility (the sum of its observed
       values; the *negated* values for a minimized objective), mu the GP posterior mean,
       phi sorts ascending, w_i = rho^(i-1) (generalized Gini weights: the worst-off tenant
       weighs most), Sigma(X_t) the joint posterior covariance of the batch (its information
       gain rewards diverse batches) and ``alpha_t = c1 * d * sum_i w_i^2 * log(c2 * t)``. With
       ``vary_c1``, c1 is multiplied by ``(sum_i w_i)^2 / (n * sum_i w_i^2)`` (1 at rho = 1), so
       that sqrt(alpha_t) / sum_i w_i, the weight of exploration relative to the G2SF term, is
       the same for every rho. The exploration term is in units of the GP's output scale.
    3. For the chosen batch, the k-th highest mu goes to the tenant with the k-th lowest
       lambda (which maximizes the first term for that batch).

    Batches that repeat a point, or a pending one, rank below every batch that does not, so two
    tenants never get the same configuration unless the search space is too small. ``rho = 1``
    is distributed batch GP-UCB (DB-GP-UCB, the utilitarian mediator); smaller rho is fairer.

    Rounds and processes: create a tenant's trial with :func:`fairtune.tenancy.ask` (tagged at
    creation); an untagged trial goes to the tenant with the fewest trials at its first
    ``suggest_*`` call, so one ``study.optimize(objective, n_trials=n*T)`` simulates n tenants
    (read the tenant with :func:`fairtune.tenancy.tenant_of` after the first suggest). Each
    round's plan is stored in the study and computed deterministically (see the module
    docstring), so processes sharing an RDB or Journal storage get exactly one point per tenant
    per round. A failed or pruned trial uses up its tenant's slot in its round, so failures
    never stall a round; a round is done when every tenant has a finished trial in it.

    Constraints (``trial.set_constraint``) are not modelled, as in the paper: the sampler logs a
    warning once per study when its trials have them, and ``study.best_trial`` still returns the
    best feasible trial. For constrained tuning use :class:`FairBOSampler`.

    Example:
        .. code-block:: python

            import optuna
            from fairtune.samplers import CollaborativeUCBSampler
            from fairtune.tenancy import cumulative_utilities

            sampler = CollaborativeUCBSampler(tenants=["a", "b", "c"], rho=0.5, seed=0)
            study = optuna.create_study(direction="maximize", sampler=sampler)
            study.optimize(objective, n_trials=3 * 20)  # 20 rounds of 3 tenants
            print(cumulative_utilities(study))

    Args:
        tenants: Tenant names, or their number n (names "0".."n-1").
        rho: G2SF weight decay in (0, 1]. Defaults to 0.5.
        c1: Exploration constant (> 0). Defaults to 0.1.
        c2: Constant inside the logarithm of alpha_t (> 0). Defaults to 2.0.
        vary_c1: Scale c1 with rho as described above. Defaults to True.
        n_startup_rounds: Random rounds before the GP is used. Defaults to ``ceil(10 / n)``
            (about 10 random trials in all, like Optuna's GPSampler).
        independent_sampler: Sampler for parameters outside the shared search space (and for
            startup rounds, if given: it is then responsible for giving different processes
            different points). Defaults to seeded random sampling per tenant and round.
        seed: Seed of the plans and random points. The first sampler to sample a study stores
            its seed (a random one if None) in the study, and every process uses the stored
            one, so that all agree. ``reseed_rng()`` forgets ``seed`` (``study.optimize`` calls
            it for each trial when ``n_jobs > 1``): it changes the draws of a study that has no
            stored seed yet, not those of one under way. Defaults to None.
    """

    def __init__(
        self,
        *,
        tenants: Sequence[str] | int,
        rho: float = 0.5,
        c1: float | None = None,
        c2: float | None = None,
        vary_c1: bool = True,
        n_startup_rounds: int | None = None,
        independent_sampler: BaseSampler | None = None,
        seed: int | None = None,
    ) -> None:
        if isinstance(tenants, (int, np.integer)) and not isinstance(tenants, bool):
            names = [str(i) for i in range(int(tenants))]
        elif isinstance(tenants, Sequence) and not isinstance(tenants, str):
            names = list(tenants)
        else:
            names = []
        if (not names or len(set(names)) != len(names)
                or not all(isinstance(t, str) for t in names)):
            raise ValueError(f"{arg('tenants')} must be a number of tenants (at least 1) or "
                             f"distinct names (strings, at least one), but got "
                             f"{got('tenants', tenants)}.")
        if isinstance(rho, bool) or not (isinstance(rho, (int, float)) and 0.0 < rho <= 1.0):
            raise ValueError(f"`rho` must be in (0, 1], but got rho={rho!r}.")
        check_number("c1", c1, low=0.0, strict=True, optional=True)
        check_number("c2", c2, low=0.0, strict=True, optional=True)
        if n_startup_rounds is None:
            n_startup_rounds = max(1, math.ceil(10 / len(names)))
        check_integer("n_startup_rounds", n_startup_rounds)
        super().__init__(seed=seed, independent_sampler=independent_sampler, n_startup_trials=0,
                         warn_independent_sampling=True)
        self._tenants = names
        self._index = {t: i for i, t in enumerate(names)}
        self._rho = float(rho)
        self._c1 = 0.1 if c1 is None else float(c1)
        self._c2 = 2.0 if c2 is None else float(c2)
        self._vary_c1 = vary_c1
        self._n_startup_rounds = n_startup_rounds
        # Studies already told that their constraints are not modelled (one warning each).
        self._warned_constraints: set[str] = set()
        # Tuning knobs of the joint n x d search (tests shrink them).
        self._n_preliminary_samples = 256
        self._n_local_search = 3

    @property
    def tenants(self) -> list[str]:
        """The tenant names, in the order given."""
        return list(self._tenants)

    # -- tenants, rounds, seeds ------------------------------------------------------------------

    def _rounds(self, trials: Sequence[FrozenTrial]) -> dict[int, tuple[str, int]]:
        """Trial number -> (tenant, round) for the trials tagged with one of our tenants.

        The round recorded at sampling time wins; a trial not sampled yet is counted among its
        tenant's trials by number (its round once it is sampled).
        """
        counts = dict.fromkeys(self._tenants, 0)
        rounds = {}
        for t in sorted(trials, key=lambda t: t.number):
            tenant = t.user_attrs.get(TENANT_KEY)
            if tenant in counts:
                rounds[t.number] = (tenant, int(t.system_attrs.get(ROUND_KEY, counts[tenant])))
                counts[tenant] += 1
        return rounds

    def _tenant_and_round(self, study: Study, trial: FrozenTrial) -> tuple[str, int]:
        trials = study.get_trials(deepcopy=False, states=None)
        storage = storage_and_id(study)[0]
        # Read the tag from the storage: the cached frozen trial may predate it. An untagged trial
        # of fairtune.tenancy.optimize(study, tenant, ...) is that tenant's.
        tagged = storage.get_trial_user_attrs(trial_id(trial)).get(TENANT_KEY)
        tenant = tagged if tagged is not None else optimizing_tenant(study)
        if tenant is None:
            # The tenant whose turn it is: the one with the fewest trials; the trial is its next
            # round. (Under the sampler's lock, so threads of one process never collide.)
            counts = dict.fromkeys(self._tenants, 0)
            for other in trials:
                owner = other.user_attrs.get(TENANT_KEY)
                if owner in counts and other.number != trial.number:
                    counts[owner] += 1
            tenant = min(self._tenants, key=lambda t: counts[t])
            round_ = counts[tenant]
        else:
            tenant = str(tenant)
            if tenant not in self._index:
                whose = (f"trial {trial.number} belongs to" if tagged is not None
                         else "tenancy.optimize runs for")
                raise ValueError(f"{whose} tenant {tenant!r}, which is not one of the "
                                 f"sampler's `tenants` {self._tenants}.")
            # The index among the tenant's trials, by trial number.
            round_ = sum(
                1 for other in trials
                if other.number < trial.number and other.user_attrs.get(TENANT_KEY) == tenant
            )
        if tagged is None:
            storage.set_trial_user_attr(trial_id(trial), TENANT_KEY, tenant)
        storage.set_trial_system_attr(trial_id(trial), ROUND_KEY, round_)
        return tenant, round_

    def _base_seed(self, study: Study) -> int:
        """The study's shared base seed: stored by the first sampler that needs it (its `seed`,
        or a draw of its random state when it has none or was reseeded), then read by all."""
        storage, study_id = storage_and_id(study)
        attrs = storage.get_study_system_attrs(study_id)
        if SEED_KEY not in attrs:
            seed = self._rng._seed
            if seed is None:
                seed = self._rng.rng.randint(0, 2**31 - 1)
            storage.set_study_system_attr(study_id, SEED_KEY, int(seed))
            attrs = storage.get_study_system_attrs(study_id)
        return int(attrs[SEED_KEY])

    def _startup_value(
        self, study: Study, trial: FrozenTrial | None, tenant: str, round_: int, name: str,
        distribution: BaseDistribution,
    ) -> Any:
        seed = derived_seed(
            self._base_seed(study), 1, round_, self._index[tenant], name_code(name)
        )
        # ``trial`` is None for a round that no trial has reached yet (a plan computed later);
        # RandomSampler draws from its seeded RNG alone and never reads the trial.
        return RandomSampler(seed=seed).sample_independent(
            study, trial, name, distribution  # type: ignore[arg-type]
        )

    # -- sampling --------------------------------------------------------------------------------

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        self._check_study(study)
        with self._lock:
            # Tag every trial, even the first one (whose shared search space is still empty).
            tenant, round_ = self._tenant_and_round(study, trial)
            if not search_space or round_ < self._n_startup_rounds:
                return {}
            return self._plan(study, round_, search_space).get(tenant, {})

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        self._check_study(study)
        storage, study_id = storage_and_id(study)
        tenant = storage.get_trial_user_attrs(trial_id(trial)).get(TENANT_KEY)
        round_ = storage.get_trial_system_attrs(trial_id(trial)).get(ROUND_KEY)
        # Startup rounds, and a model round without a plan (it had no data yet), are random by
        # design; other parameters outside the plan are a dynamic search space.
        planned = f"{PLAN_KEY_PREFIX}:{round_}:{tenant}"
        if not (round_ is None or round_ < self._n_startup_rounds
                or planned not in storage.get_study_system_attrs(study_id)):
            _logger.warning(
                "%s samples parameter '%s' of trial %d independently: it is not in the search "
                "space shared by all trials (dynamic search spaces are not modelled).",
                type(self).__name__, param_name, trial.number,
            )
        if self._owns_independent_sampler and tenant in self._index and round_ is not None:
            return self._startup_value(
                study, trial, tenant, int(round_), param_name, param_distribution
            )
        return self._independent_sampler.sample_independent(
            study, trial, param_name, param_distribution
        )

    # -- plans -----------------------------------------------------------------------------------

    def _plan(
        self, study: Study, round_: int, search_space: dict[str, BaseDistribution]
    ) -> dict[str, dict[str, Any]]:
        """The stored plan of a round, computed and stored first if it is incomplete."""
        plan = self._read_plan(study, round_, search_space)
        if len(plan) == len(self._tenants):
            return plan
        computed = self._compute_plan(study, round_, search_space)
        if not computed:
            return plan
        self._write_plan(study, round_, computed)
        stored = self._read_plan(study, round_, search_space)
        return {tenant: stored.get(tenant, params) for tenant, params in computed.items()}

    def _read_plan(
        self, study: Study, round_: int, search_space: dict[str, BaseDistribution]
    ) -> dict[str, dict[str, Any]]:
        attrs = study_system_attrs(study)
        plan = {}
        for tenant in self._tenants:
            raw = read_text(attrs, f"{PLAN_KEY_PREFIX}:{round_}:{tenant}")
            if raw is None:
                continue
            params = json.loads(raw)
            # A plan made for another search space is not reused.
            if params.keys() == search_space.keys() and all(
                contains(dist, dist.to_internal_repr(params[name]))
                for name, dist in search_space.items()
            ):
                plan[tenant] = params
        return plan

    def _write_plan(self, study: Study, round_: int, plan: dict[str, dict[str, Any]]) -> None:
        storage, study_id = storage_and_id(study)
        attrs = storage.get_study_system_attrs(study_id)
        for tenant, params in plan.items():
            key = f"{PLAN_KEY_PREFIX}:{round_}:{tenant}"
            if key not in attrs:  # first writer wins: a stored entry is never replaced
                write_study_text(storage, study_id, key, json.dumps(params))

    def _compute_plan(
        self, study: Study, round_: int, search_space: dict[str, BaseDistribution]
    ) -> dict[str, dict[str, Any]]:
        trials = study.get_trials(deepcopy=False, states=None)
        rounds = self._rounds(trials)
        in_round = [t for t in trials if t.number in rounds and rounds[t.number][1] == round_]
        anchor = min(in_round, key=lambda t: t.number, default=None)
        cutoff: _Cutoff = finished_at_creation(anchor) if anchor is not None else None
        if cutoff is None:  # a first trial not created by tenancy.ask: by the clock
            starts = [t.datetime_start for t in in_round if t.datetime_start]
            cutoff = min(starts) if starts else None
        if cutoff is not None and not any(_usable(t, search_space, cutoff) for t in trials):
            # Nothing had finished when the round began (round 0 without startup rounds): use
            # what has finished by now; first-writer-wins keeps every tenant on one plan.
            cutoff = None
        data = [t for t in sorted(trials, key=lambda t: t.number)
                if _usable(t, search_space, cutoff)]
        if not data:
            return {}
        if study.study_name not in self._warned_constraints and any(t.constraints for t in data):
            # Sim et al.'s mediator has no constraints: say so rather than drop them quietly.
            self._warned_constraints.add(study.study_name)
            _logger.warning(
                "%s does not model constraints: the trials' constraints (%s) do not steer its "
                "points (study.best_trial still honours them). Use FairBOSampler for "
                "constrained tuning.",
                type(self).__name__,
                ", ".join(sorted({n for t in data for n in t.constraints})),
            )
        # Pending: as defined in the module docstring, whether or not its trial exists yet.
        slots = {rounds[t.number]: t for t in trials if t.number in rounds}
        pending = []
        for earlier in range(round_):
            for tenant in self._tenants:
                t = slots.get((tenant, earlier))
                if t is not None and _finished_by(t, cutoff):
                    continue  # in the data, or failed before the round began
                point = self._assigned_point(study, t or anchor, tenant, earlier, search_space)
                if point is not None:
                    pending.append(point)

        with limit_threads(len(data) + len(pending)):
            return self._optimize_plan(study, round_, search_space, data, pending)

    def _optimize_plan(
        self, study: Study, round_: int, search_space: dict[str, BaseDistribution],
        data: list[FrozenTrial], pending: list[dict[str, Any]],
    ) -> dict[str, dict[str, Any]]:
        """The round's batch from the usable trials ``data`` and the ``pending`` points."""
        sign = direction_signs(study)[0]
        lambda_ = np.zeros(len(self._tenants))
        for t in data:
            owner = t.user_attrs.get(TENANT_KEY)
            if owner in self._index:
                lambda_[self._index[owner]] += sign * t.values[0]
        ss, _, X, X_pending = encode_trials(search_space, data, pending)
        y, y_mean, y_std = standardize(sign * np.array([t.values[0] for t in data]))
        gp = fit_gp(X, torch.from_numpy(y), ss.is_categorical)
        if X_pending is not None:  # fantasies at the posterior mean
            with torch.no_grad():
                gp = gp.condition_on(X_pending, gp.posterior(X_pending)[0])

        n, d = len(self._tenants), ss.dim
        alpha_t = exploration_weight(
            n=n, d=d, rho=self._rho, c1=self._c1, c2=self._c2, t=round_ + 1, vary_c1=self._vary_c1
        )
        w = torch.from_numpy(g2sf_weights(n, self._rho))
        lambda_sorted = torch.from_numpy(np.sort(lambda_))
        scale = y_std * float(gp.params.outputscale) ** 0.5
        noise = gp.params.noise_var
        # Larger than any difference of acquisition values: a batch that repeats a point (or a
        # pending one) loses to every batch that does not, whenever the space allows one.
        big = 1e6 * (1.0 + float(np.abs(lambda_).sum()) + n * (abs(y_mean) + y_std))

        def acqf(Xb: torch.Tensor) -> torch.Tensor:  # (b, n, d) -> (b,)
            mean, cov = gp.joint_posterior(Xb)
            mu = y_mean + y_std * mean
            exploration = (alpha_t * information_gain(cov, noise)).clamp_min(0.0).sqrt()
            value = g2sf_term(lambda_sorted, mu, w) + scale * exploration
            return value - big * _n_repeats(Xb.detach(), X_pending)

        rng = np.random.RandomState(derived_seed(self._base_seed(study), 0, round_) % 2**32)
        X_best, _ = self._maximize(acqf, ss, rng, q=n)
        with torch.no_grad():
            mu = gp.posterior(torch.from_numpy(X_best))[0].numpy()
        order = assign_points(lambda_, mu)
        return {tenant: ss.decode(X_best[order[i]]) for i, tenant in enumerate(self._tenants)}

    def _assigned_point(
        self,
        study: Study,
        trial: FrozenTrial | None,
        tenant: str,
        round_: int,
        search_space: dict[str, BaseDistribution],
    ) -> dict[str, Any] | None:
        """Where an earlier round's trial was (or will be) sent, independent of how far it has
        got; ``trial`` may be another trial when the tenant has not started that round yet."""
        if round_ >= self._n_startup_rounds:
            # Earlier plans are stored before any of their trials is sampled; computing one here
            # only happens if none of its trials reached a suggest call (same result anyway).
            return self._plan(study, round_, search_space).get(tenant)
        if not self._owns_independent_sampler:
            return None
        return {
            name: self._startup_value(study, trial, tenant, round_, name, dist)
            for name, dist in search_space.items()
        }


def _n_repeats(Xb: torch.Tensor, X_pending: torch.Tensor | None) -> torch.Tensor:
    """Per batch (b, q, d), the number of point pairs that coincide, within the batch or with a
    pending point (m, d); shape (b,)."""
    q = Xb.shape[-2]
    same = (Xb[:, :, None, :] - Xb[:, None, :, :]).abs().amax(-1) < 1e-9  # (b, q, q)
    count = torch.triu(same, diagonal=1).sum((-2, -1))
    if X_pending is not None and q:
        hits = (Xb[:, :, None, :] - X_pending[None, None]).abs().amax(-1) < 1e-9  # (b, q, m)
        count = count + hits.sum((-2, -1))
    return count.to(Xb.dtype)


# When a round began: which trials had finished, as recorded by its first trial at creation
# (tenancy.ask), else the first trial's start time, or None for "now".
_Cutoff = Callable[[FrozenTrial], bool] | datetime | None


def _usable(
    trial: FrozenTrial, search_space: dict[str, BaseDistribution], cutoff: _Cutoff
) -> bool:
    return (
        _finished_by(trial, cutoff)
        and trial.state == TrialState.COMPLETE
        and trial.values is not None
        and math.isfinite(trial.values[0])
        and search_space.keys() <= trial.params.keys()
    )


def _finished_by(trial: FrozenTrial, cutoff: _Cutoff) -> bool:
    if not trial.state.is_finished():
        return False
    if callable(cutoff):
        return cutoff(trial)
    if cutoff is None or trial.datetime_complete is None:
        return True
    return trial.datetime_complete <= cutoff
