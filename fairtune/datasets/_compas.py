"""ProPublica COMPAS (Broward County) two-year recidivism loader."""

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

# The usual ProPublica features. Left out on purpose: identifiers, names and dates; COMPAS's own
# outputs (decile_score, score_text, v_*), so that models do not just imitate the tool; and every
# column recorded after the screening (is_recid, r_*, vr_*, violent_recid, two_year_recid, event,
# start, end, in/out_custody), which would leak the label.
FEATURE_NAMES = [
    "sex",
    "age",
    "age_cat",
    "race",
    "juv_fel_count",
    "juv_misd_count",
    "juv_other_count",
    "priors_count",
    "c_charge_degree",
]
_NUMERIC = ["age", "juv_fel_count", "juv_misd_count", "juv_other_count", "priors_count"]
_CATEGORIES = {
    "sex": ["Female", "Male"],
    "age_cat": ["Less than 25", "25 - 45", "Greater than 45"],
    "c_charge_degree": ["F", "M"],
}
TARGET_NAME = "no_two_year_recid"
PRIVILEGED_RACE = "Caucasian"

_SENSITIVE_OPTIONS: dict[str, Callable[[pd.DataFrame], pd.Series]] = {
    "race": lambda f: pd.Series(
        pd.Categorical(
            np.where(f["race"] == PRIVILEGED_RACE, PRIVILEGED_RACE, "Other"),
            categories=[PRIVILEGED_RACE, "Other"],
        ),
        index=f.index,
    ),
    "race_all": lambda f: f["race"],
    "sex": lambda f: f["sex"],
    "age_cat": lambda f: f["age_cat"],
}

_WARNING = (
    "The COMPAS data set has known fairness issues: recidivism prediction for criminal justice "
    "decisions is contested, and the label records a new arrest within two years (not a new "
    "offence), which is itself shaped by policing. Read load_compas().DESCR before use."
)


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
    frame = raw.loc[keep, [*FEATURE_NAMES, "two_year_recid"]].reset_index(drop=True)
    for column in FEATURE_NAMES:
        if column in _NUMERIC:
            frame[column] = frame[column].astype("int64")
        elif column in _CATEGORIES:
            frame[column] = pd.Categorical(frame[column], categories=_CATEGORIES[column])
        else:
            frame[column] = frame[column].astype("category")
    frame["two_year_recid"] = frame["two_year_recid"].astype("int64")
    return frame


@overload
def load_compas(
    *,
    sensitive: str | Sequence[str] = ...,
    return_X_y: Literal[False] = ...,
) -> FairDataset: ...


@overload
def load_compas(
    *,
    sensitive: str | Sequence[str] = ...,
    return_X_y: Literal[True],
) -> tuple[pd.DataFrame, pd.Series, pd.Series | pd.DataFrame]: ...


def load_compas(
    *,
    sensitive: str | Sequence[str] = "race",
    return_X_y: bool = False,
) -> FairDataset | tuple[pd.DataFrame, pd.Series, pd.Series | pd.DataFrame]:
    """Load ProPublica's COMPAS two-year recidivism data (Broward County; bundled, offline).

    Rows are filtered as in ProPublica's analysis (``days_b_screening_arrest`` in [-30, 30],
    ``is_recid != -1``, ``c_charge_degree != "O"``, a ``score_text``), leaving 6,172 people.

    The target is the *favourable* outcome, so it is the complement of ProPublica's label:
    ``no_two_year_recid = 1 - two_year_recid``, i.e. 1 if the person was **not** re-arrested
    within two years and 0 if they were (``two_year_recid = 1`` becomes target 0).

    The features are the usual ProPublica ones (demographics, juvenile and prior counts, charge
    degree); COMPAS's own scores and every column that leaks the outcome are left out. ``data``
    keeps the raw ``race`` (six categories); the default sensitive feature ``race`` is binarized
    as in the Fair BO paper (Perrone et al., 2021): ``"Caucasian"`` vs ``"Other"`` (all other
    groups). ``sensitive="race_all"`` gives the six raw categories.

    Warns once per process with a :class:`~fairtune.datasets.FairtuneDatasetWarning`; ``DESCR``
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
        sensitive: Sensitive attribute(s): a name from ``"race"``, ``"race_all"``, ``"sex"``,
            ``"age_cat"``, or a sequence of them, e.g. ``("sex", "race")``. Defaults to
            ``"race"``.
        return_X_y: Return ``(data, target, sensitive_features)`` instead of the bunch.
            Defaults to False.

    Returns:
        A :class:`~fairtune.datasets.FairDataset`, or the triple ``(X, y, sensitive)``.

    Example:
        >>> import warnings
        >>> from fairtune.datasets import FairtuneDatasetWarning, load_compas
        >>> warnings.simplefilter("ignore", FairtuneDatasetWarning)
        >>> X, y, race = load_compas(return_X_y=True)
        >>> sorted(race.unique())
        ['Caucasian', 'Other']
    """
    _resolve_sensitive(sensitive, _SENSITIVE_OPTIONS)
    _warn_once("compas", _WARNING)
    frame = _cached_frame("compas", _parse_compas)
    target = (1 - frame["two_year_recid"]).astype("int64").rename(TARGET_NAME)
    return _make_dataset(
        name="compas",
        frame=frame,
        feature_names=FEATURE_NAMES,
        target=target,
        sensitive=sensitive,
        sensitive_options=_SENSITIVE_OPTIONS,
        return_X_y=return_X_y,
    )
