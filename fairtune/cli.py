"""The ``fairtune`` command line.

Usage::

    fairtune datasets        # table of the bundled fairness datasets
    fairtune tune --dataset german --model random_forest --limit "demographic_parity<=0.05" \
        --n-trials 40 --sampler fairbo --storage sqlite:///fairtune.db --plot tradeoff.png
    fairtune report --storage sqlite:///fairtune.db --study-name NAME --plot tradeoff.png

One function per subcommand: ``_add_<name>_parser`` declares its arguments and sets ``func`` to
``_cmd_<name>(args) -> int``. Bad usage raises ``_UsageError`` (exit code 2), a failure any other
exception (exit code 1); :func:`main` prints either as one line naming the flags as typed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from fairtune._interrupts import check_run, one_line, optimize_guarded
from fairtune._names import argument_names, number
from fairtune._storage import (
    check_storage_url,
    create_or_load_named_study,
    database_errors,
    in_memory,
    load_named_study,
    reported_error,
)
from fairtune._text import printable
from fairtune.report import check_output_path

PROG = "fairtune"
# Seconds between the heartbeats of a running trial on an RDB storage (`tune --heartbeat`).
_DEFAULT_HEARTBEAT = 30
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
DASHBOARD_EVERY = 10
"""``tune --dashboard`` updates the dashboard's view after every this many trials."""
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a process ended by Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as for `yes | head -1`


class _UsageError(Exception):
    """Bad command-line usage (unknown subcommand, missing or malformed argument)."""


class _ArgumentParser(argparse.ArgumentParser):
    # argparse prints the usage and exits on a usage error; raise instead, so that `main` prints
    # one line and returns an exit code (and callers of `main(argv)` are not killed).
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{message} (see `{self.prog} --help`)")


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
    from fairtune.datasets import describe_datasets_text

    out.write(describe_datasets_text())
    return EXIT_OK


# fairtune.samplers.SAMPLER_NAMES, without importing the samplers (and torch) to parse flags.
_SAMPLERS = ("fairbo", "gp", "tpe", "random", "mtkb")
_MULTI_OBJECTIVE_SAMPLERS = ("mtkb", "gp", "tpe", "random")
_DATASETS = ("adult", "german", "compas")
# FairObjective's and read_table's argument names -> the flags a user types: the library's
# messages name these (fairtune._names.argument_names), whichever flags this run was given.
_FLAGS = {
    "dataset": "--dataset", "model": "--model", "limits": "--limit", "metric": "--metric",
    "cv": "--cv", "test_size": "--test-size", "random_state": "--seed",
    "mitigation": "--mitigation", "objectives": "--objectives", "margin": "--margin",
    "drop_columns": "--drop-columns", "use_sensitive_feature=False": "--hide-sensitive",
    "use_sensitive_feature": "--hide-sensitive", "study": "study", "study_name": "--study-name",
    "tenant": "--tenant", "tenants": "--tenants", "agent": "--agent", "board": "--board",
    "storage": "--storage", "sampler": "--sampler (or --objectives)", "pruner": "--pruner",
    "budgets": "--budgets", "resource": "--resource", "pos_label": "--positive",
    "positive": "--positive", "target": "--target", "confidence": "--confidence",
    "safety_size": "--safety-size", "curve": "--curve", "html": "--html", "bound": "--bound",
}
# With --data, the dataset is the user's file, whose groups --sensitive names (a bundled
# dataset's are its own).
_DATA_FLAGS = {**_FLAGS, "dataset": "--data", "path": "--data", "sensitive": "--sensitive"}


def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, but got {text!r}")
        return value

    return parse


