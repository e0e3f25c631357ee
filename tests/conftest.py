"""Shared fixtures: a throwaway PostgreSQL server for the distributed-mode tests.

The server comes from the distribution's packages (Debian's ``postgresql``; ``.ci/run`` installs
it): ``initdb`` makes a cluster in a temporary directory and ``pg_ctl`` starts it on a free
loopback port, with its socket in that directory; it is stopped and removed after the session.
``initdb`` refuses to run as root, so as root the cluster belongs to the ``postgres`` user that
the package creates. Tests that need it are skipped, with the reason, where the server binaries
or the ``psycopg`` driver (``pip install "fairtune[postgres]"``) are missing.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def _server_binaries() -> Path | None:
    """The folder of initdb and pg_ctl: on PATH, or Debian's /usr/lib/postgresql/<v>/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    for folder in reversed(folders):
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresServer:
    port: int
    user: str
    _counter: itertools.count

    def new_database(self) -> str:
        """A new empty database; returns its SQLAlchemy URL (psycopg 3 driver)."""
        import psycopg

        name = f"fairtune_test_{next(self._counter)}"
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=self.user, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{name}"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    binaries = _server_binaries()
    if binaries is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found: install the "
                    "distribution's postgresql package (.ci/run does) to run this test.")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip('The PostgreSQL driver psycopg is missing: pip install "fairtune[postgres]".')
    prefix: list[str] = []
    owner = None
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")  # created by the package; initdb refuses root
        prefix = ["runuser", "-u", "postgres", "--"]
    home = Path(tempfile.mkdtemp(prefix="fairtune-pg-"))
    if owner is not None:
        os.chown(home, owner.pw_uid, owner.pw_gid)
    data, log = home / "data", home / "server.log"
    user = "fairtune"
    subprocess.run(
        [*prefix, str(binaries / "initdb"), "-D", str(data), "-U", user, "-A", "trust",
         "--no-sync", "-E", "UTF8", "--no-locale"],
        check=True, capture_output=True, text=True,
    )
    port = _free_port()
    options = (f"-p {port} -c listen_addresses=127.0.0.1 -k {home} -c fsync=off "
               "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
    started = subprocess.run(
        [*prefix, str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options,
         "-w", "-t", "60", "start"],
        capture_output=True, text=True,
    )
    if started.returncode != 0:
        text = log.read_text() if log.exists() else ""
        shutil.rmtree(home, ignore_errors=True)
        raise RuntimeError(f"PostgreSQL did not start: {started.stderr}\n{text}")
    try:
        yield PostgresServer(port=port, user=user, _counter=itertools.count())
    finally:
        subprocess.run([*prefix, str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate",
                        "-w", "stop"], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The SQLAlchemy URL of a new, empty database on the session's PostgreSQL server."""
    return postgres_server.new_database()
