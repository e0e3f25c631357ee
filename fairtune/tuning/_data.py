"""The data of a search, once: what the user gives, turned into the rows every entrance uses.

:class:`~fairtune.tuning.FairObjective` (a bundled name, a :class:`~fairtune.datasets.FairDataset`
from :func:`~fairtune.datasets.read_table`, or an ``(X, y, sensitive)`` tuple) and
:class:`~fairtune.tuning.FairSearchCV` (``fit(X, y, sensitive_features=...)``) both go through
the rules here, so that the same input gets the same answer whichever entrance it goes through:

- Labels: 0/1 or booleans, where 1 (True) is the favourable outcome whose rates the fairness
  metrics compare; any other pair of labels needs ``pos_label=`` naming the favourable one.
  Guessing (the greater label, as scikit-learn's binary metrics do) would make ``"denied"``
  favourable over ``"approved"`` and measure every gap on the wrong outcome. A ``pos_label``
  with twins that differ from it only in case, surrounding spaces or a final full stop is refused.
- Sensitive features: validated and normalised by one function
  (:func:`fairtune._validation.sensitive_groups`); twins among a column's values are named in
  a warning; a group with too few validation rows for its rate to mean anything is refused
  (:func:`fairtune._validation.minimum_group_rows` says how the minimum is set).
- Alignment: a pandas X with pandas labels or sensitive features is matched by index label,
  never by position; arrays are matched by position. The caller's objects are never changed.
- Splits: a validation split is one fold; a budget is a transformation of the folds that cuts
  each fold's training rows to a nested, stratified share (:func:`budget_folds`), as
  scikit-learn's subsample splitter does for successive halving. The share keeps every value of
  the columns that the deployed model's unseen-value guard checks, so that no validation row
  holds a value its budget's model never saw. The test split, the safety rows and the
  validation split keep them alike (:func:`kept_values`): a value whose every row a held-out
  share drew gives one row back to the rows a model is fitted on; cross-validation, which
  validates every row once, refuses such a value instead.
- Fingerprint: a digest of the rows, labels, groups and validation splits that a study's trials
  were scored on, so that a study refuses to compare trials scored on other data.
"""

from __future__ import annotations

import hashlib
import math
import pickle
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fairtune._names import arg, got, has_name
from fairtune._validation import (
    favourable_labels,
    minimum_group_rows,
    sensitive_groups,
    shown,
)

__all__ = [
    "Splits", "aligned", "budget_folds", "budget_rows", "checked_group_sizes", "data_fingerprint",
    "favourable_labels", "group_labels", "group_name", "kept_values", "rate_labels", "shown",
]


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


# -- splits and budgets -----------------------------------------------------------------------

Fold = tuple[np.ndarray, np.ndarray]


def group_labels(sensitive: Any) -> pd.Series:
    """One group label per row (tuples for several columns), validated: the splits, the
    budgets and the records read the groups through the one validator."""
    return sensitive_groups(sensitive, len(sensitive))


def budget_rows(y: Any, groups: Any, budgets: Sequence[float], seed: int,
                keep: pd.DataFrame | None = None) -> list[np.ndarray]:
    """The row positions of each budget but the last (all rows): nested subsets, each keeping
    every label-and-group stratum's share (at least one row of each), drawn once per study
    seed so that every trial is fitted on the same rows at the same budget.

    ``keep``: columns (one row per row of ``y``) whose every value each subset must hold: the
    columns a deployed model's unseen-value guard checks, whose values can be finer than the
    groups (COMPAS's ``race`` values under the groups Caucasian / Other).
    """
    strata = pd.Series(np.asarray(y)).astype(str) + "|" + group_labels(groups).astype(str) \
        .reset_index(drop=True)
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
    drawn = np.concatenate(list(order.values()))
    extra: list[int] = []
    for column in keep.columns:
        values = keep[column].reset_index(drop=True).astype(str)
        have = set(values.iloc[subsets[0]]) | set(values.iloc[extra])
        for position in drawn:
            if values.iloc[position] not in have:
                have.add(values.iloc[position])
                extra.append(int(position))
    if not extra:
        return subsets
    return [np.union1d(rows, extra) for rows in subsets]