def _add_tune_parser(subparsers: Any) -> None:
    from fairtune.tuning import METRIC_NAMES, MITIGATIONS, PRUNER_NAMES, SPACES

    parser = subparsers.add_parser(
        "tune",
        help="tune a model for accuracy under fairness limits",
        description="Tune a model on a bundled dataset or your own file for a validation metric "
                    "under fairness limits, and print the model to deploy; the first trial is the "
                    "untuned model. With --storage a second call resumes the study.",
    )
    data = parser.add_mutually_exclusive_group(required=True)
    data.add_argument("--dataset", choices=_DATASETS, help="a bundled dataset")
    data.add_argument("--data", metavar="FILE",
                      help="your own table: a .csv or .parquet file with a header row; with "
                           "--target and --sensitive")
    parser.add_argument("--target", metavar="COLUMN", help="--data: the column of outcomes")
    parser.add_argument("--sensitive", type=_column_list, metavar="COLUMN[,COLUMN...]",
                        help="--data: the column(s) of the groups the limits protect")
    parser.add_argument("--positive", metavar="VALUE",
                        help="--data: the favourable outcome, unless the target is 0/1")
    parser.add_argument("--model", required=True, choices=sorted(SPACES),
                        help="a registered search space (fairtune.tuning.SPACES)")
    parser.add_argument("--limit", action="append", metavar="LIMIT",
                        help='a fairness limit, e.g. "demographic_parity<=0.05" (repeatable)')
    parser.add_argument("--objectives", metavar="NAMES", help="several objectives, e.g. "
                        "accuracy,demographic_parity: prints the Pareto-optimal trials")
    parser.add_argument("--mitigation", choices=(*MITIGATIONS, "auto"),
                        help="fairlearn's mitigation inside every trial, tuned with the model "
                             "(auto: the study chooses); default none")
    parser.add_argument("--hide-sensitive", action="store_true",
                        help="keep the sensitive columns out of the model's inputs")
    parser.add_argument("--drop-columns", type=_column_list, default=[], metavar="COL[,COL...]",
                        help="columns the model does not see (e.g. one that gives the group away)")
    parser.add_argument("--margin", type=number, default=0.0, metavar="M",
                        help="validate against the limits less M, a guessed safety margin "
                             "(default 0; --confidence derives one from the data)")
    parser.add_argument("--confidence", type=number, metavar="LEVEL",
                        help="deploy a model only with a certificate that it keeps the limits on "
                             "new data at this level (e.g. 0.95), else exit 1")
    parser.add_argument("--safety-size", type=number, metavar="F",
                        help="with --confidence: the share of the tuning rows kept for the "
                             "safety test (default 0.5)")
    parser.add_argument("--bound", choices=("exact", "score", "hoeffding"),
                        help="with --confidence: the test of each pair of groups on the safety "
                             "rows (default exact; score is asymptotic, hoeffding the widest)")
    parser.add_argument("--n-trials", type=_int_at_least(1), default=100,
                        help="trials to run (default 100)")
    parser.add_argument("--sampler", choices=_SAMPLERS, help="default fairbo (mtkb with "
                        "--objectives; fairbo is single-objective)")
    parser.add_argument("--metric", choices=METRIC_NAMES, help="the validation metric (default "
                        "accuracy; not with --objectives)")
    parser.add_argument("--cv", type=_int_at_least(2), metavar="K",
                        help="score trials by K-fold cross-validation instead of a 30%% split")
    parser.add_argument("--test-size", type=number, metavar="F", help="hold out this "
                        "fraction of the rows as a test split and report the deployed model's "
                        "scores on it")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampler and the splits")
    parser.add_argument("--pruner", choices=PRUNER_NAMES, help="multi-fidelity: fit each trial "
                        "on --budgets of the training rows, stopping poor ones early")
    parser.add_argument("--budgets", type=_budgets, metavar="F,F,...,1", help="with --pruner: "
                        "fractions of --resource, e.g. 0.25,1 (default 1/9,1/3,1)")
    parser.add_argument("--resource", default="n_samples", metavar="PARAM", help="what --budgets "
                        "cut: n_samples (training rows) or n_estimators (boosting rounds, trees)")
    _add_team_arguments(parser)
    _add_run_arguments(parser)
    parser.set_defaults(func=_cmd_tune)


def _add_team_arguments(parser: argparse.ArgumentParser) -> None:
    """Joining a study shared by tenants, or a board shared by agents, from one process."""
    team = parser.add_argument_group("teams (each process one team, with its own --data)")
    team.add_argument("--tenant", metavar="NAME", help="tune as this tenant of the shared study "
                      "--study-name in --storage (CollaborativeUCBSampler)")
    team.add_argument("--tenants", type=lambda v: _column_list(v, "tenant names"),
                      metavar="A,B,C", help="every tenant of the shared study, in the same "
                      "order everywhere")
    team.add_argument("--agent", metavar="NAME", help="tune as this agent, its own study "
                      "in --storage, sharing designs (never data) on --board (CGPSampler)")
    team.add_argument("--board", metavar="URL", help="the agents' board: an Optuna storage URL")
    team.add_argument("--board-name", default="fairtune", help="the board's name in --board")


