"""MTKBSampler: multi-task kernelized bandits (MT-KB, MT-BKB) for multi-objective studies."""

from __future__ import annotations

import json
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial

from fairtune._gp import multitask as mt
from fairtune._gp.acquisition import FeasibilityPhase, PenalizedUCB
from fairtune._gp.gp import standardize
from fairtune._gp.search_space import SearchSpace
from fairtune._names import check_choice, check_integer, check_number
from fairtune._optuna_compat import storage_and_id
from fairtune._storage import TASK_CORRELATION_KEY, stored_task_correlation, write_study_text
from fairtune._threads import limit_threads
from fairtune.samplers._base import (
    GPSamplerBase,
    collect_trials,
    direction_signs,
    encode_trials,
)

if TYPE_CHECKING:
    from optuna.study import Study

__all__ = ["MTKBSampler"]

_TASK_COVARIANCES = ("learned", "independent")
_UTILITY_UNITS = ("standardized", "objectives")
DEFAULT_Q = 4.0
# Penalty per unit of optimistic constraint violation (standardized units) in the acquisition.
_CONSTRAINT_PENALTY = 1e3
# The multi-task GP is also fitted from the defaults whenever the number of trials has grown by
# this factor since the last such fit.
_RESTART_GROWTH = 1.25

WeightsPrior = Sequence[float] | np.ndarray | Callable[[np.random.RandomState], Any] | None