def budget_folds(folds: Sequence[Fold], y01: np.ndarray, sensitive: Any,
                 budgets: Sequence[float], seed: int, keep: pd.DataFrame | None = None
                 ) -> list[list[Fold]]:
    """For each budget but the full one, ``folds`` with their training rows cut to it (the
    validation rows stay): a budget transforms the split, and the trial path never learns
    about budgets."""
    from sklearn.utils import _safe_indexing

    cut = [budget_rows(np.asarray(y01)[fit], _safe_indexing(sensitive, fit), budgets, seed,
                       None if keep is None else keep.iloc[fit])
           for fit, _ in folds]
    return [[(fit[cut[k][step]], valid) for k, (fit, valid) in enumerate(folds)]
            for step in range(len(budgets) - 1)]


def kept_values(fit: Any, held: Any, keep: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray]:
    """A split ``(fit rows, held-out rows)`` (positions) with every value of the ``keep``
    columns (one row per position) among the fit rows: for each value only the held-out rows
    hold, the first of them in the split's (random) order moves to the fit rows.

    The held-out rows (a test split, the safety rows, a validation split) are predicted by a
    model fitted on the others, whose unseen-value guard refuses a value it never saw; a split
    that already keeps every value is returned unchanged.
    """
    fit, held = np.asarray(fit), np.asarray(held)
    if keep is None:
        return fit, held
    moved: list[int] = []
    for column in keep.columns:
        values = keep[column].reset_index(drop=True).astype(str).to_numpy()
        have = set(values[fit]) | set(values[moved])
        for position in held:
            if values[position] not in have:
                have.add(values[position])
                moved.append(int(position))
    if not moved:
        return fit, held
    return np.concatenate([fit, moved]), held[~np.isin(held, moved)]


def _check_folds_keep_values(folds: Sequence[Fold], keep: pd.DataFrame | None) -> None:
    """Refuse cross-validation folds whose training rows lack a value of the ``keep`` columns
    that their validation rows hold (a value of fewer rows than folds): every row is validated
    once, so no row can move."""
    if keep is None:
        return
    for column in keep.columns:
        values = keep[column].reset_index(drop=True).astype(str).to_numpy()
        for k, (fit, valid) in enumerate(folds):
            unseen = sorted(set(values[valid]) - set(values[fit]))
            if unseen:
                counts = pd.Series(values).value_counts()
                listed = ", ".join(f"{v!r} ({int(counts[v])} row{'' if counts[v] == 1 else 's'})"
                                   for v in unseen[:5])
                raise ValueError(
                    f"{got('cv', len(folds))} leaves the training rows of fold {k + 1} without "
                    f"the value{'s' if len(unseen) > 1 else ''} {listed} of the sensitive column "
                    f"{column!r} that the model reads, and a model refuses a value it never saw "
                    f"at fit. Merge such a value into another, drop its rows, or use a "
                    f"validation split ({arg('validation_size')}), which keeps every value in "
                    f"its training rows.")


def _share_text(value: float, low: float, high: float, *, up: bool = False) -> str:
    """``value`` rounded down (``up``: up) to the fewest significant digits that keep it in
    ``[low, high]`` and within 1 % of its distance from 0 and from 1, as text."""
    if value <= 0.0 or not math.isfinite(value):
        return repr(value)
    for digits in range(1, 18):
        scale = 10.0 ** (digits - 1 - math.floor(math.log10(value)))
        rounded = (math.ceil if up else math.floor)(value * scale) / scale
        # Close enough that a share near 1 keeps its distance from 1 too (0.99995, not 0.9).
        close = abs(rounded - value) <= 0.01 * min(value, 1.0 - value) if value < 1.0 else True
        if low <= rounded <= high and close:
            return f"{rounded:.{digits}g}"
    return repr(value)