def _team_sampler(args: argparse.Namespace) -> Any:
    """The shared sampler of ``--tenant/--tenants`` or ``--agent/--board``, or None."""
    from fairtune.samplers import team_sampler

    with argument_names(_FLAGS):
        if args.board is not None:
            _usage(check_storage_url, args.board, create=True, flag="--board")
        with database_errors("--board", args.board):
            return _usage(team_sampler, tenant=args.tenant, tenants=args.tenants,
                          agent=args.agent, board=args.board, board_name=args.board_name,
                          storage=args.storage, seed=args.seed, alone=not (
                              args.objectives or args.sampler))


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a study is stored, how its workers run and what the run writes."""
    parser.add_argument("--storage", help="Optuna storage: sqlite:///fairtune.db, postgresql+"
                        "psycopg://user@host/db, journal:./fairtune.log or grpc://host:port")
    parser.add_argument("--heartbeat", type=_int_at_least(0), default=_DEFAULT_HEARTBEAT,
                        metavar="SECONDS", help="RDB storages: a dead worker's trial fails after "
                        f"twice this without a heartbeat (default {_DEFAULT_HEARTBEAT}; 0: off)")
    parser.add_argument("--retry-failed", type=_int_at_least(0), default=1, metavar="N",
                        help="re-run a dead worker's trial up to N times (default 1)")
    parser.add_argument("--study-name", help="study name (default: dataset-model-sampler)")
    parser.add_argument("--n-jobs", type=_int_at_least(1), default=1,
                        help="parallel trials (threads); Ctrl-C lets the running ones finish")
    _add_report_outputs(parser)
    parser.add_argument("--dashboard", action="store_true",
                        help="show the fair search in optuna-dashboard (a study note and two "
                             f"figures, updated every {DASHBOARD_EVERY} trials and at the end); "
                             "needs --storage and pip install 'fairtune[dashboard]'")
    parser.add_argument("--artifacts", metavar="DIR",
                        help="--dashboard, and also keep the HTML report in this artifact "
                             "directory (start optuna-dashboard with --artifact-dir DIR)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _budgets(value: str) -> list[float]:
    """``--budgets 1/9,1/3,1`` (fractions or decimals) -> [0.111..., 0.333..., 1.0]."""
    from fractions import Fraction

    try:
        return [float(Fraction(v.strip())) for v in value.split(",")]
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"expected numbers or fractions (1/9) separated by "
                                         f"commas, but got {value!r}") from None


def _column_list(value: str, what: str = "column names") -> list[str]:
    """``--drop-columns a,b`` -> ["a", "b"]."""
    columns = [c.strip() for c in value.split(",")]
    if not all(columns):
        raise argparse.ArgumentTypeError(
            f"expected {what} separated by commas, but got {value!r}"
        )
    return columns


@contextlib.contextmanager
def _warnings_printed() -> Iterator[None]:
    """The library's warnings in the block as one line each, in the command line's words: flags
    for argument names, a dataset's known issues without Python's advice on silencing them."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        message = warning.message
        text = getattr(message, "issues", "") or one_line(message)  # type: ignore[arg-type]
        print(f"{PROG}: warning: {text}", file=sys.stderr)


def _cmd_tune(args: argparse.Namespace, *, out: TextIO) -> int:
    import optuna

    from fairtune.tuning._certify import aimed_text

    _check_files(args, ("--plot", "--html"), create=True)
    if args.study_name is not None and not args.study_name.strip():
        raise _UsageError(f"--study-name must name the study, but got {args.study_name!r}; "
                          "leave it out for the default name.")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    multi = bool(args.objectives)
    view = _dashboard_view(args, multi)
    team = _team_sampler(args)
    args.sampler = args.sampler or ("mtkb" if multi else None if team else "fairbo")
    objective = _tune_objective(args)
    source = args.dataset or Path(args.data).name.split(".")[0]
    name = args.study_name or (f"{args.model}-tenants" if args.tenant else args.agent
                               or f"{source}-{args.model}-{args.sampler}")
    with database_errors("--storage", args.storage):
        study = create_or_load_named_study(name, args.storage, heartbeat=args.heartbeat,
                                           max_retry=args.retry_failed,
                                           directions=objective.directions or None)
        if team is not None:  # before the setup is checked: the tenants are part of it
            study.sampler = team
        # Refused if stored with another kind or setup: its trials would not be comparable.
        with argument_names(_flags(args)):
            _usage(objective.prepare, study, sampler=args.sampler, seed=args.seed,
                   pruner=args.pruner)
        if (objective.margin or objective.confidence) and not multi:
            out.write(aimed_text(objective.limits, objective.tuning_limits, objective.margin,
                                 objective.confidence, objective.bound,
                                 objective.X_test is not None) + "\n")
        guard, run = optimize_guarded(study, objective, n_trials=args.n_trials, n_jobs=args.n_jobs,
                                      show_progress_bar=not args.no_progress, tenant=args.tenant,
                                      callbacks=[view] if view else [])
        try:
            return _finish_tune(study, objective, args, out, guard, run, multi, team)
        except KeyboardInterrupt:  # after the search: in the safety test or the report
            return _interrupted_after_search(study, objective, args, run, multi)
        finally:
            if view is not None:  # once more at the end, with the test verdict
                _publish(study, view, args, out)


