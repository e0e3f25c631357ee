"""Statlog German credit loader."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Literal, overload

import numpy as np
import pandas as pd

from fairtune.datasets._base import (
    FairDataset,
    _cached_frame,
    _make_dataset,
    _read_bundled,
    _resolve_sensitive,
    _warn_once,
)

# The 20 attributes of german.data in file order (UCI documentation), then the class.
_COLUMNS = [
    "checking_account",  # 1: status of existing checking account (A11..A14)
    "duration_months",  # 2
    "credit_history",  # 3 (A30..A34)
    "purpose",  # 4 (A40..A410)
    "credit_amount",  # 5
    "savings",  # 6: savings account/bonds (A61..A65)
    "employment_since",  # 7: present employment since (A71..A75)
    "installment_rate",  # 8: in percentage of disposable income
    "personal_status_sex",  # 9 (A91..A95)
    "other_debtors",  # 10: other debtors / guarantors (A101..A103)
    "residence_since",  # 11: present residence since
    "property",  # 12 (A121..A124)
    "age",  # 13: in years
    "other_installment_plans",  # 14 (A141..A143)
    "housing",  # 15 (A151..A153)
    "existing_credits",  # 16: number of existing credits at this bank
    "job",  # 17 (A171..A174)
    "num_dependents",  # 18: number of people being liable to provide maintenance for
    "telephone",  # 19 (A191, A192)
    "foreign_worker",  # 20 (A201, A202)
    "credit",  # class: 1 = good, 2 = bad
]
_NUMERIC = [
    "duration_months",
    "credit_amount",
    "installment_rate",
    "residence_since",
    "age",
    "existing_credits",
    "num_dependents",
]
# Attribute 9 "personal status and sex" per the UCI code table.
_SEX_OF_PERSONAL_STATUS = {
    "A91": "Male",  # male: divorced/separated
    "A92": "Female",  # female: divorced/separated/married
    "A93": "Male",  # male: single
    "A94": "Male",  # male: married/widowed
    "A95": "Female",  # female: single (never occurs in the file)
}
FEATURE_NAMES = [*_COLUMNS[:-1], "sex"]
TARGET_NAME = "good_credit"
AGE_GROUP_THRESHOLD = 25

_SENSITIVE_OPTIONS: dict[str, Callable[[pd.DataFrame], pd.Series]] = {
    "sex": lambda f: f["sex"],
    "age": lambda f: f["age"],
    "age_group": lambda f: pd.Series(
        pd.Categorical(
            np.where(f["age"] > AGE_GROUP_THRESHOLD, ">25", "<=25"), categories=["<=25", ">25"]
        ),
        index=f.index,
    ),
    "foreign_worker": lambda f: f["foreign_worker"],
}

_WARNING = (
    "The German credit data set has known issues for fairness studies: `sex` is decoded from "
    "the combined attribute 'personal status and sex', whose code table was reported to be "
    "wrong (Groemping, 2019), and age-based groups depend on an arbitrary threshold. Read "
    "load_german().DESCR before drawing conclusions."
)


def _parse_german() -> pd.DataFrame:
    frame = pd.read_csv(
        io.BytesIO(_read_bundled("german.data.gz")),
        sep=" ",
        header=None,
        names=_COLUMNS,
        keep_default_na=False,
    )
    frame["sex"] = frame["personal_status_sex"].map(_SEX_OF_PERSONAL_STATUS)
    for column in [*_COLUMNS, "sex"]:
        if column in _NUMERIC or column == "credit":
            frame[column] = frame[column].astype("int64")
        elif column == "sex":
            frame[column] = pd.Categorical(frame[column], categories=["Female", "Male"])
        else:
            # UCI codes "A<attribute><level>": order categories numerically (A40 < A49 < A410).
            codes = sorted(frame[column].unique(), key=lambda code: int(code[1:]))
            frame[column] = pd.Categorical(frame[column], categories=codes)
    return frame


@overload
def load_german(
    *,
    sensitive: str | Sequence[str] = ...,
    return_X_y: Literal[False] = ...,
) -> FairDataset: ...


@overload
def load_german(
    *,
    sensitive: str | Sequence[str] = ...,
    return_X_y: Literal[True],
) -> tuple[pd.DataFrame, pd.Series, pd.Series | pd.DataFrame]: ...


def load_german(
    *,
    sensitive: str | Sequence[str] = "sex",
    return_X_y: bool = False,
) -> FairDataset | tuple[pd.DataFrame, pd.Series, pd.Series | pd.DataFrame]:
    """Load the Statlog German credit dataset (bundled, offline).

    The task: classify 1,000 loan applicants as good or bad credit risks. The 20 attributes get
    readable column names; categorical attributes keep their UCI codes (``"A11"``, ...) as
    categories (the code table is in ``DESCR``). A ``sex`` column (``"Male"``/``"Female"``) is
    decoded from attribute 9, ``personal_status_sex`` (A91, A93, A94 male; A92, A95 female),
    which also stays in ``data`` since it carries marital status. The sensitive feature is
    ``sex``, as in the Fair BO paper (Perrone et al., 2021).

    Warns once per process with a :class:`~fairtune.datasets.FairtuneDatasetWarning`: the
    decoded ``sex`` is not reliable, see ``DESCR``.

    ==================  ==============================================================
    rows                1,000
    features            21: 7 numeric (``int64``), 14 categorical (``category``)
    target              ``good_credit``: 1 if good credit (favourable), 0 if bad
    positive rate       0.7
    sensitive options   ``"sex"`` (default), ``"age"`` (years), ``"age_group"`` (``"<=25"`` /
                        ``">25"``), ``"foreign_worker"``
    ==================  ==============================================================

    Args:
        sensitive: Sensitive attribute(s): a name from ``"sex"``, ``"age"``, ``"age_group"``,
            ``"foreign_worker"``, or a sequence of them, e.g. ``("sex", "age_group")``.
            ``age_group`` is derived from ``age`` and is not a column of ``data``.
            Defaults to ``"sex"``.
        return_X_y: Return ``(data, target, sensitive_features)`` instead of the bunch.
            Defaults to False.

    Returns:
        A :class:`~fairtune.datasets.FairDataset`, or the triple ``(X, y, sensitive)``.

    Example:
        >>> import warnings
        >>> from fairtune.datasets import FairtuneDatasetWarning, load_german
        >>> warnings.simplefilter("ignore", FairtuneDatasetWarning)
        >>> float(load_german().target.mean())
        0.7
    """
    _resolve_sensitive(sensitive, _SENSITIVE_OPTIONS)
    _warn_once("german", _WARNING)
    frame = _cached_frame("german", _parse_german)
    target = (frame["credit"] == 1).astype("int64").rename(TARGET_NAME)
    return _make_dataset(
        name="german",
        frame=frame,
        feature_names=FEATURE_NAMES,
        target=target,
        sensitive=sensitive,
        sensitive_options=_SENSITIVE_OPTIONS,
        return_X_y=return_X_y,
    )
