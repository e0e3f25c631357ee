"""Shared fixtures and helpers: a throwaway PostgreSQL server for the distributed-mode tests,
tiny biased data for the tuning tests, and samplers with a small acquisition optimizer.

The server is :func:`fairtune.testing.temporary_postgres` (Debian's ``postgresql`` package;
``.ci/run`` installs it). Tests that need it are skipped, with the reason, where the server
binaries or the ``psycopg`` driver (``pip install "fairtune[postgres]"``) are missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import pytest

from fairtune.testing import PostgresServer, postgres_binaries, temporary_postgres


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Tests marked `processes` spend much of their time waiting on the processes they start.
    # Run first, they wait while the other pytest-xdist worker keeps the cores busy, instead of
    # leaving a core idle at the end of the run.
    items.sort(key=lambda item: item.get_closest_marker("processes") is None)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    if postgres_binaries() is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found: install the "
                    "distribution's postgresql package (.ci/run does) to run this test.")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip('The PostgreSQL driver psycopg is missing: pip install "fairtune[postgres]".')
    with temporary_postgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The SQLAlchemy URL of a new, empty database on the session's PostgreSQL server."""
    return postgres_server.new_database()


def biased_data(n: int = 400, seed: int = 0, *, separation: float = 2.0, noise: float = 0.5,
                threshold: float = 0.0, group_column: bool = False
                ) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """``(X, y, group)``: labels that depend on a feature shifted by group, so that an
    unmitigated model selects the groups at very different rates, while a strongly regularized
    one predicts one class for everyone (a gap of 0). ``separation`` is the distance between
    the groups' means of the shifted feature, in standard deviations; a row is positive when
    ``x1 + x2 / 2`` plus normal ``noise`` exceeds ``threshold`` (above 0: a minority of positives).
    With ``group_column``, X holds the group as a column too (for models and mitigations that
    read it)."""
    rng = np.random.default_rng(seed)
    group = pd.Series(rng.choice(["a", "b"], size=n), name="group")
    X = pd.DataFrame({"x1": rng.normal(size=n) + np.where(group == "a", 0.5, -0.5) * separation,
                      "x2": rng.normal(size=n)})
    if group_column:
        X["group"] = group
    y = pd.Series((X["x1"] + 0.5 * X["x2"] + rng.normal(scale=noise, size=n) > threshold
                   ).astype(int), name="y")
    return X, y, group


Sampler = TypeVar("Sampler")


def small(sampler: Sampler, *, preliminary: int = 64, local_search: int = 1, **attributes: Any
          ) -> Sampler:
    """``sampler`` with a small acquisition optimizer (``preliminary`` random candidates,
    ``local_search`` local searches, and any other private ``attributes`` given, e.g.
    ``n_ts_candidates=64``), so that the contract suites and short studies stay fast."""
    sampler._n_preliminary_samples = preliminary  # type: ignore[attr-defined]
    sampler._n_local_search = local_search  # type: ignore[attr-defined]
    for name, value in attributes.items():
        setattr(sampler, f"_{name}", value)
    return sampler


def free_port() -> int:
    """A free TCP port on 127.0.0.1, for a server a test starts."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
