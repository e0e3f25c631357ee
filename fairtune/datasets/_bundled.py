"""The bundled tabular loaders, Adult, German credit and COMPAS: one spec each, one loader.

A :class:`_Spec` says how a dataset's raw files become a typed frame, which outcome is
favourable (target 1), which sensitive features it offers and whether it has known issues;
:func:`_load` does the rest for every dataset: it checks ``sensitive``, warns once, parses the
raw files once per process and assembles the :class:`~fairtune.datasets.FairDataset`.

Every loader works offline and shares two arguments: ``sensitive``, one of the dataset's
sensitive options or a sequence of them for intersectional groups (``sensitive_features`` is
then a DataFrame), and ``return_X_y``, which returns ``(data, target, sensitive_features)``
instead of the :class:`~fairtune.datasets.FairDataset` (default False). The sensitive columns
stay in ``data``; provenance, license and known issues are in ``DESCR``.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np
import pandas as pd

from fairtune.datasets._base import (
    FairDataset,
    _cached_frame,
    _load_descr,
    _read_bundled,
    _warn_once,
)

Sensitive = str | Sequence[str]
XYS = tuple[pd.DataFrame, pd.Series, pd.Series | pd.DataFrame]


@dataclass(frozen=True)
class _Spec:
    name: str
    parse: Callable[[], pd.DataFrame]  # the raw files as a typed frame
    feature_names: list[str]
    target: Callable[[pd.DataFrame], pd.Series]  # 1 for the favourable outcome
    target_name: str
    sensitive: Mapping[str, Callable[[pd.DataFrame], pd.Series]]  # name -> feature of the frame
    warning: str | None = None  # the known issues


def _typed(frame: pd.DataFrame, numeric: Sequence[str],
           categories: Mapping[str, list[Any]]) -> pd.DataFrame:
    """``frame`` with the ``numeric`` columns as ``int64``, those of ``categories`` as
    categoricals of these categories (in this order) and every other column as ``category``."""
    for column in frame.columns:
        if column in numeric:
            frame[column] = frame[column].astype("int64")
        elif column in categories:
            frame[column] = pd.Categorical(frame[column], categories=categories[column])
        else:
            frame[column] = frame[column].astype("category")
    return frame


def _two_groups(first: pd.Series, name: str, other: str) -> pd.Series:
    """``name`` where ``first`` holds, else ``other``: a categorical of these two, in order."""
    return pd.Series(pd.Categorical(np.where(first, name, other), categories=[name, other]),
                     index=first.index)


def _load(spec: _Spec, sensitive: Sensitive, return_X_y: bool, *, drop_missing: bool = False
          ) -> FairDataset | XYS:
    names = [sensitive] if isinstance(sensitive, str) else list(sensitive)
    if not names or any(not isinstance(n, str) or n not in spec.sensitive for n in names) or len(
            set(names)) != len(names):
        raise ValueError(
            f"`sensitive` must be one of {list(spec.sensitive)} or a non-empty sequence of them "
            f"without repeats, but got sensitive={sensitive!r}.")
    if spec.warning is not None:
        _warn_once(spec.name, spec.warning)
    frame = _cached_frame(spec.name, spec.parse)
    if drop_missing:
        frame = frame.dropna().reset_index(drop=True)
        for column in frame.select_dtypes("category").columns:
            frame[column] = frame[column].cat.remove_unused_categories()
    columns = [spec.sensitive[name](frame).rename(name) for name in names]
    groups = (columns[0] if isinstance(sensitive, str) else pd.concat(columns, axis=1)
              ).reset_index(drop=True)
    target = spec.target(frame).reset_index(drop=True).astype("int64").rename(spec.target_name)
    data = frame.reset_index(drop=True).loc[:, spec.feature_names]
    if return_X_y:
        return data, target, groups
    return FairDataset(
        data=data, target=target, sensitive_features=groups,
        frame=pd.concat([data, target], axis=1), feature_names=list(spec.feature_names),
        target_name=spec.target_name, DESCR=_load_descr(spec.name), name=spec.name,
    )


# -- Adult --------------------------------------------------------------------------------------

_ADULT_COLUMNS = [  # adult.names's order, hyphens turned into underscores
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
    "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week",
    "native_country", "income",
]


def _parse_adult() -> pd.DataFrame:
    """adult.data + adult.test, all rows, "?" as missing, label without the test file's dot."""
    frame = pd.concat([
        pd.read_csv(io.BytesIO(_read_bundled(filename)), header=None, names=_ADULT_COLUMNS,
                    skiprows=skiprows, skipinitialspace=True, na_values=["?"],
                    keep_default_na=False, skip_blank_lines=True)
        # adult.test starts with the comment line "|1x3 Cross validator".
        for filename, skiprows in (("adult.data.gz", 0), ("adult.test.gz", 1))
    ], ignore_index=True)
    frame["income"] = frame["income"].str.rstrip(".")
    numeric = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
    return _typed(frame, numeric, {})


