"""Glue shared by fairtune's GP samplers: trials -> arrays, startup phase, fallbacks, seeding.

Samplers stay thin: they read the study here, hand tensors to :mod:`fairtune._gp`, and turn the
chosen encoded point back into parameters.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import optuna
import torch
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.search_space import IntersectionSearchSpace
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from fairtune import _keys
from fairtune._gp.acquisition import Constraints
from fairtune._gp.classifier import GPClassifier, fit_gp_classifier
from fairtune._gp.gp import GPRegressor, fit_gp, impute_violations, standardize
from fairtune._gp.optim import AcqFunc, maximize_acqf
from fairtune._gp.search_space import SearchSpace
from fairtune._names import check_choice, check_integer
from fairtune._optuna_compat import storage_and_id, study_key, trial_id
from fairtune._storage import fail_stale_trials, read_trial_text, write_trial_text
from fairtune._threads import limit_threads

if TYPE_CHECKING:
    from optuna.study import Study

_logger = logging.getLogger("fairtune")
_Model = TypeVar("_Model", GPRegressor, GPClassifier)

# Trial system attribute where a sampler records the parameters it proposed, so that other
# workers see them as a pending point before the trial's suggest_* calls have stored them.
RELATIVE_PARAMS_KEY = _keys.RELATIVE_PARAMS_KEY
# When the record was written (wall clock), which decides who yields when two workers chose one
# point. (Workers on machines whose clocks disagree by more than a suggestion's time may both
# keep it.)
_CLAIM_TIME_KEY = _keys.CLAIM_TIME_KEY
# How many times a worker re-chooses a point that another worker claimed first, at least: each
# re-choice may collide with the point of another worker that chose at the same moment, so the
# bound grows with the number of running trials (see _sample_and_claim).
_MAX_RECHOOSE = 3


def direction_signs(study: Study) -> np.ndarray:
    """(n_objectives,): 1 for a maximized objective, -1 for a minimized one (the GP engine always
    maximizes, so minimized values enter negated)."""
    return np.array([1.0 if d == StudyDirection.MAXIMIZE else -1.0 for d in study.directions])


def derived_seed(*parts: int) -> int:
    """A seed that depends on every part (e.g. a base seed, a trial number, a name's code)."""
    return int(np.random.SeedSequence([int(p) % 2**63 for p in parts]).generate_state(1)[0])


def name_code(name: str) -> int:
    """A process-independent code for a string (``hash()`` is salted per process)."""
    return zlib.crc32(name.encode())


class TrialSeededRandomSampler(BaseSampler):
    """Random search whose draw depends only on (seed, trial number, parameter name).

    Workers that share a study's storage and were given the same seed draw different points,
    because trial numbers are unique within a study (an ordinary seeded ``RandomSampler`` gives
    every worker the same sequence), and a study's draws are still reproducible from its seed.
    The samplers' random startup when given a seed and no ``independent_sampler`` (without a
    seed, ``RandomSampler()``: fresh randomness in every process), and the command line's.
    """

    def __init__(self, seed: int) -> None:
        self._seed = seed

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return {}

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        seed = derived_seed(self._seed, trial.number, name_code(param_name)) % 2**32
        return optuna.samplers.RandomSampler(seed=seed).sample_independent(
            study, trial, param_name, param_distribution
        )

    def reseed_rng(self) -> None:
        self._seed = int(np.random.SeedSequence().generate_state(1)[0])


class LazyRandomState:
    """A ``numpy.random.RandomState`` created on first use (cheap to construct and pickle)."""

    def __init__(self, seed: int | None) -> None:
        self._seed = seed
        self._rng: np.random.RandomState | None = None

    @property
    def rng(self) -> np.random.RandomState:
        if self._rng is None:
            self._rng = np.random.RandomState(self._seed)
        return self._rng

    def reseed(self) -> None:
        self._seed = None
        self.rng.seed()


def encode_trials(
    search_space: dict[str, BaseDistribution], complete: Sequence[FrozenTrial],
    pending: Sequence[dict[str, Any]],
) -> tuple[SearchSpace, np.ndarray, torch.Tensor, torch.Tensor | None]:
    """The encoded space, the trials' points as an array and a tensor (n, d), and the pending
    points (m, d) or None when nothing is pending."""
    ss = SearchSpace(search_space)
    X_np = ss.encode([t.params for t in complete])
    X_pending = torch.from_numpy(ss.encode(pending)) if pending else None
    return ss, X_np, torch.from_numpy(X_np), X_pending


def store_relative_params(study: Study, trial: FrozenTrial, params: dict[str, Any]) -> float:
    """Record ``params`` as the trial's pending point; returns the claim's time."""
    storage = storage_and_id(study)[0]
    write_trial_text(storage, trial_id(trial), RELATIVE_PARAMS_KEY, json.dumps(params))
    claimed = time.time()
    storage.set_trial_system_attr(trial_id(trial), _CLAIM_TIME_KEY, claimed)
    return claimed


def pending_params(trial: FrozenTrial) -> dict[str, Any]:
    """The parameters a running trial has or was assigned (stored params win)."""
    text = read_trial_text(trial.system_attrs, RELATIVE_PARAMS_KEY)
    params: dict[str, Any] = json.loads(text) if text else {}
    params.update(trial.params)
    return params


def _claimed_earlier(
    study: Study, trial: FrozenTrial, params: dict[str, Any], claimed: float,
    search_space: dict[str, BaseDistribution], seen: dict[int, dict[str, Any]],
) -> bool:
    """Whether a trial the point was not chosen against holds ``params`` or a point in its
    neighbourhood (``SearchSpace.is_near``: the same ints, steps and categories, floats within
    0.1 % of their range) and claimed it first: a complete trial (evaluated meanwhile) always did;
    among running trials, the earlier claim time, then the lower trial number, wins, and a point
    without a claim time (set by ``suggest_*`` or another sampler) counts as first. A trial
    whose point is the one ``seen`` records for it was known when the point was chosen: the
    acquisition's optimizer returns a known point only when every other is excluded (a tiny,
    exhausted discrete space). A trial may have claimed another point since (it was re-chosen):
    that one was not known."""
    ss = SearchSpace(search_space)
    mine = ss.encode([params])[0]
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.COMPLETE)):
        if trial_id(t) == trial_id(trial):
            continue
        other = pending_params(t) if t.state == TrialState.RUNNING else t.params
        if not search_space.keys() <= other.keys():
            continue
        known = seen.get(t.number)
        if known is not None and all(known.get(k) == other[k] for k in search_space):
            continue
        if not ss.is_near(ss.encode([other])[0], mine):
            continue
        if t.state == TrialState.COMPLETE:
            return True
        if (_claim_time(study, t), t.number) < (claimed, trial.number):
            return True
    return False


