"""The data of a search, once: what the user gives, turned into the rows every entrance uses.

:class:`~fairtune.tuning.FairObjective` (a bundled name, a :class:`~fairtune.datasets.FairDataset`
or an ``(X, y, sensitive)`` tuple) loads its rows with :func:`tuning_rows`; both it and
:class:`~fairtune.tuning.FairSearchCV` split them with the one builder :func:`split_rows`, so
that the same input gets the same answer through either:

- Labels: 0/1 or booleans (1 the favourable outcome), else ``pos_label=`` names the favourable
  one: guessing would make ``"denied"`` favourable over ``"approved"``.
- Sensitive features: validated once (:func:`fairtune._validation.sensitive_groups`), whose
  group labels (tuples for several columns) are the one encoding the splits and checks read.
- Alignment: a pandas X with pandas labels or groups is matched by index label, arrays by
  position. The caller's objects are never changed.
- Splits: a validation split is one fold; a budget cuts each fold's training rows to a nested,
  stratified share (:func:`budget_folds`), as scikit-learn's subsample splitter does for
  successive halving. Every part a model is fitted on keeps each value of the columns the
  deployed model's unseen-value guard checks (:func:`kept_values`; cross-validation refuses a
  value it cannot keep). A share too small to split by label is refused (:func:`drawn_split`).
- Limits, derived once (:func:`validated_limits`): as given, tightened by ``margin`` and, with
  ``confidence``, by the width of their bound on the safety rows; the group sizes are checked
  against these, the limits the trials are validated against.
- Fingerprint: a digest of the rows, labels, groups and splits the trials were scored on, so
  that a study refuses to compare trials scored on other data.
"""

from __future__ import annotations

import hashlib
import math
import pickle
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fairtune._names import arg, got, has_name
from fairtune._validation import (
    check_group_sizes,
    check_groups_are_not_labels,
    check_groups_have_labels,
    favourable_labels,
    minimum_group_rows,
    sensitive_groups,
    shown,
)
from fairtune.tuning._certify import limits_for_search, rate_labels
from fairtune.tuning._trial import tightened, validated_rows

__all__ = [
    "Splits", "TuningRows", "aligned", "budget_folds", "budget_rows", "data_fingerprint",
    "drawn_split", "favourable_labels", "kept_values", "sensitive_groups", "split_rows",
    "tuning_rows", "validated_limits",
]


def aligned(X: pd.DataFrame, other: Any, argument: str) -> Any:
    """``other`` (labels or sensitive features) in the row order of ``X``, as a new object: a
    pandas ``other`` matched by index label (which must name single rows), else by position."""
    if len(other) != len(X):
        raise ValueError(
            f"`{argument}` must have one entry per row of X ({len(X)}), but got {len(other)}.")
    if not isinstance(other, (pd.Series, pd.DataFrame)):
        values = np.asarray(other)
        if values.ndim == 2 and values.shape[1] > 1:
            return pd.DataFrame(values, index=X.index)
        return pd.Series(values.ravel(), index=X.index)
    if other.index.equals(X.index):
        return other.copy()
    if not (X.index.is_unique and other.index.is_unique):
        raise ValueError(
            f"`{argument}` is matched to the rows of X by index label, so both indexes must "
            "be unique when they differ, but got repeated labels in "
            f"{'X' if not X.index.is_unique else argument}.")
    missing = X.index.difference(other.index)
    if len(missing):
        raise ValueError(
            f"`{argument}` is matched to the rows of X by index label, but its index lacks "
            f"{len(missing)} of X's labels, e.g. {shown(missing[:5])}; pass arrays "
            "(`.to_numpy()`) to match by position.")
    return other.reindex(X.index)


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
    """A short digest of ``parts`` (rows, labels, groups) and of the validation ``folds``, the
    same in any process (pandas' and numpy's hashes, not Python's salted ``hash``)."""
    digest = hashlib.sha256()
    for part in parts:
        _digest_part(part, digest)
        digest.update(b"|")
    for train, test in folds:
        for rows in (train, test):
            digest.update(np.asarray(rows, dtype=np.int64).tobytes())
            digest.update(b";")
    return digest.hexdigest()[:16]


