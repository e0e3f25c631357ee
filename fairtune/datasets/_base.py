"""Shared pieces of the dataset loaders.

* :class:`FairDataset`, the bunch every loader returns;
* reading the bundled raw files (``fairtune/datasets/data/*.gz``): decompression, SHA-256
  verification against :data:`_BUNDLED_SHA256` once per process, and a per-process cache of the
  parsed frames;
* the known-issue warning, emitted once per process and dataset;
* the download cache (:func:`get_data_home`) and :func:`_fetch_remote` for the loaders that
  download their data instead of bundling it.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from sklearn.utils import Bunch

from fairtune._names import check_choice

DATA_HOME_ENV = "FAIRTUNE_DATA"
_DEFAULT_DATA_HOME = "~/fairtune_data"
_CHUNK_SIZE = 1 << 16

# Directory of the bundled raw files. Module attribute (not a constant folded into functions) so
# that tests can point it at a copy.
_DATA_DIR = Path(__file__).resolve().parent / "data"
_DESCR_DIR = Path(__file__).resolve().parent / "descr"

# SHA-256 of the *uncompressed* bytes of every bundled file (see data/SOURCES.md).
_BUNDLED_SHA256: dict[str, str] = {
    "adult.data.gz": "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
    "adult.test.gz": "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
    "german.data.gz": "b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871",
    "compas-scores-two-years.csv.gz": (
        "c451db85908b2f7fef1d83203bedf6b71ecda0d5af468d82ae62178f91d0cc7d"
    ),
}

# Per-process caches, keyed by the absolute path of the file (verified raw bytes) or by
# (data directory, key) (parsed frames). `_clear_cache` empties both.
_VERIFIED_BYTES: dict[str, bytes] = {}
_FRAMES: dict[tuple[str, str], pd.DataFrame] = {}
# Datasets whose known-issue warning was already shown in this process.
_WARNED: set[str] = set()


class ChecksumError(ValueError):
    """A file's SHA-256 differs from the expected one (corrupted or tampered file)."""


class FairtuneDatasetWarning(UserWarning):
    """A dataset has known fairness or data-quality issues; its ``DESCR`` explains them.

    Emitted once per process and dataset. Silence it with the standard warnings machinery::

        import warnings
        from fairtune.datasets import FairtuneDatasetWarning

        warnings.filterwarnings("ignore", category=FairtuneDatasetWarning)

    Attributes:
        issues: The known issues alone, without the advice on silencing the warning from
            Python (what the command line prints).
    """

    issues: str = ""


class FairDataset(Bunch):
    """A fairness dataset: features, a binary favourable-outcome label and sensitive features.

    A dictionary whose keys are also attributes (like scikit-learn's ``Bunch``), with the keys

    * ``data``: :class:`pandas.DataFrame` of the features, without the label. The columns the
      sensitive features are taken from stay in ``data`` (as in fairlearn's ``fetch_adult``); drop
      them yourself for a "fairness through unawareness" model. Categorical columns have the
      pandas ``category`` dtype, numeric columns a numeric dtype, so one-hot encoding works.
    * ``target``: :class:`pandas.Series` of ``int`` 0/1, where 1 is the favourable outcome.
    * ``sensitive_features``: :class:`pandas.Series` (one sensitive attribute) or
      :class:`pandas.DataFrame` (several, i.e. intersectional groups), aligned with ``data``.
    * ``frame``: ``data`` with the ``target`` column appended.
    * ``feature_names``: list of the columns of ``data``.
    * ``target_name``: name of the ``target`` series (says what 1 means).
    * ``DESCR``: description of the dataset, its provenance, license and known issues.
    * ``name``: short name of the dataset (``"adult"``, ``"german"``, ``"compas"``).
    * ``favourable`` (a file read by :func:`~fairtune.datasets.read_table`): the value of the
      file's target that became 1 (``positive=``, or 1), which a study records with its setup.

    Example:
        >>> from fairtune.datasets import load_adult
        >>> adult = load_adult(sensitive=("sex", "race"))
        >>> adult.data.shape, adult.target_name, list(adult.sensitive_features.columns)
        ((45222, 14), 'income_gt_50k', ['sex', 'race'])
    """

    data: pd.DataFrame
    target: pd.Series
    sensitive_features: pd.Series | pd.DataFrame
    frame: pd.DataFrame
    feature_names: list[str]
    target_name: str
    DESCR: str
    name: str

    def __repr__(self) -> str:
        keys = ["data", "target", "sensitive_features", "frame", "feature_names", "target_name"]
        if not all(k in self for k in keys):
            return f"FairDataset({dict.__repr__(self)})"
        sensitive = self["sensitive_features"]
        sens_names = (list(sensitive.columns) if isinstance(sensitive, pd.DataFrame)
                      else sensitive.name)
        return (
            f"FairDataset(name={self.get('name')!r}, rows={len(self['data'])}, "
            f"features={len(self['feature_names'])}, target_name={self['target_name']!r}, "
            f"sensitive={sens_names!r})"
        )


