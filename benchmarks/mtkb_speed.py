"""Time per suggestion of MT-KB, MT-BKB (MTKBSampler) and Optuna's GPSampler, side by side.

For each number of objectives n and each history size N, a study with N completed random trials
of a synthetic problem (random points: every trial informative, the worst case for MT-BKB's
dictionary; 4 float parameters; objective i a fixed random mix of three smooth
functions plus noise, so that the objectives are correlated) is built once per sampler
(identical copies); each sampler then runs ``--repeats`` further trials on its copy (one sampler
object, which keeps its warm starts), alternating trial by trial so that all see the same
machine load, and the median wall time of one suggestion (``study.ask``) is reported, with
MT-BKB's dictionary size at the last step. The exponent of MT-BKB's growth is the slope of
log(median time) against log(N).

Optuna's GPSampler computes a box decomposition of the Pareto front, which Optuna itself warns
"might be significantly slow for n_objectives > 4"; it is timed for n <= ``--gp-max-objectives``.

Each table is measured at default thread settings (no thread variable set, as users run) and
pinned (``OMP_NUM_THREADS=1``), each in a fresh process, every sampler the same way; ``--threads
default`` or ``--threads pinned`` runs one of them in this process as it is.

Usage (docs/benchmarks/mtkb.md):
    python -m benchmarks.mtkb_speed --objectives 2 20 --n-trials 100 200 500 --repeats 3 \\
        --gp-max-objectives 2
    python -m benchmarks.mtkb_speed --objectives 4 --n-trials 100 200 --gp-max-objectives 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import optuna
from optuna.distributions import FloatDistribution

from benchmarks._common import THREAD_LABELS, run_in_both_thread_settings

from fairtune.samplers import MTKBSampler

SPACE = {f"x{i}": FloatDistribution(0.0, 1.0) for i in range(4)}


def evaluate(params: dict, mix: np.ndarray, rng: np.random.RandomState) -> list[float]:
    u = np.array([params[k] for k in SPACE])
    base = np.array([np.sin(3 * u[0]) + u[1] ** 2, np.cos(2 * u[2]) - u[3], u[0] * u[3]])
    return (mix @ base + 0.01 * rng.randn(len(mix))).tolist()


def _mix(n: int) -> np.ndarray:
    return np.random.RandomState(100 + n).uniform(-1, 1, size=(n, 3))


def build(n: int, N: int, sampler: optuna.samplers.BaseSampler, seed: int) -> optuna.Study:
    """A study with N completed random trials."""
    rng = np.random.RandomState(seed)
    mix = _mix(n)
    study = optuna.create_study(directions=["maximize"] * n, sampler=sampler)
    random = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    for _ in range(N):
        params = random.ask(SPACE).params
        values = evaluate(params, mix, rng)
        study.add_trial(optuna.trial.create_trial(
            params=params, distributions=SPACE, values=values
        ))
    study._mix = mix  # type: ignore[attr-defined]
    return study


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objectives", nargs="+", type=int, default=[2, 4, 20])
    parser.add_argument("--n-trials", nargs="+", type=int, default=[100, 200, 500])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gp-max-objectives", type=int, default=4)
    parser.add_argument("--gp-max-trials", type=int, default=500)
    parser.add_argument("--threads", choices=["both", "default", "pinned"], default="both")
    parser.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.no_header:
        print("| thread settings | objectives | completed trials | MT-KB median s "
              "| MT-BKB median s | MT-BKB dictionary | GPSampler median s | MT-KB / GP "
              "| MT-BKB / GP |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    if args.threads == "both":
        run_in_both_thread_settings("benchmarks.mtkb_speed", sys.argv[1:] if argv is None else argv)
        return
    label = THREAD_LABELS[args.threads]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    exponents = {n: _time_one(args, label, n) for n in args.objectives}
    for n, slope in exponents.items():
        if slope is not None:
            print(f"MT-BKB time per suggestion ~ t^{slope:.2f} with {n} objectives "
                  f"(over {args.n_trials} trials; {label})")


def _time_one(args: argparse.Namespace, label: str, n: int) -> float | None:
    """One row per history size for n objectives; returns MT-BKB's growth exponent."""
    bkb_times = []
    for N in args.n_trials:
        samplers: dict[str, optuna.samplers.BaseSampler] = {
            "MT-KB": MTKBSampler(seed=0),
            "MT-BKB": MTKBSampler(seed=0, budgeted=True),
        }
        if n <= args.gp_max_objectives and N <= args.gp_max_trials:
            samplers["GP"] = optuna.samplers.GPSampler(seed=0)
        studies = {name: build(n, N, s, seed=0) for name, s in samplers.items()}
        rng = np.random.RandomState(1)
        times: dict[str, list[float]] = {name: [] for name in samplers}
        for _ in range(args.repeats):
            for name, study in studies.items():
                start = time.perf_counter()
                trial = study.ask(SPACE)
                times[name].append(time.perf_counter() - start)
                study.tell(trial, evaluate(trial.params, study._mix, rng))
        med = {name: statistics.median(v) for name, v in times.items()}
        bkb_times.append(med["MT-BKB"])
        gp = med.get("GP")
        ratio = (lambda name: f"{med[name] / gp:.2f}" if gp else "-")
        bkb = samplers["MT-BKB"]
        assert isinstance(bkb, MTKBSampler)
        print(f"| {label} | {n} | {N} | {med['MT-KB']:.3f} | "
              f"{med['MT-BKB']:.3f} | {bkb.last_dictionary_size} | "
              f"{f'{gp:.3f}' if gp else 'not run'} | {ratio('MT-KB')} | {ratio('MT-BKB')} |",
              flush=True)
    if len(args.n_trials) < 2:
        return None
    return float(np.polyfit(np.log(args.n_trials), np.log(bkb_times), 1)[0])


if __name__ == "__main__":
    main()
