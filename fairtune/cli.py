"""The ``fairtune`` command line.

Usage::

    fairtune datasets        # table of the bundled fairness datasets
    fairtune tune --dataset german --model random_forest --limit "demographic_parity<=0.05" \
        --n-trials 40 --sampler fairbo --storage sqlite:///fairtune.db --plot tradeoff.png
    fairtune report --storage sqlite:///fairtune.db --study-name NAME --plot tradeoff.png

One function per subcommand: ``_add_<name>_parser(subparsers)`` declares its arguments and sets
``func`` to ``_cmd_<name>(args) -> int``; add it to ``_SUBCOMMANDS``. A command reports bad input
by raising an exception (``ValueError``, ``OSError``, ...): :func:`main` turns any exception into
a one-line message on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from fairtune._storage import JOURNAL_PREFIX, open_storage

PROG = "fairtune"
# Seconds between the heartbeats of a running trial on an RDB storage (`tune --heartbeat`).
_DEFAULT_HEARTBEAT = 30
# Attempts at creating or loading the study when other workers are creating it too.
_CREATE_ATTEMPTS = 5
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


class _UsageError(Exception):
    """Bad command-line usage (unknown subcommand, missing or malformed argument)."""


class _ArgumentParser(argparse.ArgumentParser):
    # argparse prints the usage and exits on a usage error; raise instead, so that `main` prints
    # one line and returns an exit code (and callers of `main(argv)` are not killed).
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{message} (see `{self.prog} --help`)")


# --------------------------------------------------------------------------------------------
# fairtune datasets
# --------------------------------------------------------------------------------------------


def _add_datasets_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "datasets",
        help="show the bundled fairness datasets",
        description=(
            "Print a table of the bundled fairness datasets: rows, features, positive rate "
            "(share of the favourable outcome), default sensitive attribute and group sizes."
        ),
    )
    parser.set_defaults(func=_cmd_datasets)


def _cmd_datasets(args: argparse.Namespace, *, out: TextIO) -> int:
    from fairtune.datasets import describe_datasets

    table = describe_datasets()
    rows = [
        [
            str(r.name),
            f"{r.loader}()",
            f"{r.rows:,}",
            str(r.features),
            f"{r.positive_rate:.3f}",
            str(r.favourable),
            str(r.sensitive),
            "; ".join(f"{group}: {size:,}" for group, size in r.groups.items()),
        ]
        for r in table.itertuples(index=False)
    ]
    header = [
        "name", "loader", "rows", "features", "pos. rate", "target = 1", "sensitive", "groups"
    ]
    right_aligned = {2, 3, 4}
    out.write(_format_table(header, rows, right_aligned=right_aligned))
    out.write(
        "\nTarget 1 is the favourable outcome. German credit and COMPAS have known fairness\n"
        "issues and warn when loaded: read load_german().DESCR and load_compas().DESCR.\n"
    )
    return EXIT_OK


def _format_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, right_aligned: set[int]
) -> str:
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]

    def fmt(line: Sequence[str]) -> str:
        cells = [
            cell.rjust(width) if i in right_aligned else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(line, widths))
        ]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([fmt(header), rule, *(fmt(row) for row in rows)]) + "\n"


# --------------------------------------------------------------------------------------------
# fairtune tune / fairtune report
# --------------------------------------------------------------------------------------------

_SAMPLERS = ("fairbo", "gp", "tpe", "random")
_METRIC_KEY = "fairtune:metric"  # study user attribute: the metric `tune` maximizes
_VALIDATION_KEY = "fairtune:validation"  # study user attribute: how `tune` validates trials


def _make_sampler(name: str, seed: int) -> Any:
    import optuna

    from fairtune.samplers._base import TrialSeededRandomSampler

    # Random draws seeded per trial number: workers started with one --seed on one storage
    # (the same command in several terminals) draw different random trials. TPE's startup
    # sampler cannot be replaced; its workers may repeat each other's first random trials.
    startup = TrialSeededRandomSampler(seed)
    if name == "fairbo":
        from fairtune.samplers import FairBOSampler

        return FairBOSampler(seed=seed, independent_sampler=startup)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed, independent_sampler=startup)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    return startup


def _add_tune_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "tune",
        help="tune a model for accuracy under fairness limits",
        description=(
            "Tune a model of the Fair BO paper's search spaces on a bundled dataset, maximizing "
            "a validation metric subject to fairness limits, and print the best fair trial. "
            "With --storage the study is saved and a second call resumes it, adding --n-trials "
            "more trials."
        ),
    )
    parser.add_argument("--dataset", required=True, help="adult, german or compas")
    parser.add_argument("--model", required=True, help="xgboost, random_forest, mlp or linear")
    parser.add_argument(
        "--limit", action="append", required=True, metavar="LIMIT",
        help='fairness limit such as "demographic_parity<=0.05" (repeatable)',
    )
    parser.add_argument("--n-trials", type=int, default=100, help="trials to run (default 100)")
    parser.add_argument("--sampler", choices=_SAMPLERS, default="fairbo", help="default fairbo")
    parser.add_argument("--metric", default="accuracy",
                        help="accuracy, balanced_accuracy, f1 or roc_auc (default accuracy)")
    parser.add_argument("--cv", type=int, metavar="K",
                        help="score trials by K-fold cross-validation instead of a 30%% split")
    parser.add_argument("--test-size", type=float, metavar="F",
                        help="hold out this fraction of the rows as a test split and report the "
                             "best fair model's scores on it")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampler and the splits")
    parser.add_argument(
        "--storage",
        help="Optuna storage: an RDB URL (sqlite:///fairtune.db, "
             "postgresql+psycopg://user@host/db) or a Journal file, journal:./fairtune.log",
    )
    parser.add_argument(
        "--heartbeat", type=int, default=_DEFAULT_HEARTBEAT, metavar="SECONDS",
        help="RDB storages: each running trial records a heartbeat this often, and a trial "
             "whose worker died ends as FAIL after twice as long without one (default "
             f"{_DEFAULT_HEARTBEAT}; 0 turns it off)",
    )
    parser.add_argument(
        "--retry-failed", type=int, default=1, metavar="N",
        help="re-run a trial that failed because its worker died up to N times, with the "
             "same parameters (default 1)",
    )
    parser.add_argument("--study-name", help="study name (default: dataset-model-sampler)")
    parser.add_argument("--n-jobs", type=int, default=1, help="parallel trials (threads)")
    parser.add_argument("--plot", metavar="PNG", help="write the trade-off plot to this file")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(func=_cmd_tune)


def _cmd_tune(args: argparse.Namespace, *, out: TextIO) -> int:
    import optuna

    from fairtune.fairness import is_feasible, parse_limits
    from fairtune.tuning import FairObjective

    if args.n_trials < 1:
        raise ValueError(f"--n-trials must be at least 1, but got {args.n_trials}.")
    if args.n_jobs < 1:
        raise ValueError(f"--n-jobs must be at least 1, but got {args.n_jobs}.")
    if args.heartbeat < 0:
        raise ValueError(f"--heartbeat must be 0 (off) or a number of seconds, but got "
                         f"{args.heartbeat}.")
    if args.retry_failed < 0:
        raise ValueError(f"--retry-failed must be 0 or more, but got {args.retry_failed}.")
    _check_plot_path(args.plot)
    limits = parse_limits(args.limit)
    objective = FairObjective(
        args.dataset, args.model, limits=limits, metric=args.metric, cv=args.cv,
        test_size=args.test_size, random_state=args.seed,
    )
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    name = args.study_name or f"{args.dataset}-{args.model}-{args.sampler}"
    heartbeat = (
        args.heartbeat if args.storage and not args.storage.startswith(JOURNAL_PREFIX) else 0
    )
    study = _create_or_load_study(name, args.storage, heartbeat=heartbeat,
                                  max_retry=args.retry_failed)
    if study.direction != optuna.study.StudyDirection.MAXIMIZE:
        raise ValueError(f"study {name!r} in the storage is not a maximization study.")
    # The metric and the validation protocol are stored with the study, so that `report` can
    # name the metric and a resumed study does not mix values measured in two ways.
    validation = (
        f"{objective.cv}-fold cross-validation" if objective.cv
        else f"a {objective.validation_size:.0%} validation split"
    ) + (f", {objective.test_size:g} held out for testing" if objective.test_size else "") + (
        f", split seed {objective.random_state}"
    )
    for key, value, hint in (
        (_METRIC_KEY, args.metric, "--metric"),
        (_VALIDATION_KEY, validation, "--cv, --test-size and --seed"),
    ):
        stored = study.user_attrs.get(key)
        if stored is None:
            study.set_user_attr(key, value)
        elif stored != value:
            what = "maximizes" if key == _METRIC_KEY else "was validated with"
            raise ValueError(
                f"study {name!r} in the storage {what} {stored!r}, but this run asks for "
                f"{value!r}; use the same {hint} as before or another --study-name."
            )
    # A resumed study continues the sampler's random stream instead of replaying it.
    study.sampler = _make_sampler(args.sampler, args.seed + len(study.trials))
    study.optimize(
        objective, n_trials=args.n_trials, n_jobs=args.n_jobs,
        show_progress_bar=not args.no_progress, catch=(ValueError, ArithmeticError),
    )
    _report(study, out=out, metric_name=args.metric, plot=args.plot)
    if args.test_size and any(is_feasible(t) for t in study.trials):
        # The model one deploys after refitting is not the one that was validated: report both.
        fits = [("tuning", "best fair trial refitted on the other rows")]
        if args.cv is None:
            fits.append(("training", "the validated model (training split only)"))
        for on, what in fits:
            scores = objective.evaluate(objective.refit_best(study, on=on))
            fair = scores.pop("fair")
            values = ", ".join(f"{k} {v:.4f}" for k, v in scores.items())
            verdict = "meets every limit" if fair else f"violates {objective.limits_text}"
            out.write(f"Test split ({len(objective.X_test)} rows), {what}: {values}; {verdict}.\n")
    return EXIT_OK


def _add_report_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="show the best fair trial of a stored study",
        description="Print the best fair trial of a study in an Optuna storage, and plot it.",
    )
    parser.add_argument("--storage", required=True, help="Optuna storage URL")
    parser.add_argument("--study-name", help="needed when the storage holds several studies")
    parser.add_argument("--plot", metavar="PNG", help="write the trade-off plot to this file")
    parser.add_argument("--metric", help="fairness metric on the plot's x axis")
    parser.set_defaults(func=_cmd_report)


def _create_or_load_study(
    name: str, storage: str | None, *, heartbeat: int = 0, max_retry: int = 0
) -> Any:
    """``optuna.create_study(..., load_if_exists=True)``, retried when workers race to create it.

    Several ``fairtune tune`` processes started together on a new database all try to create
    its tables and the study: the losers get a unique-constraint (or "database is locked")
    error from the database although the study then exists. Retrying loads it. ``storage`` is
    opened by :func:`fairtune._storage.open_storage` (Journal files, heartbeats).
    """
    import optuna
    from sqlalchemy.exc import IntegrityError, OperationalError

    def create() -> Any:
        opened = None if storage is None else open_storage(
            storage, heartbeat_interval=heartbeat or None, max_retry=max_retry
        )
        return optuna.create_study(
            study_name=name, storage=opened, direction="maximize", load_if_exists=True
        )

    for attempt in range(_CREATE_ATTEMPTS - 1):
        try:
            return create()
        except (IntegrityError, OperationalError):
            time.sleep(0.2 * (attempt + 1))
    return create()  # the last attempt's error is the user's


def _check_plot_path(plot: str | None) -> None:
    """Fail before a study runs (or loads) if its plot could not be written afterwards."""
    if plot is None:
        return
    folder = Path(plot).expanduser().resolve().parent
    if not folder.is_dir():
        raise ValueError(f"--plot must be a file in an existing folder, but got {plot!r} "
                         f"(no folder {str(folder)!r}).")


def _cmd_report(args: argparse.Namespace, *, out: TextIO) -> int:
    import optuna

    _check_plot_path(args.plot)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    name = args.study_name
    storage = open_storage(args.storage)
    if name is None:
        names = optuna.get_all_study_names(storage)
        if len(names) != 1:
            raise ValueError(
                f"--study-name is needed: the storage holds {len(names)} studies {names}."
            )
        name = names[0]
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        raise ValueError(f"no study named {name!r} in {args.storage}.") from None
    metric_name = study.user_attrs.get(_METRIC_KEY, "objective")
    _report(study, out=out, metric_name=metric_name, plot=args.plot, fairness_metric=args.metric)
    return EXIT_OK


def _report(
    study: Any,
    *,
    out: TextIO,
    metric_name: str,
    plot: str | None,
    fairness_metric: str | None = None,
) -> None:
    from optuna.trial import TrialState

    from fairtune.fairness import fairness_values, is_feasible

    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    feasible = [t for t in trials if is_feasible(t)]
    out.write(
        f"Study {study.study_name}: {len(study.trials)} trials, {len(trials)} complete, "
        f"{len(feasible)} fair.\n"
    )
    if not trials:
        out.write("No completed trial yet.\n")
        return
    if feasible:
        best = study.best_trial
        out.write(f"Best fair trial: #{best.number}\n")
    else:
        best = min(trials, key=lambda t: sum(max(v, 0.0) for v in t.constraints.values()))
        out.write(f"No trial meets every limit yet; the least unfair one is #{best.number}.\n")
    rows = [[metric_name, f"{best.value:.4f}", ""]]
    metrics = fairness_values(best)
    for name, value in metrics.items():
        violation = best.constraints.get(name)
        status = "" if violation is None else ("ok" if violation <= 0 else "violated")
        rows.append([name, f"{value:.4f}", status])
    for name, violation in best.constraints.items():
        if name not in metrics:  # set by hand (trial.set_constraint): its value, <= 0 is ok
            rows.append([f"constraint {name}", f"{violation:.4g}",
                         "ok" if violation <= 0 else "violated"])
    for name, value in best.params.items():
        rows.append([name, f"{value:.6g}" if isinstance(value, float) else str(value), "param"])
    out.write(_format_table(["", "value", ""], rows, right_aligned={1}))
    if plot:
        from fairtune.visualization import plot_tradeoff

        ax = plot_tradeoff(study, metric=fairness_metric)
        ax.figure.tight_layout()
        ax.figure.savefig(plot, dpi=120)
        import matplotlib.pyplot as plt

        plt.close(ax.figure)
        out.write(f"Trade-off plot written to {plot}\n")


# --------------------------------------------------------------------------------------------
# Parser and entry point
# --------------------------------------------------------------------------------------------

_SUBCOMMANDS: list[Callable[[Any], None]] = [
    _add_datasets_parser,
    _add_tune_parser,
    _add_report_parser,
]


def _build_parser() -> _ArgumentParser:
    from fairtune import __version__

    parser = _ArgumentParser(
        prog=PROG,
        description="Fairness-constrained and fair multi-tenant Bayesian optimization for Optuna.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    subparsers = parser.add_subparsers(
        title="commands", dest="command", metavar="COMMAND", parser_class=_ArgumentParser
    )
    subparsers.required = True
    for add_parser in _SUBCOMMANDS:
        add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``fairtune`` command line.

    Args:
        argv: The arguments without the program name. Defaults to ``sys.argv[1:]``.

    Returns:
        The exit code: 0 on success, 1 when a command fails, 2 on bad usage. Errors are printed
        as one line ``fairtune: error: ...`` on stderr, without a traceback.
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
        return int(args.func(args, out=sys.stdout))
    except _UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as e:  # --help and --version exit through argparse
        return e.code if isinstance(e.code, int) else EXIT_OK if e.code is None else EXIT_ERROR
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the CLI's contract: one line, no traceback
        message = " ".join(str(e).split()) or type(e).__name__
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
