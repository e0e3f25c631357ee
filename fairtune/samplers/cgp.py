"""CGPSampler: collaborative Bayesian optimization between agents through constrained GPs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import torch
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial

from fairtune import _keys
from fairtune._gp import acquisition
from fairtune._gp.fantasy import FantasyModels, reject
from fairtune._gp.gp import GPRegressor, fit_gp, standardize
from fairtune._gp.search_space import SearchSpace
from fairtune._names import check_choice, check_integer, check_number
from fairtune._optuna_compat import storage_and_id, study_key
from fairtune._threads import limit_threads
from fairtune.collaboration import Board, check_agent, sliced_lhs_value, space_json
from fairtune.samplers._base import (
    GPSamplerBase,
    _trial_key,
    collect_trials,
    derived_seed,
    direction_signs,
    encode_trials,
    name_code,
)

if TYPE_CHECKING:
    from optuna.study import Study

__all__ = ["CGPSampler"]

_ACQUISITIONS = ("ucb", "ei", "ts")
# Own-study system attribute: [slot, number of agents] of this agent's share of the
# collaborative Latin hypercube, fixed at its first startup trial.
CLHS_SLOT_KEY = _keys.CGP_CLHS_SLOT_KEY


@dataclass
class _RoundState:
    """What an agent computed from its own trials in one round (reused within the round)."""

    key: tuple[Any, ...]
    round: int
    ss: SearchSpace
    X: torch.Tensor  # (n, d) own trials, encoded
    X_pending: torch.Tensor | None  # (p, d)
    gp: GPRegressor  # own GP, conditioned on pending points' means
    y_mean: float
    y_std: float
    kappa: float  # standardized
    x_kappa: np.ndarray  # (d,)
    best_f: float  # standardized incumbent for EI
    base_seed: int


class CGPSampler(GPSamplerBase):
    """Collaborative BO between agents that share designs, never data (constrained GPs).

    Several agents (labs, plants, clients) each tune their own objective, similar to the
    others' but not the same, in their own study (their own storage if they like). They meet on
    a :class:`fairtune.collaboration.Board` where each posts, per round, D + 2 numbers: its
    LCB maximizer, the LCB value there and its best posterior mean. Algorithm 1 of Chen, Jiang,
    Qin and Al Kontar (Technometrics 2025, "Multi-Agent Collaborative Bayesian Optimization via
    Constrained Gaussian Processes"), for agent n in round t (its number of evaluated trials):

    1. The first ``n_startup_trials`` designs of all agents together form a Latin hypercube
       (the paper's collaborative LHS). Each agent's share follows from the board's seed and
       its place among the agents registered when its first trial is sampled, so create every
       agent's sampler (or call ``board.register(name)``) first for an exact Latin hypercube.
    2. Fit the agent's own GP on its own trials (Matern-5/2 ARD, standardized outputs).
    3. ``kappa_n = max_x mu_n(x)`` and ``x+_n = argmax_x mu_n(x) - eta sigma_n(x)``; post
       ``(t, x+_n, LCB_n(x+_n), kappa_n)`` to the board.
    4. The registered agents are split into random groups of at most ``group_size``; the
       partition follows from the board's seed and t, so every agent computes the same one.
    5. Borrow the latest posted design x+_n' of each group member whose posted LCB exceeds
       kappa_n (its *leaders*; every member with ``share_without_comparison``, the paper's remedy
       for agents whose outputs differ in scale).
    6. Rejection: draw ``n_raw_samples`` joint samples of the own GP at the borrowed designs and
       keep those above kappa_n at every one; a design cleared by fewer than ``quorum`` samples
       is dropped (protection from misleading collaborators). Each kept sample is a fantasy
       dataset; the fantasy models share one covariance (Property 2), so one factorization
       serves all.
    7. Maximize the acquisition over the fantasy models:

       - ``"ucb"`` (eq. 13): ``mean_s mu_s(x) + beta * sqrt(sigma+(x)^2 + var_s mu_s(x))``;
       - ``"ei"`` (eq. 11): the EI averaged over the fantasy models (in log space), improving
         on the largest posterior mean at the agent's trials;
       - ``"ts"``: the maximizer, over a quasi-random candidate set (plus the trials, the
         borrowed designs and points near the best ones), of a function drawn from a randomly
         chosen fantasy model.

       With nothing borrowed each is the ordinary acquisition on the agent's own GP.

    ``board=None`` runs steps 2 and 7 on the agent's own GP alone: the paper's
    non-collaborative baseline. The sampler never waits: it uses the latest posts of its group,
    whatever their rounds (run agents in lockstep, as :func:`fairtune.collaboration.simulate`
    does, for the paper's synchronous setting). The GP models the negated values of a minimized
    objective and posts LCB and kappa in that maximized sign, so agents may mix directions as
    long as they agree on what is better.

    Running trials are pending points (the GP is conditioned on its mean there, and no pending
    or evaluated point is proposed again); failed, pruned and NaN trials are ignored; parameters
    outside the shared search space are sampled by ``independent_sampler`` (a logged warning).
    A group member whose registered search space differs raises a ``ValueError``. Constraints
    are not modelled.

    Privacy: the board holds posts only; trials, values and parameters stay in the agent's
    study. ``design_noise`` adds Laplace noise to each coordinate of the posted design (on the
    [0, 1]-encoded space, then rounded), the paper's Laplace mechanism (section 4.5): epsilon =
    D / design_noise per post for D parameters, adding up over posts. It does *not* protect the
    posted LCB and kappa (exact numbers), nor the fact of participating, and the agent's own
    next trial is chosen without noise.

    Defaults are chosen for users, not for the paper (docs/benchmarks/cgp_defaults.md); the
    paper's settings are one argument away:
    ``CGPSampler(board=board, agent="lab-a", **CGPSampler.PAPER_SETTINGS)``.

    Example:
        .. code-block:: python

            import optuna
            from fairtune.collaboration import Board
            from fairtune.samplers import CGPSampler

            board = Board("sqlite:///board.db", name="alloys", seed=0)
            sampler = CGPSampler(board=board, agent="lab-a", seed=1)
            study = optuna.create_study(
                storage="sqlite:///lab-a.db", study_name="lab-a", direction="maximize",
                sampler=sampler, load_if_exists=True,
            )
            study.optimize(objective, n_trials=40)

    Args:
        board: The board shared with the other agents, or None for the non-collaborative
            baseline.
        agent: This agent's name on the board (no ``':'``). Defaults to ``"agent"`` when
            ``board`` is None; required otherwise.
        acquisition: ``"ucb"``, ``"ei"`` or ``"ts"``. Defaults to ``"ei"`` (the paper's
            experiments use ``"ucb"``).
        group_size: N_max, the largest group. Defaults to 4.
        eta: eta_t of the posted LCB ``mu - eta sigma``. Defaults to 2.0.
        beta: beta_t of CGP-UCB (used by ``"ucb"`` only). Defaults to 1.0 (the paper's: 2.0,
            which explores more than pays at 15-60 trials).
        n_raw_samples: S_raw, joint samples drawn at the borrowed designs. Defaults to 10000
            (the paper's: 10^5).
        quorum: S_quorum, the fewest kept samples a borrowed design needs. Defaults to 5.
        share_without_comparison: Borrow every group member's design, not only the leaders'
            (step 5; step 6 still applies). Defaults to False.
        design_noise: Scale of the Laplace noise on the posted design (encoded units), or None
            for none. Defaults to None.
        n_startup_trials: Designs from the collaborative Latin hypercube before the GP is used.
            Defaults to 10.
        independent_sampler: Sampler for parameters outside the shared search space (and for the
            startup designs, if given). Defaults to the collaborative Latin hypercube for
            startup designs and, otherwise, random draws seeded per (seed, trial number,
            parameter).
        seed: Seed of the sampler's own randomness. Defaults to None.
        warn_independent_sampling: Log a warning when a parameter is sampled by
            ``independent_sampler`` after the startup phase. Defaults to True.

    References:
        Q. Chen, L. Jiang, H. Qin, R. Al Kontar. "Multi-Agent Collaborative Bayesian
        Optimization via Constrained Gaussian Processes." Technometrics, 2025.
    """

    #: The settings of the paper's experiments (section 6; it uses 25 initial designs on
    #: Levy-20).
    PAPER_SETTINGS: ClassVar[Mapping[str, Any]] = MappingProxyType({
        "acquisition": "ucb", "group_size": 4, "eta": 2.0, "beta": 2.0, "n_raw_samples": 100000,
        "quorum": 5, "share_without_comparison": False, "design_noise": None,
        "n_startup_trials": 10,
    })

    def __init__(
        self,
        *,
        board: Board | None,
        agent: str | None = None,
        acquisition: Literal["ucb", "ei", "ts"] = "ei",
        group_size: int = 4,
        eta: float = 2.0,
        beta: float = 1.0,
        n_raw_samples: int = 10000,
        quorum: int = 5,
        share_without_comparison: bool = False,
        design_noise: float | None = None,
        n_startup_trials: int = 10,
        independent_sampler: BaseSampler | None = None,
        seed: int | None = None,
        warn_independent_sampling: bool = True,
    ) -> None:
        if board is not None and not isinstance(board, Board):
            raise ValueError(
                f"`board` must be a fairtune.collaboration.Board or None, but got board={board!r}."
            )
        if agent is None:
            if board is not None:
                raise ValueError("`agent` must be given when `board` is, but got agent=None.")
            agent = "agent"
        check_agent(agent)
        check_choice("acquisition", acquisition, _ACQUISITIONS)
        for name, value in (("group_size", group_size), ("n_raw_samples", n_raw_samples),
                            ("quorum", quorum)):
            check_integer(name, value, minimum=1)
        if quorum > n_raw_samples:
            raise ValueError(
                "`quorum <= n_raw_samples` must hold, but got "
                f"(quorum={quorum}, n_raw_samples={n_raw_samples})."
            )
        check_number("eta", eta, low=0.0)
        check_number("beta", beta, low=0.0)
        check_number("design_noise", design_noise, low=0.0, strict=True, optional=True)
        super().__init__(seed=seed, independent_sampler=independent_sampler,
                         n_startup_trials=n_startup_trials,
                         warn_independent_sampling=warn_independent_sampling)
        self._seed = seed
        self._board = board
        self._agent = agent
        self._acquisition = acquisition
        self._group_size = group_size
        self._eta = float(eta)
        self._beta = float(beta)
        self._n_raw_samples = n_raw_samples
        self._quorum = quorum
        self._share_without_comparison = bool(share_without_comparison)
        self._design_noise = None if design_noise is None else float(design_noise)
        # Each study's last round, used under the sampler's lock (see _round_state).
        self._state: dict[tuple[Any, ...], _RoundState] = {}
        if board is not None:
            board.register(agent)
        # Tuning knobs (private: tests and benchmarks may shrink them).
        self._n_ts_candidates = 512
        self._max_ei_models = 64
        self._fit_max_iter = 100
        # The last suggestion's borrowing, for inspection: {"leaders", "borrowed", "kept",
        # "n_models", "kappa" (standardized), "fantasies"}.
        self.last_borrowing: dict[str, Any] = {}

    @property
    def agent(self) -> str:
        """This agent's name on the board."""
        return self._agent

    @property
    def board(self) -> Board | None:
        """The board (None for the non-collaborative baseline)."""
        return self._board

    # -- startup: the collaborative Latin hypercube ----------------------------------------------

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        if (
            self._owns_independent_sampler
            and trial.number < self._n_startup_trials
            and _trial_key(study, trial) in self._startup_trials
        ):
            slot, n_agents = self._clhs_slot(study)
            seed = self._board.seed if self._board is not None else (self._seed or 0)
            u = sliced_lhs_value(
                seed, name_code(param_name), n_agents, self._n_startup_trials, slot, trial.number
            )
            single = SearchSpace({param_name: param_distribution})
            return single.decode(single.round(np.array([u])))[param_name]
        return super().sample_independent(study, trial, param_name, param_distribution)

    def _clhs_slot(self, study: Study) -> tuple[int, int]:
        storage, study_id = storage_and_id(study)
        attrs = storage.get_study_system_attrs(study_id)
        if CLHS_SLOT_KEY in attrs:
            slot, n = attrs[CLHS_SLOT_KEY]
            return int(slot), int(n)
        if self._board is None:
            slot, n = 0, 1
        else:
            agents = self._board.agents()
            slot, n = agents.index(self._agent), len(agents)
        storage.set_study_system_attr(study_id, CLHS_SLOT_KEY, [slot, n])
        return slot, n

    # -- one round -------------------------------------------------------------------------------

    def _round_state(
        self,
        study: Study,
        search_space: dict[str, BaseDistribution],
        complete: Sequence[FrozenTrial],
        pending: Sequence[dict[str, Any]],
    ) -> _RoundState:
        """Steps 2-3: fit, kappa, LCB maximizer, post. Computed once per (study, data)."""
        key = (
            *study_key(study), space_json(search_space),
            tuple(t.number for t in complete), json.dumps(list(pending), sort_keys=True),
        )
        state = self._state.get(study_key(study))
        if state is not None and state.key == key:
            return state
        ss, X_np, X, X_pending = encode_trials(search_space, complete, pending)
        sign = direction_signs(study)[0]
        y, y_mean, y_std = standardize(sign * np.array([t.value for t in complete], dtype=float))
        gp_data = self._fit(fit_gp, study, "objective", X, y, ss, max_iter=self._fit_max_iter)
        base_seed = int(self._rng.rng.randint(0, 2**31 - 1))
        best_f = acquisition.incumbent(gp_data, X)
        order = np.argsort(-y)
        warm = X_np[order[:1]][:, None, :]
        post_rng = np.random.RandomState(derived_seed(base_seed, 1) % 2**32)
        round_ = len(complete)
        if self._board is not None:
            x_kappa, kappa = self._maximize(
                lambda x: gp_data.posterior(x[..., 0, :])[0], ss, post_rng, warm_starts=warm
            )
            x_kappa = x_kappa[0]
            kappa = max(kappa, best_f)
            x_plus, lcb = self._maximize(
                lambda x: acquisition.lcb(*gp_data.posterior(x[..., 0, :]), self._eta**2),
                ss, post_rng, warm_starts=np.stack([warm[0], x_kappa[None, :]]),
            )
            posted = x_plus[0]
            if self._design_noise is not None:
                noise = post_rng.laplace(0.0, self._design_noise, size=posted.shape)
                posted = ss.round(posted + noise)
            self._board.register(self._agent, search_space)
            self._board.post(
                self._agent, round_, ss.decode(posted),
                lcb=y_mean + y_std * lcb, kappa=y_mean + y_std * kappa,
            )
        else:
            x_kappa, kappa = X_np[order[0]], best_f
        gp = gp_data
        if X_pending is not None:
            with torch.no_grad():
                gp = gp_data.condition_on(X_pending, gp_data.posterior(X_pending)[0])
        state = _RoundState(
            key=key, round=round_, ss=ss, X=X, X_pending=X_pending, gp=gp, y_mean=y_mean,
            y_std=y_std, kappa=kappa, x_kappa=x_kappa, best_f=best_f, base_seed=base_seed,
        )
        self._state[study_key(study)] = state
        return state

    def _post_round(self, study: Study) -> None:
        """Steps 2-3 ahead of the next trial (the simulation helper's synchronous rounds)."""
        search_space = self.infer_relative_search_space(study, None)  # type: ignore[arg-type]
        if not search_space:
            return
        complete, pending = collect_trials(study, search_space)
        if len(complete) < max(self._n_startup_trials, 1):
            return
        with self._lock, limit_threads(len(complete) + len(pending)):
            self._round_state(study, search_space, complete, pending)

    def _borrowed(self, state: _RoundState, search_space: dict[str, BaseDistribution]
                  ) -> tuple[list[str], np.ndarray]:
        """Step 4-5: the leaders in this round's group and their designs (m, d)."""
        if self._board is None:
            return [], np.empty((0, state.ss.dim))
        board = self._board
        attrs = board.items()
        members = [a for a in board.group(self._agent, state.round, self._group_size, attrs)
                   if a != self._agent]
        mine = space_json(search_space)
        for other in members:
            space = board.search_space(other, attrs)
            if space and space_json(space) != mine:
                raise ValueError(
                    f"The agents' search spaces must agree, but agent {other!r} has "
                    f"{space_json(space)} and agent {self._agent!r} has {mine}."
                )
        kappa_raw = state.y_mean + state.y_std * state.kappa
        leaders, designs = [], []
        for other, post in sorted(board.latest(members, attrs).items()):
            if not (self._share_without_comparison or post.lcb > kappa_raw):
                continue
            if post.design.keys() != search_space.keys():
                continue  # posted before its space matched ours (a dynamic space)
            leaders.append(other)
            designs.append(post.design)
        X_b = state.ss.encode(designs) if designs else np.empty((0, state.ss.dim))
        return leaders, X_b

    def _sample_relative_impl(
        self,
        study: Study,
        search_space: dict[str, BaseDistribution],
        complete: Sequence[FrozenTrial],
        pending: Sequence[dict[str, Any]],
    ) -> dict[str, Any]:
        state = self._round_state(study, search_space, complete, pending)
        ss, gp = state.ss, state.gp
        leaders, X_b_np = self._borrowed(state, search_space)
        generator = torch.Generator().manual_seed(derived_seed(state.base_seed, 3) % 2**63)
        acq_rng = np.random.RandomState(derived_seed(state.base_seed, 2) % 2**32)
        X_b = torch.from_numpy(X_b_np)
        kept = torch.zeros(len(X_b), dtype=torch.bool)
        samples = torch.zeros(0, 0, dtype=torch.float64)
        if len(X_b):
            raw = gp.sample_joint(X_b, self._n_raw_samples, generator)  # (S_raw, m)
            kept, samples = reject(raw, state.kappa, self._quorum)
        fantasies = FantasyModels(gp, X_b[kept], samples)
        self.last_borrowing = {
            "leaders": leaders,
            "borrowed": X_b_np,
            "kept": kept.numpy().copy(),
            "n_models": fantasies.n_models if fantasies.m else 0,
            "kappa": state.kappa,
            "fantasies": fantasies,
        }

        exclude = state.X.numpy()
        if state.X_pending is not None:
            exclude = np.concatenate([exclude, state.X_pending.numpy()])
        exclude = ss.round(exclude)
        warm = [state.X.numpy()[int(torch.argmax(gp.y_train[: len(state.X)]))]]
        warm += list(X_b_np[kept.numpy()])
        warm_starts = np.array(warm)[:, None, :]

        if self._acquisition == "ts":
            x = self._thompson(fantasies, state, X_b_np, exclude, acq_rng, generator)
            return ss.decode(x)
        if self._acquisition == "ucb":
            beta = self._beta

            def acqf(x: torch.Tensor) -> torch.Tensor:
                return acquisition.cgp_ucb(*fantasies.moments(x[..., 0, :]), beta)

        else:
            S = fantasies.n_models
            index = None
            if fantasies.m and S > self._max_ei_models:
                index = torch.from_numpy(acq_rng.choice(S, self._max_ei_models, replace=False))
            best_f = state.best_f

            def acqf(x: torch.Tensor) -> torch.Tensor:
                x = x[..., 0, :]
                return acquisition.cgp_log_ei(
                    fantasies.means(x, index), fantasies.variance(x), best_f
                )

        x_best, _ = self._maximize(acqf, ss, acq_rng, warm_starts=warm_starts, exclude=exclude)
        return ss.decode(x_best[0])

    def _thompson(
        self,
        fantasies: FantasyModels,
        state: _RoundState,
        X_b: np.ndarray,
        exclude: np.ndarray,
        rng: np.random.RandomState,
        generator: torch.Generator,
    ) -> np.ndarray:
        """CGP-TS: the maximizer, over a candidate set, of a draw from a random fantasy model."""
        ss = state.ss
        X = state.X.numpy()
        s = int(rng.randint(fantasies.n_models))
        # Points near the best ones by the chosen model's mean, where the maximum usually is.
        with torch.no_grad():
            top_mean = fantasies.means(torch.from_numpy(X), torch.tensor([s]))[:, 0]
        top = X[np.argsort(-top_mean.numpy())[:4]]
        anchors = np.concatenate([top, X_b]) if len(X_b) else top
        local = anchors[rng.randint(len(anchors), size=self._n_ts_candidates // 4)]
        local = ss.round(local + rng.normal(0.0, 0.05, size=local.shape))
        candidates = np.concatenate([ss.sample(self._n_ts_candidates, rng), local, X_b])
        candidates = np.unique(ss.round(candidates), axis=0)
        allowed = ~(np.abs(candidates[:, None, :] - exclude[None]).max(-1) < 1e-9).any(-1)
        if allowed.any():
            candidates = candidates[allowed]
        draw = fantasies.sample_path(torch.from_numpy(candidates), s, generator)
        return candidates[int(torch.argmax(draw))]
