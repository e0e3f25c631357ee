"""What the entrances check about the caller's data before a trial sees it.

FairObjective, FairSearchCV and the mitigation wrappers share these rules, so that the same
input gets the same answer whichever entrance it goes through:

- Labels: 0/1 or booleans, where 1 (True) is the favourable outcome whose rates the fairness
  metrics compare; any other pair of labels needs ``pos_label=`` naming the favourable one.
  Guessing (the greater label, as scikit-learn's binary metrics do) would make ``"denied"``
  favourable over ``"approved"`` and measure every gap on the wrong outcome.
- Alignment: a pandas X with pandas labels or sensitive features is matched by index label,
  never by position; arrays are matched by position. The caller's objects are never changed.
- Fingerprint: a digest of the rows, labels, groups and validation splits that a study's trials
  were scored on, so that a study refuses to compare trials scored on other data.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["aligned", "data_fingerprint", "favourable_labels", "shown"]


def shown(values: Iterable[Any], limit: int = 10) -> str:
    """Up to ``limit`` values as a sorted list for a message (``...`` when there are more)."""
    values = list(values)
    text = ", ".join(repr(v.item() if isinstance(v, np.generic) else v)
                     for v in sorted(values[:limit], key=repr))
    return f"[{text}{', ...' if len(values) > limit else ''}]"


def favourable_labels(
    y: Any, pos_label: Any = None, *, argument: str = "`y`"
) -> tuple[np.ndarray, np.ndarray]:
    """The labels as 0/1 ints (1 = the favourable outcome) and the sorted distinct labels.

    Args:
        y: One label per row.
        pos_label: The favourable label, or None when the labels are 0/1 or booleans.
        argument: How error messages name ``y``, e.g. ``"`y`"``.

    Raises:
        ValueError: For missing labels, more than two labels, labels other than 0/1 or
            booleans without ``pos_label``, or a ``pos_label`` that is not one of the labels;
            the message lists the labels found.
    """
    values = pd.Series(np.asarray(y).ravel())
    if values.isna().any():
        raise ValueError(
            f"{argument} must not have missing labels, but got {int(values.isna().sum())} "
            "missing values."
        )
    found = pd.unique(values)
    if len(found) > 2:
        raise ValueError(
            f"{argument} must hold two distinct labels (a binary decision), but got {len(found)}: "
            f"{shown(found)}."
        )
    if pos_label is not None:
        matches = [v for v in found if v == pos_label]
        if not matches:
            raise ValueError(
                f"`pos_label` must be one of the labels of {argument} {shown(found)}, but got "
                f"pos_label={pos_label!r}."
            )
        return (values == pos_label).to_numpy().astype(int), np.asarray(sorted(found))
    if pd.api.types.is_bool_dtype(values):
        return values.to_numpy().astype(int), np.array([0, 1])
    try:
        numeric = found.astype(float)
        binary = bool(np.isin(numeric, [0.0, 1.0]).all())
    except (TypeError, ValueError):
        binary = False
    if not binary:
        raise ValueError(
            f"{argument} must be 0/1 (1 = the favourable outcome) or booleans, or "
            f"`pos_label` must name the favourable one, but got the labels {shown(found)} and "
            "pos_label=None."
        )
    return values.to_numpy().astype(float).astype(int), np.array([0, 1])


def aligned(X: pd.DataFrame, other: Any, argument: str) -> Any:
    """``other`` (labels or sensitive features) in the row order of ``X``, as a new object.

    A pandas ``other`` is matched to ``X`` by index label; an array, list or a pandas object
    beside an ``X`` that was not a DataFrame is matched by position (``X``'s index is then
    given to a copy).

    Raises:
        ValueError: If the lengths differ, or the index labels of a pandas ``other`` are not
            those of ``X`` (or repeat, so that a label names no single row).
    """
    n = len(X)
    if isinstance(other, (pd.Series, pd.DataFrame)):
        if len(other) != n:
            raise ValueError(
                f"`{argument}` must have one entry per row of X ({n}), but got {len(other)}."
            )
        if other.index.equals(X.index):
            return other.copy()
        if not (X.index.is_unique and other.index.is_unique):
            raise ValueError(
                f"`{argument}` is matched to the rows of X by index label, so both indexes must "
                "be unique when they differ, but got repeated labels in "
                f"{'X' if not X.index.is_unique else argument}."
            )
        missing = X.index.difference(other.index)
        if len(missing):
            raise ValueError(
                f"`{argument}` is matched to the rows of X by index label, but its index lacks "
                f"{len(missing)} of X's labels, e.g. {shown(missing[:5])}; pass arrays "
                "(`.to_numpy()`) to match by position."
            )
        return other.reindex(X.index)
    values = np.asarray(other)
    if len(values) != n:
        raise ValueError(
            f"`{argument}` must have one entry per row of X ({n}), but got {len(values)}."
        )
    if values.ndim == 2 and values.shape[1] > 1:
        return pd.DataFrame(values, index=X.index)
    return pd.Series(values.ravel(), index=X.index)


def _digest_part(value: Any, digest: Any) -> None:
    import scipy.sparse

    if value is None:
        digest.update(b"none")
    elif isinstance(value, (pd.DataFrame, pd.Series)):
        if isinstance(value, pd.DataFrame):
            digest.update(repr([str(c) for c in value.columns]).encode())
        digest.update(pd.util.hash_pandas_object(value, index=False).to_numpy().tobytes())
    elif scipy.sparse.issparse(value):
        matrix = scipy.sparse.csr_matrix(value)
        matrix.sort_indices()
        digest.update(repr(matrix.shape).encode())
        for part in (matrix.data, matrix.indices, matrix.indptr):
            digest.update(np.ascontiguousarray(part).tobytes())
    else:
        array = np.asarray(value)
        if array.dtype.kind in "biufc":
            digest.update(f"{array.shape}{array.dtype.str}".encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        else:
            frame = pd.DataFrame(array.reshape(len(array), -1) if array.ndim else [array])
            try:
                hashed = pd.util.hash_pandas_object(frame, index=False).to_numpy()
            except TypeError:  # unhashable values (dicts, lists): their pickled form
                digest.update(pickle.dumps(array.tolist()))
            else:
                digest.update(hashed.tobytes())


def data_fingerprint(*parts: Any, folds: Iterable[tuple[Any, Any]] = ()) -> str:
    """A short digest of ``parts`` (rows, labels, groups) and of the validation ``folds``.

    Equal data in the same order with the same splits give the same text in any process
    (pandas' and numpy's hashes of the values, not Python's salted ``hash``); a change in any
    row, label, group or split gives another one.
    """
    digest = hashlib.sha256()
    for part in parts:
        _digest_part(part, digest)
        digest.update(b"|")
    for train, test in folds:
        for rows in (train, test):
            digest.update(np.asarray(rows, dtype=np.int64).tobytes())
            digest.update(b";")
    return digest.hexdigest()[:16]
