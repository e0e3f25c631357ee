"""Datasets: bundled Adult, German credit and COMPAS as :class:`FairDataset` bunches, and FEMNIST
as a :class:`FederatedDataset` (writers, their images, a partition into tenants).

Every loader takes keyword-only arguments, reads raw files shipped in
``fairtune/datasets/data/`` (SHA-256 verified once per process, see ``data/SOURCES.md``) and
returns a :class:`FairDataset` whose ``target`` is 0/1 with 1 the favourable outcome, or
``(X, y, sensitive)`` with ``return_X_y=True``.

German credit and COMPAS emit a :class:`FairtuneDatasetWarning` once per process because they have
known fairness issues (explained in their ``DESCR``). Silence it with
``warnings.filterwarnings("ignore", category=FairtuneDatasetWarning)``.

:func:`fetch_femnist` reads FEMNIST from the data cache (TensorFlow Federated's HDF5 files, LEAF's
JSON shards or the parquet files of ``flwrlabs/femnist``) and downloads it when missing;
:func:`federated_digits` is an embedded stand-in (scikit-learn's digits dealt to pseudo-writers).

:func:`read_table` reads your own CSV or parquet file as a :class:`FairDataset`.
"""

from __future__ import annotations

from fairtune.datasets._base import (
    ChecksumError,
    FairDataset,
    FairtuneDatasetWarning,
    get_data_home,
)
from fairtune.datasets._bundled import load_adult, load_compas, load_german
from fairtune.datasets._femnist import (
    FEMNIST_LABEL_NAMES,
    FederatedDataset,
    TenantData,
    federated_digits,
    fetch_femnist,
)
from fairtune.datasets._summary import describe_datasets, describe_datasets_text
from fairtune.datasets._table import TABLE_FORMATS, read_table

__all__ = [
    "load_adult", "load_german", "load_compas", "FairDataset", "describe_datasets",
    "describe_datasets_text", "FairtuneDatasetWarning",
    "read_table", "TABLE_FORMATS",
    "fetch_femnist", "federated_digits", "FederatedDataset", "TenantData", "FEMNIST_LABEL_NAMES",
    "get_data_home", "ChecksumError",
]
