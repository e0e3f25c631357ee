"""One-table summary of the bundled datasets (``fairtune datasets``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import cast

import pandas as pd

from fairtune.datasets._base import FairDataset, FairtuneDatasetWarning
from fairtune.datasets._bundled import load_adult, load_compas, load_german

# name -> (loader with its defaults, what target 1 means)
_BUNDLED: dict[str, tuple[Callable[[], FairDataset], str]] = {
    "adult": (load_adult, "income >50K"),
    "german": (load_german, "good credit"),
    "compas": (load_compas, "no 2-year recidivism"),
}

SUMMARY_COLUMNS = ["name", "loader", "rows", "features", "positive_rate", "favourable",
                   "sensitive", "groups"]


def describe_datasets() -> pd.DataFrame:
    """Summarize every bundled dataset, loaded with its default arguments.

    The known-issue warnings of German credit and COMPAS are not emitted here (this is an
    overview); they fire when the loaders are called directly.

    Returns:
        One row per dataset with the columns ``name``, ``loader``, ``rows``, ``features``
        (number of columns of ``data``), ``positive_rate`` (mean of the 0/1 target),
        ``favourable`` (what target 1 means), ``sensitive`` (default sensitive attribute) and
        ``groups`` (a dict group -> number of rows, groups in category order).

    Example:
        >>> from fairtune.datasets import describe_datasets
        >>> int(describe_datasets().set_index("name").loc["german", "rows"])
        1000
    """
    rows = []
    for name, (loader, favourable) in _BUNDLED.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FairtuneDatasetWarning)
            dataset = loader()
        sensitive = dataset.sensitive_features
        assert isinstance(sensitive, pd.Series)  # the defaults name one attribute
        counts = sensitive.value_counts(sort=False)
        rows.append([name, loader.__name__, len(dataset.data), len(dataset.feature_names),
                     float(dataset.target.mean()), favourable, str(sensitive.name),
                     {str(k): int(v) for k, v in counts.items()}])
    table = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    return table.astype({"rows": "int64", "features": "int64"})


def describe_datasets_text() -> str:
    """:func:`describe_datasets` as the table ``fairtune datasets`` prints, with its note."""
    from fairtune._text import format_table

    rows = [
        [
            str(r.name), f"{r.loader}()", f"{r.rows:,}", str(r.features),
            f"{r.positive_rate:.3f}", str(r.favourable), str(r.sensitive),
            "; ".join(
                f"{group}: {size:,}" for group, size in cast("dict[str, int]", r.groups).items()
            ),
        ]
        for r in describe_datasets().itertuples(index=False)
    ]
    header = [
        "name", "loader", "rows", "features", "pos. rate", "target = 1", "sensitive", "groups"
    ]
    return format_table(header, rows, right_aligned={2, 3, 4}) + (
        "\nTarget 1 is the favourable outcome. German credit and COMPAS have known fairness\n"
        "issues and warn when loaded: read load_german().DESCR and load_compas().DESCR.\n"
    )
