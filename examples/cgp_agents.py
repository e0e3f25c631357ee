"""Four agents tune their own models together, sharing designs on a board and never their data
===========================================================================================

Four organizations each tune a gradient-boosting classifier on their *own* data: two hold
different slices of Adult, one holds German credit, one holds COMPAS. Each runs in its own
process with its own SQLite study (its trials, parameters and accuracies stay there). They meet
on one board, a third SQLite file, where ``CGPSampler`` posts per round only its LCB maximizer,
the LCB value and its best posterior mean (Chen et al. 2025). Accuracies on different datasets
have different scales, so every agent borrows its group's designs without comparing LCBs
(``share_without_comparison=True``, the paper's remedy) and lets its rejection step drop the ones
its own model contradicts. Each process then tunes again alone (``board=None``, same seed and
budget) and prints both best accuracies, which the figure shows side by side.

Run::

    python examples/cgp_agents.py                    # 4 processes x 20 trials (+ 20 alone)
    python examples/cgp_agents.py --n-trials 30
    python examples/cgp_agents.py --plot agents.png  # save the figure

Times at default settings (no thread variable set) on 2 cores: about 18 s on an idle
machine, 31 s on a busy one (two other single-threaded jobs running).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import optuna

AGENTS = ["adult-east", "adult-west", "german", "compas"]
# The agents' processes run this file. (sphinx-gallery, which runs it for the documentation,
# defines no __file__ but puts the file's path in sys.argv[0].)
SCRIPT = globals().get("__file__") or sys.argv[0]


def load_agent_data(agent: str, n_rows: int):
    """The agent's own (X, y): numeric features of its dataset (Adult split in two halves)."""
    from fairtune.datasets import FairtuneDatasetWarning, load_adult, load_compas, load_german

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FairtuneDatasetWarning)
        if agent.startswith("adult"):
            X, y, _ = load_adult(return_X_y=True)
            half = slice(0, n_rows) if agent == "adult-east" else slice(n_rows, 2 * n_rows)
            X, y = X.iloc[half], y.iloc[half]
        elif agent == "german":
            X, y, _ = load_german(return_X_y=True)
        else:
            X, y, _ = load_compas(return_X_y=True)
    X = X.select_dtypes("number").iloc[:n_rows]
    return X.to_numpy(float), y.iloc[:n_rows].to_numpy()


def objective_factory(agent: str, n_rows: int):
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import train_test_split

    from fairtune.tuning import limit_training_threads

    X, y = load_agent_data(agent, n_rows)
    X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.3, random_state=0,
                                                          stratify=y)

    def objective(trial: optuna.Trial) -> float:
        model = HistGradientBoostingClassifier(
            learning_rate=trial.suggest_float("learning_rate", 1e-3, 1.0, log=True),
            max_leaf_nodes=trial.suggest_int("max_leaf_nodes", 2, 64, log=True),
            min_samples_leaf=trial.suggest_int("min_samples_leaf", 1, 100, log=True),
            l2_regularization=trial.suggest_float("l2_regularization", 1e-6, 10.0, log=True),
            max_iter=50,
            random_state=0,
        )
        # Four agents share the machine: each trains on fairtune's training thread budget (one
        # thread unless FAIRTUNE_TRAINING_THREADS says otherwise) instead of one OpenMP thread
        # per core in every process, which made the agents wait for each other's threads.
        with limit_training_threads():
            model.fit(X_train, y_train)
            return float(model.score(X_valid, y_valid))

    return objective