_ADULT = _Spec(
    name="adult", parse=_parse_adult, feature_names=_ADULT_COLUMNS[:-1],
    target=lambda f: f["income"] == ">50K", target_name="income_gt_50k",
    sensitive={"sex": lambda f: f["sex"], "race": lambda f: f["race"], "age": lambda f: f["age"]},
)


@overload
def load_adult(*, sensitive: Sensitive = ..., drop_missing: bool = ...,
               return_X_y: Literal[False] = ...) -> FairDataset: ...


@overload
def load_adult(*, sensitive: Sensitive = ..., drop_missing: bool = ...,
               return_X_y: Literal[True]) -> XYS: ...


def load_adult(*, sensitive: Sensitive = "sex", drop_missing: bool = True,
               return_X_y: bool = False) -> FairDataset | XYS:
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

    Args:
        sensitive: ``"sex"``, ``"race"``, ``"age"``, or a sequence of them, e.g.
            ``("sex", "race")``. Defaults to ``"sex"``.
        drop_missing: Drop the rows with a missing value (``"?"`` in the raw files, in
            ``workclass``, ``occupation`` and ``native_country``). If False, they are kept with
            NaN in those categorical columns. Defaults to True.
        return_X_y: Return ``(data, target, sensitive_features)``. Defaults to False.

    Example:
        >>> from fairtune.datasets import load_adult
        >>> X, y, sex = load_adult(return_X_y=True)
        >>> X.shape
        (45222, 14)
    """
    return _load(_ADULT, sensitive, return_X_y, drop_missing=drop_missing)


# -- German credit ------------------------------------------------------------------------------

# german.data's 20 attributes in file order (their UCI codes are in descr/german.rst), then the
# class (1 = good, 2 = bad).
_GERMAN_COLUMNS = [
    "checking_account", "duration_months", "credit_history", "purpose", "credit_amount",
    "savings", "employment_since", "installment_rate", "personal_status_sex", "other_debtors",
    "residence_since", "property", "age", "other_installment_plans", "housing",
    "existing_credits", "job", "num_dependents", "telephone", "foreign_worker", "credit",
]
# Attribute 9, "personal status and sex", per the UCI code table (A95 never occurs in the file).
_SEX_OF_PERSONAL_STATUS = {"A91": "Male", "A92": "Female", "A93": "Male", "A94": "Male",
                           "A95": "Female"}
AGE_GROUP_THRESHOLD = 25


def _parse_german() -> pd.DataFrame:
    frame = pd.read_csv(io.BytesIO(_read_bundled("german.data.gz")), sep=" ", header=None,
                        names=_GERMAN_COLUMNS, keep_default_na=False)
    frame["sex"] = frame["personal_status_sex"].map(_SEX_OF_PERSONAL_STATUS)
    numeric = ["duration_months", "credit_amount", "installment_rate", "residence_since", "age",
               "existing_credits", "num_dependents", "credit"]
    # UCI codes "A<attribute><level>": order categories numerically (A40 < A49 < A410).
    categories = {column: sorted(frame[column].unique(), key=lambda code: int(code[1:]))
                  for column in _GERMAN_COLUMNS if column not in numeric}
    return _typed(frame, numeric, {**categories, "sex": ["Female", "Male"]})


_GERMAN = _Spec(
    name="german", parse=_parse_german, feature_names=[*_GERMAN_COLUMNS[:-1], "sex"],
    target=lambda f: f["credit"] == 1, target_name="good_credit",
    sensitive={
        "sex": lambda f: f["sex"],
        "age": lambda f: f["age"],
        "age_group": lambda f: _two_groups(f["age"] <= AGE_GROUP_THRESHOLD, "<=25", ">25"),
        "foreign_worker": lambda f: f["foreign_worker"],
    },
    warning=(
        "The German credit data set has known issues for fairness studies: `sex` is decoded "
        "from the combined attribute 'personal status and sex', whose code table was reported "
        "to be wrong (Groemping, 2019), and age-based groups depend on an arbitrary threshold. "
        "Read load_german().DESCR before drawing conclusions."
    ),
)


@overload
def load_german(*, sensitive: Sensitive = ..., return_X_y: Literal[False] = ...
                ) -> FairDataset: ...


@overload
def load_german(*, sensitive: Sensitive = ..., return_X_y: Literal[True]) -> XYS: ...


def load_german(*, sensitive: Sensitive = "sex", return_X_y: bool = False
                ) -> FairDataset | XYS:
    """Load the Statlog German credit dataset (bundled, offline).

    The task: classify 1,000 loan applicants as good or bad credit risks. The 20 attributes get
    readable column names; categorical ones keep their UCI codes (``"A11"``, ...; the code table
    is in ``DESCR``). A ``sex`` column (``"Male"``/``"Female"``) is decoded from attribute 9,
    ``personal_status_sex`` (A91, A93, A94 male; A92, A95 female), which stays in ``data`` for
    its marital status; ``sex`` is the sensitive feature of the Fair BO paper (Perrone et al.,
    2021). Warns once per process (:class:`~fairtune.datasets.FairtuneDatasetWarning`): the
    decoded ``sex`` is not reliable.

    ==================  ==============================================================
    rows                1,000
    features            21: 7 numeric (``int64``), 14 categorical (``category``)
    target              ``good_credit``: 1 if good credit (favourable), 0 if bad
    positive rate       0.7
    sensitive options   ``"sex"`` (default), ``"age"`` (years), ``"age_group"`` (``"<=25"`` /
                        ``">25"``), ``"foreign_worker"``
    ==================  ==============================================================

    Args:
        sensitive: ``"sex"``, ``"age"``, ``"age_group"``, ``"foreign_worker"``, or a sequence
            of them. ``age_group`` is derived from ``age`` and is not a column of ``data``.
            Defaults to ``"sex"``.
        return_X_y: Return ``(data, target, sensitive_features)``. Defaults to False.

    Example:
        >>> import warnings
        >>> from fairtune.datasets import FairtuneDatasetWarning, load_german
        >>> warnings.simplefilter("ignore", FairtuneDatasetWarning)
        >>> float(load_german().target.mean())
        0.7
    """
    return _load(_GERMAN, sensitive, return_X_y)


# -- COMPAS -------------------------------------------------------------------------------------

# The usual ProPublica features. Left out on purpose: identifiers, names and dates; COMPAS's own
# outputs (decile_score, score_text, v_*), so that models do not just imitate the tool; and every
# column recorded after the screening (is_recid, r_*, vr_*, violent_recid, two_year_recid, event,
# start, end, in/out_custody), which would leak the label.
_COMPAS_FEATURES = ["sex", "age", "age_cat", "race", "juv_fel_count", "juv_misd_count",
                    "juv_other_count", "priors_count", "c_charge_degree"]
PRIVILEGED_RACE = "Caucasian"


def _parse_compas() -> pd.DataFrame:
    """The raw CSV with ProPublica's filter applied (6,172 of 7,214 rows)."""
    raw = pd.read_csv(io.BytesIO(_read_bundled("compas-scores-two-years.csv.gz")))
    # ProPublica's filter (compas-analysis, Compas Analysis.ipynb): a charge within 30 days of
    # the screening, a known recidivism outcome, no ordinary traffic offence ("O"), and a score.
    # Rows without days_b_screening_arrest compare False and are dropped, as in their R code.
    keep = (
        raw["days_b_screening_arrest"].between(-30, 30)
        & (raw["is_recid"] != -1)
        & (raw["c_charge_degree"] != "O")
        & raw["score_text"].notna()
        & (raw["score_text"] != "N/A")
    )
    frame = raw.loc[keep, [*_COMPAS_FEATURES, "two_year_recid"]].reset_index(drop=True)
    numeric = ["age", "juv_fel_count", "juv_misd_count", "juv_other_count", "priors_count",
               "two_year_recid"]
    return _typed(frame, numeric, {
        "sex": ["Female", "Male"],
        "age_cat": ["Less than 25", "25 - 45", "Greater than 45"],
        "c_charge_degree": ["F", "M"],
    })


