"""Generic dataset helpers: data home, SHA-256, downloads (offline, with file:// URLs)."""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from fairtune.datasets import ChecksumError, FairDataset, get_data_home
from fairtune.datasets import _base
from fairtune.datasets._base import _fetch_remote, _sha256

PAYLOAD = b"id,value\n" + b"".join(f"{i},{i * i}\n".encode() for i in range(5000))
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "remote" / "payload.csv"
    path.parent.mkdir()
    path.write_bytes(PAYLOAD)
    return path


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_sha256_of_file(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(PAYLOAD)
    assert _sha256(path) == PAYLOAD_SHA
    path.write_bytes(b"")
    assert _sha256(path) == hashlib.sha256(b"").hexdigest()


def test_get_data_home_argument_env_and_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    explicit = tmp_path / "explicit" / "nested"
    assert get_data_home(explicit) == explicit.resolve()
    assert explicit.is_dir()

    monkeypatch.setenv("FAIRTUNE_DATA", str(tmp_path / "from_env"))
    assert get_data_home() == (tmp_path / "from_env").resolve()
    assert (tmp_path / "from_env").is_dir()

    monkeypatch.delenv("FAIRTUNE_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert get_data_home() == (tmp_path / "home" / "fairtune_data").resolve()
    assert get_data_home("~/elsewhere") == (tmp_path / "home" / "elsewhere").resolve()


def test_fetch_remote_downloads_and_verifies(source: Path, tmp_path: Path) -> None:
    dest = tmp_path / "cache" / "sub" / "payload.csv"
    result = _fetch_remote(source.as_uri(), dest, PAYLOAD_SHA, delay=0.0)
    assert result == dest
    assert dest.read_bytes() == PAYLOAD
    assert _files(dest.parent) == ["payload.csv"]  # no temporary file left behind


def test_fetch_remote_checksum_mismatch_leaves_no_file(source: Path, tmp_path: Path) -> None:
    dest = tmp_path / "cache" / "payload.csv"
    wrong = "0" * 64
    with pytest.raises(ChecksumError) as info:
        _fetch_remote(source.as_uri(), dest, wrong, delay=0.0)
    message = str(info.value)
    assert source.as_uri() in message
    assert wrong in message and PAYLOAD_SHA in message
    assert not dest.exists()
    assert _files(dest.parent) == []


def test_fetch_remote_mismatch_keeps_previous_valid_file(source: Path, tmp_path: Path) -> None:
    dest = tmp_path / "payload.csv"
    dest.write_bytes(b"previous")
    with pytest.raises(ChecksumError):
        _fetch_remote(source.as_uri(), dest, "f" * 64, delay=0.0)
    assert dest.read_bytes() == b"previous"
    assert _files(tmp_path) == sorted(["payload.csv", "remote"])


def test_fetch_remote_retries_network_errors(
    source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_urlopen = urllib.request.urlopen
    calls: list[str] = []

    def flaky(url: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(url)
        if len(calls) <= 2:
            raise urllib.error.URLError("connection reset")
        return real_urlopen(url, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", flaky)
    dest = tmp_path / "cache" / "payload.csv"
    _fetch_remote(source.as_uri(), dest, PAYLOAD_SHA, n_retries=2, delay=0.0)
    assert len(calls) == 3
    assert dest.read_bytes() == PAYLOAD
    assert _files(dest.parent) == ["payload.csv"]


def test_fetch_remote_gives_up_after_retries(tmp_path: Path) -> None:
    missing = (tmp_path / "does_not_exist.csv").as_uri()
    dest = tmp_path / "cache" / "payload.csv"
    with pytest.raises(OSError, match="after 3 attempt") as info:
        _fetch_remote(missing, dest, PAYLOAD_SHA, n_retries=2, delay=0.0)
    assert missing in str(info.value)
    assert not isinstance(info.value, ChecksumError)
    assert _files(dest.parent) == []


def test_fetch_remote_rejects_negative_retries(source: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="`n_retries` must be >= 0, but got n_retries=-1"):
        _fetch_remote(source.as_uri(), tmp_path / "x", PAYLOAD_SHA, n_retries=-1)


def test_fair_dataset_is_a_bunch_with_short_repr() -> None:
    data = pd.DataFrame({"a": [1, 2, 3]})
    target = pd.Series([0, 1, 1], name="y")
    bunch = FairDataset(
        data=data, target=target, sensitive_features=pd.Series(["u", "v", "u"], name="g"),
        frame=pd.concat([data, target], axis=1), feature_names=["a"], target_name="y",
        DESCR="d", name="toy",
    )
    assert bunch.data is bunch["data"]
    bunch.extra = 1
    assert bunch["extra"] == 1
    text = repr(bunch)
    assert text.startswith("FairDataset(") and "rows=3" in text and "'g'" in text
    assert len(text) < 200


def test_read_bundled_rejects_unknown_file() -> None:
    with pytest.raises(ValueError, match="`filename` must be one of"):
        _base._read_bundled("nope.gz")


def test_bundled_files_are_gzip_of_the_documented_bytes() -> None:
    # Every table entry has its file, and no bundled .gz escapes the table.
    files = {p.name for p in Path(_base._DATA_DIR).glob("*.gz")}
    assert files == set(_base._BUNDLED_SHA256)
    assert os.path.isfile(Path(_base._DATA_DIR) / "adult.names")
