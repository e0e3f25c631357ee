"""Shared fixtures and helpers: a throwaway PostgreSQL server for the distributed-mode tests,
tiny biased data for the tuning tests, and samplers with a small acquisition optimizer.

The server is :func:`fairtune.testing.temporary_postgres` (Debian's ``postgresql`` package;
``.ci/run`` installs it). A test that needs a system program (the PostgreSQL server, Chromium)
asks :func:`requires_program` for it, which skips the test, with the reason and the command that
installs the program, where it is missing; under ``FAIRTUNE_REQUIRE_SYSTEM_PROGRAMS=1`` (set by
``.ci/run``, which installs them) the test fails with that reason instead, so that CI never
skips them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import numpy as np
import pandas as pd
import pytest

from fairtune.testing import PostgresServer, postgres_binaries, temporary_postgres


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Tests marked `processes` spend much of their time waiting on the processes they start.
    # Run first, they wait while the other pytest-xdist worker keeps the cores busy, instead of
    # leaving a core idle at the end of the run.
    items.sort(key=lambda item: item.get_closest_marker("processes") is None)


REQUIRE_SYSTEM_PROGRAMS = "FAIRTUNE_REQUIRE_SYSTEM_PROGRAMS"
"""The environment variable under which a missing system program fails the test that needs it
instead of skipping it (``.ci/run`` sets it to 1)."""


def _unavailable(reason: str) -> NoReturn:
    """Skip the test with ``reason``, or fail it under ``FAIRTUNE_REQUIRE_SYSTEM_PROGRAMS``."""
    if os.environ.get(REQUIRE_SYSTEM_PROGRAMS, "") not in ("", "0"):
        pytest.fail(f"{reason} ({REQUIRE_SYSTEM_PROGRAMS} is set: a missing program is an "
                    "error, not a skip)", pytrace=False)
    pytest.skip(reason)


def requires_program(program: str, install: str, *, name: str | None = None,
                     find: Callable[[], str | Path | None] | None = None) -> Path:
    """Where the system program ``program`` is, for a test (or fixture) that needs it.

    ``program`` is looked up on ``PATH`` (:func:`shutil.which`; an absolute path is checked as
    it is), or, with ``find``, by ``find()``, and then only names what is looked for. Where it
    is missing, the test is skipped with the reason ``"needs <name> (<program>): <install>"``;
    where ``FAIRTUNE_REQUIRE_SYSTEM_PROGRAMS`` is set (to anything but 0), it fails with that
    reason instead.
    """
    found = find() if find is not None else shutil.which(program)
    if found is None:
        _unavailable(f"needs {name} ({program}): {install}" if name
                     else f"needs {program}: {install}")
    return Path(found)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    requires_program("initdb and pg_ctl, on PATH or in /usr/lib/postgresql/<version>/bin",
                     "apt-get install postgresql", name="a PostgreSQL server",
                     find=postgres_binaries)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        # A Python package, not a program, but CI installs it too (the test extra).
        _unavailable('needs the PostgreSQL driver psycopg: pip install "fairtune[postgres]"')
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