# -- splits and budgets -----------------------------------------------------------------------

Fold = tuple[np.ndarray, np.ndarray]


def budget_rows(y: Any, groups: Any, budgets: Sequence[float], seed: int,
                keep: pd.DataFrame | None = None) -> list[np.ndarray]:
    """The row positions of each budget but the last (all rows): nested subsets, each keeping
    every label-and-group stratum's share (at least one row), drawn once per study seed.
    ``groups``: the group label of each row; ``keep``: columns whose every value each subset
    holds (those the model's guard checks, finer than the groups for COMPAS's ``race``)."""
    strata = (pd.Series(np.asarray(y)).astype(str) + "|"
              + pd.Series(pd.Series(groups).to_numpy(dtype=object)).astype(str))
    rng = np.random.default_rng(seed)
    order = {key: rng.permutation(np.flatnonzero((strata == key).to_numpy()))
             for key in sorted(strata.unique())}
    subsets = [np.sort(np.concatenate([rows[:max(1, round(budget * len(rows)))]
                                       for rows in order.values()]))
               for budget in budgets[:-1]]
    if keep is None or not len(subsets):
        return subsets
    # One row per value the smallest subset lacks, the first of its stratum's draw, added to
    # every subset (so that they stay nested).
    extra = _first_rows_of_missing_values(keep, subsets[0], np.concatenate(list(order.values())))
    if not extra:
        return subsets
    return [np.union1d(rows, extra) for rows in subsets]


def budget_folds(folds: Sequence[Fold], y01: np.ndarray, groups: Any,
                 budgets: Sequence[float], seed: int, keep: pd.DataFrame | None = None
                 ) -> list[list[Fold]]:
    """For each budget but the full one, ``folds`` with their training rows cut to it (the
    validation rows stay): a budget transforms the split, and the trial path never learns
    about budgets. ``groups``: the group label of each row."""
    groups = pd.Series(groups).to_numpy(dtype=object)
    cut = [budget_rows(np.asarray(y01)[fit], groups[fit], budgets, seed,
                       None if keep is None else keep.iloc[fit])
           for fit, _ in folds]
    return [[(fit[cut[k][step]], valid) for k, (fit, valid) in enumerate(folds)]
            for step in range(len(budgets) - 1)]


def _first_rows_of_missing_values(keep: pd.DataFrame, have_rows: np.ndarray,
                                  candidates: np.ndarray) -> list[int]:
    """For each value of the ``keep`` columns that the rows ``have_rows`` lack, the first of
    the ``candidates`` (positions) that holds it."""
    added: list[int] = []
    for column in keep.columns:
        values = keep[column].reset_index(drop=True).astype(str).to_numpy()
        have = set(values[have_rows]) | set(values[added])
        for position in candidates:
            if values[position] not in have:
                have.add(values[position])
                added.append(int(position))
    return added


def kept_values(fit: Any, held: Any, keep: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray]:
    """A split ``(fit rows, held-out rows)`` (positions) with every value of the ``keep``
    columns among the fit rows, whose model refuses a value it never saw: for each value only
    the held-out rows hold, the first of them (in the split's random order) moves."""
    fit, held = np.asarray(fit), np.asarray(held)
    if keep is None:
        return fit, held
    moved = _first_rows_of_missing_values(keep, fit, held)
    if not moved:
        return fit, held
    return np.concatenate([fit, moved]), held[~np.isin(held, moved)]


def _check_folds_keep_values(folds: Sequence[Fold], keep: pd.DataFrame | None) -> None:
    """Refuse folds whose training rows lack a value of the ``keep`` columns that their
    validation rows hold: every row is validated once, so none can move (:func:`kept_values`)."""
    if keep is None:
        return
    for column in keep.columns:
        values = keep[column].reset_index(drop=True).astype(str).to_numpy()
        for k, (fit, valid) in enumerate(folds):
            if unseen := sorted(set(values[valid]) - set(values[fit])):
                counts = pd.Series(values).value_counts()
                listed = ", ".join(f"{v!r} ({int(counts[v])} row{'' if counts[v] == 1 else 's'})"
                                   for v in unseen[:5])
                raise ValueError(
                    f"{got('cv', len(folds))} leaves the training rows of fold {k + 1} without "
                    f"the value{'s' if len(unseen) > 1 else ''} {listed} of the sensitive column "
                    f"{column!r}, which the model reads and refuses unseen: merge such a value "
                    f"into another, or use a validation split ({arg('validation_size')}).")