# How long a worker waits for the claim time of another worker's point to appear (it is written
# right after the point; a point whose time never comes, e.g. its worker died, counts as first).
_CLAIM_TIME_WAIT = 2.0


def _claim_time(study: Study, trial: FrozenTrial) -> float:
    """When ``trial`` claimed its pending point (-inf for a point set by ``suggest_*`` or
    another sampler). The point and its time are two writes: a point seen without its time is
    read again until the time appears. Counting it as first at once made two workers that chose
    one point at the same moment both yield, and both choose the same next point again, until
    the re-choices ran out (seen on PostgreSQL under load: two trials with one point)."""
    claimed = trial.system_attrs.get(_CLAIM_TIME_KEY)
    if claimed is not None or read_trial_text(trial.system_attrs, RELATIVE_PARAMS_KEY) is None:
        return -math.inf if claimed is None else float(claimed)
    deadline = time.monotonic() + _CLAIM_TIME_WAIT
    while time.monotonic() < deadline:
        time.sleep(0.01)
        fresh = storage_and_id(study)[0].get_trial(trial_id(trial))
        if fresh.state != TrialState.RUNNING:
            break
        claimed = fresh.system_attrs.get(_CLAIM_TIME_KEY)
        if claimed is not None:
            return float(claimed)
    return -math.inf


def collect_trials(
    study: Study, search_space: dict[str, BaseDistribution], current: FrozenTrial | None = None,
    seen: dict[int, dict[str, Any]] | None = None,
) -> tuple[list[FrozenTrial], list[dict[str, Any]]]:
    """COMPLETE trials usable by a model, and the parameters of pending (RUNNING) trials.

    A complete trial is used when it has every parameter of ``search_space`` and a non-NaN
    value; failed, pruned and NaN trials are left out. A running trial is pending when its
    parameters (or the ones a sampler assigned it) cover the search space. ``seen``, if given,
    records each returned trial's number and parameters.
    """
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
    names = search_space.keys()
    seen = {} if seen is None else seen
    complete, pending = [], []
    for t in trials:
        if t.state == TrialState.COMPLETE:
            if t.values is None or any(math.isnan(v) for v in t.values):
                continue
            if names <= t.params.keys():
                complete.append(t)
                seen[t.number] = t.params
        elif current is None or trial_id(t) != trial_id(current):
            params = pending_params(t)
            if names <= params.keys():
                pending.append(params)
                seen[t.number] = params
    return complete, pending