class MTKBSampler(GPSamplerBase):
    """Multi-task kernelized bandits: expected-utility UCB over related objectives.

    MT-KB and MT-BKB (Chowdhury & Gopalan 2021) model the objectives f = (f_1..f_n) jointly with
    a multi-task GP whose ICM kernel Gamma(x, x') = k(x, x') B couples them through a signed
    task covariance B (accuracy and a fairness gap are often anti-correlated), and pick the
    point of highest optimistic expected utility under a prior over preference weights:

    1. The first ``n_startup_trials`` trials come from ``independent_sampler`` (random).
    2. Each objective is made maximized and standardized on its own. The GP (k Matern-5/2 ARD)
       is fitted by marginal likelihood, warm-started: lengthscales, noise and, with
       ``task_covariance="learned"``, B = L L^T + diag(exp(v)) (LKJ prior); see
       :mod:`fairtune._gp.multitask`.
    3. Weight vectors lambda_1..lambda_k are drawn from the prior (or given), and the next point
       maximizes ``u_t(x) = mean_k s_lambda_k(mu_t(x)) + beta_t w_t(x)`` with the Chebyshev
       ``s_lambda(y) = min_i lambda_i (y_i - z_i)`` or linear ``sum_i lambda_i y_i``
       scalarization. The confidence width w_t depends on ``width``:
       ``"scalarized"`` scalarizes the objectives' upper confidence bounds (Paria et al. 2020;
       for Chebyshev ``mean_k min_i lambda_ki (mu_i + beta_t sigma_i - z_i)``, the tightest
       valid bound; for linear the width of ``lambda^T f``);
       ``"objectives"`` uses each objective's own bound (the paper's remark 2:
       ``mean_k max_i lambda_ki sigma_i(x)`` or ``mean_k (lambda_k^T Gamma_t(x, x)
       lambda_k)^(1/2)``); ``"norm"`` is the paper's eq. 3, ``L ||Gamma_t(x, x)||^(1/2)`` with
       L the scalarizations' Lipschitz constant (widest: about sqrt(n) times "objectives" when
       n objectives are strongly correlated).
    4. With ``budgeted=True`` (MT-BKB) the posterior is the Nystrom approximation on a
       dictionary resampled every step: training point x_i joins with probability
       ``min(q ||Gamma~(x_i, x_i)|| / eta, 1)`` (q times its ridge leverage score, eta the
       noise variance). Kernel parameters are fitted on at most 100 random trials.
    5. Running trials are pending points: the model is conditioned on its posterior mean there
       and no pending point is proposed again, so ``n_jobs > 1`` and processes sharing a
       storage get distinct points. An evaluated point may be proposed again (objectives are
       noisy in the paper's setting).
    6. Constraints (``trial.set_constraint``, feasible iff <= 0) each get a GP. While no trial is
       feasible, the next point maximizes ``sum_j log PoF_j(x)``; afterwards u_t(x) is
       maximized over the optimistically feasible set ``{x: mean_j - beta_t sigma_j <= 0}``,
       penalizing optimistic violation (constrained GP-UCB). A missing value is infeasible.

    A single-objective study is GP-UCB. Failed, pruned and NaN trials are ignored; parameters
    outside the search space shared by all trials are sampled by ``independent_sampler`` with a
    logged warning. :meth:`task_correlation` gives the fitted B as a correlation matrix, and
    :meth:`stored_task_correlation` the last one stored with a study. Evidence:
    docs/benchmarks/mtkb.md.

    Example:
        >>> import optuna
        >>> from fairtune.samplers import MTKBSampler
        >>> def objective(trial):
        ...     x = trial.suggest_float("x", 0.0, 1.0)
        ...     return x, (x - 0.3) ** 2  # maximize the first, minimize the second
        >>> sampler = MTKBSampler(seed=0)
        >>> study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
        >>> study.optimize(objective, n_trials=10)
        >>> sampler.task_correlation(study).shape
        (2, 2)

    Args:
        scalarization: ``"chebyshev"`` or ``"linear"``. Defaults to "chebyshev".
        weights: The prior over preference weights (one weight per objective, applied in the
            units of ``utility_units``): None for the paper's random prior (section 5, after Paria
            et al. 2020), a fixed vector (a Dirac prior; normalized to sum to 1), or a callable
            ``rng -> (k, n) array`` of weight vectors (each row normalized). Defaults to None.
        n_weight_samples: Number of weight vectors drawn per suggestion from the random prior.
            Defaults to 16.
        reference_point: The Chebyshev reference point z, in the objectives' own units and
            directions, worse than every value of interest (like a hypervolume reference point).
            Defaults to None: per standardized objective, 0.1 of the observed range below the
            worst observed value.
        utility_units: The units in which the weights trade the (maximized) objectives:
            ``"standardized"`` (each objective standardized by its observed mean and standard
            deviation, so weights do not depend on scales) or ``"objectives"`` (their own
            units, as in the paper). Scores agree with the sampler's only when these units, the
            weight prior and the reference point agree. Defaults to "standardized".
        task_covariance: ``"learned"`` (B by marginal likelihood), ``"independent"`` (B
            diagonal: the paper's IT-KB baseline), a float omega in [0, 1]
            (B = omega I + (1 - omega) 11^T / n, Evgeniou et al. 2005), or an n x n p.s.d.
            matrix (for the standardized objectives). Defaults to "learned".
        budgeted: Use the Nystrom approximation (MT-BKB). Defaults to False.
        q: Oversampling factor of MT-BKB's dictionary (q >= 1; larger is more accurate and
            slower). Defaults to 4. None: the paper's theorem 3, q = 6 rho log(4t / delta) /
            eps^2 with eps = 0.5, delta = 0.1, rho = (1 + eps) / (1 - eps), a worst-case
            constant (about 600 for 100 trials) that keeps nearly every trial in the
            dictionary.
        beta: Confidence width beta_t. Defaults to None: ``sqrt(0.2 d log(2t))`` (Kandasamy et
            al. 2015), with d the number of parameters and t the number of trials.
        width: How the upper confidence bound of the expected utility is formed (step 3):
            ``"scalarized"``, ``"objectives"`` (explores more) or ``"norm"``. Defaults to
            "scalarized".
        n_startup_trials: Number of random trials before the model is used. Defaults to 5.
        independent_sampler: Sampler for the startup trials and for parameters outside the
            shared search space. Defaults to random draws seeded per (seed, trial number,
            parameter), so that workers sharing a seed draw different startup points.
        seed: Seed of the sampler's randomness. Defaults to None.
        warn_independent_sampling: Whether to log a warning when a parameter is sampled by
            ``independent_sampler`` after the startup phase. Defaults to True.

    References:
        S. R. Chowdhury, A. Gopalan. "No-regret Algorithms for Multi-task Bayesian
        Optimization." AISTATS 2021.
        B. Paria, K. Kandasamy, B. Poczos. "A Flexible Framework for Multi-Objective Bayesian
        Optimization using Random Scalarizations." UAI 2020.
    """

    def __init__(
        self,
        *,
        scalarization: Literal["chebyshev", "linear"] = "chebyshev",
        weights: WeightsPrior = None,
        n_weight_samples: int = 16,
        reference_point: Sequence[float] | None = None,
        utility_units: Literal["standardized", "objectives"] = "standardized",
        task_covariance: Literal["learned", "independent"] | float | Any = "learned",
        budgeted: bool = False,
        q: float | None = DEFAULT_Q,
        beta: float | None = None,
        width: Literal["scalarized", "objectives", "norm"] = "scalarized",
        n_startup_trials: int = 5,
        independent_sampler: BaseSampler | None = None,
        seed: int | None = None,
        warn_independent_sampling: bool = True,
    ) -> None:
        check_choice("scalarization", scalarization, mt.SCALARIZATIONS)
        check_integer("n_weight_samples", n_weight_samples, minimum=1)
        self._fixed_weights, self._weights_fn = _checked_weights(weights)
        self._reference_point = _checked_reference_point(reference_point)
        self._task_covariance = _checked_task_covariance(task_covariance)
        if not isinstance(budgeted, bool):
            raise ValueError(f"`budgeted` must be a bool, but got budgeted={budgeted!r}.")
        check_number("q", q, low=1.0, optional=True)
        check_number("beta", beta, low=0.0, optional=True)
        check_choice("width", width, mt.WIDTHS)
        check_choice("utility_units", utility_units, _UTILITY_UNITS)
        super().__init__(seed=seed, independent_sampler=independent_sampler,
                         n_startup_trials=n_startup_trials,
                         warn_independent_sampling=warn_independent_sampling)
        self._scalarization: Literal["chebyshev", "linear"] = scalarization
        self._n_weight_samples = n_weight_samples
        self._budgeted = budgeted
        self._q = None if q is None else float(q)
        self._beta = beta
        self._width: Literal["scalarized", "objectives", "norm"] = width
        self._utility_units = utility_units
        self._max_fit_points = 100  # MT-BKB fits its kernel on at most this many trials
        self.last_dictionary_size: int | None = None

    # -- multi-objective studies are this sampler's purpose ---------------------------------------

    def _check_study(self, study: Study) -> None:
        n = len(study.directions)
        for name, value in (("weights", self._fixed_weights),
                            ("reference_point", self._reference_point)):
            if value is not None and len(value) != n:
                raise ValueError(f"`{name}` must have one entry per objective ({n}), but got "
                                 f"{name}={value.tolist()}.")
        if isinstance(self._task_covariance, np.ndarray) and self._task_covariance.shape != (n, n):
            raise ValueError(
                f"`task_covariance` must be a {n} x {n} matrix for a study with {n} objectives, "
                f"but got shape {self._task_covariance.shape}."
            )

    # -- model ------------------------------------------------------------------------------------

    def _targets(self, study: Study, complete: Sequence[FrozenTrial]) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray
    ]:
        """Standardized maximized objectives (t, n), their signs, means and stds (n,)."""
        signs = direction_signs(study)
        raw = np.array([t.values for t in complete], dtype=float) * signs
        Y, means, stds = zip(*(standardize(column) for column in raw.T), strict=True)
        return np.stack(Y, 1), signs, np.array(means), np.array(stds)

    def _fit_model(
        self, study: Study, X: torch.Tensor, Y: np.ndarray, ss: SearchSpace
    ) -> mt.ICMParams:
        tc = self._task_covariance
        mode: Any = (torch.from_numpy(tc) if isinstance(tc, np.ndarray) else
                     mt.omega_task_covariance(tc, Y.shape[1]) if isinstance(tc, float) else tc)
        key = (study.study_name, "icm")
        warm = self._cache.get(key)
        Y_fit = torch.from_numpy(Y)
        n_trials = len(X)
        if self._budgeted and len(X) > self._max_fit_points:
            # Step 4: a random subset of the trials (a new one every step).
            subset = np.sort(
                np.random.RandomState(len(X)).choice(len(X), self._max_fit_points, replace=False)
            )
            X, Y_fit = X[subset], Y_fit[subset]
        # Warm starts alone can stay in a poor local optimum (see ``fit_icm``'s ``restart``).
        restart_key = (study.study_name, "icm-restart")
        restart = warm is None or n_trials >= _RESTART_GROWTH * self._cache.get(restart_key, 0)
        params = mt.fit_icm(
            X, Y_fit, ss.is_categorical, task_covariance=mode, warm_start=warm, restart=restart
        )
        self._cache[key] = params
        if restart:
            self._cache[restart_key] = n_trials
        _store_correlation(study, params)
        return params

    def _build_model(
        self, study: Study, X: torch.Tensor, Y: torch.Tensor, params: mt.ICMParams,
        ss: SearchSpace, numbers_: list[int], rng: np.random.RandomState,
    ) -> mt.ICMGP:
        if not self._budgeted:
            return mt.ICMGP(X, Y, params, ss.is_categorical)
        # MT-BKB's last dictionary (trial numbers) sets this step's inclusion probabilities.
        key = (study.study_name, "dictionary")
        index = {number: i for i, number in enumerate(numbers_)}
        prev_idx = [index[k] for k in self._cache.get(key, []) if k in index]
        prev_model = (
            mt.NystromICMGP(X, Y, params, ss.is_categorical, dictionary=np.array(prev_idx))
            if prev_idx
            else mt.ICMGP(X, Y, params, ss.is_categorical)
        )
        q = self._q if self._q is not None else mt.default_q(len(numbers_))
        chosen, _ = mt.sample_dictionary(prev_model, q, rng)
        self._cache[key] = [numbers_[i] for i in chosen]
        self.last_dictionary_size = len(chosen)
        return mt.NystromICMGP(X, Y, params, ss.is_categorical, dictionary=chosen)

    def _weights(self, n: int, rng: np.random.RandomState) -> np.ndarray:
        if self._fixed_weights is not None:
            return self._fixed_weights[None, :]
        if self._weights_fn is not None:
            w = np.asarray(self._weights_fn(rng), dtype=float)
            if w.ndim == 1:
                w = w[None, :]
            if w.ndim != 2 or w.shape[1] != n or not np.all(np.isfinite(w)) or np.any(w < 0) or (
                np.any(w.sum(1) <= 0)
            ):
                raise ValueError(
                    f"`weights` must return a (k, {n}) array of non-negative weights with "
                    f"positive row sums, but it returned an array of shape {w.shape}."
                )
            return w / w.sum(1, keepdims=True)
        return mt.sample_weights(n, self._n_weight_samples, self._scalarization, rng)

    def _sample_relative_impl(
        self,
        study: Study,
        search_space: dict[str, BaseDistribution],
        complete: Sequence[FrozenTrial],
        pending: Sequence[dict[str, Any]],
    ) -> dict[str, Any]:
        rng = self._rng.rng
        ss, X_np, X, X_pending = encode_trials(search_space, complete, pending)
        Y_np, signs, means, stds = self._targets(study, complete)
        n = Y_np.shape[1]
        Y = torch.from_numpy(Y_np)
        params = self._fit_model(study, X, Y_np, ss)
        model = self._build_model(study, X, Y, params, ss, [t.number for t in complete], rng)
        t = len(complete) + (len(pending) if pending else 0)
        beta = float(self._beta) if self._beta is not None else mt.default_beta(t, ss.dim)
        weights_np = self._weights(n, rng)
        if self._utility_units == "objectives":
            # s_lambda in the objectives' own units, y_i = mean_i + std_i y~_i: the weight of
            # standardized objective i is lambda_i std_i (rescaled by one common factor, which
            # leaves the argmax unchanged).
            weights_np = weights_np * (stds / stds.mean())[None, :]
        weights = torch.from_numpy(weights_np)
        z = self._reference(Y_np, signs, means, stds)

        # Constraint models (single-task GPs, as FairBOSampler's).
        names = sorted({name for tr in complete for name in tr.constraints})
        constraints, feasible = self._fit_constraints(study, names, complete, X, ss)
        if X_pending is not None:
            with torch.no_grad():
                model = model.condition_on(X_pending, model.posterior(X_pending)[0])
            constraints = constraints.condition_on(X_pending)
        ucb = mt.mtkb_ucb(model, weights, self._scalarization, beta, z, self._width)
        acqf: Callable[[torch.Tensor], torch.Tensor] = (
            FeasibilityPhase([constraints.regression], []) if names and not feasible.any()
            else PenalizedUCB(ucb, constraints, beta, _CONSTRAINT_PENALTY)
        )
        with torch.no_grad():
            utility = mt.expected_utility(Y, weights, self._scalarization, z).numpy()
        order = np.argsort(-np.where(feasible, utility, utility - 1e6))
        warm_starts = X_np[order[:1]][:, None, :]
        # Only pending points are excluded: a noisy objective's best point is worth evaluating
        # again (the paper's bandit setting), and on a finite domain excluding evaluated points
        # would force the search into bad ones once the good ones are used up.
        x_best, _ = self._maximize(
            acqf, ss, rng, warm_starts=warm_starts,
            exclude=None if X_pending is None else ss.round(X_pending.numpy()),
        )
        return ss.decode(x_best[0])

    def _reference(
        self, Y: np.ndarray, signs: np.ndarray, means: np.ndarray, stds: np.ndarray
    ) -> torch.Tensor:
        """The Chebyshev reference point z in standardized maximized units, shape (n,)."""
        if self._reference_point is not None:
            return torch.from_numpy((signs * self._reference_point - means) / stds)
        span = np.maximum(np.ptp(Y, axis=0), 1e-3)
        return torch.from_numpy(Y.min(0) - 0.1 * span)

    # -- public helpers ---------------------------------------------------------------------------

    @staticmethod
    def stored_task_correlation(study: Study) -> np.ndarray | None:
        """The task correlation an MTKBSampler last stored with ``study``, or None.

        Every model-based suggestion (and :meth:`task_correlation`) stores it, so a study
        loaded from its storage in another process has it. The sign convention is that of
        :meth:`task_correlation`: the objectives as the study defines them.
        """
        return stored_task_correlation(study)

    def task_correlation(self, study: Study) -> np.ndarray:
        """The fitted task covariance B as an n x n correlation matrix of the objectives.

        Entry (i, j) is the correlation of objectives i and j as the study defines them
        (a minimized objective is not negated): for f1 = x maximized and f2 = x minimized it
        is +1. Fits the model to the study's complete trials (warm-started from the last fit)
        and stores the result with the study (see :meth:`stored_task_correlation`), as every
        model-based suggestion does too.

        Raises:
            ValueError: If the study has fewer than two complete trials with finite values.
        """
        self._check_study(study)
        search_space = self.infer_relative_search_space(study, None)  # type: ignore[arg-type]
        complete, _ = collect_trials(study, search_space)
        if len(complete) < 2 or not search_space:
            raise ValueError(
                "`study` must have at least two complete trials (over a search space with at "
                f"least one non-fixed parameter) to fit a task correlation, but got "
                f"{len(complete)}."
            )
        ss, _, X, _ = encode_trials(search_space, complete, [])
        Y, _, _, _ = self._targets(study, complete)
        with limit_threads(len(complete)):
            params = self._fit_model(study, X, Y, ss)
        return _objective_correlation(study, params)