# --------------------------------------------------------------------------------------------
# Checksums and bundled files
# --------------------------------------------------------------------------------------------


def _sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _checksum_message(name: str | os.PathLike[str], expected: str, actual: str) -> str:
    return (
        f"SHA-256 checksum mismatch for {os.fspath(name)!s}: expected {expected}, "
        f"but got {actual}. The file is corrupted or was modified; reinstall fairtune "
        "(bundled files) or delete the file to download it again."
    )


def _read_bundled(filename: str) -> bytes:
    """Decompressed, SHA-256-verified bytes of a bundled file (cached per process)."""
    check_choice("filename", filename, sorted(_BUNDLED_SHA256))
    path = Path(_DATA_DIR) / filename
    key = str(path.resolve())
    if key in _VERIFIED_BYTES:
        return _VERIFIED_BYTES[key]
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        # A truncated or non-gzip file: report it with both checksums like any other corruption.
        # (`gzip.BadGzipFile` is an OSError.)
        raise ChecksumError(
            _checksum_message(path, _BUNDLED_SHA256[filename], f"<unreadable gzip: {e}>")
        ) from e
    actual = hashlib.sha256(raw).hexdigest()
    expected = _BUNDLED_SHA256[filename]
    if actual != expected:
        raise ChecksumError(_checksum_message(path, expected, actual))
    _VERIFIED_BYTES[key] = raw
    return raw


