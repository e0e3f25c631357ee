"""Plain text for people: tables and values from the data, safe to print.

A bottom module: the datasets' summary, the report and the command line format text with the
same helpers, and none of them imports another for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["distinct", "format_table", "markdown_table", "markdown_text", "percent",
           "printable"]


def percent(fraction: float) -> str:
    """A fraction as a percentage with the digits it has, never rounded to a whole one:
    ``0.95`` as ``"95%"``, ``0.975`` as ``"97.5%"``, ``0.9999`` as ``"99.99%"`` (a confidence
    level of 0.975 printed as 98% is another level)."""
    return f"{100 * fraction:.12g}%"  # 12 digits: 97.49999999999999 is 97.5


def printable(value: Any) -> str:
    """``str(value)`` with control characters escaped (``\\n`` as ``\\\\n``, ``\\x1b`` as
    ``\\\\x1b``): a group, column or study name read from a user's file must not move the
    cursor, clear a terminal or break a table's rows when it is printed."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def distinct(value: Any) -> str:
    """A name from the data as text that tells it from its twins: quoted (``'F '``,
    ``'F\\r'``) when it has surrounding spaces or control characters, which would otherwise
    print like another name (``F``), else as it is."""
    text = str(value)
    if text != text.strip() or not text.isprintable():
        return repr(text)
    return text


def format_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, right_aligned: set[int]
) -> str:
    """A plain-text table: the header, a rule, the rows; columns padded to their widest cell
    (every cell through :func:`printable`)."""
    header = [printable(cell) for cell in header]
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]

    def fmt(line: Sequence[str]) -> str:
        cells = [
            cell.rjust(width) if i in right_aligned else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=False))
        ]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([fmt(header), rule, *(fmt(row) for row in rows)]) + "\n"


_MARKDOWN_SPECIAL = set("\\`*_{}[]()#+-!|<>&~$")


def markdown_text(value: Any) -> str:
    """``value`` as literal Markdown text: control characters escaped (:func:`printable`), then
    every character Markdown or HTML could read as markup backslash-escaped, so that a study,
    group or column name such as ``<b>**x**</b>`` is shown as typed, never rendered."""
    return "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in printable(value))


def markdown_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, right_aligned: set[int]
) -> str:
    """A Markdown (GitHub-flavoured) table, every cell through :func:`markdown_text`."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(markdown_text(cell) for cell in cells) + " |"

    rule = "|" + "|".join("---:" if i in right_aligned else "---"
                          for i in range(len(header))) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows)]) + "\n"