class GPSamplerBase(BaseSampler):
    """Common behaviour of fairtune's model-based samplers (not public).

    Subclasses implement :meth:`_sample_relative_impl`.
    """

    def __init__(
        self,
        *,
        seed: int | None,
        independent_sampler: BaseSampler | None,
        n_startup_trials: int,
        warn_independent_sampling: bool,
    ) -> None:
        check_integer("n_startup_trials", n_startup_trials)
        check_integer("seed", seed, seed=True)
        if independent_sampler is not None and not isinstance(independent_sampler, BaseSampler):
            raise ValueError(
                "`independent_sampler` must be an optuna sampler or None, but got "
                f"independent_sampler={independent_sampler!r}."
            )
        self._rng = LazyRandomState(seed)
        self._owns_independent_sampler = independent_sampler is None
        self._independent_sampler = independent_sampler or (
            optuna.samplers.RandomSampler() if seed is None else TrialSeededRandomSampler(seed)
        )
        self._n_startup_trials = n_startup_trials
        check_choice("warn_independent_sampling", warn_independent_sampling, (False, True))
        self._warn_independent_sampling = warn_independent_sampling
        self._intersection_search_space = IntersectionSearchSpace()
        # Warm starts of the model fits and other per-study state, keyed by (study name, name).
        self._cache: dict[tuple[str, str], Any] = {}
        # Tuning knobs of the acquisition's optimizer (private: tests and benchmarks shrink them).
        self._n_preliminary_samples = 1024
        self._n_local_search = 5
        self._optim_max_iter = 30
        # One sampler object serves every thread of study.optimize(n_jobs>1); the lock makes a
        # suggestion and its recording as a pending point atomic, so threads never collide.
        self._lock = threading.Lock()
        # Trials of this process sampled at random as startup trials (see sample_relative),
        # keyed by (storage, trial id): one sampler object may serve studies in two storages.
        self._startup_trials: set[tuple[int, int]] = set()

    def __getstate__(self) -> dict[str, Any]:
        # Locks cannot be pickled. Optuna's own samplers can, and users save a sampler with
        # pickle to resume a study with its random state; the restored copy gets a new lock.
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def reseed_rng(self) -> None:
        self._rng.reseed()
        self._independent_sampler.reseed_rng()

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return {
            name: dist
            for name, dist in self._intersection_search_space.calculate(study).items()
            if not dist.single()
        }

    def _check_study(self, study: Study) -> None:
        """Reject studies the sampler cannot model (single-objective only, unless overridden)."""
        if len(study.directions) > 1:
            raise ValueError(
                f"{type(self).__name__} supports single-objective studies only, but the study "
                f"has {len(study.directions)} objectives "
                f"(directions={[d.name.lower() for d in study.directions]})."
            )

    def _maximize(
        self, acqf: AcqFunc, ss: SearchSpace, rng: np.random.RandomState, **kwargs: Any
    ) -> tuple[np.ndarray, float]:
        """:func:`~fairtune._gp.optim.maximize_acqf` with this sampler's tuning knobs."""
        return maximize_acqf(acqf, ss, rng=rng, n_preliminary_samples=self._n_preliminary_samples,
                             n_local_search=self._n_local_search, max_iter=self._optim_max_iter,
                             **kwargs)

    # -- models, warm-started from the last fit of the same study and name --------------------

    def _fit(
        self, fit: Callable[..., _Model], study: Study, key: str, X: torch.Tensor,
        y: np.ndarray, ss: SearchSpace, **kwargs: Any,
    ) -> _Model:
        """``fit_gp`` or ``fit_gp_classifier`` on ``y`` (n,), from this study's last fit."""
        cache_key = (study.study_name, key)
        model = fit(X, torch.from_numpy(y.astype(float)), ss.is_categorical,
                    warm_start=self._cache.get(cache_key), **kwargs)
        self._cache[cache_key] = model.params
        return model

    def _is_binary(self, name: str) -> bool:
        """Whether constraint ``name`` is binary feedback, modelled by a GP classifier."""
        return False

    def _fit_constraints(
        self, study: Study, names: list[str], complete: Sequence[FrozenTrial],
        X: torch.Tensor, ss: SearchSpace,
    ) -> tuple[Constraints, np.ndarray]:
        """A model per constraint (a GP regressor of its value with its standardized threshold,
        or a GP classifier of binary feedback) and the mask (n,) of the trials that met every
        constraint. A missing value counts as not met (a trial that lacks a constraint is
        infeasible); the regressor sees it as a clear violation."""
        feasible = np.ones(len(complete), dtype=bool)
        constraints = Constraints()
        for name in names:
            raw = np.array([t.constraints.get(name, np.nan) for t in complete], dtype=float)
            met = ~np.isnan(raw) & (np.nan_to_num(raw, nan=1.0) <= 0.0)
            feasible &= met
            if self._is_binary(name):
                constraints.classifiers.append(
                    self._fit(fit_gp_classifier, study, "c:" + name, X, met, ss))
                continue
            c, mean, std = standardize(impute_violations(raw))
            gp = self._fit(fit_gp, study, "c:" + name, X, c, ss)
            constraints.regression.append((gp, (0.0 - mean) / std))
        return constraints, feasible

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        self._check_study(study)
        # Optuna calls this at the trial's first suggest_* call. A trial found in the startup
        # phase here is random by design, even if other trials complete before its later
        # suggest_* calls (n_jobs > 1): remember it, so that sample_independent does not
        # mistake those parameters for a dynamic search space.
        with self._lock:
            seen: dict[int, dict[str, Any]] = {}
            complete, pending = collect_trials(study, search_space, trial, seen)
            if len(complete) < max(self._n_startup_trials, 1):
                self._startup_trials.add(_trial_key(study, trial))
                return {}
            if not search_space:
                return {}
            with limit_threads(len(complete) + len(pending)):
                return self._sample_and_claim(study, trial, search_space, complete, pending, seen)

    def _sample_and_claim(
        self,
        study: Study,
        trial: FrozenTrial,
        search_space: dict[str, BaseDistribution],
        complete: list[FrozenTrial],
        pending: list[dict[str, Any]],
        seen: dict[int, dict[str, Any]],
    ) -> dict[str, Any]:
        """The trial's point, recorded as its claim (chosen anew while another worker's earlier
        claim holds the same point)."""
        params = self._sample_relative_impl(study, search_space, complete, pending)
        if not params:
            return params
        claimed = store_relative_params(study, trial, params)
        # Other processes sharing the storage may have chosen from the same trials while
        # this one computed (workers started together all do), and the acquisition's
        # maximum is the same for all of them. Each worker records its point first and then
        # looks: the later claim of a point is chosen anew with the earlier one pending.
        # (Of two claims, the later writer always sees the earlier one.)
        attempts = max(_MAX_RECHOOSE, len(pending) + 1)
        for attempt in range(attempts + 1):
            if not _claimed_earlier(study, trial, params, claimed, search_space, seen):
                return params
            if attempt == attempts:
                break
            complete, pending = collect_trials(study, search_space, trial, seen)
            params = self._sample_relative_impl(study, search_space, complete, pending)
            claimed = store_relative_params(study, trial, params)
        # Every re-choice was taken as well. Workers that share a seed and see the same trials
        # choose the same point, so several that lose to one faster worker again and again stay
        # together. A random point drawn for this trial ends the chase.
        params = self._random_params(search_space, trial)
        store_relative_params(study, trial, params)
        return params

    def _random_params(
        self, search_space: dict[str, BaseDistribution], trial: FrozenTrial
    ) -> dict[str, Any]:
        """A uniformly random point of ``search_space``, drawn per (seed, trial number)."""
        seed = self._rng._seed
        rng = np.random.RandomState(None if seed is None else derived_seed(seed, trial.number, 2))
        ss = SearchSpace(search_space)
        return ss.decode(ss.sample(1, rng)[0])

    def _sample_relative_impl(
        self,
        study: Study,
        search_space: dict[str, BaseDistribution],
        complete: Sequence[FrozenTrial],
        pending: Sequence[dict[str, Any]],
    ) -> dict[str, Any]:
        raise NotImplementedError

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        self._check_study(study)
        if (
            self._warn_independent_sampling
            and _trial_key(study, trial) not in self._startup_trials
        ):
            _logger.warning(
                "%s samples parameter '%s' of trial %d with %s: it is not in the search "
                "space shared by all trials (dynamic search spaces are not modelled).",
                type(self).__name__,
                param_name,
                trial.number,
                type(self._independent_sampler).__name__,
            )
        return self._independent_sampler.sample_independent(
            study, trial, param_name, param_distribution
        )

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        # A RUNNING trial counts as a pending point: one whose worker died before its first
        # heartbeat would be one forever (Optuna's own sweep misses it).
        fail_stale_trials(study)
        self._independent_sampler.before_trial(study, trial)

    def after_trial(
        self,
        study: Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        self._startup_trials.discard(_trial_key(study, trial))
        self._independent_sampler.after_trial(study, trial, state, values)


def _trial_key(study: Study, trial: FrozenTrial) -> tuple[int, int]:
    """A key of ``trial`` unique within this process (trial ids are unique per storage)."""
    return study_key(study)[0], trial_id(trial)
