"""What the caller's labels and groups are: the one owner of these facts, below every layer.

:mod:`fairtune.datasets`, :mod:`fairtune.fairness` and :mod:`fairtune.tuning` read labels and
sensitive features through these functions (which import numpy, pandas and the message helpers
only), so that the same input gets the same answer wherever it enters.

- Labels: :func:`favourable_labels` turns labels into 0/1 (1 the favourable outcome); labels
  other than 0/1 or booleans need ``pos_label``, which is refused when it has *twins* among the
  labels (values that differ only in case, surrounding spaces or a final full stop,
  :func:`twins`): comparing exactly would count the twins' rows as unfavourable.
- Sensitive features: :func:`sensitive_groups` validates them and returns one group label per
  row (tuples for several columns), the one encoding the splits, the checks and the records
  read (:func:`group_name` writes one as text); the entrances ask it to warn of twins.
- Group sizes: one validation row moves its group's rate by ``1/n``, so where ``1/n >= b``,
  ``b`` the tightest upper bound of the limits, one person can decide whether a trial meets the
  limit. :func:`minimum_group_rows` asks each group for ``max(MIN_GROUP_VALIDATION_ROWS,
  floor(1 / b) + 1)`` rows where a trial is validated (21 under a 0.05 limit; a bound of 0
  does not raise it), and :func:`check_group_sizes` refuses fewer. The minimum lets a limit
  mean anything at all; it does not make a gap precise.
- Labels in each group: a limit on an error rate needs rows of the label that rate is measured
  on in every group (:func:`check_groups_have_labels`).

Each rule has one message, in the caller's spelling (:mod:`fairtune._names`): the argument and
the value that broke it, what the rule needs, and what would do.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fairtune._names import arg, got

__all__ = [
    "MIN_GROUP_VALIDATION_ROWS",
    "check_group_sizes",
    "check_groups_are_not_labels",
    "check_groups_have_labels",
    "check_pos_label_twins",
    "favourable_labels",
    "group_name",
    "minimum_group_rows",
    "near_miss",
    "sensitive_groups",
    "shown",
    "twins",
    "twins_note",
    "with_counts",
]

MIN_GROUP_VALIDATION_ROWS = 2
"""The fewest rows of each group that a trial is validated on, whatever the limits."""

# Error messages (tests assert on them). ``{argument}`` is the argument as a message names it,
# e.g. "`sensitive_features`".
MSG_SENSITIVE_NDIM = (
    "{argument} must be 1-d or 2-d (one column per feature), but got an array of shape {shape}."
)
MSG_SENSITIVE_NO_COLUMNS = "{argument} must have at least one column, but got none."
MSG_SENSITIVE_LENGTH = (
    "{argument} must have the same length as `y_true`, but got len(y_true)={n} and "
    "len({name})={m}."
)
MSG_SENSITIVE_MISSING = (
    "{argument} must not contain NaN or missing values, but got {count} of them."
)
MSG_SINGLE_GROUP = (
    "{argument} must define at least two groups to compare, but got a single group {group!r}."
)
MSG_SENSITIVE_TWINS = (
    "{argument} {column}has values that differ only in case, surrounding spaces or a final full "
    "stop: {twins}; they are measured as separate groups. Make them consistent first (strip, "
    "lower-case and drop the final full stop of the column's values) if they are the same "
    "group (the column's values: {values})."
)
MSG_POS_LABEL_TWINS = (
    "{pos} must match exactly one label of {argument}, but got {setting} and labels that "
    "differ from it only in case, surrounding spaces or a final full stop: {twins}. Comparing "
    "exactly would count {count} of their rows as unfavourable; make the labels consistent "
    "first (strip, lower-case and drop the final full stop of each)."
)
MSG_SMALL_GROUPS = (
    "{subject} {groups} in {where}; {needs} needs at least {minimum} row{s} of each group "
    "there: {fixes}more rows of the group, or merging it into another."
)
MSG_GROUP_WITHOUT_LABEL = (
    "{argument} must give each group rows of every label its limits measure a rate on, but in "
    "{where} group {group!r} has no row labelled {label} ({meaning}) among its {rows} "
    "row{s}: its {rate} is undefined, and {limit} needs it. {found}Give it {meaning} rows there "
    "({fix}), merge it into another group, or use a limit that does not measure the {rate} "
    "(demographic_parity measures every row)."
)
_LABEL_MEANING = {1: "favourable", 0: "unfavourable"}

Share = tuple[str, Any, str]
"""``(argument, value, remedy)`` of the share that drew a part of the rows, e.g. ``("test_size",
0.9, "a smaller")``: a message names ``test_size=0.9`` and suggests "a smaller `test_size`"."""


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def shown(values: Iterable[Any], limit: int = 10) -> str:
    """Up to ``limit`` values as a sorted list for a message (``...`` when there are more)."""
    values = list(values)
    text = ", ".join(repr(_plain(v)) for v in sorted(values[:limit], key=repr))
    return f"[{text}{', ...' if len(values) > limit else ''}]"


def _key(value: Any) -> str:
    # ">50K." beside " >50K" (the two spellings of Adult's files) is one label written twice.
    return str(value).strip().removesuffix(".").rstrip().casefold()


def twins(values: Iterable[Any]) -> list[list[Any]]:
    """The groups of distinct ``values`` that differ only in case, surrounding spaces or a
    final full stop, in order of first appearance: ``twins(["approved", "denied", "Approved ",
    ">50K", ">50K."])`` is ``[["approved", "Approved "], [">50K", ">50K."]]``."""
    if not isinstance(values, (pd.Series, pd.Index, np.ndarray)):
        values = list(values)
    by_key: dict[str, list[Any]] = {}
    for value in pd.unique(pd.Series(values, dtype=object)):
        by_key.setdefault(_key(value), []).append(_plain(value))
    return [group for group in by_key.values() if len(group) > 1]


def with_counts(groups: list[list[Any]], column: Any) -> str:
    """The values of ``groups`` with their row counts in ``column`` for a message:
    ``'F' (300 rows), 'f ' (12 rows)``, the groups separated by ``; ``."""
    column = pd.Series(np.asarray(column, dtype=object).ravel())
    counts = column.value_counts(dropna=False)
    return "; ".join(
        ", ".join(f"{v!r} ({int(counts.get(v, 0))} row{'' if counts.get(v, 0) == 1 else 's'})"
                  for v in group)
        for group in groups
    )


def twins_note(column: Any, values: Iterable[Any], what: str = "labels") -> str:
    """A message's note of the twins among ``values`` with their row counts in ``column``
    (``what``: how the message calls the values), or ``""`` without twins."""
    groups = twins(values)
    return (f" {what.capitalize()} that differ only in case, surrounding spaces or a final full "
            f"stop are different {what}: {with_counts(groups, column)}." if groups else "")


def _twins(values: pd.Series, pos_label: Any, matched: Sequence[Any] = ()) -> list[Any]:
    """The labels among ``values`` that differ from ``pos_label`` only in case, surrounding
    spaces or a final full stop, other than those in ``matched``."""
    key = _key(pos_label)
    return [_plain(v) for v in pd.unique(values)
            if _key(v) == key and not any(v == m for m in matched)]


def near_miss(column: Any, value: Any) -> str:
    """For a favourable label found nowhere in ``column``: the values it differs from only in
    case, surrounding spaces or a final full stop, with their row counts (``""`` if none)."""
    values = pd.Series(np.asarray(column, dtype=object).ravel())
    close = _twins(values, value)
    return (" It differs only in case, surrounding spaces or a final full stop from "
            f"{with_counts([close], values)}." if close else "")


def check_pos_label_twins(
    labels: Any, pos_label: Any, matched: Iterable[Any], *, argument: str,
    pos_argument: str = "pos_label",
) -> None:
    """Refuse a favourable label ``pos_label`` (the argument ``pos_argument``) with twins among
    the ``labels`` other than those the caller counts as it (``matched``), naming them with
    their row counts; ``argument``: how messages name ``labels``, e.g. ``"`y`"``."""
    values = pd.Series(np.asarray(labels, dtype=object).ravel())
    matched = [_plain(v) for v in matched]
    others = _twins(values, pos_label, matched)
    if not others:
        return
    counts = values.value_counts(dropna=False)
    raise ValueError(MSG_POS_LABEL_TWINS.format(
        pos=arg(pos_argument), argument=argument, setting=got(pos_argument, pos_label),
        twins=with_counts([[*matched, *others]], values),
        count=int(sum(counts.get(v, 0) for v in others)),
    ))


def favourable_labels(
    y: Any, pos_label: Any = None, *, argument: str = "`y`"
) -> tuple[np.ndarray, np.ndarray]:
    """The labels ``y`` as 0/1 ints (1 = the favourable outcome, ``pos_label``, or None for
    labels 0/1 or booleans) and the sorted distinct labels; ``argument``: how messages name
    ``y``.

    Raises:
        ValueError: For missing labels, more than two, labels other than 0/1 or booleans
            without ``pos_label``, or a ``pos_label`` not among them or with twins there.
    """
    values = pd.Series(np.asarray(y).ravel())
    if values.isna().any():
        raise ValueError(
            f"{argument} must not have missing labels, but got {int(values.isna().sum())} "
            "missing values."
        )
    found = pd.unique(values)
    matches = [] if pos_label is None else [v for v in found if v == pos_label]
    if matches:
        check_pos_label_twins(values, pos_label, matches, argument=argument)
    if len(found) > 2:
        raise ValueError(
            f"{argument} must hold two distinct labels (a binary decision), but got {len(found)}: "
            f"{shown(found)}.{twins_note(values, found)}"
        )
    if pos_label is not None:
        if not matches:
            raise ValueError(
                f"`pos_label` must be one of the labels of {argument} {shown(found)}, but got "
                f"pos_label={pos_label!r}.{near_miss(values, pos_label)}"
            )
        return (values == pos_label).to_numpy().astype(int), np.asarray(sorted(found))
    if pd.api.types.is_bool_dtype(values):
        return values.to_numpy().astype(int), np.array([0, 1])
    try:
        numeric = found.astype(float)
        binary = bool(np.isin(np.asarray(numeric), [0.0, 1.0]).all())
    except (TypeError, ValueError):
        binary = False
    if not binary:
        raise ValueError(
            f"{argument} must be 0/1 (1 = the favourable outcome) or booleans, or "
            f"`pos_label` must name the favourable one, but got the labels {shown(found)} and "
            f"pos_label=None.{twins_note(values, found)}"
        )
    return values.to_numpy().astype(float).astype(int), np.array([0, 1])


def _frame(sensitive_features: Any, argument: str, dtype: Any = None) -> pd.DataFrame:
    """The sensitive features as a DataFrame with a RangeIndex, one column per feature
    (``dtype=object``: the values as given, where pandas would read ``None`` beside text as a
    missing string, NaN)."""
    if isinstance(sensitive_features, pd.DataFrame):
        return sensitive_features.reset_index(drop=True)
    array = np.asarray(sensitive_features, dtype=object)
    if array.ndim == 1:
        name = sensitive_features.name if isinstance(sensitive_features, pd.Series) else None
        return pd.DataFrame({"sensitive" if name is None else name: array}, dtype=dtype)
    if array.ndim == 2:
        return pd.DataFrame(array, dtype=dtype)
    raise ValueError(MSG_SENSITIVE_NDIM.format(argument=argument, shape=array.shape))


def _warn_twins(
    frame: pd.DataFrame, sensitive_features: Any, argument: str, stacklevel: int
) -> None:
    named = isinstance(sensitive_features, (pd.DataFrame, pd.Series)) and not (
        isinstance(sensitive_features, pd.Series) and sensitive_features.name is None)
    several = frame.shape[1] > 1
    parts = []
    for position, column in enumerate(frame.columns):
        values = frame.iloc[:, position]
        groups = twins(values)
        if groups:
            label = f"column {column!r} " if named else (
                f"column {position} " if several else "")
            parts.append(MSG_SENSITIVE_TWINS.format(
                argument=argument, column=label, twins=with_counts(groups, values),
                values=shown(pd.unique(values)),
            ))
    if parts:
        warnings.warn(" ".join(parts), UserWarning, stacklevel=stacklevel)


def sensitive_groups(
    sensitive_features: Any,
    n: int | None = None,
    *,
    argument: str = "`sensitive_features`",
    predicting: bool = False,
    warn_twins: bool = False,
    stacklevel: int = 2,
) -> pd.Series:
    """Validate the sensitive features and return one group label per row.

    Args:
        sensitive_features: A 1-d array-like or Series (one feature), or a 2-d array or
            DataFrame whose columns together define intersectional groups.
        n: The number of rows the groups must have (``len(y_true)``), or None for any.
        argument: How messages name ``sensitive_features``.
        predicting: Rows to predict: one group and missing values pass (a fitted model
            refuses the groups it did not see). Defaults to False.
        warn_twins: Warn once of a column's values that differ only in case, surrounding
            spaces or a final full stop (the entrances ask; the metrics never do).
        stacklevel: The warning's ``stacklevel``, as if this function warned (2: its caller).

    Returns:
        A Series named ``"group"`` with a RangeIndex: a single column's values (unused
        categories are not groups), or a tuple of values per row for several columns.

    Raises:
        ValueError: For more than two dimensions, a length other than ``n``, no columns, or
            (unless ``predicting``) missing values or fewer than two groups.
    """
    # Rows to predict keep their values as given (a missing None is shown as None).
    keep = object if predicting else None
    frame = _frame(sensitive_features, argument, keep)
    if n is not None and len(frame) != n:
        raise ValueError(MSG_SENSITIVE_LENGTH.format(
            argument=argument, name=argument.strip("`"), n=n, m=len(frame)))
    if frame.shape[1] == 0:
        raise ValueError(MSG_SENSITIVE_NO_COLUMNS.format(argument=argument))
    if not predicting:
        missing = int(frame.isna().to_numpy().sum())
        if missing:
            raise ValueError(MSG_SENSITIVE_MISSING.format(argument=argument, count=missing))
    if frame.shape[1] == 1:
        # to_numpy() drops unused categories of a categorical column (they are not groups).
        groups = pd.Series(frame.iloc[:, 0].to_numpy(), name="group", dtype=keep)
    else:
        groups = pd.Series(list(frame.itertuples(index=False, name=None)), name="group")
    if not predicting:
        unique = pd.unique(groups)
        if len(unique) < 2:
            raise ValueError(MSG_SINGLE_GROUP.format(argument=argument, group=unique[0]))
    if warn_twins:
        # One frame more than the caller's count: the warning is raised in _warn_twins.
        _warn_twins(frame, sensitive_features, argument, stacklevel + 1)
    return groups


def minimum_group_rows(limits: Any) -> int:
    """The fewest validation rows of each group for the ``limits``:
    ``max(MIN_GROUP_VALIDATION_ROWS, floor(1 / b) + 1)`` with ``b`` the smallest positive bound
    of the upper limits (``limit.sense == "upper"``), or :data:`MIN_GROUP_VALIDATION_ROWS`
    without one (see the module docstring). ``limits``: limits with ``.sense`` and ``.bound``
    (:class:`fairtune.fairness.FairnessLimit`), one such limit, or None."""
    if limits is None:
        limits = []
    elif hasattr(limits, "sense") and hasattr(limits, "bound"):
        limits = [limits]
    bounds = [float(limit.bound) for limit in limits
              if limit.sense == "upper" and float(limit.bound) > 0.0]
    if not bounds:
        return MIN_GROUP_VALIDATION_ROWS
    # Rounded first, so that a bound such as 1/30 is not read as 1/29.999999999.
    return max(MIN_GROUP_VALIDATION_ROWS, math.floor(round(1.0 / min(bounds), 9)) + 1)


def group_name(group: Any) -> str:
    """A group label as text: ``"F, 25-45"`` for an intersectional group (a tuple)."""
    return ", ".join(map(str, group)) if isinstance(group, tuple) else str(group)


def _codes(groups: Any) -> tuple[np.ndarray, np.ndarray]:
    """(a code per row, the distinct groups) of group labels, tuples included."""
    return pd.factorize(pd.Series(groups).to_numpy(dtype=object))


def check_group_sizes(groups: Any, rows: Any, minimum: int, *, where: str, argument: str,
                      needs: str = "measuring a group's rate", share: Share | None = None,
                      enough: int | None = None) -> None:
    """Refuse a group (:func:`sensitive_groups`'s ``groups`` of every row) with fewer than
    ``minimum`` of the ``rows`` (positions) of a part of the data, ``where``: the message names
    the ``share`` that drew the part and suggests its remedy, or names ``argument`` (the
    sensitive features) when a small group has fewer than ``enough`` rows in all (default
    ``minimum``); ``needs`` says what needs the rows, e.g. ``"the limit
    demographic_parity<=0.05"``."""
    codes, names = _codes(groups)
    total = np.bincount(codes, minlength=len(names))
    have = np.bincount(codes[np.asarray(rows, dtype=int)], minlength=len(names))
    small = [k for k in np.argsort(have, kind="stable") if have[k] < minimum]
    if not small:
        return
    # The share is named when every small group has enough rows in all (else the data is).
    named = share if min(total[small]) >= (minimum if enough is None else enough) else None
    listed = ", ".join(f"the group {group_name(names[k])!r} {have[k]} row"
                       f"{'' if have[k] == 1 else 's'}" for k in small[:5])
    raise ValueError(MSG_SMALL_GROUPS.format(
        subject=f"{got(*named[:2])} leaves" if named else f"{argument} gives",
        groups=listed + (f" and {len(small) - 5} more" if small[5:] else ""), where=where,
        needs=needs, minimum=minimum, s="" if minimum == 1 else "s",
        fixes=f"{named[2]} {arg(named[0])}, " if named else ""))


def check_groups_are_not_labels(groups: pd.Series, y01: Any, *, argument: str) -> None:
    """Refuse groups each of which holds one outcome only: the sensitive features then
    determine the labels (most often they *are* the target column, passed twice), and every
    gap measures the labels rather than the model."""
    labels = np.asarray(y01).ravel()
    by_group = pd.Series(labels).groupby(np.asarray(groups, dtype=object), sort=False)
    outcomes, first = by_group.nunique(), by_group.first()
    if len(outcomes) >= 2 and (outcomes == 1).all() and len(np.unique(labels)) == 2:
        listed = ", ".join(f"{_plain(g)!r}: every row {'favourable' if v == 1 else 'unfavourable'}"
                           for g, v in list(first.items())[:5])
        raise ValueError(
            f"{argument} must not determine the labels, but every group has one outcome only "
            f"({listed}): the sensitive features are the target (or a copy of it), so each "
            "gap would measure the labels, not the model. Pass the column of the groups the "
            "limits protect."
        )


def check_groups_have_labels(groups: Any, y01: Any, needs: Iterable[tuple[str, str, int]],
                             *, where: str, argument: str, rows: Any = None,
                             share: Share | None = None) -> None:
    """Refuse a group without rows of a label that a limit measures a rate on.

    ``groups``, ``y01``: the group and 0/1 label of every row; ``needs``: ``(limit, rate,
    label)`` of each rate measured on one label's rows, e.g. ``("equalized_odds<=0.1", "false
    positive rate", 0)``; ``rows``: the positions of the rows ``where`` the rates are measured
    (the others the rest of the data: the message counts the label's rows there), or None for
    all; ``share``: the one that drew them, suggested when the data has rows of the label.
    """
    labels = np.asarray(y01).ravel()
    codes, uniques = _codes(groups)
    part = np.arange(len(codes)) if rows is None else np.asarray(rows, dtype=int)
    counts = np.bincount(codes[part], minlength=len(uniques))
    for limit, rate, label in needs:
        have = np.bincount(codes[part][labels[part] == label], minlength=len(uniques))
        missing = np.flatnonzero((have == 0) & (counts > 0))
        if not len(missing):
            continue
        k, meaning = missing[0], _LABEL_MEANING[label]
        found, total = "", 1
        if rows is not None:
            total = int(np.sum((codes == k) & (labels == label)))
            found = (f"The data has {total or 'no'} {meaning} row{'' if total == 1 else 's'} "
                     "of the group. ")
        raise ValueError(MSG_GROUP_WITHOUT_LABEL.format(
            argument=argument, where=where, group=group_name(uniques[k]), label=label,
            meaning=meaning, rows=int(counts[k]), s="" if counts[k] == 1 else "s", rate=rate,
            limit=limit, found=found,
            fix=f"{share[2]} {arg(share[0])} or more data" if share and total else "more data"))
