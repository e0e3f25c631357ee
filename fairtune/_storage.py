"""State kept in an Optuna storage: the one set of helpers every sampler and the board use.

fairtune keeps its cooperative state (round plans, pending-point claims, board posts) in the
storage that the workers share, never in a sampler object. RDB storages cap a system attribute's
JSON text at 2048 characters: long texts are written as numbered chunks, their count last.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fairtune import _keys
from fairtune._names import arg
from fairtune._optuna_compat import (
    rdb_storage,
    storage_and_id,
    study_system_attrs,
    trial_id,
    trials_without_heartbeat,
)

if TYPE_CHECKING:
    import optuna
    from optuna.storages import BaseStorage

# RDB storages cap a system attribute's JSON-encoded value at 2048 characters (PostgreSQL enforces
# it; SQLite does not).
MAX_VALUE_LENGTH = 2000
_CHUNK_MARK = "chunks:"


def _chunks(text: str) -> list[str]:
    """Pieces of ``text`` whose JSON encodings (what an RDB storage stores, quotes and
    backslashes escaped) are at most ``MAX_VALUE_LENGTH`` characters long."""
    if len(json.dumps(text)) <= MAX_VALUE_LENGTH:
        return [text]
    chunks, start, size = [], 0, 0
    for i, char in enumerate(text):
        cost = len(json.dumps(char)) - 2
        if size + cost > MAX_VALUE_LENGTH - 2:
            chunks.append(text[start:i])
            start, size = i, 0
        size += cost
    chunks.append(text[start:])
    return chunks


def write_study_text(storage: BaseStorage, study_id: int, key: str, text: str) -> None:
    """Store ``text`` under the study system attribute ``key``, in chunks if it is long."""
    chunks = _chunks(text)
    if len(chunks) == 1 and not text.startswith(_CHUNK_MARK):
        storage.set_study_system_attr(study_id, key, text)
        return
    for j, chunk in enumerate(chunks):
        storage.set_study_system_attr(study_id, f"{key}:{j}", chunk)
    # The header goes last, so a reader never sees a header with missing chunks.
    storage.set_study_system_attr(study_id, key, f"{_CHUNK_MARK}{len(chunks)}")


def read_text(attrs: Mapping[str, Any], key: str) -> str | None:
    """The text stored under ``key`` by :func:`write_study_text` (None if there is none)."""
    value = attrs.get(key)
    if not isinstance(value, str) or not value.startswith(_CHUNK_MARK):
        return value
    n_chunks = int(value[len(_CHUNK_MARK) :])
    return "".join(attrs[f"{key}:{j}"] for j in range(n_chunks))


def trial_text_attrs(key: str, text: str) -> dict[str, Any]:
    """The trial system attributes that hold ``text`` under ``key``: chunks ``<key>:<j>``, then
    their count under ``<key>_chunks``."""
    chunks = _chunks(text)
    attrs: dict[str, Any] = {f"{key}:{j}": chunk for j, chunk in enumerate(chunks)}
    # A trial's text may be rewritten shorter than before: the count says which chunks are
    # current (left-over ones of a longer earlier text are ignored).
    attrs[f"{key}_chunks"] = len(chunks)
    return attrs


def write_trial_text(storage: BaseStorage, trial_id: int, key: str, text: str) -> None:
    """Store ``text`` under the trial system attribute ``key`` (see :func:`trial_text_attrs`);
    the count is written last."""
    for name, value in trial_text_attrs(key, text).items():
        storage.set_trial_system_attr(trial_id, name, value)


def read_trial_text(attrs: Mapping[str, Any], key: str) -> str | None:
    """The text stored under ``key`` by :func:`write_trial_text` (None if there is none)."""
    chunks = sorted(
        (int(k.rsplit(":", 1)[1]), v) for k, v in attrs.items()
        if k.startswith(key + ":") and k.rsplit(":", 1)[1].isdigit()
    )
    if not chunks:
        return None
    n_chunks = attrs.get(f"{key}_chunks")
    if n_chunks is not None:  # (records of older versions have no count: all chunks are current)
        chunks = chunks[: int(n_chunks)]
    return "".join(v for _, v in chunks)


# Here, not in the sampler's module: `fairtune report` reads it without importing torch.
TASK_CORRELATION_KEY = _keys.TASK_CORRELATION_KEY


def stored_task_correlation(study: optuna.Study) -> Any:
    """The task correlation (an n x n numpy array) an MTKBSampler last stored in ``study``, or
    None if none did."""
    import numpy as np

    raw = read_text(study_system_attrs(study), TASK_CORRELATION_KEY)
    return None if raw is None else np.array(json.loads(raw))


JOURNAL_PREFIX = "journal:"
GRPC_PREFIX = "grpc://"
"""``grpc://host:port``: Optuna's ``GrpcStorageProxy`` (``run_grpc_proxy_server``)."""


