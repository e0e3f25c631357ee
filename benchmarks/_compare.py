"""Helpers shared by the benchmark scripts' summaries (not a benchmark itself)."""

from __future__ import annotations

from typing import Any

import numpy as np


def checkpoints(n_trials: int, wanted: tuple[int, ...]) -> list[int]:
    """The trial counts of ``wanted`` that the runs reached, else just the last trial."""
    return [k for k in wanted if k <= n_trials] or [n_trials]


def wins_ties_losses(mine: Any, theirs: Any, sign: float = 1.0) -> tuple[int, str]:
    """Seed-by-seed comparison of two methods' best feasible values (Series indexed by seed).

    A seed is a win when ``sign * mine`` is strictly larger than ``sign * theirs`` (same seed,
    same shared initial trials), a tie when equal; a seed without a feasible trial (NaN) counts
    as the worst outcome. Returns the number of common seeds and "wins / ties / losses (p = ..)"
    with the two-sided sign test over the seeds that are not ties (scipy.stats.binomtest).
    """
    from scipy.stats import binomtest

    seeds = mine.index.intersection(theirs.index)
    a = np.nan_to_num(sign * mine[seeds].to_numpy(float), nan=-np.inf)
    b = np.nan_to_num(sign * theirs[seeds].to_numpy(float), nan=-np.inf)
    wins, losses = int((a > b).sum()), int((a < b).sum())
    p = binomtest(wins, wins + losses).pvalue if wins + losses else 1.0
    return len(seeds), f"{wins} / {len(seeds) - wins - losses} / {losses} (p = {p:.3f})"


# Speed benchmarks measure as users run (no thread variable set) and pinned, each in a fresh
# process (thread pools are sized when torch and OpenBLAS load).
THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "FAIRTUNE_NUM_THREADS",
)
THREAD_LABELS = {"default": "default (no variable set)", "pinned": "OMP_NUM_THREADS=1"}


def run_in_both_thread_settings(script: str, argv: list[str]) -> None:
    """Run ``script argv --threads default|pinned --no-header``: once with every thread
    variable removed from the environment, once with ``OMP_NUM_THREADS=1``."""
    import os
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    for mode, extra in (("default", {}), ("pinned", {"OMP_NUM_THREADS": "1"})):
        command = [sys.executable, script, *argv, "--threads", mode, "--no-header"]
        # Relay the child's lines through this process's sys.stdout as they come, so that a
        # caller that redirects sys.stdout sees them too.
        with subprocess.Popen(command, env={**base, **extra}, stdout=subprocess.PIPE,
                              text=True) as child:
            assert child.stdout is not None
            for line in child.stdout:
                print(line, end="", flush=True)
        if child.returncode:
            raise subprocess.CalledProcessError(child.returncode, command)
