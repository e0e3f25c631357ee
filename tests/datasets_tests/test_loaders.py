"""Bundled loaders: the shared contract (found by inspection) and each dataset's figures.

The expected figures (row counts, positive rates, group sizes) are recomputed here from the raw
bundled files with the standard library (gzip + csv), independently of the loaders' pandas code.
"""

from __future__ import annotations

import collections
import csv
import gzip
import hashlib
import inspect
import shutil
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import fairtune
import fairtune.datasets
from fairtune.datasets import (
    ChecksumError,
    FairDataset,
    FairtuneDatasetWarning,
    describe_datasets,
    load_adult,
    load_compas,
    load_german,
)
from fairtune.datasets import _base

pytestmark = pytest.mark.filterwarnings("ignore::fairtune.datasets.FairtuneDatasetWarning")

DATA_DIR = Path(fairtune.__file__).parent / "datasets" / "data"

LOADERS: list[tuple[str, Callable[..., Any]]] = sorted(
    (name, obj)
    for name, obj in inspect.getmembers(fairtune.datasets, inspect.isfunction)
    if name.startswith("load_")
)


# --------------------------------------------------------------------------------------------
# Independent readings of the raw files (standard library only)
# --------------------------------------------------------------------------------------------


def _raw_lines(filename: str) -> list[str]:
    with gzip.open(DATA_DIR / filename, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def _adult_rows() -> list[list[str]]:
    """Complete rows of adult.data + adult.test (no "?"), fields stripped, label without '.'."""
    rows = []
    for filename in ("adult.data.gz", "adult.test.gz"):
        for line in _raw_lines(filename):
            if not line.strip() or line.startswith("|"):
                continue
            fields = [field.strip() for field in line.split(",")]
            assert len(fields) == 15, line
            if "?" in fields:
                continue
            fields[14] = fields[14].rstrip(".")
            rows.append(fields)
    return rows


def _german_rows() -> list[list[str]]:
    return [line.split() for line in _raw_lines("german.data.gz") if line.strip()]


def _compas_rows() -> list[dict[str, str]]:
    """ProPublica's filter, applied with csv and plain comparisons."""
    kept = []
    with gzip.open(DATA_DIR / "compas-scores-two-years.csv.gz", "rt", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            days = row["days_b_screening_arrest"]
            if days == "" or not -30 <= float(days) <= 30:
                continue
            if row["is_recid"] == "-1" or row["c_charge_degree"] == "O":
                continue
            if row["score_text"] in ("", "N/A"):
                continue
            kept.append(row)
    return kept


# --------------------------------------------------------------------------------------------
# Shared contract of every load_* function
# --------------------------------------------------------------------------------------------


def test_loaders_are_found() -> None:
    assert {name for name, _ in LOADERS} >= {"load_adult", "load_german", "load_compas"}


@pytest.mark.parametrize(("name", "loader"), LOADERS)
def test_loader_contract(name: str, loader: Callable[..., Any]) -> None:
    # Keyword-only arguments.
    params = inspect.signature(loader).parameters.values()
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)

    bunch = loader()
    assert isinstance(bunch, FairDataset)
    for key in ("data", "target", "sensitive_features", "frame", "feature_names", "target_name",
                "DESCR", "name"):
        assert key in bunch
        assert getattr(bunch, key) is bunch[key]
    assert f"load_{bunch.name}" == name

    data, target, sensitive = bunch.data, bunch.target, bunch.sensitive_features
    assert isinstance(data, pd.DataFrame)
    assert isinstance(target, pd.Series)
    assert isinstance(sensitive, pd.Series)  # the default is one attribute
    assert len(data) == len(target) == len(sensitive) == len(bunch.frame) > 0
    assert data.index.equals(target.index) and data.index.equals(sensitive.index)

    # Features: the label is not among them; every column is numeric or categorical.
    assert list(data.columns) == bunch.feature_names
    assert bunch.target_name == target.name
    assert bunch.target_name not in data.columns
    for column in data.columns:
        dtype = data[column].dtype
        assert isinstance(dtype, pd.CategoricalDtype) or pd.api.types.is_numeric_dtype(dtype), (
            column, dtype)
    assert not data.isna().any().any()

    # Target: integers 0/1 with both classes present.
    assert pd.api.types.is_integer_dtype(target.dtype)
    assert set(target.unique()) == {0, 1}

    # frame = data + target.
    assert list(bunch.frame.columns) == [*bunch.feature_names, bunch.target_name]
    pd.testing.assert_frame_equal(bunch.frame[bunch.feature_names], data)
    pd.testing.assert_series_equal(bunch.frame[bunch.target_name], target)

    assert isinstance(bunch.DESCR, str) and len(bunch.DESCR) > 500
    assert "License" in bunch.DESCR

    # One-hot encoding works on the returned dtypes.
    encoded = pd.get_dummies(data)
    assert len(encoded) == len(data)
    assert all(pd.api.types.is_numeric_dtype(t) or t == bool for t in encoded.dtypes)

    X, y, s = loader(return_X_y=True)
    pd.testing.assert_frame_equal(X, data)
    pd.testing.assert_series_equal(y, target)
    pd.testing.assert_series_equal(s, sensitive)


@pytest.mark.parametrize(("name", "loader"), LOADERS)
def test_loader_returns_independent_copies(name: str, loader: Callable[..., Any]) -> None:
    first = loader()
    column = next(c for c in first.feature_names if pd.api.types.is_numeric_dtype(first.data[c]))
    original = first.data[column].copy()
    first.data.loc[:, column] = -999
    first.target.iloc[:] = 0
    second = loader()
    pd.testing.assert_series_equal(second.data[column], original)
    assert set(second.target.unique()) == {0, 1}


@pytest.mark.parametrize(("name", "loader"), LOADERS)
def test_unknown_sensitive_name_lists_valid_choices(name: str, loader: Callable[..., Any]) -> None:
    default = inspect.signature(loader).parameters["sensitive"].default
    with pytest.raises(ValueError, match="`sensitive` must be one of") as info:
        loader(sensitive="no_such_column")
    message = str(info.value)
    assert "no_such_column" in message
    assert repr(default) in message
    with pytest.raises(ValueError, match="`sensitive`"):
        loader(sensitive=(default, "no_such_column"))
    with pytest.raises(ValueError, match="non-empty"):
        loader(sensitive=())
    with pytest.raises(ValueError, match="repeat"):
        loader(sensitive=(default, default))


# --------------------------------------------------------------------------------------------
# Adult
# --------------------------------------------------------------------------------------------


def test_adult_figures_match_raw_files() -> None:
    rows = _adult_rows()
    n = len(rows)
    positives = sum(row[14] == ">50K" for row in rows)
    sex = collections.Counter(row[9] for row in rows)
    assert n == 45_222  # the figure documented in adult.names and the Fair BO paper

    bunch = load_adult()
    assert len(bunch.data) == n
    assert bunch.data.shape[1] == 14
    assert bunch.target.sum() == positives
    assert bunch.target.mean() == pytest.approx(0.2478, abs=5e-4)  # adult.names: 24.78%
    assert bunch.sensitive_features.name == "sex"
    assert bunch.sensitive_features.value_counts().to_dict() == dict(sex)
    assert dict(sex) == {"Female": 14_695, "Male": 30_527}
    # Row order and alignment: the target of each row is the raw label of that row.
    expected_target = np.array([row[14] == ">50K" for row in rows], dtype=int)
    np.testing.assert_array_equal(bunch.target.to_numpy(), expected_target)
    np.testing.assert_array_equal(bunch.data["age"].to_numpy(), [int(row[0]) for row in rows])


def test_adult_keep_missing() -> None:
    all_rows = [
        line
        for filename in ("adult.data.gz", "adult.test.gz")
        for line in _raw_lines(filename)
        if line.strip() and not line.startswith("|")
    ]
    n_missing_occupation = sum(line.split(",")[6].strip() == "?" for line in all_rows)
    data, target, _ = load_adult(drop_missing=False, return_X_y=True)
    assert len(data) == len(all_rows) == 48_842
    assert data["occupation"].isna().sum() == n_missing_occupation > 0
    assert "?" not in data["occupation"].cat.categories
    assert set(target.unique()) == {0, 1}  # "<=50K." and ">50K." of adult.test were parsed


def test_adult_intersectional_sex_race() -> None:
    rows = _adult_rows()
    expected = collections.Counter((row[9], row[8]) for row in rows)
    sensitive = load_adult(sensitive=("sex", "race")).sensitive_features
    assert isinstance(sensitive, pd.DataFrame)
    assert list(sensitive.columns) == ["sex", "race"]
    counts = sensitive.value_counts().to_dict()
    assert counts == dict(expected)
    assert len(counts) == 10


def test_adult_sensitive_column_stays_in_data() -> None:
    bunch = load_adult(sensitive="race")
    pd.testing.assert_series_equal(bunch.sensitive_features, bunch.data["race"])


# --------------------------------------------------------------------------------------------
# German credit
# --------------------------------------------------------------------------------------------


def test_german_figures_match_raw_file() -> None:
    rows = _german_rows()
    assert all(len(row) == 21 for row in rows)
    good = sum(row[20] == "1" for row in rows)
    female_codes = {"A92", "A95"}
    n_female = sum(row[8] in female_codes for row in rows)

    bunch = load_german()
    assert len(bunch.data) == len(rows) == 1_000
    assert bunch.target.sum() == good == 700
    assert bunch.target.mean() == pytest.approx(0.7)
    assert bunch.sensitive_features.value_counts().to_dict() == {
        "Female": n_female,
        "Male": len(rows) - n_female,
    }
    assert n_female == 310
    # Readable names, the combined attribute kept next to the decoded sex.
    assert {"checking_account", "credit_amount", "age", "personal_status_sex", "sex"} <= set(
        bunch.feature_names
    )
    assert bunch.data["personal_status_sex"].tolist() == [row[8] for row in rows]
    np.testing.assert_array_equal(bunch.data["age"].to_numpy(), [int(row[12]) for row in rows])


def test_german_age_sensitive_options() -> None:
    ages = np.array([int(row[12]) for row in _german_rows()])
    age = load_german(sensitive="age").sensitive_features
    np.testing.assert_array_equal(age.to_numpy(), ages)
    group = load_german(sensitive="age_group").sensitive_features
    assert group.value_counts().to_dict() == {">25": int((ages > 25).sum()),
                                              "<=25": int((ages <= 25).sum())}
    both = load_german(sensitive=("sex", "age_group")).sensitive_features
    assert isinstance(both, pd.DataFrame)
    assert list(both.columns) == ["sex", "age_group"]
    assert "age_group" not in load_german().data.columns


# --------------------------------------------------------------------------------------------
# COMPAS
# --------------------------------------------------------------------------------------------


def test_compas_figures_match_raw_file() -> None:
    rows = _compas_rows()
    no_recid = sum(row["two_year_recid"] == "0" for row in rows)
    caucasian = sum(row["race"] == "Caucasian" for row in rows)

    bunch = load_compas()
    assert len(bunch.data) == len(rows) == 6_172
    # target 1 = favourable = NOT re-arrested within two years (two_year_recid == 0).
    assert bunch.target.sum() == no_recid
    assert bunch.target.mean() == pytest.approx(0.545, abs=1e-3)
    np.testing.assert_array_equal(
        bunch.target.to_numpy(), [1 - int(row["two_year_recid"]) for row in rows]
    )
    assert bunch.sensitive_features.name == "race"
    assert bunch.sensitive_features.value_counts().to_dict() == {
        "Caucasian": caucasian,
        "Other": len(rows) - caucasian,
    }
    # The raw six-category race stays in data.
    assert bunch.data["race"].value_counts().to_dict() == dict(
        collections.Counter(row["race"] for row in rows)
    )


def test_compas_has_no_leakage_or_score_columns() -> None:
    columns = set(load_compas().feature_names)
    leaky = {"two_year_recid", "is_recid", "decile_score", "score_text", "v_decile_score",
             "event", "violent_recid", "is_violent_recid", "id", "name"}
    assert not columns & leaky
    assert not any(c.startswith(("r_", "vr_")) for c in columns)
    assert {"age", "sex", "race", "priors_count", "c_charge_degree"} <= columns


def test_compas_intersectional_and_raw_race() -> None:
    rows = _compas_rows()
    both = load_compas(sensitive=("sex", "race")).sensitive_features
    assert isinstance(both, pd.DataFrame)
    expected = collections.Counter(
        (row["sex"], "Caucasian" if row["race"] == "Caucasian" else "Other") for row in rows
    )
    assert both.value_counts().to_dict() == dict(expected)
    race_all = load_compas(sensitive="race_all").sensitive_features
    assert race_all.nunique() == 6


# --------------------------------------------------------------------------------------------
# describe_datasets
# --------------------------------------------------------------------------------------------


def test_describe_datasets_matches_loaders() -> None:
    table = describe_datasets().set_index("name")
    assert set(table.index) == {"adult", "german", "compas"}
    for name, loader in (("adult", load_adult), ("german", load_german), ("compas", load_compas)):
        bunch = loader()
        row = table.loc[name]
        assert row["rows"] == len(bunch.data)
        assert row["features"] == len(bunch.feature_names)
        assert row["positive_rate"] == pytest.approx(bunch.target.mean())
        assert row["sensitive"] == bunch.sensitive_features.name
        assert row["groups"] == bunch.sensitive_features.value_counts().to_dict()


# --------------------------------------------------------------------------------------------
# Checksums of the bundled files
# --------------------------------------------------------------------------------------------


@pytest.fixture
def data_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the bundled data directory that the loaders read instead; caches cleared."""
    copy = tmp_path / "data"
    shutil.copytree(DATA_DIR, copy)
    monkeypatch.setattr(_base, "_DATA_DIR", copy)
    _base._clear_cache()
    yield copy
    _base._clear_cache()


@pytest.mark.parametrize(
    ("filename", "loader"),
    [("german.data.gz", load_german), ("adult.test.gz", load_adult),
     ("compas-scores-two-years.csv.gz", load_compas)],
)
def test_corrupted_bundled_file_names_file_and_both_checksums(
    data_copy: Path, filename: str, loader: Callable[..., Any]
) -> None:
    path = data_copy / filename
    with gzip.open(path, "rb") as f:
        raw = f.read()
    expected = hashlib.sha256(raw).hexdigest()
    corrupted = raw.replace(b"1", b"2", 1)  # one changed digit, still valid gzip and parseable
    actual = hashlib.sha256(corrupted).hexdigest()
    with gzip.open(path, "wb") as f:
        f.write(corrupted)

    with pytest.raises(ChecksumError) as info:
        loader()
    message = str(info.value)
    assert filename in message
    assert expected in message
    assert actual in message
    assert isinstance(info.value, ValueError)


def test_truncated_bundled_file_fails_with_checksum_error(data_copy: Path) -> None:
    path = data_copy / "german.data.gz"
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ChecksumError, match="german.data.gz") as info:
        load_german()
    assert "b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871" in str(info.value)


def test_intact_copy_loads(data_copy: Path) -> None:
    assert len(load_german().data) == 1_000


def test_checksum_table_matches_sources_file() -> None:
    # The checksums in data/SOURCES.md (documentation) and in the code agree.
    sources = (DATA_DIR / "SOURCES.md").read_text(encoding="utf-8")
    for filename, sha in _base._BUNDLED_SHA256.items():
        line = next(line for line in sources.splitlines() if line.startswith(f"| {filename} "))
        assert sha in line
    names_sha = hashlib.sha256((DATA_DIR / "adult.names").read_bytes()).hexdigest()
    assert names_sha in sources


# --------------------------------------------------------------------------------------------
# Known-issue warnings
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "loader"), [("german", load_german), ("compas", load_compas)])
def test_known_issue_warning_fires_once(
    name: str, loader: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_base, "_WARNED", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader()
        loader(sensitive="sex")
        loader(return_X_y=True)
    ours = [w for w in caught if issubclass(w.category, FairtuneDatasetWarning)]
    assert len(ours) == 1
    assert issubclass(ours[0].category, UserWarning)
    assert "DESCR" in str(ours[0].message)
    assert ours[0].filename == __file__  # points at the caller
    # The DESCR explains the warning.
    assert "Why this dataset warns" in loader().DESCR


def test_adult_does_not_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_base, "_WARNED", set())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_adult()


def test_warning_can_be_silenced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_base, "_WARNED", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=FairtuneDatasetWarning)
        load_compas()
        load_german()
    assert not [w for w in caught if issubclass(w.category, FairtuneDatasetWarning)]


def test_warning_under_error_filter_raises_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # With warnings as errors the loader fails consistently, not only on the first call.
    monkeypatch.setattr(_base, "_WARNED", set())
    with warnings.catch_warnings():
        warnings.simplefilter("error", FairtuneDatasetWarning)
        for _ in range(2):
            with pytest.raises(FairtuneDatasetWarning):
                load_compas()