def drawn_split(n: int, share: float, labels: Any, seed: int, *, argument: str, held: str,
                rest: str, rows: str, left_by: tuple[str, Any] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(rest, held)`` of ``n`` rows that ``argument``'s ``share`` splits as
    ``train_test_split`` does, stratified by ``labels``; a part without a row of each label is
    refused, naming the argument, its value and the parts (``held``, ``rest``) of the ``rows``
    (e.g. ``"rows of the data"``) that the earlier share ``left_by`` ``(argument, value)`` left."""
    from sklearn.model_selection import train_test_split

    values, counts = np.unique(np.asarray(labels), return_counts=True)
    classes = max(len(values), 1)
    n_held = math.ceil(share * n)
    if left_by:
        rows = f"{rows} that {got(*left_by)} leaves"
    if min(n_held, n - n_held) < classes:  # below 2 * classes rows, no share can help
        fix = (f"a {'larger' if n_held < classes else 'smaller'} {arg(argument)}"
               if n >= 2 * classes else f"a smaller {arg(left_by[0])}"
               if left_by else "more rows")  # (but the earlier share that left so few)
        raise ValueError(
            f"{got(argument, share)} gives {held} {n_held:,} of the {n:,} {rows} and leaves "
            f"{rest} {n - n_held:,}, but a split stratified by label needs at least one row of "
            f"each of the {classes} labels in each part: {fix}.")
    if counts.min() < 2:
        raise ValueError(
            f"{got(argument, share)} splits the {n:,} {rows} by label, but label "
            f"{shown(values[counts.argmin():][:1])[1:-1]} has 1 row there, too few to be in both "
            f"{held} and {rest}.")
    rest_rows, held_rows = train_test_split(np.arange(n), test_size=share, stratify=labels,
                                            random_state=seed)
    return np.asarray(rest_rows), np.asarray(held_rows)


@dataclass
class Splits:
    """The rows a trial is scored on: ``folds`` over the tuning rows, ``(fit rows, validation
    rows)`` positions (a validation split is one fold), the validated rows, and with budgets
    each smaller budget's folds (``at(step)``)."""

    folds: list[Fold]
    n_rows: int
    budget_folds: list[list[Fold]] | None = None

    def at(self, step: int | None) -> list[Fold]:
        """The folds of the smaller budget ``step`` (0 the smallest), or the full ones (None)."""
        if step is None or self.budget_folds is None:
            return self.folds
        return self.budget_folds[step]


Drawn = tuple[float, str, Any, str]
"""``(share of the rows kept, argument, value, remedy)`` of a share that drew a part of the
rows, e.g. ``(0.1, "test_size", 0.9, "a smaller")`` for the rows ``test_size=0.9`` leaves."""

Part = tuple[str, np.ndarray, Drawn | None]
"""``(where, positions, share)``: of the shares that drew the part, the one that keeps the
fewest of its rows and that the caller can type (:func:`_fewest`), or None."""


def _fewest(*shares: Drawn | None) -> Drawn | None:
    """Of ``shares``, the one keeping the fewest rows that the caller can type (the first of
    equals): the one fix a message about the rows they drew names."""
    return min((s for s in shares if s is not None and has_name(s[1])), key=lambda s: s[0],
               default=None)


def validated_limits(limits: Sequence[Any], *, margin: float, confidence: float | None,
                     safety: tuple[Any, Any] | None, groups: pd.Series, y01: np.ndarray,
                     parts: Sequence[Part], argument: str, bound: str | None = None
                     ) -> list[Any]:
    """The limits the trials are validated against, derived once for every entrance, with the
    groups (label of each row, 0/1 labels ``y01``) checked against them, in this order:

    1. Groups that are the labels (every group of one outcome) are refused.
    2. ``limits`` as given are tightened by ``margin`` and, with ``confidence``, by the width
       the test ``bound`` is predicted to need on the ``safety`` rows ``(y01, sensitive
       features)`` (:func:`~fairtune.tuning._certify.limits_for_search`).
    3. The last of ``parts`` is where a trial is validated: each group needs
       :func:`~fairtune._validation.minimum_group_rows` of the validated limits there, a row
       in every other part, and rows of each label a validated limit's rate is measured on.

    ``argument`` names the sensitive features.
    """
    check_groups_are_not_labels(groups, y01, argument=argument)
    validated = tightened(list(limits), margin)
    if confidence is not None:
        assert safety is not None  # an entrance keeps safety rows for a confidence
        # A group that has no row of a label in all the data: no share of it can help.
        check_groups_have_labels(groups, y01, rate_labels(validated), where="the data",
                                 argument=argument)
        validated = limits_for_search(validated, confidence, *safety, margin=margin,
                                      method=bound or "exact")
    where, rows, share = parts[-1]
    if confidence is not None and share and share[1] == "safety_size":
        share = (*share[:3], "a different")  # it sets the tightening too: either way may help
    minimum = minimum_group_rows(validated)
    upper = [limit for limit in validated if limit.sense == "upper" and limit.bound > 0]
    tightest = min(upper, key=lambda limit: limit.bound) if upper else None
    given = next((g for g in limits if tightest is not None and g.metric == tightest.metric
                  and g != tightest), None)  # said as given when the trials aim lower
    how = " and ".join(([f"{arg('margin')}"] if margin else [])
                       + ([f"{arg('confidence')}"] if confidence is not None else []))
    needs = ("measuring a group's rate" if tightest is None else f"the limit {tightest}" + (
        f" the trials are validated against ({given} tightened for {how})" if given else ""))
    # A group with fewer rows in all than the disjoint parts need together is the data's fault.
    enough = minimum + sum(not np.isin(other, rows).any() for _, other, _ in parts[:-1])
    for place, positions, drawn, need in [(where, rows, share, minimum),
                                          *((*part, 1) for part in parts[:-1])]:
        check_group_sizes(groups, positions, need, where=place, argument=argument,
                          needs=needs if need > 1 else "training and testing a model",
                          share=drawn and drawn[1:], enough=enough)
    check_groups_have_labels(groups, y01, rate_labels(validated), where=where,
                             argument=argument, rows=rows, share=share and share[1:])
    return validated


# -- the rows of a FairObjective --------------------------------------------------------------

BUNDLED = ("adult", "german", "compas")


def load(dataset: Any) -> tuple[pd.DataFrame, Any, Any, str]:
    """(X, labels, sensitive features, name) of ``dataset``: new objects in X's row order
    (:func:`aligned`), the column names of X as strings."""
    from fairtune import datasets

    if isinstance(dataset, str) and dataset in BUNDLED:
        # German and COMPAS warn (once per process) about their known issues, here too.
        bunch = getattr(datasets, f"load_{dataset}")()
        X, y, s, name = bunch.data, bunch.target, bunch.sensitive_features, dataset
    elif isinstance(dataset, datasets.FairDataset):
        X, y, s = dataset.data, dataset.target, dataset.sensitive_features
        name = dataset.get("name", "data")
    elif isinstance(dataset, tuple) and len(dataset) == 3:
        (X, y, s), name = dataset, "data"
    else:
        given = got("dataset", dataset) if isinstance(dataset, str) else type(dataset).__name__
        raise ValueError(
            f"{arg('dataset')} must be one of {list(BUNDLED)}, a FairDataset or an (X, y, "
            f"sensitive) tuple, but got {given}.")
    if isinstance(X, pd.DataFrame):
        X = X.copy()
    else:
        X = pd.DataFrame(np.asarray(X))
        # Beside an array, labels and groups are matched by position.
        y, s = (
            v.set_axis(X.index[: len(v)], axis=0) if isinstance(v, (pd.Series, pd.DataFrame))
            and len(v) == len(X) else v for v in (y, s)
        )
    X.columns = [str(c) for c in X.columns]
    try:
        y, s = aligned(X, y, "y"), aligned(X, s, "sensitive")
    except ValueError as error:
        raise ValueError(f"{arg('dataset')} (X, y, sensitive): {error}") from None
    return X, y, s, name


def checked_drop_columns(drop_columns: Any, X: pd.DataFrame) -> list[str]:
    """``drop_columns`` as a list of column names of ``X``, or a ValueError naming it."""
    if isinstance(drop_columns, str) or not isinstance(drop_columns, (list, tuple)) or not all(
        isinstance(c, str) for c in drop_columns
    ):
        raise ValueError(f"{arg('drop_columns')} must be a list of column names, but got "
                         f"{got('drop_columns', drop_columns)}.")
    if unknown := [c for c in drop_columns if c not in X.columns]:
        raise ValueError(
            f"{arg('drop_columns')} must name columns of X, but got "
            f"{got('drop_columns', list(drop_columns))} "
            f"and X has no column {unknown} (its columns: {list(map(str, X.columns))}).")
    if set(X.columns) <= set(drop_columns):
        raise ValueError(
            f"{arg('drop_columns')} must leave the model at least one column of X, but got "
            f"{got('drop_columns', list(drop_columns))}, every column.")
    return list(dict.fromkeys(drop_columns))


# A value "names" the group when at least this share of its rows (and this many rows) are in
# one group; a column is flagged when such values cover this share of all rows.
_NAMING_PURITY = 0.99
_NAMING_MIN_ROWS = 10
_NAMING_SHARE = 0.1


def warn_of_proxies(
    X: pd.DataFrame, groups: pd.Series, sensitive_names: list[Any], sensitive_name: str, *,
    stacklevel: int,
) -> None:
    """Warn (at the caller of FairObjective) of the categorical columns left in X that reveal
    the group: a column each of whose values belongs to one group (German credit's
    ``personal_status_sex`` for ``sex``), or one whose values of at least ``_NAMING_MIN_ROWS``
    rows, ``_NAMING_PURITY`` of them in one group, cover ``_NAMING_SHARE`` of the rows or more
    (Adult's ``relationship``, whose ``Husband`` and ``Wife`` give ``sex`` on 46 % of the
    rows); ``groups``: the group label of each row."""
    codes = pd.factorize(groups.to_numpy(dtype=object))[0]
    found: dict[str, str] = {}
    for column in X.columns:
        values = X[column]
        number = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
        if number or values.nunique() >= len(values) / 2:  # or an identifier, not a category
            continue
        counts = pd.crosstab(values.astype(str).to_numpy(), codes)
        rows = counts.sum(axis=1)
        named = rows[(rows >= _NAMING_MIN_ROWS) & (counts.max(axis=1) >= _NAMING_PURITY * rows)]
        named = named.sort_values(ascending=False, kind="stable")
        if ((counts > 0).sum(axis=1) == 1).all():
            found[str(column)] = "(each of its values belongs to one group)"
        elif named.sum() >= _NAMING_SHARE * len(values):
            found[str(column)] = (
                f"on {named.sum() / len(values):.0%} of the rows (values "
                f"{', '.join(map(repr, map(str, named.index[:5])))}"
                f"{f' and {len(named) - 5} more' if len(named) > 5 else ''})")
    if found:
        warnings.warn(
            f"{got('use_sensitive_feature', False)} drops {sensitive_names} from the model's "
            f"inputs, but columns left reveal {sensitive_name}: "
            f"{'; '.join(f'{column!r} {how}' for column, how in found.items())}; the model can "
            f"still read it; to hide it, drop them too: {arg('drop_columns')} "
            f"{','.join(found)}.", UserWarning, stacklevel=stacklevel)


def warn_of_text_columns(X: pd.DataFrame, *, stacklevel: int) -> None:
    """Warn (at the caller) of text columns one-hot encoding would read badly: one with a
    value per row or nearly (an identifier, a date), and a column of numbers read as text
    because of a few values that are not numbers (``"?"`` for a missing value)."""
    for column in X.columns:
        values = X[column]
        if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            continue
        present = values.dropna().astype(str)
        numbers = pd.to_numeric(present, errors="coerce")
        others = present[numbers.isna()]
        if len(present) and 0 < len(others) <= 0.05 * len(present):
            warnings.warn(
                f"{arg('dataset')} column {column!r} holds numbers but is read as text because "
                f"of {len(others)} value{'s' if len(others) != 1 else ''} that "
                f"{'are' if len(others) != 1 else 'is'} not one, e.g. "
                f"{shown(pd.unique(others), 3)}: each of its values becomes a column of its own. "
                "Replace them with empty cells (a missing value, which XGBoost and the forests "
                "handle) or correct them.", UserWarning, stacklevel=stacklevel)
            continue
        distinct = present.nunique()
        if distinct > 50 and distinct > 0.05 * len(values):
            warnings.warn(
                f"{arg('dataset')} column {column!r} has {distinct} distinct values in "
                f"{len(values)} rows: one-hot encoding makes a column of each, most of them "
                "seen in a few rows, and reads a new value as none of them. If it identifies "
                f"rows or is a date, drop it ({arg('drop_columns')} {column}) or turn it into "
                "numbers first.", UserWarning, stacklevel=stacklevel)


@dataclass
class TuningRows:
    """What a FairObjective's trials see: all the rows as the model sees them, the test split,
    the tuning rows and their :class:`Splits`, the limits the trials are validated against,
    and the fingerprint of what is scored."""

    X: pd.DataFrame
    y: pd.Series
    sensitive: Any
    name: str
    sensitive_name: str
    sensitive_columns: list[str]  # sensitive columns the model reads (its guard checks them)
    dropped: list[str]  # the columns of the data the model does not see (drop_columns)
    favourable: Any  # a file's favourable value (read_table's positive=), recorded as pos_label
    X_safe: pd.DataFrame | None  # the safety rows of a certified search (confidence=), or None
    y_safe: pd.Series | None
    s_safe: Any
    X_dev: pd.DataFrame
    y_dev: pd.Series
    s_dev: Any
    X_test: pd.DataFrame | None
    y_test: pd.Series | None
    s_test: Any
    splits: Splits
    single: bool  # a validation split (one fold) rather than cross-validation
    fingerprint: str
    limits: list[Any]  # the limits the trials are validated against (validated_limits)


def _held_out(labels: np.ndarray, keep: Any, test_size: float | None,
              safety_size: float | None, seed: int, rows: str, ordered: bool
              ) -> tuple[np.ndarray, dict[str, np.ndarray], Drawn | None, list[Part]]:
    """The test split and the safety rows drawn from all the rows: ``(dev, drawn, before,
    parts)``, the positions of the rows left for the search, of each part drawn, the share
    ahead of the search's split (:func:`_fewest`) and the parts (for the group-size check).
    Each split is the one train_test_split makes of the rows it splits (same rows, same order,
    or in the order given when ``ordered``); ``rows`` names all the rows."""
    dev, drawn = np.arange(len(labels)), dict[str, np.ndarray]()
    before: Drawn | None = None
    parts: list[Part] = []
    for size, value, held, rest in (("test_size", test_size, "the test split", "the tuning rows"),
                                    ("safety_size", safety_size, "the safety rows", "the search")):
        if value is not None:  # the safety rows are those of the safety test
            kept, drawn[size] = kept_values(*drawn_split(
                len(dev), value, labels[dev], seed, argument=size, held=held, rest=rest,
                rows="tuning rows" if drawn else rows, left_by=before and before[1:3]),
                None if keep is None else keep.iloc[dev])
            if ordered:
                kept, drawn[size] = np.sort(kept), np.sort(drawn[size])
            drawn[size] = dev[drawn[size]]
            parts.append((held, drawn[size], _fewest(before, (value, size, value, "a larger"))))
            before = _fewest(before, (1 - value, size, value, "a smaller"))
            dev = dev[kept]
    return dev, drawn, before, parts


def _search_folds(dev: np.ndarray, y_dev: np.ndarray, cv: int | None,
                  validation_size: float | None, random_state: int, before: Drawn | None,
                  parts: list[Part], guard: Any) -> list[Fold]:
    """The validation split (one fold) or the cross-validation folds of the search rows;
    their parts appended to ``parts``."""
    from sklearn.model_selection import StratifiedKFold

    if cv is None:  # the validation split is one fold
        assert validation_size is not None  # FairObjective defaults it when cv is None
        folds = [kept_values(*drawn_split(
            len(dev), validation_size, y_dev, random_state, argument="validation_size",
            held="the validation split", rest="the training split",
            rows="search rows" if before else "rows of the data",
            left_by=before and before[1:3]), guard)]
        argument, value, share, remedy = ("validation_size", validation_size, validation_size,
                                          "a larger")
        names = [("the training split", "the validation split")]
    else:
        smallest_class = int(np.bincount(y_dev, minlength=2).min())
        if cv > smallest_class:
            raise ValueError(
                f"{arg('cv')} must be at most the number of tuning rows of the smaller class "
                f"({smallest_class}), but got {got('cv', cv)}.")
        splitter = StratifiedKFold(cv, shuffle=True, random_state=random_state)
        folds = [(np.asarray(a), np.asarray(b)) for a, b in splitter.split(y_dev, y_dev)]
        _check_folds_keep_values(folds, guard)
        argument, value, share, remedy = "cv", cv, 1 / cv, "a smaller"
        names = [(f"the training rows of fold {k}", f"the validation rows of fold {k}")
                 for k in range(1, cv + 1)]
    for (fit, valid), (fit_name, valid_name) in zip(folds, names, strict=True):
        parts += [(fit_name, dev[fit], _fewest(before, (1 - share, argument, value, "a smaller"))),
                  (valid_name, dev[valid], _fewest(before, (share, argument, value, remedy)))]
    if cv is not None:
        parts.append(("the cross-validation folds", dev, before))
    return folds


@dataclass
class RowSplit:
    """Where the rows go (:func:`split_rows`): positions of the search rows (``dev``) and of
    those held out (None if not drawn), the splits of ``dev``, the validated limits."""

    dev: np.ndarray
    test: np.ndarray | None
    safe: np.ndarray | None
    splits: Splits
    limits: list[Any]


def split_rows(
    y01: np.ndarray, groups: pd.Series, sensitive: Any, *, labels: Any, keep: Any, seed: int,
    test_size: float | None, safety_size: float | None,
    cv: int | Callable[[np.ndarray], list[Fold]] | None, validation_size: float | None = None,
    limits: Sequence[Any], margin: float, confidence: float | None, argument: str,
    budgets: Sequence[float] | None, resource: str, rows: str = "rows of the data",
    ordered: bool = False, bound: str | None = None,
) -> RowSplit:
    """The one row builder of every entrance, over arrays: the test and safety rows drawn
    (stratified by ``labels``; ``ordered``: in the order given), the search rows' validation
    split or ``cv`` folds (or ``cv(dev)``, an entrance's folds of the search rows ``dev``), the
    limits derived and the group sizes checked once (:func:`validated_limits`), the budgets."""
    from sklearn.utils import _safe_indexing

    dev, drawn, before, parts = _held_out(np.asarray(labels), keep, test_size, safety_size,
                                          seed, rows, ordered)
    guard = None if keep is None else keep.iloc[dev]
    if callable(cv):
        folds = cv(dev)
        parts.append(("the cross-validation folds", dev[validated_rows(folds, len(dev))],
                      before))
    else:
        folds = _search_folds(dev, y01[dev], cv, validation_size, seed, before, parts, guard)
    safe = drawn.get("safety_size")
    validated = validated_limits(
        limits, margin=margin, confidence=confidence, groups=groups, y01=y01,
        safety=None if safe is None else (y01[safe], _safe_indexing(sensitive, safe)),
        parts=parts, argument=argument, bound=bound)
    splits = Splits(folds, len(dev))
    if budgets is not None and resource == "n_samples":
        splits.budget_folds = budget_folds(folds, y01[dev], groups.iloc[dev], budgets, seed,
                                           keep=guard)
    return RowSplit(dev, drawn.get("test_size"), safe, splits, validated)


def tuning_rows(
    dataset: Any, *, pos_label: Any, drop_columns: Any, use_sensitive_feature: bool,
    test_size: float | None, validation_size: float | None, cv: int | None, random_state: int,
    limits: Sequence[Any], margin: float, confidence: float | None,
    budgets: Sequence[float] | None, resource: str, correlation_remover: bool, stacklevel: int,
    safety_size: float | None = None, bound: str | None = None,
) -> TuningRows:
    """The data of a FairObjective, checked before any trial (see the module docstring), with
    the limits (as given) that the trials are validated against (:func:`validated_limits`)."""
    X, y, sensitive, name = load(dataset)
    drop = checked_drop_columns(drop_columns, X)
    X = X.drop(columns=drop)
    warn_of_text_columns(X, stacklevel=stacklevel + 1)
    y = pd.Series(favourable_labels(y, pos_label, argument=f"{arg('dataset')} labels")[0],
                  index=X.index, name="target")
    argument = f"{arg('dataset')} sensitive features"
    # Validated once, in one encoding. Twins among the groups' values are named once: by
    # read_table for a file (its FairDataset), here for an (X, y, sensitive) tuple.
    groups = sensitive_groups(sensitive, len(sensitive), argument=argument,
                              warn_twins=isinstance(dataset, tuple), stacklevel=stacklevel + 1)
    several = isinstance(sensitive, pd.DataFrame)
    sensitive_names = list(sensitive.columns) if several else [sensitive.name]
    sensitive_name = ", ".join(map(str, sensitive_names)) if several else str(
        sensitive.name or "sensitive")
    if not use_sensitive_feature:
        X = X.drop(columns=[c for c in sensitive_names if c in X.columns])
        warn_of_proxies(X, groups, sensitive_names, sensitive_name, stacklevel=stacklevel + 1)
    in_X = [c for c in sensitive_names if c in X.columns]
    if correlation_remover and len(in_X) != len(sensitive_names):
        raise ValueError(
            f"{arg('mitigation')} 'correlation_remover' decorrelates the columns of X from the "
            "sensitive ones, so the sensitive features must be columns of X (named alike, "
            "and use_sensitive_feature=True), but X has no column "
            f"{[c for c in sensitive_names if c not in X.columns]}."
        )
    # The columns the deployed model's unseen-value guard checks: every split keeps each of
    # their values in the rows a model is fitted on.
    keep = X[in_X] if (use_sensitive_feature and in_X) else None

    split = split_rows(
        y.to_numpy(), groups, sensitive, labels=y.to_numpy(), keep=keep, seed=random_state,
        test_size=test_size, safety_size=safety_size, cv=cv, validation_size=validation_size,
        limits=limits, margin=margin, confidence=confidence, argument=argument,
        budgets=budgets, resource=resource, bound=bound)
    def part(rows: np.ndarray | None) -> tuple[Any, Any, Any]:
        return (None, None, None) if rows is None else (
            X.iloc[rows], y.iloc[rows], sensitive.iloc[rows])

    folds = split.splits.folds
    (X_dev, y_dev, s_dev), (X_test, y_test, s_test) = part(split.dev), part(split.test)
    X_safe, y_safe, s_safe = part(split.safe)
    safety = () if split.safe is None else (X_safe, y_safe, s_safe)
    if cv is None:
        (fit, valid), = folds
        fingerprint = data_fingerprint(
            X_dev.iloc[fit], y_dev.iloc[fit], s_dev.iloc[fit], X_dev.iloc[valid],
            y_dev.iloc[valid], s_dev.iloc[valid], *safety)
    else:
        fingerprint = data_fingerprint(X_dev, y_dev, s_dev, *safety, folds=folds)
    return TuningRows(
        X=X, y=y, sensitive=sensitive, name=name, sensitive_name=sensitive_name,
        sensitive_columns=in_X, dropped=drop, favourable=(
            dataset.get("favourable") if isinstance(dataset, dict) else None),
        X_safe=X_safe, y_safe=y_safe, s_safe=s_safe, X_dev=X_dev, y_dev=y_dev, s_dev=s_dev,
        X_test=X_test, y_test=y_test, s_test=s_test, splits=split.splits, single=cv is None,
        fingerprint=fingerprint, limits=split.limits,
    )