def records_heartbeats(url: str | None) -> bool:
    """Whether the storage ``url`` names can record trial heartbeats: RDB storages only."""
    return bool(url and not url.startswith((JOURNAL_PREFIX, GRPC_PREFIX)))


def _grpc_address(url: str) -> tuple[str, int]:
    host, _, port = url[len(GRPC_PREFIX):].rstrip("/").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"A gRPC proxy URL is grpc://<host>:<port>, but got {url!r}.")
    return host, int(port)

# Seconds an SQLite connection waits for another process's write lock before it fails with
# "database is locked" (sqlite3's default, 5 s, is short for workers and readers of one file on a
# busy machine).
SQLITE_BUSY_TIMEOUT = 60.0


def open_storage(
    url: str,
    *,
    heartbeat_interval: int | None = None,
    grace_period: int | None = None,
    max_retry: int | None = 0,
) -> BaseStorage | str:
    """The Optuna storage a URL names: ``journal:<path>`` a Journal file, ``grpc://host:port``
    Optuna's ``GrpcStorageProxy``, anything else an RDB URL (SQLite files opened with a busy
    timeout of :data:`SQLITE_BUSY_TIMEOUT` seconds).

    With ``heartbeat_interval`` (seconds; RDB storages only), a trial whose worker died ends as
    FAIL after ``grace_period`` seconds (Optuna's default: twice the interval) and is re-run up
    to ``max_retry`` times with the same parameters (None: without limit, 0: never).
    """
    import optuna

    if heartbeat_interval and not records_heartbeats(url):
        why = ("Optuna's gRPC proxy forwards none, so a dead worker's trial stays RUNNING"
               if url.startswith(GRPC_PREFIX) else "Journal storages have none")
        raise ValueError(f"A heartbeat needs an RDB storage (sqlite:///..., postgresql://...): "
                         f"{why}, but got a heartbeat interval for {url!r}.")
    if url.startswith(JOURNAL_PREFIX):
        path = url[len(JOURNAL_PREFIX) :]
        if not path:
            raise ValueError(f"A Journal storage URL is journal:<file>, but got {url!r}.")
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(path))
    engine_kwargs = (
        {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT}} if url.startswith("sqlite") else None
    )
    if not heartbeat_interval and not url.startswith(GRPC_PREFIX):
        return url if engine_kwargs is None else optuna.storages.RDBStorage(
            url, engine_kwargs=engine_kwargs
        )
    with warnings.catch_warnings():  # experimental in Optuna; fairtune uses them by design
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if url.startswith(GRPC_PREFIX):
            host, port = _grpc_address(url)
            return optuna.storages.GrpcStorageProxy(host=host, port=port)
        callback = (
            None if max_retry == 0
            else optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=max_retry)
        )
        return optuna.storages.RDBStorage(
            url, engine_kwargs=engine_kwargs, heartbeat_interval=heartbeat_interval,
            grace_period=grace_period, heartbeat_stale_trial_callback=callback,
        )


CREATE_ATTEMPTS = 5


def is_creation_race(error: BaseException) -> bool:
    """Whether ``error`` is what a process gets when another one creates the same tables or
    study at the same moment (SQLite's locks and unique violations, PostgreSQL's "already
    exists")."""
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    if isinstance(error, (IntegrityError, OperationalError)):
        return True
    return isinstance(error, ProgrammingError) and "already exists" in str(error)


def create_or_load_study(
    create: Callable[[], optuna.Study], *, attempts: int = CREATE_ATTEMPTS
) -> optuna.Study:
    """``create()`` (an ``optuna.create_study(..., load_if_exists=True)`` call), retried when
    processes started together on a new database race to create it (:func:`is_creation_race`):
    the tables and the study then exist, and retrying loads them."""
    for attempt in range(attempts - 1):
        try:
            return create()
        except Exception as error:
            if not is_creation_race(error):
                raise
            time.sleep(0.2 * (attempt + 1))
    return create()


