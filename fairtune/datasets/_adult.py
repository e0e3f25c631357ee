"""UCI Adult (census income) loader."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Literal, overload

import pandas as pd

from fairtune.datasets._base import (
    FairDataset,
    _cached_frame,
    _make_dataset,
    _read_bundled,
    _resolve_sensitive,
)

# Attribute order of adult.data / adult.test (adult.names), hyphens turned into underscores.
_COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income",
]
_NUMERIC = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
FEATURE_NAMES = _COLUMNS[:-1]
TARGET_NAME = "income_gt_50k"

_SENSITIVE_OPTIONS: dict[str, Callable[[pd.DataFrame], pd.Series]] = {
    "sex": lambda f: f["sex"],
    "race": lambda f: f["race"],
    "age": lambda f: f["age"],
}


def _parse_adult() -> pd.DataFrame:
    """adult.data + adult.test, all rows, "?" as missing, label without the test file's dot."""
    parts = []
    for filename, skiprows in (("adult.data.gz", 0), ("adult.test.gz", 1)):
        # adult.test starts with the comment line "|1x3 Cross validator".
        part = pd.read_csv(
            io.BytesIO(_read_bundled(filename)),
            header=None,
            names=_COLUMNS,
            skiprows=skiprows,
            skipinitialspace=True,
            na_values=["?"],
            keep_default_na=False,
            skip_blank_lines=True,
        )
        parts.append(part)
    frame = pd.concat(parts, ignore_index=True)
    frame["income"] = frame["income"].str.rstrip(".")
    for column in _COLUMNS:
        if column in _NUMERIC:
            frame[column] = frame[column].astype("int64")
        else:
            frame[column] = frame[column].astype("category")
    return frame


@overload
def load_adult(
    *,
    sensitive: str | Sequence[str] = ...,
    drop_missing: bool = ...,
    return_X_y: Literal[False] = ...,
) -> FairDataset: ...


@overload
def load_adult(
    *,
    sensitive: str | Sequence[str] = ...,
    drop_missing: bool = ...,
    return_X_y: Literal[True],
) -> tuple[pd.DataFrame, pd.Series, pd.Series | pd.DataFrame]: ...


def load_adult(
    *,
    sensitive: str | Sequence[str] = "sex",
    drop_missing: bool = True,
    return_X_y: bool = False,
) -> FairDataset | tuple[pd.DataFrame, pd.Series, pd.Series | pd.DataFrame]:
    """Load the UCI Adult census income dataset (bundled, offline).

    The task: predict whether a person's yearly income exceeds $50K from 1994 US census
    attributes. As in the Fair BO paper (Perrone et al., 2021), the training and test files
    (``adult.data``, ``adult.test``) are concatenated (48,842 rows) and rows with a missing value
    are dropped, leaving 45,222 rows; the sensitive feature is ``sex``.

    ==================  ==============================================================
    rows                45,222 (48,842 with ``drop_missing=False``)
    features            14: 6 numeric (``int64``), 8 categorical (``category``)
    target              ``income_gt_50k``: 1 if income >50K (favourable), else 0
    positive rate       about 0.248 (45,222 rows)
    sensitive options   ``"sex"`` (default), ``"race"``, ``"age"``
    ==================  ==============================================================

    The sensitive columns stay in ``data``. See ``DESCR`` for provenance and license.

    Args:
        sensitive: Sensitive attribute(s): a name from ``"sex"``, ``"race"``, ``"age"``, or a
            sequence of them, e.g. ``("sex", "race")`` for intersectional groups (then
            ``sensitive_features`` is a DataFrame). Defaults to ``"sex"``.
        drop_missing: Drop the rows with a missing value (``"?"`` in the raw files, in
            ``workclass``, ``occupation`` and ``native_country``). If False, they are kept with
            NaN in those categorical columns. Defaults to True.
        return_X_y: Return ``(data, target, sensitive_features)`` instead of the bunch.
            Defaults to False.

    Returns:
        A :class:`~fairtune.datasets.FairDataset`, or the triple ``(X, y, sensitive)``.

    Example:
        >>> from fairtune.datasets import load_adult
        >>> X, y, sex = load_adult(return_X_y=True)
        >>> X.shape
        (45222, 14)
    """
    _resolve_sensitive(sensitive, _SENSITIVE_OPTIONS)
    frame = _cached_frame("adult", _parse_adult)
    if drop_missing:
        frame = frame.dropna().reset_index(drop=True)
        for column in frame.select_dtypes("category").columns:
            frame[column] = frame[column].cat.remove_unused_categories()
    target = (frame["income"] == ">50K").astype("int64").rename(TARGET_NAME)
    return _make_dataset(
        name="adult",
        frame=frame,
        feature_names=FEATURE_NAMES,
        target=target,
        sensitive=sensitive,
        sensitive_options=_SENSITIVE_OPTIONS,
        return_X_y=return_X_y,
    )