def _objective_correlation(study: Study, params: mt.ICMParams) -> np.ndarray:
    """B as a correlation matrix of the objectives in the study's own signs (the model
    maximizes every objective, so a minimized one enters negated)."""
    R = mt.covariance_to_correlation(params.task_covariance).numpy()
    signs = direction_signs(study)
    return R * np.outer(signs, signs)


def _store_correlation(study: Study, params: mt.ICMParams) -> None:
    R = _objective_correlation(study, params)
    write_study_text(
        *storage_and_id(study), TASK_CORRELATION_KEY, json.dumps(np.round(R, 6).tolist())
    )


def _checked_weights(
    weights: Any,
) -> tuple[np.ndarray | None, Callable[[np.random.RandomState], Any] | None]:
    """(fixed weights normalized to sum 1, or a callable drawing them), or a ValueError."""
    if callable(weights):
        return None, weights
    if weights is None:
        return None, None
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or len(w) == 0 or not np.all(np.isfinite(w)) or np.any(w < 0) or (
        w.sum() <= 0
    ):
        raise ValueError(
            "`weights` must be None, a callable or a vector of non-negative weights "
            f"with a positive sum, but got weights={weights!r}."
        )
    return w / w.sum(), None


def _checked_reference_point(reference_point: Any) -> np.ndarray | None:
    if reference_point is None:
        return None
    z = np.asarray(reference_point, dtype=float)
    if z.ndim != 1 or len(z) == 0 or not np.all(np.isfinite(z)):
        raise ValueError(
            "`reference_point` must be None or a vector of finite values, but got "
            f"reference_point={reference_point!r}."
        )
    return z


