"""Distributed FairBOSampler: do workers started together on one storage get distinct points?

Each study is run by ``--workers`` processes started at the same moment, each with its own
``FairBOSampler()`` (no seed, as separate machines would have) on one Journal file storage
(Optuna's file-based storage for several processes). The objective is a cheap constrained
problem whose constrained optimum lies on the edge of the box, where every worker's acquisition
peaks: minimize ``x + 0.1 * y`` subject to ``x <= 0.7``, with a short sleep standing in for
training. The table counts, over ``--studies`` studies, the trials whose parameters another trial
of the same study already had, and the studies with any such repeat.

Usage:
    OMP_NUM_THREADS=1 python -m benchmarks.fairbo_parallel --studies 10 --workers 3 \\
        --trials-per-worker 10
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from pathlib import Path

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

WORKER = textwrap.dedent(
    """
    import sys, time
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from fairtune.samplers import FairBOSampler

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    path, n_trials = sys.argv[1], int(sys.argv[2])
    storage = JournalStorage(JournalFileBackend(path))
    study = optuna.create_study(study_name="parallel", storage=storage, load_if_exists=True,
                                sampler=FairBOSampler())

    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        y = trial.suggest_float("y", 0.0, 1.0)
        trial.set_constraint("c", x - 0.7)
        time.sleep(0.05)  # the model's training
        return x + 0.1 * y

    study.optimize(objective, n_trials=n_trials)
    """
)


def run_study(workers: int, trials_per_worker: int) -> tuple[int, int]:
    """Run one study; return (repeated trials, trials)."""
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "journal.log")
        # Create the study first, so that the workers only load it.
        optuna.create_study(study_name="parallel",
                            storage=JournalStorage(JournalFileBackend(path)))
        procs = [
            subprocess.Popen([sys.executable, "-c", WORKER, path, str(trials_per_worker)])
            for _ in range(workers)
        ]
        codes = [p.wait() for p in procs]
        if any(codes):
            raise RuntimeError(f"a worker failed (exit codes {codes})")
        study = optuna.load_study(study_name="parallel",
                                  storage=JournalStorage(JournalFileBackend(path)))
        points = Counter(tuple(sorted(t.params.items())) for t in study.trials)
        return sum(n - 1 for n in points.values()), len(study.trials)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=10)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--trials-per-worker", type=int, default=10)
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    results = [run_study(args.workers, args.trials_per_worker) for _ in range(args.studies)]
    repeated = sum(r for r, _ in results)
    trials = sum(n for _, n in results)
    with_repeats = sum(r > 0 for r, _ in results)
    print("| workers | studies | trials | trials repeating another's point | studies with a repeat |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {args.workers} | {args.studies} | {trials} | {repeated} | {with_repeats} |")


if __name__ == "__main__":
    main()
