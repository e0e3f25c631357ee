"""FairBOSampler: constrained Bayesian optimization for accurate and fair models."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial

from fairtune._gp.acquisition import (
    ConstrainedMES,
    FeasibilityPhase,
    LogConstrainedEI,
    RepeatPenalty,
    incumbent,
    sample_max_values,
)
from fairtune._gp.classifier import fit_gp_classifier
from fairtune._gp.gp import fit_gp, standardize
from fairtune._gp.search_space import SearchSpace
from fairtune._names import check_choice
from fairtune.samplers._base import (
    GPSamplerBase,
    direction_signs,
    encode_trials,
)

if TYPE_CHECKING:
    from optuna.study import Study

__all__ = ["FairBOSampler"]

_ACQUISITIONS = ("cei", "cmes")
# Warm-start cache key of the repeated-outcome classifier (constraint models use "c:<name>").
_REPEATED_MODEL_KEY = "repeated outcome"


def _constraint_names(names: Sequence[str]) -> set[str]:
    """Constraint names, fairness metric aliases made canonical; near-misses of one warn."""
    import difflib
    import warnings

    from fairtune.fairness.metrics import METRICS, get_metric

    known = [n for spec in METRICS.values() for n in (spec.name, *spec.aliases)]
    result = set()
    for name in names:
        try:
            result.add(get_metric(name).name)
            continue
        except ValueError:
            result.add(name)  # a constraint set by hand (trial.set_constraint): legal
        close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.6)
        if close:
            warnings.warn(
                f"`binary_constraints` names {name!r}, which is no fairness metric; did you mean "
                f"{get_metric(close[0]).name!r} ({close[0]!r})? A name that no trial's "
                "constraint carries has no effect.",
                UserWarning,
                stacklevel=3,
            )
    return result


class FairBOSampler(GPSamplerBase):
    """Constrained Bayesian optimization that finds accurate models meeting fairness limits.

    Fair Bayesian Optimization (Perrone et al. 2021, AIES, algorithm 1) models the objective
    (e.g. validation accuracy) and every constraint (e.g. ``demographic_parity - 0.05``) with
    independent Gaussian processes over the hyperparameters:

    1. The first ``n_startup_trials`` trials come from ``independent_sampler`` (random; by
       default seeded per trial number, so that workers sharing a seed draw different points).
    2. A Matern-5/2 ARD GP is fitted to the objective and one per constraint (Optuna 5 named
       constraints, ``trial.set_constraint(name, value)``, feasible iff every value <= 0, as
       written by :func:`fairtune.fairness.set_fairness_constraints`). Constraints listed in
       ``binary_constraints`` are satisfied/violated feedback, modelled by GP classification.
    3. While no trial is feasible, the next point maximizes ``sum_j log PoF_j(x)``. When the
       constraint GPs find no point even 1 % likely to be feasible (GPs fitted to infeasible
       trials only extrapolate with overconfidence), the probability is taken under a mixture
       with copies of 2x, 4x and 8x shorter lengthscales (``FeasibilityPhase``). If every
       constraint is binary and none was ever satisfied, the point is uniformly random.
    4. Afterwards it maximizes, with ``acquisition="cei"``,
       ``log cEI(x) = log EI(x; best feasible value) + sum_j log PoF_j(x)`` (in log space, so
       that rare feasibility does not underflow; the best feasible value is the GP's largest
       posterior mean at the feasible trials); with ``acquisition="cmes"``, constrained
       max-value entropy search (Perrone et al. 2019), the expected information gain about the
       maximum *feasible* value (see :mod:`fairtune._gp.acquisition`).
    5. Running trials are pending points: each regression GP is conditioned on its posterior
       mean there, and neither an evaluated point nor the neighbourhood of a pending one (the
       same ints, steps and categories, floats within 0.1 % of their range) is proposed, so
       that ``n_jobs > 1`` and processes sharing an RDB or Journal storage get distinct points.
       A worker that finds its point claimed, or evaluated meanwhile, chooses anew.
    6. With constraints, trials that differ only in continuous floats and report bit-for-bit
       the same objective and constraint values trained the same model; the box they span is
       not proposed again (``_plateau_boxes``).
    7. With constraints, once a trial is feasible, an outcome reported by ``_repeat_min_count``
       (3) or more trials is one model trained again and again (most often one that predicts a
       single class, fair by construction). Where a repeat is more likely than not, the
       acquisition is weighted down by the probability of a *new* outcome, learned by GP
       classification: ``log cEI(x) + log min(1, 2 P(new outcome at x))`` (cMES is multiplied
       by that weight), so the search leaves such plateaus for their edges
       (``_repeated_outcomes``).

    A study without constraints is plain GP-EI (the paper's "BO" baseline). A COMPLETE trial
    that lacks a constraint the study uses counts as infeasible; failed, pruned and NaN trials
    are ignored, so under a pruner the random start lasts until ``n_startup_trials`` trials
    have completed (docs/benchmarks/multifidelity.md). Parameters outside the search space
    shared by all trials are sampled by ``independent_sampler`` with a logged warning.
    Evidence: docs/benchmarks/fairbo.md.

    Example:
        >>> import optuna
        >>> from fairtune.samplers import FairBOSampler
        >>> def objective(trial):
        ...     x = trial.suggest_float("x", 0.0, 1.0)
        ...     trial.set_constraint("unfairness", x - 0.7)  # feasible iff x <= 0.7
        ...     return x
        >>> study = optuna.create_study(direction="maximize", sampler=FairBOSampler(seed=0))
        >>> study.optimize(objective, n_trials=12)
        >>> study.best_trial.params["x"] <= 0.7
        True

    Args:
        acquisition: ``"cei"`` (log constrained expected improvement) or ``"cmes"``
            (constrained max-value entropy search). Defaults to ``"cei"``.
        n_startup_trials: Number of trials sampled by ``independent_sampler`` before the GPs
            are used. Defaults to 5.
        independent_sampler: Sampler for the startup trials and for parameters outside the
            shared search space. Defaults to random draws seeded by ``(seed, trial number,
            parameter name)`` (step 1; without a seed, ``RandomSampler()``).
        seed: Seed of the sampler's randomness. Defaults to None.
        binary_constraints: ``True`` to treat every constraint as binary feedback (only its
            sign is used), or a list of constraint names to treat so; the others are
            real-valued. A fairness metric's alias (``"dsp"``) stands for the name
            ``set_fairness_constraints`` gives its constraint (``"demographic_parity"``); a
            name that looks like a misspelt metric (``"dps"``) warns. Defaults to False.
        deterministic_objective: Whether the objective is noise-free (the GP noise is then
            fixed at a tiny value). Defaults to False.
        warn_independent_sampling: Whether to log a warning when a parameter is sampled by
            ``independent_sampler`` after the startup phase. Defaults to True.

    References:
        V. Perrone, M. Donini, M. B. Zafar, R. Schmucker, K. Kenthapadi, C. Archambeau.
        "Fair Bayesian Optimization." AIES 2021.
        V. Perrone, I. Shcherbatyi, R. Jenatton, C. Archambeau, M. Seeger. "Constrained Bayesian
        Optimization with Max-Value Entropy Search." NeurIPS 2019 Meta-Learning workshop.
    """

    def __init__(
        self,
        *,
        acquisition: Literal["cei", "cmes"] = "cei",
        n_startup_trials: int = 5,
        independent_sampler: BaseSampler | None = None,
        seed: int | None = None,
        binary_constraints: bool | Sequence[str] = False,
        deterministic_objective: bool = False,
        warn_independent_sampling: bool = True,
    ) -> None:
        check_choice("acquisition", acquisition, _ACQUISITIONS)
        names_ok = isinstance(binary_constraints, Sequence) and all(
            isinstance(n, str) for n in binary_constraints)
        if isinstance(binary_constraints, str) or not (
                isinstance(binary_constraints, bool) or names_ok):
            raise ValueError("`binary_constraints` must be a bool or a list of constraint "
                             f"names, but got binary_constraints={binary_constraints!r}.")
        check_choice("deterministic_objective", deterministic_objective, (False, True))
        super().__init__(seed=seed, independent_sampler=independent_sampler,
                         n_startup_trials=n_startup_trials,
                         warn_independent_sampling=warn_independent_sampling)
        self._acquisition = acquisition
        self._binary_constraints = (
            binary_constraints if isinstance(binary_constraints, bool)
            else _constraint_names(binary_constraints)
        )
        self._deterministic = deterministic_objective
        # Tuning knobs (private: tests and benchmarks may shrink them).
        self._n_max_value_samples = 16
        self._n_max_value_candidates = 1000
        self._feasibility_lengthscale_factors = (1.0, 0.5, 0.25, 0.125)
        self._feasibility_trust_level = 0.01
        # An outcome reported by this many trials is a repeated model (step 7); None disables.
        self._repeat_min_count: int | None = 3
        # Long local searches (cheap on the numpy gradient) win a constrained optimum's last
        # digits (docs/benchmarks/fairbo.md, "Against Optuna 5.1's GPSampler").
        self._optim_max_iter = 100

    def _is_binary(self, name: str) -> bool:
        if isinstance(self._binary_constraints, bool):
            return self._binary_constraints
        return name in self._binary_constraints

    def _acquisition_of(self, study: Study, ss: SearchSpace, rng: Any, X: torch.Tensor,
                        y: np.ndarray, names: list[str], feasible: np.ndarray,
                        complete: Sequence[FrozenTrial], objective_gp: Any, constraints: Any
                        ) -> Callable[[torch.Tensor], torch.Tensor]:
        """The acquisition to maximize: the feasibility phase while no trial is feasible,
        else constrained MES or log constrained EI, with the repeated-outcome penalty."""
        # Step 7: the probability of a new outcome, once there is something to improve on.
        repeat = RepeatPenalty()
        if names and feasible.any() and self._repeat_min_count is not None:
            repeated = _repeated_outcomes(complete, names, self._repeat_min_count)
            if repeated.any():
                repeat = RepeatPenalty([self._fit(fit_gp_classifier, study,
                                                  _REPEATED_MODEL_KEY, X, ~repeated, ss)])
        if names and not feasible.any():
            # Algorithm 1 of Fair BO, for either acquisition: find a feasible point first.
            probe = torch.from_numpy(ss.sample(1024, np.random.RandomState(0)))
            return FeasibilityPhase.of(constraints, probe,
                                       list(self._feasibility_lengthscale_factors),
                                       self._feasibility_trust_level)
        if self._acquisition == "cmes":
            # Maxima drawn at quasi-random candidates and the model's points, floored at the
            # best feasible observation (there is one: cMES runs once a trial is feasible, or
            # without constraints, where every trial counts).
            candidates = torch.cat([
                torch.from_numpy(ss.sample(self._n_max_value_candidates, rng)),
                objective_gp.X_train,
            ])
            generator = torch.Generator().manual_seed(int(rng.randint(0, 2**31 - 1)))
            y_star = sample_max_values(objective_gp, constraints, candidates,
                                       self._n_max_value_samples, generator,
                                       float((y[feasible] if names else y).max()))
            return ConstrainedMES(objective_gp, y_star, constraints, repeat)
        best_f = incumbent(objective_gp, X[torch.from_numpy(feasible)] if names else X)
        return LogConstrainedEI(objective_gp, best_f, constraints, repeat)

    def _sample_relative_impl(
        self,
        study: Study,
        search_space: dict[str, BaseDistribution],
        complete: Sequence[FrozenTrial],
        pending: Sequence[dict[str, Any]],
    ) -> dict[str, Any]:
        rng = self._rng.rng
        ss, X_np, X, X_pending = encode_trials(search_space, complete, pending)
        names = sorted({name for t in complete for name in t.constraints})
        if names and all(self._is_binary(n) for n in names) and not any(
            t.constraints.get(n, math.nan) <= 0.0 for t in complete for n in names
        ):
            # Never-satisfied binary feedback says nothing about where feasibility lies (a
            # classifier would only favour the box's corners): sample uniformly instead.
            return ss.decode(ss.sample(1, rng)[0])

        sign = direction_signs(study)[0]
        y, _, _ = standardize(sign * np.array([t.value for t in complete], dtype=float))
        objective_gp = self._fit(fit_gp, study, "objective", X, y, ss,
                                 deterministic=self._deterministic)
        constraints, feasible = self._fit_constraints(study, names, complete, X, ss)
        if X_pending is not None:
            with torch.no_grad():
                objective_gp = objective_gp.condition_on(
                    X_pending, objective_gp.posterior(X_pending)[0]
                )
            constraints = constraints.condition_on(X_pending)
        acqf = self._acquisition_of(study, ss, rng, X, y, names, feasible, complete,
                                    objective_gp, constraints)

        # Warm start from the best feasible point (or the best point when none is feasible).
        order = np.argsort(-np.where(feasible, y, y - 1e6))
        warm_starts = X_np[order[:1]][:, None, :]
        # Pending points exclude their neighbourhood (two workers must not train one model twice);
        # evaluated points only themselves: a constrained optimum is refined along its boundary
        # by steps finer than the neighbourhood (docs/benchmarks/fairbo.md).
        evaluated = np.repeat(ss.round(X_np)[:, None, :], 2, axis=1)  # boxes of one point
        x_best, _ = self._maximize(
            acqf, ss, rng, warm_starts=warm_starts,
            exclude=None if X_pending is None else ss.round(X_pending.numpy()),
            exclude_boxes=np.concatenate([evaluated, _plateau_boxes(complete, names, X_np, ss)]),
        )
        return ss.decode(x_best[0])


def _plateau_boxes(
    complete: Sequence[FrozenTrial], names: list[str], X: np.ndarray, ss: SearchSpace
) -> np.ndarray:
    """Boxes of the encoded space that repeat a result already observed, shape (k, 2, d).

    Trials that agree on every parameter except continuous floats and report bit-for-bit the
    same outcome ran the same model (e.g. ``min_samples_split`` fractions that round to the
    same sample count); for such threshold-like parameters every value in between gives that
    model again. The box a group spans is excluded unless a trial inside it reported something
    else. Only studies with constraints qualify: a single accuracy is often equal for
    different models by coincidence, the objective and a constraint together rarely are.
    """
    empty = np.empty((0, 2, ss.dim))
    if not names or not ss.is_continuous.any():
        return empty
    fixed = ~ss.is_continuous
    outcomes: list[tuple[float, ...] | None] = []
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, t in enumerate(complete):
        outcome = _outcome(t, names)
        outcomes.append(outcome)
        if outcome is None:
            continue
        groups.setdefault((outcome, tuple(np.round(X[i, fixed], 12))), []).append(i)
    boxes = []
    for (outcome, _), members in groups.items():
        if len(members) < 2:
            continue
        low, high = X[members].min(0), X[members].max(0)
        if not (high > low).any():
            continue
        inside = np.all((X >= low - 1e-12) & (X <= high + 1e-12), axis=1)
        if any(outcomes[i] != outcome for i in np.flatnonzero(inside)):
            continue  # a different result between them: not one model throughout
        boxes.append(np.stack([low, high]))
    return np.array(boxes) if boxes else empty


def _outcome(trial: FrozenTrial, names: list[str]) -> tuple[float, ...] | None:
    """(objective, constraint values...) of a trial; None when any of them is missing or NaN."""
    if trial.value is None:
        return None
    outcome = (float(trial.value), *(float(trial.constraints.get(n, math.nan)) for n in names))
    return None if any(math.isnan(v) for v in outcome) else outcome


def _repeated_outcomes(
    complete: Sequence[FrozenTrial], names: list[str], min_count: int
) -> np.ndarray:
    """Mask (n,) of the trials whose outcome (``_outcome``) at least ``min_count`` trials
    reported. Unlike ``_plateau_boxes``, the trials may differ in any parameter: a one-class
    classifier (a demographic parity gap of exactly 0) comes from too few trees, too small a
    learning rate or too strong a regularization alike.
    """
    outcomes = [_outcome(t, names) for t in complete]
    counts = Counter(o for o in outcomes if o is not None)
    return np.array([o is not None and counts[o] >= min_count for o in outcomes], dtype=bool)