def fail_stale_trials(study: optuna.Study) -> list[int]:
    """Fail the RUNNING trials whose worker is gone, as Optuna does, and those it misses.

    A trial whose worker died before its first heartbeat has none and would stay RUNNING
    forever; it is failed once it started more than the grace period ago (and the storage's
    stale-trial callback run for it). Without a heartbeat configured nothing is touched.

    Returns:
        The numbers of the trials failed here (those without any heartbeat).
    """
    import copy
    import datetime

    import optuna
    from optuna.trial import TrialState

    storage = storage_and_id(study)[0]
    rdb = rdb_storage(storage)
    interval = storage.get_heartbeat_interval() if rdb is not None else None  # type: ignore[attr-defined]
    if not interval:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    grace = datetime.timedelta(seconds=getattr(rdb, "grace_period", None) or 2 * interval)
    now = datetime.datetime.now()
    old = [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
           if t.datetime_start is not None and now - t.datetime_start > grace]
    silent = trials_without_heartbeat(storage, [trial_id(t) for t in old])
    failed = []
    for trial in (t for t in old if trial_id(t) in silent):
        try:
            if storage.set_trial_state_values(trial_id(trial), state=TrialState.FAIL):
                failed.append(trial)
        except optuna.exceptions.UpdateFinishedTrialError:
            pass  # another worker finished or failed it meanwhile
    callback = storage.get_heartbeat_stale_trial_callback()  # type: ignore[attr-defined]
    if callback is not None:
        for trial in failed:
            callback(study, copy.deepcopy(storage.get_trial(trial_id(trial))))
    return [t.number for t in failed]


# -- opening and checking a storage named by a URL ------------------------------------------------

SQLITE_HEADER = b"SQLite format 3\x00"


def create_or_load_named_study(
    name: str, storage: str | None, *, heartbeat: int = 0, max_retry: int = 0,
    directions: list[Literal["minimize", "maximize"]] | None = None,
) -> Any:
    """``optuna.create_study(..., load_if_exists=True)`` on ``storage`` opened by
    :func:`open_storage` (``heartbeat`` where it records one), retried on a creation race."""
    import optuna

    def create() -> Any:
        opened = None if storage is None else open_storage(
            storage, heartbeat_interval=heartbeat if records_heartbeats(storage) else None,
            max_retry=max_retry)
        return optuna.create_study(
            study_name=name, storage=opened, directions=directions or ["maximize"],
            load_if_exists=True,
        )

    return create_or_load_study(create)


def load_named_study(url: str, name: str | None = None) -> Any:
    """The study ``name`` of the storage ``url``, or its only study when ``name`` is None.

    Raises:
        ValueError: If ``name`` is None and the storage holds no study or several.
        RuntimeError: If the storage holds no study named ``name``.
    """
    import optuna

    storage = open_storage(url)
    if name is None:
        names = optuna.get_all_study_names(storage)
        if len(names) != 1:
            raise ValueError(
                f"{arg('study_name')} is needed: the storage holds {len(names)} studies {names}."
            )
        name = names[0]
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        raise RuntimeError(f"no study named {name!r} in {url}.") from None


