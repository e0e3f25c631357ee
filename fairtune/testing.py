"""Test helpers for users and for fairtune's own tests: a throwaway PostgreSQL server.

Optuna's distributed mode runs many workers on one database server. :func:`temporary_postgres`
starts a real, disposable PostgreSQL server from the distribution's packages (Debian's
``postgresql``): ``initdb`` makes a cluster in a temporary directory and ``pg_ctl`` starts it on a
free loopback port, with its socket in that directory; it is stopped and deleted on exit.
``initdb`` refuses to run as root, so as root the cluster belongs to the ``postgres`` user that
the package creates. Needs the psycopg driver (``pip install "fairtune[postgres]"``).

Example:
    .. code-block:: python

        with temporary_postgres() as server:
            url = server.new_database()  # postgresql+psycopg://fairtune@127.0.0.1:<port>/...
            study = optuna.create_study(storage=url)
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PostgresServer", "postgres_binaries", "temporary_postgres"]


def postgres_binaries() -> Path | None:
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
    """A running throwaway server (see :func:`temporary_postgres`)."""

    port: int
    user: str
    _counter: itertools.count[int] = field(default_factory=itertools.count)

    def new_database(self) -> str:
        """A new empty database; returns its SQLAlchemy URL (psycopg 3 driver)."""
        import psycopg

        name = f"fairtune_{os.getpid()}_{next(self._counter)}"
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=self.user, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{name}"


@contextlib.contextmanager
def temporary_postgres(max_connections: int = 200) -> Iterator[PostgresServer]:
    """Start a throwaway PostgreSQL server; stop and delete it on exit.

    Durability is off (``fsync``, synchronous commits): the data is thrown away anyway.

    Raises:
        FileNotFoundError: The server binaries are not installed.
        RuntimeError: The server did not start (its log is in the message).
    """
    binaries = postgres_binaries()
    if binaries is None:
        raise FileNotFoundError(
            "PostgreSQL server binaries (initdb, pg_ctl) not found: install the distribution's "
            "postgresql package (e.g. apt-get install postgresql)."
        )
    prefix: list[str] = []
    owner = None
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")  # created by the package; initdb refuses root
        prefix = ["runuser", "-u", "postgres", "--"]
    home = Path(tempfile.mkdtemp(prefix="fairtune-pg-"))
    try:
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
                   f"-c synchronous_commit=off -c full_page_writes=off "
                   f"-c max_connections={max_connections}")
        started = subprocess.run(
            [*prefix, str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options,
             "-w", "-t", "60", "start"],
            capture_output=True, text=True,
        )
        if started.returncode != 0:
            text = log.read_text() if log.exists() else ""
            raise RuntimeError(f"PostgreSQL did not start: {started.stderr}\n{text}")
        try:
            yield PostgresServer(port=port, user=user)
        finally:
            subprocess.run([*prefix, str(binaries / "pg_ctl"), "-D", str(data), "-m",
                            "immediate", "-w", "stop"], capture_output=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)
