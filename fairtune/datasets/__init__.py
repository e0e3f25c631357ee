"""Fairness datasets: bundled Adult, German credit and COMPAS, as :class:`FairDataset` bunches.

Every loader takes keyword-only arguments, reads raw files shipped in
``fairtune/datasets/data/`` (SHA-256 verified once per process, see ``data/SOURCES.md``) and
returns a :class:`FairDataset` whose ``target`` is 0/1 with 1 the favourable outcome, or
``(X, y, sensitive)`` with ``return_X_y=True``.

German credit and COMPAS emit a :class:`FairtuneDatasetWarning` once per process because they have
known fairness issues (explained in their ``DESCR``). Silence it with
``warnings.filterwarnings("ignore", category=FairtuneDatasetWarning)``.
"""

from __future__ import annotations

from fairtune.datasets._adult import load_adult
from fairtune.datasets._base import (
    ChecksumError,
    FairDataset,
    FairtuneDatasetWarning,
    get_data_home,
)
from fairtune.datasets._compas import load_compas
from fairtune.datasets._german import load_german
from fairtune.datasets._summary import describe_datasets

__all__ = [
    "ChecksumError",
    "FairDataset",
    "FairtuneDatasetWarning",
    "describe_datasets",
    "get_data_home",
    "load_adult",
    "load_compas",
    "load_german",
]
