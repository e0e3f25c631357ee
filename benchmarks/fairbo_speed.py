"""Time per suggestion of FairBOSampler vs Optuna's GPSampler, side by side in one run.

For each N, a study with N completed random trials (7 parameters, 1 constraint, a synthetic
objective) is built once per sampler (identical copies); each sampler then runs ``--repeats``
further trials on its copy, as in real use (one sampler object, so both keep their warm starts
between suggestions), and the median wall time of one suggestion (``study.ask``) is reported.
The samplers alternate trial by trial so that all see the same machine load. A third column
times FairBOSampler with ``binary_constraints=True`` (the constraint's sign only, modelled by EP
GP classification), which GPSampler cannot do. A fourth times FairBOSampler on the same problem
where 30 % of the box (``x0 < 0.3``) reports one fixed fair outcome, as a model that predicts one
class would: the repeated outcome adds an EP classifier fit to each suggestion (FairBOSampler's
step 7).

GPSampler optimizes its acquisition from several starts at once when the ``greenlet`` package is
installed and one start after another otherwise, which is slower; install it (``pip install -e
".[bench]"``) to compare with GPSampler at its fastest. The script says which case it measured.

Thread settings: users do not set ``OMP_NUM_THREADS``, so each table is measured twice, each
time in a fresh process: at default settings (every thread variable removed from the
environment: torch and OpenBLAS then start one thread per core, and FairBOSampler's engine limits
itself, see ``fairtune._threads``) and pinned (``OMP_NUM_THREADS=1``), with both samplers
measured the same way in the same process. ``--threads default`` or ``--threads pinned`` runs one
of them in the current process (as it is: the script does not change its own environment).

Usage:
    python -m benchmarks.fairbo_speed --n-trials 30 100 200 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import optuna
from optuna.distributions import FloatDistribution, IntDistribution

from benchmarks._common import THREAD_LABELS, run_in_both_thread_settings

from fairtune.samplers import FairBOSampler

SPACE = {
    "x0": FloatDistribution(0.0, 1.0),
    "x1": FloatDistribution(1e-3, 1.0, log=True),
    "x2": FloatDistribution(-5.0, 5.0),
    "x3": IntDistribution(1, 16),
    "x4": IntDistribution(1, 256, log=True),
    "x5": FloatDistribution(0.0, 0.1),
    "x6": FloatDistribution(0.01, 1.0),
}


def evaluate(params: dict, plateau: bool = False) -> tuple[float, float]:
    u = np.array([SPACE[k].to_internal_repr(v) for k, v in params.items()], dtype=float)
    if plateau and u[0] < 0.3:
        return -1.0, -0.5  # the same (objective, constraint) wherever it happens
    value = float(np.sin(3 * u[0]) + np.log(u[1]) / 7 - 0.1 * u[2] ** 2 + 0.02 * u[3])
    constraint = float(u[0] + 0.05 * u[2] - 0.6 + 0.01 * np.sin(17 * u[6]))
    return value, constraint


def build_study(
    n: int, seed: int, sampler: optuna.samplers.BaseSampler, plateau: bool = False
) -> optuna.Study:
    study = optuna.create_study(direction="maximize", sampler=sampler)
    random = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    for _ in range(n):
        params = random.ask(SPACE).params
        value, constraint = evaluate(params, plateau)
        study.add_trial(
            optuna.trial.create_trial(
                params=params, distributions=SPACE, value=value,
                system_attrs={"constraints:dsp": constraint},
            )
        )
    return study


def timed_trial(study: optuna.Study, plateau: bool = False) -> float:
    start = time.perf_counter()
    trial = study.ask(SPACE)
    elapsed = time.perf_counter() - start
    value, constraint = evaluate(trial.params, plateau)
    trial.set_constraint("dsp", constraint)
    study.tell(trial, value)
    return elapsed


HEADER = (
    "| thread settings | completed trials | FairBOSampler median s | GPSampler median s |"
    " ratio FairBO / GP | FairBOSampler, binary constraint, median s |"
    " FairBOSampler, 30 % of the box one repeated outcome, median s |\n"
    "|---|---:|---:|---:|---:|---:|---:|"
)


def gpsampler_mode() -> str:
    try:  # as Optuna decides
        import greenlet  # noqa: F401

        batched = True
    except ImportError:
        batched = False
    mode = "batched (greenlet installed)" if batched else "sequential (greenlet not installed)"
    return f"GPSampler's acquisition starts: {mode}\n"


def run_both(argv: list[str]) -> None:
    """Run the measurement at default thread settings and pinned, each in a fresh process."""
    print(gpsampler_mode())
    print(HEADER, flush=True)
    run_in_both_thread_settings("benchmarks.fairbo_speed", argv)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-trials", type=int, nargs="+", default=[30, 100, 200])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", choices=["both", "default", "pinned"], default="both")
    parser.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads == "both":
        run_both(sys.argv[1:])
        return
    label = THREAD_LABELS[args.threads]
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    samplers = {
        "FairBOSampler": lambda: FairBOSampler(seed=args.seed, n_startup_trials=5),
        "GPSampler": lambda: optuna.samplers.GPSampler(seed=args.seed, n_startup_trials=5),
        "binary": lambda: FairBOSampler(
            seed=args.seed, n_startup_trials=5, binary_constraints=True
        ),
        "plateau": lambda: FairBOSampler(seed=args.seed, n_startup_trials=5),
    }
    if not args.no_header:
        print(gpsampler_mode())
        print(HEADER)
    for n in args.n_trials:
        studies = {
            name: build_study(n, args.seed, make(), plateau=name == "plateau")
            for name, make in samplers.items()
        }
        times: dict[str, list[float]] = {name: [] for name in samplers}
        for _ in range(args.repeats):
            for name, study in studies.items():
                times[name].append(timed_trial(study, plateau=name == "plateau"))
        fair = statistics.median(times["FairBOSampler"])
        gp = statistics.median(times["GPSampler"])
        binary = statistics.median(times["binary"])
        plateau = statistics.median(times["plateau"])
        print(f"| {label} | {n} | {fair:.3f} | {gp:.3f} | {fair / gp:.2f} | {binary:.3f} |"
              f" {plateau:.3f} |", flush=True)


if __name__ == "__main__":
    main()