def _finish_tune(study: Any, objective: Any, args: argparse.Namespace, out: TextIO,
                 guard: Any, run: list[Any], multi: bool, team: Any) -> int:
    """What ``tune`` prints after the search: the report, the test split, the certificate."""
    from fairtune import report

    record = None
    if not multi and not guard.interrupted:
        # The safety test and the test split first, so that the report opens with them.
        with argument_names(_flags(args)), _warnings_printed():  # e.g. of untested trials
            record = objective.conclude(study)
    # A tenant's report: the table of every tenant, and its own best fair trial and plots.
    report.print_report(study, out, plot=args.plot, tenant=args.tenant)
    if args.agent:
        out.write(report.board_text(team.board, args.agent))
    if guard.interrupted:
        print(f"{PROG}: interrupted after {len(run)} trials of this run; to resume, "
              f"{_resume_hint(args)}.", file=sys.stderr)
        return EXIT_INTERRUPTED
    failed = check_run(guard, run)
    if failed:
        print(f"{PROG}: warning: {failed}", file=sys.stderr)
    if record is not None and record.why == "refused":
        print(f"{PROG}: error: {record.certificate['message']}", file=sys.stderr)
        _write_html(study, args.html, out=out, tenant=args.tenant)
        return EXIT_ERROR
    if args.test_size and multi:
        scored = [(t.number, objective.evaluate(objective.refit_best(study, trial=t),
                                                 confidence_level=report.TEST_CONFIDENCE))
                  for t in sorted(study.best_trials, key=lambda t: t.number)]
        out.write(report.pareto_test_text(len(objective.X_test), scored))
    _write_html(study, args.html, out=out, tenant=args.tenant)
    return EXIT_OK


def _resume_hint(args: argparse.Namespace) -> str:
    return (f"run the same command again (the study is stored in {args.storage})" if args.storage
            else "this study was in memory; use --storage to be able to resume")


def _interrupted_after_search(study: Any, objective: Any, args: argparse.Namespace,
                              run: list[Any], multi: bool) -> int:
    """Ctrl-C after every trial of the run ended: the trials are stored; say what did not
    happen (the safety test, the report) and how to resume."""
    from fairtune.fairness import best_fair_trial

    missed = ("the safety test, so no model is certified" if objective.confidence is not None
              else "the report")
    best = None if multi else best_fair_trial(study, tenant=args.tenant)
    so_far = "" if multi else (f"; the best fair trial so far is #{best.number}" if best
                               else "; no trial is fair so far")
    print(f"{PROG}: interrupted after the search ({len(run)} trials of this run, stored), "
          f"during {missed}{so_far}; to resume, {_resume_hint(args)}.", file=sys.stderr)
    return EXIT_INTERRUPTED


