"""A user's own table (CSV or parquet) as a :class:`FairDataset`.

:func:`read_table` is what ``fairtune tune --data FILE`` reads, and what a Python user can call.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fairtune._names import arg, got
from fairtune._validation import (
    check_pos_label_twins,
    near_miss,
    sensitive_groups,
    twins_note,
)
from fairtune.datasets._base import FairDataset, _sha256

__all__ = ["TABLE_FORMATS", "read_table"]

TABLE_FORMATS: dict[str, str] = {".csv": "csv", ".csv.gz": "csv", ".parquet": "parquet",
                                 ".pq": "parquet"}
"""The file endings :func:`read_table` reads, and their format."""


def _format(path: Path) -> str:
    name = path.name.lower()
    for ending, kind in TABLE_FORMATS.items():
        if name.endswith(ending):
            return kind
    raise ValueError(
        f"{arg('path')} must be a file ending in one of {list(TABLE_FORMATS)}, but got "
        f"{str(path)!r}."
    )


def _read(path: Path, kind: str) -> pd.DataFrame:
    if not path.is_file():
        raise ValueError(f"{arg('path')} must be an existing file, but got {str(path)!r}"
                         + (" (a folder)." if path.is_dir() else " (no such file)."))
    try:
        if kind == "parquet":
            return pd.read_parquet(path)
        # A file written with ", " separators: its values (and names) start after the space,
        # so that the file's " yes" is the "yes" a user types.
        return pd.read_csv(path, skipinitialspace=True)
    except ImportError as e:
        raise ImportError(f"reading {str(path)!r} needs a parquet engine: pip install pyarrow "
                          f"({e})") from None
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as e:
        reason = " ".join(str(e).split()) or type(e).__name__
        raise ValueError(f"{arg('path')} {str(path)!r} could not be read as {kind}: {reason}"
                         ) from None


def _columns(frame: pd.DataFrame, names: Sequence[str], argument: str) -> list[str]:
    """The file's columns ``names`` give: the column of that exact name, else the one column
    whose name differs only by surrounding spaces."""
    by_stripped: dict[str, list[str]] = {}
    for column in map(str, frame.columns):
        by_stripped.setdefault(column.strip(), []).append(column)
    names = [name if name in frame.columns or len(by_stripped.get(str(name).strip(), [])) != 1
             else by_stripped[str(name).strip()][0] for name in names]
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{arg(argument)} must name {'a column' if len(names) == 1 else 'columns'} of the "
            "file, but got "
            f"{got(argument, ','.join(names))}: no column {missing} (its columns: "
            f"{list(map(str, frame.columns))})."
        )
    return list(names)


def _check_complete(frame: pd.DataFrame, path: Path, **columns: list[str]) -> None:
    """Refuse missing values in the columns each argument names."""
    for argument, names in columns.items():
        missing = frame[names].isna().sum()
        if missing.any():
            counts = {str(c): int(n) for c, n in missing.items() if n}
            raise ValueError(
                f"{arg(argument)} columns must have a value in every row, but {str(path)!r} has "
                f"missing values in {counts} (of {len(frame)} rows); drop or fill those rows "
                "first."
            )


def _labels(column: pd.Series, target: str, positive: Any) -> pd.Series:
    """The target column as 0/1, 1 the favourable outcome (``positive``, needed unless the
    column is 0/1 or booleans)."""
    values = list(pd.unique(column))
    shown = sorted(map(str, values))
    if positive is None:
        if set(values) <= {0, 1} and len(values) == 2 and column.dtype != object:
            return column.astype(int)
        if len(values) != 2:
            raise ValueError(
                f"{arg('target')} {target!r} must have two values (the favourable outcome and "
                f"the other), or {arg('positive')} must name the favourable one, but it has "
                f"{len(values)}: {shown[:10]}{' ...' if len(shown) > 10 else ''}."
                + twins_note(column, values, "values")
            )
        raise ValueError(
            f"{arg('target')} {target!r} has the values {shown}: name the favourable one with "
            f"{arg('positive')}; fairtune does not guess which outcome the limits protect."
        )
    if pd.api.types.is_bool_dtype(column) and isinstance(positive, str) and (
        positive.strip().lower() in ("true", "false")
    ):  # pandas reads TRUE, True and true in a file as the boolean: so is --positive TRUE
        positive = positive.strip().lower() == "true"
    # A value typed on the command line is text: compare as the file's values print (read
    # without the leading space of ", " separators: " yes" typed as such a file shows it).
    matches = [v for v in values if v == positive or str(v) == str(positive)]
    if not matches and isinstance(positive, str) and positive.lstrip() in map(str, values):
        positive = positive.lstrip()
        matches = [v for v in values if str(v) == positive]
    if not matches:
        raise ValueError(
            f"{arg('positive')} must be one of the values of {arg('target')} {target!r} "
            f"{shown[:10]}, but got {got('positive', positive)}." + near_miss(column, positive)
        )
    check_pos_label_twins(column, positive, matches, argument=f"{arg('target')} {target!r}",
                          pos_argument="positive")
    if len(values) < 2:
        raise ValueError(f"{arg('target')} {target!r} has one value only ({shown}): there is "
                         "nothing to predict.")
    return column.isin(matches).astype(int)


def read_table(
    path: str | os.PathLike[str],
    *,
    target: str,
    sensitive: str | Sequence[str],
    positive: Any = None,
) -> FairDataset:
    """Read a CSV or parquet file as a :class:`FairDataset` for
    :class:`~fairtune.tuning.FairObjective`.

    The features are every column but ``target``, the sensitive ones included; text columns
    become categories and missing feature values are left to the model.

    Args:
        path: A ``.csv`` (or ``.csv.gz``) or ``.parquet`` file with a header row.
        target: The column of outcomes. 0/1 (or booleans) with 1 the favourable outcome, or
            any values with ``positive`` naming the favourable one(s).
        sensitive: The column(s) of the groups the limits protect; several columns are
            intersectional groups.
        positive: The target's favourable value (every other value is the unfavourable
            outcome). Needed unless the target is 0/1 or booleans.

    Returns:
        The dataset, named by the file's name, row count and SHA-256 checksum.

    Raises:
        ValueError: For what a search cannot work with: an unreadable file, a missing column
            or value, one group only, labels of unknown polarity, or a ``positive`` with twins
            among the target's values (``"approved"`` beside ``"Approved "``).

    Warns:
        UserWarning: When a sensitive column's values differ only in case or spaces.
    """
    missing = [arg(name) for name, value in (("target", target), ("sensitive", sensitive))
               if value is None]
    if missing:
        raise ValueError(f"{arg('path')} needs {' and '.join(missing)}: the column of outcomes "
                         "and the column(s) of the groups the limits protect.")
    path = Path(path).expanduser()
    kind = _format(path)
    frame = _read(path, kind)
    sensitive_columns = [sensitive] if isinstance(sensitive, str) else list(sensitive)
    (target,) = _columns(frame, [target], "target")
    sensitive_columns = _columns(frame, sensitive_columns, "sensitive")
    if target in sensitive_columns:
        raise ValueError(f"{arg('sensitive')} must not include the {arg('target')} column "
                         f"{target!r}.")
    _check_complete(frame, path, target=[target], sensitive=sensitive_columns)
    y = _labels(frame[target], target, positive).rename(target)
    # Two groups at least; twins among a column's values ("F", "f ") are named in a warning
    # that points at the caller (this function, then its caller: stacklevel 3).
    sensitive_groups(frame[sensitive_columns], argument=arg("sensitive"), warn_twins=True,
                     stacklevel=3)
    X = frame.drop(columns=[target])
    for column in X.columns:
        if X[column].dtype == object or pd.api.types.is_string_dtype(X[column]):
            X[column] = X[column].astype("category")
    groups = X[sensitive_columns].astype(str) if len(sensitive_columns) > 1 else \
        X[sensitive_columns[0]].astype(str).rename(sensitive_columns[0])
    checksum = _sha256(path)
    name = f"{path.name}, {len(frame)} rows, sha256 {checksum[:12]}"
    favourable = "1" if positive is None else str(positive)
    return FairDataset(
        data=X, target=y, sensitive_features=groups, frame=X.assign(**{target: y}),
        feature_names=list(map(str, X.columns)), target_name=target, name=name,
        favourable=1 if positive is None else positive,  # a 0/1 target: 1
        DESCR=(f"{path.name}: {len(frame)} rows read from {str(path)!r} (SHA-256 {checksum}); "
               f"target {target!r} (favourable: {favourable!r}), sensitive "
               f"{', '.join(sensitive_columns)}."),
    )