def can_create_in(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (tried: permissions, read-only mounts)."""
    if not os.access(folder, os.W_OK):
        return False
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def in_memory(url: str) -> bool:
    """Whether ``url`` is a database no other process can read (SQLite in memory)."""
    url = url.strip()
    if not url.lower().startswith("sqlite:"):
        return False
    path = url.split(":", 1)[1].lstrip("/")  # "sqlite://" -> "", "sqlite:///:memory:" -> ...
    return path == "" or path.startswith(":memory:") or "mode=memory" in url


def storage_file(url: str | None) -> Path | None:
    """The file a storage URL keeps its studies in (an SQLite database, a Journal file), or
    None (a database server, memory, or an SQLite URI with options of its own)."""
    if not url or url.startswith(GRPC_PREFIX):
        return None
    if url.startswith(JOURNAL_PREFIX):
        return Path(url[len(JOURNAL_PREFIX):]).expanduser() if url[len(JOURNAL_PREFIX):] else None
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:") or (
            parsed.query.get("uri") or parsed.database.startswith("file:")):
        return None
    return Path(parsed.database).expanduser()


def _same_file(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)  # a hard link
    except OSError:
        return False


def check_storage_url(url: str | None, *, create: bool, flag: str = "`storage`",
                      outputs: Mapping[str, str | None] | None = None) -> None:
    """Check an Optuna storage URL before Optuna opens (and maybe creates) it.

    Args:
        url: The storage URL; None is an in-memory study.
        create: Whether a new SQLite file may be created (``tune``); ``report`` only reads.
        flag: How the messages name the URL (the command line's ``"--storage"``).
        outputs: The files the run writes, by how messages name them (``{"--html": path}``),
            none of which may be the storage's file.

    Raises:
        ValueError: A malformed URL, or an output that is the storage's file.
        RuntimeError: An SQLite file that cannot be used (missing for ``report``, unreadable,
            not a database, damaged, or without a study).
    """
    if url is None:
        return
    stored_in = storage_file(url)
    for name, output in (outputs or {}).items():
        if output and stored_in is not None and _same_file(Path(output).expanduser(), stored_in):
            raise ValueError(
                f"{name} must be another file than the study's storage, which writing it would "
                f"destroy, but got {name} {output!r} and {flag} {url!r} (both "
                f"{str(stored_in.resolve())!r}).")
    if url.startswith(GRPC_PREFIX):
        try:
            _grpc_address(url)
        except ValueError:
            raise ValueError(f"{flag} must be grpc://<host>:<port> for a gRPC proxy, but got "
                             f"{url!r}.") from None
        return
    where = f"{flag} {url!r}"
    if url.startswith(JOURNAL_PREFIX):
        if stored_in is None:
            raise ValueError(f"{flag} must be journal:<file> for a Journal file, but got {url!r}.")
        check_storage_file(stored_in, where, create=create)
        return
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    examples = "e.g. sqlite:///fairtune.db or postgresql://user:password@host/database"
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ValueError(f"{flag} must be a database URL ({examples}), but got {url!r}.") from None
    try:
        parsed.get_dialect()
    except NoSuchModuleError:
        raise ValueError(
            f"{flag} {url!r} has an unknown scheme {parsed.drivername!r}; use a database "
            f"URL, {examples}."
        ) from None
    path = stored_in  # None: a server, memory, or an SQLite URI with options SQLite checks
    if path is None or not check_storage_file(path, where, create=create):
        return  # (or a new file, created by `tune`)
    with open(path, "rb") as f:
        header = f.read(len(SQLITE_HEADER))
    if header and header != SQLITE_HEADER:
        raise RuntimeError(f"{where}: {str(path)!r} is not an SQLite database.")
    tables = sqlite_tables(path, where)
    if not create and "studies" not in tables:
        raise RuntimeError(f"{where}: {str(path)!r} holds no Optuna study.")


def check_storage_file(path: Path, where: str, *, create: bool) -> bool:
    """Whether the storage file exists; raises if it cannot be used (or created, with create).
    """
    if not path.exists():
        if not create:
            raise RuntimeError(f"{where}: no such file {str(path)!r}.")
        folder = path.resolve().parent
        if not folder.is_dir():
            raise RuntimeError(f"{where}: no folder {str(folder)!r} to create the file in.")
        if not can_create_in(folder):
            raise RuntimeError(f"{where}: the folder {str(folder)!r} is read-only.")
        return False
    if path.is_dir():
        raise RuntimeError(f"{where}: {str(path)!r} is a folder, not a file.")
    if not os.access(path, os.R_OK):
        raise RuntimeError(f"{where}: {str(path)!r} cannot be read (permissions).")
    if create and not (os.access(path, os.W_OK) and can_create_in(path.resolve().parent)):
        raise RuntimeError(
            f"{where}: {str(path)!r} is read-only (the storage writes the file and a lock or "
            "journal file beside it); `fairtune report` can read it."
        )
    return True


def sqlite_tables(path: Path, where: str) -> set[str]:
    """The tables of an SQLite file, opened read-only; a damaged file is an error."""
    import sqlite3

    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            check = connection.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise sqlite3.DatabaseError(str(check[0] if check else "no answer"))
            rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            return {row[0] for row in rows}
        finally:
            connection.close()
    except sqlite3.DatabaseError as e:
        raise RuntimeError(f"{where}: {str(path)!r} is damaged ({e}).") from None


def reported_error(error: BaseException) -> BaseException:
    """The error to report for ``error``: an assertion raised while another error was being
    handled stands for that error (Optuna 5.0.0's ``assert False, "Should not reach."`` after a
    storage error on a finished trial)."""
    seen: set[int] = set()
    while (isinstance(error, AssertionError) and error.__context__ is not None
           and id(error) not in seen):
        seen.add(id(error))
        error = error.__context__
    return error


@contextlib.contextmanager
def database_errors(flag: str, url: str | None) -> Iterator[None]:
    """Turn the database's errors (SQLAlchemy, also behind an assertion of Optuna's that they
    caused: see :func:`reported_error`) into one line that names the storage (``flag``)."""
    try:
        yield
    except Exception as raised:
        error = reported_error(raised)
        if type(error).__module__.startswith("grpc"):  # Optuna's gRPC proxy unreachable
            code = getattr(error, "code", lambda: None)()
            details = getattr(error, "details", lambda: "")() or str(error)
            raise RuntimeError(
                f"{flag} {url!r}: the gRPC storage proxy did not answer "
                f"({getattr(code, 'name', code)}: {' '.join(str(details).split())}); start "
                "it (optuna.storages.run_grpc_proxy_server) or correct the address.") from None
        if not type(error).__module__.startswith("sqlalchemy"):
            raise
        cause = getattr(error, "orig", None) or error
        reason = (" ".join(str(cause).split()) or type(cause).__name__).split(" [SQL:")[0]
        raise RuntimeError(f"{flag} {url!r}: the database failed: {reason}") from None