def _dashboard_view(args: argparse.Namespace, multi: bool) -> Any:
    """``--dashboard`` (``--artifacts DIR``): the callback that keeps the study's view in
    optuna-dashboard up to date, or None; refused before any trial where it cannot work."""
    flag = "--dashboard" if args.dashboard else "--artifacts"  # --artifacts implies the view
    if args.artifacts is None and not args.dashboard:
        return None
    if not args.storage or in_memory(args.storage):
        got = f"--storage {args.storage}" if args.storage else "no --storage"
        raise _UsageError(f"{flag} writes the fair search's view into the study for "
                          "optuna-dashboard to show, so it needs a --storage the dashboard can "
                          f"read (a database file or server), but got {got}.")
    if multi:
        raise _UsageError(f"{flag} shows a single-objective study's best fair trial; "
                          "optuna-dashboard shows the Pareto front of --objectives itself.")
    from fairtune.dashboard import DashboardCallback, artifact_directory

    store = None if args.artifacts is None else _usage(artifact_directory, args.artifacts,
                                                       argument="--artifacts")

    try:
        return DashboardCallback(DASHBOARD_EVERY, artifact_store=store)
    except ImportError as e:
        raise _UsageError(f"--dashboard: {e}") from None


def _publish(study: Any, view: Any, args: argparse.Namespace, out: TextIO) -> None:
    """The dashboard's view of ``study`` as it ends (a failure is a warning)."""
    with _warnings_printed():
        updated = view.after_search(study)
    where = (f"; the HTML report in --artifacts {printable(args.artifacts)}"
             if args.artifacts is not None else "")
    if updated:
        out.write(f"optuna-dashboard: the study's note and figures are updated{where}.\n")


def _tune_objective(args: argparse.Namespace) -> Any:
    """The FairObjective of ``tune``'s flags (its warnings printed as one line each); the
    library's messages name the flags (:data:`_FLAGS`)."""
    from fairtune.datasets import read_table
    from fairtune.tuning import FairObjective

    if args.objectives:
        _check_multi_objective_flags(args)
    if args.resource != "n_samples" and not args.pruner:
        raise _UsageError(f"--resource is what a --pruner's budgets cut, so --pruner must be "
                          f"given with it, but got --resource {args.resource} and no --pruner.")
    if args.data is None:
        given = [flag for flag in ("--target", "--sensitive", "--positive")
                 if getattr(args, flag[2:]) is not None]
        if given:
            raise _UsageError(f"{', '.join(given)} describe the columns of --data FILE; the "
                              f"bundled --dataset {args.dataset} has its own.")
    with _warnings_printed(), argument_names(_flags(args)):
        try:
            dataset = args.dataset if args.data is None else read_table(
                args.data, target=args.target, sensitive=args.sensitive, positive=args.positive)
            objective = FairObjective(
                dataset, args.model, limits=args.limit, metric=args.metric or "accuracy",
                objectives=[o for o in args.objectives.split(",") if o] if args.objectives
                else None, cv=args.cv, test_size=args.test_size, random_state=args.seed,
                mitigation=args.mitigation, margin=args.margin,
                use_sensitive_feature=not args.hide_sensitive, drop_columns=args.drop_columns,
                tenant=args.tenant, confidence=args.confidence, safety_size=args.safety_size,
                bound=args.bound, resource=args.resource,
                budgets=args.budgets or ([1 / 9, 1 / 3, 1.0] if args.pruner else None))
        except ValueError as e:
            raise _UsageError(str(e)) from None
    return objective


def _flags(args: argparse.Namespace) -> dict[str, str]:
    """How the library's messages name its arguments: the flags of this command line."""
    return _FLAGS if getattr(args, "data", None) is None else _DATA_FLAGS


def _check_multi_objective_flags(args: argparse.Namespace) -> None:
    """The flags ``tune --objectives`` refuses: a single-objective sampler, --html, --metric."""
    if args.sampler not in _MULTI_OBJECTIVE_SAMPLERS:
        raise _UsageError(
            f"--sampler {args.sampler} cannot tune several --objectives (FairBOSampler is "
            "single-objective with constraints); use one of "
            f"{', '.join(_MULTI_OBJECTIVE_SAMPLERS)} (mtkb is fairtune's multi-objective sampler)."
        )
    if args.html is not None:
        raise _UsageError("--html writes the report of a single-objective study; a study of "
                          "several --objectives is reported as its Pareto-optimal trials.")
    if args.metric is not None:
        raise _UsageError(
            f"--metric does not apply with --objectives: name the performance metric among "
            f"the objectives instead (e.g. --objectives {args.metric},demographic_parity), but "
            f"got --metric {args.metric}."
        )


def _add_report_outputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plot", metavar="PNG", help="write the trade-off plot to this file")
    parser.add_argument("--html", metavar="FILE",
                        help="write the report as one self-contained HTML page (plots inline)")


