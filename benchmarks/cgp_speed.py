"""Speed of one CGPSampler suggestion: 6 parameters, 100 own trials, 3 borrowed designs.

One agent (Hartmann-6, 100 evaluated trials) shares an in-memory board with ``n_agents - 1``
others whose latest posts claim, with a high LCB, designs next to the agent's own posterior-mean
maximizer (which its rejection step keeps, so the fantasy models are built and used) or near its
best observed trial (mostly rejected), and a group size of 4, so that it borrows 3 designs. Each row is the
median wall time of ``--repeats`` suggestions (``study.ask`` and the parameters' suggest calls:
fit, kappa, LCB maximizer, post, reading the board, rejection sampling, fantasy models,
acquisition), at the sampler's default settings, for every acquisition and every S_raw in
``--raw-samples`` with 4 agents, and for every number of agents in ``--agents`` with the first
acquisition of ``--acquisitions`` and S_raw = 10^4.

The CPU time of the process during each suggestion is reported too (its median): on a machine
busy with other work it approximates the wall time on an idle one (with one thread; with several
it adds up their time). Measured at default thread settings (no thread variable set, as users
run) and pinned (``OMP_NUM_THREADS=1``), each in a fresh process (``--threads`` picks one); the CSV of each goes
to ``--out`` with ``_default`` or ``_pinned`` added to its name.

``--summarize CSV ...`` prints the table of CSVs already written (the thread setting read from
the ``_default`` / ``_pinned`` in the name), and the range of the seconds per suggestion.

Usage:
    python -m benchmarks.cgp_speed --out benchmarks/results/cgp_speed.csv
    python -m benchmarks.cgp_speed --acquisitions ei ucb --raw-samples 10000 --agents 16 \
        --out benchmarks/results/cgp_defaults_speed.csv     # the default acquisition, 16 agents
    python -m benchmarks.cgp_speed --summarize benchmarks/results/cgp_speed_default.csv \
        benchmarks/results/cgp_speed_pinned.csv
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import optuna
from optuna.distributions import FloatDistribution

from benchmarks._common import (
    THREAD_LABELS,
    append_rows,
    read_rows,
    run_in_both_thread_settings,
)
from benchmarks.collaborative_fair_regret import neg_hartmann6
from fairtune.collaboration import Board
from fairtune.samplers import CGPSampler

optuna.logging.set_verbosity(optuna.logging.WARNING)

SPACE = {f"x{i}": FloatDistribution(0.0, 1.0) for i in range(6)}


def measure(acquisition: str, n_raw: int, n_agents: int, repeats: int, near_kappa: bool
            ) -> dict[str, float]:
    rng = np.random.RandomState(0)
    board = Board(optuna.storages.InMemoryStorage(), name="speed", seed=0)
    sampler = CGPSampler(board=board, agent="me", acquisition=acquisition,  # type: ignore[arg-type]
                         n_raw_samples=n_raw, group_size=4, seed=0)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    X = rng.uniform(size=(100, 6))
    for x in X:
        study.add_trial(optuna.trial.create_trial(
            params={f"x{i}": float(v) for i, v in enumerate(x)}, distributions=SPACE,
            value=neg_hartmann6(x) + 0.1 * rng.normal(),
        ))
    peers = [f"peer{k:03d}" for k in range(n_agents - 1)]
    for name in peers:
        board.register(name, SPACE)

    def post_peers(round_: int) -> None:
        if near_kappa:
            # Designs next to this agent's current posterior-mean maximizer, which its rejection
            # step keeps: the fantasy models are then built and used.
            sampler._post_round(study)
            (state,) = sampler._state.values()
            center, spread = state.x_kappa, 0.005
            sampler._state.clear()  # the timed suggestion computes everything again
        else:  # near its best observed trial (mostly rejected)
            center = X[np.argmax([t.value for t in study.trials[:100]])]
            spread = 0.03
        for name in peers:
            design = np.clip(center + rng.normal(0, spread, size=6), 0, 1)
            board.post(name, round_, {f"x{i}": float(v) for i, v in enumerate(design)},
                       lcb=10.0, kappa=10.0)

    times, cpu_times, kept = [], [], []
    for repeat in range(repeats):
        post_peers(100 + repeat)
        t0, c0 = time.perf_counter(), time.process_time()
        trial = study.ask()
        for name, dist in SPACE.items():
            trial.suggest_float(name, dist.low, dist.high)
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
        kept.append(int(sampler.last_borrowing["kept"].sum()))
        study.tell(trial, neg_hartmann6(np.array([trial.params[n] for n in SPACE])))
    return {"seconds": statistics.median(times), "cpu_seconds": statistics.median(cpu_times),
            "borrowed": len(sampler.last_borrowing["borrowed"]),
            "kept": statistics.median(kept)}


HEADER = ("| thread settings | acquisition | S_raw | agents on the board | peers' designs "
          "| borrowed | kept | seconds per suggestion | CPU seconds |\n"
          "|---|---|---|---|---|---|---|---|---|")


def _line(label: str, row: dict) -> str:
    cpu = f"{float(row['cpu_seconds']):.2f}" if row.get("cpu_seconds") not in (None, "") else "-"
    return (f"| {label} | {row['acquisition']} | {row['n_raw_samples']} | {row['n_agents']} | "
            f"{row['designs']} | {row['borrowed']} | {float(row['kept']):g} | "
            f"{float(row['seconds']):.2f} | {cpu} |")


def summarize(paths: list[Path]) -> str:
    """The table of result files already written, and the range of the seconds."""
    lines, seconds = [HEADER], []
    for path in paths:
        setting = path.stem.rpartition("_")[2]
        for row in read_rows(path):
            lines.append(_line(THREAD_LABELS.get(setting, "not recorded"), row))
            seconds.append(float(row["seconds"]))
    lines.append(f"\nseconds per suggestion: {min(seconds):.2f}-{max(seconds):.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--acquisitions", nargs="+", default=["ucb", "ei", "ts"])
    parser.add_argument("--raw-samples", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--agents", type=int, nargs="+", default=[4, 16, 64, 256])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("cgp_speed.csv"))
    parser.add_argument("--threads", choices=["both", "default", "pinned"], default="both")
    parser.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--summarize", type=Path, nargs="+", metavar="CSV",
                        help="print the table of these result files instead of measuring")
    args = parser.parse_args()
    if args.summarize:
        print(summarize(args.summarize))
        return
    if not args.no_header:
        print(HEADER, flush=True)
    if args.threads == "both":
        run_in_both_thread_settings("benchmarks.cgp_speed", sys.argv[1:])
        return
    label = THREAD_LABELS[args.threads]
    args.out = args.out.with_name(f"{args.out.stem}_{args.threads}{args.out.suffix}")
    settings = [(a, r, 4, near) for near in (True, False) for a in args.acquisitions
                for r in args.raw_samples]
    settings += [(args.acquisitions[0], 10000, n, True) for n in args.agents if n != 4]
    rows = []
    for acquisition, n_raw, n_agents, near in settings:
        result = measure(acquisition, n_raw, n_agents, args.repeats, near)
        where = "near its kappa" if near else "near its best trial"
        rows.append({"acquisition": acquisition, "n_raw_samples": n_raw, "n_agents": n_agents,
                     "designs": where, **result})
        print(_line(label, rows[-1]), flush=True)
    args.out.unlink(missing_ok=True)  # a measurement replaces the last one
    append_rows(args.out, rows)


if __name__ == "__main__":
    main()