def drawn_split(n: int, share: float, labels: Any, seed: int, *, argument: str, held: str,
                rest: str, rows: str, left_by: Sequence[tuple[str, Any]] = ()
                ) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(rest, held)`` of ``n`` rows that ``argument``'s ``share`` splits,
    stratified by ``labels``, as scikit-learn's ``train_test_split`` draws them (the held-out
    part has ``ceil(share * n)`` rows).

    A share that leaves a part too small to split by label (fewer rows than labels, none at
    all) is refused before any trial, naming the argument, the value given and the rows each
    part would get; ``held``, ``rest`` and ``rows`` name the parts and the rows split, e.g.
    ``"the test split"``, ``"the tuning rows"``, ``"rows of the data"``; ``left_by``: the
    ``(argument, value)`` of the shares that left these rows, named when the rows are too few
    for any share.
    """
    from sklearn.model_selection import train_test_split

    values, counts = np.unique(np.asarray(labels), return_counts=True)
    classes = max(len(values), 1)
    n_held = math.ceil(share * n)
    n_rest = n - n_held
    if n < 2 * classes and left_by:
        named = " and ".join(got(*step) for step in left_by)
        raise ValueError(
            f"{named} leave{'' if len(left_by) > 1 else 's'} {n:,} {rows.split(' that ')[0]}, "
            f"too few for {held} and {rest}, which need at least one row of each of the "
            f"{classes} labels each: use a smaller "
            f"{' or '.join(arg(name) for name, _ in left_by)}."
        )
    if n_held < classes or n_rest < classes:
        if n >= 2 * classes:
            # ceil(s * n) >= classes and n - ceil(s * n) >= classes.
            low, high = classes / n, (n - classes) / n
            # Any share above (classes - 1) / n gives the held-out part enough rows.
            above = math.nextafter((classes - 1) / n, 1.0)
            fix = (f"give a share from {_share_text(low, above, high, up=True)} to "
                   f"{_share_text(high, above, high)}")
        else:
            fix = f"{n:,} rows are too few to split by label with any share"
        raise ValueError(
            f"{got(argument, share)} gives {held} {n_held:,} of the {n:,} {rows} and "
            f"leaves {rest} {n_rest:,}, but a split stratified by label needs at least one row "
            f"of each of the {classes} labels in each part: {fix}."
        )
    if counts.min() < 2:
        raise ValueError(
            f"{got(argument, share)} splits {rows} by label, but label "
            f"{_plain(values[counts.argmin()])!r} has {int(counts.min())} row of the {n:,} "
            f"there, too few to be in both {held} and {rest}."
        )
    rest_rows, held_rows = train_test_split(np.arange(n), test_size=share, stratify=labels,
                                            random_state=seed)
    return np.asarray(rest_rows), np.asarray(held_rows)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


@dataclass
class Draw:
    """The shares (as given) that drew the rows of each part, so that a part with too few
    rows of a group names the share that made it so rather than the data."""

    all_groups: pd.Series  # the group of every row of the data (names, group_name)
    dev_groups: pd.Series  # the group of every tuning row (names)
    test_size: float | None
    safety_size: float | None
    validation_size: float | None
    cv: int | None
    seed: int
    y_dev: np.ndarray | None = None
    keep: pd.DataFrame | None = None  # the tuning rows' columns the model's guard checks

    def path(self, part: str) -> list[tuple[str, Any, float]]:
        """``(argument, value, share of the rows kept toward part)`` for each share that
        drew ``part``: "test", "safety", "training" or "validation" (a fold's with cv)."""
        steps: list[tuple[str, Any, float]] = []
        if self.test_size is not None:
            steps.append(("test_size", self.test_size,
                          self.test_size if part == "test" else 1.0 - self.test_size))
        if part == "test":
            return steps
        if self.safety_size is not None:
            steps.append(("safety_size", self.safety_size,
                          self.safety_size if part == "safety" else 1.0 - self.safety_size))
        if part == "safety":
            return steps
        if self.cv is not None:
            steps.append(("cv", self.cv, 1.0 / self.cv if part == "validation"
                          else 1.0 - 1.0 / self.cv))
        elif self.validation_size is not None:
            steps.append(("validation_size", self.validation_size,
                          self.validation_size if part == "validation"
                          else 1.0 - self.validation_size))
        return steps

    def needs(self, minimum: int) -> int:
        """The fewest rows of a group that every part can have enough of: ``minimum`` where
        a trial is validated, one in each other part."""
        return minimum + (self.cv is None) + (self.test_size is not None) + (
            self.safety_size is not None)

    def fitting_cv(self) -> int | None:
        """The largest cv below the one given (halving) whose folds, drawn alike, give every
        group rows in each fold's training and validation rows (and the training rows every
        value the model's guard checks), or None."""
        from sklearn.model_selection import StratifiedKFold

        if self.cv is None or self.y_dev is None:
            return None
        groups = self.dev_groups.to_numpy()
        every = set(groups)
        smallest = int(np.bincount(self.y_dev, minlength=2).min())
        k = min(self.cv - 1, smallest)
        while k >= 2:
            splitter = StratifiedKFold(k, shuffle=True, random_state=self.seed)
            folds = list(splitter.split(np.zeros(len(groups)), self.y_dev))
            if all(set(groups[a]) == every and set(groups[b]) == every for a, b in folds):
                try:
                    _check_folds_keep_values(folds, self.keep)
                except ValueError:
                    pass
                else:
                    return k
            k //= 2
        return None

    def cause(self, group: str, part: str, where: str, have: int, needed: int,
              minimum: int) -> str | None:
        """Why ``group`` has ``have`` rows in ``where`` (a ``part``) where it needs ``needed``:
        a sentence naming the share that left it so few, or None when the group itself has
        too few rows in the data for every part (the data is the cause)."""
        total = int((self.all_groups == group).sum())
        if total < self.needs(minimum):
            return None
        steps = [step for step in self.path(part) if has_name(step[0])]
        if not steps:
            return None
        name, value, kept = min(steps, key=lambda step: step[2])
        expected = total * float(np.prod([step[2] for step in self.path(part)]))
        found = (f"{got(name, value)} leaves group {group!r} {have} of its {total:,} rows in "
                 f"{where} (about {expected:.3g} on average), where it needs {needed}")
        if name == "cv":
            better = self.fitting_cv()
            fix = (f"a smaller {arg('cv')}: {got('cv', better)} gives every group rows in each "
                   f"fold's training and validation rows" if better is not None else
                   f"a smaller {arg('cv')}, or none (a validation split)")
            return f"{found}: the folds are the cause, not the group's size. Use {fix}."
        others = expected / kept  # the rows the other shares leave toward the part
        # A share that gives the group `needed` rows on average misses them about as often as
        # not: aim at about three standard deviations (of a Poisson count) above.
        aim = math.ceil(needed + 3 * math.sqrt(needed))
        share = aim / others if others > 0 else math.inf
        larger = (part == "test" and name == "test_size") or (
            part == "safety" and name == "safety_size") or (
            part == "validation" and name == "validation_size")
        if larger:
            fix = f"a larger {arg(name)}" + (
                f" (from about {_share_text(share, share, 1.0, up=True)} on: {aim} on average)"
                if share < 1.0 else "")
        else:
            fix = f"a smaller {arg(name)}" + (
                f" (about {_share_text(1.0 - share, 0.0, 1.0 - share)} or less: {aim} on "
                "average)" if share < 1.0 else "")
        luck = (f", or another {arg('random_state')} (the rows expected there are enough)"
                if expected >= needed and has_name("random_state") else "")
        return f"{found}: the share is the cause, not the group's size. Use {fix}{luck}."


@dataclass
class Splits:
    """The rows a trial is scored on: ``folds`` over the tuning rows, ``(fit rows, validation
    rows)`` positions (a validation split is one fold), the validated rows, and with budgets
    each smaller budget's folds (``at(step)``)."""

    folds: list[Fold]
    n_rows: int
    budget_folds: list[list[Fold]] | None = None

    @property
    def covered(self) -> np.ndarray:
        """The rows in some validation part, in order."""
        tested = np.zeros(self.n_rows, dtype=bool)
        for _, valid in self.folds:
            tested[valid] = True
        return np.flatnonzero(tested)

    def at(self, step: int | None) -> list[Fold]:
        """The folds of the smaller budget ``step`` (0 the smallest), or the full ones (None)."""
        if step is None or self.budget_folds is None:
            return self.folds
        return self.budget_folds[step]


def checked_group_sizes(sensitive: Any, rows: np.ndarray, limits: Sequence[Any], *,
                        where: str, argument: str, y01: Any = None,
                        held: Sequence[tuple[str, Any, Any, str]] = (),
                        draw: Draw | None = None) -> None:
    """Refuse groups that cannot be measured: a group with too few validation ``rows`` for its
    rate to mean anything (the minimum: :func:`fairtune._validation.minimum_group_rows` of the
    limits), and, given the labels ``y01`` of every row, groups that are the labels and groups
    whose validation rows lack a label that a limit's rate is measured on (equalized odds in a
    group without unfavourable rows: :func:`fairtune._validation.check_groups_have_labels`).

    ``held``: ``(where, groups, 0/1 labels, what would give the search more of them)`` of each
    part held out from the search (the test split, the safety rows), so that a label the
    search lacks is said to be there. ``draw``: the shares that drew the rows, so that a group
    too small only where a share left it few rows names that share (:class:`Draw`).
    """
    from sklearn.utils import _safe_indexing

    from fairtune._validation import (
        check_group_sizes,
        check_groups_are_not_labels,
        check_groups_have_labels,
    )

    groups = group_labels(sensitive)
    if y01 is not None:
        check_groups_are_not_labels(groups, y01, argument=argument)
    validated = group_labels(_safe_indexing(sensitive, rows)).map(group_name)
    minimum = minimum_group_rows(limits)
    explain = None
    if draw is not None:
        def explain(group: Any, have: int) -> str | None:
            return draw.cause(group, "validation", where, have, minimum, minimum)
    check_group_sizes(validated, minimum, where=where, argument=argument, explain=explain)
    if y01 is not None:
        check_groups_have_labels(
            validated, np.asarray(y01)[rows], rate_labels(limits), where=where,
            argument=argument, all_groups=groups.map(group_name), all_y01=y01,
            elsewhere=[(place, group_labels(part).map(group_name), np.asarray(labels), fix)
                       for place, part, labels, fix in held])


def rate_labels(limits: Sequence[Any]) -> list[tuple[str, str, int]]:
    """``(limit, rate, label)`` for each rate of the ``limits`` that is measured on the rows of
    one label: the true positive rate on the favourable rows (1), the false positive rate on
    the unfavourable ones (0)."""
    from fairtune.fairness import METRICS
    from fairtune.fairness.metrics import _RATE_CONDITION

    return [(str(limit), rate.replace("_", " "), label)
            for limit in limits or () for rate in METRICS[limit.metric].rates
            if (label := _RATE_CONDITION[rate][0]) is not None]


def group_name(group: Any) -> str:
    """A group label as text: ``"F, 25-45"`` for an intersectional group."""
    return ", ".join(map(str, group)) if isinstance(group, tuple) else str(group)


# -- the rows of a FairObjective --------------------------------------------------------------

BUNDLED = ("adult", "german", "compas")


def load(dataset: Any) -> tuple[pd.DataFrame, Any, Any, str]:
    """(X, labels, sensitive features, name) of ``dataset``, new objects in X's row order.

    The caller's objects are never changed: pandas labels and sensitive features are matched
    to X by index label, arrays by position (:func:`fairtune.tuning._data.aligned`), and the
    column names of X become strings on a copy.
    """
    from fairtune import datasets

    if isinstance(dataset, str):
        if dataset not in BUNDLED:
            raise ValueError(
                f"{arg('dataset')} must be one of {list(BUNDLED)}, a FairDataset or an (X, y, "
                f"sensitive) tuple, but got {got('dataset', dataset)}."
            )
        # German and COMPAS warn (once per process) about their known issues, here too.
        bunch = getattr(datasets, f"load_{dataset}")()
        X, y, s, name = bunch.data, bunch.target, bunch.sensitive_features, dataset
    elif isinstance(dataset, datasets.FairDataset):
        X, y, s = dataset.data, dataset.target, dataset.sensitive_features
        name = dataset.get("name", "data")
    elif isinstance(dataset, tuple) and len(dataset) == 3:
        (X, y, s), name = dataset, "data"
    else:
        raise ValueError(
            f"{arg('dataset')} must be one of {list(BUNDLED)}, a FairDataset or an (X, y, "
            f"sensitive) tuple, but got {type(dataset).__name__}."
        )
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
        raise ValueError(
            f"{arg('drop_columns')} must be a list of column names, but got "
            f"{got('drop_columns', drop_columns)}."
        )
    unknown = [c for c in drop_columns if c not in X.columns]
    if unknown:
        raise ValueError(
            f"{arg('drop_columns')} must name columns of X, but got "
            f"{got('drop_columns', list(drop_columns))} "
            f"and X has no column {unknown} (its columns: {list(map(str, X.columns))})."
        )
    if set(X.columns) <= set(drop_columns):
        raise ValueError(
            f"{arg('drop_columns')} must leave the model at least one column of X, but got "
            f"{got('drop_columns', list(drop_columns))}, every column."
        )
    return list(dict.fromkeys(drop_columns))


# A value "names" the group when at least this share of its rows (and this many rows) are in
# one group; a column is flagged when such values cover this share of all rows.
_NAMING_PURITY = 0.99
_NAMING_MIN_ROWS = 10
_NAMING_SHARE = 0.1


def _proxy_columns(
    X: pd.DataFrame, sensitive: pd.Series | pd.DataFrame
) -> tuple[list[str], dict[str, tuple[float, list[str]]]]:
    """The categorical columns of ``X`` that reveal the sensitive feature.

    Returns the columns whose every value occurs in one group only, from which the group can be
    read off exactly (German credit's ``personal_status_sex`` for ``sex``), and, for the other
    columns, those that name the group on a large share of the rows: values of at least
    ``_NAMING_MIN_ROWS`` rows of which ``_NAMING_PURITY`` or more belong to one group, covering
    ``_NAMING_SHARE`` of the rows or more (Adult's ``relationship``, whose values ``Husband`` and
    ``Wife`` give ``sex`` on 46 % of the rows), mapped to that share and those values (the
    most frequent first).
    """
    groups = (
        sensitive.astype(str).agg("|".join, axis=1) if isinstance(sensitive, pd.DataFrame)
        else sensitive.astype(str)
    )
    if groups.nunique() < 2:
        return [], {}
    exact: list[str] = []
    naming: dict[str, tuple[float, list[str]]] = {}
    for column in X.columns:
        values = X[column]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            continue
        if values.nunique() >= len(values) / 2:  # an identifier, not a category
            continue
        counts = pd.crosstab(values.astype(str).to_numpy(), groups.to_numpy())
        if ((counts > 0).sum(axis=1) == 1).all():
            exact.append(str(column))
            continue
        rows = counts.sum(axis=1)
        named = rows[(rows >= _NAMING_MIN_ROWS) & (counts.max(axis=1) >= _NAMING_PURITY * rows)]
        share = named.sum() / len(values)
        if share >= _NAMING_SHARE:
            by_count = named.sort_values(ascending=False, kind="stable")
            naming[str(column)] = (float(share), [str(v) for v in by_count.index])
    return exact, naming


def warn_of_proxies(
    X: pd.DataFrame, sensitive: Any, sensitive_names: list[Any], sensitive_name: str, *,
    stacklevel: int,
) -> None:
    """Warn (at the caller of FairObjective) of the columns left in X that reveal the group."""
    proxies, naming = _proxy_columns(X, sensitive)
    if proxies:
        warnings.warn(
            f"{got('use_sensitive_feature', False)} drops {sensitive_names} from the model's "
            f"inputs, but the columns {proxies} determine {sensitive_name} exactly (each of "
            "their values belongs to one group), so the model can still read it; to "
            f"hide it, drop them too: {arg('drop_columns')} {','.join(proxies)}.",
            UserWarning,
            stacklevel=stacklevel,
        )
    if naming:
        described = "; ".join(
            f"{column!r} on {share:.0%} of the rows (values "
            f"{', '.join(map(repr, named[:5]))}"
            f"{f' and {len(named) - 5} more' if len(named) > 5 else ''})"
            for column, (share, named) in naming.items()
        )
        warnings.warn(
            f"{got('use_sensitive_feature', False)} drops {sensitive_names} from the model's "
            f"inputs, but some columns name {sensitive_name} on many rows, "
            f"with values of which {_NAMING_PURITY:.0%} or more belong to one group: "
            f"{described}; the model can still read it there. To hide it, drop them "
            f"too: {arg('drop_columns')} {','.join(naming)}.",
            UserWarning,
            stacklevel=stacklevel,
        )



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
    the tuning rows and their :class:`Splits`, and the fingerprint of what is scored."""

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


def tuning_rows(
    dataset: Any, *, pos_label: Any, drop_columns: Any, use_sensitive_feature: bool,
    test_size: float | None, validation_size: float | None, cv: int | None, random_state: int,
    limits: Sequence[Any], budgets: Sequence[float] | None, resource: str,
    correlation_remover: bool, stacklevel: int, safety_size: float | None = None,
) -> TuningRows:
    """The data of a FairObjective, checked before any trial (see the module docstring).

    Raises:
        ValueError: Naming the argument, for data a search cannot score correctly.
    """
    from sklearn.model_selection import StratifiedKFold

    X, y, sensitive, name = load(dataset)
    drop = checked_drop_columns(drop_columns, X)
    X = X.drop(columns=drop)
    warn_of_text_columns(X, stacklevel=stacklevel + 1)
    y = pd.Series(favourable_labels(y, pos_label, argument=f"{arg('dataset')} labels")[0],
                  index=X.index, name="target")
    _check_sensitive(sensitive, "the rows")
    # Twins among the groups' values are named once: by read_table for a file (its
    # FairDataset), here for an (X, y, sensitive) tuple.
    sensitive_groups(sensitive, len(sensitive), argument=f"{arg('dataset')} sensitive features",
                     warn_twins=isinstance(dataset, tuple), stacklevel=stacklevel + 1)
    sensitive_names = (list(sensitive.columns) if isinstance(sensitive, pd.DataFrame)
                       else [sensitive.name])
    sensitive_name = (", ".join(map(str, sensitive.columns)) if isinstance(sensitive, pd.DataFrame)
                      else str(sensitive.name or "sensitive"))
    if not use_sensitive_feature:
        X = X.drop(columns=[c for c in sensitive_names if c in X.columns])
        warn_of_proxies(X, sensitive, sensitive_names, sensitive_name, stacklevel=stacklevel + 1)
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
    X_test = y_test = s_test = None
    if test_size is None:
        X_dev, y_dev, s_dev = X, y, sensitive
    else:
        # Positions of the split train_test_split makes of the rows themselves (same rows,
        # same order), then the rows at those positions.
        dev, test = kept_values(*drawn_split(
            len(y), test_size, y, random_state, argument="test_size", held="the test split",
            rest="the tuning rows", rows="rows of the data"), keep)
        X_dev, X_test = X.iloc[dev], X.iloc[test]
        y_dev, y_test = y.iloc[dev], y.iloc[test]
        s_dev, s_test = sensitive.iloc[dev], sensitive.iloc[test]
    X_safe = y_safe = s_safe = None
    if safety_size is not None:  # the rows of the safety test, which the search never sees
        search, safe = kept_values(*drawn_split(
            len(y_dev), safety_size, y_dev, random_state, argument="safety_size",
            held="the safety rows", rest="the search",
            rows="rows of the data" if test_size is None else
            f"tuning rows that {got('test_size', test_size)} leaves",
            left_by=[] if test_size is None else [("test_size", test_size)]),
            None if keep is None else X_dev[in_X])
        X_dev, X_safe = X_dev.iloc[search], X_dev.iloc[safe]
        y_dev, y_safe = y_dev.iloc[search], y_dev.iloc[safe]
        s_dev, s_safe = s_dev.iloc[search], s_dev.iloc[safe]
    n = len(y_dev)
    guard = None if keep is None else X_dev[in_X]
    held_out = [s for s in (
        ("test_size", test_size), ("safety_size", safety_size)) if s[1] is not None]
    search_rows = "rows of the data" if not held_out else "search rows that {} {}".format(
        " and ".join(got(*s) for s in held_out), "leave" if len(held_out) > 1 else "leaves")
    if cv is None:
        # The validation split is one fold.
        assert validation_size is not None  # FairObjective defaults it when cv is None
        fit_rows, valid_rows = kept_values(*drawn_split(
            n, validation_size, y_dev, random_state, argument="validation_size",
            held="the validation split", rest="the training split", rows=search_rows,
            left_by=held_out), guard)
        folds = [(fit_rows, valid_rows)]
    else:
        smallest_class = int(np.bincount(y_dev.to_numpy(), minlength=2).min())
        if cv > smallest_class:
            raise ValueError(
                f"{arg('cv')} must be at most the number of tuning rows of the smaller class "
                f"({smallest_class}), but got {got('cv', cv)}."
            )
        splitter = StratifiedKFold(cv, shuffle=True, random_state=random_state)
        folds = [(np.asarray(a), np.asarray(b)) for a, b in splitter.split(X_dev, y_dev)]
    draw = Draw(all_groups=group_labels(sensitive).map(group_name),
                dev_groups=group_labels(s_dev).map(group_name), test_size=test_size,
                safety_size=safety_size, validation_size=validation_size if cv is None else None,
                cv=cv, seed=random_state, y_dev=y_dev.to_numpy(), keep=guard)
    # A share that left a group without rows somewhere is named first; then the data.
    _check_every_group_is_validated(sensitive, s_dev, s_test, folds, single=cv is None,
                                    s_safe=s_safe, draw=draw, minimum=minimum_group_rows(limits))
    if cv is None:
        _check_sensitive(s_dev.iloc[folds[0][1]], "the validation split")
    if cv is not None:
        _check_folds_keep_values(folds, guard)
    splits = Splits(folds, n)
    held = [(f"the test split of {got('test_size', test_size)}", s_test, y_test,
             f"a smaller {arg('test_size')}")] if s_test is not None else []
    if s_safe is not None:
        held.append((f"the safety rows of {got('safety_size', safety_size)}", s_safe, y_safe,
                     f"a smaller {arg('safety_size')}"))
    checked_group_sizes(
        s_dev, splits.covered, limits, argument=f"{arg('dataset')} sensitive features",
        where="the validation split" if cv is None else "the cross-validation folds",
        y01=y_dev.to_numpy(), held=held, draw=draw)
    _check_every_group_is_validated(sensitive, s_dev, s_test, folds, single=cv is None,
                                    s_safe=s_safe)
    if budgets is not None and resource == "n_samples":
        splits.budget_folds = budget_folds(folds, y_dev.to_numpy(), s_dev, budgets, random_state,
                                           keep=guard)
    safety = () if X_safe is None else (X_safe, y_safe, s_safe)
    if cv is None:
        (fit_rows, valid_rows), = folds
        parts = (X_dev.iloc[fit_rows], y_dev.iloc[fit_rows], s_dev.iloc[fit_rows],
                 X_dev.iloc[valid_rows], y_dev.iloc[valid_rows], s_dev.iloc[valid_rows])
        fingerprint = data_fingerprint(*parts, *safety)
    else:
        fingerprint = data_fingerprint(X_dev, y_dev, s_dev, *safety, folds=folds)
    return TuningRows(
        X=X, y=y, sensitive=sensitive, name=name, sensitive_name=sensitive_name,
        sensitive_columns=in_X, dropped=drop, favourable=(
            dataset.get("favourable") if isinstance(dataset, dict) else None),
        X_safe=X_safe, y_safe=y_safe, s_safe=s_safe, X_dev=X_dev, y_dev=y_dev, s_dev=s_dev,
        X_test=X_test, y_test=y_test, s_test=s_test, splits=splits, single=cv is None,
        fingerprint=fingerprint,
    )


def _check_sensitive(sensitive: Any, rows: str) -> None:
    try:
        group_labels(sensitive)
    except ValueError as e:
        raise ValueError(
            f"{arg('dataset')} sensitive features must define two or more groups without "
            f"missing values in {rows}: {str(e).replace('`sensitive_features` ', '')}"
        ) from None


def _check_every_group_is_validated(sensitive: Any, s_dev: Any, s_test: Any,
                                    folds: list[Fold], *, single: bool,
                                    s_safe: Any = None, draw: Draw | None = None,
                                    minimum: int = 2) -> None:
    """Refuse a group without rows in a training or a validation part (or the test split):
    its fairness cannot be measured there, and a mitigation fitted without it cannot
    predict it. With ``draw``, only a group with enough rows in the data that a share left
    none there is refused, naming the share (the data's own small groups are refused after
    the group sizes are checked)."""
    groups = group_labels(sensitive)
    dev = group_labels(s_dev).to_numpy()
    parts = [("the test split", "test", group_labels(s_test).to_numpy())
             ] if s_test is not None else []
    if s_safe is not None:
        parts.append(("the safety rows", "safety", group_labels(s_safe).to_numpy()))
    for k, (train, valid) in enumerate(folds):
        if single:
            parts += [("the training split", "training", dev[train]),
                      ("the validation split", "validation", dev[valid])]
        else:
            parts += [(f"the training rows of fold {k + 1}", "training", dev[train]),
                      (f"the validation rows of fold {k + 1}", "validation", dev[valid])]
    for where, part, rows in parts:
        seen = set(rows)
        absent = [g for g in pd.unique(groups) if g not in seen]
        if not absent:
            continue
        if draw is not None:
            cause = draw.cause(group_name(absent[0]), part, where, 0, 1, minimum)
            if cause is not None:
                raise ValueError(
                    f"Every group needs rows to train on and to be measured on: {cause}")
            continue
        sizes = groups.value_counts()
        listed = ", ".join(f"{g!r} ({int(sizes[g])} row{'' if sizes[g] == 1 else 's'})"
                           for g in absent[:5])
        raise ValueError(
            f"{arg('dataset')} sensitive groups with too few rows to validate: "
            f"{listed} {'has' if len(absent) == 1 else 'have'} no row in {where}; merge "
            "small groups into larger ones or drop their rows (every group needs rows "
            "to train on and to be measured on)."
        )
