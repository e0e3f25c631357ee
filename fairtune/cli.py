"""The ``fairtune`` command line.

Usage::

    fairtune datasets        # table of the bundled fairness datasets

One function per subcommand: ``_add_<name>_parser(subparsers)`` declares its arguments and sets
``func`` to ``_cmd_<name>(args) -> int``; add it to ``_SUBCOMMANDS``. A command reports bad input
by raising an exception (``ValueError``, ``OSError``, ...): :func:`main` turns any exception into
a one-line message on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO

PROG = "fairtune"
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
# Parser and entry point
# --------------------------------------------------------------------------------------------

_SUBCOMMANDS: list[Callable[[Any], None]] = [_add_datasets_parser]


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