def _cached_frame(key: str, build: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """Build a frame once per process and data directory; return a copy each time."""
    cache_key = (str(Path(_DATA_DIR).resolve()), key)
    if cache_key not in _FRAMES:
        _FRAMES[cache_key] = build()
    return _FRAMES[cache_key].copy()


def _clear_cache() -> None:
    """Forget verified files, parsed frames and shown warnings (used by tests)."""
    _VERIFIED_BYTES.clear()
    _FRAMES.clear()
    _WARNED.clear()


def _load_descr(name: str) -> str:
    return (_DESCR_DIR / f"{name}.rst").read_text(encoding="utf-8")


_SILENCE = (
    "Silence with warnings.filterwarnings('ignore', category=FairtuneDatasetWarning)."
)


def _warn_once(dataset: str, message: str) -> None:
    if dataset in _WARNED:
        return
    warning = FairtuneDatasetWarning(f"{message} {_SILENCE}")
    warning.issues = message
    # stacklevel: _warn_once <- _load <- load_xxx <- user code.
    warnings.warn(warning, stacklevel=4)
    # Only after a successful warn: under an "error" filter every call raises consistently.
    _WARNED.add(dataset)


# --------------------------------------------------------------------------------------------
# Download cache (for loaders that download their data)
# --------------------------------------------------------------------------------------------


def get_data_home(data_home: str | os.PathLike[str] | None = None) -> Path:
    """Folder where downloaded datasets are cached, created if missing.

    Args:
        data_home: The folder. Defaults to the environment variable ``FAIRTUNE_DATA`` if set,
            else ``~/fairtune_data``. ``~`` is expanded.

    Returns:
        The folder as an absolute :class:`pathlib.Path`.
    """
    if data_home is None:
        data_home = os.environ.get(DATA_HOME_ENV, _DEFAULT_DATA_HOME)
    path = Path(data_home).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def _fetch_remote(
    url: str,
    dest: str | os.PathLike[str],
    sha256: str,
    *,
    n_retries: int = 3,
    delay: float = 1.0,
    timeout: float = 60.0,
    progress: bool = False,
) -> Path:
    """Download ``url`` to ``dest``, verifying its SHA-256; ``dest`` appears only when valid.

    The bytes stream into a temporary file in ``dest``'s folder (same file system, so the final
    :func:`os.replace` is atomic); the temporary file is removed on any failure, so an
    interrupted download never leaves a file that a loader would read. Network errors, and a
    transfer that ends before the ``Content-Length`` the server announced, are retried
    ``n_retries`` times with ``delay`` seconds between attempts. A retry asks for the missing
    bytes only (an HTTP ``Range`` request) and appends them when the server answers
    ``206 Partial Content``; any other answer restarts the file from its first byte (so does a
    ``416`` answer to the range). Other HTTP errors than 408, 416 and 429 are not retried. A
    checksum mismatch is not retried: it raises :class:`ChecksumError` naming the URL and both
    checksums.

    Args:
        url: Where to download from (any scheme urllib handles, ``file://`` included).
        dest: Final path of the file. Its folder is created if missing.
        sha256: Expected hex SHA-256 of the downloaded bytes.
        n_retries: Extra attempts after a network error. Defaults to 3.
        delay: Seconds to wait between attempts. Defaults to 1.0.
        timeout: Socket timeout in seconds of each attempt. Defaults to 60.0.
        progress: Whether to draw a progress bar on standard error. Defaults to False.

    Returns:
        ``dest`` as a :class:`pathlib.Path`.
    """
    if n_retries < 0:
        raise ValueError(f"`n_retries` must be >= 0, but got n_retries={n_retries}.")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    expected = sha256.lower()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    os.close(fd)
    bar = _ProgressBar(dest.name) if progress else None
    attempt = 0
    try:
        while True:
            try:
                _download_into(url, tmp_name, timeout=timeout, bar=bar)
                break
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                code = e.code if isinstance(e, urllib.error.HTTPError) else None
                if code == 416:  # the range asked for does not exist (any more): start over
                    open(tmp_name, "wb").close()
                if code not in (None, 408, 416, 429) or attempt >= n_retries:
                    raise OSError(
                        f"Could not download {url} after {attempt + 1} attempt(s): {e}"
                    ) from e
            attempt += 1
            time.sleep(delay)
        actual = _sha256(tmp_name)
        if actual != expected:
            raise ChecksumError(_checksum_message(url, expected, actual))
        os.replace(tmp_name, dest)
        return dest
    finally:
        if bar is not None:
            bar.close()
        Path(tmp_name).unlink(missing_ok=True)


class _IncompleteTransfer(ConnectionError):
    """The server closed the connection before sending the bytes it announced."""


def _download_into(
    url: str, path: str, *, timeout: float, bar: _ProgressBar | None
) -> None:
    """One attempt: resume ``path`` from its current size if the server honours ``Range``."""
    have = os.path.getsize(path)
    request = urllib.request.Request(url)
    if have > 0:
        request.add_header("Range", f"bytes={have}-")
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        resumed = have > 0 and getattr(resp, "status", None) == 206
        mode = "ab" if resumed else "wb"
        start = have if resumed else 0
        length = resp.headers.get("Content-Length") if hasattr(resp, "headers") else None
        total = start + int(length) if length is not None else None
        received = start
        if bar is not None:
            bar.update(received, total)
        with open(path, mode) as out:
            for chunk in iter(lambda: resp.read(_CHUNK_SIZE), b""):
                out.write(chunk)
                received += len(chunk)
                if bar is not None:
                    bar.update(received, total)
    # http.client returns b"" (no error) when the connection drops early: check the length.
    if total is not None and received < total:
        raise _IncompleteTransfer(f"transfer interrupted after {received} of {total} bytes")


class _ProgressBar:
    """A one-line text progress bar on standard error (no dependency)."""

    def __init__(self, label: str, *, width: int = 30) -> None:
        self._label = label
        self._width = width
        self._last = -1.0
        self._drawn = False

    def update(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        finished = total is not None and done >= total
        if not finished and now - self._last < 0.2:
            return
        self._last = now
        if total:
            frac = min(done / total, 1.0)
            filled = int(frac * self._width)
            text = (
                f"\r{self._label} [{'#' * filled}{'.' * (self._width - filled)}] "
                f"{100 * frac:5.1f}% {done / 1e6:.1f}/{total / 1e6:.1f} MB"
            )
        else:
            text = f"\r{self._label} {done / 1e6:.1f} MB"
        sys.stderr.write(text)
        sys.stderr.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()


__all__ = [
    "ChecksumError",
    "FairDataset",
    "FairtuneDatasetWarning",
    "get_data_home",
]