def _checked_task_covariance(task_covariance: Any) -> str | float | np.ndarray:
    """``"learned"``, ``"independent"``, omega (a float) or a fixed matrix B."""
    if isinstance(task_covariance, str):
        if task_covariance not in _TASK_COVARIANCES:
            raise ValueError(
                f"`task_covariance` must be one of {list(_TASK_COVARIANCES)}, a float in "
                f"[0, 1] or a p.s.d. matrix, but got task_covariance={task_covariance!r}."
            )
        return task_covariance
    if isinstance(task_covariance, numbers.Real) and not isinstance(task_covariance, bool):
        if not 0.0 <= float(task_covariance) <= 1.0:
            raise ValueError(
                "`task_covariance` as a float (omega) must be in [0, 1], but got "
                f"task_covariance={task_covariance!r}."
            )
        return float(task_covariance)
    B = np.asarray(task_covariance, dtype=float)
    if (
        B.ndim != 2 or B.shape[0] != B.shape[1] or not np.all(np.isfinite(B))
        or not np.allclose(B, B.T) or np.linalg.eigvalsh(B).min() < -1e-10
        or np.any(np.diag(B) <= 0)
    ):
        raise ValueError(
            "`task_covariance` as a matrix must be square, symmetric and positive "
            f"semi-definite with a positive diagonal, but got task_covariance={B!r}."
        )
    return B