def worker(agent: str, folder: str, board_url: str, n_trials: int, n_startup: int,
           n_rows: int, seed: int) -> None:
    """One agent's process: tune with the board, then alone; write both best values."""
    from fairtune.collaboration import Board, open_study
    from fairtune.samplers import CGPSampler

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    objective = objective_factory(agent, n_rows)
    board = Board(board_url, name="agents", seed=seed)
    best = {}
    for mode, sampler_board in (("together", board), ("alone", None)):
        sampler = CGPSampler(board=sampler_board, agent=agent, acquisition="ucb",
                             share_without_comparison=True, n_startup_trials=n_startup,
                             seed=seed)
        # The agent's own study, in its own file: no other agent reads it. open_study turns
        # on the heartbeat (a killed agent's trial ends as FAIL, not RUNNING forever) and
        # tolerates agents that start together on a new database.
        study = open_study(
            f"sqlite:///{Path(folder) / f'{agent}-{mode}.db'}", agent, direction="maximize",
            sampler=sampler,
        )
        study.optimize(objective, n_trials=n_trials)
        best[mode] = study.best_value
    (Path(folder) / f"{agent}.json").write_text(json.dumps(best))


def main(n_trials: int = 20, n_startup: int = 6, n_rows: int = 3000, seed: int = 0,
         folder: str | None = None, agents: list[str] | None = None
         ) -> dict[str, dict[str, float]]:
    from fairtune.collaboration import Board

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    tmp = None
    if folder is None:
        tmp = tempfile.TemporaryDirectory()
        folder = tmp.name
    board_url = f"sqlite:///{Path(folder) / 'board.db'}"
    board = Board(board_url, name="agents", seed=seed)  # created once, before the agents start
    agents = agents or AGENTS
    for agent in agents:  # known to the board before any trial: one Latin hypercube for all
        board.register(agent)
    processes = [
        subprocess.Popen([sys.executable, SCRIPT, "--worker", agent, "--folder", folder,
                          "--board", board_url, "--n-trials", str(n_trials),
                          "--n-startup", str(n_startup), "--n-rows", str(n_rows),
                          "--seed", str(seed)])
        for agent in agents
    ]
    codes = [p.wait() for p in processes]
    if any(codes):
        raise RuntimeError(f"an agent process failed: exit codes {codes}")
    results = {a: json.loads((Path(folder) / f"{a}.json").read_text()) for a in agents}
    print(f"{len(agents)} agents in {len(agents)} processes, {n_trials} trials each "
          f"({len(board.posts())} posts on the board)")
    print(f"  {'agent':>10}  together  alone")
    for agent, best in results.items():
        print(f"  {agent:>10}  {best['together']:.4f}    {best['alone']:.4f}")
    if tmp is not None:
        tmp.cleanup()
    return results


def plot(results: dict[str, dict[str, float]]):
    """Each agent's best validation accuracy, together on the board and alone."""
    import matplotlib.pyplot as plt
    import numpy as np

    agents = list(results)
    x = np.arange(len(agents))
    figure, ax = plt.subplots(figsize=(7, 4))
    for offset, mode in ((-0.2, "together"), (0.2, "alone")):
        ax.bar(x + offset, [results[a][mode] for a in agents], width=0.4, label=mode)
    ax.set_xticks(x, agents)
    low = min(v for best in results.values() for v in best.values())
    ax.set_ylim(max(0.0, low - 0.05), 1.0)
    ax.set_ylabel("best validation accuracy")
    ax.set_title("CGPSampler: agents sharing designs on a board, and alone")
    ax.legend()
    return figure


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-trials", type=int, default=20)
    parser.add_argument("--n-startup", type=int, default=6)
    parser.add_argument("--n-rows", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", metavar="PNG", help="save the figure there (else: show it)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--board", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.folder, args.board, args.n_trials, args.n_startup, args.n_rows,
               args.seed)
    else:
        results = main(n_trials=args.n_trials, n_startup=args.n_startup, n_rows=args.n_rows,
                       seed=args.seed)
        try:
            import matplotlib.pyplot as plt
        except ImportError:  # the figure needs matplotlib: pip install "fairtune[plot]"
            print("(install matplotlib to see the agents' accuracies)")
        else:
            figure = plot(results)
            if args.plot:
                figure.savefig(args.plot, bbox_inches="tight")
            elif plt.get_backend().lower() != "agg":  # a window, where there is a display
                plt.show()