def _add_report_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="show the setup and the best fair trial of a stored study",
        description="Print a stored study's setup, its trials, the model to deploy and its test "
                    "scores; plot the trade-off and the best-fair curve. A study shared by "
                    "tenants is reported by tenant. Never writes to the storage.",
    )
    parser.add_argument("--storage", required=True, help="Optuna storage URL")
    parser.add_argument("--study-name", help="needed when the storage holds several studies")
    _add_report_outputs(parser)
    parser.add_argument("--metric", help="fairness metric on the trade-off plot's x axis "
                                         "(default: the study's first limit); needs --plot")
    parser.add_argument("--curve", metavar="PNG",
                        help="write the best fair value vs. trial number to this file")
    parser.add_argument("--tenant", metavar="NAME",
                        help="a study shared by tenants: show this tenant's setup, best fair "
                             "trial and plots of its own trials (needed for --plot, --curve)")
    parser.set_defaults(func=_cmd_report)


def _check_files(args: argparse.Namespace, outputs: Sequence[str], *, create: bool) -> None:
    """The files the run writes (``outputs``, flags) and ``--storage``, which none may be."""
    paths = {flag: getattr(args, flag[2:]) for flag in outputs}
    for flag, path in paths.items():
        _usage(check_output_path, path, flag=flag, html=flag == "--html")
    _usage(check_storage_url, args.storage, create=create, flag="--storage", outputs=paths)


def _usage(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the library on the flags' values: its ValueError is bad usage."""
    try:
        return call(*args, **kwargs)
    except ValueError as e:
        raise _UsageError(str(e)) from None


def _cmd_report(args: argparse.Namespace, *, out: TextIO) -> int:
    import optuna

    from fairtune.fairness import get_metric
    from fairtune.report import check_report_options, print_report

    if args.metric is not None:
        if args.plot is None:
            raise _UsageError("--metric picks the x axis of the trade-off plot: add --plot PNG.")
        with argument_names({"metric": "--metric"}):
            args.metric = _usage(get_metric, args.metric).name
    _check_files(args, ("--plot", "--html", "--curve"), create=False)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    with database_errors("--storage", args.storage):
        with argument_names(_FLAGS):
            study = _usage(load_named_study, args.storage, args.study_name)
            _usage(check_report_options, study, curve=args.curve, html=args.html,
                   fairness_metric=args.metric, tenant=args.tenant,
                   plots=bool(args.plot or args.curve))
        print_report(study, out, plot=args.plot, curve=args.curve, fairness_metric=args.metric,
                     tenant=args.tenant)
        _write_html(study, args.html, fairness_metric=args.metric, out=out, tenant=args.tenant)
    return EXIT_OK


def _write_html(study: Any, path: str | None, *, fairness_metric: str | None = None,
                out: TextIO, tenant: str | None = None) -> None:
    """The HTML report of ``study`` (of a study shared by tenants: the table of tenants and
    ``tenant``'s section, or every tenant's) written to ``path``, if any."""
    if path:
        from fairtune.report import report

        report(study, tenant=tenant).write_html(path, fairness_metric=fairness_metric)
        out.write(f"HTML report written to {path}\n")


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
    for add_parser in (_add_datasets_parser, _add_tune_parser, _add_report_parser):
        add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``fairtune`` command line.

    Args:
        argv: The arguments without the program name. Defaults to ``sys.argv[1:]``.

    Returns:
        The exit code: 0 on success, 1 when a command fails, 2 on bad usage (a bad or
        conflicting argument), 130 on Ctrl-C, 141 when the output pipe closed (``| head``).
        Errors are printed as one line ``fairtune: error: ...`` on stderr, without a traceback.
    """
    try:
        # Building the parser imports the library (its choices come from it): a Ctrl-C there
        # is an interrupt like any other.
        parser = _build_parser()
        args = parser.parse_args(None if argv is None else list(argv))
        return int(args.func(args, out=sys.stdout))
    except BrokenPipeError:
        # The reader (`| head -1`) is gone: exit quietly, and keep Python from failing again
        # when it flushes stdout at exit.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # no real stdout (captured by a test)
            pass
        return EXIT_BROKEN_PIPE
    except _UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as e:  # --help and --version exit through argparse
        return e.code if isinstance(e.code, int) else EXIT_OK if e.code is None else EXIT_ERROR
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - the CLI's contract: one line, no traceback
        message = one_line(reported_error(e))
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
