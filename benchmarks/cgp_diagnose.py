"""Diagnostic of CGPSampler's borrowing in the figure-3 setting (not a benchmark of quality).

Per agent and round of one ``benchmarks/cgp_paper.py`` run it records what Algorithm 1 did:
how many group members were leaders (posted LCB > own kappa), how many borrowed designs the
rejection step kept, how many fantasy models there were, the distance (encoded unit cube, L2)
from the chosen design to the nearest borrowed and nearest kept design, the distance to the
design the same acquisition picks on the agent's own GP alone (same optimizer seed), and the
acquisition's value at the chosen design against the best kept design (and the own GP's UCB
there), and how much the fantasies lift the mean at the chosen design (standardized units).

Usage:
    OMP_NUM_THREADS=1 python -m benchmarks.cgp_diagnose --function cosine8 --method CGP-UCB \\
        --rounds 10 --rep 0
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch

from benchmarks import cgp_paper
from fairtune._gp import acquisition
from fairtune._gp.fantasy import FantasyModels
from fairtune._gp.optim import maximize_acqf
from fairtune.samplers import CGPSampler

RECORDS: list[dict[str, Any]] = []
_original = CGPSampler._sample_relative_impl


def _traced(self: CGPSampler, study: Any, search_space: Any, complete: Any, pending: Any
            ) -> dict[str, Any]:
    params = _original(self, study, search_space, complete, pending)
    if self.board is None:
        return params
    state = self._state[(id(study._storage), study._study_id)]
    ss = state.ss
    x = ss.encode([params])[0]
    info = self.last_borrowing
    borrowed, kept = info["borrowed"], info["kept"]
    rec: dict[str, Any] = {
        "agent": self.agent, "round": state.round, "leaders": len(info["leaders"]),
        "borrowed": len(borrowed), "kept": int(kept.sum()), "n_models": info["n_models"],
        "d_borrowed": np.nan, "d_kept": np.nan, "d_alone": np.nan,
    }
    if len(borrowed):
        rec["d_borrowed"] = float(np.linalg.norm(borrowed - x, axis=1).min())
    if kept.any():
        rec["d_kept"] = float(np.linalg.norm(borrowed[kept] - x, axis=1).min())
    if self._acquisition == "ucb" and kept.any():
        plain = FantasyModels(state.gp, torch.zeros(0, ss.dim, dtype=torch.float64),
                              torch.zeros(0, 0, dtype=torch.float64))
        fant = info["fantasies"]
        rng = np.random.RandomState(0)
        x_alone, _ = maximize_acqf(
            lambda z: acquisition.cgp_ucb(*plain.moments(z[..., 0, :]), self._beta), ss, rng=rng,
            n_preliminary_samples=self._n_preliminary_samples,
            n_local_search=self._n_local_search, max_iter=self._optim_max_iter,
            warm_starts=state.X.numpy()[None, :1],
        )
        rec["d_alone"] = float(np.linalg.norm(x_alone[0] - x))
        with torch.no_grad():
            at = torch.from_numpy(np.concatenate([x[None], borrowed[kept]]))
            mean, var, spread = fant.moments(at)
            own_mean, own_var = state.gp.posterior(at)
        rec["acq_chosen"] = float(acquisition.cgp_ucb(mean[:1], var[:1], spread[:1], self._beta))
        rec["lift_chosen"] = float(mean[0] - own_mean[0])
        rec["sd_chosen"] = float(var[0].sqrt())
        rec["acq_kept_max"] = float(acquisition.cgp_ucb(mean[1:], var[1:], spread[1:],
                                                        self._beta).max())
        rec["own_ucb_kept_max"] = float((own_mean[1:] + self._beta * own_var[1:].sqrt()).max())
        rec["kappa"] = state.kappa
    RECORDS.append(rec)
    return params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--function", default="cosine8")
    parser.add_argument("--method", default="CGP-UCB")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--rep", type=int, default=0)
    parser.add_argument("--n-agents", type=int, default=16)
    parser.add_argument("--n-init", type=int, default=None)
    parser.add_argument("--beta", type=float, default=2.0)
    args = parser.parse_args()
    CGPSampler._sample_relative_impl = _traced  # type: ignore[method-assign]
    cgp_paper.run(args.function, args.method, args.rep, args.n_agents, args.rounds,
                  n_init=args.n_init, beta=args.beta)
    import pandas as pd

    df = pd.DataFrame(RECORDS)
    pd.set_option("display.width", 200)
    cols = ["leaders", "borrowed", "kept", "n_models", "d_borrowed", "d_kept", "d_alone"]
    extra = [c for c in ("acq_chosen", "acq_kept_max", "own_ucb_kept_max", "kappa",
                         "lift_chosen", "sd_chosen") if c in df]
    print(df.groupby("round")[cols + extra].mean().round(3).to_string())
    print("agent-rounds with a kept design:", int((df["kept"] > 0).sum()), "of", len(df))
    near = (df["d_kept"] < 0.05).sum()
    print("chosen within 0.05 of a kept design:", int(near))
    if "acq_chosen" in df:
        below = int((df["acq_kept_max"] < df["acq_chosen"] - 1e-9).sum())
        print("agent-rounds whose kept designs score below the chosen design:", below, "of",
              int(df["acq_chosen"].notna().sum()))


if __name__ == "__main__":
    main()
