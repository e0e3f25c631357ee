"""Shared fixtures: a throwaway PostgreSQL server for the distributed-mode tests.

The server is :func:`fairtune.testing.temporary_postgres` (Debian's ``postgresql`` package;
``.ci/run`` installs it). Tests that need it are skipped, with the reason, where the server
binaries or the ``psycopg`` driver (``pip install "fairtune[postgres]"``) are missing.
"""

from __future__ import annotations

from collections.abc import Iterator

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