_COMPAS = _Spec(
    name="compas", parse=_parse_compas, feature_names=_COMPAS_FEATURES,
    target=lambda f: 1 - f["two_year_recid"], target_name="no_two_year_recid",
    sensitive={
        "race": lambda f: _two_groups(f["race"] == PRIVILEGED_RACE, PRIVILEGED_RACE, "Other"),
        "race_all": lambda f: f["race"],
        "sex": lambda f: f["sex"],
        "age_cat": lambda f: f["age_cat"],
    },
    warning=(
        "The COMPAS data set has known fairness issues: recidivism prediction for criminal "
        "justice decisions is contested, and the label records a new arrest within two years "
        "(not a new offence), which is itself shaped by policing. Read load_compas().DESCR "
        "before use."
    ),
)


@overload
def load_compas(*, sensitive: Sensitive = ..., return_X_y: Literal[False] = ...
                ) -> FairDataset: ...


@overload
def load_compas(*, sensitive: Sensitive = ..., return_X_y: Literal[True]) -> XYS: ...


def load_compas(*, sensitive: Sensitive = "race", return_X_y: bool = False
                ) -> FairDataset | XYS:
    """Load ProPublica's COMPAS two-year recidivism data (Broward County; bundled, offline).

    Rows are filtered as in ProPublica's analysis (``days_b_screening_arrest`` in [-30, 30],
    ``is_recid != -1``, ``c_charge_degree != "O"``, a ``score_text``), leaving 6,172 people.
    The target is the *favourable* outcome, the complement of ProPublica's label:
    ``no_two_year_recid = 1 - two_year_recid`` (1 if **not** re-arrested within two years).

    The features are the usual ProPublica ones (demographics, juvenile and prior counts, charge
    degree), without COMPAS's own scores or any column that leaks the outcome. ``data`` keeps
    the raw ``race`` (six categories); the sensitive ``race`` is binarized as in the Fair BO
    paper (Perrone et al., 2021), ``"Caucasian"`` vs ``"Other"``; ``"race_all"`` keeps all six.
    Warns once per process (:class:`~fairtune.datasets.FairtuneDatasetWarning`): ``DESCR``
    explains why this data set must be used with care.

    ==================  ==============================================================
    rows                6,172
    features            9: 5 numeric (``int64``), 4 categorical (``category``)
    target              ``no_two_year_recid``: 1 if not re-arrested within two years
    positive rate       about 0.545
    sensitive options   ``"race"`` (default, Caucasian/Other), ``"race_all"``, ``"sex"``,
                        ``"age_cat"``
    ==================  ==============================================================

    Args:
        sensitive: ``"race"``, ``"race_all"``, ``"sex"``, ``"age_cat"``, or a sequence of them.
            Defaults to ``"race"``.
        return_X_y: Return ``(data, target, sensitive_features)``. Defaults to False.

    Example:
        >>> import warnings
        >>> from fairtune.datasets import FairtuneDatasetWarning, load_compas
        >>> warnings.simplefilter("ignore", FairtuneDatasetWarning)
        >>> X, y, race = load_compas(return_X_y=True)
        >>> sorted(race.unique())
        ['Caucasian', 'Other']
    """
    return _load(_COMPAS, sensitive, return_X_y)


__all__ = ["load_adult", "load_compas", "load_german"]
