"""Load test on PostgreSQL: many worker processes share one study on one database server.

A throwaway PostgreSQL server is started (``fairtune.testing.temporary_postgres``, from the
distribution's packages); for each sampler, ``--workers`` processes are started together on a new
database and each runs ``--trials`` trials of a cheap constrained objective (a 4-parameter
quadratic, 20 ms of "training") with ``study.optimize``, exactly as a user's workers would. Each
worker times every suggestion (``study.ask()`` up to its last ``suggest_*`` call, where the
sampler's relative sampling happens) and the study's trials are checked afterwards: trials
lost (fewer than workers x trials, or not COMPLETE), trial numbers recorded twice, and trials
that share a point. FairBOSampler and Optuna's GPSampler are run the same way, one after the
other (never at once: they would share the 2 cores), at default thread settings (the script
does not set any thread variable; run it without them, as users do). With ``--through grpc``
the workers reach the database through Optuna's gRPC storage proxy
(``optuna.storages.run_grpc_proxy_server`` on 127.0.0.1, ``GrpcStorageProxy`` in the workers),
measured next to the direct connection in the same run.

Usage:
    python -m benchmarks.postgres_load --workers 8 --trials 25
    python -m benchmarks.postgres_load --workers 16 --trials 20 --through direct grpc
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

WORKER = textwrap.dedent(
    """
    import json, sys, time
    import optuna
    from fairtune.samplers import FairBOSampler
    from fairtune.samplers._base import TrialSeededRandomSampler
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    url, sampler_name, n_trials, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if sampler_name == "FairBOSampler":
        sampler = FairBOSampler(seed=seed)
    else:  # seeded per trial number too, so that same-seed workers draw distinct startups
        sampler = optuna.samplers.GPSampler(seed=seed,
                                            independent_sampler=TrialSeededRandomSampler(seed))
    from fairtune._storage import open_storage
    study = optuna.load_study(study_name="load", storage=open_storage(url), sampler=sampler)
    latencies = []
    for _ in range(n_trials):
        start = time.perf_counter()
        trial = study.ask()
        x = [trial.suggest_float(f"x{i}", 0.0, 1.0) for i in range(4)]
        latencies.append(time.perf_counter() - start)
        time.sleep(0.02)  # the model's training
        trial.set_constraint("c", x[0] + x[1] - 1.2)
        study.tell(trial, -sum((v - 0.3) ** 2 for v in x))
    print(json.dumps(latencies))
    """
)


def _proxy(url: str) -> tuple[subprocess.Popen[bytes], str]:
    """A gRPC proxy server in front of the database ``url``, and the workers' URL for it."""
    import socket

    from fairtune._storage import open_storage

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-c", "import sys, optuna; optuna.logging.set_verbosity(optuna.logging."
         "WARNING); optuna.storages.run_grpc_proxy_server(optuna.storages.RDBStorage(sys.argv[1]),"
         " host='127.0.0.1', port=int(sys.argv[2]))", url, str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    grpc_url = f"grpc://127.0.0.1:{port}"
    open_storage(grpc_url).wait_server_ready(timeout=60)
    return server, grpc_url


def run(url: str, sampler: str, workers: int, trials: int, script: Path,
        through: str = "direct") -> dict[str, float]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.create_study(study_name="load", storage=url, direction="maximize")
    server, worker_url = _proxy(url) if through == "grpc" else (None, url)
    try:
        return _measure(url, worker_url, sampler, workers, trials, script)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)


def _measure(url: str, worker_url: str, sampler: str, workers: int, trials: int,
             script: Path) -> dict[str, float]:
    import optuna

    start = time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, str(script), worker_url, sampler, str(trials), "0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(workers)
    ]
    latencies: list[float] = []
    for p in procs:
        out, err = p.communicate(timeout=3600)
        if p.returncode != 0:
            raise RuntimeError(f"a {sampler} worker failed: {err}")
        latencies += json.loads(out.strip().splitlines()[-1])
    elapsed = time.perf_counter() - start
    study_trials = optuna.load_study(study_name="load", storage=url).get_trials()
    complete = [t for t in study_trials if t.state == optuna.trial.TrialState.COMPLETE]
    numbers = [t.number for t in study_trials]
    points = {tuple(sorted(t.params.items())) for t in complete}
    q = statistics.quantiles(latencies, n=20)
    return {
        "trials/s": len(complete) / elapsed,
        "p50": statistics.median(latencies),
        "p95": q[18],
        "lost": workers * trials - len(complete),
        "duplicated": len(numbers) - len(set(numbers)),
        "same point": len(complete) - len(points),
        "seconds": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--trials", type=int, default=25, help="trials per worker")
    parser.add_argument("--samplers", nargs="+", default=["FairBOSampler", "GPSampler"],
                        choices=["FairBOSampler", "GPSampler"])
    parser.add_argument("--through", nargs="+", default=["direct"], choices=["direct", "grpc"],
                        help="how the workers reach the database (grpc: Optuna's proxy)")
    args = parser.parse_args()
    from fairtune.testing import temporary_postgres

    print(f"{args.workers} worker processes x {args.trials} trials, one study on PostgreSQL\n")
    print("| sampler | storage | trials/s | suggestion p50 s | suggestion p95 s | lost trials |"
          " trial numbers recorded twice | complete trials sharing a point | wall s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    with temporary_postgres(max_connections=4 * args.workers + 20) as server:
        script = Path(__file__).resolve().parent / "results" / "tmp" / "postgres_load_worker.py"
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(WORKER)
        for sampler in args.samplers:
            for through in args.through:
                r = run(server.new_database(), sampler, args.workers, args.trials, script,
                        through)
                where = "gRPC proxy" if through == "grpc" else "direct"
                print(f"| {sampler} | {where} | {r['trials/s']:.2f} | {r['p50']:.3f} |"
                      f" {r['p95']:.3f} | {r['lost']} | {r['duplicated']} | {r['same point']} |"
                      f" {r['seconds']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
