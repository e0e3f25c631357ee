"""How the library's error messages name the arguments its caller typed.

A message names an argument as Python code does, `` `margin` `` and ``margin=0.5``; an entrance
whose users type other names (the command line's ``--margin 0.5``) runs the library under
:func:`argument_names` with its mapping, and the same messages name the flags. Messages are
built with :func:`arg` and :func:`got`, never rewritten after the fact.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

__all__ = ["TypedNumber", "arg", "argument_names", "check_choice", "check_fraction",
           "check_integer", "check_number", "got", "has_name", "number", "renamed"]

# A read-only empty default: a ContextVar's default is shared by every context.
_NAMES: ContextVar[Mapping[str, str]] = ContextVar(
    "fairtune_argument_names", default=MappingProxyType({})
)


@contextlib.contextmanager
def argument_names(names: Mapping[str, str]) -> Iterator[None]:
    """Name the arguments of the messages raised or warned inside as ``names`` says:
    ``{"margin": "--margin"}``; a key ``"<name>=<value repr>"`` names one setting
    (``{"use_sensitive_feature=False": "--hide-sensitive"}``)."""
    token = _NAMES.set(dict(names))
    try:
        yield
    finally:
        _NAMES.reset(token)


def arg(name: str) -> str:
    """The argument ``name`` as a message names it: `` `name` ``, or the caller's flag."""
    flag = _NAMES.get().get(name)
    return flag if flag else f"`{name}`"


def got(name: str, value: Any) -> str:
    """An argument and its value: ``name=value``, or ``--flag value`` for the caller's flag."""
    names = _NAMES.get()
    setting = f"{name}={value!r}"
    if setting in names:
        return names[setting]
    flag = names.get(name)
    if flag and value is None:  # a flag not given
        return f"no {flag}"
    return f"{flag} {value!r}" if flag else setting


class TypedNumber(float):
    """A number read from text that messages show as it was typed (``--confidence 95``, not
    ``95.0``): the command line's type for its numeric flags."""

    text: str

    def __new__(cls, text: str) -> TypedNumber:
        number = super().__new__(cls, text)
        number.text = text.strip()
        return number

    def __reduce__(self) -> tuple[type[TypedNumber], tuple[str]]:  # a copy keeps the text
        return TypedNumber, (self.text,)

    def __repr__(self) -> str:
        return self.text


def number(text: str) -> TypedNumber:
    """A numeric flag's type: a :class:`TypedNumber` (argparse names it "number" in errors)."""
    return TypedNumber(text)


def has_name(name: str) -> bool:
    """Whether the caller can type the argument ``name``: always in Python; under a mapping
    (the command line), only the arguments it maps to a flag."""
    names = _NAMES.get()
    return not names or name in names


def renamed() -> bool:
    """Whether the caller types other names than Python's (an entrance under
    :func:`argument_names`, such as the command line)."""
    return bool(_NAMES.get())


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    """Refuse a string option ``name`` that is none of ``choices``, listing them."""
    if value not in choices:
        raise ValueError(
            f"{arg(name)} must be one of {list(choices)}, but got {got(name, value)}.")


def check_integer(name: str, value: Any, *, minimum: int = 0, seed: bool = False) -> None:
    """Refuse ``value`` for the argument ``name`` unless it is an integer (never a bool) of at
    least ``minimum`` (0 or 1), or with ``seed``, None or an integer in [0, 2**32)."""
    if seed and value is None:
        return
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
            or not minimum <= int(value) < (2**32 if seed else math.inf)):
        what = ("None or an integer in [0, 2**32)" if seed else
                "a positive integer" if minimum == 1 else "a non-negative integer")
        raise ValueError(f"`{name}` must be {what}, but got {name}={value!r}.")


def check_fraction(name: str, value: Any) -> None:
    """Refuse ``value`` for the argument ``name`` unless it is a float (numpy's too) in (0, 1)."""
    if not (isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral)
            and 0.0 < float(value) < 1.0):
        raise ValueError(f"{arg(name)} must be a float in (0, 1), but got {got(name, value)}.")


def check_number(name: str, value: Any, *, low: float, strict: bool = False,
                 optional: bool = False) -> None:
    """Refuse ``value`` for the argument ``name`` unless it is a finite number (never a bool)
    of at least ``low`` (above ``low`` with ``strict``), or with ``optional``, None."""
    if optional and value is None:
        return
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    number = float(value) if real else math.nan
    if not (math.isfinite(number) and (number > low if strict else number >= low)):
        what = f"{'None or ' if optional else ''}a finite number {'>' if strict else '>='} {low:g}"
        raise ValueError(f"`{name}` must be {what}, but got {name}={value!r}.")
